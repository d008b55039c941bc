"""Long-lived clients ask for the metadata of the topics they use now, never of every topic they once used.

Each metadata request a producer or consumer sends may create the topics it names (auto.create.topics.enable),
so a client that kept asking for a topic deleted after its last use created it again, with the brokers' default
partition count, at every refresh for as long as it lived. As in Kafka's clients: a producer forgets a topic not
sent to for metadata.max.idle.ms (KIP-526), a consumer asks for its current subscription and assignment only (a
pattern subscription asks for every topic, which creates none), and the admin client keeps nothing between calls.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio

from kafkalite.client import Admin, Consumer, Producer
from kafkalite.cluster import Cluster
from kafkalite.common.errors import UnknownTopicOrPartitionError
from kafkalite.common.records import Record
from kafkalite.common.types import TopicPartition

LONG_S = 1200  # four of metadata.max.age.ms and of metadata.max.idle.ms (their defaults)


async def poll_for(consumer: Consumer, seconds: float) -> None:
    """Keep the consumer polling, as an application does, for `seconds`."""
    with trio.move_on_after(seconds):
        while True:
            await consumer.poll(10)


async def poll_until_assigned(consumer: Consumer, partitions: set[TopicPartition]) -> None:
    with trio.fail_after(60):
        while consumer.assignment() != partitions:
            await consumer.poll(0.5)


async def test_a_producer_forgets_a_topic_not_sent_to_for_metadata_max_idle_ms(autojump_clock: Any, cluster: Cluster,
                                                                               bootstrap: Any) -> None:
    """A topic deleted after the producer's last send to it stays deleted, instead of coming back with one partition
    at the producer's next refresh. Sending again to a forgotten topic looks it up afresh: a topic created again
    with three partitions takes a record in its third; one that was there all along takes records under the same
    producer id, its partition's sequence going on where it was (the leader would refuse it starting over)."""
    await cluster.create_topic("gone", partitions=2, replication_factor=3)
    await cluster.create_topic("kept", partitions=1, replication_factor=3)
    async with Producer(bootstrap) as producer:
        for topic in ("gone", "kept"):
            await producer.send(topic, b"before", partition=0)
        await producer.flush()
        producer_id = producer.producer_id
        await cluster.delete_topic("gone")
        await trio.sleep(LONG_S)
        assert "gone" not in cluster.topics()
        assert (await (await producer.send("kept", b"after", partition=0))).offset == 1
        assert producer.producer_id == producer_id
        await cluster.create_topic("gone", partitions=3, replication_factor=3)
        assert (await (await producer.send("gone", b"again", partition=2))).offset == 0


async def test_a_consumer_asks_only_for_the_topics_it_is_assigned_and_looks_others_up_per_call(
        autojump_clock: Any, cluster: Cluster, bootstrap: Any) -> None:
    """assign() replaces the topics asked for; end_offsets() of a topic the consumer is not assigned looks it up for
    that call only (Kafka's transient topics). Neither topic comes back once deleted."""
    for topic in ("before", "looked-up", "now"):
        await cluster.create_topic(topic, partitions=1, replication_factor=3)
    async with Consumer(bootstrap, {"auto.offset.reset": "earliest"}) as consumer:
        consumer.assign([TopicPartition("before", 0)])
        assert await consumer.position(TopicPartition("before", 0)) == 0
        assert await consumer.end_offsets([TopicPartition("looked-up", 0)]) == {TopicPartition("looked-up", 0): 0}
        consumer.assign([TopicPartition("now", 0)])
        await cluster.delete_topic("before")
        await cluster.delete_topic("looked-up")
        await poll_for(consumer, LONG_S)
        assert "before" not in cluster.topics() and "looked-up" not in cluster.topics()
        assert "now" in cluster.topics()


async def test_lookups_in_a_row_on_a_topic_the_consumer_is_not_assigned_share_one_answer(
        autojump_clock: Any, cluster: Cluster, bootstrap: Any) -> None:
    """As Kafka's ConsumerMetadata: a call's topics stay cached until the next refresh, which no longer asks for
    them, so a lag monitor calling end_offsets() over and over costs one metadata request, not one per call (each
    allowing the topic's creation)."""
    for topic in ("mine", "watched"):
        await cluster.create_topic(topic, partitions=1, replication_factor=3)
    async with Consumer(bootstrap, {"client.id": "lag-monitor"}) as consumer:
        consumer.assign([TopicPartition("mine", 0)])
        watched = TopicPartition("watched", 0)
        assert await consumer.end_offsets([watched]) == {watched: 0}
        await cluster.produce("watched", 0, [Record(None, b"x")])
        counted = cluster.fail_requests("Metadata", delay=0.001, times=None, client_id="lag-monitor")
        for _ in range(20):
            assert await consumer.end_offsets([watched]) == {watched: 1}
        assert counted.hits == 0
        counted.remove()
        await cluster.delete_topic("watched")
        await poll_for(consumer, LONG_S)
        assert "watched" not in cluster.topics()


async def test_a_group_member_asks_only_for_its_current_subscription(autojump_clock: Any, cluster: Cluster,
                                                                     bootstrap: Any) -> None:
    """A new subscribe() replaces the topics asked for, and unsubscribe() leaves none: a topic given up stays
    deleted. (A topic still subscribed to comes back when deleted, with auto-creation allowed, as in Kafka.)"""
    for topic in ("first", "second"):
        await cluster.create_topic(topic, partitions=1, replication_factor=3)
    async with Consumer(bootstrap, {"group.id": "g", "auto.offset.reset": "earliest"}) as consumer:
        consumer.subscribe(["first"])
        await poll_until_assigned(consumer, {TopicPartition("first", 0)})
        consumer.subscribe(["second"])
        await poll_until_assigned(consumer, {TopicPartition("second", 0)})
        await cluster.delete_topic("first")
        await poll_for(consumer, LONG_S)
        assert "first" not in cluster.topics()
        await consumer.unsubscribe()
        await cluster.delete_topic("second")
        await poll_for(consumer, LONG_S)
        assert "second" not in cluster.topics()


