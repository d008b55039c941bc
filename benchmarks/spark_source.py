"""The Spark connector's read rate, beside a synthetic Arrow source in the same session, and micro-batch latency.

    python benchmarks/spark_source.py [--rows N] [--rounds N] [--latency-batches N] [--batch-size BYTES]

Needs the `spark` extra and Java 17. One `EmbeddedCluster` (3 brokers) holds a topic of 6 partitions with `--rows`
records of 100-byte values (3,000,000 by default, produced in-process before timing) in record batches of
`--batch-size` bytes (1 MiB by default, about 10,000 records; 16384, a producer's default, holds about 130). Each
round runs a streaming query `trigger(availableNow=True)` from the earliest offsets into Spark's `noop` sink on
`local[2]`, once through the connector and once through a synthetic data source that yields the same schema and rows
from Arrow batches held in memory (the ceiling a Python data source reaches on this machine). First each runs one
warm-up round, reported and not counted: the session's first query takes several times longer whichever source it
reads (the JVM compiles the Arrow-to-row paths as they run; Python workers start and import), and would otherwise
fall on the source that happens to go first. Then the two alternate for `--rounds` rounds, so both meet the same
drift of a shared machine, and each side's median round counts; the median of the side-by-side rounds' ratios is
printed too, as a measure of how much that drift still moved the result. The wall time of a round is query start to
termination, planning and task start-up included. Targets: 300,000 rows/s through the connector, and at least 80% of
the synthetic source's rate. Each round also shows, and the summary the medians of, the two parts in which the
sources differ: start-up, from the query's start to its first micro-batch (for every query Spark starts a fresh
Python process for the source's planning, which imports the source's module: kafkalite's client, against the
synthetic source's pyarrow alone), and reading, Spark's triggerExecution of the micro-batches with rows. kafkalite's
bytecode is written first, as `pip install` writes it (`compile_bytecode`).

Then the steady micro-batch latency: a query on a second topic with the default trigger into `noop`, fed 100
records at a time, each batch awaited before the next; reported is the median and worst of Spark's own
`triggerExecution` duration over `--latency-batches` micro-batches after the first (warm-up) ones of each query,
beside the same of the synthetic source fed as often (a file in which the benchmark raises the row count by 102,
17 per partition, which its planning reads): what a micro-batch costs Spark with a Python source that has nothing
to fetch. The two alternate, a query each in two rounds, each measuring half the batches.
"""

from __future__ import annotations

import argparse
import compileall
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any, NamedTuple

import pyarrow as pa
from arguments import at_least
from pyspark.sql import SparkSession
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow

import kafkalite
from kafkalite.client import Producer
from kafkalite.embedded import EmbeddedCluster
from kafkalite.spark import KafkaliteDataSource
from kafkalite.spark.source import SCHEMA_DDL

PARTITIONS = 6
VALUE = bytes(100)
ROWS_PER_BATCH = 20_000
TARGET_ROWS_PER_S = 300_000
TARGET_SHARE = 0.8


class SyntheticDataSource(DataSource):
    """The Kafka source's schema from memory: `rows` rows in 6 partitions, each read as 20,000-row Arrow batches."""

    @classmethod
    def name(cls) -> str:
        return "synthetic"

    def schema(self) -> str:
        return SCHEMA_DDL

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        """Option `rows`: that many rows, all there from the start; `fedby`: the count of rows there now, read from
        that file whenever Spark plans a micro-batch."""
        fed_by = self.options.get("fedby")
        return _SyntheticReader(int(self.options.get("rows", 0)), fed_by)


