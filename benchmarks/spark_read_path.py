"""Where the Spark connector's CPU goes: its read path outside Spark, reader processes and broker apart.

    python benchmarks/spark_read_path.py [--rows N] [--rounds N] [--batch-size BYTES] [--profile DIR]

`benchmarks/spark_source.py` times the connector inside Spark, where its cost is mixed with Spark's own; this
benchmark runs the same read path without Spark, to see what the connector itself spends. One `EmbeddedCluster` (3
brokers) in this process holds a topic of 6 partitions with `--rows` records of 100-byte values, produced as
`spark_source.py` produces them (batches of `--batch-size` bytes, 1 MiB by default). Each round starts two reader
processes, as `local[2]` runs two Python workers, and each reads three partitions' whole offset range one after
another through the data source's own `read()` (`KafkaliteDataSource(...).streamReader(...).read(OffsetRange)`), as
Spark's tasks call it, counting the rows of the Arrow batches it yields. Reported per round: the readers'
CPU-seconds inside `read()` (process start and imports left out, as Spark reuses its workers) and the part of them
in the cyclic GC with its full collections (`gc.callbacks`: a record batch's objects that outlive the collector's
young generations cost a walk of the whole process), this process's CPU-seconds meanwhile (the brokers serving the
fetches), and the readers' rows per second; then the medians. With
`--profile DIR`, each reader's `read()` and the brokers' thread are profiled by CPU time (cProfile) into DIR, from
the last round.

Every CPU-second counted here is taken from Spark on a 2-core machine, where Spark's JVM and workers share the
cores with the readers and the embedded brokers.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import NamedTuple

from arguments import at_least
from failover_gc import GcTimer
from spark_source import PARTITIONS, fill

from kafkalite.client import Consumer
from kafkalite.embedded import EmbeddedCluster
from kafkalite.spark import KafkaliteDataSource, bridge
from kafkalite.spark.options import SourceOptions
from kafkalite.spark.planning import OffsetRange
from kafkalite.spark.records import consumer_config, read_range

WORKERS = 2
TOPIC = "bench"


def read_ranges(bootstrap: str, ranges: list[tuple[int, int, int]], profile: str | None) -> None:
    """In a reader process: read each `(partition, start, end)` through the data source, print rows,
    CPU-seconds and the cyclic GC's part of them as JSON."""
    source = KafkaliteDataSource({"kafka.bootstrap.servers": bootstrap, "subscribe": TOPIC})
    reader = source.streamReader(None)  # type: ignore[arg-type]  # the schema is fixed; Spark passes its own
    timer = GcTimer()
    gc.callbacks.append(timer)
    started = time.process_time()
    if profile is None:
        rows = sum(batch.num_rows for partition, start, end in ranges
                   for batch in reader.read(OffsetRange(TOPIC, partition, start, end)))
    else:  # cProfile sees one thread: the async reading that `read()` runs on a thread of its own, run here
        profiler = cProfile.Profile(time.process_time)
        profiler.enable()
        rows = sum(bridge.run(_count, reader.options, OffsetRange(TOPIC, *r)) for r in ranges)
        profiler.disable()
        profiler.dump_stats(str(Path(profile, f"reader-{os.getpid()}.prof")))
    cpu_s = time.process_time() - started
    gc.callbacks.remove(timer)
    print(json.dumps({"rows": rows, "cpu_s": cpu_s, "gc_s": timer.spent,
                      "full": sum(generation == 2 for generation, _ in timer.collections)}))


async def _count(options: SourceOptions, offsets: OffsetRange) -> int:
    async with Consumer(options.bootstrap, consumer_config(options)) as consumer:
        return sum([batch.num_rows async for batch in read_range(options, offsets, consumer)])


class Round(NamedTuple):
    """One round's figures, the readers' summed over both processes."""

    wall: float  # seconds of the slowest reader's process, start-up included
    readers: float  # the readers' CPU-seconds inside `read()`
    gc: float  # of which in the cyclic GC
    full: int  # the readers' full collections
    brokers: float  # this process's CPU-seconds meanwhile
    rows: int


def timed_round(cluster: EmbeddedCluster, rows: int, profile: str | None) -> Round:
    per_partition = rows // PARTITIONS
    profiler = cProfile.Profile(time.thread_time) if profile else None
    if profiler is not None:
        cluster.call(_enable, profiler)
    started, cpu_started = time.perf_counter(), time.process_time()
    readers = [subprocess.Popen([sys.executable, __file__, "--reader", cluster.bootstrap_servers,
                                 json.dumps([(p, 0, per_partition) for p in range(worker, PARTITIONS, WORKERS)]),
                                 profile or ""], stdout=subprocess.PIPE, text=True) for worker in range(WORKERS)]
    reports = [json.loads(reader.communicate()[0]) for reader in readers]
    wall, broker_cpu = time.perf_counter() - started, time.process_time() - cpu_started
    if profiler is not None:
        cluster.call(_disable, profiler)
        profiler.dump_stats(str(Path(profile, "brokers.prof")))  # type: ignore[arg-type]
    return Round(wall, sum(r["cpu_s"] for r in reports), sum(r["gc_s"] for r in reports),
                 sum(r["full"] for r in reports), broker_cpu, sum(r["rows"] for r in reports))


async def _enable(profiler: cProfile.Profile) -> None:
    profiler.enable()  # on the cluster's Trio thread, which `call` runs this on


async def _disable(profiler: cProfile.Profile) -> None:
    profiler.disable()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=at_least(PARTITIONS), default=3_000_000, help="at least one a partition")
    parser.add_argument("--rounds", type=at_least(1), default=5)
    parser.add_argument("--batch-size", type=at_least(1), default=1 << 20,
                        help="the producer's batch.size (16384: its default)")
    parser.add_argument("--profile", metavar="DIR", help="write cProfile files of the last round here")
    parser.add_argument("--reader", nargs=3, help=argparse.SUPPRESS)  # bootstrap, ranges (JSON), profile dir
    args = parser.parse_args(argv)
    if args.reader:
        bootstrap, ranges, profile = args.reader
        read_ranges(bootstrap, [tuple(r) for r in json.loads(ranges)], profile or None)
        return
    if args.profile:
        Path(args.profile).mkdir(parents=True, exist_ok=True)
    with EmbeddedCluster(3) as cluster:
        cluster.create_topic(TOPIC, PARTITIONS, 3)
        fill(cluster, TOPIC, args.rows, args.batch_size)
        results = []
        for number in range(args.rounds):
            last = number == args.rounds - 1
            result = timed_round(cluster, args.rows, args.profile if last else None)
            assert result.rows == args.rows // PARTITIONS * PARTITIONS, result.rows
            results.append(result)
            print(f"  round {number + 1}: readers {result.readers:.2f} CPU-s ({result.gc:.3f} in the cyclic GC, "
                  f"{result.full} full collections), brokers {result.brokers:.2f} CPU-s ({result.wall:.2f} s wall "
                  f"with process start-up){' (profiled)' if args.profile and last else ''}")
    counted = results[:-1] if args.profile and len(results) > 1 else results  # the profiled round runs slower
    readers, brokers = statistics.median(r.readers for r in counted), statistics.median(r.brokers for r in counted)
    print(f"median over {len(counted)} rounds, {results[-1].rows:,} rows: readers {readers:.2f} CPU-s "
          f"({statistics.median(r.gc for r in counted):.3f} in the cyclic GC), brokers {brokers:.2f} CPU-s, together "
          f"{readers + brokers:.2f} CPU-s ({(readers + brokers) / results[-1].rows * 1e9:.0f} ns a row)")


if __name__ == "__main__":
    main()
