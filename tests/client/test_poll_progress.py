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
    async with Consumer(cluster, {"group.id": "g"}) as first:
        first.assign([TP])
        await first.commit({TP: OffsetAndMetadata(3)})
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
