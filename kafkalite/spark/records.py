"""Reading one offset range with kafkalite's consumer, as Arrow record batches in the Kafka source's schema.

A Spark task reads exactly its range: it seeks to the start and polls record batches until the end, cutting the
last one at the end, so consecutive micro-batches neither repeat nor skip a record. The consumer follows a
leader that moves mid-read (it refreshes metadata and fetches from the new leader). Records gone before they
were read (retention, a deleted or truncated partition) are data loss: with failOnDataLoss the task fails naming
the partition and the offsets; without, they are logged and skipped.

Columns are built straight from the fetched batches, never from a Python object per record (which cost more
than everything else together): a native batch stores each of its key and value columns with the int32 bounds
of every item, Arrow's own binary layout, so each becomes an Arrow array over the fetched bytes (a poll's record
batches' bytes joined first), whose items are taken in C, in the types Spark expects for the declared schema
exactly (int32 partition and timestampType, int64 offset, microsecond UTC timestamp).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from itertools import accumulate, repeat
from typing import NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from kafkalite.client import Consumer, FetchedBatch
from kafkalite.common import columnar
from kafkalite.common.errors import CorruptMessageError, OffsetOutOfRangeError
from kafkalite.common.records import LOG_APPEND_TIME, RecordBatch
from kafkalite.common.types import TopicPartition
from kafkalite.spark import bridge
from kafkalite.spark.options import SourceOptions
from kafkalite.spark.planning import OffsetRange, report_data_loss

_TIMESTAMP = pa.timestamp("us", tz="UTC")
_HEADERS = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
_SCHEMA = pa.schema([("key", pa.binary()), ("value", pa.binary()), ("topic", pa.string()),
                     ("partition", pa.int32()), ("offset", pa.int64()), ("timestamp", _TIMESTAMP),
                     ("timestampType", pa.int32())])
_SCHEMA_WITH_HEADERS = _SCHEMA.append(pa.field("headers", _HEADERS))

_progressions: dict[tuple[int, int], pa.Array] = {}


def _progression(step: int, base: int, count: int) -> pa.Array:
    """The int64s `step * i + base` for the first `count` i: a slice of an array kept for the process and grown
    by doubling. Numbering a record batch's offsets and its items' places with a fresh cumulative sum cost a fifth
    of turning the batch into Arrow."""
    progression = _progressions.get((step, base))
    if progression is None or len(progression) < count:
        size = max(count, 2 * len(progression) if progression is not None else 4096)
        progression = _progressions[step, base] = pc.cumulative_sum(pa.repeat(pa.scalar(step, pa.int64()), size),
                                                                    start=base - step)
    return progression.slice(0, count)


_MIN_ROWS = 1 << 16
"""Rows below which consecutive record batches share one Arrow batch: a poll's, mostly (the connector's 4 MiB
hold about 36,000 records of 100 bytes), as Spark and this module pay per Arrow batch and a bigger one costs only
its bytes."""

_MAX_GROUP_BYTES = 64 << 20
"""Bytes of keys and values past which record batches no longer share one, when max.partition.fetch.bytes is
raised past them: the JVM holds an Arrow batch whole, and an Arrow binary array holds 2 GiB at most."""

_CONSUMER_DEFAULTS = {
    "max.partition.fetch.bytes": 4 << 20,  # bytes per poll: few round trips, and its batches make one Arrow batch
}
"""Defaults the connector picks for throughput; `kafka.*` options override them."""


class _Column(NamedTuple):
    """A run's keys or values as its batch's payload holds them: the int32 bounds that cut the run's part of the
    msgpack array into pieces (item headers and items, alternating), `low` to `high` in the batch's array. Its
    first and last bounds are checked to lie in the array; the rest in C with its group, unless all are null."""

    bounds: memoryview  # 2 * count + 1 of them
    packed: memoryview  # the batch's whole array
    low: int
    high: int
    nulls: memoryview | None  # the run's null flags, 1 where null; None when the payload has none
    all_null: bool  # every item of the run is null


class _Run(NamedTuple):
    """A record batch's run of records, checked and cut, waiting to share Arrow columns with its neighbours."""

    start: int
    count: int
    keys: _Column
    values: _Column
    timestamps: pa.Array | int  # one per record, or the one every record takes (microseconds)
    timestamp_type: int
    headers: pa.Array | None
    size: int  # bytes of the run's keys and values


