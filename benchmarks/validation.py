"""What checking every produced record costs the leader (Kafka's LogValidator; kafkalite's `validate(deep=True)`).

    python benchmarks/validation.py [--records N] [--rounds N]

Two measurements, both on the batches kafkalite's producer builds (100-byte values, no key, batch.size 16 KiB,
so 153 records a batch):

- per record: the leader's old check (the crc alone), decoding the payload once (`rows()`), and the full check
  (crc, decode, count, shapes, types, headers, timestamps), each the median of `--rounds` timeit runs;
- end to end: one `send()` per record in-process to a 3-broker cluster with acks=all, then flush, with the full
  check and with the crc-only check, in alternating rounds on fresh clusters; the median rate of each side and
  the median of the paired ratios. It leaves out the consumer and TCP: it is the produce path a test takes.
"""

from __future__ import annotations

import argparse
import statistics
import time
import timeit
from collections.abc import Iterator
from contextlib import contextmanager

import trio
from arguments import at_least

from kafkalite.client import Producer
from kafkalite.cluster import Cluster
from kafkalite.common.records import RecordBatch

VALUE = bytes(100)
RECORDS_PER_BATCH = 153


def per_record_ns(rounds: int) -> dict[str, float]:
    batch = RecordBatch.from_rows([(0, None, VALUE, ())] * RECORDS_PER_BATCH, default_timestamp=1_700_000_000_000)
    checks = {"crc only": lambda: batch.validate(), "decode (rows)": batch.rows,
              "full check": lambda: batch.validate(deep=True)}
    number = 2000
    return {name: statistics.median(timeit.repeat(check, number=number, repeat=rounds)) / number
            / RECORDS_PER_BATCH * 1e9 for name, check in checks.items()}


@contextmanager
def crc_only() -> Iterator[None]:
    """The leader as it was before records were checked: `validate(deep=True)` checks the crc alone."""
    original = RecordBatch.validate

    def validate(self: RecordBatch, *, deep: bool = False) -> None:
        original(self)

    RecordBatch.validate = validate  # type: ignore[method-assign]
    try:
        yield
    finally:
        RecordBatch.validate = original  # type: ignore[method-assign]


async def produce_rate(records: int) -> float:
    async with Cluster(brokers=3, config={"auto.leader.rebalance.enable": False}) as cluster:
        await cluster.create_topic("t", partitions=1, replication_factor=3)
        async with Producer(cluster, {"acks": "all"}) as producer:
            started = time.perf_counter()
            for _ in range(records):
                await producer.send("t", VALUE, partition=0)
            await producer.flush()
            return records / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=at_least(1), default=100_000)
    parser.add_argument("--rounds", type=at_least(1), default=7)
    args = parser.parse_args()
    print(f"{'per record':<16}{'ns':>8}")
    for name, ns in per_record_ns(args.rounds).items():
        print(f"{name:<16}{ns:>8.1f}")
    checked, unchecked = [], []
    for _ in range(args.rounds):
        checked.append(trio.run(produce_rate, args.records))
        with crc_only():
            unchecked.append(trio.run(produce_rate, args.records))
    ratios = [c / u for c, u in zip(checked, unchecked)]
    print(f"\nin-process produce, acks=all, {args.records} records, median of {args.rounds} alternating rounds")
    print(f"{'full check':<16}{statistics.median(checked):>12,.0f} records/s")
    print(f"{'crc only':<16}{statistics.median(unchecked):>12,.0f} records/s")
    print(f"{'ratio':<16}{statistics.median(ratios):>12.3f} (median of paired rounds)")


if __name__ == "__main__":
    main()
