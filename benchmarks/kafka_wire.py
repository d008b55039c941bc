"""The KAFKA listener against the NATIVE one: records/s produced (acks=all, 3 replicas) and consumed, one run.

    python benchmarks/kafka_wire.py [--records N] [--rounds N]

A three-broker `EmbeddedCluster`, one partition replicated three times, 100-byte values, batched on both sides
(batch.size 1 MiB, linger.ms 5):
- kafka: confluent-kafka (librdkafka) produces one `produce()` per record and flushes, then consumes them back
  with `consume()` from an assigned partition, over the brokers' KAFKA listeners (fetch.queue.backoff.ms 10 ms,
  see `PREFETCH`);
- native: kafkalite's own client does the same through the NATIVE listeners (`benchmarks/clients.py`'s loop).

The two alternate, each round on a fresh cluster, so both meet the same drift of a shared machine; the median of
each side's rounds is reported, with the median of the side-by-side ratios. Targets: 300,000 records/s produced
and 500,000 consumed with confluent-kafka, and the KAFKA listener at no less than 80% of the native one.
"""

from __future__ import annotations

import argparse
import statistics
import time

import trio
from arguments import at_least
from clients import VALUE, produce_and_consume
from confluent_kafka import Consumer, Producer, TopicPartition

from kafkalite.embedded import EmbeddedCluster

TOPIC = "bench"
TARGETS = {"produce": 300_000, "consume": 500_000}
DIRECTIONS = ("produce", "consume")
BATCHING = {"batch.size": 1 << 20, "linger.ms": 5}
PREFETCH = {"fetch.queue.backoff.ms": 10}
"""librdkafka stops fetching while its local queue holds more than queued.min.messages (100,000) and looks again
only after fetch.queue.backoff.ms, 1 s by default: three 10 MB fetches fill that queue, so with the default a
300,000-record round spends most of its time waiting a second that the application had long drained the queue
in. librdkafka suggests lowering it for throughput; it is a client setting, the same against Apache Kafka."""


def kafka_round(cluster: EmbeddedCluster, records: int) -> tuple[float, float]:
    """(produce seconds, consume seconds) with confluent-kafka over the KAFKA listeners."""
    bootstrap = cluster.kafka_bootstrap_servers
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "queue.buffering.max.messages": 2_000_000,
                         "queue.buffering.max.kbytes": 1 << 21, **BATCHING})
    started = time.perf_counter()
    for i in range(records):
        producer.produce(TOPIC, VALUE, partition=0)
        if i % 10_000 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0
    produce_s = time.perf_counter() - started
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit": False,
                         "fetch.max.bytes": 50 << 20, "max.partition.fetch.bytes": 10 << 20, **PREFETCH})
    consumer.assign([TopicPartition(TOPIC, 0, 0)])
    started = time.perf_counter()
    received = 0
    while received < records:
        # no more than are left: consume() waits its whole timeout for a count that never comes
        messages = consumer.consume(min(10_000, records - received), 10)
        assert messages and messages[-1].error() is None
        received += len(messages)
    consume_s = time.perf_counter() - started
    consumer.close()
    return produce_s, consume_s


def native_round(cluster: EmbeddedCluster, records: int) -> tuple[float, float]:
    """(produce seconds, consume seconds) with kafkalite's client over the NATIVE listeners."""
    return trio.run(produce_and_consume, cluster.bootstrap_servers, TOPIC, records,
                    {**BATCHING, "max.request.size": 1 << 22})


def one_round(side: str, records: int) -> tuple[float, float]:
    with EmbeddedCluster(3) as cluster:
        cluster.create_topic(TOPIC, 1, 3)
        return (kafka_round if side == "kafka" else native_round)(cluster, records)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=at_least(1), default=300_000, help="records per round")
    parser.add_argument("--rounds", type=at_least(1), default=5, help="alternating rounds per side")
    args = parser.parse_args(argv)
    rounds: dict[str, list[tuple[float, float]]] = {"kafka": [], "native": []}
    for _ in range(args.rounds):
        for side in rounds:
            rounds[side].append(one_round(side, args.records))
    print(f"{'listener':<8} {'direction':<9} {'records/s':>11}  target")
    for index, direction in enumerate(DIRECTIONS):
        for side, results in rounds.items():
            rate = args.records / statistics.median(r[index] for r in results)
            target = TARGETS[direction] if side == "kafka" else None
            verdict = "" if target is None else f">= {target:,} {'ok' if rate >= target else 'MISSED'}"
            print(f"{side:<8} {direction:<9} {rate:>11,.0f}  {verdict}")
        ratio = statistics.median(native[index] / kafka[index]
                                  for kafka, native in zip(rounds["kafka"], rounds["native"]))
        print(f"KAFKA/NATIVE {direction}: {ratio:.2f}x, median of {len(rounds['kafka'])} side-by-side rounds "
              f"(target >= 0.80x)")


if __name__ == "__main__":
    main()
