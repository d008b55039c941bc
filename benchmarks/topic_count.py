"""What creating one topic costs as the number of topics grows: the first topics against the T-th.

    python benchmarks/topic_count.py [--topics 2000]

Three brokers, one partition per topic, RF=3, on Trio's mock clock. Each figure is the CPU time of the whole
process (the cluster is one process) from the CreateTopics call until the topic is online, median of 20
consecutive topics: the first 20, and the 20 up to the T-th. The share of it spent in cyclic GC is shown too
(`gc.callbacks`), since a large cluster's heap makes a full collection expensive. To compare with another
version, run the same file with that version on PYTHONPATH.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time

import trio
import trio.testing
from arguments import at_least
from failover_gc import CONFIG, GcTimer

from kafkalite.cluster import Cluster

WINDOW = 20
"""Topics per figure: the median of the first 20 topics' costs, and of the last 20's."""


async def run(topics: int) -> dict[str, float]:
    timer = GcTimer()
    gc.callbacks.append(timer)
    costs: list[tuple[float, float]] = []
    try:
        async with Cluster(brokers=3, config=CONFIG, seed=1) as cluster:
            for i in range(topics):
                started, gc_before = time.process_time(), timer.spent
                await cluster.create_topic(f"topic-{i}", 1, 3, timeout=3600)
                costs.append((time.process_time() - started, timer.spent - gc_before))
    finally:
        gc.callbacks.remove(timer)
    first, last = costs[:WINDOW], costs[-WINDOW:]
    return {"first": statistics.median(c for c, _ in first), "last": statistics.median(c for c, _ in last),
            "last gc share": sum(g for _, g in last) / sum(c for c, _ in last)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--topics", type=at_least(2 * WINDOW), default=2000,
                        help=f"topics created (at least {2 * WINDOW}: the last {WINDOW} against the first {WINDOW})")
    args = parser.parse_args()
    figures = trio.run(run, args.topics, clock=trio.testing.MockClock(autojump_threshold=0))
    print(f"create one topic: first topics {figures['first'] * 1000:.2f} ms, topic {args.topics:,} "
          f"{figures['last'] * 1000:.2f} ms ({figures['last'] / figures['first']:.1f}x; "
          f"{figures['last gc share']:.0%} of it cyclic GC)")


if __name__ == "__main__":
    main()
