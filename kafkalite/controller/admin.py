"""Topics and partitions come and go: CreateTopics, CreatePartitions and DeleteTopics on the controller, the
topic watches that bring new partitions online, and Kafka's replica assignment (AdminUtils).

A request only writes the coordination service (a topic's znodes, a bigger assignment, `/admin/delete_topics`)
and the watches do the rest, exactly as when a tool writes those znodes itself; the request then waits on a
`Completion` for the outcome. The assignment must match Kafka's so that a topic spreads over brokers, leaders
included, the way operators expect: round-robin from a random start, followers shifted so that no two
partitions share the same follower pattern, and with racks, each rack holding a replica before any holds two.
"""

from __future__ import annotations

import logging
import random
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TypeVar

from kafkalite.common import errors
from kafkalite.common.config import BrokerConfig, TopicConfig
from kafkalite.common.errors import (
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    KafkaError,
    TopicAlreadyExistsError,
)
from kafkalite.common.types import ZERO_UUID, TopicPartition, random_uuid, validate_topic_name
from kafkalite.controller.context import ControllerContext
from kafkalite.controller.event_manager import Completion
from kafkalite.controller.partition_state_machine import PartitionState, PartitionStateMachine
from kafkalite.controller.replica_state_machine import ReplicaState, ReplicaStateMachine
from kafkalite.coordination.errors import NodeExistsError
from kafkalite.coordination.kafka_zk import KafkaZkClient, delete_topic_path, topic_path
from kafkalite.coordination.service import CreateOp, WatchedEvent
from kafkalite.network.requests import (
    CreatableTopic,
    CreatableTopicResult,
    CreatePartitionsRequest,
    CreatePartitionsTopic,
    CreatePartitionsTopicResult,
    CreateTopicsRequest,
    DeletableTopicResult,
    DeleteTopicsRequest,
)

log = logging.getLogger(__name__)

_T = TypeVar("_T")


def _replica_index(first_replica_index: int, second_replica_shift: int, replica_index: int,
                   num_brokers: int) -> int:
    shift = 1 + (second_replica_shift + replica_index) % (num_brokers - 1)
    return (first_replica_index + shift) % num_brokers


def _rack_alternated_broker_list(racks: Mapping[int, str]) -> list[int]:
    """Brokers ordered rack by rack in turn, so consecutive picks land on different racks."""
    by_rack: dict[str, list[int]] = {}
    for broker, rack in sorted(racks.items()):
        by_rack.setdefault(rack, []).append(broker)
    ordered_racks = sorted(by_rack)
    result: list[int] = []
    index = 0
    while len(result) < len(racks):
        brokers = by_rack[ordered_racks[index % len(ordered_racks)]]
        if brokers:
            result.append(brokers.pop(0))
        index += 1
    return result


def assign_replicas_to_brokers(num_partitions: int, replication_factor: int, brokers: Sequence[int],
                               racks: Mapping[int, str | None] | None = None, *,
                               rng: random.Random | None = None, start_partition_id: int = 0
                               ) -> dict[int, list[int]]:
    """Kafka's assignment; rack-aware when every broker has a rack."""
    rng = rng or random.Random()
    if replication_factor < 1:
        raise InvalidReplicationFactorError("Replication factor must be larger than 0.")
    if replication_factor > len(brokers):
        raise InvalidReplicationFactorError(
            f"Replication factor: {replication_factor} larger than available brokers: {len(brokers)}.")
    if num_partitions < 1:
        raise InvalidPartitionsError("Number of partitions must be larger than 0.")
    rack_of = {b: r for b, r in (racks or {}).items() if r is not None}
    aware = len(rack_of) == len(brokers) and all(b in rack_of for b in brokers)
    arranged = _rack_alternated_broker_list({b: rack_of[b] for b in brokers}) if aware else sorted(brokers)
    num_brokers = len(arranged)
    num_racks = len(set(rack_of.values())) if aware else num_brokers
    start_index = rng.randrange(num_brokers)
    next_replica_shift = rng.randrange(num_brokers)
    assignment: dict[int, list[int]] = {}
    for partition in range(start_partition_id, start_partition_id + num_partitions):
        if partition > 0 and partition % num_brokers == 0:
            next_replica_shift += 1
        first = (partition + start_index) % num_brokers
        replicas = [arranged[first]]
        if not aware:
            replicas += [arranged[_replica_index(first, next_replica_shift, j, num_brokers)]
                         for j in range(replication_factor - 1)]
        else:
            used_racks, k = {rack_of[arranged[first]]}, 0
            while len(replicas) < replication_factor:
                broker = arranged[_replica_index(first, next_replica_shift * num_racks, k, num_brokers)]
                rack = rack_of[broker]
                if (rack not in used_racks or len(used_racks) == num_racks) and \
                        (broker not in replicas or len(replicas) == num_brokers):
                    replicas.append(broker)
                    used_racks.add(rack)
                k += 1
        assignment[partition] = replicas
    return assignment


