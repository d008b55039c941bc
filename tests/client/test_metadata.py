"""The client's metadata cache: partitions by id, whatever the answer leaves out, and a count only when whole."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
import trio
from trio.testing import MockClock

from kafkalite.client.metadata import ClusterMetadata
from kafkalite.client.transport import ClientTransport, NodeKey
from kafkalite.common import errors
from kafkalite.common.errors import UnknownTopicOrPartitionError
from kafkalite.common.types import TopicPartition
from kafkalite.network.requests import (
    MetadataBroker,
    MetadataPartition,
    MetadataRequest,
    MetadataResponse,
    MetadataTopic,
    Request,
)

BROKERS = [MetadataBroker(node_id, "localhost", 9090 + node_id) for node_id in (1, 2, 3)]


class ScriptedTransport(ClientTransport):
    """Answers each MetadataRequest with the next of `answers`, the last one for good."""

    def __init__(self, answers: Sequence[MetadataResponse]) -> None:
        super().__init__("test", request_timeout_ms=30000)
        self._answers = list(answers)
        self.requests = 0

    def _bootstrap_nodes(self) -> list[NodeKey]:
        return [1]

    async def _send(self, node: NodeKey, request: Request, deadline: float, sent: trio.Event | None) -> Any:
        assert isinstance(request, MetadataRequest)
        self.requests += 1
        return self._answers.pop(0) if len(self._answers) > 1 else self._answers[0]


def partition(number: int, leader: int) -> MetadataPartition:
    return MetadataPartition(errors.NONE.code, number, leader, 5, [1, 2, 3], [1, 2, 3])


def answer(*partitions: MetadataPartition) -> MetadataResponse:
    return MetadataResponse(BROKERS, "cluster", 1, [MetadataTopic(errors.NONE.code, "t", list(partitions))])


async def test_an_answer_with_a_gap_maps_each_partition_to_its_own_leader() -> None:
    """Partition 1 is missing: partition 1 must not get partition 2's leader (the second listed), and partition
    2 must still find its own."""
    metadata = ClusterMetadata(ScriptedTransport([answer(partition(2, leader=3), partition(0, leader=2))]), 100)
    metadata.add_topics(["t"])  # the cache keeps only the topics the client tracks
    await metadata.fetch(["t"])
    found = {p: metadata.leader_for(TopicPartition("t", p)) for p in range(4)}
    assert found[0] is not None and (found[0].partition, found[0].leader) == (0, 2)
    assert found[1] is None
    assert found[2] is not None and (found[2].partition, found[2].leader) == (2, 3)
    assert found[3] is None
    assert metadata.partition_count("t") is None  # neither 2 (listed) nor 3 (largest id + 1): unknown


async def test_a_whole_answer_gives_the_partition_count() -> None:
    metadata = ClusterMetadata(ScriptedTransport([answer(partition(1, 2), partition(0, 1), partition(2, 3))]), 100)
    metadata.add_topics(["t"])
    await metadata.fetch(["t"])
    assert metadata.partition_count("t") == 3
    found = [metadata.leader_for(TopicPartition("t", p)) for p in range(3)]
    assert [(f.partition, f.leader) if f is not None else None for f in found] == [(0, 1), (1, 2), (2, 3)]


async def test_the_partition_count_waits_for_an_answer_without_a_gap(autojump_clock: MockClock) -> None:
    transport = ScriptedTransport([answer(partition(0, 1), partition(2, 3)),
                                   answer(partition(0, 1), partition(1, 2), partition(2, 3))])
    metadata = ClusterMetadata(transport, 100)
    assert await metadata.wait_for_partition_count("t", 60) == 3
    assert transport.requests == 2
    assert trio.current_time() == pytest.approx(0.1)  # one retry.backoff.ms between the two answers


async def test_an_answer_that_keeps_a_gap_times_out_naming_the_missing_partitions(autojump_clock: MockClock) -> None:
    metadata = ClusterMetadata(ScriptedTransport([answer(partition(0, 1), partition(2, 3))]), 100)
    with pytest.raises(UnknownTopicOrPartitionError, match="Some partitions of topic t not present in metadata after 5000 ms"):
        await metadata.wait_for_partition_count("t", 5)
    assert trio.current_time() == pytest.approx(5)


async def test_metadata_is_refreshed_whenever_it_is_max_age_old(autojump_clock: MockClock) -> None:
    """Counted from the client's start, so opening one costs no request, then from each answer."""
    transport = ScriptedTransport([answer(partition(0, 1))])
    metadata = ClusterMetadata(transport, 100, max_age_ms=1000)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(metadata.refresh_when_old)
        await trio.sleep(0.5)
        assert transport.requests == 0
        await metadata.refresh(["t"])  # an answer for another reason restarts the age
        await trio.sleep(0.9)
        assert transport.requests == 1
        await trio.sleep(0.2)
        assert transport.requests == 2
        await trio.sleep(3)
        assert transport.requests == 5
        nursery.cancel_scope.cancel()


