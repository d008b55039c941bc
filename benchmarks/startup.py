"""How fast a cluster is ready: controller elected and every broker registered, then a topic online.

    python benchmarks/startup.py [--runs 30]

Two figures per run, on the real clock: from entering `Cluster(brokers=3)` until a controller is elected and
every broker knows every other (what `async with` waits for), and from there until a 3-replica, 8-partition
topic has a leader on every broker that every broker's metadata knows. Target: median under 20 ms each.
"""

from __future__ import annotations

import argparse
import statistics
import time

import trio
from arguments import at_least

from kafkalite.cluster import Cluster


async def one_run() -> tuple[float, float]:
    started = time.perf_counter()
    async with Cluster(brokers=3) as cluster:
        ready = time.perf_counter()
        await cluster.create_topic("bench", partitions=8, replication_factor=3)
        online = time.perf_counter()
        leaders = {d.leader for d in await cluster.describe_topic("bench")}
        assert leaders == {1, 2, 3}, leaders
    return ready - started, online - ready


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=at_least(1), default=30)
    args = parser.parse_args()
    trio.run(one_run)  # warm-up: imports and first-use caches are not start-up
    runs = [trio.run(one_run) for _ in range(args.runs)]
    print(f"{'phase':<44} {'median ms':>10} {'p90 ms':>10}")
    for label, values in (("Cluster(brokers=3) -> controller + registered", [r[0] for r in runs]),
                          ("-> 8-partition RF=3 topic online everywhere", [r[1] for r in runs])):
        ordered = sorted(values)
        print(f"{label:<44} {1000 * statistics.median(ordered):>10.2f} "
              f"{1000 * ordered[int(0.9 * (len(ordered) - 1))]:>10.2f}")


if __name__ == "__main__":
    main()
