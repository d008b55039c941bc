"""Polls with a short timeout get somewhere: what a poll starts (the join, the committed-offset lookup, the
position reset) stays in flight when the poll times out and the next poll picks it up, as with Kafka's consumer,
whose `poll(Duration.ZERO)` in a loop reads a group's records."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from kafkalite.client import Consumer, OffsetAndMetadata, Producer
from kafkalite.cluster import Cluster
from kafkalite.common.records import Record
from kafkalite.common.types import TopicPartition

pytestmark = pytest.mark.usefixtures("autojump_clock")

TP = TopicPartition("t", 0)


async def produced(cluster: Cluster, count: int) -> None:
    await cluster.create_topic("t", 1, 3)
    await cluster.produce("t", 0, [Record(None, b"v%d" % i, 1000 + i) for i in range(count)])


async def commit_elsewhere(cluster: Cluster, offset: int) -> None:
    """Another member of group g commits `offset` for t-0."""
    async with Consumer(cluster, {"group.id": "g"}) as other:
        other.assign([TP])
        await other.commit({TP: OffsetAndMetadata(offset)})


async def polled(consumer: Consumer, want: int, timeout: float, between: float = 0.01, polls: int = 1000
                 ) -> list[int]:
    """The offsets of `want` records, polling with `timeout` as an application's loop would; fails after `polls`."""
    offsets: list[int] = []
    for _ in range(polls):
        offsets += [record.offset for record in await consumer.poll(timeout)]
        if len(offsets) >= want:
            return offsets
        await trio.sleep(between)
    raise AssertionError(f"{len(offsets)} records after {polls} polls of poll({timeout})")


@pytest.mark.parametrize("group_id", [None, "g"])
async def test_polls_with_no_timeout_in_a_loop_read_the_records(cluster: Cluster, group_id: str | None) -> None:
    await produced(cluster, 5)
    async with Consumer(cluster, {"group.id": group_id, "auto.offset.reset": "earliest"}) as consumer:
        if group_id is None:
            consumer.assign([TP])
        else:
            consumer.subscribe(["t"])
        assert await polled(consumer, 5, 0) == [0, 1, 2, 3, 4]


async def test_a_poll_that_times_out_looking_up_the_committed_offset_still_starts_there(cluster: Cluster) -> None:
    """The group's committed offset, not auto.offset.reset (latest here, which would skip records 3 and 4), even
    when every poll times out before the coordinator answers the lookup."""
    await produced(cluster, 5)
    await commit_elsewhere(cluster, 3)
    slow = cluster.fail_requests("OffsetFetch", delay=1.0, times=None)
    async with Consumer(cluster, {"group.id": "g", "auto.offset.reset": "latest"}) as consumer:
        consumer.subscribe(["t"])
        assert await polled(consumer, 2, 0.1) == [3, 4]
    assert slow.hits >= 1


async def test_a_topic_missing_for_long_is_waited_for_without_end(cluster: Cluster) -> None:
    """A consumer subscribed to a topic that does not exist yet asks for metadata again and again, each time
    backing off more, up to a second; past a thousand answers the backoff's exponent overflowed a float and the
    consumer died. It reads the topic once someone creates it, however late."""
    async with Consumer(cluster, {"group.id": "g", "allow.auto.create.topics": False,
                                  "auto.offset.reset": "earliest"}) as consumer:
        consumer.subscribe(["t"])
        with trio.move_on_after(1500):
            while True:
                assert await consumer.poll(10) == []
        await produced(cluster, 2)
        assert await polled(consumer, 2, 1) == [0, 1]


async def test_a_commit_callback_that_raises_is_raised_from_the_next_poll(cluster: Cluster) -> None:
    """As Kafka's consumer: the callback's exception reaches the application at its next poll, and the consumer
    goes on (it used to die with it, every later call saying the consumer was closed)."""
    await produced(cluster, 3)
    async with Consumer(cluster, {"group.id": "g", "auto.offset.reset": "earliest"}) as consumer:
        consumer.assign([TP])
        assert await polled(consumer, 3, 1) == [0, 1, 2]
        done = trio.Event()

        def broken(error: Any) -> None:
            done.set()
            raise LookupError("the application's callback failed")

        consumer.commit_async(on_complete=broken)
        await done.wait()
        with pytest.raises(LookupError, match="callback failed"):
            await consumer.poll(0.1)
        await consumer.commit()
        assert (await consumer.committed([TP]))[TP].offset == 3
        async with Producer(cluster) as producer:
            await (await producer.send("t", b"more", partition=0))
        assert await polled(consumer, 1, 1) == [3]


