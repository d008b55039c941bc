"""What leaves `async with Producer/Consumer/Admin(...)`: the body's own exception as itself, and a failure of the
client's background tasks, never swallowed."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from kafkalite.client import Admin, Consumer, InProcessTransport, Producer
from kafkalite.cluster import Cluster
from kafkalite.common.errors import UnknownTopicOrPartitionError
from kafkalite.common.types import TopicPartition

pytestmark = pytest.mark.usefixtures("autojump_clock")


@pytest.mark.parametrize("client", [Producer, Consumer, Admin])
async def test_the_bodys_exception_comes_out_as_itself(autojump_clock: Any, cluster: Cluster, client: type) -> None:
    raised = UnknownTopicOrPartitionError("raised by the application")
    with pytest.raises(UnknownTopicOrPartitionError) as caught:
        async with client(cluster):
            await trio.sleep(1)  # the client's background tasks have started
            raise raised
    assert caught.value is raised
    assert caught.value.__context__ is None  # not re-raised while an ExceptionGroup was being handled


@pytest.mark.parametrize("client", [Producer, Consumer])
async def test_a_cancelled_body_stays_cancelled(autojump_clock: Any, cluster: Cluster, client: type) -> None:
    with trio.move_on_after(1) as scope:
        async with client(cluster):
            await trio.sleep_forever()
    assert scope.cancelled_caught


@pytest.mark.parametrize(("group", "call"), [
    (None, lambda consumer: consumer.poll(1)),
    (None, lambda consumer: consumer.poll_batches(1)),
    ("g", lambda consumer: consumer.poll(1)),
])
async def test_a_closed_consumer_says_so(autojump_clock: Any, cluster: Cluster, group: str | None, call: Any) -> None:
    """After its block, as the producer does, rather than with Trio's "Nursery is closed to new arrivals"."""
    await cluster.create_topic("t")
    async with Consumer(cluster, {"group.id": group} if group else {}) as consumer:
        if group:
            consumer.subscribe(["t"])
        else:
            consumer.assign([TopicPartition("t", 0)])
        await consumer.poll(1)
    with pytest.raises(RuntimeError, match="the consumer is not open"):
        await call(consumer)


@pytest.mark.parametrize(("group", "call"), [
    (None, lambda consumer: consumer.end_offsets([TopicPartition("t", 0)])),
    (None, lambda consumer: consumer.beginning_offsets([TopicPartition("t", 0)])),
    (None, lambda consumer: consumer.offsets_for_times({TopicPartition("t", 0): 0})),
    ("g", lambda consumer: consumer.committed([TopicPartition("t", 0)])),
    ("g", lambda consumer: consumer.commit({TopicPartition("t", 0): 1})),
])
async def test_a_closed_consumer_asks_the_cluster_nothing(autojump_clock: Any, cluster: Cluster, group: str | None,
                                                          call: Any) -> None:
    """Before, these answered after the block, reopening connections that nothing closed any more."""
    await cluster.create_topic("t")
    async with Consumer(cluster, {"client.id": "closed-one", **({"group.id": group} if group else {})}) as consumer:
        consumer.assign([TopicPartition("t", 0)])
    with pytest.raises(RuntimeError, match="closed-one is closed: it left its `async with` block"):
        await call(consumer)


async def test_a_closed_admin_asks_the_cluster_nothing(autojump_clock: Any, cluster: Cluster) -> None:
    async with Admin(cluster, {"client.id": "closed-admin"}) as admin:
        assert await admin.list_topics() == []
    with pytest.raises(RuntimeError, match="closed-admin is closed"):
        await admin.list_topics()