def validate_assignment(assignment: Mapping[int, Sequence[int]], known_brokers: set[int]) -> None:
    if not assignment:
        raise InvalidReplicaAssignmentError("The replica assignment is empty.")
    if sorted(assignment) != list(range(len(assignment))):
        raise InvalidReplicaAssignmentError(
            f"Partitions must be numbered 0..{len(assignment) - 1}, got {sorted(assignment)}.")
    sizes = {len(replicas) for replicas in assignment.values()}
    if len(sizes) != 1 or 0 in sizes:
        raise InvalidReplicaAssignmentError("Every partition must have the same, non-zero number of replicas.")
    for partition, replicas in assignment.items():
        if len(set(replicas)) != len(replicas):
            raise InvalidReplicaAssignmentError(f"Partition {partition} lists a broker twice: {list(replicas)}.")
        unknown = set(replicas) - known_brokers
        if unknown:
            raise InvalidReplicaAssignmentError(
                f"Partition {partition} is assigned to unknown brokers {sorted(unknown)}.")


def check_partition_budget(topic: str, count: int, budget: int) -> None:
    """INVALID_PARTITIONS before any plan is made for more partitions than one request may create."""
    if count > budget:
        raise InvalidPartitionsError(
            f"{count} new partitions asked for topic '{topic}'; one request may create at most {budget} more "
            f"(max.partitions.per.request)")


def _collision_key(topic: str) -> str:
    return topic.replace(".", "_")


def plan_topic(topic: CreatableTopic, config: BrokerConfig, existing_topics: set[str],
               live_brokers: Mapping[int, str | None], rng: random.Random, budget: int | None = None
               ) -> tuple[dict[int, list[int]], dict[str, object]]:
    """(assignment, config overrides) for a new topic, or the Kafka error that says why it cannot be made.

    `budget` is how many partitions the request may still create (default: max.partitions.per.request). The
    checks come in the order of Kafka's ZkAdminManager and AdminZkClient.validateTopicCreate, in their words."""
    validate_topic_name(topic.name)
    if topic.name in existing_topics:
        raise TopicAlreadyExistsError(f"Topic '{topic.name}' already exists.")
    nulls = [name for name, value in topic.configs.items() if value is None]
    if nulls:
        raise errors.InvalidConfigError(f"Null value not supported for topic configs: {','.join(nulls)}")
    if topic.assignments and (topic.num_partitions != -1 or topic.replication_factor != -1):
        raise errors.InvalidRequestError("Both numPartitions or replicationFactor and replicasAssignments were set. "
                                         "Both cannot be used at the same time.")
    colliding = [name for name in sorted(existing_topics) if _collision_key(name) == _collision_key(topic.name)] \
        if "." in topic.name or "_" in topic.name else []
    if colliding:
        # Kafka's metrics name a topic with '.' turned to '_', so two names that differ only there would share them
        raise errors.InvalidTopicError(f"Topic '{topic.name}' collides with existing topics: {', '.join(colliding)}")
    budget = config["max.partitions.per.request"] if budget is None else budget
    overrides = TopicConfig.for_broker(topic.configs, config).overrides
    if topic.assignments:
        check_partition_budget(topic.name, len(topic.assignments), budget)
        assignment = {int(p): list(replicas) for p, replicas in topic.assignments.items()}
        validate_assignment(assignment, set(live_brokers))
        return assignment, overrides
    partitions = config["num.partitions"] if topic.num_partitions == -1 else topic.num_partitions
    check_partition_budget(topic.name, partitions, budget)
    replication = config["default.replication.factor"] if topic.replication_factor == -1 \
        else topic.replication_factor
    return assign_replicas_to_brokers(partitions, replication, sorted(live_brokers), live_brokers,
                                      rng=rng), overrides


