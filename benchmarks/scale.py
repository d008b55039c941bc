"""How kafkalite's cost grows with the number of partitions: failover, shutdown, elections, idle CPU, produce.

    python benchmarks/scale.py [--sizes 100,1000,10000] [--rounds 3] [--huge] [--no-frozen] [--plot scale.png]

Three brokers, RF=3, min ISR 2. Each figure is the CPU time the whole process spends (time.process_time: the
cluster is one process), on Trio's mock clock where the operation waits on timeouts, so waiting costs nothing and
the figure is the work alone; the per-record and latency figures run on the real clock through the public
`Producer` and `Cluster.produce`. What it leaves out: a real network and disk (there are none), and GC tuning: the
figures are those of a process that never calls `gc.freeze()`. The README advises users who build large clusters to
create their topics with the collector off, then collect and freeze what they built, so the mock-clock operations run
a second time on a cluster set up so, the creation's figure including the collection and the freeze: printed beside
the others as "frozen" (`--no-frozen` skips them), never in their place.
The mock-clock operations run `--rounds` times, the sizes taking turns (100, 1,000, 10,000, 100, ...; each unfrozen
run followed by its frozen one), so that all meet the same drift of a shared machine; each such figure is the median
of its rounds, printed with their range, and the goals are judged by the median. One run of these at 10,000
partitions has moved by a third from the next on this machine, more than some goals' distance from being met.

- failover: the controller's session expires; until a new controller has told every broker (its metadata names it)
- shutdown: controlled shutdown of a broker leading a third of the partitions
- prefer: after that broker restarts and rejoins every ISR, a preferred election of every partition
- leader failover: a broker leading a third of the partitions dies; from its session's expiry until every
  partition it led has a new leader acting as leader, watched with one `Cluster.wait_for_leaders`, whose looks
  are in the figure (the figures when issue 16 was filed watched with a wait per partition, which cost more;
  the CHANGELOG has both)
- idle: CPU per second of a quiet cluster on the real clock, over one ISR tick period (replica.lag.time.max.ms
  / 2, so the periodic work is in the window exactly once), starting one period after every partition's ISR is
  full: the first tick after a leadership change looks at each partition once, a quiet cluster's ticks do not
- produce latency: `Cluster.produce` of 10 records, acks=-1, to one partition, median of 200, real clock, and
  the same on a 1-partition cluster in the same run, the peer the target is set against
- keyed produce: CPU per record of `Producer.send` with 1,000 keys over 8 and over 256 partitions, the median of
  `--keyed-rounds` alternating rounds with their range. On the real clock with linger.ms 5, how many batches
  carry the 20,000 records depends on how often the linger runs out while they are sent, so a round that falls
  behind sends more, smaller batches and costs more per record, and a slower machine falls behind more: rounds
  at 256 partitions have appended 500 to 800 batches on a fast machine, and 500 to 1,000 on one three times
  slower since the producer keeps a turn as long as the one it gave the brokers (7,000 to 11,000 before; 8
  partitions: about 200, full ones, on both)
- create: creating the N-partition topic
- memory/partition: what creating the topic leaves allocated (tracemalloc, after `gc.collect()`, 30 s later on the
  mock clock), over the partition count: the three replicas, the controller's and the coordination service's
  share, everything a partition costs the process

`--huge` adds a 100,000-partition, 5-broker cluster: start, create its topic, fail the controller over; and unless
`--no-frozen`, the same with the collector off while the topic is created, then collected and frozen, as the README
advises for a cluster that large.
Last, the figures beside issue 16's for main when it was filed (held in AT_FILING: what this file measured then)
and its goals, each marked met or MISSED. To compare with another version, run the same file with that version
on PYTHONPATH (the CHANGELOG quotes both).
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
import tracemalloc
from collections.abc import Awaitable, Callable
from typing import Any

import trio
import trio.testing
from arguments import at_least, partition_counts

from kafkalite.client import Producer
from kafkalite.cluster import Cluster
from kafkalite.common.records import Record

CONFIG = {"zookeeper.session.timeout.ms": 6000, "auto.leader.rebalance.enable": False,
          "replica.lag.time.max.ms": 30000}
# On the real clock a 10,000-partition topic takes seconds of CPU to create, on a machine that may be busy: a
# session that expires meanwhile would add a failover to the idle window, so the real-clock cluster keeps longer.
REAL_CLOCK_CONFIG = {**CONFIG, "zookeeper.session.timeout.ms": 60000}
IDLE_WINDOW = CONFIG["replica.lag.time.max.ms"] / 2000  # one ISR tick period, in seconds
MEMORY = "memory/partition"
AT_FILING = {
    "create": {10_000: 3.1},
    "failover": {100: 0.008, 1_000: 0.069, 10_000: 1.11},
    "shutdown": {100: 0.085, 1_000: 4.2},
    "prefer": {100: 0.055, 1_000: 5.5},
    "leader failover": {100: 0.027, 1_000: 0.172},
    "idle (s/s)": {1_000: 0.083, 10_000: 0.596},
    "produce latency": {100: 0.00076, 1_000: 0.0094, 10_000: 0.289},
    MEMORY: {10_000: 17 * 1024},
}
"""Issue 16's figures for main when it was filed (same machine, same operations), per operation and size."""
TARGETS = {"create": (10_000, 1.0), "failover": (10_000, 0.2), "shutdown": (10_000, 0.3), "prefer": (10_000, 0.3),
           "leader failover": (1_000, 0.05), "idle (s/s)": (10_000, 0.02), MEMORY: (10_000, 8 * 1024)}
