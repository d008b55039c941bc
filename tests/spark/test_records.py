"""Arrow batches from fetched record batches, without Spark: the columns Spark gets, exact to the record; and what
a reader does when the records it owes do not come."""

from __future__ import annotations

import dataclasses
import random
import re
from datetime import datetime, timezone

import msgpack
import pytest

from kafkalite.client import FetchedBatch
from kafkalite.common.errors import CorruptMessageError
from kafkalite.common.records import Record, RecordBatch, _checksum
from kafkalite.embedded import EmbeddedCluster
from kafkalite.spark import KafkaliteDataSource
from kafkalite.spark.planning import OffsetRange
from kafkalite.spark.planning import DataLossError
from kafkalite.spark.records import _SCHEMA, _SCHEMA_WITH_HEADERS, _at_once, _one_by_one, to_arrow

from .conftest import numbered, produce

pytestmark = pytest.mark.spark

RECORDS = [
    Record(b"k1", b"v1", 1_000, (("h", b"x"), ("empty", None))),
    Record(None, b"v2", 1_005),
    Record(b"k3", None, 999),
    Record(None, None, 1_010, (("only", b""),)),
]


def _time(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, timezone.utc)


def test_a_run_across_batches_is_cut_at_the_start_and_the_end_with_the_kafka_source_types() -> None:
    first = RecordBatch.from_records(RECORDS, base_offset=10)
    second = RecordBatch.from_records([Record(None, b"z"), Record(b"y", b"w")], base_offset=14, default_timestamp=7)
    [batch] = to_arrow([FetchedBatch("t", 1, 11, first), FetchedBatch("t", 1, 14, second)], 15, include_headers=True)
    assert batch.schema == _SCHEMA_WITH_HEADERS
    assert batch.to_pylist() == [
        {"key": key, "value": value, "topic": "t", "partition": 1, "offset": offset, "timestamp": _time(ms),
         "timestampType": 0, "headers": [{"key": k, "value": v} for k, v in headers] or None}
        for key, value, offset, ms, headers in [(None, b"v2", 11, 1_005, ()), (b"k3", None, 12, 999, ()),
                                                (None, None, 13, 1_010, (("only", b""),)), (None, b"z", 14, 7, ())]]
    assert to_arrow([FetchedBatch("t", 1, 14, second)], 14, include_headers=False) == []


def test_log_append_time_batches_give_every_record_the_batch_max_timestamp_and_type_1() -> None:
    stamped = dataclasses.replace(RecordBatch.from_records(RECORDS), attributes=0x08, max_timestamp=5_000)
    [batch] = to_arrow([FetchedBatch("t", 0, 0, stamped)], 4, include_headers=False)
    assert batch.schema == _SCHEMA
    assert batch.column("timestamp").to_pylist() == [_time(5_000)] * 4
    assert batch.column("timestampType").to_pylist() == [1] * 4


def test_batches_of_msgpack_rows_and_of_kafka_records_read_alike() -> None:
    """Batches written before the columnar payload, and batches produced over the Kafka protocol."""
    rows = [[0, b"k", b"v", [["h", b"x"]]], [3, None, None, []]]
    payload = msgpack.packb(rows)
    legacy = RecordBatch(5, -1, -1, -1, -1, 2, 10, 13, 0, _checksum(payload, 0, 2, 10, 13, -1, -1, -1), payload)
    kafka = RecordBatch.from_kafka_bytes(legacy.to_kafka_bytes())[0]
    expected = RecordBatch.from_records([Record(b"k", b"v", 10, (("h", b"x"),)), Record(None, None, 13)],
                                        base_offset=5)
    for batch in (legacy, kafka):
        assert to_arrow([FetchedBatch("t", 0, 5, batch)], 7, True) == \
            to_arrow([FetchedBatch("t", 0, 5, expected)], 7, True)


def test_a_batch_big_enough_for_spark_goes_alone_and_smaller_ones_share_an_arrow_batch_up_to_65536_rows() -> None:
    """No copy of a batch big enough for Spark; a producer's small batches are not handed over one by one, nor are
    a poll's 1 MiB batches (about 9,500 records of 100 bytes each)."""
    def batch(base: int, count: int) -> FetchedBatch:
        return FetchedBatch("t", 0, base, RecordBatch.from_records([Record(None, b"v")] * count, base_offset=base))

    fetched = [batch(0, 70_000), batch(70_000, 9_500), batch(79_500, 50_000), batch(129_500, 6_100),
               batch(135_600, 200), batch(135_800, 10)]
    arrow = to_arrow(fetched, 135_805, include_headers=False)
    assert [b.num_rows for b in arrow] == [70_000, 65_600, 205]  # 9,500 + 50,000 + 6,100 reach 65,536: anew
    assert [b.column("offset")[0].as_py() for b in arrow] == [0, 70_000, 135_600]
    assert arrow[1].column("offset").to_pylist() == list(range(70_000, 135_600))


