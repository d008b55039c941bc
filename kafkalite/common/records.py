"""Records and record batches: the unit every layer moves around.

A `RecordBatch` mirrors Kafka's RecordBatch v2 header; its records are one payload encoded once by the producer.
Brokers, logs and replicas only ever look at the header: appending, replicating and serving a batch of a
thousand records costs the same as a batch of one, and only a consumer (or a timestamp lookup) decodes the
payload.

The payload comes in one of two encodings, and a batch keeps the one it arrived in. A native producer's batch
holds its records column by column (`columnar`: keys and values as contiguous bytes with offsets, which a reader
of columns takes without a Python object per record; batches written before hold a msgpack array of rows, still
read), checksummed with CRC-32; a batch produced over the Kafka protocol holds Kafka's v2 record section
exactly as the client sent it (compressed or not), checksummed with CRC-32C as Kafka's header says, so it is
stored and served without re-encoding. Both checksums cover the same header fields.
A reader that needs the other encoding asks for `native()` or `kafka()`: the conversion keeps offsets, keys,
values, headers and timestamps, is done once, and is cached on the batch (the log's, which every replica in
the process shares).
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, fields

import msgpack

from kafkalite.common import columnar, kafka_records
from kafkalite.common.columnar import ColumnBuffers
from kafkalite.common.errors import (
    CorruptMessageError,
    InvalidRecordError,
    InvalidTimestampError,
    UnsupportedForMessageFormatError,
)
from kafkalite.common.kafka_records import Row

RECORD_BATCH_OVERHEAD = 61
"""Kafka's v2 batch header size, counted so that byte limits (max.message.bytes, fetch sizes) mean what they
mean in Kafka."""

NO_TIMESTAMP = -1

CREATE_TIME = 0
LOG_APPEND_TIME = 1
"""Kafka's timestamp types, as consumers (and Spark's `timestampType` column) report them."""

_LOG_APPEND_TIME_ATTRIBUTE = 0x08
"""Kafka's attributes bit for a batch whose records all carry the leader's append time (its max timestamp)."""
_TRANSACTIONAL_ATTRIBUTE = 0x10
_CONTROL_ATTRIBUTE = 0x20
"""Kafka's attributes bits for a batch in a transaction, and for a transaction marker."""

Header = tuple[str, bytes | None]

_DELTA_TYPES: frozenset[type] = frozenset({int})
_BYTES_OR_NULL: frozenset[type] = frozenset({bytes, type(None)})
_HEADERS_TYPES: frozenset[type] = frozenset({tuple})


# The fields Kafka's CRC covers: attributes, last offset delta, first and max timestamp, producer id, producer
# epoch, base sequence, record count. Base offset and partition leader epoch are left out because the leader
# rewrites them after the producer computed the checksum.
_CRC_FIELDS = struct.Struct(">hiqqqhii")
_WIRE_FIELDS = 11
# Kafka's v2 header: base offset, batch length, partition leader epoch, magic, crc, then the CRC fields.
_KAFKA_HEADER = struct.Struct(">qiibIhiqqqhii")
_KAFKA_PREFIX = struct.Struct(">qib")  # base offset, batch length, partition leader epoch, magic
_KAFKA_LENGTH_OFFSET = 12  # batch length counts the bytes after itself
_MAGIC = 2
_MAGIC_OFFSET = 16  # where every format, legacy messages too, has its magic byte: after offset, length, crc or epoch
_LENGTH = struct.Struct(">i")
_LEGACY_MIN_LENGTH = 14  # Kafka's LegacyRecord.RECORD_OVERHEAD_V0: shorter claims are corrupt, whatever their magic


@dataclass(frozen=True, slots=True)
class Record:
    """One record as users produce and consume it."""

    key: bytes | None
    value: bytes | None
    timestamp: int = NO_TIMESTAMP
    headers: tuple[Header, ...] = ()


