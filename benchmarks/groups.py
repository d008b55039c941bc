"""Consumer groups: how long a group takes to form and to rebalance, and what group membership costs a consumer.

    python benchmarks/groups.py [--records N] [--rounds N] [--heartbeat-ms N]

Measured on Trio's real clock against a three-broker `Cluster` (`__consumer_offsets` already created, as it is
after a cluster's first group) with a topic of 6 partitions, 3 replicas each:

- form: wall time from 3 consumers calling `subscribe()` to all three holding disjoint assignments that cover
  the 6 partitions (target: under 100 ms);
- rebalance: wall time from one of the three closing (LeaveGroup) to the other two covering all 6 partitions;
  the others learn of it from their next heartbeat, so this is about one heartbeat.interval.ms (Kafka's default
  3000, `--heartbeat-ms` to change it), as with Kafka's consumers;
- throughput: records per second polled by one consumer reading all 6 partitions from the beginning, as a group
  member (`subscribe`, auto-commit on, heartbeating) against the same consumer with `assign()` (target: the
  group within 10% of assign), counted from the first records returned, so that neither side's start-up (a
  join, or looking up positions) is in the rate. The two alternate for `--rounds` rounds on the same
  cluster, so both meet the same drift of a shared machine; the median of the side-by-side ratios is printed
  with the medians of each side. Each side starts after a full `gc.collect()`: a round of 60,000 records lasts
  about 50 ms, and a full collection of this process (the cluster is in it) takes 15 to 30 ms here, so one
  left due by what ran before (the group formation's consumers, or the other side) fell on whichever side came
  next. Collected first, each side pays for the collections its own records bring about (about one each).
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
from typing import Any

import trio
from arguments import at_least

from kafkalite.client import Consumer, Producer, TopicPartition
from kafkalite.cluster import Cluster

TOPIC = "bench-groups"
PARTITIONS = 6
ALL = {TopicPartition(TOPIC, p) for p in range(PARTITIONS)}
VALUE = bytes(100)
MAX_POLL_RECORDS = 10_000


def covering(consumers: list[Consumer]) -> bool:
    assignments = [c.assignment() for c in consumers]
    return all(assignments) and sum(map(len, assignments)) == PARTITIONS and set().union(*assignments) == ALL


async def poll_until(consumers: list[Consumer], done: Any) -> None:
    while not done():
        async with trio.open_nursery() as nursery:
            for consumer in consumers:
                nursery.start_soon(consumer.poll, 0.01)


HEARTBEAT_MS = [3000]


def member(cluster: Cluster, group: str, name: str, **config: Any) -> Consumer:
    return Consumer(cluster, {"group.id": group, "client.id": name, "auto.offset.reset": "earliest",
                              "heartbeat.interval.ms": HEARTBEAT_MS[0], **config})


async def form_and_rebalance(cluster: Cluster, group: str) -> tuple[float, float]:
    """(seconds until 3 subscribers hold a covering assignment, seconds to rebalance after one leaves)."""
    async with member(cluster, group, "a") as a, member(cluster, group, "b") as b:
        async with member(cluster, group, "c") as c:
            started = time.perf_counter()
            for consumer in (a, b, c):
                consumer.subscribe([TOPIC])
            await poll_until([a, b, c], lambda: covering([a, b, c]))
            form_s = time.perf_counter() - started
            started = time.perf_counter()
        await poll_until([a, b], lambda: covering([a, b]))
        return form_s, time.perf_counter() - started


async def consume_all(cluster: Cluster, records: int, group: str | None) -> float:
    """Records per second for one consumer reading every partition from the start."""
    config: dict[str, Any] = {"auto.offset.reset": "earliest", "max.poll.records": MAX_POLL_RECORDS}
    if group is not None:
        config["group.id"] = group
    gc.collect()
    async with Consumer(cluster, config) as consumer:
        if group is None:
            consumer.assign(sorted(ALL))
        else:
            consumer.subscribe([TOPIC])
        received = 0
        while not received:  # joining, or resetting positions: both sides' start-up is left out of the rate
            received = len(await consumer.poll(10))
        started = time.perf_counter()
        counted = 0
        while received + counted < records:
            counted += len(await consumer.poll(10))
        return counted / (time.perf_counter() - started)


async def run(records: int, rounds: int) -> None:
    async with Cluster(brokers=3, config={"offsets.topic.num.partitions": 50}, seed=1) as cluster:
        await cluster.create_topic(TOPIC, partitions=PARTITIONS, replication_factor=3)
        await form_and_rebalance(cluster, "warm-up")  # creates __consumer_offsets, as a cluster's first group does
        async with Producer(cluster, {"acks": "all", "linger.ms": 5, "batch.size": 1 << 20}) as producer:
            for i in range(records):
                await producer.send(TOPIC, VALUE, partition=i % PARTITIONS)
            await producer.flush()
        forms, rebalances, grouped, assigned = [], [], [], []
        for index in range(rounds):
            form_s, rebalance_s = await form_and_rebalance(cluster, f"form-{index}")
            forms.append(form_s)
            rebalances.append(rebalance_s)
            grouped.append(await consume_all(cluster, records, f"throughput-{index}"))
            assigned.append(await consume_all(cluster, records, None))
    ratio = statistics.median(g / a for g, a in zip(grouped, assigned))
    print(f"{'measure':<38}{'median':>14}{'best':>14}")
    print(f"{'3 consumers holding assignments (ms)':<38}{statistics.median(forms) * 1000:>14.1f}"
          f"{min(forms) * 1000:>14.1f}   target < 100")
    print(f"{'rebalance after one leaves (ms)':<38}{statistics.median(rebalances) * 1000:>14.1f}"
          f"{min(rebalances) * 1000:>14.1f}")
    print(f"{'group consume (records/s)':<38}{statistics.median(grouped):>14,.0f}{max(grouped):>14,.0f}")
    print(f"{'assign consume (records/s)':<38}{statistics.median(assigned):>14,.0f}{max(assigned):>14,.0f}")
    print(f"group / assign, median of side-by-side rounds: {ratio:.2f}x (target >= 0.90x)")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=at_least(MAX_POLL_RECORDS + 1), default=60_000,
                        help="records in the topic (default 60000; more than max.poll.records, 10000, as the "
                             "first poll is left out of the rate)")
    parser.add_argument("--rounds", type=at_least(1), default=5, help="alternating rounds (default 5)")
    parser.add_argument("--heartbeat-ms", type=at_least(1), default=3000, help="the members' heartbeat.interval.ms "
                                                                                "(default 3000, Kafka's)")
    args = parser.parse_args(argv)
    HEARTBEAT_MS[0] = args.heartbeat_ms
    trio.run(run, args.records, args.rounds)


if __name__ == "__main__":
    main()
