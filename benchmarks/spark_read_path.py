"""Where the Spark connector's CPU goes: its read path outside Spark, reader processes and broker apart.

    python benchmarks/spark_read_path.py [--rows N] [--rounds N] [--batch-size BYTES] [--profile DIR]

`benchmarks/spark_source.py` times the connector inside Spark, where its cost is mixed with Spark's own; this
benchmark runs the same read path without Spark, to see what the connector itself spends. One `EmbeddedCluster` (3
brokers) in this process holds a topic of 6 partitions with `--rows` records of 100-byte values, produced as
`spark_source.py` produces them (batches of `--batch-size` bytes, 1 MiB by default). Each round starts two reader
processes, as `local[2]` runs two Python workers, and each reads three partitions' whole offset range one after
another through the data source's own `read()` (`KafkaliteDataSource(...).streamReader(...).read(OffsetRange)`), as
Spark's tasks call it, counting the rows of the Arrow batches it yields. Reported per round: the readers'
CPU-seconds inside `read()` (process start and imports left out, as Spark reuses its workers), this process's
CPU-seconds meanwhile (the brokers serving the fetches), and the readers' rows per second; then the medians. With
`--profile DIR`, each reader's `read()` and the brokers' thread are profiled by CPU time (cProfile) into DIR, from
the last round.

Every CPU-second counted here is taken from Spark on a 2-core machine, where Spark's JVM and workers share the
cores with the readers and the embedded brokers.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from spark_source import PARTITIONS, fill

from kafkalite.embedded import EmbeddedCluster
from kafkalite.spark import KafkaliteDataSource, bridge
from kafkalite.spark.options import SourceOptions
from kafkalite.spark.planning import OffsetRange
from kafkalite.spark.records import read_range

WORKERS = 2
TOPIC = "bench"


def read_ranges(bootstrap: str, ranges: list[tuple[int, int, int]], profile: str | None) -> None:
    """In a reader process: read each `(partition, start, end)` through the data source, print rows and
    CPU-seconds as JSON."""
    source = KafkaliteDataSource({"kafka.bootstrap.servers": bootstrap, "subscribe": TOPIC})
    reader = source.streamReader(None)  # type: ignore[arg-type]  # the schema is fixed; Spark passes its own
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
    print(json.dumps({"rows": rows, "cpu_s": time.process_time() - started}))


async def _count(options: SourceOptions, offsets: OffsetRange) -> int:
    return sum([batch.num_rows async for batch in read_range(options, offsets)])


def timed_round(cluster: EmbeddedCluster, rows: int, profile: str | None) -> tuple[float, float, float, int]:
    """(wall seconds of the slowest reader's process, readers' CPU-seconds, brokers' CPU-seconds, rows)."""
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
    return wall, sum(r["cpu_s"] for r in reports), broker_cpu, sum(r["rows"] for r in reports)


async def _enable(profiler: cProfile.Profile) -> None:
    profiler.enable()  # on the cluster's Trio thread, which `call` runs this on


async def _disable(profiler: cProfile.Profile) -> None:
    profiler.disable()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=3_000_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=1 << 20,
                        help="the producer's batch.size (16384: its default)")
    parser.add_argument("--profile", metavar="DIR", help="write cProfile files of the last round here")
    parser.add_argument("--reader", nargs=3, help=argparse.SUPPRESS)  # bootstrap, ranges (JSON), profile dir
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.rows < PARTITIONS or args.batch_size < 1:
        parser.error(f"--rounds and --batch-size must be at least 1 and --rows at least {PARTITIONS} (one a "
                     f"partition), got {args.rounds}, {args.batch_size} and {args.rows}")
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
            wall, reader_cpu, broker_cpu, rows = timed_round(cluster, args.rows, args.profile if last else None)
            assert rows == args.rows // PARTITIONS * PARTITIONS, rows
            results.append((reader_cpu, broker_cpu))
            print(f"  round {number + 1}: readers {reader_cpu:.2f} CPU-s, brokers {broker_cpu:.2f} CPU-s "
                  f"({wall:.2f} s wall with process start-up){' (profiled)' if args.profile and last else ''}")
    counted = results[:-1] if args.profile and len(results) > 1 else results  # the profiled round runs slower
    readers, brokers = statistics.median(r for r, _ in counted), statistics.median(b for _, b in counted)
    print(f"median over {len(counted)} rounds, {rows:,} rows: readers {readers:.2f} CPU-s, brokers {brokers:.2f} "
          f"CPU-s, together {readers + brokers:.2f} CPU-s ({(readers + brokers) / rows * 1e9:.0f} ns a row)")


if __name__ == "__main__":
    main()