def to_arrow(fetched: Sequence[FetchedBatch], end: int, include_headers: bool) -> list[pa.RecordBatch]:
    """Arrow batches of the records of `fetched` (batches of one partition, in offset order) below `end`.

    Keys and values are Arrow arrays over the fetched payloads' bytes (`RecordBatch.column_buffers`), checked in C
    (bounds inside their data and ascending), of which the items wanted are taken. Consecutive record batches
    share an Arrow batch until it holds _MIN_ROWS records or _MAX_GROUP_BYTES (a producer's default batch.size holds
    about 130 records of 100 bytes), as Spark pays per Arrow batch, and are turned into columns together, the bytes
    of the records wanted joined: a call into Arrow costs microseconds whatever it does, so a column costs a few
    calls per Arrow batch, not per record batch (one by one, small record batches cost four times as much). A
    poll's batches that make one Arrow batch are taken apart all at once (`_at_once`) when they are plain, and
    batch by batch otherwise. A record batch that makes an Arrow batch alone is wrapped as it lies. Only headers,
    when asked for, become Python objects.
    """
    together = _at_once(fetched, end, include_headers) if len(fetched) > 1 else None
    return together if together is not None else _one_by_one(fetched, end, include_headers)


def _one_by_one(fetched: Sequence[FetchedBatch], end: int, include_headers: bool) -> list[pa.RecordBatch]:
    """`to_arrow` batch by batch: a `_run` each, grouped."""
    groups: list[list[_Run]] = []
    grouped = grouped_bytes = 0  # records and key and value bytes in the last group
    for _, _, start, batch in fetched:
        stop = min(batch.next_offset, end)
        if stop <= start:
            break
        try:
            run = _run(batch, start, stop, include_headers)
        except (pa.ArrowInvalid, pa.ArrowTypeError, ValueError, TypeError, OverflowError) as exc:
            raise _corrupt(fetched[0], start, stop, exc) from exc
        if groups and grouped < _MIN_ROWS and grouped_bytes + run.size <= _MAX_GROUP_BYTES:
            groups[-1].append(run)
            grouped, grouped_bytes = grouped + run.count, grouped_bytes + run.size
        else:
            groups.append([run])
            grouped, grouped_bytes = run.count, run.size
    arrow = []
    for group in groups:
        try:
            arrow.append(_record_batch(fetched[0].topic, fetched[0].partition, group, include_headers))
        except (pa.ArrowInvalid, pa.ArrowTypeError, ValueError, TypeError, OverflowError) as exc:
            for run in group:  # name the batch at fault
                try:
                    _check(run)
                except (pa.ArrowInvalid, ValueError) as alone:
                    raise _corrupt(fetched[0], run.start, run.start + run.count, alone) from alone
            raise _corrupt(fetched[0], group[0].start, group[-1].start + group[-1].count, exc) from exc
    return arrow


_MAX_TIMESTAMP_MS = ((1 << 63) - 1) // 1000  # a timestamp whose microseconds fit int64
_MAX_PART = 1 << 62  # a timestamp or a delta that adds to another without overflowing int64


