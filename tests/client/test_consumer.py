"""The consumer against a real cluster: positions, seeks, resets, poll limits, long polls and leader changes."""

from __future__ import annotations

import math
import socket
from typing import Any

import msgpack
import pytest
import trio

from kafkalite.client import (
    Admin, Consumer, ConsumerRecord, LogTruncationError, NoOffsetForPartitionError, OffsetAndMetadata, Producer,
)
from kafkalite.cluster import Cluster
from kafkalite.common.errors import (
    CorruptMessageError, InvalidGroupIdError, InvalidTopicError, NetworkExceptionError, OffsetOutOfRangeError,
    UnknownServerError, UnknownTopicOrPartitionError,
)
from kafkalite.common.records import Record, RecordBatch, _checksum
from kafkalite.common.types import TopicPartition

pytestmark = pytest.mark.usefixtures("autojump_clock")

TP = TopicPartition("events", 0)


async def fill(cluster: Cluster, count: int, *, partitions: int = 1) -> None:
    if "events" not in cluster.topics():
        await cluster.create_topic("events", partitions=partitions, replication_factor=3)
    for p in range(partitions if count else 0):
        await cluster.produce("events", p, [Record(None, b"%d" % i) for i in range(count)])


async def test_positions_follow_seeks_and_polls(autojump_clock: Any, cluster: Cluster, bootstrap: Any) -> None:
    await fill(cluster, 10)
    async with Consumer(bootstrap) as consumer:
        consumer.assign([TP])
        assert consumer.assignment() == {TP}
        assert await consumer.position(TP) == 10  # auto.offset.reset=latest
        consumer.seek(TP, 4)
        assert await consumer.position(TP) == 4
        records = await consumer.poll(5)
        assert [r.offset for r in records] == list(range(4, 10))
        assert await consumer.position(TP) == 10
        consumer.seek_to_beginning([TP])
        assert await consumer.position(TP) == 0
        assert [r.value for r in await consumer.poll(5)] == [b"%d" % i for i in range(10)]
        consumer.seek(TP, 3)
        consumer.seek_to_end()
        assert await consumer.position(TP) == 10
        assert await consumer.poll(1) == []
        with pytest.raises(ValueError, match="not assigned"):
            consumer.seek(TopicPartition("events", 1), 0)


async def test_poll_batches_hands_out_fetched_batches_from_the_position(
        autojump_clock: Any, cluster: Cluster, bootstrap: Any) -> None:
    """Undecoded batches, the first from the position, positions moved past them; a batch poll() began comes
    whole with `start` where poll() stopped."""
    await fill(cluster, 100)
    await cluster.produce("events", 0, [Record(None, b"late")])
    async with Consumer(bootstrap, max_poll_records=30) as consumer:
        consumer.assign([TP])
        consumer.seek(TP, 57)
        assert [r.offset for r in await consumer.poll(5)] == list(range(57, 87))
        fetched = await consumer.poll_batches(5)
        assert [(f.topic, f.partition, f.start, f.batch.base_offset, f.batch.record_count) for f in fetched] == [
            ("events", 0, 87, 0, 100), ("events", 0, 100, 100, 1)]
        assert fetched[1].batch.records() == [Record(None, b"late", fetched[1].batch.first_timestamp)]
        assert await consumer.position(TP) == 101
        assert await consumer.poll_batches(0.5) == []
        consumer.seek(TP, 99)
        assert [(r.offset, r.value) for r in await consumer.poll(5)] == [(99, b"99"), (100, b"late")]


