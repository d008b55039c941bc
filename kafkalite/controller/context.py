"""ControllerContext: the controller's cache of the cluster (seed 002).

Everything the controller decides is decided from this cache, which it builds at failover from the
coordination service and keeps current from its watches. Only the one controller event task touches it, so
it needs no locks (Kafka's controllerLock is our single event queue).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from kafkalite.common.types import TopicPartition
from kafkalite.controller.leader_selectors import Brokers
from kafkalite.controller.states import PartitionState, ReplicaState
from kafkalite.coordination.kafka_zk import BrokerInfo, LeaderIsrAndControllerEpoch


class IllegalStateTransition(Exception):
    """A state machine was asked for a move its table forbids; nothing was changed."""


ReplicaKey = tuple[str, int, int]
"""A replica as (topic, partition, broker id): a PartitionAndReplica, or a plain tuple where thousands are made at
once (a new topic's replicas): the cyclic GC stops tracking a plain tuple of atomic values, not a named one."""


class PartitionAndReplica(NamedTuple):
    topic: str
    partition: int
    replica: int

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


_FRESH_BELOW = 1_000
"""State changes over fewer partitions than this make their TopicPartitions afresh (`topic_partitions`)."""


@dataclass(frozen=True)
class ReassignmentContext:
    """A reassignment in flight: where the partition was (ORS) and where it is going (TRS), and so the replicas it
    adds and removes.

    Both are kept in the topic's znode as well (Kafka's adding_replicas / removing_replicas), so a controller
    elected in the middle of the move knows what it adds and removes. Each step of every move of a topic writes
    what every other move of it adds and removes: worked out once per move, not at each of those writes."""

    original_replicas: list[int]
    target_replicas: list[int]
    adding: list[int] = field(init=False)
    removing: list[int] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "adding", [r for r in self.target_replicas if r not in self.original_replicas])
        object.__setattr__(self, "removing", [r for r in self.original_replicas if r not in self.target_replicas])