def _at_once(fetched: Sequence[FetchedBatch], end: int, include_headers: bool) -> list[pa.RecordBatch] | None:
    """The one Arrow batch of record batches that make a single group, their layouts read all at once.

    What `_run` does batch by batch in Python (read a payload's header and sections, check them, cut the run) is
    done here with numpy over the batches' joined payloads, whose bytes then hold the keys' and values' data: a
    producer's default 16 KiB batches cost a `_run` each, more than the rest of their reading, and their hundreds
    of small objects a poll kept the cyclic collector walking the process. The records, columns and types are the
    batch-by-batch path's.

    None for anything else: Kafka-format or msgpack-row payloads, headers to decode, a run that starts inside a
    batch past the first, more than one group, a timestamp past int64 microseconds, or a section, count or bound
    that does not add up. `to_arrow` then takes the batches one by one, which names the batch at fault.
    """
    batches = [entry.batch for entry in fetched]
    if any(batch.kafka_format for batch in batches):
        return None
    types = [batch.timestamp_type for batch in batches]
    try:
        bases = np.fromiter([batch.base_offset for batch in batches], np.int64, len(batches))
        counts = np.fromiter([batch.record_count for batch in batches], np.int64, len(batches))
        starts = np.fromiter([entry.start for entry in fetched], np.int64, len(batches))
        stamps = np.fromiter([batch.max_timestamp if kind == LOG_APPEND_TIME else batch.first_timestamp
                              for batch, kind in zip(batches, types)], np.int64, len(batches))
    except OverflowError:
        return None
    run_counts = np.minimum(bases + counts, end) - starts
    empty = np.flatnonzero(run_counts <= 0)  # reading stops before the first batch with nothing to read
    runs = int(empty[0]) if len(empty) else len(batches)
    if runs < 2 or starts[0] < bases[0] or (starts[1:runs] != bases[1:runs]).any() \
            or int(run_counts[:runs - 1].sum()) >= _MIN_ROWS:
        return None
    batches, types, bases, counts, stamps = batches[:runs], types[:runs], bases[:runs], counts[:runs], stamps[:runs]
    payloads = [batch.payload for batch in batches]
    lengths = np.fromiter(map(len, payloads), np.int64, runs)
    if (lengths < columnar.HEADER_SIZE).any():
        return None
    joined = b"".join(payloads)
    at = np.zeros(runs, np.int64)  # where each payload starts in `joined`
    np.cumsum(lengths[:-1], out=at[1:])
    octets = np.frombuffer(joined, np.uint8)
    flags = octets[at + 1].astype(np.int64)
    if (octets[at] != columnar.MAGIC).any() or (flags & ~columnar.KNOWN_FLAGS).any() \
            or (octets[at + 2] | octets[at + 3]).any() or (_int32s(joined, at + 4, "<u4") != counts).any() \
            or (include_headers and (flags & columnar.HEADERS).any()):
        return None
    deltas, key_nulls, value_nulls = ((flags & flag) != 0 for flag in (columnar.TIMESTAMP_DELTAS, columnar.KEY_NULLS,
                                                                        columnar.VALUE_NULLS))
    bounds = 4 * (2 * counts + 1)  # bytes of a column's bounds
    key_bounds = at + columnar.HEADER_SIZE + 8 * counts * deltas  # where each section lies in `joined`
    value_bounds = key_bounds + bounds
    key_null_flags = value_bounds + bounds
    value_null_flags = key_null_flags + counts * key_nulls
    keys = value_null_flags + counts * value_nulls
    ends = at + lengths
    if (keys > ends).any() or _int32s(joined, key_bounds).any() or _int32s(joined, value_bounds).any():
        return None
    key_bytes, value_bytes = (_int32s(joined, where + bounds - 4) for where in (key_bounds, value_bounds))
    values, past = keys + key_bytes, keys + key_bytes + value_bytes
    if (key_bytes < 0).any() or (value_bytes < 0).any() or (past > ends).any() \
            or ((past < ends) & ((flags & columnar.HEADERS) == 0)).any() \
            or int((key_bytes + value_bytes).sum()) > _MAX_GROUP_BYTES:
        return None
    first = int(starts[0] - bases[0])
    last = first + int(run_counts[:runs].sum())  # records `first` to `last` of the batches, counted together
    timestamps = np.repeat(stamps, counts)
    if deltas.any():
        own = np.frombuffer(_sections(payloads, columnar.HEADER_SIZE, 8 * counts, deltas), "<i8")
        if _outside(stamps, _MAX_PART) or _outside(own, _MAX_PART):
            return None
        timestamps = timestamps + own * np.repeat(np.array(types) != LOG_APPEND_TIME, counts)
    timestamps = timestamps[first:last]
    if _outside(timestamps, _MAX_TIMESTAMP_MS):
        return None
    batch_of = np.repeat(np.arange(runs), counts)[first:last]
    items = pa.array(2 * np.arange(first, last) + 1 + batch_of)  # a record's item among the pieces, gaps between
    columns = [_column_at_once(joined, payloads, (where - at, shift, nulls_at - at, nulls), counts, items,
                               first, last)
               for where, shift, nulls_at, nulls in ((key_bounds, keys, key_null_flags, key_nulls),
                                                     (value_bounds, values, value_null_flags, value_nulls))]
    if columns[0] is None or columns[1] is None:
        return None
    count = last - first
    arrays = [*columns, pa.repeat(pa.scalar(fetched[0].topic, pa.string()), count),
              pa.repeat(pa.scalar(fetched[0].partition, pa.int32()), count),
              pa.array(np.repeat(bases - (np.cumsum(counts) - counts), counts)[first:last] + np.arange(first, last)),
              pa.Array.from_buffers(_TIMESTAMP, count, [None, pa.py_buffer(timestamps * 1000)]),
              pa.repeat(pa.scalar(types[0], pa.int32()), count) if len(set(types)) == 1 else
              pa.array(np.array(types, np.int32)[batch_of])]
    if include_headers:
        arrays.append(pa.nulls(count, _HEADERS))  # no batch has any: checked above
    return [pa.RecordBatch.from_arrays(arrays, schema=_SCHEMA_WITH_HEADERS if include_headers else _SCHEMA)]


