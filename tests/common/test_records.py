"""Record batches: encoding round-trips, the crc, and the wire form the network layer sends."""

import dataclasses
import struct

import msgpack
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkalite.common import columnar, kafka_records
from kafkalite.common.errors import (
    CorruptMessageError, InvalidRecordError, UnsupportedCompressionTypeError, UnsupportedForMessageFormatError,
)
from kafkalite.common.records import LOG_APPEND_TIME, RECORD_BATCH_OVERHEAD, Record, RecordBatch, _checksum

RECORDS = [
    Record(b"k1", b"v1", 1_000, (("h", b"x"), ("empty", None))),
    Record(None, b"v2", 1_005),
    Record(b"k3", None, 999),
    Record(None, None, 1_010, (("only", b""),)),
]


def test_round_trip_keeps_keys_values_headers_and_absolute_timestamps():
    batch = RecordBatch.from_records(RECORDS)
    assert batch.records() == RECORDS
    assert batch.record_count == 4
    assert batch.first_timestamp == 1_000
    assert batch.max_timestamp == 1_010
    assert batch.size_in_bytes == RECORD_BATCH_OVERHEAD + len(batch.payload)
    batch.validate(deep=True)


def test_column_buffers_hold_each_key_and_value_column_with_the_bounds_of_its_items():
    """What a reader of columns (Spark's Arrow batches) takes as it lies in the payload: each column a msgpack
    array, cut by its bounds into [array and item header, item, item header, item, ...]."""
    buffers = RecordBatch.from_records(RECORDS, base_offset=10).column_buffers()
    assert buffers.count == 4
    assert msgpack.unpackb(buffers.key_array) == [b"k1", None, b"k3", None]
    assert msgpack.unpackb(buffers.value_array) == [b"v1", b"v2", None, None]
    key_bounds = buffers.key_bounds.cast("i").tolist()
    assert key_bounds == [0, 3, 5, 6, 6, 8, 10, 11, 11]
    assert [bytes(buffers.key_array[a:b]) for a, b in zip(key_bounds[1::2], key_bounds[2::2])] == [b"k1", b"", b"k3", b""]
    assert buffers.value_bounds.cast("i").tolist() == [0, 3, 5, 7, 9, 10, 10, 11, 11]
    assert bytes(buffers.key_nulls) == b"\x00\x01\x00\x01" and bytes(buffers.value_nulls) == b"\x00\x00\x01\x01"
    assert buffers.deltas is not None and buffers.deltas.cast("q").tolist() == [0, 5, -1, 10]
    assert columnar.decode(buffers)[3] == tuple(r.headers for r in RECORDS)
    shared = RecordBatch.from_records([Record(None, b"a"), Record(None, b"b")], default_timestamp=7).column_buffers()
    assert (shared.deltas, shared.headers, shared.value_nulls) == (None, None, None)
    assert bytes(shared.key_nulls) == b"\x01\x01"


@pytest.mark.parametrize("size", [0, 255, 256, 65535, 65536])
def test_bounds_follow_msgpack_headers_of_every_size(size):
    """bin8, bin16 and bin32 headers, and arrays of 16 items or more (array16)."""
    items = tuple(bytes(size) if i % 2 else None for i in range(17))
    batch = RecordBatch.from_records([Record(key, key) for key in items])
    batch.validate(deep=True)
    assert [r.key for r in batch.records()] == list(items)


@pytest.mark.parametrize("rows", [[[0, None], [0, None]], [[0, None, b"v", []], [0, None, b"v"]], [5, 6]])
def test_msgpack_rows_of_other_than_four_fields_are_corrupt(rows):
    """Batches written before the columnar payload hold msgpack rows: still read, and still checked."""
    payload = msgpack.packb(rows)
    batch = RecordBatch(0, -1, -1, -1, -1, 2, 0, 0, 0, _checksum(payload, 0, 2, 0, 0, -1, -1, -1), payload)
    with pytest.raises(CorruptMessageError, match="record batch at offset 0 cannot be decoded"):
        batch.column_buffers()


def test_msgpack_rows_read_as_records_and_as_columns():
    rows = [[0, b"k", b"v", [["h", b"x"]]], [3, None, None, []]]
    payload = msgpack.packb(rows)
    batch = RecordBatch(0, -1, -1, -1, -1, 2, 10, 13, 0, _checksum(payload, 0, 2, 10, 13, -1, -1, -1), payload)
    batch.validate(deep=True)
    assert batch.records() == [Record(b"k", b"v", 10, (("h", b"x"),)), Record(None, None, 13)]
    assert columnar.decode(batch.column_buffers())[1:3] == ((b"k", None), (b"v", None))


