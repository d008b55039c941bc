"""Reading one offset range with kafkalite's consumer, as Arrow record batches in the Kafka source's schema.

A Spark task reads exactly its range: it seeks to the start and polls until the end, dropping the records of the
last poll past the end, so consecutive micro-batches neither repeat nor skip a record. The consumer follows a
leader that moves mid-read (it refreshes metadata and fetches from the new leader). Records gone before they
were read (retention, a deleted or truncated partition) are data loss: with failOnDataLoss the task fails naming
the partition and the offsets; without, they are logged and skipped.

Columns are built straight from the polled records, a C-level transpose and one Arrow array per column, with
types that match what Spark expects for the declared schema exactly (int32 partition and timestampType, int64
offset, microsecond UTC timestamp).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Sequence

import pyarrow as pa

from kafkalite.client import Consumer, ConsumerRecord
from kafkalite.common.errors import OffsetOutOfRangeError
from kafkalite.common.types import TopicPartition
from kafkalite.spark.options import SourceOptions
from kafkalite.spark.planning import OffsetRange

log = logging.getLogger(__name__)

SCHEMA_DDL = ("key binary, value binary, topic string, partition int, offset long, timestamp timestamp, "
              "timestampType int")
HEADERS_DDL = "headers array<struct<key: string, value: binary>>"

_TIMESTAMP = pa.timestamp("us", tz="UTC")
_HEADERS = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
_SCHEMA = pa.schema([("key", pa.binary()), ("value", pa.binary()), ("topic", pa.string()),
                     ("partition", pa.int32()), ("offset", pa.int64()), ("timestamp", _TIMESTAMP),
                     ("timestampType", pa.int32())])
_SCHEMA_WITH_HEADERS = _SCHEMA.append(pa.field("headers", _HEADERS))
_CREATE_TIME = pa.scalar(0, pa.int32())

_CONSUMER_DEFAULTS = {
    "max.poll.records": 20_000,  # rows per Arrow batch: Spark's per-batch costs vanish at this size
    "max.partition.fetch.bytes": 4 << 20,
}
"""Defaults the connector picks for throughput; `kafka.*` options override them."""


class DataLossError(RuntimeError):
    """Records a query still had to read are gone (retention, a deleted topic), and failOnDataLoss is true."""


def report_data_loss(options: SourceOptions, message: str) -> None:
    """Fail with `message` under failOnDataLoss=true (the default), or log it and go on, as Spark's Kafka source."""
    if options.fail_on_data_loss:
        raise DataLossError(f"{message}. Some data may have been lost because they are not available in the cluster "
                            "any more (retention, or a deleted topic). Set failOnDataLoss=false to skip them "
                            "instead of failing the query.")
    log.warning("%s; skipped, as failOnDataLoss is false", message)


def to_arrow(records: Sequence[ConsumerRecord], include_headers: bool) -> pa.RecordBatch:
    topics, partitions, offsets, timestamps, keys, values, headers = zip(*records)
    count = len(records)
    columns = [
        pa.array(keys, pa.binary()),
        pa.array(values, pa.binary()),
        pa.repeat(pa.scalar(topics[0], pa.string()), count),
        pa.repeat(pa.scalar(partitions[0], pa.int32()), count),
        pa.array(offsets, pa.int64()),
        pa.array(timestamps, pa.timestamp("ms", tz="UTC")).cast(_TIMESTAMP),
        pa.repeat(_CREATE_TIME, count),
    ]
    if include_headers:
        columns.append(pa.array(headers, _HEADERS))
    return pa.RecordBatch.from_arrays(columns, schema=_SCHEMA_WITH_HEADERS if include_headers else _SCHEMA)


async def read_range(options: SourceOptions, offsets: OffsetRange) -> AsyncIterator[pa.RecordBatch]:
    """The records of `offsets`, in offset order, in batches of up to max.poll.records."""
    tp = TopicPartition(offsets.topic, offsets.partition)
    config = {**_CONSUMER_DEFAULTS, **options.client_config, "auto.offset.reset": "none",
              "allow.auto.create.topics": False}
    timeout_s = options.poll_timeout_ms / 1000
    async with Consumer(options.bootstrap, config) as consumer:
        consumer.assign([tp])
        consumer.seek(tp, offsets.start)
        position = offsets.start
        while position < offsets.end:
            try:
                records = await consumer.poll(timeout_s)
            except OffsetOutOfRangeError:
                position = await _skip_lost(options, consumer, tp, position, offsets.end)
                continue
            if not records:
                report_data_loss(options, f"Cannot fetch offset {position} of {tp} (the range to read ends at "
                                          f"{offsets.end}) within kafkaConsumer.pollTimeoutMs={options.poll_timeout_ms}")
                return
            if records[-1].offset >= offsets.end:
                records = records[:offsets.end - records[0].offset]
            position = records[-1].offset + 1
            yield to_arrow(records, options.include_headers)


async def _skip_lost(options: SourceOptions, consumer: Consumer, tp: TopicPartition, position: int, end: int) -> int:
    """After OFFSET_OUT_OF_RANGE at `position`: report what is gone, and where reading may go on (`end`: nowhere).

    A log start past `position` lost the records below it; a log start at or before it means the log now ends
    before `position` (truncated, or re-created), and the rest of the range is gone.
    """
    consumer.seek_to_beginning([tp])
    earliest = await consumer.position(tp)
    resume = min(earliest, end) if earliest > position else end
    report_data_loss(options, f"Offsets {position} to {resume - 1} of {tp} are gone (the partition now starts at "
                              f"{earliest})")
    if resume < end:
        consumer.seek(tp, resume)
    return resume
