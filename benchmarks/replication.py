"""Replicated produce throughput and leader failover time.

    python benchmarks/replication.py [--seconds 3]

Throughput (real clock): in-process produce with acks=-1 to a 3-replica, 8-partition topic, batches of 1,000
records of 100 bytes, one producing task per partition: acknowledged records per second. Every ack means the
batch reached all three replicas' logs. Target: >= 1 million records/s.

Failover (Trio's mock clock, 6 s session timeout): from killing a partition leader to a new leader accepting an
acks=-1 write, split into the session running out (the coordination service noticing the crash) and what
follows it (controller election of a new leader, LeaderAndIsr, the first write). Target: session timeout plus
under 50 ms.
"""

from __future__ import annotations

import argparse
import time

import trio
import trio.testing
from arguments import seconds

from kafkalite.cluster import Cluster
from kafkalite.common.records import Record, RecordBatch

PARTITIONS = 8
BATCH = RecordBatch.from_records([Record(None, b"x" * 100) for _ in range(1000)])


async def throughput(seconds: float) -> tuple[int, float]:
    async with Cluster(brokers=3) as cluster:
        await cluster.create_topic("bench", partitions=PARTITIONS, replication_factor=3,
                                   config={"min.insync.replicas": 2})
        acked = 0
        started = time.perf_counter()
        deadline = started + seconds

        async def producer(partition: int) -> None:
            nonlocal acked
            while time.perf_counter() < deadline:
                await cluster.produce("bench", partition, BATCH, acks=-1)
                acked += BATCH.record_count

        async with trio.open_nursery() as nursery:
            for partition in range(PARTITIONS):
                nursery.start_soon(producer, partition)
        elapsed = time.perf_counter() - started
        described = await cluster.describe_topic("bench")
        assert sum(d.high_watermark for d in described) == acked
        return acked, elapsed


async def failover() -> tuple[float, float, float]:
    async with Cluster(brokers=3, config={"zookeeper.session.timeout.ms": 6000}, seed=1) as cluster:
        await cluster.create_topic("t", partitions=1, replication_factor=3, config={"min.insync.replicas": 2})
        await cluster.produce("t", 0, BATCH)
        await trio.sleep(10)  # steady state: a heartbeat at an arbitrary point of its interval
        leader = cluster.leader_for("t", 0)
        expires_at = cluster.session_deadline(leader)
        wall = time.perf_counter()
        killed_at = trio.current_time()
        await cluster.kill_broker(leader)
        await cluster.wait_for_leader("t", 0, not_on=[leader], interval=0.001)
        await cluster.produce("t", 0, BATCH)
        accepted_at = trio.current_time()
        return accepted_at - killed_at, accepted_at - expires_at, time.perf_counter() - wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=seconds, default=3.0)
    args = parser.parse_args()
    acked, elapsed = trio.run(throughput, args.seconds)
    print(f"acks=-1, 3 replicas, 8 partitions, 1,000 x 100 B batches: {acked / elapsed:,.0f} records/s acknowledged "
          f"({acked:,} in {elapsed:.2f} s)")
    total, after_expiry, wall = trio.run(failover, clock=trio.testing.MockClock(autojump_threshold=0))
    print(f"failover, 6 s session timeout: new leader accepting writes {1000 * total:.1f} ms (simulated) after the "
          f"kill, {1000 * after_expiry:.1f} ms after the session expired; {1000 * wall:.1f} ms of wall time")


if __name__ == "__main__":
    main()