@pytest.mark.parametrize("subscribed", [False, True])
async def test_a_seek_after_a_poll_timed_out_wins_over_the_lookup_still_under_way(cluster: Cluster,
                                                                                  subscribed: bool) -> None:
    """The committed offset (5) looked up for the poll that timed out is not applied over the application's
    seek_to_beginning made since, even when it comes before the beginning's offset does: records from 0."""
    await produced(cluster, 10)
    await commit_elsewhere(cluster, 5)
    slow = cluster.fail_requests("OffsetFetch", delay=2.0)
    async with Consumer(cluster, {"group.id": "g", "auto.offset.reset": "latest"}) as consumer:
        if subscribed:
            consumer.subscribe(["t"])
        else:
            consumer.assign([TP])
        while not (consumer.assignment() and slow.hits):
            assert await consumer.poll(0.3) == []
        cluster.fail_requests("ListOffsets", delay=4.0)  # the lookup for the seek answers after the stale one
        consumer.seek_to_beginning([TP])
        assert (await polled(consumer, 10, 1))[:3] == [0, 1, 2]


async def test_a_lookup_for_a_partition_since_assigned_again_is_not_applied(cluster: Cluster) -> None:
    """The committed offset looked up for an assignment the application replaced (the same partition, assigned
    again) is stale: answered 5, it is not applied; the lookup for the new assignment, answered after another
    member committed 7, is."""
    await produced(cluster, 10)
    await commit_elsewhere(cluster, 5)
    slow = cluster.fail_requests("OffsetFetch", delay=2.0)
    async with Consumer(cluster, {"group.id": "g", "auto.offset.reset": "latest"}) as consumer:
        consumer.assign([TP])
        while not slow.hits:
            assert await consumer.poll(0.3) == []
        consumer.assign([])
        consumer.assign([TP])
        cluster.fail_requests("OffsetFetch", delay=4.0)  # the new lookup is answered at about 6 s

        async def commit_meanwhile() -> None:
            await trio.sleep(2.5)  # after the stale lookup was answered (at 2 s)
            await commit_elsewhere(cluster, 7)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(commit_meanwhile)
            assert (await polled(consumer, 3, 1))[:3] == [7, 8, 9]


async def test_a_join_left_in_flight_is_not_taken_for_a_later_subscription(cluster: Cluster) -> None:
    """A join that finished after its poll timed out, for a subscription since dropped, is stale: the consumer
    subscribed to b reads b, not the partition of a that the old join was given."""
    for topic in ("a", "b"):
        await cluster.create_topic(topic, 1, 3)
        await cluster.produce(topic, 0, [Record(None, topic.encode(), 1000)])
    async with Consumer(cluster, {"group.id": "g", "auto.offset.reset": "earliest"}) as consumer:
        cluster.fail_requests("SyncGroup", delay=1.0)
        consumer.subscribe(["a"])
        assert await consumer.poll(0.5) == []
        await trio.sleep(2)  # the join has its answer, which no poll took
        await consumer.unsubscribe()
        consumer.subscribe(["b"])
        with trio.fail_after(30):
            while not (records := await consumer.poll(1)):
                pass
        assert [(r.topic, r.value) for r in records] == [("b", b"b")]
        assert consumer.assignment() == {TopicPartition("b", 0)}


async def test_a_slow_rebalance_callback_runs_once_to_its_end(cluster: Cluster) -> None:
    """As in Kafka, a callback is not cut short by the poll's timeout: an async on_assign longer than the
    poll's timeout was cancelled and started again at every poll, and the consumer never read."""
    await produced(cluster, 3)
    calls: list[str] = []

    async def on_assign(partitions: set[TopicPartition]) -> None:
        calls.append("start")
        await trio.sleep(2)
        calls.append("end")

    async with Consumer(cluster, {"group.id": "g", "auto.offset.reset": "earliest"}) as consumer:
        consumer.subscribe(["t"], on_assign=on_assign)
        assert await polled(consumer, 3, 0.1) == [0, 1, 2]
    assert calls == ["start", "end"]


async def test_unsubscribing_after_the_group_dropped_the_member_loses_its_partitions(cluster: Cluster) -> None:
    """Kafka's onLeavePrepare: a member the group already dropped (no poll within max.poll.interval.ms) hands its
    partitions to on_lost, not on_revoke, where an at-least-once commit could only fail (and made unsubscribe
    raise)."""
    await produced(cluster, 3)
    calls: list[tuple[str, set[TopicPartition]]] = []
    async with Consumer(cluster, {"group.id": "g", "auto.offset.reset": "earliest", "enable.auto.commit": False,
                                  "max.poll.interval.ms": 10000}) as consumer:
        async def on_revoke(partitions: set[TopicPartition]) -> None:
            calls.append(("revoked", partitions))
            await consumer.commit()

        consumer.subscribe(["t"], on_revoke=on_revoke, on_lost=lambda partitions: calls.append(("lost", partitions)))
        assert await polled(consumer, 3, 1) == [0, 1, 2]
        await trio.sleep(20)  # no poll for longer than max.poll.interval.ms: the member left its group
        await consumer.unsubscribe()
        assert calls == [("lost", {TP})] and consumer.assignment() == set()