class _SyntheticReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, rows: int, fed_by: str | None = None) -> None:
        self.rows = rows
        self.fed_by = fed_by

    def initialOffset(self) -> dict[str, int]:
        return {"rows": 0}

    def latestOffset(self, start: dict[str, int], limit: Any) -> dict[str, int]:
        return {"rows": int(Path(self.fed_by).read_text()) if self.fed_by else self.rows}

    def prepareForTriggerAvailableNow(self) -> None:
        """Nothing to pin: the synthetic source never grows."""

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[InputPartition]:
        total = end["rows"] - start["rows"]
        return [InputPartition((p, total // PARTITIONS)) for p in range(PARTITIONS)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        number, rows = partition.value
        batch = _synthetic_batch(number, ROWS_PER_BATCH)
        for start in range(0, rows, ROWS_PER_BATCH):
            yield batch.slice(0, min(ROWS_PER_BATCH, rows - start))


def _synthetic_batch(partition: int, rows: int) -> pa.RecordBatch:
    timestamp = pa.timestamp("us", tz="UTC")
    return pa.RecordBatch.from_arrays([
        pa.nulls(rows, pa.binary()), pa.array([VALUE] * rows, pa.binary()), pa.array(["bench"] * rows, pa.string()),
        pa.array([partition] * rows, pa.int32()), pa.array(range(rows), pa.int64()),
        pa.array([time.time_ns() // 1000] * rows, timestamp), pa.array([0] * rows, pa.int32())],
        names=["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"])


def compile_bytecode() -> None:
    """Write kafkalite's bytecode where Python looks for it, as `pip install` does.

    Spark starts Python processes of its own, and a query's planning process imports the connector afresh. An
    editable install under PYTHONDONTWRITEBYTECODE (set on this machine) never gets bytecode, so each of them would
    compile kafkalite from source, about 0.2 s of every query that an installed kafkalite does not pay.
    """
    if not compileall.compile_dir(Path(kafkalite.__file__).parent, quiet=1):
        raise RuntimeError("kafkalite's modules did not compile")


def spark_session() -> SparkSession:
    """A local[2] session whose Python workers run this interpreter and import this checkout's kafkalite."""
    root = str(Path(__file__).resolve().parents[1])
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    spark = (SparkSession.builder.master("local[2]").appName("kafkalite-benchmark")
             .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(KafkaliteDataSource)
    spark.dataSource.register(SyntheticDataSource)
    return spark


def fill(cluster: EmbeddedCluster, topic: str, rows: int, batch_size: int = 1 << 20) -> None:
    async def produce() -> None:
        async with Producer(cluster.cluster, {"batch.size": batch_size, "linger.ms": 20}) as producer:
            for index in range(rows):
                await producer.send(topic, VALUE, partition=index % PARTITIONS)

    cluster.call(produce)


class Round(NamedTuple):
    """One availableNow query from start to termination, and the two parts of it that differ between sources."""

    seconds: float
    rows: int
    start_up: float
    """Query start to its first micro-batch: Spark starts a fresh Python process for the source's planning, which
    imports the source's module, and the source finds its offsets."""
    reading: float
    """Spark's triggerExecution of the micro-batches that read rows: the tasks reading and Spark taking the rows."""


def timed_round(spark: SparkSession, reader: Any) -> Round:
    """One availableNow query from `reader` into noop."""
    with tempfile.TemporaryDirectory() as checkpoint:
        started, wall = time.perf_counter(), time.time()
        query = (reader.load().writeStream.format("noop").option("checkpointLocation", checkpoint)
                 .trigger(availableNow=True).start())
        query.awaitTermination()
        seconds = time.perf_counter() - started
        progress = query.recentProgress
    first = datetime.fromisoformat(progress[0]["timestamp"].replace("Z", "+00:00")).timestamp()
    return Round(seconds, sum(p["numInputRows"] for p in progress), first - wall,
                 sum(p["durationMs"]["triggerExecution"] for p in progress if p["numInputRows"]) / 1000)


def latency(spark: SparkSession, reader: Any, feed: Callable[[], None], batches: int) -> list[float]:
    """Spark's triggerExecution milliseconds of `batches` steady micro-batches of a query on `reader`, each of what one
    `feed()` added, after three to warm up."""
    with tempfile.TemporaryDirectory() as checkpoint:
        query = reader.load().writeStream.format("noop").option("checkpointLocation", checkpoint).start()
        durations, seen = [], -1
        try:
            for _ in range(batches + 3):
                feed()
                deadline = time.monotonic() + 60
                # lastProgress, not recentProgress: this process also runs the brokers, and parsing a hundred
                # progress reports every 10 ms took the interpreter from them for milliseconds at a time
                while (last := query.lastProgress) is None or last["batchId"] <= seen or not last["numInputRows"]:
                    if time.monotonic() > deadline:
                        raise TimeoutError("the latency query made no progress in 60 s")
                    time.sleep(0.01)
                seen = last["batchId"]
                durations.append(last["durationMs"]["triggerExecution"])
        finally:
            query.stop()
    return durations[3:]


def latencies(spark: SparkSession, cluster: EmbeddedCluster, batches: int) -> dict[str, list[float]]:
    """`latency` of the connector, fed 100 records at a time, and of the synthetic source fed 102 rows at a time,
    alternating in two rounds."""
    cluster.create_topic("latency", PARTITIONS, 3)
    with tempfile.TemporaryDirectory() as directory, cluster.producer() as producer:
        fed_by, fed = Path(directory) / "rows", [0]
        fed_by.write_text("0")

        def produce() -> None:
            for index in range(100):
                producer.send("latency", VALUE, partition=index % PARTITIONS)
            producer.flush()

        def raise_count() -> None:
            fed[0] += 17 * PARTITIONS
            fed_by.with_suffix(".new").write_text(str(fed[0]))
            fed_by.with_suffix(".new").replace(fed_by)  # whole, never half written when the planner reads it

        sources = {"kafkalite": (spark.readStream.format("kafkalite")
                                 .option("kafka.bootstrap.servers", cluster.bootstrap_servers)
                                 .option("subscribe", "latency").option("startingOffsets", "earliest"), produce),
                   "synthetic": (spark.readStream.format("synthetic").option("fedby", str(fed_by)), raise_count)}
        durations: dict[str, list[float]] = {name: [] for name in sources}
        for half in (batches - batches // 2, batches // 2):
            for name, (reader, feed) in sources.items() if half else ():
                durations[name] += latency(spark, reader, feed, half)
    return durations


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=at_least(PARTITIONS), default=3_000_000, help="at least one a partition")
    parser.add_argument("--rounds", type=at_least(1), default=3, help="alternating connector and synthetic rounds")
    parser.add_argument("--latency-batches", type=at_least(1), default=20)
    parser.add_argument("--batch-size", type=at_least(1), default=1 << 20,
                        help="the producer's batch.size for the topic read (16384 is its default; "
                             "batches never pass max.request.size, 1 MiB)")
    args = parser.parse_args(argv)
    compile_bytecode()
    spark = spark_session()
    with EmbeddedCluster(3) as cluster:
        cluster.create_topic("bench", PARTITIONS, 3)
        started = time.perf_counter()
        fill(cluster, "bench", args.rows, args.batch_size)
        print(f"produced {args.rows:,} records in {time.perf_counter() - started:.1f} s "
              f"(batch.size {args.batch_size:,})")
        connector = (spark.readStream.format("kafkalite").option("kafka.bootstrap.servers", cluster.bootstrap_servers)
                     .option("subscribe", "bench").option("startingOffsets", "earliest"))
        synthetic = spark.readStream.format("synthetic").option("rows", str(args.rows))
        rounds: dict[str, list[Round]] = {"kafkalite": [], "synthetic": []}
        for round_number in range(args.rounds + 1):
            for name, reader in (("kafkalite", connector), ("synthetic", synthetic)):
                one = timed_round(spark, reader)
                assert one.rows == (args.rows if name == "kafkalite" else args.rows // PARTITIONS * PARTITIONS), one
                if round_number:
                    rounds[name].append(one)
                print(f"  {name:<10} {one.rows:>10,} rows in {one.seconds:6.2f} s: {one.rows / one.seconds:>10,.0f} "
                      f"rows/s (start-up {one.start_up:.2f} s, reading {one.reading:.2f} s)"
                      f"{'' if round_number else '  (warm-up, not counted)'}")
        durations = latencies(spark, cluster, args.latency_batches)
    rates = {name: [one.rows / one.seconds for one in ones] for name, ones in rounds.items()}
    mine, ceiling = statistics.median(rates["kafkalite"]), statistics.median(rates["synthetic"])
    print(f"\n{'source':<22} {'rows':>10} {'rows/s (median)':>16}  target")
    print(f"{'kafkalite connector':<22} {args.rows:>10,} {mine:>16,.0f}  >= {TARGET_ROWS_PER_S:,} "
          f"{'ok' if mine >= TARGET_ROWS_PER_S else 'MISSED'}")
    print(f"{'synthetic Arrow source':<22} {args.rows:>10,} {ceiling:>16,.0f}")
    print(f"{'connector / synthetic':<22} {'':>10} {mine / ceiling:>16.0%}  >= {TARGET_SHARE:.0%} "
          f"{'ok' if mine / ceiling >= TARGET_SHARE else 'MISSED'}")
    pairs = [a / b for a, b in zip(rates["kafkalite"], rates["synthetic"])]
    print(f"{'side-by-side ratios':<22} {'':>10} {statistics.median(pairs):>16.0%}  (median; "
          f"{min(pairs):.0%} to {max(pairs):.0%} over {len(pairs)} rounds)")
    for part in ("start_up", "reading"):
        medians = {name: statistics.median(getattr(one, part) for one in ones) for name, ones in rounds.items()}
        print(f"{part.replace('_', '-') + ', median':<22} {'':>10} {medians['kafkalite']:>15.2f}s  synthetic "
              f"{medians['synthetic']:.2f} s")
    mine, peer = durations["kafkalite"], durations["synthetic"]
    print(f"steady micro-batch (100 records, default trigger, noop): triggerExecution median "
          f"{statistics.median(mine):.0f} ms, worst {max(mine):.0f} ms over {len(mine)} batches; the synthetic source "
          f"fed as often: median {statistics.median(peer):.0f} ms, worst {max(peer):.0f} ms")
    spark.stop()


if __name__ == "__main__":
    main()