def test_every_record_keeps_its_own_key_value_and_offset_in_batches_of_growing_size() -> None:
    """Offsets and the items' places come from arrays the reader keeps and grows: each size, cut or whole, reads
    exactly its own records."""
    for base, count, start in [(0, 10, 3), (100, 9_000, 4_100), (20_000, 70_000, 1)]:
        records = [Record(b"k%d" % i if i % 3 else None, b"v%d" % i, 1_000 + i) for i in range(count)]
        fetched = [FetchedBatch("t", 2, base + start, RecordBatch.from_records(records, base_offset=base))]
        arrow = to_arrow(fetched, base + count, include_headers=False)
        assert sum(batch.num_rows for batch in arrow) == count - start
        rows = [row for batch in arrow for row in batch.to_pylist()]
        assert rows == [{"key": b"k%d" % i if i % 3 else None, "value": b"v%d" % i, "topic": "t", "partition": 2,
                         "offset": base + i, "timestamp": _time(1_000 + i), "timestampType": 0}
                        for i in range(start, count)]


@pytest.mark.parametrize("seed", range(20))
def test_small_batches_of_every_shape_share_an_arrow_batch_record_for_record(seed: int) -> None:
    """Small record batches become one Arrow batch's columns together: keys and values null in none, some or all
    of a batch's records, timestamps of their own, the batch's or the log's, headers or none, and gaps between
    batches; each record keeps its own fields."""
    rng = random.Random(seed)

    def item(mode: str, i: int) -> bytes | None:
        return None if mode == "all" or (mode == "some" and i % 2) else b"x" * rng.randrange(300) + b"%d" % i

    fetched, expected, base = [], [], 1_000
    for _ in range(rng.randrange(1, 12)):
        count, key_mode, value_mode = rng.randrange(1, 40), rng.choice(["none", "some", "all"]), rng.choice(
            ["none", "some", "all"])
        own_time, default_time = rng.random() < 0.5, rng.randrange(10**12)
        records = [Record(item(key_mode, i), item(value_mode, i), default_time + rng.randrange(-5, 5) if own_time
                          else -1, (("h", b"%d" % i),) if rng.random() < 0.3 else ()) for i in range(count)]
        batch = RecordBatch.from_records(records, base_offset=base, default_timestamp=default_time)
        log_time = rng.random() < 0.3
        if log_time:
            batch = dataclasses.replace(batch, attributes=0x08, max_timestamp=default_time + 7)
        start = base + rng.randrange(count) if not fetched or rng.random() < 0.2 else base  # a consumer cuts only
        # the first, but a run that starts inside any batch reads alike
        fetched.append(FetchedBatch("t", 4, start, batch))
        expected += [{"key": r.key, "value": r.value, "topic": "t", "partition": 4, "offset": base + i,
                      "timestamp": _time(batch.max_timestamp if log_time
                                         else r.timestamp if own_time else default_time),
                      "timestampType": int(log_time), "headers": [{"key": k, "value": v} for k, v in r.headers] or None}
                     for i, r in enumerate(records) if base + i >= start]
        base += count + rng.choice([0, 0, 3])
    end = fetched[-1].batch.next_offset - rng.randrange(fetched[-1].batch.next_offset - fetched[-1].start)
    expected = [row for row in expected if row["offset"] < end]
    include_headers = rng.random() < 0.5
    if not include_headers:
        expected = [{name: field for name, field in row.items() if name != "headers"} for row in expected]
    arrow = to_arrow(fetched, end, include_headers=include_headers)
    assert len(arrow) == 1, f"seed {seed}"
    assert arrow[0].to_pylist() == expected, f"seed {seed}"


