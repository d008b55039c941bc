"""DeleteRecords on a real three-broker cluster: the leader moves its log start, the in-sync followers follow it
before the answer, the deleted records stay gone across a failover, and bad requests get Kafka's errors."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import trio

from kafkalite.client import Admin, Consumer, TopicPartition
from kafkalite.cluster import Cluster
from kafkalite.common import errors
from kafkalite.common.records import Record
from kafkalite.common.types import GROUP_METADATA_TOPIC_NAME
from kafkalite.network.requests import (
    CONSUMER_REPLICA_ID, EARLIEST_TIMESTAMP, HIGH_WATERMARK, DeleteRecordsPartition, DeleteRecordsPartitionResult,
    DeleteRecordsRequest, FetchPartition, FetchRequest, RequestContext,
)

pytestmark = pytest.mark.usefixtures("autojump_clock")

TOPIC = "events"
TP = TopicPartition(TOPIC, 0)
COUNT = 10


@pytest.fixture
async def cluster() -> AsyncIterator[Cluster]:
    """Ten committed records on every replica of a partition replicated three times."""
    async with Cluster(brokers=3, config={"replica.lag.time.max.ms": 10000}, seed=21) as running:
        await running.create_topic(TOPIC, partitions=1, replication_factor=3)
        for i in range(COUNT):
            await running.produce(TOPIC, 0, [Record(None, f"v{i}".encode())])
        yield running


def log_starts(cluster: Cluster, broker_ids: list[int] | None = None) -> dict[int, int]:
    return {b: cluster.log_manager(b).get_log(TP).log_start_offset  # type: ignore[union-attr]
            for b in (broker_ids or cluster.live_broker_ids)}


async def delete(cluster: Cluster, broker_id: int, *partitions: tuple[str, int, int],
                 timeout_ms: int = 30000) -> list[DeleteRecordsPartitionResult]:
    """A DeleteRecordsRequest straight to one broker, as a client would send it."""
    response = await cluster.transport.send("client", broker_id, DeleteRecordsRequest(
        [DeleteRecordsPartition(*p) for p in partitions], timeout_ms), RequestContext(source="client"))
    return response.partitions  # type: ignore[no-any-return]


async def first_offset_read(cluster: Cluster, **config: Any) -> int:
    async with Consumer(cluster, {"auto.offset.reset": "earliest", **config}) as consumer:
        consumer.assign([TP])
        while not (records := await consumer.poll(1)):
            pass
    return records[0].offset


async def test_records_below_the_offset_are_gone_from_every_replica(cluster: Cluster) -> None:
    async with Admin(cluster) as admin:
        await admin.list_topics()
        started = trio.current_time()
        assert await admin.delete_records({TP: 4}) == {TP: 4}
        assert log_starts(cluster) == {1: 4, 2: 4, 3: 4}  # the answer waited for the in-sync followers
        # which did not sit out a parked fetch (replica.fetch.wait.max.ms, 500 ms) to hear of the new log start
        assert trio.current_time() - started < 0.1
        assert (await admin.list_offsets({TP: "earliest"}))[TP].offset == 4
        with pytest.raises(errors.OffsetOutOfRangeError, match="outside"):
            await cluster.fetch(TOPIC, 0, 3)
        assert [o for o, _ in await cluster.fetch(TOPIC, 0, 4)] == list(range(4, COUNT))
        assert await first_offset_read(cluster) == 4

        assert await admin.delete_records({TP: 2}) == {TP: 4}  # below the log start: nothing to delete
        assert await admin.delete_records({TP: HIGH_WATERMARK}) == {TP: COUNT}
        assert log_starts(cluster) == {1: COUNT, 2: COUNT, 3: COUNT}
    await cluster.produce(TOPIC, 0, [Record(None, b"after")])
    assert [(o, r.value) for o, r in await cluster.fetch(TOPIC, 0, COUNT)] == [(COUNT, b"after")]


async def test_a_consumer_positioned_below_the_new_log_start_resets_to_it(cluster: Cluster) -> None:
    async with Consumer(cluster, {"auto.offset.reset": "earliest"}) as consumer:
        consumer.assign([TP])
        consumer.seek(TP, 1)
        async with Admin(cluster) as admin:
            await admin.delete_records({TP: 7})
        records = []
        while not records:
            records = await consumer.poll(1)
    assert [r.offset for r in records] == [7, 8, 9]


async def test_a_leader_failover_keeps_the_new_log_start(cluster: Cluster) -> None:
    """The new leader had followed the deletion before it was answered; the old leader, back as a follower,
    follows a deletion made while it was down."""
    leader = cluster.leader_for(TOPIC, 0)
    async with Admin(cluster) as admin:
        assert await admin.delete_records({TP: 6}) == {TP: 6}
        await cluster.kill_broker(leader)
        await cluster.wait_until(lambda: cluster.leader_for(TOPIC, 0) not in (-1, leader))
        assert (await admin.list_offsets({TP: "earliest"}))[TP].offset == 6
        assert await first_offset_read(cluster) == 6
        assert await admin.delete_records({TP: 8}) == {TP: 8}
    await cluster.restart_broker(leader)
    await cluster.wait_until(lambda: leader in cluster.partition_state(TOPIC, 0).isr and log_starts(cluster) == {
        1: 8, 2: 8, 3: 8})


async def test_a_follower_whose_log_ends_below_the_new_log_start_starts_over_there(cluster: Cluster) -> None:
    """Kafka's handleOffsetOutOfRange for a follower behind the leader's log start: a follower that was down while
    the leader deleted past its log end is answered OFFSET_OUT_OF_RANGE, empties its log and fetches from the
    leader's log start. It rejoins the ISR holding the leader's records at their offsets, and serves them as leader."""
    leader = cluster.leader_for(TOPIC, 0)
    follower, other = [b for b in (1, 2, 3) if b != leader]
    await cluster.kill_broker(follower)
    await cluster.wait_until(lambda: follower not in cluster.partition_state(TOPIC, 0).isr)
    for i in range(COUNT, 2 * COUNT):
        await cluster.produce(TOPIC, 0, [Record(None, f"v{i}".encode())])
    async with Admin(cluster) as admin:
        assert await admin.delete_records({TP: COUNT + 5}) == {TP: COUNT + 5}
    follower_log = cluster.log_manager(follower).get_log(TP)  # type: ignore[union-attr]
    assert (follower_log.log_start_offset, follower_log.log_end_offset) == (0, COUNT)  # as the crash left it

    await cluster.restart_broker(follower)
    await cluster.wait_until(lambda: follower in cluster.partition_state(TOPIC, 0).isr)
    follower_log = cluster.log_manager(follower).get_log(TP)  # type: ignore[union-attr]
    assert (follower_log.log_start_offset, follower_log.log_end_offset) == (COUNT + 5, 2 * COUNT)
    for broker_id in (leader, other):
        await cluster.kill_broker(broker_id)
    await cluster.wait_until(lambda: cluster.leader_for(TOPIC, 0) == follower)
    assert [(o, r.value) for o, r in await cluster.fetch(TOPIC, 0, COUNT + 5)] == [
        (i, f"v{i}".encode()) for i in range(COUNT + 5, 2 * COUNT)]
    with pytest.raises(errors.OffsetOutOfRangeError, match="outside"):
        await cluster.fetch(TOPIC, 0, COUNT)


async def test_a_follower_that_stops_fetching_holds_the_answer_until_its_broker_is_gone(cluster: Cluster) -> None:
    """Kafka's DelayedDeleteRecords: REQUEST_TIMED_OUT while a paused follower's broker is alive (the leader has
    deleted all the same), even once it left the ISR; done once the broker's session expired and the leader's
    metadata no longer lists it; the follower catches up on resuming."""
    leader = cluster.leader_for(TOPIC, 0)
    follower, other = [b for b in (1, 2, 3) if b != leader]
    cluster.pause_broker(follower)
    [timed_out] = await delete(cluster, leader, (TOPIC, 0, 5), timeout_ms=100)
    assert timed_out.error_code == errors.REQUEST_TIMED_OUT.code and timed_out.low_watermark < 5
    assert f"[{follower}]" in (timed_out.error_message or "")
    assert log_starts(cluster, [leader, other]) == {leader: 5, other: 5}

    with trio.fail_after(60):
        [done] = await delete(cluster, leader, (TOPIC, 0, 5), timeout_ms=60000)
    assert (done.error_code, done.low_watermark) == (0, 5)
    assert follower not in cluster.broker(leader).metadata_cache.get_alive_broker_ids()
    cluster.resume_broker(follower)
    await cluster.wait_until(lambda: log_starts(cluster).get(follower) == 5)


async def test_a_follower_out_of_the_isr_on_a_live_broker_holds_the_answer(cluster: Cluster) -> None:
    """Kafka's lowWatermarkIfLeader counts every replica on a live broker: a follower cut off from its leader but
    still registered holds the answer after it left the ISR, so the deletion is not reported done while a replica
    that an unclean election could pick still has the records. Once it caught up, they stay gone on it too."""
    leader = cluster.leader_for(TOPIC, 0)
    lagger, other = [b for b in (1, 2, 3) if b != leader]
    cluster.partition_network({lagger}, {leader, other})  # the lagger keeps its coordination session
    await cluster.wait_until(lambda: lagger not in cluster.partition_state(TOPIC, 0).isr)
    [timed_out] = await delete(cluster, leader, (TOPIC, 0, 6), timeout_ms=5000)
    assert (timed_out.error_code, timed_out.low_watermark) == (errors.REQUEST_TIMED_OUT.code, 0)
    assert f"[{lagger}]" in (timed_out.error_message or "")
    assert log_starts(cluster) == {leader: 6, other: 6, lagger: 0}

    cluster.heal()
    with trio.fail_after(60):
        [done] = await delete(cluster, leader, (TOPIC, 0, 6), timeout_ms=60000)
    assert (done.error_code, done.low_watermark) == (0, 6)
    await cluster.kill_broker(leader)
    await cluster.kill_broker(other)
    await cluster.wait_until(lambda: cluster.leader_for(TOPIC, 0) == lagger)
    assert await cluster.list_offset(TOPIC, 0, EARLIEST_TIMESTAMP) == 6
    assert [o for o, _ in await cluster.fetch(TOPIC, 0, 6)] == list(range(6, COUNT))


async def test_a_deletion_held_for_a_follower_fails_once_its_broker_stops_leading_and_the_deletion_stands(
        cluster: Cluster) -> None:
    """Kafka's DelayedDeleteRecords: a deletion waiting for a paused follower answers NOT_LEADER_OR_FOLLOWER as
    soon as its broker no longer leads the partition, not at its timeout, so the client retries against the new
    leader; the log start the in-sync replicas already moved stays moved there."""
    leader = cluster.leader_for(TOPIC, 0)
    paused = next(b for b in (1, 2, 3) if b not in (leader, cluster.controller_id))  # the controller must answer
    [other] = [b for b in (1, 2, 3) if b not in (leader, paused)]
    cluster.pause_broker(paused)
    results: list[DeleteRecordsPartitionResult] = []

    async def deleting() -> None:
        results.extend(await delete(cluster, leader, (TOPIC, 0, 5), timeout_ms=60000))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(deleting)
        await cluster.wait_until(lambda: log_starts(cluster, [leader, other]) == {leader: 5, other: 5})
        started = trio.current_time()
        await cluster.reassign_partitions({TP: [other, leader, paused]})  # the same replicas, `other` preferred
        await cluster.elect_preferred_leaders([TP])
    [result] = results
    assert (result.error_code, cluster.leader_for(TOPIC, 0)) == (errors.NOT_LEADER_OR_FOLLOWER.code, other)
    assert f"broker {leader} stopped leading {TP}" in (result.error_message or "")
    assert trio.current_time() - started < 5
    assert await cluster.list_offset(TOPIC, 0, EARLIEST_TIMESTAMP) == 5
    assert [o for o, _ in await cluster.fetch(TOPIC, 0, 5)] == list(range(5, COUNT))


async def test_bad_requests_get_kafkas_errors_with_a_reason_and_the_broker_keeps_serving(cluster: Cluster) -> None:
    leader = cluster.leader_for(TOPIC, 0)
    follower = next(b for b in (1, 2, 3) if b != leader)
    answers = await delete(cluster, leader, (TOPIC, 0, -5), (TOPIC, 0, COUNT + 1), (TOPIC, 7, 1), ("nope", 0, 1),
                           (GROUP_METADATA_TOPIC_NAME, 0, 1))
    assert [(a.topic, a.partition, errors.for_code(a.error_code)) for a in answers] == [
        (TOPIC, 0, errors.OFFSET_OUT_OF_RANGE), (TOPIC, 0, errors.OFFSET_OUT_OF_RANGE),
        (TOPIC, 7, errors.UNKNOWN_TOPIC_OR_PARTITION), ("nope", 0, errors.UNKNOWN_TOPIC_OR_PARTITION),
        (GROUP_METADATA_TOPIC_NAME, 0, errors.INVALID_TOPIC_EXCEPTION)]
    assert "-5" in answers[0].error_message and "high watermark" in answers[1].error_message  # type: ignore[operator]
    assert all(a.error_message and a.low_watermark == -1 for a in answers)
    [not_leader] = await delete(cluster, follower, (TOPIC, 0, 1))
    assert not_leader.error_code == errors.NOT_LEADER_OR_FOLLOWER.code
    [negative_timeout] = await delete(cluster, leader, (TOPIC, 0, 1), timeout_ms=-1)
    assert negative_timeout.error_code == errors.INVALID_REQUEST.code

    async with Admin(cluster) as admin:
        with pytest.raises(errors.OffsetOutOfRangeError, match="-5"):
            await admin.delete_records({TP: -5})
        with pytest.raises(errors.UnknownTopicOrPartitionError):
            await admin.delete_records({TopicPartition(TOPIC, 3): 1})
        with pytest.raises(errors.UnknownTopicOrPartitionError):
            await admin.delete_records({TopicPartition("nope", 0): 1})
        with pytest.raises(TypeError, match="int offsets"):
            await admin.delete_records({TP: "4"})  # type: ignore[dict-item]
    assert log_starts(cluster) == {1: 0, 2: 0, 3: 0}
    await cluster.produce(TOPIC, 0, [Record(None, b"still serving")])
    assert len(await cluster.fetch(TOPIC, 0, 0)) == COUNT + 1
    response = await cluster.transport.send("client", leader, FetchRequest(
        CONSUMER_REPLICA_ID, 0, 0, [FetchPartition(TOPIC, 0, 0)]), RequestContext(source="client"))
    assert response.partitions[0].log_start_offset == 0
    assert await cluster.list_offset(TOPIC, 0, EARLIEST_TIMESTAMP) == 0


async def test_the_admin_hears_which_replica_held_its_deletion_back(cluster: Cluster) -> None:
    """The leader gives up waiting before the admin's request times out, so the admin's error names the replica
    that kept the records, not only that no answer came."""
    leader = cluster.leader_for(TOPIC, 0)
    lagger, other = [b for b in (1, 2, 3) if b != leader]
    cluster.partition_network({lagger}, {leader, other})
    async with Admin(cluster, {"default.api.timeout.ms": 40000}) as admin:
        with pytest.raises(errors.RequestTimedOutError, match=rf"replicas on live brokers \[{lagger}\]"):
            await admin.delete_records({TP: 4})
    assert log_starts(cluster, [leader, other]) == {leader: 4, other: 4}
