"""The `kafkalite` data source: Spark's Kafka source and sink, reading and writing a kafkalite cluster.

    spark.dataSource.register(KafkaliteDataSource)
    stream = (spark.readStream.format("kafkalite")
              .option("kafka.bootstrap.servers", cluster.bootstrap_servers)
              .option("subscribe", "orders").load())

Where each method runs decides what it may hold. `schema()`, `reader()`, `streamReader()` and `writer()` run
before any job: options are checked there, and the cluster is asked once, so a bad option or an unreachable
cluster fails at `load()` or `start()` with a message naming the option and its value. `initialOffset`,
`latestOffset`, `partitions` and `commit` run in a long-lived runner process; `read()` runs in executors on a
pickled copy of the reader, so readers hold only options and plain offsets, and connect inside `read()`.
Spark starts a fresh Python process for every query's planning, which imports this module: the reading path
(pyarrow.compute, the consumer) and the sink are imported where they are used, not here, as each import costs
every query's start-up.

Offsets per micro-batch: `latestOffset` looks up the partitions the subscription covers now (new topics and
partitions start at their earliest offset, as in Spark's Kafka source) and their high watermarks, then admits
what the read limit allows. Records are read only up to that planned end, so a micro-batch is reproducible from
its offsets and a query restarted from its checkpoint continues exactly where it stopped.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable, ReadLimit, ReadMaxRows, ReadMinRows, SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from kafkalite.spark.lookup import ClusterLookup, check_reachable
from kafkalite.spark.options import (
    EARLIEST, LATEST, OptionError, SourceOptions, sink_options, source_options, spelled,
)
from kafkalite.spark.planning import (
    OffsetRange, Offsets, available, from_json, rate_limit, report_data_loss, split, to_json,
)

if TYPE_CHECKING:
    from kafkalite.spark.sink import BatchWriter, StreamWriter

SCHEMA_DDL = ("key binary, value binary, topic string, partition int, offset long, timestamp timestamp, "
              "timestampType int")
HEADERS_DDL = "headers array<struct<key: string, value: binary>>"


class KafkaliteDataSource(DataSource):
    """Format `kafkalite`: Spark's Kafka source options, columns and guarantees, over kafkalite's native client."""

    @classmethod
    def name(cls) -> str:
        return "kafkalite"

    def schema(self) -> str:
        """The Kafka source's columns; first checks the options and asks the cluster whether it can be reached
        and has the partitions the options name, so mistakes fail at `load()`."""
        options = source_options(self.options, streaming=None)
        check_reachable(options.bootstrap, options.client_config)
        ClusterLookup(options).check_named_partitions([options.starting, options.ending], options.subscription)
        return f"{SCHEMA_DDL}, {HEADERS_DDL}" if options.include_headers else SCHEMA_DDL

    def reader(self, schema: StructType) -> DataSourceReader:
        return BatchReader(source_options(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return StreamReader(source_options(self.options, streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> BatchWriter:
        # A topic's records cannot be replaced: appending instead would pass a pipeline's test wrongly. PySpark lets
        # a Python data source write only in Append and Overwrite: it refuses the default, ErrorIfExists, itself.
        if overwrite:
            raise ValueError("kafkalite sink: save mode Overwrite is not allowed for Kafka, as by Spark's Kafka sink; "
                             'write with mode("append"), the only other mode PySpark lets a Python data source '
                             "write in")
        from kafkalite.spark.sink import BatchWriter, check_sink  # see the module docstring: imported when used

        return BatchWriter(check_sink(sink_options(self.options), schema))

    def streamWriter(self, schema: StructType, overwrite: bool) -> StreamWriter:
        from kafkalite.spark.sink import StreamWriter, check_sink

        return StreamWriter(check_sink(sink_options(self.options), schema))


class _RangeReader:
    """What batch and stream readers share: `read()` of one planned range, and turning ranges into partitions."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self.lookup = ClusterLookup(options)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, OffsetRange):
            if partition.value is not None:
                raise TypeError(f"the kafkalite source reads the ranges it planned, not {partition!r}")
            return iter(())  # Spark's one stand-in partition when planning found nothing to read
        from kafkalite.spark.records import CONSUMERS  # see the module docstring: imported when used

        return CONSUMERS.read(self.options, partition)

    def ranges(self, start: Offsets, end: Offsets) -> list[OffsetRange]:
        """One range per partition with records between `start` and `end`, cut for maxRecordsPerPartition and
        minPartitions.

        An end below its start means records went away since planning (the partition was truncated or
        re-created): data loss, reported as failOnDataLoss says.
        """
        ranges = []
        for tp, until in sorted(end.items()):
            begin = start[tp]
            if until < begin:
                report_data_loss(self.options, f"Partition {tp}'s offset went back from {begin} to {until}")
            elif until > begin:
                ranges.append(OffsetRange(tp.topic, tp.partition, begin, until))
        return split(ranges, self.options.min_partitions, self.options.max_records_per_partition)