def _poll(rng: random.Random, batches: int) -> tuple[list[FetchedBatch], int]:
    """A consumer's poll of small columnar batches as `_at_once` takes them: the first cut at the position, every
    shape of nulls and timestamps, headers stored (not asked for), gaps between batches; and where it ends."""
    def item(mode: str, i: int) -> bytes | None:
        return None if mode == "all" or (mode == "some" and i % 2) else b"x" * rng.randrange(200) + b"%d" % i

    fetched, base = [], rng.randrange(10**9)
    for _ in range(batches):
        count, key_mode, value_mode = rng.randrange(1, 40), rng.choice(["none", "some", "all"]), rng.choice(
            ["none", "some", "all"])
        own_time, default_time = rng.random() < 0.5, rng.randrange(-10**3, 10**13)
        records = [Record(item(key_mode, i), item(value_mode, i), max(0, default_time + rng.randrange(-9, 9))
                          if own_time else -1, (("h", b"%d" % i),) if rng.random() < 0.3 else ())
                   for i in range(count)]
        batch = RecordBatch.from_records(records, base_offset=base, default_timestamp=default_time)
        if rng.random() < 0.3:
            batch = dataclasses.replace(batch, attributes=0x08, max_timestamp=rng.randrange(10**13))
        fetched.append(FetchedBatch("t", 4, base + (rng.randrange(count) if not fetched else 0), batch))
        base += count + rng.choice([0, 0, 3])
    return fetched, fetched[-1].batch.next_offset - rng.randrange(fetched[-1].batch.record_count + 3)


@pytest.mark.parametrize("seed", range(40))
def test_a_poll_of_small_batches_is_read_at_once_as_batch_by_batch(seed: int) -> None:
    """A producer's small batches are taken apart together (`_at_once`), not with a `_run` each: the same Arrow
    batch, record for record, whatever their nulls, timestamps, gaps and cuts."""
    fetched, end = _poll(random.Random(seed), random.Random(seed).randrange(2, 30))
    together = _at_once(fetched, end, include_headers=False)
    one_by_one = _one_by_one(fetched, end, include_headers=False)
    if fetched[1].start >= end:  # nothing past the first batch: a batch alone goes as it lies
        assert together is None, f"seed {seed}"
        return
    assert together is not None and len(together) == len(one_by_one) == 1, f"seed {seed}"
    assert together[0].schema == _SCHEMA
    assert together[0].to_pylist() == one_by_one[0].to_pylist(), f"seed {seed}"
    assert together[0].column("offset").to_pylist() == [
        offset for entry in fetched for offset in range(entry.start, min(entry.batch.next_offset, end))], f"seed {seed}"


def test_batches_with_headers_asked_for_are_read_at_once_only_when_none_has_any() -> None:
    plain = [FetchedBatch("t", 0, 2 * i, RecordBatch.from_records([Record(None, b"v%d" % i)] * 2, base_offset=2 * i))
             for i in range(3)]
    together = _at_once(plain, 6, include_headers=True)
    assert together is not None and together[0].schema == _SCHEMA_WITH_HEADERS
    assert together[0].to_pylist() == _one_by_one(plain, 6, include_headers=True)[0].to_pylist()
    assert together[0].column("headers").to_pylist() == [None] * 6
    with_headers = [*plain, FetchedBatch("t", 0, 6, RecordBatch.from_records([Record(None, b"h", -1, (("k", b""),))],
                                                                             base_offset=6))]
    assert _at_once(with_headers, 7, include_headers=True) is None
    assert to_arrow(with_headers, 7, include_headers=True)[0].column("headers").to_pylist() == \
        [None] * 6 + [[{"key": "k", "value": b""}]]


@pytest.mark.parametrize("seed", range(60))
def test_a_poll_with_a_forged_byte_is_read_at_once_only_as_batch_by_batch_reads_it(seed: int) -> None:
    """Reading batches together checks what reading them one by one checks: a payload with a byte changed in its
    header, bounds or null flags gives the same records both ways, or is left to the batch-by-batch path (which
    fails naming the batch); never other records, never bytes outside the payloads."""
    rng = random.Random(seed)
    fetched, end = _poll(rng, rng.randrange(2, 6))
    end = fetched[-1].batch.next_offset
    victim = rng.randrange(len(fetched))
    payload = bytearray(fetched[victim].batch.payload)
    for _ in range(rng.randrange(1, 4)):
        payload[rng.randrange(min(len(payload), 8 + 17 * fetched[victim].batch.record_count))] = rng.randrange(256)
    fetched[victim] = fetched[victim]._replace(batch=dataclasses.replace(fetched[victim].batch,
                                                                         payload=bytes(payload)))
    together = _at_once(fetched, end, include_headers=False)
    try:
        one_by_one = _one_by_one(fetched, end, include_headers=False)
    except CorruptMessageError:
        assert together is None, f"seed {seed}"
    else:
        assert together is None or together[0].to_pylist() == one_by_one[0].to_pylist(), f"seed {seed}"