async def test_a_group_leader_stops_asking_for_the_topics_of_a_member_that_left(autojump_clock: Any,
                                                                                cluster: Cluster) -> None:
    """The leader asks for every member's topics, to assign them and to see them grow; the next rebalance's
    subscriptions replace them, as Kafka's group subscription is reset at each rebalance."""
    for topic in ("mine", "theirs"):
        await cluster.create_topic(topic, partitions=1, replication_factor=3)
    config = {"group.id": "g", "session.timeout.ms": 6000, "heartbeat.interval.ms": 1000}
    async with Consumer(cluster, config) as leader:
        leader.subscribe(["mine"])
        await poll_until_assigned(leader, {TopicPartition("mine", 0)})
        async with Consumer(cluster, config) as other:
            other.subscribe(["theirs"])
            with trio.fail_after(60):
                while other.assignment() != {TopicPartition("theirs", 0)}:
                    async with trio.open_nursery() as nursery:
                        nursery.start_soon(leader.poll, 0.5)
                        nursery.start_soon(other.poll, 0.5)
        await cluster.delete_topic("theirs")
        await poll_for(leader, LONG_S)
        assert "theirs" not in cluster.topics()
        assert leader.assignment() == {TopicPartition("mine", 0)}


async def test_a_pattern_subscription_does_not_create_the_topics_it_matched(autojump_clock: Any, cluster: Cluster,
                                                                            bootstrap: Any) -> None:
    """A pattern asks for every topic (Kafka's MetadataRequest.Builder.allTopics()), which creates none: a matched
    topic that is deleted stays deleted, and leaves the assignment as soon as metadata shows it gone, not after
    metadata.max.age.ms, while polls for its partitions would fail."""
    await cluster.create_topic("tmp-1", partitions=1, replication_factor=3)
    async with Consumer(bootstrap, {"group.id": "g", "auto.offset.reset": "earliest"}) as consumer:
        consumer.subscribe(pattern=r"tmp-.*")
        await poll_until_assigned(consumer, {TopicPartition("tmp-1", 0)})
        await cluster.delete_topic("tmp-1")
        await poll_for(consumer, LONG_S)
        assert "tmp-1" not in cluster.topics()
        assert consumer.assignment() == set()


async def test_an_admin_call_looks_its_topics_up_afresh(autojump_clock: Any, cluster: Cluster, bootstrap: Any) -> None:
    """Kafka's admin client keeps no metadata between calls: a topic missing at one call and created since, or
    deleted and created again with more partitions, is seen as it is now, not as the last call found it."""
    first, second = TopicPartition("later", 0), TopicPartition("later", 1)
    async with Admin(bootstrap) as admin:
        with pytest.raises(UnknownTopicOrPartitionError):
            await admin.list_offsets({first: "latest"})
        await cluster.create_topic("later", partitions=1, replication_factor=3)
        assert (await admin.list_offsets({first: "latest"}))[first].offset == 0
        assert await admin.delete_records({first: -1}) == {first: 0}
        await cluster.delete_topic("later")
        await cluster.create_topic("later", partitions=2, replication_factor=3)
        assert (await admin.list_offsets({second: "latest"}))[second].offset == 0


async def test_lookups_see_a_topic_created_again_although_its_old_leader_epochs_were_higher(
        autojump_clock: Any, cluster: Cluster, bootstrap: Any) -> None:
    """A topic deleted and created again starts over at leader epoch 0. The clients kept the old topic's leaders,
    whose epochs were higher (KIP-320's guard, meant for a broker answering from a stale cache), so every
    end_offsets() and list_offsets() went to a broker that was no longer the leader and failed after its timeout,
    for as long as the lookups kept coming. A call's own lookup takes the answer as it comes."""
    await cluster.create_topic("watched", partitions=1, replication_factor=3)
    watched = TopicPartition("watched", 0)
    await cluster.produce("watched", 0, [Record(None, b"x")])
    for _ in range(2):  # each move raises the leader epoch
        leader = cluster.leader_for("watched", 0)
        others = [b for b in cluster.live_broker_ids if b != leader]
        await cluster.reassign_partitions({watched: [others[0], leader, others[1]]})
        await cluster.elect_preferred_leaders([watched])
        await cluster.wait_until(lambda: cluster.leader_for("watched", 0) == others[0], timeout=60)
    async with Consumer(bootstrap, {"default.api.timeout.ms": 20000}) as consumer, \
            Admin(bootstrap, {"default.api.timeout.ms": 20000}) as admin:
        assert await consumer.end_offsets([watched]) == {watched: 1}
        assert (await admin.list_offsets({watched: "latest"}))[watched].offset == 1
        await cluster.delete_topic("watched")
        await cluster.create_topic("watched", partitions=1, replication_factor=3)
        assert cluster.partition_state("watched", 0).leader_epoch == 0
        for _ in range(3):
            assert await consumer.end_offsets([watched]) == {watched: 0}
            assert (await admin.list_offsets({watched: "latest"}))[watched].offset == 0