def _int32s(joined: bytes, where: np.ndarray, kind: str = "<i4") -> np.ndarray:
    """The little-endian int32 (`kind` "<u4": uint32) at each place `where` in `joined`, aligned or not."""
    return np.ndarray((len(joined) - 3,), kind, joined, 0, (1,))[where].astype(np.int64)


def _outside(numbers: np.ndarray, bound: int) -> bool:
    return bool(((numbers < -bound) | (numbers > bound)).any())


def _sections(payloads: list[bytes], where: np.ndarray | int, sizes: np.ndarray, present: np.ndarray | None = None
              ) -> bytes:
    """Each payload's `sizes` bytes from `where` (counted from the payload's start), or zeros where not `present`,
    joined."""
    places = where.tolist() if isinstance(where, np.ndarray) else repeat(where)
    wanted = present.tolist() if present is not None else repeat(True)
    return b"".join([payload[start:start + size] if has else bytes(size)
                     for payload, start, size, has in zip(payloads, places, sizes.tolist(), wanted)])


_Layout = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def _column_at_once(joined: bytes, payloads: list[bytes], layout: _Layout, counts: np.ndarray, items: pa.Array,
                    first: int, last: int) -> pa.Array | None:
    """The keys or values of records `first` to `last` of the batches, from each batch's `layout`: where its bounds
    lie in its payload, where its array lies in `joined`, where its null flags lie, and whether it has them. The
    bounds, shifted to where each array lies, cut `joined` into pieces, checked in C, of which `items` are taken.
    None when the check fails."""
    bounds_at, shift, nulls_at, nulls = layout
    count = last - first
    flags = np.frombuffer(_sections(payloads, nulls_at, counts, nulls), np.uint8)[first:last] if nulls.any() else None
    if flags is not None and flags.all():
        return pa.nulls(count, pa.binary())
    shifted = np.frombuffer(_sections(payloads, bounds_at, 4 * (2 * counts + 1)), "<i4") \
        + np.repeat(shift, 2 * counts + 1)
    pieces = pa.Array.from_buffers(pa.binary(), len(shifted) - 1,
                                   [None, pa.py_buffer(shifted.astype(np.int32)), pa.py_buffer(joined)])
    try:
        pieces.validate(full=True)
    except pa.ArrowInvalid:
        return None
    taken = pieces.take(items)
    return taken if flags is None or not flags.any() else _with_nulls(taken, flags)


def _corrupt(fetched: FetchedBatch, start: int, stop: int, exc: Exception) -> CorruptMessageError:
    return CorruptMessageError(f"{fetched.topic}-{fetched.partition}: records at offsets {start} to {stop - 1} "
                               f"cannot be decoded: {exc}")