"""Issue 16's goals: (partitions, limit), a limit in seconds of CPU (per second for idle) or bytes for memory."""
RATIO_TARGETS = {"produce latency, 10,000 partitions against 1": 2.0, "keyed produce, 256 partitions against 8": 1.5}
RATIOS_AT_FILING = {"produce latency, 10,000 partitions against 1": 0.289 / 0.00015,
                    "keyed produce, 256 partitions against 8": 920 / 4.8}
HUGE_TARGET = 2.0  # seconds: start, create and fail over a 100,000-partition cluster


def cpu() -> float:
    return time.process_time()


async def measured(what: Callable[[], Awaitable[Any]]) -> float:
    started = cpu()
    await what()
    return cpu() - started


async def topic_online(cluster: Cluster, partitions: int) -> None:
    await cluster.create_topic("t", partitions, 3, {"min.insync.replicas": 2}, timeout=3600)


async def controller_failover(cluster: Cluster, timeout: float) -> None:
    """Expire the controller's session; done when a new controller has told every broker (its metadata names it)."""
    controller = cluster.controller_id
    assert controller is not None
    await cluster.expire_session(controller)
    await cluster.wait_until(lambda: cluster.controller_id not in (None, controller), timeout=timeout)
    new = cluster.controller_id
    await cluster.wait_until(lambda: all(cluster.broker(b).metadata_cache.controller_id == new
                                         for b in cluster.live_broker_ids), timeout=timeout, interval=0.001)


def all_in_isr(cluster: Cluster, partitions: int, broker: int) -> bool:
    return all(broker in cluster.partition_state("t", p).isr for p in range(partitions))


async def created_as_advised(cluster: Cluster, partitions: int) -> None:
    """The topic created as the README advises for one this large: with the collector off, then collected and
    frozen, which the creation's figure includes, as its user pays for them."""
    gc.disable()
    try:
        await topic_online(cluster, partitions)
    finally:
        gc.enable()
    gc.collect()
    gc.freeze()


async def mock_clock_figures(partitions: int, brokers: int = 3, frozen: bool = False) -> dict[str, float]:
    """The mock-clock operations; `frozen`: on a topic `created_as_advised`."""
    gc.collect()  # what the last cluster left is not this one's cost (a frozen creation's collection would pay it)
    figures: dict[str, float] = {}
    async with Cluster(brokers=brokers, config=CONFIG, seed=1) as cluster:
        create = created_as_advised if frozen else topic_online
        figures["create"] = await measured(lambda: create(cluster, partitions))
        await trio.sleep(5)
        figures["failover"] = await measured(lambda: controller_failover(cluster, timeout=120))
        await trio.sleep(10)
        victim = next(b for b in cluster.live_broker_ids if b != cluster.controller_id)
        figures["shutdown"] = await measured(lambda: cluster.shutdown_broker(victim))
        await cluster.restart_broker(victim)
        await cluster.wait_until(lambda: all_in_isr(cluster, partitions, victim), timeout=3600)
        figures["prefer"] = await measured(cluster.elect_preferred_leaders)
        await trio.sleep(10)
        led = [p for p in range(partitions) if cluster.leader_for("t", p) == victim]
        expires_at = cluster.session_deadline(victim)
        await cluster.kill_broker(victim)
        await trio.sleep(expires_at - trio.current_time() - 0.001)
        figures["leader failover"] = await measured(
            lambda: cluster.wait_for_leaders("t", led, not_on=[victim], timeout=120, interval=0.001))
    return figures