def _forged(payload: bytes, count: int = 2) -> RecordBatch:
    return RecordBatch(0, -1, -1, -1, -1, count, 0, 0, 0, _checksum(payload, 0, count, 0, 0, -1, -1, -1), payload)


@pytest.mark.parametrize("damage", [
    lambda p: p[:-1],                                          # shorter than its sections
    lambda p: p + b"x",                                        # bytes after the last column
    lambda p: p[:8] + b"\x01\x00\x00\x00" + p[12:],           # offsets that do not start at 0
    lambda p: p[:1] + b"\x80" + p[2:],                         # an unknown flag
    lambda p: p[:20],                                          # cut inside the bounds
    lambda p: p[:24] + (-1).to_bytes(4, "little", signed=True) + p[28:],  # keys of negative length
    lambda p: p[:24] + (99).to_bytes(4, "little") + p[28:],   # keys past the payload's end
])
def test_columnar_payload_that_does_not_frame_is_corrupt(damage):
    payload = damage(RecordBatch.from_records([Record(b"k", b"v1"), Record(b"k", b"v2")]).payload)
    with pytest.raises(CorruptMessageError, match="cannot be decoded"):
        _forged(payload).validate(deep=True)
    with pytest.raises(CorruptMessageError, match="cannot be decoded"):
        _forged(payload).records()


def test_columnar_sections_refuse_a_column_of_negative_length_that_the_other_makes_up_for():
    """Keys of length -1 and values one byte longer add up to the payload, but would cut it at a negative size."""
    payload = bytearray(RecordBatch.from_records([Record(b"k", b"v1"), Record(b"k", b"v2")]).payload)
    assert payload[24:28] == (7).to_bytes(4, "little") and payload[44:48] == (9).to_bytes(4, "little")
    payload[24:28], payload[44:48] = (-1).to_bytes(4, "little", signed=True), (17).to_bytes(4, "little")
    with pytest.raises(ValueError, match="needs more than its 64 bytes"):
        columnar.sections(bytes(payload))


def test_columnar_bounds_that_disagree_with_the_items_fail_deep_validation():
    """A forged payload whose bounds cut its values elsewhere than msgpack does would read differently in Spark."""
    payload = bytearray(RecordBatch.from_records([Record(b"k", b"v1"), Record(b"k", b"v2")]).payload)
    payload[8 + 20 + 4:8 + 20 + 8] = (4).to_bytes(4, "little")  # value bounds [0, 3, 5, 7, 9] become [0, 4, ...]
    with pytest.raises(CorruptMessageError, match="bounds or null masks do not match"):
        _forged(bytes(payload)).validate(deep=True)


def test_columnar_record_count_must_match_the_header():
    payload = RecordBatch.from_records([Record(b"k", b"v1"), Record(b"k", b"v2")]).payload
    with pytest.raises(InvalidRecordError, match="claims 3 records but holds 2"):
        _forged(payload, count=3).validate(deep=True)


def test_log_append_time_gives_every_record_the_batch_max_timestamp():
    """Kafka's LogAppendTime: the leader's clock in the batch's max timestamp stands for every record's."""
    stamped = dataclasses.replace(RecordBatch.from_records(RECORDS), attributes=0x08, max_timestamp=5_000)
    assert (stamped.timestamp_type, RecordBatch.from_records(RECORDS).timestamp_type) == (1, 0)
    assert [r.timestamp for r in stamped.records()] == [5_000] * 4


def test_missing_timestamps_take_the_default_or_stay_unset():
    records = [Record(b"a", b"1"), Record(b"b", b"2", 50)]
    stamped = RecordBatch.from_records(records, default_timestamp=42)
    assert [r.timestamp for r in stamped.records()] == [42, 50]
    assert (stamped.first_timestamp, stamped.max_timestamp) == (42, 50)
    unstamped = RecordBatch.from_records(records)
    assert [r.timestamp for r in unstamped.records()] == [-1, 50]


def test_offsets_and_records_and_offset_properties():
    batch = RecordBatch.from_records(RECORDS, base_offset=10)
    assert [offset for offset, _ in batch.offsets_and_records()] == [10, 11, 12, 13]
    assert (batch.last_offset, batch.next_offset) == (13, 14)


def test_empty_batch_is_invalid():
    with pytest.raises(InvalidRecordError):
        RecordBatch.from_records([])


def test_unencodable_record_is_invalid():
    with pytest.raises(InvalidRecordError):
        RecordBatch.from_records([Record(b"k", object())])  # type: ignore[arg-type]