class AdminManager:
    """The controller's topic and partition creation, and the DeleteTopics request (TopicDeletionManager does
    the deleting)."""

    def __init__(self, controller_id: int, config: BrokerConfig, context: ControllerContext, zk: KafkaZkClient,
                 partition_state_machine: PartitionStateMachine, replica_state_machine: ReplicaStateMachine,
                 watch_topic: Callable[[str], Callable[[WatchedEvent], None]], rng: random.Random) -> None:
        self.controller_id = controller_id
        self.config = config
        self.context = context
        self.zk = zk
        self._partitions = partition_state_machine
        self._replicas = replica_state_machine
        self._watch_topic = watch_topic  # the handler of a topic znode's changes: queues PartitionModifications
        self.rng = rng
        self._topics_online: dict[str, Completion] = {}
        self._partitions_added: dict[str, Completion] = {}
        self._topics_deleted: dict[str, Completion] = {}

    def abandon(self) -> None:
        """The controller resigns: wake every waiting request; a deletion it did not finish is not done."""
        for waiters in (self._topics_online, self._partitions_added, self._topics_deleted):
            for waiter in waiters.values():
                waiter.finish(completed=False)
            waiters.clear()

    # -- the watches ----------------------------------------------------------------------------------------------

    def watch_assignment(self, topic: str) -> dict[int, tuple[int, ...]]:
        """Read a topic's assignment and id, and watch it: added partitions arrive as a change of this znode.

        A topic znode written without an id (by a tool, or a test, as Kafka's before 2.8) gets one here, written
        back with the rest of the znode kept, as Kafka's controller does for such topics."""
        self.zk.register_znode_change_handler(topic_path(topic), self._watch_topic(topic))
        found = self.zk.get_topic_id_and_assignment(topic, watch=True)
        if found is None:
            return {}
        topic_id, assignment = found
        if topic_id is None:
            topic_id = random_uuid(self.rng)
            self.zk.controller_multi(self.context.epoch_zk_version, [self.zk.set_replica_assignment_op(
                topic, topic_id, assignment, self.zk.get_ongoing_reassignments(topic))])
        self.context.topic_ids[topic] = topic_id
        return assignment

    def process_topic_change(self) -> None:
        context = self.context
        topics = set(self.zk.get_all_topics(watch=True))
        new_topics = topics - context.all_topics
        for topic in context.all_topics - topics:
            context.remove_topic(topic)
            self.zk.unregister_handlers(topic_path(topic))
        context.all_topics |= new_topics
        new_partitions = []
        for topic in sorted(new_topics):
            context.partition_assignments[topic] = self.watch_assignment(topic)
            new_partitions.extend(context.partitions_for_topic(topic))
        if new_partitions:
            self.on_new_partition_creation(new_partitions)
        for topic in new_topics:
            _finish(self._topics_online, topic)

    def process_partition_modifications(self, topic: str) -> None:
        if topic not in self.context.all_topics:
            return
        assignment = self.watch_assignment(topic)
        added = sorted(set(assignment) - set(self.context.partition_assignments.get(topic, {})))
        if not added:
            return
        self.context.partition_assignments[topic] = assignment
        self.on_new_partition_creation([TopicPartition(topic, p) for p in added])
        _finish(self._partitions_added, topic)

    def on_new_partition_creation(self, partitions: list[TopicPartition]) -> None:
        if log.isEnabledFor(logging.INFO):  # a 100,000-partition topic's list is not built for nothing
            log.info("controller %d: new partitions %s", self.controller_id, [str(tp) for tp in partitions])
        # Plain tuples: 30,000 named ones for a 10,000-partition topic would outlive the elections in between.
        replicas = [(tp.topic, tp.partition, r) for tp in partitions for r in self.context.assigned_replicas(tp)]
        self._partitions.handle_state_changes(partitions, PartitionState.NEW)
        self._replicas.handle_state_changes(replicas, ReplicaState.NEW)
        self._partitions.handle_state_changes(partitions, PartitionState.ONLINE)
        self._replicas.handle_state_changes(replicas, ReplicaState.ONLINE)

    def on_topic_deleted(self, topic: str) -> None:
        """The deletion forgot the topic before the topic-change event could, so its watch goes here, or one handler
        would be kept for every topic name ever deleted."""
        self.zk.unregister_handlers(topic_path(topic))
        _finish(self._topics_deleted, topic)

    # -- requests -------------------------------------------------------------------------------------------------

    def create_topics(self, request: CreateTopicsRequest) -> tuple[list[CreatableTopicResult], list[Completion]]:
        """Plan and write each topic; a name given twice is refused (`_given_once`) in Kafka's words."""
        existing = set(self.zk.get_all_topics()) | self.context.all_topics
        live = self._live_racks()
        results, waiters = [], []
        budget = self.config["max.partitions.per.request"]

        def refuse(name: str) -> None:
            results.append(CreatableTopicResult(name, errors.INVALID_REQUEST.code,
                                                "Found multiple entries for this topic."))

        for topic in _given_once(request.topics, lambda topic: topic.name, refuse):
            try:
                assignment, overrides = plan_topic(topic, self.config, existing, live, self.rng, budget)
                budget -= len(assignment)
                topic_id = ZERO_UUID
                if not request.validate_only:
                    topic_id = random_uuid(self.rng)
                    self.zk.controller_multi(self.context.epoch_zk_version,
                                             self.zk.create_topic_ops(topic.name, assignment, overrides, topic_id))
                    existing.add(topic.name)
                    waiters.append(self._topics_online.setdefault(topic.name, Completion()))
                results.append(CreatableTopicResult(topic.name, errors.NONE.code, None, len(assignment),
                                                    len(next(iter(assignment.values()))), topic_id))
            except KafkaError as exc:
                results.append(CreatableTopicResult(topic.name, exc.code, exc.message))
            except NodeExistsError:
                results.append(CreatableTopicResult(topic.name, errors.TOPIC_ALREADY_EXISTS.code,
                                                    f"Topic '{topic.name}' already exists."))
        return results, waiters

    def create_partitions(self, request: CreatePartitionsRequest
                          ) -> tuple[list[CreatePartitionsTopicResult], list[Completion]]:
        """Extend topics' assignments (Kafka's way, continuing from the last partition) and let the watch act."""
        results, waiters = [], []
        live = self._live_racks()

        def refuse(name: str) -> None:
            results.append(CreatePartitionsTopicResult(name, errors.INVALID_REQUEST.code,
                                                       "Duplicate topic in request."))

        for topic in _given_once(request.topics, lambda topic: topic.name, refuse):
            try:
                assignment = self._plan_new_partitions(topic, live)
                if not request.validate_only:
                    self.zk.controller_multi(self.context.epoch_zk_version, [self.zk.set_replica_assignment_op(
                        topic.name, self.context.topic_ids.get(topic.name), assignment)])
                    waiters.append(self._partitions_added.setdefault(topic.name, Completion()))
                results.append(CreatePartitionsTopicResult(topic.name, errors.NONE.code))
            except KafkaError as exc:
                results.append(CreatePartitionsTopicResult(topic.name, exc.code, exc.message))
        return results, waiters

    def _live_racks(self) -> dict[int, str | None]:
        return {b: info.rack for b, info in self.context.live_brokers.items() if b in self.context.live_broker_ids}

    def _plan_new_partitions(self, topic: CreatePartitionsTopic, live: dict[int, str | None]) -> dict[int, list[int]]:
        current = self.context.partition_assignments.get(topic.name)
        if current is None:
            raise errors.UnknownTopicOrPartitionError(f"Topic '{topic.name}' does not exist.")
        if self.context.is_topic_queued_up_for_deletion(topic.name):
            raise errors.InvalidTopicError(f"Topic '{topic.name}' is queued for deletion.")
        if any(tp.topic == topic.name for tp in self.context.partitions_being_reassigned):
            raise errors.ReassignmentInProgressError(f"Topic '{topic.name}' has partitions being reassigned.")
        if topic.count <= len(current):
            raise errors.InvalidPartitionsError(
                f"Topic '{topic.name}' has {len(current)} partitions; the new count {topic.count} must be larger.")
        new_count = topic.count - len(current)
        check_partition_budget(topic.name, new_count, self.config["max.partitions.per.request"])
        replication = len(current[0])
        if topic.assignments is not None:
            if len(topic.assignments) != new_count:
                raise errors.InvalidReplicaAssignmentError(
                    f"{len(topic.assignments)} assignments given for {new_count} new partitions.")
            added = {len(current) + i: list(replicas) for i, replicas in enumerate(topic.assignments)}
            validate_assignment({**current, **added}, set(live) | {r for rs in current.values() for r in rs})
            registered = set(self.context.live_or_shutting_down_broker_ids)
            unknown = sorted({r for replicas in added.values() for r in replicas} - registered)
            if unknown:  # as Kafka, which checks the new partitions' replicas against the brokers registered
                raise errors.InvalidReplicaAssignmentError(
                    f"Unknown broker(s) in replica assignment: {unknown}; the live brokers are {sorted(registered)}.")
        else:
            added = assign_replicas_to_brokers(new_count, replication, sorted(live), live, rng=self.rng,
                                               start_partition_id=len(current))
        return {**current, **added}

    def delete_topics(self, request: DeleteTopicsRequest) -> tuple[list[DeletableTopicResult], list[Completion]]:
        """Queue topics for deletion by writing `/admin/delete_topics/<topic>`; the watch does the rest."""
        results, waiters = [], []

        def refuse(name: str) -> None:
            results.append(DeletableTopicResult(name, errors.INVALID_REQUEST.code, "Duplicate topic name."))

        # with deletion disabled every topic gets that answer, as in Kafka
        for topic in _given_once(request.topic_names, lambda name: name, refuse):
            if not self.config["delete.topic.enable"]:
                results.append(DeletableTopicResult(topic, errors.TOPIC_DELETION_DISABLED.code,
                                                    "Topic deletion is disabled (delete.topic.enable=false)."))
            elif topic not in self.context.all_topics:
                results.append(DeletableTopicResult(topic, errors.UNKNOWN_TOPIC_OR_PARTITION.code,
                                                    f"Topic '{topic}' does not exist."))
            else:
                if not self.zk.exists(delete_topic_path(topic)):
                    self.zk.controller_multi(self.context.epoch_zk_version, [CreateOp(delete_topic_path(topic))])
                waiters.append(self._topics_deleted.setdefault(topic, Completion()))
                results.append(DeletableTopicResult(topic, errors.NONE.code))
        return results, waiters


def _given_once(topics: Sequence[_T], name_of: Callable[[_T], str], refuse: Callable[[str], None]) -> Iterator[_T]:
    """The request's topics whose name it gives once, in order; each entry of a name given more than once is
    refused (`refuse(name)` in its place) and none of them acts, since which one was meant would be a guess.

    Kafka's KRaft controller answers such a name once; librdkafka sizes its results by the response's count and
    indexes them by the request's order, so a shorter answer crashes the client's process (seen with
    confluent-kafka 2.16). One answer per entry, as Kafka's ZooKeeper-era broker gave CreateTopics, it reports as
    a malformed response instead."""
    counts = Counter(name_of(topic) for topic in topics)
    for topic in topics:
        if counts[name_of(topic)] == 1:
            yield topic
        else:
            refuse(name_of(topic))


def _finish(waiters: dict[str, Completion], topic: str) -> None:
    waiter = waiters.pop(topic, None)
    if waiter is not None:
        waiter.finish(completed=True)