async def real_clock_figures(partitions: int) -> dict[str, float]:
    async with Cluster(brokers=3, config=REAL_CLOCK_CONFIG, seed=1) as cluster:
        await topic_online(cluster, partitions)
        await cluster.wait_until(lambda: all(len(cluster.partition_state("t", p).isr) == 3 for p in range(partitions)),
                                 timeout=600, interval=0.5)
        await trio.sleep(IDLE_WINDOW + 1)
        started = cpu()
        await trio.sleep(IDLE_WINDOW)
        idle = (cpu() - started) / IDLE_WINDOW
        records = [Record(None, b"x" * 100) for _ in range(10)]
        latencies = []
        for _ in range(200):
            sent = time.perf_counter()
            await cluster.produce("t", 0, records)
            latencies.append(time.perf_counter() - sent)
    return {"idle (s/s)": idle, "produce latency": statistics.median(latencies)}


async def memory_per_partition(partitions: int) -> dict[str, float]:
    """Bytes still allocated, per partition, once the topic is created and the cluster has settled."""
    async with Cluster(brokers=3, config=CONFIG, seed=1) as cluster:
        await trio.sleep(1)
        gc.collect()
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            await topic_online(cluster, partitions)
            await trio.sleep(30)
            gc.collect()
            return {MEMORY: (tracemalloc.get_traced_memory()[0] - before) / partitions}
        finally:
            tracemalloc.stop()


async def keyed_produce(partitions: int, records: int = 20_000) -> float:
    """CPU per record of `Producer.send` with 1,000 distinct keys (linger.ms 5, acks=all), flushed at the end."""
    async with Cluster(brokers=3, config=CONFIG, seed=1) as cluster:
        await cluster.create_topic("k", partitions, 3)
        async with Producer(cluster, {"acks": "all", "linger.ms": 5}) as producer:
            keys = [b"key-%d" % i for i in range(1000)]
            started = cpu()
            for i in range(records):
                await producer.send("k", b"v" * 100, key=keys[i % 1000])
            await producer.flush()
            return (cpu() - started) / records


async def huge(frozen: bool = False) -> dict[str, float]:
    """Start, create 100,000 partitions, fail the controller over; `frozen`: with the collector off while the topic
    is created, then collected and frozen, as the README advises for a cluster this large."""
    figures: dict[str, float] = {}
    started = cpu()
    async with Cluster(brokers=5, config=CONFIG, seed=1) as cluster:
        figures["start"] = cpu() - started
        if frozen:
            gc.disable()
        try:
            figures["create 100,000"] = await measured(lambda: topic_online(cluster, 100_000))
        finally:
            gc.enable()
        if frozen:
            freezing = cpu()
            gc.collect()
            gc.freeze()
            figures["collect and freeze"] = cpu() - freezing
        figures["failover"] = await measured(lambda: controller_failover(cluster, timeout=600))
    return figures


def fmt(seconds: float, name: str = "") -> str:
    if name == MEMORY:
        return f"{seconds / 1024:.1f} KiB"
    if seconds < 1e-4:
        return f"{seconds * 1e6:.1f} us"
    if seconds < 0.01:
        return f"{seconds * 1e6:.0f} us"
    return f"{seconds * 1000:.1f} ms" if seconds < 10 else f"{seconds:.1f} s"


WIDTH = 22  # a column of the table: a median, or below it its rounds' range


def median_of(rounds: list[dict[str, float]]) -> dict[str, float]:
    return {name: statistics.median(figures[name] for figures in rounds) for name in rounds[0]}