def _run(batch: RecordBatch, start: int, stop: int, include_headers: bool) -> _Run:
    """The records `start` to `stop` of a batch, checked: the record count against the payload's, the timestamps
    against int64 microseconds (its keys and values are checked with its group's), so a forged batch fails
    naming its own offsets, not as a crash inside Spark. A batch whose records share its timestamp (the
    producer's default, and every LogAppendTime batch) gives the one timestamp."""
    buffers = batch.column_buffers()
    first, count = start - batch.base_offset, stop - start
    if buffers.count != batch.record_count or first < 0:
        raise ValueError(f"the batch claims {batch.record_count} records from offset {batch.base_offset}, its "
                         f"payload holds {buffers.count}, and the run starts at offset {start}")
    if batch.timestamp_type == LOG_APPEND_TIME or buffers.deltas is None:
        timestamps: pa.Array | int = (batch.max_timestamp if batch.timestamp_type == LOG_APPEND_TIME
                                      else batch.first_timestamp) * 1000
        if not -1 << 63 <= timestamps < 1 << 63:
            raise OverflowError(f"timestamp {timestamps // 1000} ms is out of range")
    else:
        deltas = pa.Array.from_buffers(pa.int64(), buffers.count, [None, pa.py_buffer(buffers.deltas)])
        timestamps = pc.multiply_checked(pc.add_checked(deltas.slice(first, count), batch.first_timestamp),
                                         1000).cast(_TIMESTAMP)
    keys = _column(buffers.key_bounds, buffers.key_array, buffers.key_nulls, first, count)
    values = _column(buffers.value_bounds, buffers.value_array, buffers.value_nulls, first, count)
    return _Run(start, count, keys, values, timestamps, batch.timestamp_type,
                _headers(buffers, first, count) if include_headers else None,
                keys.high - keys.low + values.high - values.low)


def _column(bounds: memoryview, packed: memoryview, nulls: memoryview | None, first: int, length: int) -> _Column:
    bounds = bounds[8 * first:8 * (first + length) + 4]
    (low,), (high,) = columnar.BOUND.unpack_from(bounds), columnar.BOUND.unpack_from(bounds, 8 * length)
    if not 0 <= low <= high <= len(packed):
        raise ValueError(f"items {first} to {first + length - 1} lie at bytes {low} to {high} of a column of "
                         f"{len(packed)}")
    if nulls is not None:
        nulls = nulls[first:first + length]
    return _Column(bounds, packed, low, high, nulls, nulls is not None and bytes(nulls).count(1) == length)


def _pieces(column: _Column) -> pa.Array:
    """A run's pieces over its batch's array as it lies, unchecked."""
    return pa.Array.from_buffers(pa.binary(), len(column.bounds) // 4 - 1,
                                 [None, pa.py_buffer(column.bounds), pa.py_buffer(column.packed)])


def _check(run: _Run) -> None:
    """Check a run's keys and values alone, as its group checks them together."""
    for column in (run.keys, run.values):
        _pieces(column).validate(full=True)


def _record_batch(topic: str, partition: int, runs: list[_Run], include_headers: bool) -> pa.RecordBatch:
    count = sum(run.count for run in runs)
    if all(run.start + run.count == after.start for run, after in zip(runs, runs[1:])):
        offsets = pc.add(_progression(1, 0, count), runs[0].start)
    else:  # never in a kafkalite log, whose batches follow each other
        offsets = _concat([pc.add(_progression(1, 0, run.count), run.start) for run in runs])
    if all(isinstance(run.timestamps, int) for run in runs):
        timestamps = _runs([run.timestamps for run in runs], runs, _TIMESTAMP)
    else:
        timestamps = _concat([run.timestamps if isinstance(run.timestamps, pa.Array)
                              else pa.repeat(pa.scalar(run.timestamps, _TIMESTAMP), run.count) for run in runs])
    arrays = [_binary(runs, [run.keys for run in runs], count), _binary(runs, [run.values for run in runs], count),
              pa.repeat(pa.scalar(topic, pa.string()), count), pa.repeat(pa.scalar(partition, pa.int32()), count),
              offsets, timestamps,
              _runs([run.timestamp_type for run in runs], runs, pa.int32())]
    if include_headers:
        arrays.append(_concat([run.headers for run in runs]))
    return pa.RecordBatch.from_arrays(arrays, schema=_SCHEMA_WITH_HEADERS if include_headers else _SCHEMA)


def _concat(arrays: list[pa.Array]) -> pa.Array:
    return arrays[0] if len(arrays) == 1 else pa.concat_arrays(arrays)


