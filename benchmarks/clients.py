"""Client throughput: records per second produced (acks=all, 3 replicas) and consumed back, in one run.

    python benchmarks/clients.py [--records N] [--tcp-records N] [--rounds N]

Measured on Trio's real clock against a three-broker `Cluster` with one partition replicated three times:

- in-process: one `send()` per record (100-byte values), then `poll()` until all are back;
- TCP on loopback, batched (batch.size 1 MiB, linger.ms 5): the same, through the brokers' NATIVE listeners;
  the targets are 300,000 records/s produced and 500,000 records/s consumed;
- mockafka-py, a mock of confluent-kafka's API, driven the same way (produce per record, poll back), if it is
  installed (the `bench` extra installs it); it is a dictionary behind a client API, with no brokers,
  replication or network, so it is the floor of what "a Kafka in the test process" costs. The target is
  kafkalite in-process at 1.0x its rate or better, each way.

The in-process and mockafka-py runs alternate for `--rounds` rounds, each kafkalite round on a fresh cluster and
each mockafka-py round after it has shut down, and each side's median round counts: the speed of a shared machine
drifts by a third within a minute, and alternating lets both sides meet the same drift. The median of the
side-by-side rounds' ratios is printed too, as a measure of how much that drift still moved the result. The TCP
run takes the median of as many rounds, each on a fresh cluster too.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any, cast

import trio
from arguments import at_least

from kafkalite.client import Consumer, Producer, TopicPartition
from kafkalite.cluster import Cluster

VALUE = bytes(100)
TARGETS = {("tcp", "produce"): 300_000, ("tcp", "consume"): 500_000}
DIRECTIONS = ("produce", "consume")


async def produce_and_consume(bootstrap: Any, topic: str, records: int, producer_config: dict[str, Any]
                              ) -> tuple[float, float]:
    """(produce seconds, consume seconds) for `records` records sent one send() at a time and polled back."""
    async with Producer(bootstrap, {"acks": "all", **producer_config}) as producer:
        started = time.perf_counter()
        handle = None
        for _ in range(records):
            handle = await producer.send(topic, VALUE, partition=0)
        await producer.flush()
        produce_s = time.perf_counter() - started
        assert handle is not None and (await handle).offset == records - 1
    async with Consumer(bootstrap, {"auto.offset.reset": "earliest", "max.poll.records": 10_000}) as consumer:
        consumer.assign([TopicPartition(topic, 0)])
        started = time.perf_counter()
        received = 0
        while received < records:
            received += len(await consumer.poll(10))
        consume_s = time.perf_counter() - started
    return produce_s, consume_s


def mockafka_run(records: int) -> tuple[float, float] | None:
    try:
        from confluent_kafka.admin import NewTopic  # type: ignore[import-untyped]
        from mockafka import FakeAdminClientImpl, FakeConsumer, FakeProducer  # type: ignore[import-untyped]
    except ImportError:
        return None
    FakeAdminClientImpl(clean=True).create_topics([NewTopic("bench", num_partitions=1)])
    producer = FakeProducer()
    started = time.perf_counter()
    for _ in range(records):
        producer.produce("bench", VALUE, partition=0)
    producer.flush()
    produce_s = time.perf_counter() - started
    consumer = FakeConsumer()
    consumer.subscribe(["bench"])
    started = time.perf_counter()
    received = 0
    while received < records:
        received += consumer.poll(1) is not None
    return produce_s, time.perf_counter() - started


async def tcp_bootstrap(cluster: Cluster) -> str | None:
    metadata = await cluster.metadata(cluster.live_broker_ids[0])
    servers = [f"{broker.host}:{broker.port}" for broker in metadata.brokers if broker.port > 0]
    return ",".join(servers) or None


async def in_process_round(records: int) -> tuple[float, float]:
    async with Cluster(brokers=3) as cluster:
        await cluster.create_topic("inprocess", partitions=1, replication_factor=3)
        return await produce_and_consume(cluster, "inprocess", records, {})


async def tcp_round(records: int) -> tuple[float, float] | None:
    async with Cluster(brokers=3) as cluster:
        bootstrap = await tcp_bootstrap(cluster)
        if bootstrap is None:
            return None
        await cluster.create_topic("tcp", partitions=1, replication_factor=3)
        return await produce_and_consume(bootstrap, "tcp", records,
                                         {"batch.size": 1 << 20, "max.request.size": 1 << 22})


def median(rounds: list[tuple[float, float]]) -> tuple[float, float]:
    return statistics.median(produce for produce, _ in rounds), statistics.median(consume for _, consume in rounds)


def table(rows: list[tuple[str, str, int, float]]) -> str:
    lines = [f"{'client':<12} {'direction':<9} {'records':>9} {'seconds':>8} {'records/s':>11}  target"]
    for client, direction, records, seconds in rows:
        target = TARGETS.get((client, direction))
        verdict = "" if target is None else f">= {target:,} {'ok' if records / seconds >= target else 'MISSED'}"
        lines.append(f"{client:<12} {direction:<9} {records:>9,} {seconds:>8.3f} {records / seconds:>11,.0f}  {verdict}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=at_least(1), default=100_000, help="records for the in-process run")
    parser.add_argument("--tcp-records", type=at_least(1), default=500_000, help="records for the TCP run")
    parser.add_argument("--rounds", type=at_least(1), default=7, help="alternating in-process and mockafka-py rounds")
    args = parser.parse_args(argv)
    mine: list[tuple[float, float]] = []
    theirs: list[tuple[float, float]] = []
    for _ in range(args.rounds):
        mine.append(trio.run(in_process_round, args.records))
        peer = mockafka_run(args.records)  # the same count, so both pay for the same amount of state
        if peer is not None:
            theirs.append(peer)
    rows = [("in-process", direction, args.records, seconds) for direction, seconds in zip(DIRECTIONS, median(mine))]
    tcp = [trio.run(tcp_round, args.tcp_records) for _ in range(args.rounds)]
    if None in tcp:
        print("TCP: the brokers advertise no NATIVE listener; skipped")
    else:
        rows += [("tcp", direction, args.tcp_records, seconds)
                 for direction, seconds in zip(DIRECTIONS, median(cast("list[tuple[float, float]]", tcp)))]
    if not theirs:
        print("mockafka-py not installed (pip install -e '.[bench]' installs it)")
    else:
        rows += [("mockafka-py", direction, args.records, seconds)
                 for direction, seconds in zip(DIRECTIONS, median(theirs))]
        for index, (direction, my_s, their_s) in enumerate(zip(DIRECTIONS, median(mine), median(theirs))):
            paired = statistics.median(peer[index] / own[index] for own, peer in zip(mine, theirs))
            print(f"in-process {direction}: {their_s / my_s:.2f}x mockafka-py's rate, median round against median "
                  f"round of {len(mine)} each (target >= 1.0x); median of the side-by-side rounds {paired:.2f}x")
    print(table(rows))


if __name__ == "__main__":
    main()
