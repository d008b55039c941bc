"""The broker's MetadataCache across UpdateMetadata requests: partial updates, deletions, consistent readers.

An update writes the partition states it names in place, so these tests pin down what readers rely on: a
reader woken by updates sees each one whole, what a read returned stays as it was, and partitions an update
does not name keep their state.
"""

from __future__ import annotations

import trio
from trio.testing import MockClock

from kafkalite.common.types import TopicPartition
from kafkalite.network.requests import (
    LEADER_DURING_DELETE,
    BrokerEndpoint,
    LiveBroker,
    UpdateMetadataPartitionState,
    UpdateMetadataRequest,
)
from kafkalite.server.metadata_cache import MetadataCache

PARTITIONS = 50


def brokers(*ids: int) -> list[LiveBroker]:
    return [LiveBroker(b, [BrokerEndpoint("NATIVE", "127.0.0.1", 9000 + b)]) for b in ids]


def states(topic: str, leader: int, epoch: int, partitions: range = range(PARTITIONS)
           ) -> list[UpdateMetadataPartitionState]:
    return [UpdateMetadataPartitionState(topic, p, 1, leader, epoch, (1, 2, 3), epoch, (1, 2, 3)) for p in partitions]


def update(controller: int, partition_states: list[UpdateMetadataPartitionState],
           live: list[LiveBroker]) -> UpdateMetadataRequest:
    return UpdateMetadataRequest(controller, 1, 1, partition_states, live)


async def test_a_reader_woken_by_updates_sees_each_update_whole(autojump_clock: MockClock) -> None:
    cache = MetadataCache(1)
    cache.update_metadata(0, update(1, states("a", 1, 0), brokers(1, 2, 3)))
    seen: list[tuple[int | None, set[int], set[int]]] = []

    def observe(reader: MetadataCache) -> bool:
        topic = reader.get_topic_metadata(["a"], "NATIVE")[0]
        seen.append((reader.controller_id, {p.leader_epoch for p in topic.partitions},
                     {p.leader for p in topic.partitions}))
        return reader.controller_id == 3

    async with trio.open_nursery() as nursery:
        nursery.start_soon(cache.wait_until, observe)
        await trio.testing.wait_all_tasks_blocked()
        # each update moves every partition and the controller together; the reader runs between updates
        for epoch, leader in enumerate([2, 3], start=1):
            cache.update_metadata(epoch, update(leader, states("a", leader, epoch), brokers(1, 2, 3)))
            await trio.testing.wait_all_tasks_blocked()
    assert seen == [(1, {0}, {1}), (2, {1}, {2}), (3, {2}, {3})]


async def test_an_update_changes_only_what_it_names_and_earlier_reads_stay_as_they_were(
        autojump_clock: MockClock) -> None:
    cache = MetadataCache(1)
    cache.update_metadata(0, update(1, states("a", 1, 0) + states("b", 2, 0), brokers(1, 2, 3)))
    before = cache.get_topic_metadata(None, "NATIVE")
    untouched = cache.get_partition_info(TopicPartition("b", 7))

    cache.update_metadata(1, update(1, states("a", 3, 1, range(10, 12)), brokers(1, 3)))

    assert [(p.partition, p.leader, p.leader_epoch) for p in before[0].partitions][10:12] == [(10, 1, 0), (11, 1, 0)]
    assert {p.leader for p in before[1].partitions} == {2}
    after = {t.name: t for t in cache.get_topic_metadata(None, "NATIVE")}
    assert [(p.leader, p.leader_epoch) for p in after["a"].partitions[9:13]] == [(1, 0), (3, 1), (3, 1), (1, 0)]
    # broker 2 is gone from the live brokers, so the partitions it leads have no leader to offer
    assert {p.leader for p in after["b"].partitions} == {-1}
    assert cache.get_partition_info(TopicPartition("b", 7)) is untouched
    assert cache.get_alive_broker_ids() == [1, 3]


async def test_deleted_partitions_leave_and_the_topic_goes_with_its_last(autojump_clock: MockClock) -> None:
    cache = MetadataCache(1)
    cache.update_metadata(0, update(1, states("a", 1, 0, range(3)) + states("b", 1, 0, range(2)), brokers(1)))
    deleted = cache.update_metadata(1, update(1, states("a", LEADER_DURING_DELETE, 1, range(2)), brokers(1)))
    assert deleted == [TopicPartition("a", 0), TopicPartition("a", 1)]
    assert cache.contains_topic("a") and not cache.contains_partition(TopicPartition("a", 0))
    cache.update_metadata(2, update(1, states("a", LEADER_DURING_DELETE, 2, range(3)), brokers(1)))
    assert cache.get_all_topics() == {"b"}
    # a topic of that name created again starts afresh
    cache.update_metadata(3, update(1, states("a", 1, 0, range(1)), brokers(1)))
    assert [p.partition for p in cache.get_topic_metadata(["a"], "NATIVE")[0].partitions] == [0]