@dataclass
class ControllerContext:
    epoch: int = 0
    epoch_zk_version: int = -1
    live_brokers: dict[int, BrokerInfo] = field(default_factory=dict)
    shutting_down_broker_ids: set[int] = field(default_factory=set)
    all_topics: set[str] = field(default_factory=set)
    # Each partition's replicas as a tuple (see KafkaZkClient.get_assignment); `partition_replica_assignment` gives
    # a list to change.
    partition_assignments: dict[str, dict[int, Sequence[int]]] = field(default_factory=dict)
    topic_ids: dict[str, str] = field(default_factory=dict)  # Kafka's topic ids (KIP-516), as the topic znodes hold
    partition_leadership_info: dict[TopicPartition, LeaderIsrAndControllerEpoch] = field(default_factory=dict)
    partition_states: dict[TopicPartition, PartitionState] = field(default_factory=dict)
    # Keyed by plain (topic, partition, replica) tuples, equal to and found by a PartitionAndReplica: the cyclic GC
    # stops tracking a plain tuple of atomic values, not a named one, and a new controller fills in one key per
    # replica (30,000 for 10,000 partitions at RF=3) that would otherwise all reach its oldest generation.
    # Nothing iterates over it; write it with plain tuples, as `set_replica_state` does.
    replica_states: dict[ReplicaKey, ReplicaState] = field(default_factory=dict)
    topics_to_be_deleted: set[str] = field(default_factory=set)
    partitions_being_reassigned: dict[TopicPartition, ReassignmentContext] = field(default_factory=dict)

    # -- brokers --------------------------------------------------------------------------------------------------

    @property
    def live_broker_ids(self) -> set[int]:
        """Brokers that may take new work: alive and not shutting down."""
        return set(self.live_brokers) - self.shutting_down_broker_ids

    @property
    def live_or_shutting_down_broker_ids(self) -> set[int]:
        return set(self.live_brokers)

    def brokers(self) -> Brokers:
        """Who may lead (alive, not shutting down) and who is leaving, as the leader selectors take it."""
        return Brokers(frozenset(self.live_broker_ids), frozenset(self.shutting_down_broker_ids))

    def broker_epoch(self, broker_id: int) -> int:
        broker = self.live_brokers.get(broker_id)
        return broker.epoch if broker is not None else -1

    def is_replica_online(self, broker_id: int, *, include_shutting_down: bool = False) -> bool:
        if include_shutting_down:
            return broker_id in self.live_brokers
        return broker_id in self.live_brokers and broker_id not in self.shutting_down_broker_ids

    # -- partitions -----------------------------------------------------------------------------------------------

    def partition_replica_assignment(self, tp: TopicPartition) -> list[int]:
        return list(self.assigned_replicas(tp))

    def assigned_replicas(self, tp: TopicPartition) -> Sequence[int]:
        """`tp`'s replicas as cached, not to be changed: the requests built for every partition share the tuple."""
        return self.partition_assignments.get(tp.topic, {}).get(tp.partition, ())

    def partitions_for_topic(self, topic: str) -> list[TopicPartition]:
        return [TopicPartition(topic, p) for p in sorted(self.partition_assignments.get(topic, {}))]

    def all_partitions(self) -> list[TopicPartition]:
        return self.topic_partitions((topic, partition) for topic, partition, _ in self._assignments())

    def partitions_on_broker(self, broker_id: int) -> list[TopicPartition]:
        return self.topic_partitions((topic, partition) for topic, partition, replicas in self._assignments()
                                     if broker_id in replicas)

    def topic_partitions(self, pairs: Iterable[tuple[str, int]]) -> list[TopicPartition]:
        """A TopicPartition for each (topic, partition), the one the controller holds already where it has one.

        A state change over thousands of partitions would otherwise make one per partition, and those live through
        the whole event: the cyclic GC carries them into its oldest generation, where enough of them bring on a
        full collection, which walks everything the process holds. A few (a step of one partition's move, a small
        topic's deletion) are made afresh: finding the held ones takes a table of every partition the controller
        knows, which cost more than the rest of such a state change in a cluster of 10,000 partitions."""
        wanted = list(pairs)
        if len(wanted) < _FRESH_BELOW:
            return [TopicPartition(*pair) for pair in wanted]
        held = {tp: tp for tp in self.partition_leadership_info}  # a (topic, partition) tuple finds its key
        return [held.get(pair) or TopicPartition(*pair) for pair in wanted]

    def replicas_for_partitions(self, partitions: Iterable[TopicPartition]) -> list[PartitionAndReplica]:
        return [PartitionAndReplica(tp.topic, tp.partition, r)
                for tp in partitions for r in self.partition_replica_assignment(tp)]

    def replicas_on_brokers(self, broker_ids: set[int]) -> list[ReplicaKey]:
        """Plain tuples: a broker failure lists every replica the broker had, tens of thousands."""
        return [(topic, partition, r) for topic, partition, replicas in self._assignments()
                for r in replicas if r in broker_ids]

    def _assignments(self) -> Iterator[tuple[str, int, Sequence[int]]]:
        """(topic, partition, replicas) of every partition, in order."""
        for topic in sorted(self.partition_assignments):
            assignment = self.partition_assignments[topic]
            for partition in sorted(assignment):
                yield topic, partition, assignment[partition]

    def set_replica_state(self, replica: ReplicaKey, state: ReplicaState) -> None:
        """Record `replica`'s state under a plain tuple key (see `replica_states`)."""
        topic, partition, broker_id = replica
        self.replica_states[(topic, partition, broker_id)] = state

    def is_topic_queued_up_for_deletion(self, topic: str) -> bool:
        return topic in self.topics_to_be_deleted

    def remove_topic(self, topic: str) -> None:
        for tp in self.partitions_for_topic(topic):
            self.partition_leadership_info.pop(tp, None)
            self.partition_states.pop(tp, None)
            for replica in self.replicas_for_partitions([tp]):
                self.replica_states.pop(replica, None)
        self.partition_assignments.pop(topic, None)
        self.topic_ids.pop(topic, None)
        self.all_topics.discard(topic)
        self.topics_to_be_deleted.discard(topic)