async def test_a_log_append_time_topic_gives_records_the_leader_s_time_and_says_so(
        autojump_clock: Any, cluster: Cluster, bootstrap: Any) -> None:
    """message.timestamp.type=LogAppendTime: the leader's clock replaces the producer's timestamps, the produce
    response reports it, and the consumer marks the records timestamp type 1 (CreateTime topics: 0)."""
    await cluster.create_topic("stamped", 1, 3, {"message.timestamp.type": "LogAppendTime"})
    await cluster.create_topic("created", 1, 3)
    async with Producer(bootstrap) as producer:
        handles = [await producer.send(topic, b"v", timestamp=1_000) for topic in ("stamped", "created")]
        await producer.flush()
        stamped, created = [await handle for handle in handles]
    async with Consumer(bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([TopicPartition("stamped", 0), TopicPartition("created", 0)])
        records: dict[str, Any] = {}
        while len(records) < 2:
            records.update((r.topic, r) for r in await consumer.poll(5))
    assert stamped.timestamp > 1_000 and created.timestamp == 1_000
    assert (records["stamped"].timestamp, records["stamped"].timestamp_type) == (stamped.timestamp, 1)
    assert (records["created"].timestamp, records["created"].timestamp_type) == (1_000, 0)


async def test_a_seek_inside_a_batch_skips_the_records_before_it(autojump_clock: Any, cluster: Cluster, bootstrap: Any) -> None:
    await fill(cluster, 100)  # one batch of 100 records
    async with Consumer(bootstrap) as consumer:
        consumer.assign([TP])
        consumer.seek(TP, 57)
        assert [r.offset for r in await consumer.poll(5)] == list(range(57, 100))


async def test_poll_returns_at_most_max_poll_records(autojump_clock: Any, cluster: Cluster, bootstrap: Any) -> None:
    await fill(cluster, 25, partitions=2)
    async with Consumer(bootstrap, {"auto.offset.reset": "earliest", "max.poll.records": 7}) as consumer:
        consumer.assign([TopicPartition("events", 0), TopicPartition("events", 1)])
        sizes = []
        seen = []
        while len(seen) < 50:
            batch = await consumer.poll(5)
            sizes.append(len(batch))
            seen.extend((r.partition, r.offset) for r in batch)
    assert max(sizes) == 7
    assert sorted(seen) == [(p, o) for p in range(2) for o in range(25)]


async def test_a_poll_that_hands_out_records_has_the_next_fetch_in_flight(
        autojump_clock: Any, cluster: Cluster, bootstrap: Any) -> None:
    """As Kafka's consumer pipelines: while the application works on one poll's records the next fetch runs, so a
    poll with no time to wait finds the records after them."""
    await fill(cluster, 0)
    for i in range(3):
        await cluster.produce("events", 0, [Record(None, b"%d" % i)])  # a batch each
    config = {"auto.offset.reset": "earliest", "max.partition.fetch.bytes": 1}  # a fetch brings one batch
    async with Consumer(bootstrap, config) as consumer:
        consumer.assign([TP])
        assert [r.value for r in await consumer.poll(5)] == [b"0"]
        await trio.sleep(1)  # the application at work
        assert [r.value for r in await consumer.poll(0)] == [b"1"]
        consumer.seek(TP, 0)  # while the fetch of offset 2 is in flight: its answer is dropped
        assert [r.value for r in await consumer.poll(5)] == [b"0"]
        assert await consumer.position(TP) == 1


async def test_a_poll_waits_for_records_produced_meanwhile(autojump_clock: Any, cluster: Cluster, bootstrap: Any) -> None:
    await fill(cluster, 0)
    async with Consumer(bootstrap, auto_offset_reset="earliest") as consumer, \
            Producer(bootstrap, linger_ms=0) as producer:
        consumer.assign([TP])
        assert await consumer.position(TP) == 0

        async def produce_later() -> None:
            await trio.sleep(3)
            await (await producer.send("events", b"late"))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(produce_later)
            started = trio.current_time()
            records = await consumer.poll(30)
        assert [r.value for r in records] == [b"late"]
        assert 3 <= trio.current_time() - started < 4


async def test_fetch_min_bytes_holds_a_fetch_up_to_fetch_max_wait(autojump_clock: Any, cluster: Cluster, bootstrap: Any) -> None:
    await fill(cluster, 1)
    config = {"auto.offset.reset": "earliest", "fetch.min.bytes": 1_000_000, "fetch.max.wait.ms": 2000}
    async with Consumer(bootstrap, config) as consumer:
        consumer.assign([TP])
        await consumer.position(TP)
        started = trio.current_time()
        records = await consumer.poll(30)
        assert len(records) == 1
        assert 2 - 1e-6 <= trio.current_time() - started < 2.5
        started = trio.current_time()
        assert await consumer.poll(1) == []
        assert trio.current_time() - started == pytest.approx(1)


@pytest.mark.parametrize(("reset", "expected"), [("earliest", [b"0", b"1", b"2", b"3"]), ("latest", [b"3"])])
async def test_auto_offset_reset(autojump_clock: Any, cluster: Cluster, bootstrap: Any, reset: str, expected: list[bytes]) -> None:
    await fill(cluster, 3)
    async with Consumer(bootstrap, auto_offset_reset=reset) as consumer:
        consumer.assign([TP])
        await consumer.position(TP)
        await cluster.produce("events", 0, [Record(None, b"3")])
        records = []
        while len(records) < len(expected):
            records.extend(await consumer.poll(5))
    assert [r.value for r in records] == expected


async def test_auto_offset_reset_none_needs_a_seek(autojump_clock: Any, cluster: Cluster, bootstrap: Any) -> None:
    await fill(cluster, 3)
    async with Consumer(bootstrap, auto_offset_reset="none") as consumer:
        consumer.assign([TP])
        with pytest.raises(NoOffsetForPartitionError):
            await consumer.poll(1)
        consumer.seek(TP, 1)
        assert [r.offset for r in await consumer.poll(5)] == [1, 2]
        consumer.seek(TP, 50)
        with pytest.raises(OffsetOutOfRangeError):
            await consumer.poll(5)


async def test_an_out_of_range_position_is_reset(autojump_clock: Any, cluster: Cluster, bootstrap: Any) -> None:
    await fill(cluster, 3)
    async with Consumer(bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([TP])
        consumer.seek(TP, 50)
        assert [r.offset for r in await consumer.poll(5)] == [0, 1, 2]


async def test_a_broker_error_while_resetting_positions_comes_out_of_poll_as_itself(
        autojump_clock: Any, cluster: Cluster, bootstrap: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """ListOffsets run in a nursery inside poll(); an error the application must see still comes out bare."""
    await fill(cluster, 1)
    replica_manager = cluster.broker(cluster.leader_for("events", 0)).replica_manager

    def failing_partition(*args: Any) -> Any:
        raise RuntimeError("the log directory is gone")

    monkeypatch.setattr(replica_manager, "_leader_partition", failing_partition)
    async with Consumer(bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([TP])
        with pytest.raises(UnknownServerError, match="the log directory is gone"):
            await consumer.poll(5)


async def test_iteration_yields_records_in_order(autojump_clock: Any, cluster: Cluster, bootstrap: Any) -> None:
    await fill(cluster, 20)
    seen = []
    async with Consumer(bootstrap, auto_offset_reset="earliest", max_poll_records=3) as consumer:
        consumer.assign([TP])
        async for record in consumer:
            seen.append(record.offset)
            if record.offset == 19:
                break
        assert await consumer.position(TP) == 20
    assert seen == list(range(20))


async def test_a_seek_or_assign_inside_async_for_drops_only_the_moved_partition_s_records(
        autojump_clock: Any, cluster: Cluster, bootstrap: Any) -> None:
    """The iterator hands out one poll's records, whose positions poll() already moved past: a seek drops the
    records of the partition it moves that the loop has yet to see, and no other's, which would otherwise be
    lost (their positions say consumed); a new assignment drops only those of partitions no longer assigned."""
    await fill(cluster, 10, partitions=3)
    p0, p1, p2 = (TopicPartition("events", p) for p in range(3))
    async with Consumer(bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([p0, p1])
        seen: dict[int, list[int]] = {0: [], 1: [], 2: []}
        async for record in consumer:  # one poll brings both partitions' records, p0's first
            seen[record.partition].append(record.offset)
            if (record.partition, record.offset) == (0, 2) and len(seen[0]) == 3:
                consumer.seek(p0, 8)
            if len(seen[0]) + len(seen[1]) == 15:
                break
        assert seen == {0: [0, 1, 2, 8, 9], 1: list(range(10)), 2: []}
        consumer.seek_to_beginning()
        seen = {0: [], 1: [], 2: []}
        async for record in consumer:
            seen[record.partition].append(record.offset)
            if (record.partition, record.offset) == (0, 1):
                consumer.assign([p1, p2])
            if len(seen[2]) == 10:
                break
        assert seen == {0: [0, 1], 1: list(range(10)), 2: list(range(10))}


async def test_poll_serves_partitions_in_turn_so_none_starves(autojump_clock: Any, cluster: Cluster,
                                                              bootstrap: Any) -> None:
    """As Kafka's consumer (KIP-74), a partition whose fetched records are all handed out goes to the back: the
    records it is fetched again wait behind those the others had waiting, and it is asked for after them. So
    when each fetch brings more than a poll hands out, the partitions are served in turn, instead of the first
    in the assignment taking every poll its new fetches arrive for."""
    await cluster.create_topic("events", partitions=4, replication_factor=3)
    for p in range(4):
        for _ in range(20):
            await cluster.produce("events", p, [Record(None, b"%d" % i) for i in range(50)])
    counts = dict.fromkeys(range(4), 0)
    async with Consumer(bootstrap, auto_offset_reset="earliest", max_poll_records=50,
                        max_partition_fetch_bytes=9000) as consumer:  # a fetch brings several polls' worth
        consumer.assign([TopicPartition("events", p) for p in range(4)])
        with trio.fail_after(60):
            while sum(counts.values()) < 2800:
                for record in await consumer.poll(1):
                    counts[record.partition] += 1
                await trio.sleep(0.01)  # the application at work, while the next fetches arrive
    assert max(counts.values()) <= 2 * min(counts.values()), counts


async def test_poll_batches_serves_partitions_in_turn_when_a_fetch_holds_only_some(autojump_clock: Any) -> None:
    """A broker fills a fetch response in its request's order, up to fetch.max.bytes: as in Kafka, partitions
    whose batches were handed out are asked for last next time, so the others get their turn. (One broker, so
    that one request asks for both partitions.)"""
    async with Cluster(brokers=1, seed=5) as cluster:
        await cluster.create_topic("events", partitions=2, replication_factor=1)
        for _ in range(30):
            for p in range(2):
                await cluster.produce("events", p, [Record(None, bytes(10_000))])
        order: list[int] = []
        async with Consumer(cluster, auto_offset_reset="earliest", fetch_max_bytes=15_000) as consumer:
            consumer.assign([TopicPartition("events", p) for p in range(2)])
            with trio.fail_after(60):
                while len(order) < 20:
                    order += [fetched.partition for fetched in await consumer.poll_batches(1)]
    assert 8 <= order[:20].count(1) <= 12, order


async def test_a_paused_partition_is_neither_fetched_nor_handed_out_until_resumed(
        autojump_clock: Any, cluster: Cluster, bootstrap: Any) -> None:
    """Kafka's pause()/resume(): records a paused partition had fetched wait, its position stays, the others go
    on; resumed, it continues exactly where it stopped, and a poll waiting meanwhile wakes for it."""
    await fill(cluster, 10, partitions=2)
    p0, p1 = TopicPartition("events", 0), TopicPartition("events", 1)
    async with Consumer(bootstrap, auto_offset_reset="earliest", max_poll_records=4) as consumer:
        consumer.assign([p0, p1])
        first = await consumer.poll(5)
        assert [(r.partition, r.offset) for r in first] == [(0, 0), (0, 1), (0, 2), (0, 3)]
        consumer.pause([p0])
        assert consumer.paused() == {p0}
        rest: list[ConsumerRecord] = []
        with trio.fail_after(10):
            while len(rest) < 10:
                rest += await consumer.poll(1)
        assert {r.partition for r in rest} == {1} and [r.offset for r in rest] == list(range(10))
        assert await consumer.poll(1) == [] and await consumer.position(p0) == 4
        await cluster.produce("events", 0, [Record(None, b"later")])
        consumer.pause([p1])  # nothing fetched at all now: only resume() can wake the poll below
        async with trio.open_nursery() as nursery:
            waited: list[ConsumerRecord] = []

            async def wait_for_records() -> None:
                waited.extend(await consumer.poll(3600))

            nursery.start_soon(wait_for_records)
            await trio.sleep(5)
            assert waited == []  # paused: nothing, however long the poll
            started = trio.current_time()
            consumer.resume([p0])
        assert trio.current_time() - started < 1
        assert consumer.paused() == {p1}
        resumed = waited
        with trio.fail_after(10):
            while len(resumed) < 7:
                resumed += await consumer.poll(1)
        assert [(r.partition, r.offset) for r in resumed] == [(0, offset) for offset in range(4, 11)]
        with pytest.raises(ValueError, match="not assigned"):
            consumer.pause([TopicPartition("events", 5)])


async def test_the_consumer_follows_a_leader_change(autojump_clock: Any, cluster: Cluster, bootstrap: Any) -> None:
    await fill(cluster, 10)
    async with Consumer(bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([TP])
        first = []
        while len(first) < 10:
            first.extend(await consumer.poll(5))
        old_leader = cluster.leader_for("events", 0)
        await cluster.kill_broker(old_leader)
        await cluster.wait_until(lambda: cluster.leader_for("events", 0) not in (old_leader, -1), timeout=60)
        async with Producer(bootstrap) as producer:
            for i in range(10, 20):
                await producer.send("events", b"%d" % i)
        later = []
        with trio.fail_after(60):
            while len(later) < 10:
                later.extend(await consumer.poll(5))
    assert [r.value for r in first + later] == [b"%d" % i for i in range(20)]


async def truncate_under_a_reader(cluster: Cluster, read: Any) -> None:
    """Five records reach both replicas of a 2-replica partition; with the follower dead, five more reach only the
    leader, and `read()` consumes the ten. The leader dies; the follower comes back and is elected uncleanly with
    only the first five, and takes ten new records at offsets 5 to 14."""
    await cluster.create_topic("events", 1, 2, {"unclean.leader.election.enable": True})
    leader, follower = (await cluster.describe_topic("events"))[0].replicas
    await cluster.wait_for_leader("events", 0)
    await cluster.produce("events", 0, [Record(None, b"old-%d" % i) for i in range(5)])
    await cluster.kill_broker(follower)
    await cluster.wait_until(lambda: list(cluster.partition_state("events", 0).isr) == [leader], timeout=60)
    await cluster.produce("events", 0, [Record(None, b"old-%d" % i) for i in range(5, 10)])
    await read()
    await cluster.kill_broker(leader)
    await cluster.restart_broker(follower)
    assert await cluster.wait_for_leader("events", 0, not_on=[leader]) == follower
    assert await cluster.produce("events", 0, [Record(None, b"new-%d" % i) for i in range(10)]) == 5


async def poll_for(consumer: Consumer, count: int) -> list[tuple[int, bytes | None]]:
    records: list[tuple[int, bytes | None]] = []
    with trio.fail_after(60):
        while len(records) < count:
            records += [(r.offset, r.value) for r in await consumer.poll(5)]
    return records


OLD = [(i, b"old-%d" % i) for i in range(10)]
NEW = [(5 + i, b"new-%d" % i) for i in range(10)]


@pytest.mark.parametrize("reset", ["earliest", "latest"])
async def test_a_position_an_unclean_election_truncated_moves_back_to_where_the_logs_diverge(
        autojump_clock: Any, cluster: Cluster, bootstrap: Any, reset: str) -> None:
    """KIP-320: the consumer, at offset 10 with the epoch of record 9, sees the new leader epoch and asks where
    that epoch ends on the new leader: at 5. It reads on from 5, whatever auto.offset.reset says (it is no reset),
    rather than from 10, which would skip new-0 to new-4 unseen."""
    async with Consumer(bootstrap, auto_offset_reset=reset) as consumer:
        consumer.assign([TP])
        consumer.seek(TP, 0)

        async def read() -> None:
            assert await poll_for(consumer, 10) == OLD

        await truncate_under_a_reader(cluster, read)
        assert await poll_for(consumer, 10) == NEW


async def test_with_no_reset_policy_a_truncated_position_is_an_error_that_names_where_to_seek(
        autojump_clock: Any, cluster: Cluster, bootstrap: Any) -> None:
    async with Consumer(bootstrap, auto_offset_reset="none") as consumer:
        consumer.assign([TP])
        consumer.seek(TP, 0)

        async def read() -> None:
            assert await poll_for(consumer, 10) == OLD

        await truncate_under_a_reader(cluster, read)
        with pytest.raises(LogTruncationError, match=r"events-0: the log was truncated below position 10 .*"
                                                     r"now ends at 5; seek to 5"):
            await poll_for(consumer, 1)
        assert await consumer.position(TP) == 10
        consumer.seek(TP, 5)
        assert await poll_for(consumer, 10) == NEW


async def test_a_committed_position_carries_its_epoch_and_is_checked_when_a_member_resumes(
        autojump_clock: Any, cluster: Cluster, bootstrap: Any) -> None:
    """The commit of the position after record 9 carries record 9's leader epoch; a consumer of the group started
    after the truncation, subscribed or assigned the partition by hand, resumes from it, checks it, and reads from
    5. A plain seek carries no epoch and is not checked, as in Kafka: it reads from where it was told; a seek
    with the committed epoch is checked, and reads from 5."""
    committed: list[OffsetAndMetadata | None] = []

    async def read() -> None:
        async with Consumer(bootstrap, group_id="g", auto_offset_reset="earliest") as first:
            first.subscribe(["events"])
            assert await poll_for(first, 10) == OLD
            await first.commit()
            committed.extend((await first.committed([TP])).values())

    await truncate_under_a_reader(cluster, read)
    [offset] = committed
    assert offset is not None and offset.offset == 10 and offset.leader_epoch >= 0
    for subscribed in (True, False):  # a member of the group, and its only user with partitions assigned by hand
        async with Consumer(bootstrap, group_id="g", auto_offset_reset="earliest", enable_auto_commit=False) as resumed:
            resumed.subscribe(["events"]) if subscribed else resumed.assign([TP])
            assert await poll_for(resumed, 10) == NEW, f"subscribed: {subscribed}"
    async with Consumer(bootstrap, auto_offset_reset="earliest") as sought:
        sought.assign([TP])
        sought.seek(TP, 10)
        assert await poll_for(sought, 5) == NEW[5:]
        sought.seek(TP, 10, leader_epoch=offset.leader_epoch)  # as the commit carried it: checked
        assert await poll_for(sought, 10) == NEW


@pytest.mark.parametrize(("payload", "cause"), [
    (msgpack.packb([[0, None], [0, None]]), "ValueError: not enough values to unpack (expected 4, got 2)"),
    (b"\x91\xc1", "FormatError"),  # an array of one byte that msgpack never uses
    (b"\xc1", "ValueError: a columnar payload needs 8 header bytes; it has 1"),
    (b"\x92\x01", "ValueError: Unpack failed: incomplete input"),
])
async def test_a_batch_whose_records_cannot_be_decoded_is_reported_until_sought_past(
        autojump_clock: Any, cluster: Cluster, bootstrap: Any, payload: bytes, cause: str) -> None:
    """A batch with a valid crc over records that cannot be decoded (the leader refuses one a native client sends,
    so here it is damage in the leader's log); the consumer hands out what precedes it, then raises CORRUPT_MESSAGE
    on every poll instead of refetching it silently, as Java's does."""
    await cluster.create_topic("damaged", partitions=1, replication_factor=3)
    await cluster.produce("damaged", 0, [Record(None, b"before")])
    damage_leader_log(cluster, "damaged", undecodable_batch(payload))
    await cluster.produce("damaged", 0, [Record(None, b"after")])
    async with Consumer(bootstrap, {"auto.offset.reset": "earliest"}) as consumer:
        consumer.assign([TopicPartition("damaged", 0)])
        assert [r.value for r in await consumer.poll(5)] == [b"before"]
        for _ in range(2):
            with pytest.raises(CorruptMessageError) as raised:
                await consumer.poll(5)
            assert str(raised.value) == (
                f"CORRUPT_MESSAGE: damaged-0: the record batch at offsets 1 to 2 cannot be decoded ({cause}); seek to "
                "3 to skip it")
        consumer.seek(TopicPartition("damaged", 0), 3)
        assert [(r.offset, r.value) for r in await consumer.poll(5)] == [(3, b"after")]


def undecodable_batch(payload: bytes = msgpack.packb([[0, None], [0, None]])) -> RecordBatch:
    """Two records the consumer cannot decode (by default, rows of two fields instead of four) under a valid crc."""
    crc = _checksum(payload, 0, 2, 0, 0, -1, -1, -1)
    return RecordBatch(0, -1, -1, -1, -1, 2, 0, 0, 0, crc, payload)


def damage_leader_log(cluster: Cluster, topic: str, batch: RecordBatch, partition: int = 0) -> None:
    """Put `batch` in the leader's log as storage damage would: the leader refuses such a batch from a client,
    and its followers copy whatever the leader's log holds."""
    leader = cluster.broker(cluster.leader_for(topic, partition)).replica_manager.get_partition(
        TopicPartition(topic, partition))
    leader.log.append_as_leader(batch, leader.leader_epoch)
    leader.maybe_increment_leader_hw()  # a leader without followers moves its HW on its own appends


async def test_a_batch_that_cannot_be_decoded_holds_up_only_its_own_partition(
        autojump_clock: Any, cluster: Cluster, bootstrap: Any) -> None:
    """Two partitions on one leader come back in one fetch: the damaged one must not take the other's records
    with it, nor lend it its error."""
    await cluster.create_topic("shared", partitions=4, replication_factor=1)
    leaders = {p: cluster.leader_for("shared", p) for p in range(4)}
    damaged, healthy = next((a, b) for a in range(4) for b in range(4) if a != b and leaders[a] == leaders[b])
    damage_leader_log(cluster, "shared", undecodable_batch(), damaged)
    await cluster.produce("shared", healthy, [Record(None, b"fine")])
    async with Consumer(bootstrap, {"auto.offset.reset": "earliest"}) as consumer:
        consumer.assign([TopicPartition("shared", damaged), TopicPartition("shared", healthy)])
        received: list[Any] = []
        with trio.fail_after(30):
            while not received:
                try:
                    received = await consumer.poll(5)
                except CorruptMessageError as exc:
                    assert str(exc).startswith(f"CORRUPT_MESSAGE: shared-{damaged}: ")
        assert [(r.partition, r.value) for r in received] == [(healthy, b"fine")]
        with pytest.raises(CorruptMessageError, match=f"shared-{damaged}: the record batch at offsets 0 to 1"):
            await consumer.poll(5)


async def test_an_assigned_partition_that_does_not_exist_fails_after_default_api_timeout(
        autojump_clock: Any, cluster: Cluster, bootstrap: Any) -> None:
    """Not an empty poll forever: UNKNOWN_TOPIC_OR_PARTITION names it once metadata has not listed it for
    default.api.timeout.ms, while the partitions that exist are served meanwhile."""
    await fill(cluster, 10)
    async with Consumer(bootstrap, auto_offset_reset="earliest", default_api_timeout_ms=5000) as consumer:
        consumer.assign([TP, TopicPartition("events", 5), TopicPartition("nowhere", 0)])
        started = trio.current_time()
        records: list[Any] = []
        with trio.fail_after(60), pytest.raises(UnknownTopicOrPartitionError) as raised:
            while True:
                records.extend(await consumer.poll(1))
        assert 5 <= trio.current_time() - started < 6
        assert str(raised.value) in (f"UNKNOWN_TOPIC_OR_PARTITION: Partition {tp} not present in metadata after "
                                     "5000 ms" for tp in ("events-5", "nowhere-0"))
        assert [r.value for r in records] == [b"%d" % i for i in range(10)]
        with pytest.raises(UnknownTopicOrPartitionError, match="Partition events-5 not present in metadata"):
            await consumer.position(TopicPartition("events", 5))


async def test_an_assigned_topic_with_an_illegal_name_fails_at_once(
        autojump_clock: Any, cluster: Cluster, bootstrap: Any) -> None:
    """No wait: the brokers' INVALID_TOPIC_EXCEPTION cannot be retried away."""
    async with Consumer(bootstrap) as consumer:
        consumer.assign([TopicPartition("bad/name", 0)])
        started = trio.current_time()
        with trio.fail_after(60), pytest.raises(InvalidTopicError, match="bad/name"):
            await consumer.poll(math.inf)
        assert trio.current_time() - started < 1


async def test_an_assigned_partition_added_later_is_consumed(
        autojump_clock: Any, cluster: Cluster, bootstrap: Any) -> None:
    await fill(cluster, 0)
    async with Consumer(bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([TopicPartition("events", 1)])
        assert await consumer.poll(2) == []
        await cluster.create_partitions("events", 2)
        await cluster.produce("events", 1, [Record(None, b"new partition")])
        with trio.fail_after(10):
            records = await consumer.poll(math.inf)
    assert [(r.partition, r.value) for r in records] == [(1, b"new partition")]


async def test_an_unreachable_bootstrap_server_is_named_by_poll(autojump_clock: Any) -> None:
    with socket.socket() as bound_but_not_listening:
        bound_but_not_listening.bind(("127.0.0.1", 0))
        port = bound_but_not_listening.getsockname()[1]
        async with Consumer(f"127.0.0.1:{port}", default_api_timeout_ms=5000) as consumer:
            consumer.assign([TP])
            with trio.fail_after(60), pytest.raises(NetworkExceptionError, match=(
                    f"no broker could be reached at 127.0.0.1:{port} .*partition events-0 not known after 5000 ms")):
                await consumer.poll(math.inf)


@pytest.mark.parametrize(("call", "error", "message"), [
    (lambda c: c.assign(["events"]), TypeError, r"assign\(\) takes a TopicPartition\(topic, partition\), not 'events'"),
    (lambda c: c.assign("events"), TypeError, r"assign\(\) takes a collection of TopicPartition, not str"),
    (lambda c: c.assign(TP), TypeError, r"assign\(\) takes a collection of TopicPartition, not TopicPartition"),
    (lambda c: c.assign([("events", "0")]), TypeError, r"not \('events', '0'\)"),
    (lambda c: c.assign([("events", -1)]), ValueError, r"the partition of 'events' in assign\(\) must not be negative"),
    (lambda c: c.seek(TP, "5"), TypeError, "seek offset must be an int, not str"),
    (lambda c: c.seek(TP, -1), ValueError, "seek offset must not be negative, got -1"),
    (lambda c: c.seek(TP, 5, leader_epoch="3"), TypeError, "seek leader_epoch must be an int, not str"),
    (lambda c: c.seek(TP, 5, leader_epoch=-2), ValueError, r"seek leader_epoch must be -1 \(unknown\) or a leader"),
    (lambda c: c.seek(TP, 1 << 63), ValueError, "seek offset must be at most 9223372036854775807, got 92"),
    (lambda c: c.assign([("events", 1 << 31)]), ValueError, "the partition of 'events' in assign.. must be at most"),
    (lambda c: c.seek("events", 5), TypeError, r"seek\(\) takes a TopicPartition\(topic, partition\), not 'events'"),
    (lambda c: c.seek(TopicPartition("other", 0), 5), ValueError, "seek\\(\\): other-0 is not assigned"),
    (lambda c: c.seek_to_beginning(TP), TypeError, "seek_to_beginning\\(\\) takes a collection of TopicPartition"),
    (lambda c: c.seek_to_end([TopicPartition("other", 0)]), ValueError, "other-0 is not assigned"),
    (lambda c: c.highwater(TopicPartition("other", 0)), ValueError, r"highwater\(\): other-0 is not assigned"),
    (lambda c: c.highwater("events"), TypeError, r"highwater\(\) takes a TopicPartition\(topic, partition\)"),
    (lambda c: c.commit_async(), InvalidGroupIdError, r"commit_async\(\) needs a group.id"),
    (lambda c: c.subscribe(["events"]), InvalidGroupIdError, r"subscribe\(\) needs a group.id"),
])
def test_wrong_arguments_say_what_was_expected(call: Any, error: type, message: str) -> None:
    consumer = Consumer("127.0.0.1:9")  # never connected: arguments are checked before anything is sent
    consumer.assign([TP])
    with pytest.raises(error, match=message):
        call(consumer)
    assert consumer.assignment() == {TP}


@pytest.mark.parametrize(("arguments", "error", "message"), [
    ((2.5,), TypeError, "OffsetAndMetadata offset must be an int, not float"),  # committed, a group skipped offset 2
    (("5",), TypeError, "OffsetAndMetadata offset must be an int, not str"),
    ((1 << 64,), ValueError, "OffsetAndMetadata offset must be at most 9223372036854775807"),
    ((5, 7), TypeError, "OffsetAndMetadata metadata must be a str or None, not int"),
    ((5, None, "3"), TypeError, "OffsetAndMetadata leader_epoch must be an int, not str"),
    ((5, None, -2), ValueError, r"OffsetAndMetadata leader_epoch must be -1 \(unknown\)"),
])
def test_offsets_to_commit_are_checked_when_made(arguments: tuple[Any, ...], error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        OffsetAndMetadata(*arguments)


def test_an_empty_group_id_is_refused() -> None:
    with pytest.raises(InvalidGroupIdError, match="group.id must not be empty"):
        Consumer("127.0.0.1:9", {"group.id": ""})


async def test_highwater_is_what_the_last_fetch_reported(autojump_clock: Any, cluster: Cluster, bootstrap: Any) -> None:
    await fill(cluster, 5)
    async with Consumer(bootstrap, {"auto.offset.reset": "earliest"}) as consumer:
        consumer.assign([TP])
        assert consumer.highwater(TP) is None  # no fetch has returned yet
        read = []
        while len(read) < 5:
            read += await consumer.poll(5)
        assert consumer.highwater(TP) == 5
        await cluster.produce("events", 0, [Record(None, b"more")] * 3)
        while len(read) < 8:
            read += await consumer.poll(5)
        assert consumer.highwater(TP) == 8


async def test_beginning_end_and_time_offsets_are_what_the_leaders_answer(
        autojump_clock: Any, cluster: Cluster, bootstrap: Any) -> None:
    """Kafka's beginningOffsets, endOffsets and offsetsForTimes, for any partitions, assigned or not: the log start
    (moved by a DeleteRecords), the high watermark, and the first record at or after a time, or None."""
    await cluster.create_topic("events", partitions=2, replication_factor=3)
    await cluster.produce("events", 0, [Record(None, b"%d" % i, 1000 * (i + 1)) for i in range(5)])
    async with Admin(cluster) as admin:
        await admin.delete_records({TP: 2})
    other = TopicPartition("events", 1)
    epoch = cluster.partition_state("events", 0).leader_epoch
    async with Consumer(bootstrap, default_api_timeout_ms=5000) as consumer:
        assert await consumer.beginning_offsets([TP, other]) == {TP: 2, other: 0}
        assert await consumer.end_offsets([TP, other]) == {TP: 5, other: 0}
        found = await consumer.offsets_for_times({TP: 3500, other: 0})
        assert found == {TP: (3, 4000, epoch), other: None}
        assert await consumer.offsets_for_times({TP: 0}) == {TP: (2, 3000, epoch)}  # the first record left
        assert await consumer.offsets_for_times({TP: 10**13}) == {TP: None}
        with pytest.raises(UnknownTopicOrPartitionError, match="events-7"):
            await consumer.end_offsets([TopicPartition("events", 7)])


async def test_offset_lookups_follow_a_leader_killed_before_they_ask(
        autojump_clock: Any, cluster: Cluster, bootstrap: Any) -> None:
    """The leader the consumer's metadata names is dead: the lookup is refused or unanswered, the consumer looks the
    leader up again until the controller has elected another, and answers from it."""
    await fill(cluster, 5)
    async with Consumer(bootstrap) as consumer:
        assert await consumer.end_offsets([TP]) == {TP: 5}
        leader = cluster.leader_for("events", 0)
        await cluster.kill_broker(leader)
        with trio.fail_after(60):
            assert await consumer.end_offsets([TP]) == {TP: 5}
            assert await consumer.beginning_offsets([TP]) == {TP: 0}
        assert cluster.leader_for("events", 0) not in (leader, -1)


@pytest.mark.parametrize(("call", "error", "message"), [
    (lambda c: c.end_offsets("events"), TypeError, r"end_offsets\(\) takes a collection of TopicPartition"),
    (lambda c: c.beginning_offsets([("events", -1)]), ValueError, "must not be negative"),
    (lambda c: c.offsets_for_times([TP]), TypeError, r"offsets_for_times\(\) takes a mapping of TopicPartition"),
    (lambda c: c.offsets_for_times({TP: -5}), ValueError, "a timestamp must not be negative, got -5"),
    (lambda c: c.offsets_for_times({TP: "5"}), TypeError, "a timestamp must be an int, not str"),
])
async def test_offset_lookups_check_their_arguments_before_asking(autojump_clock: Any, call: Any, error: type,
                                                                  message: str) -> None:
    async with Consumer("127.0.0.1:9") as consumer:  # never reached: nothing is sent
        with pytest.raises(error, match=message):
            await call(consumer)


@pytest.mark.parametrize(("timeout", "error"), [("1", TypeError), (None, TypeError), (-1, ValueError)])
async def test_poll_takes_a_non_negative_number_of_seconds(autojump_clock: Any, timeout: Any, error: type) -> None:
    async with Consumer("127.0.0.1:9") as consumer:
        with pytest.raises(error, match="poll timeout must"):
            await consumer.poll(timeout)


@pytest.mark.usefixtures("kafkalite_watchdog")
async def test_a_leader_answering_offset_out_of_range_every_time_is_asked_again_after_a_backoff(
        cluster: Cluster, bootstrap: Any) -> None:
    """Reset and refetch went round without waiting while every fetch was out of range: virtual time stopped, and
    on a real clock a core spun. A fetch after a reset now waits retry.backoff.ms; records come once it heals."""
    await fill(cluster, 5)
    refusing = cluster.fail_requests("Fetch", "OFFSET_OUT_OF_RANGE", times=None)
    async with Consumer(bootstrap, {"auto.offset.reset": "earliest", "retry.backoff.ms": 100}) as consumer:
        consumer.assign([TP])
        started = trio.current_time()
        assert await consumer.poll(2) == []
        assert trio.current_time() - started == pytest.approx(2, abs=0.2)
        assert 10 <= refusing.hits <= 25  # a fetch a backoff, a tenth of a second
        refusing.remove()
        with trio.fail_after(10):
            records = await consumer.poll(5)
        assert [(r.offset, r.value) for r in records] == [(i, b"%d" % i) for i in range(5)]