def _runs(values: list[int], runs: list[_Run], type_: pa.DataType) -> pa.Array:
    """Each run's one value repeated over its records: one repeat when the runs agree, as they mostly do."""
    if all(value == values[0] for value in values):
        return pa.repeat(pa.scalar(values[0], type_), sum(run.count for run in runs))
    ends = pa.array(list(accumulate(run.count for run in runs)), pa.int32())
    return pc.run_end_decode(pa.RunEndEncodedArray.from_arrays(ends, pa.array(values, type_)))


def _binary(runs: list[_Run], columns: list[_Column], count: int) -> pa.Array:
    """The keys or values of runs: their pieces in one Arrow array checked in C, every second piece (the items)
    taken in one call, and their nulls as a validity bitmap.

    A lone run's pieces lie over its batch's array as it is. Several runs' bytes are joined, and each run's bounds
    shifted to where its bytes land: each run's first and last bounds were checked to lie in its batch's array
    (`_column`), so the joined bounds ascend only if every run's lie inside its own bytes.
    """
    if all(column.all_null for column in columns):
        return pa.nulls(count, pa.binary())
    if len(columns) == 1:
        pieces = _pieces(columns[0])
    else:
        joined = b"".join([column.bounds[:-4] for column in columns[:-1]] + [columns[-1].bounds])
        lands = accumulate([0] + [column.high - column.low for column in columns[:-1]])
        shifts = pa.RunEndEncodedArray.from_arrays(
            pa.array(list(accumulate(2 * run.count for run in runs[:-1])) + [2 * count + 1], pa.int32()),
            pa.array([land - column.low for land, column in zip(lands, columns)], pa.int32()))
        bounds = pc.add_checked(pa.Array.from_buffers(pa.int32(), 2 * count + 1, [None, pa.py_buffer(joined)]),
                                pc.run_end_decode(shifts)).buffers()[1]
        packed = pa.py_buffer(b"".join([column.packed[column.low:column.high] for column in columns]))
        pieces = pa.Array.from_buffers(pa.binary(), 2 * count, [None, bounds, packed])
    pieces.validate(full=True)
    items = pieces.take(_progression(2, 1, count))
    if all(column.nulls is None for column in columns):
        return items
    return _with_nulls(items, b"".join([bytes(run.count) if column.nulls is None else column.nulls
                                        for run, column in zip(runs, columns)]))


def _with_nulls(items: pa.Array, flags: bytes | np.ndarray) -> pa.Array:
    """`items` null where their flag (one byte each, as a payload holds them) is not 0."""
    validity = pc.equal(pa.Array.from_buffers(pa.uint8(), len(items), [None, pa.py_buffer(flags)]), 0).buffers()[1]
    return pa.Array.from_buffers(pa.binary(), len(items), [validity, *items.buffers()[1:]])


def _headers(buffers: columnar.ColumnBuffers, first: int, count: int) -> pa.Array:
    """The headers of records `first` to `first + count`: null for a record without headers, not an empty list,
    as Spark's KafkaRecordToRowConverter gives, so `headers IS NULL` finds the same rows under either source."""
    if buffers.headers is None:  # no record of the batch has headers
        return pa.nulls(count, _HEADERS)
    return pa.array([headers or None for headers in columnar.decode_headers(buffers)[first:first + count]], _HEADERS)


_IDLE_TIMEOUT_S = 300.0
"""Seconds a kept consumer may stay unused: Spark's spark.kafka.consumer.cache.timeout (5 minutes by default)."""

_CAPACITY = 16
"""Consumers kept unused at most, per process (Spark's Kafka source keeps 64, each with 1 MiB fetched at most; these
fetch 4 MiB): one per partition a worker reads, so a query over at most this many stays kept."""