async def test_an_answer_naming_an_older_leader_epoch_does_not_move_the_leader_back() -> None:
    """KIP-320: a broker cut off from the controller answers from a stale cache; believing it sent a consumer to a
    deposed leader, whose shorter log reset it to the beginning (found by the chaos harness)."""
    newer = MetadataPartition(errors.NONE.code, 0, 3, 9, [1, 2, 3], [3, 1])
    older = MetadataPartition(errors.NONE.code, 0, 2, 7, [1, 2, 3], [1, 2, 3])
    moved = MetadataPartition(errors.NONE.code, 0, 1, 10, [1, 2, 3], [1, 3])
    metadata = ClusterMetadata(ScriptedTransport([answer(newer), answer(older), answer(moved)]), 100)
    metadata.add_topics(["t"])
    leaders = []
    for _ in range(3):
        await metadata.fetch(["t"])
        found = metadata.leader_for(TopicPartition("t", 0))
        assert found is not None
        leaders.append((found.leader, found.leader_epoch))
    assert leaders == [(3, 9), (3, 9), (1, 10)]


async def test_an_answer_listing_every_topic_drops_the_topics_it_leaves_out() -> None:
    """As Kafka's clients take a full update: a topic left out was deleted. A pattern subscription, which asks for
    every topic, kept every topic it ever saw, and the partitions of deleted ones."""
    both = MetadataResponse(BROKERS, "cluster", 1, [MetadataTopic(errors.NONE.code, name, [partition(0, 1)])
                                                    for name in ("t", "gone")])
    metadata = ClusterMetadata(ScriptedTransport([both, answer(partition(0, 1))]), 100)
    metadata.track("subscription", None)
    await metadata.fetch(None)
    assert metadata.partition_count("gone") == 1
    await metadata.fetch(None)
    assert metadata.partition_count("gone") is None and metadata.partition_count("t") == 1


class GatedTransport(ScriptedTransport):
    """Answers each MetadataRequest with one partition of every topic it names, once `gate` is set."""

    def __init__(self) -> None:
        super().__init__([])
        self.asked: list[list[str] | None] = []
        self.gate = trio.Event()

    async def _send(self, node: NodeKey, request: Request, deadline: float, sent: trio.Event | None) -> Any:
        assert isinstance(request, MetadataRequest) and request.topics is not None
        self.asked.append(request.topics)
        await self.gate.wait()
        return MetadataResponse(BROKERS, "cluster", 1, [MetadataTopic(errors.NONE.code, name, [partition(0, 1)])
                                                        for name in request.topics])


async def test_a_refresh_joining_one_under_way_asks_again_for_topics_tracked_since_it_began(
        autojump_clock: MockClock) -> None:
    """A group leader tracks the other members' topics and refreshes to learn their partition counts; a refresh
    under way (the periodic one, say) had not asked for them, and joining it left the counts unknown, so the
    leader assigned those topics no partitions."""
    transport = GatedTransport()
    metadata = ClusterMetadata(transport, 100)
    metadata.track("subscription", ["mine"])
    async with trio.open_nursery() as nursery:
        nursery.start_soon(metadata.refresh)
        await trio.sleep(1)
        assert transport.asked == [["mine"]]
        metadata.track("group", ["mine", "theirs"])
        joined = trio.Event()

        async def join() -> None:
            await metadata.refresh()
            joined.set()

        nursery.start_soon(join)
        await trio.sleep(1)
        transport.gate.set()
        await joined.wait()
    assert transport.asked == [["mine"], ["mine", "theirs"]]
    assert metadata.partition_count("theirs") == 1 and metadata.partition_count("mine") == 1