def test_crc_detects_a_flipped_payload_byte():
    batch = RecordBatch.from_records(RECORDS)
    for position in (0, len(batch.payload) // 2, len(batch.payload) - 1):
        corrupted = bytearray(batch.payload)
        corrupted[position] ^= 0x01
        with pytest.raises(CorruptMessageError):
            dataclasses.replace(batch, payload=bytes(corrupted)).validate()


@pytest.mark.parametrize("field", ["record_count", "first_timestamp", "max_timestamp", "producer_id",
                                   "producer_epoch", "base_sequence", "attributes"])
def test_crc_covers_the_header_fields_kafka_covers(field):
    batch = RecordBatch.from_records(RECORDS)
    with pytest.raises(CorruptMessageError):
        dataclasses.replace(batch, **{field: getattr(batch, field) + 1}).validate()


def test_deep_validation_catches_a_count_the_crc_was_computed_over():
    payload = msgpack.packb([[0, b"k", b"v", []]])
    liar = RecordBatch.from_records([Record(b"k", b"v", 5), Record(b"k", b"v", 5)])
    forged = dataclasses.replace(liar, payload=payload)
    forged = dataclasses.replace(forged, crc=_crc_of(forged))
    forged.validate()
    with pytest.raises(InvalidRecordError, match="claims 2 records but holds 1"):
        forged.validate(deep=True)


def _forge(rows: object, *, count: int | None = None, first_timestamp: int = -1, max_timestamp: int = -1,
           packed: bytes | None = None) -> RecordBatch:
    """A batch whose payload is `rows` as a dishonest or buggy producer packs it, with a matching crc."""
    payload = msgpack.packb(rows) if packed is None else packed
    length = len(rows) if isinstance(rows, list) else 1
    batch = RecordBatch(0, -1, -1, -1, -1, length if count is None else count, first_timestamp, max_timestamp, 0,
                        0, payload)
    return dataclasses.replace(batch, crc=_crc_of(batch))


@pytest.mark.parametrize("rows, error, message", [
    ({"a": 1}, CorruptMessageError, "not a list of records"),
    ([[0, b"k", b"v", []], 7], InvalidRecordError, "record 1 is not a"),
    ([[0, b"k", b"v"]], InvalidRecordError, "record 0 is not a"),
    ([[0, b"k", 3, []]], InvalidRecordError, "record 0 has a value of type int"),
    ([[0, "text", b"v", []]], InvalidRecordError, "record 0 has a key of type str"),
    ([[0, b"k", b"v", []], [0.5, b"k", b"v", []]], InvalidRecordError, "record 1 has a timestamp delta of type"),
    ([[True, b"k", b"v", []]], InvalidRecordError, "timestamp delta of type bool"),
    ([[0, b"k", b"v", 5]], InvalidRecordError, "record 0 has a headers of type int"),
    ([[0, b"k", b"v", [["h", 1]]]], InvalidRecordError, "record 0 has a header that is not"),
    ([[0, b"k", b"v", [[b"h", b"x"]]]], InvalidRecordError, "header that is not"),
    ([[0, b"k", b"v", [["h", b"x", b"y"]]]], InvalidRecordError, "header that is not"),
    ([[3, b"k", b"v", []]], InvalidRecordError, "max timestamp is -1 but its records' is 2"),
    ([[-3, b"k", b"v", []]], InvalidRecordError, "negative record timestamp"),
])
def test_deep_validation_names_the_first_record_that_breaks_a_rule(rows, error, message):
    with pytest.raises(error, match=message):
        _forge(rows).validate(deep=True)


def test_deep_validation_checks_timestamps_against_the_header():
    good = RecordBatch.from_records([Record(None, b"a", 1000), Record(None, b"b", 900), Record(None, b"c", 1500)])
    good.validate(deep=True)
    assert [r.timestamp for r in good.records()] == [1000, 900, 1500]
    with pytest.raises(InvalidRecordError, match="max timestamp is 1400 but its records' is 1500"):
        _forge([list(row) for row in good.rows()], first_timestamp=1000, max_timestamp=1400).validate(deep=True)
    with pytest.raises(InvalidRecordError, match="negative record timestamp"):
        _forge([[0, None, b"a", []], [-20, None, b"b", []]], first_timestamp=10, max_timestamp=10).validate(deep=True)


def test_deep_validation_accepts_every_shape_the_producer_sends():
    batch = RecordBatch.from_records([Record(None, None), Record(b"", b""), Record(b"k", b"v" * 1000, 5,
                                                                                   (("h", b"1"), ("n", None)))])
    batch.validate(deep=True)


def test_undecodable_payload_is_corrupt():
    batch = RecordBatch.from_records(RECORDS)
    garbage = dataclasses.replace(batch, payload=b"\xc1\xc1")
    with pytest.raises(CorruptMessageError):
        garbage.records()
    with pytest.raises(CorruptMessageError):
        dataclasses.replace(garbage, crc=_crc_of(garbage)).validate(deep=True)


def _crc_of(batch: RecordBatch) -> int:
    """The crc a dishonest producer would compute over a forged batch."""
    return _checksum(batch.payload, batch.attributes, batch.record_count, batch.first_timestamp,
                     batch.max_timestamp, batch.producer_id, batch.producer_epoch, batch.base_sequence)


def test_with_offset_keeps_the_crc_valid_and_shares_the_payload():
    batch = RecordBatch.from_records(RECORDS, producer_id=7, producer_epoch=1, base_sequence=3)
    stored = batch.with_offset(1_000, 5)
    assert (stored.base_offset, stored.partition_leader_epoch) == (1_000, 5)
    assert stored.payload is batch.payload
    assert stored.crc == batch.crc
    stored.validate()
    assert [o for o, _ in stored.offsets_and_records()] == [1_000, 1_001, 1_002, 1_003]


def test_wire_round_trip_through_msgpack():
    batch = RecordBatch.from_records(RECORDS, base_offset=3, partition_leader_epoch=2, producer_id=9,
                                     producer_epoch=1, base_sequence=4, attributes=0)
    wire = msgpack.unpackb(msgpack.packb(batch.to_wire()))
    again = RecordBatch.from_wire(wire)
    assert again == batch
    again.validate(deep=True)


def test_from_wire_takes_a_tuple_and_gives_a_batch_equal_in_every_field():
    batch = RecordBatch.from_records(RECORDS, base_offset=3, partition_leader_epoch=2, producer_id=9,
                                     producer_epoch=1, base_sequence=4, attributes=0)
    again = RecordBatch.from_wire(tuple(batch.to_wire()))
    assert [getattr(again, f.name) for f in dataclasses.fields(RecordBatch)] == \
        [getattr(batch, f.name) for f in dataclasses.fields(RecordBatch)]
    assert not again.kafka_format and again.kafka() == batch.kafka()  # the conversion cache starts empty
    with pytest.raises(dataclasses.FrozenInstanceError):
        again.base_offset = 0  # type: ignore[misc]


@pytest.mark.parametrize("wire", [
    None, [], [1] * 10, [1] * 11, [True] + [1] * 9 + [b"x"], ["1"] + [1] * 9 + [b"x"],
    [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, b"x"], [1] * 9 + [1.0, b"x"], [1] * 5 + [False] + [1] * 4 + [b"x"],
    [1] * 10 + [bytearray(b"x")], [1] * 10 + [None], [1] * 12 + [b"x"], {"base_offset": 1},
])
def test_from_wire_rejects_malformed_shapes(wire):
    with pytest.raises(CorruptMessageError):
        RecordBatch.from_wire(wire)


record_strategy = st.builds(
    Record,
    key=st.none() | st.binary(max_size=20),
    value=st.none() | st.binary(max_size=50),
    timestamp=st.integers(min_value=0, max_value=2**41),
    headers=st.lists(st.tuples(st.text(max_size=5), st.none() | st.binary(max_size=5)), max_size=3).map(tuple),
)


@given(st.lists(record_strategy, min_size=1, max_size=20))
def test_any_records_round_trip(records):
    batch = RecordBatch.from_records(records)
    batch.validate(deep=True)
    assert batch.records() == records
    assert batch.max_timestamp == max(r.timestamp for r in records)


@given(st.lists(st.builds(
    Record,
    key=st.none() | st.binary(min_size=60, max_size=200),
    value=st.none() | st.binary(max_size=20_000),
    timestamp=st.integers(min_value=0, max_value=2**41),
    headers=st.lists(st.tuples(st.text(min_size=60, max_size=80), st.none() | st.binary(max_size=300)),
                     max_size=70).map(tuple),
), min_size=1, max_size=5))
def test_records_with_multi_byte_lengths_survive_the_kafka_encoding_and_back(records):
    """What a Kafka client reads of natively produced records, and a native reader of Kafka-produced ones: keys,
    values, header names and counts past 63 and timestamps far apart take varints of several bytes each way."""
    sent = RecordBatch.from_records(records)
    over_the_wire = RecordBatch.from_kafka_bytes(sent.with_offset(5, 0).kafka().to_kafka_bytes())[0]
    over_the_wire.validate(deep=True)
    assert over_the_wire.native().records() == records
    assert (over_the_wire.base_offset, over_the_wire.record_count) == (5, len(records))


def test_a_kafka_batch_stamped_with_log_append_time_stays_kafka_and_its_crc_holds() -> None:
    sent = RecordBatch.from_records([Record(b"k", b"v", timestamp=5), Record(None, b"w", timestamp=6)]).kafka()
    stamped = sent.with_log_append_time(1_000)
    assert stamped.kafka_format and stamped.timestamp_type == LOG_APPEND_TIME
    stamped.validate(deep=True)
    assert [(r.value, r.timestamp) for r in stamped.records()] == [(b"v", 1_000), (b"w", 1_000)]
    assert RecordBatch.from_kafka_bytes(stamped.with_offset(7, 0).to_kafka_bytes())[0].max_timestamp == 1_000


@pytest.mark.parametrize(("data", "error"), [
    # a whole message of the 0.10 format (magic 1), shorter than a v2 header
    (bytes.fromhex("0000000000000000000000191686e8db01000000018bcfe56800ffffffff000000036f6c64"),
     UnsupportedForMessageFormatError),
    (bytes(70), CorruptMessageError),  # a length of 0 frames nothing, whatever the magic byte says
    (bytes(12) + struct.pack(">i", -5) + bytes(60), CorruptMessageError),
    (bytes(8) + struct.pack(">i", 100) + bytes(5) + b"\x01" + bytes(20), CorruptMessageError),  # runs past the end
    (bytes(16), CorruptMessageError),
])
def test_a_record_set_is_framed_before_its_magic_is_judged(data: bytes, error: type[Exception]) -> None:
    """As Kafka's log input stream: a frame first, then its magic. A message of an older format is refused as such
    (the Produce handler answers INVALID_RECORD for it, in Kafka's words); bytes that frame nothing are corrupt."""
    with pytest.raises(error):
        RecordBatch.from_kafka_bytes(data)
    v2 = RecordBatch.from_records([Record(b"k", b"v", 1_700_000_000_000)]).to_kafka_bytes()
    assert [batch.record_count for batch in RecordBatch.from_kafka_bytes(v2 + v2)] == [1, 1]


def _record(body: bytes) -> bytes:
    """One v2 record: its length as a zigzag varint (one byte here), then `body`."""
    assert len(body) < 64
    return bytes([len(body) << 1]) + body


_FIELDS = b"\x00" + b"\x00\x00" + b"\x02k" + b"\x02v"  # attributes, timestamp and offset deltas, key "k", value "v"


@pytest.mark.parametrize(("section", "count", "message"), [
    (_record(_FIELDS + b"\x00"), 2, "the batch header counts 2 records but the batch holds 1"),
    (_record(_FIELDS + b"\x00" + b"\x00"), 1, "record 0 is 9 bytes long but its fields take 8"),
    (_record(_FIELDS + b"\x01"), 1, "Found invalid number of record headers -1"),
    (_record(_FIELDS + b"\x02" + b"\x06key" + b"\x20v"), 1, "field runs past the end of the records"),
    (_record(b"\x00" + b"\xff" * 11), 1, "varint longer than 10 bytes"),
    (_record(_FIELDS + b"\x02" + b"\x02\xff" + b"\x00"), 1, "can't decode byte 0xff"),
    (b"\x7f", 1, "record 0 claims -64 bytes"),
])
def test_a_kafka_record_section_that_does_not_hold_its_records_is_corrupt(section: bytes, count: int,
                                                                          message: str) -> None:
    """What a compacted topic's leader and every native reader decode, under a valid CRC: each way a section can
    lie about its records is CORRUPT_MESSAGE naming the fault, never an exception of the decoder's own."""
    with pytest.raises(CorruptMessageError, match=message):
        kafka_records.decode_records(section, 0, count)
    assert kafka_records.decode_records(_record(_FIELDS + b"\x00"), 0, 1) == [(0, b"k", b"v", ())]


@pytest.mark.parametrize(("codec", "payload", "error", "message"), [
    (5, b"anything", UnsupportedCompressionTypeError, "unknown compression codec 5"),
    (1, b"not gzip", CorruptMessageError, "cannot gzip-decompress a record batch"),
])
def test_a_record_section_no_codec_can_open_is_refused(codec: int, payload: bytes, error: type[Exception],
                                                       message: str) -> None:
    with pytest.raises(error, match=message):
        kafka_records.decode_records(payload, codec, 1)