class ConsumerCache:
    """Consumers kept open between the reads of a process, as Spark's Kafka source keeps its KafkaConsumers
    (KafkaDataConsumer's cache, per executor).

    A Spark task's read opened a consumer of its own, which connected, asked a broker for metadata and connected
    to the partition's leader before its first fetch: a tenth to a fifth of a small micro-batch, whose tasks each
    paid it. Spark runs one task at a time in a Python worker and keeps the worker for the next task, so a read
    takes a consumer kept open by an earlier read of the same partition (of the same cluster, with the same
    options) when there is one, on the Trio loop it was opened on (`bridge.KeptOpen`). One per partition, as
    Spark's are: a consumer's last poll left a fetch of its partition parked at the leader (the prefetch every
    poll starts), which answers when records come, the next micro-batch's; a consumer moved to another partition
    would wait up to fetch.max.wait.ms for it before it could fetch from that leader again. A read from where the
    consumer stands takes what that fetch brought; from anywhere else it seeks, which drops it, and asks for the
    topic's metadata afresh (`read_range`). A read gives its consumer back only once it has read its whole range;
    one that failed, or that Spark stopped early, is closed, so nothing of it carries over. At most `_CAPACITY`
    are kept, and none unused for longer than `_IDLE_TIMEOUT_S`: such are closed when the next read comes.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._idle: list[tuple[_ConsumerKey, float, bridge.KeptOpen[Consumer]]] = []  # oldest first
        self._pid = os.getpid()

    def read(self, options: SourceOptions, offsets: OffsetRange) -> Iterator[pa.RecordBatch]:
        """The Arrow batches of `offsets` (`read_range`) through a kept consumer, or a new one."""
        config = consumer_config(options)
        key = (options.bootstrap, tuple(sorted(config.items())), offsets.topic, offsets.partition)
        kept = self._take(key) or bridge.KeptOpen(lambda: Consumer(options.bootstrap, config))
        read_whole = False
        try:
            yield from kept.iterate(lambda consumer: read_range(options, offsets, consumer))
            read_whole = True
        finally:
            if read_whole:
                self._give_back(key, kept)
            else:
                kept.close()

    def clear(self) -> None:
        """Close every kept consumer (without waiting): the next reads open their own."""
        with self._locked():
            idle, self._idle = self._idle, []
        for _, _, kept in idle:
            kept.close()

    def _take(self, key: _ConsumerKey) -> bridge.KeptOpen[Consumer] | None:
        now = time.monotonic()
        with self._locked():
            expired = [entry for entry in self._idle if now - entry[1] > _IDLE_TIMEOUT_S]
            self._idle = [entry for entry in self._idle if now - entry[1] <= _IDLE_TIMEOUT_S]
            taken = next((index for index in reversed(range(len(self._idle))) if self._idle[index][0] == key), None)
            kept = self._idle.pop(taken)[2] if taken is not None else None
        for _, _, old in expired:
            old.close()
        return kept

    def _give_back(self, key: _ConsumerKey, kept: bridge.KeptOpen[Consumer]) -> None:
        with self._locked():
            self._idle.append((key, time.monotonic(), kept))
            excess, self._idle = self._idle[:-_CAPACITY], self._idle[-_CAPACITY:]
        for _, _, old in excess:
            old.close()

    def _locked(self) -> threading.Lock:
        """The lock, a new one in a forked copy, where the thread that held it may have stayed in the parent."""
        if self._pid != os.getpid():
            self._lock, self._pid = threading.Lock(), os.getpid()
        return self._lock


_ConsumerKey = tuple[str, tuple[tuple[str, object], ...], str, int]

CONSUMERS = ConsumerCache()
"""The process's kept consumers, from which every read of the source takes one."""


def consumer_config(options: SourceOptions) -> dict[str, object]:
    """The config of a consumer that `read_range` reads with: the connector's defaults, then the `kafka.*` options;
    the reader seeks where its range starts and never creates topics."""
    return {**_CONSUMER_DEFAULTS, **options.client_config, "auto.offset.reset": "none",
            "allow.auto.create.topics": False}


async def read_range(options: SourceOptions, offsets: OffsetRange, consumer: Consumer
                     ) -> AsyncIterator[pa.RecordBatch]:
    """The records of `offsets`, in offset order, as Arrow batches (`to_arrow`) of each poll's record batches, read
    with `consumer` (opened with `consumer_config`), which is assigned the partition alone."""
    tp = TopicPartition(offsets.topic, offsets.partition)
    timeout_s = options.poll_timeout_ms / 1000
    if consumer.assignment() != {tp} or await consumer.position(tp) != offsets.start:
        # Not where the last read stopped (see below): a retried task, a restarted query, another worker's reads
        # in between, or a topic deleted and created again, whose leader epochs the consumer must not keep.
        consumer.metadata.forget(tp.topic)
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
    if position != offsets.end:  # stand where the read stopped, where the next micro-batch's read begins
        consumer.seek(tp, offsets.end)


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
