"""Controller failover, repeated, with the cyclic GC's share of each: is a failover's cost its work or a collection?

    python benchmarks/failover_gc.py [--partitions 10000] [--brokers 3] [--failovers 4] [--shutdowns 0]

Creates one topic (RF=3, min ISR 2) on the mock clock, then fails the controller over `--failovers` times, 10 s of
mock time apart, each measured as `scale.py` measures it (CPU time until every live broker's metadata names the
new controller). `gc.callbacks` time every collection in the window by generation: at 10,000 partitions a full
(generation 2) collection costs as much as the failover's own work, and whether one falls in the window decides
the figure, so this prints both. It also prints the young collections per failover, the count that brings a full
one on, and the objects the GC tracks afterwards.

With `--shutdowns N`, N rounds follow, each measured the same way: a controlled shutdown of a broker that is not
the controller (as `scale.py` measures it), then, once that broker has restarted and rejoined every ISR, a
preferred election of every partition, which gives it back the leaders it had, so each round does the same work.
"""

from __future__ import annotations

import argparse
import gc
import time
from typing import Any

import trio
import trio.testing
from arguments import at_least

from kafkalite.cluster import Cluster

CONFIG = {"zookeeper.session.timeout.ms": 6000, "auto.leader.rebalance.enable": False,
          "replica.lag.time.max.ms": 30000}


class GcTimer:
    """CPU time of each collection, by generation, from `gc.callbacks`."""

    def __init__(self) -> None:
        self.collections: list[tuple[int, float]] = []
        self._started = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.process_time()
        else:
            self.collections.append((info["generation"], time.process_time() - self._started))

    @property
    def spent(self) -> float:
        """CPU-seconds of every collection so far."""
        return sum(spent for _, spent in self.collections)

    def summary(self) -> str:
        full = [spent for generation, spent in self.collections if generation == 2]
        young = [spent for generation, spent in self.collections if generation < 2]
        return (f"GC {self.spent * 1000:.0f} ms: full "
                f"{', '.join(f'{spent * 1000:.0f} ms' for spent in full) or 'none'}, {len(young)} young "
                f"({sum(young) * 1000:.0f} ms)")


async def failovers(partitions: int, brokers: int, count: int, shutdowns: int) -> None:
    timer = GcTimer()
    gc.callbacks.append(timer)
    try:
        async with Cluster(brokers=brokers, config=CONFIG, seed=1) as cluster:
            started = time.process_time()
            await cluster.create_topic("t", partitions, 3, {"min.insync.replicas": 2}, timeout=3600)
            print(f"create {time.process_time() - started:.3f} s, {timer.summary()}", flush=True)
            await trio.sleep(5)
            for _ in range(count):
                old = cluster.controller_id
                timer.collections.clear()
                started = time.process_time()
                await cluster.expire_session(old)  # type: ignore[arg-type]
                await cluster.wait_until(lambda: cluster.controller_id not in (None, old), timeout=600)
                new = cluster.controller_id
                await cluster.wait_until(lambda: all(cluster.broker(b).metadata_cache.controller_id == new
                                                     for b in cluster.live_broker_ids), timeout=600, interval=0.001)
                print(f"failover {(time.process_time() - started) * 1000:.0f} ms, {timer.summary()}, "
                      f"{len(gc.get_objects()):,} objects tracked", flush=True)
                await trio.sleep(10)
            for _ in range(shutdowns):
                victim = next(b for b in cluster.live_broker_ids if b != cluster.controller_id)
                timer.collections.clear()
                started = time.process_time()
                await cluster.shutdown_broker(victim)
                print(f"shutdown {(time.process_time() - started) * 1000:.0f} ms, {timer.summary()}", flush=True)
                await cluster.restart_broker(victim)
                await cluster.wait_until(lambda: all(victim in cluster.partition_state("t", p).isr
                                                     for p in range(partitions)), timeout=3600)
                timer.collections.clear()
                started = time.process_time()
                await cluster.elect_preferred_leaders()
                print(f"preferred election {(time.process_time() - started) * 1000:.0f} ms, {timer.summary()}, "
                      f"{len(gc.get_objects()):,} objects tracked", flush=True)
                await trio.sleep(10)
    finally:
        gc.callbacks.remove(timer)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=at_least(1), default=10_000)
    parser.add_argument("--brokers", type=at_least(3), default=3, help="at least 3: the topic has 3 replicas")
    parser.add_argument("--failovers", type=at_least(0), default=4)
    parser.add_argument("--shutdowns", type=at_least(0), default=0,
                        help="controlled shutdown and election rounds after")
    args = parser.parse_args()
    trio.run(failovers, args.partitions, args.brokers, args.failovers, args.shutdowns,
             clock=trio.testing.MockClock(autojump_threshold=0))


if __name__ == "__main__":
    main()