def test_a_null_slice_of_a_batch_with_some_keys_and_batches_of_different_times_read_record_for_record() -> None:
    """The cut first batch keeps only null keys and values of a batch that has others; three batches each give
    all their records one time of their own."""
    first = RecordBatch.from_records([Record(b"k0", b"v0"), Record(None, None), Record(None, None)],
                                     base_offset=0, default_timestamp=5)
    second = RecordBatch.from_records([Record(b"k3", None)], base_offset=3, default_timestamp=7)
    third = dataclasses.replace(RecordBatch.from_records([Record(None, b"v4"), Record(b"k5", b"v5")], base_offset=4),
                                attributes=0x08, max_timestamp=9)
    [batch] = to_arrow([FetchedBatch("t", 0, 1, first), FetchedBatch("t", 0, 3, second),
                        FetchedBatch("t", 0, 4, third)], 6, include_headers=False)
    assert batch.schema == _SCHEMA
    assert [(row["key"], row["value"], row["offset"], row["timestamp"], row["timestampType"])
            for row in batch.to_pylist()] == [
        (None, None, 1, _time(5), 0), (None, None, 2, _time(5), 0), (b"k3", None, 3, _time(7), 0),
        (None, b"v4", 4, _time(9), 1), (b"k5", b"v5", 5, _time(9), 1)]


