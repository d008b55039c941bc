"""MetadataCache: the broker's copy of the cluster metadata, as the controller last described it (seed 001).

Every broker holds the full picture, so a client may bootstrap from any of them. The cache changes only on
UpdateMetadata; a broker never asks the coordination service for it.

An update costs what it changes: the partition states it names are written in place, and only the small
picture of live brokers and controller is rebuilt. Readers stay consistent because every read and every update
is synchronous, so an update is applied whole between two Trio checkpoints and no reader ever sees half of one;
what a read returns is built afresh (lists, metadata objects) or is an immutable state an update replaces, never
edits, so it stays as it was when the next update lands.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import trio

from kafkalite.common import errors
from kafkalite.common.errors import InvalidTopicError
from kafkalite.common.types import INTERNAL_TOPICS, ZERO_UUID, TopicPartition, validate_topic_name
from kafkalite.network.requests import (
    LEADER_DURING_DELETE,
    BrokerEndpoint,
    LiveBroker,
    MetadataBroker,
    MetadataPartition,
    MetadataTopic,
    UpdateMetadataPartitionState,
    UpdateMetadataRequest,
)
from kafkalite.server.delayed import FetchWatchers

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class MetadataSnapshot:
    """The live brokers and the controller, as of one update: replaced whole by the next."""

    controller_id: int | None
    alive_brokers: dict[int, LiveBroker]
    alive_nodes: dict[int, dict[str, BrokerEndpoint]]  # broker id -> listener name -> endpoint


class MetadataCache:
    def __init__(self, broker_id: int) -> None:
        self.broker_id = broker_id
        self._snapshot = MetadataSnapshot(None, {}, {})
        self._partition_states: dict[str, dict[int, UpdateMetadataPartitionState]] = {}
        self._topic_ids: dict[str, str] = {}  # the cached topics' ids, and the names by id
        self._topic_names: dict[str, str] = {}
        self._updated = trio.Event()
        # Requests parked until a broker dies or comes back (a DeleteRecords waits on live replicas only)
        self.alive_brokers_watchers = FetchWatchers()

    async def wait_until(self, condition: Callable[[MetadataCache], bool]) -> None:
        """Wait for an UpdateMetadata after which `condition` holds (Kafka's delayed create-topics waits so)."""
        while not condition(self):
            await self._updated.wait()

    def update_metadata(self, correlation_id: int, request: UpdateMetadataRequest) -> list[TopicPartition]:
        """Apply an UpdateMetadata; returns the partitions it deleted (those marked LEADER_DURING_DELETE).

        Updates may be partial (only some partitions): the states named replace those cached, the rest stay.
        """
        alive_brokers: dict[int, LiveBroker] = {}
        alive_nodes: dict[int, dict[str, BrokerEndpoint]] = {}
        for broker in request.live_brokers:
            alive_brokers[broker.id] = broker
            alive_nodes[broker.id] = {ep.listener: ep for ep in broker.endpoints}
        own_listeners = alive_nodes.get(self.broker_id)
        if own_listeners is not None and any(nodes.keys() != own_listeners.keys() for nodes in alive_nodes.values()):
            log.error("listeners are not identical across brokers: %s", alive_nodes)
        controller_id = request.controller_id if request.controller_id >= 0 else None
        deleted: list[TopicPartition] = []
        partition_states = self._partition_states
        emptied: list[str] = []
        for state in request.partition_states:
            topic_states = partition_states.get(state.topic)
            if state.leader == LEADER_DURING_DELETE:
                if topic_states is not None:
                    topic_states.pop(state.partition, None)
                    if not topic_states:
                        emptied.append(state.topic)
                deleted.append(TopicPartition(state.topic, state.partition))
            elif topic_states is None:
                partition_states[state.topic] = {state.partition: state}
            else:
                topic_states[state.partition] = state
        for topic in emptied:
            if not partition_states.get(topic, True):
                del partition_states[topic]
                self._topic_names.pop(self._topic_ids.pop(topic, ""), None)
        for topic, topic_id in request.topic_ids.items():
            if topic in partition_states and self._topic_ids.get(topic) != topic_id:
                self._topic_names.pop(self._topic_ids.get(topic, ""), None)
                self._topic_ids[topic], self._topic_names[topic_id] = topic_id, topic
        if request.partition_states:
            log.debug("broker %d cached %d partition states (correlation id %d)", self.broker_id,
                      len(request.partition_states), correlation_id)
        if alive_brokers.keys() != self._snapshot.alive_brokers.keys():
            self.alive_brokers_watchers.wake_all()
        self._snapshot = MetadataSnapshot(controller_id, alive_brokers, alive_nodes)
        self._updated.set()
        self._updated = trio.Event()
        return deleted

    # -- reads ----------------------------------------------------------------------------------------------------

    @property
    def controller_id(self) -> int | None:
        return self._snapshot.controller_id

    def get_partition_info(self, tp: TopicPartition) -> UpdateMetadataPartitionState | None:
        topic_states = self._partition_states.get(tp.topic)
        return topic_states.get(tp.partition) if topic_states is not None else None

    def topic_id(self, topic: str) -> str:
        """The topic's id (KIP-516), ZERO_UUID for a topic this broker does not know."""
        return self._topic_ids.get(topic, ZERO_UUID)

    def topic_name(self, topic_id: str) -> str | None:
        """The name of the topic with this id, None if this broker knows no such topic."""
        return self._topic_names.get(topic_id)

    def contains_topic(self, topic: str) -> bool:
        return topic in self._partition_states

    def contains_partition(self, tp: TopicPartition) -> bool:
        return self.get_partition_info(tp) is not None

    def partition_count(self, topic: str) -> int | None:
        """How many partitions the topic has, None if this broker knows no such topic."""
        states = self._partition_states.get(topic)
        return len(states) if states else None

    def get_all_topics(self) -> set[str]:
        return set(self._partition_states)

    def get_alive_broker_ids(self) -> list[int]:
        return sorted(self._snapshot.alive_brokers)

    def has_alive_broker(self, broker_id: int) -> bool:
        return broker_id in self._snapshot.alive_brokers

    def get_alive_metadata_brokers(self, listener: str) -> list[MetadataBroker]:
        """The live brokers as a client on `listener` must reach them: that listener's endpoint of each."""
        snapshot = self._snapshot
        brokers = []
        for broker_id, broker in sorted(snapshot.alive_brokers.items()):
            endpoint = snapshot.alive_nodes[broker_id].get(listener)
            if endpoint is not None:
                brokers.append(MetadataBroker(broker_id, endpoint.host, endpoint.port, broker.rack))
        return brokers

    def get_topic_metadata(self, topics: Iterable[str] | None, listener: str) -> list[MetadataTopic]:
        """Topic metadata for a client; `topics=None` means every topic. Unknown topics get an error entry."""
        snapshot = self._snapshot
        names = sorted(self._partition_states) if topics is None else list(topics)
        result = []
        for name in names:
            try:
                validate_topic_name(name)
            except InvalidTopicError as exc:
                result.append(MetadataTopic(exc.code, str(name), error_message=exc.message))
                continue
            states = self._partition_states.get(name)
            if states is None:
                result.append(MetadataTopic(errors.UNKNOWN_TOPIC_OR_PARTITION.code, name,
                                            error_message=f"unknown topic {name!r}"))
                continue
            result.append(MetadataTopic(errors.NONE.code, name, [
                self._partition_metadata(snapshot, state, listener) for _, state in sorted(states.items())],
                is_internal=name in INTERNAL_TOPICS, topic_id=self.topic_id(name)))
        return result

    @staticmethod
    def _partition_metadata(snapshot: MetadataSnapshot, state: UpdateMetadataPartitionState,
                            listener: str) -> MetadataPartition:
        leader_nodes = snapshot.alive_nodes.get(state.leader)
        if state.leader < 0 or leader_nodes is None:
            error, leader = errors.LEADER_NOT_AVAILABLE, -1
        elif listener not in leader_nodes:
            error, leader = errors.LISTENER_NOT_FOUND, -1
        else:
            error, leader = errors.NONE, state.leader
        return MetadataPartition(error.code, state.partition, leader, state.leader_epoch, list(state.replicas),
                                 list(state.isr), list(state.offline_replicas))