class BatchReader(_RangeReader, DataSourceReader):
    """`spark.read.format("kafkalite")`: startingOffsets (default earliest) to endingOffsets (default latest)."""

    def partitions(self) -> Sequence[InputPartition]:
        partitions = self.lookup.partitions()
        start = self.lookup.resolve(self.options.starting, partitions, default=EARLIEST, starting=True)
        assert self.options.ending is not None
        end = self.lookup.resolve(self.options.ending, partitions, default=LATEST, starting=False)
        starting, ending = self.options.starting, self.options.ending
        # Blame the option that named offsets, as Spark blames the "fromOffset" you provided: a start past the end
        # of a partition read to latest is startingOffsets' fault, an end before the earliest offset endingOffsets'.
        blamed, other = (ending, starting) if starting.position is not None else (starting, ending)
        for tp in sorted(partitions):
            if end[tp] < start[tp]:
                raise OptionError(blamed.option, blamed.value, f"{tp} would start at {start[tp]}, after its end at "
                                                               f"{end[tp]} ({spelled(other.option)}={other.value})")
        return self.ranges(start, end)


class StreamReader(_RangeReader, DataSourceStreamReader, SupportsTriggerAvailableNow):
    """`spark.readStream.format("kafkalite")`, with admission control through Spark's ReadLimit API.

    maxOffsetsPerTrigger is the default read limit; minOffsetsPerTrigger holds a micro-batch back until that many
    records wait or maxTriggerDelay passed since the last one. Under `trigger(availableNow=True)` the query reads
    up to the offsets current when it started, still in batches of at most maxOffsetsPerTrigger.
    """

    def __init__(self, options: SourceOptions) -> None:
        super().__init__(options)
        self._target: Offsets | None = None
        self._latest: Offsets | None = None
        self._last_batch_at = time.monotonic()

    def initialOffset(self) -> dict[str, dict[str, int]]:
        partitions = self.lookup.partitions()
        return to_json(self.lookup.resolve(self.options.starting, partitions, default=LATEST, starting=True))

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.options.max_offsets_per_trigger)
        if self.options.min_offsets_per_trigger is not None:
            return ReadMinRows(self.options.min_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        partitions = self.lookup.partitions()
        self._target = self.lookup.offsets({tp: LATEST for tp in partitions})

    def reportLatestOffset(self) -> dict[str, dict[str, int]] | None:
        return to_json(self._latest) if self._latest is not None else None

    def latestOffset(self, start: dict[str, dict[str, int]], limit: ReadLimit) -> dict[str, dict[str, int]]:
        begin = self._current_start(from_json(start))
        latest = self.lookup.offsets({tp: LATEST for tp in begin})
        self._latest = latest
        if self._target is not None:
            latest = {tp: min(offset, self._target[tp]) if tp in self._target else begin[tp]
                      for tp, offset in latest.items()}
        if self._held_back(begin, latest, limit):
            return start
        end = rate_limit(begin, latest, limit.max_rows) if isinstance(limit, ReadMaxRows) else latest
        if end != begin:
            self._last_batch_at = time.monotonic()
        return to_json(end)

    def _current_start(self, start: Offsets) -> Offsets:
        """`start` over the partitions read now: deleted ones are data loss, new ones start at their earliest."""
        partitions = self.lookup.partitions()
        if self._target is not None:  # availableNow reads only what existed when the query started
            partitions &= set(self._target) | set(start)
        for tp in sorted(set(start) - partitions):
            report_data_loss(self.options, f"Partition {tp} is gone (its topic was deleted?) with offsets from "
                                           f"{start[tp]} not read")
        new = self.lookup.offsets({tp: EARLIEST for tp in partitions - set(start)})
        return {**{tp: offset for tp, offset in start.items() if tp in partitions}, **new}

    def _held_back(self, begin: Offsets, latest: Offsets, limit: ReadLimit) -> bool:
        """Whether minOffsetsPerTrigger holds this micro-batch back (never under availableNow, which must end)."""
        if self._target is not None or isinstance(limit, ReadAllAvailable):
            return False
        min_rows = limit.min_rows if isinstance(limit, ReadMinRows) else self.options.min_offsets_per_trigger
        if min_rows is None or available(begin, latest) >= min_rows:
            return False
        return (time.monotonic() - self._last_batch_at) * 1000 < self.options.max_trigger_delay_ms

    def partitions(self, start: dict[str, dict[str, int]], end: dict[str, dict[str, int]]) -> Sequence[InputPartition]:
        begin, until = from_json(start), from_json(end)
        new = self.lookup.offsets({tp: EARLIEST for tp in set(until) - set(begin)})
        return self.ranges({**begin, **new}, until)