def _checksum(payload: bytes, attributes: int, record_count: int, first_timestamp: int, max_timestamp: int,
              producer_id: int, producer_epoch: int, base_sequence: int, kafka: bool = False) -> int:
    try:
        header = _CRC_FIELDS.pack(attributes, record_count - 1, first_timestamp, max_timestamp, producer_id,
                                  producer_epoch, base_sequence, record_count)
    except struct.error as exc:
        raise CorruptMessageError(f"record batch header field out of range: {exc}") from None
    if kafka:
        return kafka_records.crc32c(payload, kafka_records.crc32c(header))
    return zlib.crc32(payload, zlib.crc32(header))


@dataclass(frozen=True, slots=True)
class RecordBatch:
    """Kafka's RecordBatch v2 header over a payload of records encoded once.

    A native payload holds `(timestamp_delta, key, value, headers)` per record, column by column (`columnar`), or
    as a msgpack array of rows in batches written before; timestamps are stored as deltas from `first_timestamp`,
    as in Kafka. With `kafka_format` the payload is Kafka's v2 record section instead and `crc` is its CRC-32C.
    """

    base_offset: int
    partition_leader_epoch: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int
    first_timestamp: int
    max_timestamp: int
    attributes: int
    crc: int
    payload: bytes
    kafka_format: bool = False
    _other_format: RecordBatch | None = field(default=None, compare=False, repr=False)  # the cached conversion

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.record_count - 1

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.record_count

    @property
    def size_in_bytes(self) -> int:
        return RECORD_BATCH_OVERHEAD + len(self.payload)

    @property
    def timestamp_type(self) -> int:
        """CREATE_TIME (each record keeps the producer's timestamp) or LOG_APPEND_TIME (the leader stamped the
        batch: every record's timestamp is the batch's max timestamp, as in Kafka)."""
        return LOG_APPEND_TIME if self.attributes & _LOG_APPEND_TIME_ATTRIBUTE else CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        """Part of a transaction: its records count once the transaction's marker commits them."""
        return bool(self.attributes & _TRANSACTIONAL_ATTRIBUTE)

    @property
    def is_control(self) -> bool:
        """A transaction marker, which only a transaction coordinator writes, never data."""
        return bool(self.attributes & _CONTROL_ATTRIBUTE)

    @property
    def compression(self) -> int:
        """Kafka's number for the codec compressing the record section (0: none), which only a Kafka-format
        payload can be."""
        return self.attributes & kafka_records.COMPRESSION_MASK

    @classmethod
    def from_records(cls, records: Sequence[Record], *, base_offset: int = 0, partition_leader_epoch: int = -1,
                     producer_id: int = -1, producer_epoch: int = -1, base_sequence: int = -1,
                     attributes: int = 0, default_timestamp: int | None = None) -> RecordBatch:
        """Encode `records` once; a record without a timestamp gets `default_timestamp` if one is given."""
        return cls.from_rows([(0, r.key, r.value, r.headers) for r in records],
                             timestamps=[r.timestamp for r in records], base_offset=base_offset,
                             partition_leader_epoch=partition_leader_epoch, producer_id=producer_id,
                             producer_epoch=producer_epoch, base_sequence=base_sequence, attributes=attributes,
                             default_timestamp=NO_TIMESTAMP if default_timestamp is None else default_timestamp)

    @classmethod
    def from_rows(cls, rows: list[Row], *, timestamps: Sequence[int] | None = None, base_offset: int = 0,
                  partition_leader_epoch: int = -1, producer_id: int = -1, producer_epoch: int = -1,
                  base_sequence: int = -1, attributes: int = 0, default_timestamp: int = NO_TIMESTAMP) -> RecordBatch:
        """Encode payload rows `(0, key, value, headers)` as they are, when no record has a timestamp of its own.

        This is the producer's usual batch, whose records all take the time the batch was opened: the rows it
        collected are encoded as they are. `timestamps`, one per row (NO_TIMESTAMP for "take the default"),
        turn the rows into deltas from the first record's timestamp, as Kafka stores them.
        """
        if not rows:
            raise InvalidRecordError("a record batch must hold at least one record")
        if timestamps is None or max(timestamps) < 0:
            first_timestamp = max_timestamp = default_timestamp
        else:
            stamped = [ts if ts >= 0 else default_timestamp for ts in timestamps]
            first_timestamp, max_timestamp = stamped[0], max(stamped)
            rows = [(ts - first_timestamp, key, value, headers)
                    for ts, (_, key, value, headers) in zip(stamped, rows, strict=True)]
        try:
            payload = columnar.encode(rows)
        except (TypeError, ValueError, OverflowError) as exc:
            raise InvalidRecordError(f"record cannot be encoded: {exc}") from None
        count = len(rows)
        crc = _checksum(payload, attributes, count, first_timestamp, max_timestamp, producer_id, producer_epoch,
                        base_sequence)
        return cls(base_offset, partition_leader_epoch, producer_id, producer_epoch, base_sequence, count,
                   first_timestamp, max_timestamp, attributes, crc, payload)

    def rows(self) -> tuple[Row, ...]:
        """The payload as stored, one `(timestamp delta, key, value, headers)` per record.

        For readers that build their own record type (the consumer's ConsumerRecord) without paying for a
        `Record` in between. A row of the wrong shape surfaces when it is unpacked: catch ValueError and
        TypeError there and call `corrupt`.
        """
        if self.kafka_format:
            return self.native().rows()
        try:
            if columnar.is_columnar(self.payload):
                return tuple(zip(*columnar.decode(columnar.sections(self.payload))))
            return msgpack.unpackb(self.payload, use_list=False)  # type: ignore[no-any-return]
        except (ValueError, TypeError, msgpack.UnpackException) as exc:
            raise self.corrupt(exc) from exc

    def column_buffers(self) -> ColumnBuffers:
        """The records as column sections over a columnar payload: for readers that build columns (Spark's Arrow
        batches) and take keys and values as contiguous bytes. A batch of another encoding is encoded first
        (a Kafka batch's native form is columnar and cached). CORRUPT_MESSAGE if the payload does not frame."""
        if self.kafka_format:
            return self.native().column_buffers()
        try:
            payload = self.payload if columnar.is_columnar(self.payload) else columnar.encode(self.rows())
            return columnar.sections(payload)
        except (ValueError, TypeError, OverflowError) as exc:
            raise self.corrupt(exc) from exc

    def corrupt(self, cause: Exception) -> CorruptMessageError:
        return CorruptMessageError(f"record batch at offset {self.base_offset} cannot be decoded: {cause}")

    def records(self) -> list[Record]:
        """Decode the payload, the only place records come back to life (consumers and timestamp lookups)."""
        log_append_time = self.timestamp_type == LOG_APPEND_TIME
        base = self.max_timestamp if log_append_time else self.first_timestamp
        try:
            return [Record(key, value, base if log_append_time else base + delta, headers)
                    for delta, key, value, headers in self.rows()]
        except (ValueError, TypeError) as exc:
            raise self.corrupt(exc) from exc

    def offsets_and_records(self) -> Iterator[tuple[int, Record]]:
        return enumerate(self.records(), self.base_offset)

    def with_log_append_time(self, timestamp: int) -> RecordBatch:
        """The batch stamped by a leader whose topic has message.timestamp.type=LogAppendTime, as Kafka stamps it:
        the timestamp type bit set and `timestamp` as the max timestamp, which every record then reports; the
        payload is untouched, the crc (which covers both fields) computed again."""
        attributes = self.attributes | _LOG_APPEND_TIME_ATTRIBUTE
        crc = _checksum(self.payload, attributes, self.record_count, self.first_timestamp, timestamp,
                        self.producer_id, self.producer_epoch, self.base_sequence, self.kafka_format)
        return RecordBatch(self.base_offset, self.partition_leader_epoch, self.producer_id, self.producer_epoch,
                           self.base_sequence, self.record_count, self.first_timestamp, timestamp, attributes, crc,
                           self.payload, self.kafka_format)

    def with_offset(self, base_offset: int, partition_leader_epoch: int) -> RecordBatch:
        """The batch as the leader stores it; the payload object is shared and the crc stays valid."""
        return RecordBatch(base_offset, partition_leader_epoch, self.producer_id, self.producer_epoch,
                           self.base_sequence, self.record_count, self.first_timestamp, self.max_timestamp,
                           self.attributes, self.crc, self.payload, self.kafka_format)

    # -- the two encodings ---------------------------------------------------------------------------------------

    def native(self) -> RecordBatch:
        """This batch with a native payload: itself, or its conversion, made once and cached.

        The conversion's payload is columnar, and its attributes lose the compression bits, since it is not
        compressed.
        CORRUPT_MESSAGE or UNSUPPORTED_COMPRESSION_TYPE if the Kafka records cannot be read.
        """
        if not self.kafka_format:
            return self
        if self._other_format is None:
            rows = kafka_records.decode_records(self.payload, self.attributes, self.record_count)
            self._cache(self._converted(columnar.encode(rows), self.attributes & ~kafka_records.COMPRESSION_MASK,
                                        kafka=False))
        return self._other_format  # type: ignore[return-value]

    def kafka(self) -> RecordBatch:
        """This batch with a Kafka v2 record section as payload: itself, or its conversion, made once and cached."""
        if self.kafka_format:
            return self
        if self._other_format is None:
            self._cache(self._converted(kafka_records.encode_records(self.rows()), self.attributes, kafka=True))
        return self._other_format  # type: ignore[return-value]

    def _converted(self, payload: bytes, attributes: int, *, kafka: bool) -> RecordBatch:
        crc = _checksum(payload, attributes, self.record_count, self.first_timestamp, self.max_timestamp,
                        self.producer_id, self.producer_epoch, self.base_sequence, kafka)
        return RecordBatch(self.base_offset, self.partition_leader_epoch, self.producer_id, self.producer_epoch,
                           self.base_sequence, self.record_count, self.first_timestamp, self.max_timestamp,
                           attributes, crc, payload, kafka, self)

    def _cache(self, converted: RecordBatch) -> None:
        object.__setattr__(self, "_other_format", converted)  # a cache, not state: the batch stays immutable

    def to_kafka_bytes(self) -> bytes:
        """The batch as Kafka's RecordBatch v2 bytes, header included: what a Kafka client fetches."""
        return b"".join(self.kafka_parts())

    def kafka_parts(self) -> tuple[bytes, bytes]:
        """The Kafka v2 bytes in two pieces, the 61-byte header and the stored records, so that a fetch response
        copies each batch's records once, joining all of them, rather than into a batch of their own first."""
        batch = self.kafka()
        return _KAFKA_HEADER.pack(
            batch.base_offset, RECORD_BATCH_OVERHEAD - _KAFKA_LENGTH_OFFSET + len(batch.payload),
            batch.partition_leader_epoch, _MAGIC, batch.crc, batch.attributes, batch.record_count - 1,
            batch.first_timestamp, batch.max_timestamp, batch.producer_id, batch.producer_epoch, batch.base_sequence,
            batch.record_count), batch.payload

    @classmethod
    def from_kafka_bytes(cls, data: bytes) -> list[RecordBatch]:
        """Split a Kafka record set (one or more v2 batches back to back, as a Produce request carries it).

        Checks each header's framing and magic, but not the crc: `validate` does, where the broker decides to
        pay for it. CORRUPT_MESSAGE for bytes that do not frame into whole batches; UNSUPPORTED_FOR_MESSAGE_FORMAT
        for the pre-0.11 formats (magic 0 and 1), which no client speaking Produce v3 or later sends.
        """
        batches = []
        pos = 0
        size = len(data)
        while pos < size:
            if size - pos > _MAGIC_OFFSET and data[pos + _MAGIC_OFFSET] != _MAGIC \
                    and _LEGACY_MIN_LENGTH <= _LENGTH.unpack_from(data, pos + 8)[0] <= size - pos - 12:
                # as Kafka's log input stream: a frame first (a message of an older format may be shorter than a
                # v2 header), then the magic; bytes that frame nothing are corrupt, whatever their magic byte
                raise UnsupportedForMessageFormatError(f"record batch magic {data[pos + _MAGIC_OFFSET]}: only v2 "
                                                       "batches are accepted")
            if size - pos < RECORD_BATCH_OVERHEAD:
                raise CorruptMessageError(f"a record batch header needs {RECORD_BATCH_OVERHEAD} bytes; "
                                          f"{size - pos} remain at byte {pos}")
            (base_offset, length, leader_epoch, _magic, crc, attributes, last_delta, first_timestamp, max_timestamp,
             producer_id, producer_epoch, base_sequence, count) = _KAFKA_HEADER.unpack_from(data, pos)
            end = pos + _KAFKA_LENGTH_OFFSET + length
            if length < RECORD_BATCH_OVERHEAD - _KAFKA_LENGTH_OFFSET or end > size:
                raise CorruptMessageError(f"record batch at byte {pos} claims a length of {length} bytes; "
                                          f"{size - pos - _KAFKA_LENGTH_OFFSET} follow")
            if count < 1 or last_delta != count - 1:
                raise CorruptMessageError(f"record batch at byte {pos} counts {count} records with last offset "
                                          f"delta {last_delta}")
            batches.append(cls(base_offset, leader_epoch, producer_id, producer_epoch, base_sequence, count,
                               first_timestamp, max_timestamp, attributes, crc,
                               data[pos + RECORD_BATCH_OVERHEAD:end], True))
            pos = end
        return batches

    def validate(self, *, deep: bool = False, keyed_for: str | None = None,
                 timestamps_within: tuple[int, int] | None = None) -> None:
        """Check the crc (cheap, no decoding); `deep` also checks every record against the header, as Kafka's
        LogValidator checks what producers send before the leader appends it. `keyed_for` names the compacted
        topic partition the batch is for: a record without a key is INVALID_RECORD there, as in Kafka.
        `timestamps_within` bounds the records' own timestamps (message.timestamp.before.max.ms and after.max.ms
        around the leader's clock): one outside is INVALID_TIMESTAMP, in Kafka's words.

        CORRUPT_MESSAGE (CorruptMessageError) for a wrong crc or a payload that is not a list of records;
        INVALID_RECORD (InvalidRecordError) naming the first record that breaks a rule: the count the header
        claims, the `(timestamp delta, key, value, headers)` shape, bytes or null keys and values, `(str,
        bytes or null)` headers, and timestamps that agree with the header's first and max timestamp. The
        checks are C-level passes over the decoded rows (`map`, `zip`, `set`), not a Python loop per record.

        A Kafka-format batch gets the crc check only, deep or not: its records were framed by the client library
        that checksummed them, and walking them in Python on every produce would cost more than the rest of the
        produce path. They are decoded when a native reader first asks (`native()`), which reports a malformed
        one as CORRUPT_MESSAGE. For `keyed_for` or `timestamps_within` its records are decoded, and the decoding
        dropped: kept, as `native()` keeps it, it would hold the batch twice for as long as the log keeps it.
        """
        expected = _checksum(self.payload, self.attributes, self.record_count, self.first_timestamp,
                             self.max_timestamp, self.producer_id, self.producer_epoch, self.base_sequence,
                             self.kafka_format)
        if expected != self.crc:
            raise CorruptMessageError(
                f"record batch at offset {self.base_offset} is corrupt (stored crc {self.crc}, "
                f"computed {expected})")
        columns: tuple[Sequence[object], Sequence[object]] | None = None  # (timestamp deltas, keys)
        if deep and not self.kafka_format:
            columns = self._validate_columnar() if columnar.is_columnar(self.payload) \
                else self._validate_rows(self.rows())
        if keyed_for is None and timestamps_within is None:
            return
        if columns is None:
            rows = kafka_records.decode_records(self.payload, self.attributes, self.record_count) \
                if self.kafka_format else self.rows()
            columns = [row[0] for row in rows], [row[1] for row in rows]
        deltas, keys = columns
        if keyed_for is not None and None in keys:
            raise InvalidRecordError(f"Compacted topic cannot accept message without key in topic partition "
                                     f"{keyed_for}.")
        if timestamps_within is not None:
            self._check_timestamps(deltas, *timestamps_within)

    def _check_timestamps(self, deltas: Sequence[object], low: int, high: int) -> None:
        """Every record's timestamp (but NO_TIMESTAMP) within [low, high]: min and max first, a loop to name the
        first record outside only when there is one."""
        first = self.first_timestamp
        if first + min(deltas) >= low and first + max(deltas) <= high:  # type: ignore[call-overload, operator]
            return
        for index, delta in enumerate(deltas):
            timestamp = first + delta  # type: ignore[operator]
            if timestamp != NO_TIMESTAMP and not low <= timestamp <= high:
                raise InvalidTimestampError(f"Timestamp {timestamp} of message with offset {self.base_offset + index} "
                                            f"is out of range. The timestamp should be within [{low}, {high}]")

    def _validate_columnar(self) -> tuple[Sequence[object], Sequence[object]]:
        """The checks of a columnar payload; returns its timestamp deltas and keys."""
        try:
            buffers = columnar.sections(self.payload)
            columns = columnar.decode(buffers)
        except (ValueError, TypeError, msgpack.UnpackException) as exc:
            raise self.corrupt(exc) from exc
        if buffers.count != self.record_count:
            raise self._invalid(f"claims {self.record_count} records but holds {buffers.count}")
        self._validate_columns(*columns)
        if not columnar.consistent(buffers, columns[1], columns[2]):
            raise self.corrupt(ValueError("the key or value bounds or null masks do not match the keys and values"))
        return columns[0], columns[1]

    def _validate_rows(self, rows: object) -> tuple[Sequence[object], Sequence[object]]:
        """The checks of a payload of rows; returns its timestamp deltas and keys."""
        if type(rows) is not tuple:
            raise self.corrupt(TypeError(f"the payload is a {type(rows).__name__}, not a list of records"))
        if len(rows) != self.record_count:
            raise self._invalid(f"claims {self.record_count} records but holds {len(rows)}")
        try:
            shapes = set(map(len, rows))  # a row that is no sequence fails here; a str, bytes or map row of
        except TypeError:                 # four items fails on its columns' types below
            shapes = set()
        if shapes != {4}:
            index = next(i for i, row in enumerate(rows) if type(row) is not tuple or len(row) != 4)
            raise self._invalid(f"record {index} is not a (timestamp delta, key, value, headers) row: "
                                f"{rows[index]!r:.80}")
        columns = tuple(zip(*rows))
        self._validate_columns(*columns)
        return columns[0], columns[1]

    def _validate_columns(self, deltas: tuple[object, ...], keys: tuple[object, ...], values: tuple[object, ...],
                          headers: tuple[object, ...]) -> None:
        distinct_deltas = set(deltas)  # usually {0}: the producer's records share the batch's timestamp
        for name, column, kinds, allowed in (
                ("timestamp delta", deltas, set(map(type, distinct_deltas)), _DELTA_TYPES),
                ("key", keys, set(map(type, keys)), _BYTES_OR_NULL),
                ("value", values, set(map(type, values)), _BYTES_OR_NULL),
                ("headers", headers, set(map(type, headers)), _HEADERS_TYPES)):
            if not kinds <= allowed:
                index = next(i for i, item in enumerate(column) if type(item) not in allowed)
                raise self._invalid(f"record {index} has a {name} of type {type(column[index]).__name__}; "
                                    f"expected {' or '.join(sorted(t.__name__ for t in allowed))}")
        if any(headers):
            for index, record_headers in enumerate(headers):
                for header in record_headers:
                    if type(header) is not tuple or len(header) != 2 or type(header[0]) is not str \
                            or type(header[1]) not in _BYTES_OR_NULL:
                        raise self._invalid(f"record {index} has a header that is not (str, bytes or null): "
                                            f"{header!r:.80}")
        if self.first_timestamp + min(distinct_deltas) < NO_TIMESTAMP:
            raise self._invalid(f"has a negative record timestamp (first timestamp {self.first_timestamp}, "
                                f"smallest delta {min(distinct_deltas)})")
        if self.timestamp_type == CREATE_TIME and self.first_timestamp + max(distinct_deltas) != self.max_timestamp:
            raise self._invalid(f"says its max timestamp is {self.max_timestamp} but its records' is "
                                f"{self.first_timestamp + max(distinct_deltas)}")

    def _invalid(self, problem: str) -> InvalidRecordError:
        return InvalidRecordError(f"record batch at offset {self.base_offset} {problem}")

    def to_wire(self) -> list[int | bytes]:
        """The native wire form, always with a native payload: a native client never sees Kafka records."""
        if self.kafka_format:
            return self.native().to_wire()
        return [self.base_offset, self.partition_leader_epoch, self.producer_id, self.producer_epoch,
                self.base_sequence, self.record_count, self.first_timestamp, self.max_timestamp, self.attributes,
                self.crc, self.payload]

    @classmethod
    def from_wire(cls, obj: object) -> RecordBatch:
        """Rebuild a batch from `to_wire`'s list, rejecting shapes a well-behaved peer never sends.

        The crc is not checked here: the receiver decides when to pay for `validate()`. The fields are set through
        their slots, not the frozen dataclass's `__init__`, which sets each by name through `object.__setattr__`: a
        consumer decodes every batch it fetches here, hundreds a poll in a producer's default 16 KiB batches, and
        that `__init__` and a set of the fields' types were three fifths of this call.
        """
        if type(obj) is not list and type(obj) is not tuple or len(obj) != _WIRE_FIELDS:
            raise CorruptMessageError(f"a record batch is a list of {_WIRE_FIELDS} fields")
        (base_offset, partition_leader_epoch, producer_id, producer_epoch, base_sequence, record_count,
         first_timestamp, max_timestamp, attributes, crc, payload) = obj
        if not int is type(base_offset) is type(partition_leader_epoch) is type(producer_id) \
                is type(producer_epoch) is type(base_sequence) is type(record_count) is type(first_timestamp) \
                is type(max_timestamp) is type(attributes) is type(crc) or type(payload) is not bytes:
            # int exactly, never a bool; bytes exactly, as msgpack gives
            raise CorruptMessageError("record batch fields must be integers followed by a bytes payload")
        if record_count < 1:
            raise CorruptMessageError(f"record batch has record count {record_count}")
        batch = _new_object(cls)
        for set_field, value in zip(_WIRE_FIELD_SETTERS, obj):
            set_field(batch, value)
        _set_kafka_format(batch, False)
        _set_other_format(batch, None)
        return batch


_new_object = object.__new__
# The slots' setters in the dataclass's field order, whose first _WIRE_FIELDS are the wire's (`to_wire`), for
# `from_wire`; the two fields the wire leaves out come last.
_SLOT_SETTERS = tuple(getattr(RecordBatch, f.name).__set__ for f in fields(RecordBatch))
_WIRE_FIELD_SETTERS = _SLOT_SETTERS[:_WIRE_FIELDS]
_set_kafka_format, _set_other_format = _SLOT_SETTERS[_WIRE_FIELDS:]