def test_record_batches_share_an_arrow_batch_only_up_to_64_mib_of_keys_and_values() -> None:
    """The JVM holds an Arrow batch whole (and an Arrow binary array holds 2 GiB): batches whose keys and values
    would pass 64 MiB start a new one."""
    value = bytes(1 << 20)
    fetched = [FetchedBatch("t", 0, 10 * i, RecordBatch.from_records([Record(b"k%d" % i, value)] * 10,
                                                                      base_offset=10 * i)) for i in range(8)]
    arrow = to_arrow(fetched, 80, include_headers=False)
    assert [batch.num_rows for batch in arrow] == [60, 20]  # six batches of 10 MiB and their keys fit in 64 MiB
    assert [offset for batch in arrow for offset in batch.column("offset").to_pylist()] == list(range(80))
    assert arrow[1].column("key").to_pylist() == [b"k%d" % (i // 10) for i in range(60, 80)]


@pytest.mark.parametrize("forge, message", [
    (lambda batch: dataclasses.replace(batch, record_count=4),  # the offsets it claims
     "2 to 5 cannot be decoded: the batch claims 4 records from offset 2, its payload holds 2"),
    (lambda batch: dataclasses.replace(batch, attributes=0x08, max_timestamp=1 << 62),
     "2 to 3 cannot be decoded: timestamp 4611686018427387904 ms is out of range"),
    (lambda batch: dataclasses.replace(batch, payload=batch.payload[:32] + (99).to_bytes(4, "little")
                                       + batch.payload[36:]),  # value bounds [0, 3, 5, 7, 9]: [0, 99, 5, ...]
     "2 to 3 cannot be decoded: .*offset"),
])
def test_a_forged_batch_among_good_ones_fails_the_task_naming_its_own_offsets(forge, message: str) -> None:
    fetched = [FetchedBatch("t", 5, 2 * i, RecordBatch.from_records([Record(None, b"v")] * 2, base_offset=2 * i))
               for i in range(3)]
    fetched[1] = fetched[1]._replace(batch=forge(fetched[1].batch))
    with pytest.raises(CorruptMessageError, match=f"t-5: records at offsets {message}"):
        to_arrow(fetched, 6, include_headers=False)


def test_a_run_whose_first_bound_lies_outside_its_batch_fails_naming_its_offsets() -> None:
    """The bytes a group joins are cut where each run's first and last bounds say: a bound past its batch's
    column fails before the cut, where a join would put the next batch's bytes in the wrong place."""
    payload = bytearray(RecordBatch.from_records([Record(None, b"v%d" % i) for i in range(3)]).payload)
    payload[8 + 28 + 8:8 + 28 + 12] = (200).to_bytes(4, "little")  # value bounds [0, 3, 5, ...]: [0, 3, 200, ...]
    forged = RecordBatch(30, -1, -1, -1, -1, 3, 0, 0, 0, 0, bytes(payload))
    fetched = [FetchedBatch("t", 1, 31, forged),
               FetchedBatch("t", 1, 33, RecordBatch.from_records([Record(None, b"w")], base_offset=33))]
    with pytest.raises(CorruptMessageError, match="t-1: records at offsets 31 to 32 cannot be decoded: items 1 to 2 "
                                                  "lie at bytes 200 to 13 of a column of 13"):
        to_arrow(fetched, 34, include_headers=False)


def test_offsets_past_their_data_fail_the_task_naming_partition_and_offsets() -> None:
    """A forged payload must fail as CORRUPT_MESSAGE in the reader, never read memory it does not hold."""
    payload = bytearray(RecordBatch.from_records([Record(b"k", b"v1"), Record(b"k", b"v2")]).payload)
    payload[8 + 20 + 4:8 + 20 + 8] = (99).to_bytes(4, "little")  # value bounds [0, 3, 5, 7, 9]: [0, 99, 5, ...]
    forged = RecordBatch(20, -1, -1, -1, -1, 2, 0, 0, 0, 0, bytes(payload))
    with pytest.raises(CorruptMessageError, match="t-3: records at offsets 20 to 21 cannot be decoded"):
        to_arrow([FetchedBatch("t", 3, 20, forged)], 22, include_headers=False)


@pytest.mark.parametrize("fail_on_data_loss", [True, False])
def test_records_the_partition_no_longer_holds_are_data_loss_after_those_read_are_handed_over(
        cluster: EmbeddedCluster, fail_on_data_loss: bool) -> None:
    """A range planned up to offset 40 of a partition that now ends at 30 (truncated since, say): the poll at 30
    brings nothing, and the partition's offsets say why. Without failOnDataLoss the 30 records read before reach
    Spark and the task ends; with it, the task fails naming the partition and the offsets."""
    topic = f"owed-{str(fail_on_data_loss).lower()}"
    cluster.create_topic(topic, 1, 3)
    produce(cluster, topic, numbered(1, 30))
    source = KafkaliteDataSource({"kafka.bootstrap.servers": cluster.bootstrap_servers, "subscribe": topic,
                                  "failondataloss": str(fail_on_data_loss).lower(),  # lower-cased, as from Spark
                                  "kafkaconsumer.polltimeoutms": "300"})
    read = source.streamReader(None).read(OffsetRange(topic, 0, 0, 40))
    if fail_on_data_loss:
        with pytest.raises(DataLossError, match=re.escape(f"Offsets 30 to 39 of {topic}-0 are gone (the partition now "
                                                          "holds offsets 0 to 29)")):
            list(read)
    else:
        assert [row["value"] for batch in read for row in batch.to_pylist()] == [b"0:%d" % i for i in range(30)]


@pytest.mark.parametrize("fail_on_data_loss", [True, False])
def test_records_still_there_but_slow_to_come_fail_the_task_whatever_fail_on_data_loss_says(
        cluster: EmbeddedCluster, fail_on_data_loss: bool) -> None:
    """As Spark's KafkaDataConsumer: a poll that times out on records the partition still holds is a timeout, which
    Spark may retry. Before, it was data loss: under failOnDataLoss=false a slow broker made the query skip the
    range and commit it, records the cluster held never read."""
    topic = f"slow-{str(fail_on_data_loss).lower()}"
    cluster.create_topic(topic, 1, 3)
    produce(cluster, topic, numbered(1, 30))
    source = KafkaliteDataSource({"kafka.bootstrap.servers": cluster.bootstrap_servers, "subscribe": topic,
                                  "failondataloss": str(fail_on_data_loss).lower(),
                                  "kafkaconsumer.polltimeoutms": "300"})
    read = source.streamReader(None).read(OffsetRange(topic, 0, 0, 30))
    cluster.fail_requests("Fetch", delay=3, times=None)
    try:
        with pytest.raises(TimeoutError, match=re.escape(f"Cannot fetch record for offset 0 of {topic}-0 in 300 "
                                                         "milliseconds (kafkaConsumer.pollTimeoutMs); it is still "
                                                         "there, between the partition's log start 0 and its high "
                                                         "watermark 30")):
            list(read)
    finally:
        cluster.clear_request_faults()
    read = source.streamReader(None).read(OffsetRange(topic, 0, 0, 30))  # Spark's retry of the task
    assert [row["value"] for batch in read for row in batch.to_pylist()] == [b"0:%d" % i for i in range(30)]