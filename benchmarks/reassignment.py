"""What moving every partition of a topic costs as the topic grows: CPU per partition moved, against the smallest.

    python benchmarks/reassignment.py [--sizes 100,1000] [--rounds 3]

Four brokers, one topic of each size with RF=3 and min.insync.replicas 2, on Trio's mock clock. The figure is the
CPU time of the whole process (the cluster is one process) inside `Cluster.reassign_partitions`, the call a test
makes: the AlterPartitionReassignments request, every move through both of its phases (new replicas started,
caught up, in the ISR; old ones stopped and deleted), and the wait until every broker knows every moved partition's
leader. Each partition moves one broker along (replicas [1, 2, 3] to [2, 3, 4]), so every move adds a replica and
removes one. The partitions hold no records: what is measured is the controller's and brokers' work per move,
not copying data. Sizes take turns in each round; each figure is the median of the rounds, with their range.

A move costs the same whatever the topic's size, but for one write: as in Kafka, each step of a partition's move
rewrites the topic's whole assignment in the coordination service, so moving all of a topic's P partitions writes
2P times P entries. The ratio against the smallest size shows how much of that is left (1.0: none).
"""

from __future__ import annotations

import argparse
import statistics
import time

import trio
import trio.testing
from arguments import at_least, partition_counts

from kafkalite.cluster import Cluster
from kafkalite.common.types import TopicPartition

BROKERS = 4
CONFIG = {"zookeeper.session.timeout.ms": 6000, "auto.leader.rebalance.enable": False}


async def move_every_partition(partitions: int) -> float:
    """CPU seconds of reassigning each partition of a `partitions`-partition topic one broker along."""
    async with Cluster(brokers=BROKERS, config=CONFIG, seed=1) as cluster:
        await cluster.create_topic("t", partitions, 3, {"min.insync.replicas": 2}, timeout=3600)
        await trio.sleep(5)
        targets = {TopicPartition("t", d.partition): [r % BROKERS + 1 for r in d.replicas]
                   for d in await cluster.describe_topic("t")}
        started = time.process_time()
        await cluster.reassign_partitions(targets, timeout=3600)
        spent = time.process_time() - started
        unmoved = [d.partition for d in await cluster.describe_topic("t")
                   if list(d.replicas) != targets[TopicPartition("t", d.partition)]]
        assert not unmoved, f"partitions {unmoved[:5]} did not move"
        return spent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=partition_counts, default="100,1000",
                        help="partition counts of the topics moved, comma-separated")
    parser.add_argument("--rounds", type=at_least(1), default=3, help="rounds in which the sizes take turns")
    args = parser.parse_args()
    costs: dict[int, list[float]] = {size: [] for size in args.sizes}
    for _ in range(args.rounds):
        for size in args.sizes:
            costs[size].append(trio.run(move_every_partition, size, clock=trio.testing.MockClock(autojump_threshold=0)))
    smallest = min(args.sizes)
    per_partition = {size: statistics.median(spent) / size for size, spent in costs.items()}
    for size in args.sizes:
        print(f"move {size:,} partitions: {statistics.median(costs[size]):.3f} s "
              f"({min(costs[size]):.3f}-{max(costs[size]):.3f}), {per_partition[size] * 1000:.2f} ms a partition, "
              f"{per_partition[size] / per_partition[smallest]:.2f}x the {smallest:,}-partition topic's")


if __name__ == "__main__":
    main()
