"""Reading one offset range with kafkalite's consumer, as Arrow record batches in the Kafka source's schema.

A Spark task reads exactly its range: it seeks to the start and polls record batches until the end, cutting the
last one at the end, so consecutive micro-batches neither repeat nor skip a record. The consumer follows a
leader that moves mid-read (it refreshes metadata and fetches from the new leader). Records gone before they
were read (retention, a deleted or truncated partition) are data loss: with failOnDataLoss the task fails naming
the partition and the offsets; without, they are logged and skipped.

Columns are built straight from the fetched batches, never from a Python object per record (which cost more
than everything else together): each batch's msgpack payload is transposed in C into column tuples
(`RecordBatch.columns`), the columns of one poll are concatenated as lists, and each becomes one Arrow array, of
the type Spark expects for the declared schema exactly (int32 partition and timestampType, int64 offset,
microsecond UTC timestamp).
"""

from __future__ import annotations

import logging
from array import array
from collections.abc import AsyncIterator, Sequence

import pyarrow as pa

from kafkalite.client import Consumer, FetchedBatch
from kafkalite.common.errors import CorruptMessageError, OffsetOutOfRangeError
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

_CONSUMER_DEFAULTS = {
    "max.partition.fetch.bytes": 4 << 20,  # bytes per poll, so per Arrow batch: Spark's per-batch costs vanish
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


def to_arrow(fetched: Sequence[FetchedBatch], end: int, include_headers: bool) -> pa.RecordBatch | None:
    """One Arrow batch of the records of `fetched` (batches of one partition, in offset order) below `end`.

    None if none is below it. Per record, only C loops run: msgpack's decoding, the transpose, list extends and
    Arrow's conversion of keys, values and headers. Offsets, timestamps and timestamp types (per batch, as a
    topic's message.timestamp.type may change between batches) fill machine-integer arrays that Arrow takes
    without a copy; a batch whose records share its timestamp fills its run with one repeat.
    """
    offsets, timestamps, timestamp_types = array("q"), array("q"), array("i")
    keys: list[bytes | None] = []
    values: list[bytes | None] = []
    headers: list[tuple[tuple[str, bytes | None], ...]] = []
    topic, partition = fetched[0].topic, fetched[0].partition
    for _, _, start, batch in fetched:
        stop = min(batch.next_offset, end)
        if stop <= start:
            break
        columns = batch.columns(start, stop)
        offsets.extend(range(start, stop))
        try:
            if columns.deltas is None:
                timestamps += array("q", [columns.base_timestamp]) * (stop - start)
            else:
                timestamps.extend(map(columns.base_timestamp.__add__, columns.deltas))
        except (TypeError, OverflowError) as exc:  # a delta that is no integer: NotImplemented from __add__
            raise batch.corrupt(exc) from exc
        timestamp_types += array("i", [batch.timestamp_type]) * (stop - start)
        keys.extend(columns.keys)
        values.extend(columns.values)
        if include_headers:
            headers.extend(columns.headers)
    count = len(offsets)
    if not count:
        return None
    try:
        arrays = [
            pa.array(keys, pa.binary()),
            pa.array(values, pa.binary()),
            pa.repeat(pa.scalar(topic, pa.string()), count),
            pa.repeat(pa.scalar(partition, pa.int32()), count),
            _from_buffer(pa.int64(), offsets),
            _from_buffer(pa.timestamp("ms", tz="UTC"), timestamps).cast(_TIMESTAMP),
            _from_buffer(pa.int32(), timestamp_types),
        ]
        if include_headers:
            arrays.append(pa.array(headers, _HEADERS))
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:  # a key, value or header of the wrong type
        raise CorruptMessageError(f"{topic}-{partition}: records at offsets {offsets[0]} to {offsets[-1]} cannot "
                                  f"be decoded: {exc}") from exc
    return pa.RecordBatch.from_arrays(arrays, schema=_SCHEMA_WITH_HEADERS if include_headers else _SCHEMA)


def _from_buffer(arrow_type: pa.DataType, values: array[int]) -> pa.Array:
    """An Arrow array over a machine-integer array's memory, without a copy or a null bitmap."""
    return pa.Array.from_buffers(arrow_type, len(values), [None, pa.py_buffer(values)])


async def read_range(options: SourceOptions, offsets: OffsetRange) -> AsyncIterator[pa.RecordBatch]:
    """The records of `offsets`, in offset order, one Arrow batch per poll (max.partition.fetch.bytes bounds it)."""
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
                fetched = await consumer.poll_batches(timeout_s)
            except OffsetOutOfRangeError:
                position = await _skip_lost(options, consumer, tp, position, offsets.end)
                continue
            if not fetched:
                report_data_loss(options, f"Cannot fetch offset {position} of {tp} (the range to read ends at "
                                          f"{offsets.end}) within kafkaConsumer.pollTimeoutMs={options.poll_timeout_ms}")
                return
            position = fetched[-1].batch.next_offset
            batch = to_arrow(fetched, offsets.end, options.include_headers)
            if batch is not None:
                yield batch


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