async def test_a_transport_the_application_hands_in_stays_open(autojump_clock: Any, cluster: Cluster) -> None:
    """It may serve several clients, one after another: closing one must not close it under the next."""
    await cluster.create_topic("t")
    transport = InProcessTransport(cluster.transport, cluster.broker_ids, "shared", 30000)
    async with Admin(transport) as first:
        assert await first.list_topics() == ["t"]
    async with Admin(transport) as second, Producer(transport) as producer:
        assert await second.list_topics() == ["t"]
        assert (await (await producer.send("t", b"x"))).offset == 0
    assert not transport.closed


async def test_a_failing_background_task_of_the_producer_surfaces(autojump_clock: Any, cluster: Cluster) -> None:
    async def broken_sender() -> None:
        raise RuntimeError("the sender broke")

    producer = Producer(cluster)
    producer._run_sender = broken_sender  # type: ignore[method-assign]
    with pytest.RaisesGroup(pytest.RaisesExc(RuntimeError, match="the sender broke")):
        async with producer:
            await trio.sleep_forever()


async def test_a_failing_background_task_of_the_consumer_surfaces(autojump_clock: Any, cluster: Cluster) -> None:
    await cluster.create_topic("t", partitions=1, replication_factor=1)

    async def broken_fetch(*args: Any) -> None:
        raise RuntimeError("the fetch broke")

    consumer = Consumer(cluster, auto_offset_reset="earliest")
    consumer._fetch = broken_fetch  # type: ignore[method-assign, assignment]
    with pytest.RaisesGroup(pytest.RaisesExc(RuntimeError, match="the fetch broke")):
        async with consumer:
            consumer.assign([TopicPartition("t", 0)])
            await consumer.poll(10)


@pytest.mark.parametrize("client", [Producer, Consumer, Admin])
async def test_a_client_opens_once(autojump_clock: Any, cluster: Cluster, client: type) -> None:
    """A second `async with`, nested or after the first, is refused in words: before, a producer opened again
    took records it never sent, and a nested block corrupted Trio's cancel scopes and took the cluster down."""
    opened = client(cluster)
    async with opened:
        with pytest.raises(RuntimeError, match="was opened already: a client serves one `async with` block"):
            async with opened:
                pass
    with pytest.raises(RuntimeError, match="was opened already"):
        async with opened:
            pass
    async with client(cluster):  # a new one serves
        await trio.sleep(1)


@pytest.mark.parametrize("group", [None, "g"])
async def test_a_poll_under_way_when_its_consumer_closes_says_so(autojump_clock: Any, cluster: Cluster,
                                                                 group: str | None) -> None:
    """A poll in another task ends when the block does, in words (it failed on an internal assertion)."""
    await cluster.create_topic("t")
    outcome: list[str] = []
    async with trio.open_nursery() as nursery:
        async with Consumer(cluster, {"group.id": group}) as consumer:
            if group:
                consumer.subscribe(["t"])
            else:
                consumer.assign([TopicPartition("t", 0)])

            async def poll() -> None:
                try:
                    await consumer.poll(30)
                except RuntimeError as exc:
                    outcome.append(str(exc))

            nursery.start_soon(poll)
            await trio.sleep(1)
        started = trio.current_time()
    assert trio.current_time() == started  # the poll ended with the block, not at its timeout
    assert len(outcome) == 1 and outcome[0].endswith(" closed while poll() was under way: its `async with` block "
                                                      "ended")


async def test_a_flush_cancelled_at_exit_stays_cancelled(autojump_clock: Any, cluster: Cluster) -> None:
    """The block's end flushes; a deadline that runs out during that flush cancels what follows the block too."""
    await cluster.create_topic("t", replication_factor=1)
    leader = cluster.leader_for("t", 0)
    reached_after_block = False
    with trio.move_on_after(5) as scope:
        async with Producer(cluster, {"acks": "all"}) as producer:
            cluster.pause_broker(leader)  # nothing is acknowledged, so the flush at exit waits
            await producer.send("t", b"v")
        reached_after_block = True
    cluster.resume_broker(leader)
    assert scope.cancelled_caught
    assert not reached_after_block
