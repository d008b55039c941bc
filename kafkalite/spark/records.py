"""Reading one offset range with kafkalite's consumer, as Arrow record batches in the Kafka source's schema.

A Spark task reads exactly its range: it seeks to the start and polls record batches until the end, cutting the
last one at the end, so consecutive micro-batches neither repeat nor skip a record. The consumer follows a
leader that moves mid-read (it refreshes metadata and fetches from the new leader). Records gone before they
were read (retention, a deleted or truncated partition) are data loss: with failOnDataLoss the task fails naming
the partition and the offsets; without, they are logged and skipped.

Columns are built straight from the fetched batches, never from a Python object per record (which cost more
than everything else together): a native batch stores each of its key and value columns with the int32 bounds
of every item, Arrow's own binary layout, so each becomes an Arrow array over the fetched bytes, whose items
are taken in C; small record batches are concatenated, in the types Spark expects for the declared schema
exactly (int32 partition and timestampType, int64 offset, microsecond UTC timestamp).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from kafkalite.client import Consumer, FetchedBatch
from kafkalite.common import columnar
from kafkalite.common.errors import CorruptMessageError, OffsetOutOfRangeError
from kafkalite.common.records import LOG_APPEND_TIME, RecordBatch
from kafkalite.common.types import TopicPartition
from kafkalite.spark.options import SourceOptions
from kafkalite.spark.planning import OffsetRange, report_data_loss

_TIMESTAMP = pa.timestamp("us", tz="UTC")
_HEADERS = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
_SCHEMA = pa.schema([("key", pa.binary()), ("value", pa.binary()), ("topic", pa.string()),
                     ("partition", pa.int32()), ("offset", pa.int64()), ("timestamp", _TIMESTAMP),
                     ("timestampType", pa.int32())])
_SCHEMA_WITH_HEADERS = _SCHEMA.append(pa.field("headers", _HEADERS))

_progressions: dict[tuple[int, int], pa.Array] = {}


def _progression(step: int, base: int, first: int, count: int) -> pa.Array:
    """The int64s `step * i + base` for i from `first`, `count` of them: a slice of an array kept for the process
    and grown by doubling. Numbering a record batch's offsets and its items' places with a fresh cumulative sum
    cost a fifth of turning the batch into Arrow."""
    progression = _progressions.get((step, base))
    if progression is None or len(progression) < first + count:
        size = max(first + count, 2 * len(progression) if progression is not None else 4096)
        progression = _progressions[step, base] = pc.cumulative_sum(pa.repeat(pa.scalar(step, pa.int64()), size),
                                                                    start=base - step)
    return progression.slice(first, count)


_MIN_ROWS = 4096
"""Rows below which consecutive record batches share one Arrow batch."""

_CONSUMER_DEFAULTS = {
    "max.partition.fetch.bytes": 4 << 20,  # bytes per poll: few round trips, and small batches concatenate
}
"""Defaults the connector picks for throughput; `kafka.*` options override them."""


def to_arrow(fetched: Sequence[FetchedBatch], end: int, include_headers: bool) -> list[pa.RecordBatch]:
    """Arrow batches of the records of `fetched` (batches of one partition, in offset order) below `end`.

    Keys and values are Arrow arrays over the fetched payloads' bytes as they lie (`RecordBatch.column_buffers`),
    checked in C (bounds inside their data and ascending), of which the run wanted is taken. A record batch of
    _MIN_ROWS or more becomes an Arrow batch of its own; smaller ones (a producer's default batch.size holds about
    130 records of 100 bytes) are concatenated up to that, as Spark pays per Arrow batch. Only headers, when
    asked for, become Python objects.
    """
    groups: list[list[list[pa.Array]]] = []
    for _, _, start, batch in fetched:
        stop = min(batch.next_offset, end)
        if stop <= start:
            break
        try:
            piece = _arrays(batch, start, stop, include_headers)
        except (pa.ArrowInvalid, pa.ArrowTypeError, ValueError, TypeError, OverflowError) as exc:
            raise CorruptMessageError(f"{fetched[0].topic}-{fetched[0].partition}: records at offsets {start} to "
                                      f"{stop - 1} cannot be decoded: {exc}") from exc
        if groups and sum(len(columns[0]) for columns in groups[-1]) < _MIN_ROWS:
            groups[-1].append(piece)
        else:
            groups.append([piece])
    return [_record_batch(fetched[0].topic, fetched[0].partition, group, include_headers) for group in groups]


def _record_batch(topic: str, partition: int, pieces: list[list[pa.Array]], include_headers: bool) -> pa.RecordBatch:
    count = sum(len(piece[0]) for piece in pieces)
    columns = [piece_columns[0] if len(pieces) == 1 else pa.concat_arrays(list(piece_columns))
               for piece_columns in zip(*pieces)]
    keys, values, offsets, timestamps, timestamp_types, *headers = columns
    arrays = [keys, values, pa.repeat(pa.scalar(topic, pa.string()), count),
              pa.repeat(pa.scalar(partition, pa.int32()), count), offsets, timestamps, timestamp_types, *headers]
    return pa.RecordBatch.from_arrays(arrays, schema=_SCHEMA_WITH_HEADERS if include_headers else _SCHEMA)


def _arrays(batch: RecordBatch, start: int, stop: int, include_headers: bool) -> list[pa.Array]:
    """Key, value, offset, timestamp and timestamp type (and headers) arrays of a batch's offsets `start` to
    `stop`; a batch whose records share its timestamp (the producer's default, and every LogAppendTime batch)
    fills its timestamps with one repeat."""
    buffers = batch.column_buffers()
    first, count = start - batch.base_offset, stop - start
    keys = _binary(buffers.count, buffers.key_bounds, buffers.key_nulls, buffers.key_array, first, count)
    values = _binary(buffers.count, buffers.value_bounds, buffers.value_nulls, buffers.value_array, first, count)
    if batch.timestamp_type == LOG_APPEND_TIME or buffers.deltas is None:
        base = batch.max_timestamp if batch.timestamp_type == LOG_APPEND_TIME else batch.first_timestamp
        timestamps = pa.repeat(pa.scalar(base * 1000, _TIMESTAMP), count)
    else:
        deltas = pa.Array.from_buffers(pa.int64(), buffers.count, [None, pa.py_buffer(buffers.deltas)])
        timestamps = pc.multiply_checked(pc.add_checked(deltas.slice(first, count), batch.first_timestamp),
                                         1000).cast(_TIMESTAMP)
    offsets = pc.add(_progression(1, 0, 0, count), start)
    arrays = [keys, values, offsets, timestamps,
              pa.repeat(pa.scalar(batch.timestamp_type, pa.int32()), count)]
    if include_headers:
        arrays.append(_headers(buffers, first, count))
    return arrays


def _headers(buffers: columnar.ColumnBuffers, first: int, count: int) -> pa.Array:
    """The headers of records `first` to `first + count`: null for a record without headers, not an empty list,
    as Spark's KafkaRecordToRowConverter gives, so `headers IS NULL` finds the same rows under either source."""
    if buffers.headers is None:  # no record of the batch has headers
        return pa.nulls(count, _HEADERS)
    return pa.array([headers or None for headers in columnar.decode_headers(buffers)[first:first + count]], _HEADERS)


def _binary(count: int, bounds: memoryview, nulls: memoryview | None, packed: memoryview, first: int,
            length: int) -> pa.Array:
    """Items `first` to `first + length` of a key or value column: the pieces of its msgpack array (headers and
    items, alternating) wrapped as one Arrow array, checked in C, every second piece taken, nulls as a bitmap."""
    if nulls is not None and bytes(nulls).count(1) == count:
        return pa.nulls(length, pa.binary())
    pieces = pa.Array.from_buffers(pa.binary(), 2 * count, [None, pa.py_buffer(bounds), pa.py_buffer(packed)])
    pieces.validate(full=True)  # a forged payload fails here, not as a crash inside Spark
    items = pieces.take(_progression(2, 1, first, length))  # every second piece: the items
    if nulls is None:
        return items
    mask = pa.Array.from_buffers(pa.uint8(), count, [None, pa.py_buffer(nulls)]).slice(first, length)
    validity = pc.equal(mask, 0).buffers()[1]
    return pa.Array.from_buffers(pa.binary(), length, [validity, *items.buffers()[1:]])


async def read_range(options: SourceOptions, offsets: OffsetRange) -> AsyncIterator[pa.RecordBatch]:
    """The records of `offsets`, in offset order, as Arrow batches (`to_arrow`) of each poll's record batches."""
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
                position = await _after_nothing(options, consumer, tp, position, offsets.end, out_of_range=True)
                continue
            if not fetched:
                position = await _after_nothing(options, consumer, tp, position, offsets.end, out_of_range=False)
                continue
            position = fetched[-1].batch.next_offset
            for batch in to_arrow(fetched, offsets.end, options.include_headers):
                yield batch


async def _after_nothing(options: SourceOptions, consumer: Consumer, tp: TopicPartition, position: int, end: int, *,
                         out_of_range: bool) -> int:
    """Where reading goes on after a poll that brought nothing for `position` (`end`: nowhere), as Spark's
    KafkaDataConsumer decides: records the partition still holds (between its log start and its high watermark)
    that did not come within kafkaConsumer.pollTimeoutMs fail the task, which Spark may retry, whatever
    failOnDataLoss says; only records that are gone are data loss, reported as failOnDataLoss says.

    Gone are the records below a log start past `position` (retention, DeleteRecords), and, when the partition
    now ends at or before `position` (truncated, or re-created), the rest of the range.
    """
    earliest = (await consumer.beginning_offsets([tp]))[tp]
    latest = (await consumer.end_offsets([tp]))[tp]
    if earliest <= position < latest:
        if out_of_range:  # the log start or end moved back and forth since the fetch: fetch again
            consumer.seek(tp, position)
            return position
        raise TimeoutError(f"Cannot fetch record for offset {position} of {tp} in {options.poll_timeout_ms} "
                           f"milliseconds (kafkaConsumer.pollTimeoutMs); it is still there, between the partition's "
                           f"log start {earliest} and its high watermark {latest}")
    resume = min(earliest, end) if earliest > position else end
    report_data_loss(options, f"Offsets {position} to {resume - 1} of {tp} are gone (the partition now holds offsets "
                              f"{earliest} to {latest - 1})")
    if resume < end:
        consumer.seek(tp, resume)
    return resume