def spread(rounds: list[dict[str, float]], name: str) -> str:
    values = [figures[name] for figures in rounds]
    return f"({fmt(min(values), name)}-{fmt(max(values), name)})"


def verdict(value: float, limit: float) -> str:
    return "met" if value <= limit else "MISSED"


def print_against_filing(results: dict[int, dict[str, float]], ratios: dict[str, float],
                         frozen: dict[int, dict[str, float]]) -> None:
    """This run beside issue 16's figures at filing and its goals, for the sizes this run measured; a goal's
    verdict is the unfrozen figure's, the frozen one's follows it."""
    print(f"\nagainst issue 16 (figures when it was filed, and its goals; now: the figures above)\n"
          f"{'what (CPU time)':<22}{'partitions':>11}{'at filing':>12}{'now':>12}{'target':>12}")
    for name in [name for name in next(iter(results.values())) if name in AT_FILING or name in TARGETS]:
        target_size, limit = TARGETS.get(name, (None, None))
        for size in sorted(AT_FILING.get(name, {}).keys() | ({target_size} - {None})):
            if size not in results:
                continue
            then = AT_FILING.get(name, {}).get(size)
            now = results[size][name]
            goal = f"< {fmt(limit, name)} {verdict(now, limit)}" if size == target_size and limit else ""
            if goal and name in frozen.get(size, {}):
                goal += f" (frozen: {fmt(frozen[size][name])}, {verdict(frozen[size][name], limit)})"
            print(f"{name:<22}{size:>11,}{fmt(then, name) if then else '':>12}{fmt(now, name):>12}  {goal}")
    for name, ratio in ratios.items():
        print(f"{name}: {ratio:.2f}x, at filing {RATIOS_AT_FILING[name]:.0f}x (target within {RATIO_TARGETS[name]}x: "
              f"{verdict(ratio, RATIO_TARGETS[name])})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=partition_counts, default="100,1000,10000",
                        help="partition counts, comma-separated")
    parser.add_argument("--huge", action="store_true", help="also a 100,000-partition, 5-broker cluster")
    parser.add_argument("--plot", help="write the curves to this PNG (needs matplotlib)")
    parser.add_argument("--rounds", type=at_least(1), default=3,
                        help="alternating rounds of the mock-clock operations (each figure their median)")
    parser.add_argument("--keyed-rounds", type=at_least(1), default=5, help="alternating rounds of the keyed produce")
    parser.add_argument("--no-frozen", dest="frozen", action="store_false",
                        help="skip the mock-clock operations on a cluster frozen after setup (gc.freeze())")
    args = parser.parse_args()
    sizes = args.sizes
    # first, before the large clusters' objects weigh on the garbage collector
    keyed: dict[int, list[float]] = {8: [], 256: []}
    for _ in range(args.keyed_rounds):
        for count, rounds in keyed.items():
            rounds.append(trio.run(keyed_produce, count))
    peer_latency = trio.run(real_clock_figures, 1)["produce latency"]  # the 1-partition cluster the target names
    rounds: dict[int, list[dict[str, float]]] = {size: [] for size in sizes}
    frozen_rounds: dict[int, list[dict[str, float]]] = {size: [] for size in sizes}
    once: dict[int, dict[str, float]] = {}  # the real-clock figures and memory, measured in the first round
    for round_number in range(1, args.rounds + 1):
        for size in sizes:
            figures = trio.run(mock_clock_figures, size, clock=trio.testing.MockClock(autojump_threshold=0))
            rounds[size].append(figures)
            if size not in once:
                once[size] = trio.run(real_clock_figures, size)
                once[size].update(trio.run(memory_per_partition, size,
                                           clock=trio.testing.MockClock(autojump_threshold=0)))
                figures = {**figures, **once[size]}
            print(f"round {round_number}, {size} partitions: " + ", ".join(f"{k} {fmt(v, k)}"
                                                                            for k, v in figures.items()), flush=True)
            if args.frozen:
                try:
                    figures = trio.run(mock_clock_figures, size, 3, True,
                                       clock=trio.testing.MockClock(autojump_threshold=0))
                finally:
                    gc.unfreeze()  # the next cluster starts from an unfrozen process, as the others did
                    gc.collect()
                frozen_rounds[size].append(figures)
                print(f"round {round_number}, {size} partitions, frozen: " + ", ".join(
                    f"{k} {fmt(v, k)}" for k, v in figures.items()), flush=True)
    results = {size: {**median_of(rounds[size]), **once[size]} for size in sizes}
    frozen = {size: median_of(frozen_rounds[size]) for size in sizes if frozen_rounds[size]}
    names = list(results[sizes[0]])
    ranged = args.rounds > 1
    print(f"\n{'what (CPU time)':<22}" + "".join(f"{f'{size:,}':>{WIDTH}}" for size in sizes)
          + (f"\n(mock-clock figures: median of {args.rounds} alternating rounds, their range below it)"
             if ranged else ""))
    for name in names:
        print(f"{name:<22}" + "".join(f"{fmt(results[size][name], name):>{WIDTH}}" for size in sizes))
        if ranged and name in rounds[sizes[0]][0]:
            print(f"{'':<22}" + "".join(f"{spread(rounds[size], name):>{WIDTH}}" for size in sizes))
    for name in frozen.get(sizes[0], {}):
        print(f"{name + ', frozen':<22}" + "".join(f"{fmt(frozen[size][name], name):>{WIDTH}}" for size in sizes))
        if ranged:
            print(f"{'':<22}" + "".join(f"{spread(frozen_rounds[size], name):>{WIDTH}}" for size in sizes))
    print(f"\nproduce latency against a 1-partition cluster in this run ({fmt(peer_latency)}): " + ", ".join(
        f"{size:,} partitions {results[size]['produce latency'] / peer_latency:.2f}x" for size in sizes))
    medians = {count: statistics.median(rounds) for count, rounds in keyed.items()}
    print("keyed produce, CPU per record, median of alternating rounds (range): " + ", ".join(
        f"{count} partitions {fmt(medians[count])} ({fmt(min(rounds))}-{fmt(max(rounds))})"
        for count, rounds in keyed.items()) + f"; 256 against 8: {medians[256] / medians[8]:.2f}x")
    ratios = {"keyed produce, 256 partitions against 8": medians[256] / medians[8]}
    if 10_000 in results:
        ratios["produce latency, 10,000 partitions against 1"] = results[10_000]["produce latency"] / peer_latency
    print_against_filing(results, ratios, frozen)
    if args.huge:
        for frozen_huge in (False, True) if args.frozen else (False,):
            try:
                figures = trio.run(huge, frozen_huge, clock=trio.testing.MockClock(autojump_threshold=0))
            finally:
                gc.unfreeze()
                gc.collect()
            total = sum(figures.values())
            label = ", collector off while creating, then frozen" if frozen_huge else ""
            print(f"\n100,000 partitions, 5 brokers{label}: " + ", ".join(f"{k} {fmt(v)}" for k, v in figures.items())
                  + f"; together {fmt(total)} (target < {fmt(HUGE_TARGET)}: {verdict(total, HUGE_TARGET)})")
    if args.plot:
        import matplotlib.pyplot as plt  # optional: only for the picture

        figure, (times, memory) = plt.subplots(1, 2, figsize=(12, 5), gridspec_kw={"width_ratios": [3, 2]})
        for name in names:
            if name != MEMORY:
                times.plot(sizes, [results[size][name] for size in sizes], marker="o", label=name)
        times.set(xscale="log", yscale="log", xlabel="partitions (RF=3, 3 brokers)",
                  ylabel="CPU seconds (idle: CPU seconds per second)", title="kafkalite at scale")
        times.legend(fontsize="small")
        memory.plot(sizes, [results[size][MEMORY] / 1024 for size in sizes], marker="o")
        memory.axhline(8, linestyle="--", color="grey", label="target: 8 KiB")
        memory.set(xscale="log", ylim=(0, None), xlabel="partitions (RF=3, 3 brokers)", ylabel="KiB per partition",
                   title="memory per partition")
        memory.legend(fontsize="small")
        figure.tight_layout()
        figure.savefig(args.plot, dpi=120)
        print(f"wrote {args.plot}")


if __name__ == "__main__":
    main()
