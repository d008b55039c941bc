"""KafkaController: election, failover, broker changes, topic creation, controlled shutdown (seeds 001-004).

Every broker runs one; the one that creates the ephemeral `/controller` first is the controller, bumps
`/controller_epoch`, and runs `on_controller_failover`. The others watch `/controller` and stand again when it
disappears. The controller talks to brokers only through requests on the transport, and writes to the
coordination service only through multis that check `/controller_epoch`'s version, so a deposed controller
(a zombie back from a long pause) can neither change the cluster's state nor be believed by brokers, which
reject its stale controller epoch.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from typing import Any

import trio

from kafkalite.common import errors
from kafkalite.common.clock import now_ms
from kafkalite.common.config import BrokerConfig
from kafkalite.common.errors import KafkaError
from kafkalite.common.types import TopicPartition
from kafkalite.controller.admin import assign_replicas_to_brokers, plan_topic, validate_assignment
from kafkalite.controller.channel_manager import ControllerChannelManager
from kafkalite.controller.context import (
    ControllerContext,
    PartitionAndReplica,
    PartitionState,
    ReassignmentContext,
    ReplicaState,
)
from kafkalite.controller.event_manager import (
    AdminRequest,
    BrokerChange,
    ControlledShutdown,
    ControllerChange,
    ControllerEvent,
    AutoPreferredReplicaLeaderElection,
    ControllerEventManager,
    IsrChangeNotification,
    PartitionModifications,
    PartitionReassignment,
    PartitionReassignmentIsrChange,
    PreferredReplicaLeaderElection,
    Reelect,
    Startup,
    TopicChange,
    TopicDeletion,
    TopicDeletionStopReplicaResponseReceived,
)
from kafkalite.controller.leader_selectors import (
    controlled_shutdown_partition_leader_selector,
    no_op_partition_leader_selector,
    reassigned_partition_leader_selector,
    preferred_replica_partition_leader_selector,
    unclean_partition_leader_selector,
)
from kafkalite.controller.partition_state_machine import PartitionStateMachine
from kafkalite.controller.replica_state_machine import ReplicaStateMachine
from kafkalite.controller.request_batch import ControllerBrokerRequestBatch
from kafkalite.controller.topic_deletion_manager import TopicDeletionManager
from kafkalite.coordination.errors import CoordinationError, NodeExistsError
from kafkalite.coordination.kafka_zk import (
    BROKER_IDS_PATH,
    CONTROLLER_PATH,
    DELETE_TOPICS_PATH,
    ISR_CHANGE_NOTIFICATION_PATH,
    PREFERRED_REPLICA_ELECTION_PATH,
    REASSIGN_PARTITIONS_PATH,
    TOPICS_PATH,
    ControllerMovedError,
    KafkaZkClient,
    decode_partition_reassignment,
    decode_preferred_replica_election,
    delete_topic_path,
    encode_partition_reassignment,
    partition_state_path,
    topic_path,
)
from kafkalite.coordination.service import CreateOp, DeleteOp, EventType, SetDataOp, WatchedEvent
from kafkalite.network.requests import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    CreatableTopicResult,
    ControlledShutdownRequest,
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreatePartitionsTopic,
    CreatePartitionsTopicResult,
    ControlledShutdownResponse,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeletableTopicResult,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    ElectionResult,
    ElectLeadersRequest,
    ElectLeadersResponse,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
    OngoingReassignment,
    PREFERRED_ELECTION,
    ReassignablePartitionResponse,
    UNCLEAN_ELECTION,
    Request,
    RequestContext,
    Response,
)
from kafkalite.network.transport import PauseGate, Transport

log = logging.getLogger(__name__)


class KafkaController:
    def __init__(self, config: BrokerConfig, zk: KafkaZkClient, transport: Transport, gate: PauseGate, *,
                 rng: random.Random | None = None) -> None:
        self.config = config
        self.broker_id = config.broker_id
        self.zk = zk
        self.transport = transport
        self.gate = gate
        self.rng = rng or random.Random()
        self.context = ControllerContext()
        self.active_controller_id = -1
        self.event_manager = ControllerEventManager(self._process, gate)
        self._nursery: trio.Nursery | None = None
        self._active_scope: trio.CancelScope | None = None
        self._topics_online: dict[str, trio.Event] = {}
        self.channel_manager: ControllerChannelManager | None = None
        self.broker_request_batch: ControllerBrokerRequestBatch | None = None
        self.partition_state_machine: PartitionStateMachine | None = None
        self.replica_state_machine: ReplicaStateMachine | None = None
        self.topic_deletion_manager: TopicDeletionManager | None = None
        self._topics_deleted: dict[str, _Deletion] = {}
        self._partitions_added: dict[str, trio.Event] = {}

    @property
    def is_active(self) -> bool:
        return self.active_controller_id == self.broker_id

    @property
    def epoch(self) -> int:
        return self.context.epoch

    # -- lifecycle ------------------------------------------------------------------------------------------------

    async def startup(self, nursery: trio.Nursery) -> None:
        self._nursery = nursery
        self.zk.register_state_change_handler(f"controller-{self.broker_id}",
                                              lambda: self.event_manager.put(Reelect()))
        self.zk.register_znode_change_handler(CONTROLLER_PATH, self._on_controller_znode)
        nursery.start_soon(self.event_manager.run)
        self.event_manager.put(Startup())

    def shutdown(self) -> None:
        """Stop being the controller before the broker goes away (its `/controller` goes with its session)."""
        if self.is_active:
            self.on_controller_resignation()
        self.active_controller_id = -1

    def _on_controller_znode(self, event: WatchedEvent) -> None:
        self.event_manager.put(Reelect() if event.type is EventType.NODE_DELETED else ControllerChange())

    # -- the event loop -------------------------------------------------------------------------------------------

    async def _process(self, event: ControllerEvent) -> None:
        try:
            if isinstance(event, (Startup, Reelect)):
                await self._reelect()
            elif isinstance(event, ControllerChange):
                self._handle_controller_change()
            elif isinstance(event, ControlledShutdown):
                event.result = self._controlled_shutdown(event.broker_id, event.broker_epoch)
            elif isinstance(event, AdminRequest):
                event.result = _ADMIN_HANDLERS[type(event.request)](self, event.request)
            elif not self.is_active:
                return
            elif isinstance(event, BrokerChange):
                self._process_broker_change()
            elif isinstance(event, TopicChange):
                self._process_topic_change()
            elif isinstance(event, IsrChangeNotification):
                self._process_isr_change_notification()
            elif isinstance(event, PartitionReassignment):
                self._process_partition_reassignment()
            elif isinstance(event, PartitionReassignmentIsrChange):
                tp = TopicPartition(event.topic, event.partition)
                if tp in self.context.partitions_being_reassigned:
                    self.on_partition_reassignment(tp)
            elif isinstance(event, PreferredReplicaLeaderElection):
                self._process_preferred_replica_election_znode()
            elif isinstance(event, AutoPreferredReplicaLeaderElection):
                self.check_and_trigger_auto_leader_rebalance()
            elif isinstance(event, PartitionModifications):
                self._process_partition_modifications(event.topic)
            elif isinstance(event, TopicDeletion):
                self._deletion.process_topic_deletion()
            elif isinstance(event, TopicDeletionStopReplicaResponseReceived):
                self._deletion.on_stop_replica_response(event.broker_id, event.response)
        except ControllerMovedError as exc:
            log.warning("controller %d: a write was fenced (%s); another controller was elected", self.broker_id, exc)
            self._maybe_resign()
        except CoordinationError as exc:
            log.warning("controller %d: lost the coordination session while processing %s: %s", self.broker_id,
                        type(event).__name__, exc)
            self._maybe_resign()

    def _maybe_resign(self) -> None:
        if self.is_active:
            self.on_controller_resignation()
        self.active_controller_id = -1
        self.event_manager.put(ControllerChange())

    # -- election (seeds 002, 004) --------------------------------------------------------------------------------

    async def _reelect(self) -> None:
        if self.is_active:
            self.on_controller_resignation()
        self.active_controller_id = -1
        current = self.zk.get_controller_id(watch=True)
        if current is not None:
            self.active_controller_id = current
            return
        if not self.zk.try_elect_controller(self.broker_id, now_ms()):
            current = self.zk.get_controller_id(watch=True)
            if current is None:
                self.event_manager.put(Reelect())
            else:
                self.active_controller_id = current
            return
        self.zk.exists(CONTROLLER_PATH, watch=True)
        epoch, epoch_zk_version = self.zk.increment_controller_epoch()
        self.active_controller_id = self.broker_id
        log.info("broker %d is the controller (epoch %d)", self.broker_id, epoch)
        await self.on_controller_failover(epoch, epoch_zk_version)

    def _handle_controller_change(self) -> None:
        current = self.zk.get_controller_id(watch=True)
        if current is None:
            self.event_manager.put(Reelect())
            return
        if self.is_active and current != self.broker_id:
            self.on_controller_resignation()
        self.active_controller_id = current

    async def on_controller_failover(self, epoch: int, epoch_zk_version: int) -> None:
        """Read the cluster into a fresh context, watch it, start the state machines, tell every broker."""
        assert self._nursery is not None
        context = self.context = ControllerContext(epoch=epoch, epoch_zk_version=epoch_zk_version)
        active_nursery = await self._nursery.start(self._hold_active_nursery)
        self.channel_manager = ControllerChannelManager(self.broker_id, self.transport, self.gate, active_nursery)
        self.broker_request_batch = ControllerBrokerRequestBatch(self.broker_id, context, self.channel_manager)
        self.partition_state_machine = PartitionStateMachine(self.broker_id, self.config, context, self.zk,
                                                             self.broker_request_batch)
        self.replica_state_machine = ReplicaStateMachine(self.broker_id, context, self.zk, self.broker_request_batch,
                                                         self._on_stop_replica_with_delete)
        self.topic_deletion_manager = TopicDeletionManager(self, self.partition_state_machine,
                                                           self.replica_state_machine, self._on_topic_deleted)

        self.zk.register_child_change_handler(BROKER_IDS_PATH, lambda _: self.event_manager.put(BrokerChange()))
        self.zk.register_child_change_handler(TOPICS_PATH, lambda _: self.event_manager.put(TopicChange()))
        self.zk.register_child_change_handler(ISR_CHANGE_NOTIFICATION_PATH,
                                              lambda _: self.event_manager.put(IsrChangeNotification()))
        self.zk.register_child_change_handler(DELETE_TOPICS_PATH, lambda _: self.event_manager.put(TopicDeletion()))
        self.zk.register_znode_change_handler(REASSIGN_PARTITIONS_PATH,
                                              lambda _: self.event_manager.put(PartitionReassignment()))
        self.zk.register_znode_change_handler(PREFERRED_REPLICA_ELECTION_PATH,
                                              lambda _: self.event_manager.put(PreferredReplicaLeaderElection()))
        context.live_brokers = self.zk.get_all_brokers(watch=True)
        context.all_topics = set(self.zk.get_all_topics(watch=True))
        for topic in sorted(context.all_topics):
            context.partition_assignments[topic] = self._watch_assignment(topic)
        for tp in context.all_partitions():
            state = self.zk.get_partition_state(tp)
            if state is not None:
                context.partition_leadership_info[tp] = state
        if self.config["delete.topic.enable"]:
            context.topics_to_be_deleted = set(self.zk.get_children(DELETE_TOPICS_PATH)) & context.all_topics
        for broker_id in sorted(context.live_brokers):
            self.channel_manager.add_broker(broker_id)
        self.send_update_metadata_request(context.live_or_shutting_down_broker_ids, context.all_partitions())
        self.replica_state_machine.startup()
        self.partition_state_machine.startup()
        # Resume what the previous controller had started, reassignments first: a topic being reassigned
        # waits for the move before it is deleted. Then requests queued while no one was controller.
        self.event_manager.put(PartitionReassignment())
        self.event_manager.put(TopicDeletion())
        self.event_manager.put(PreferredReplicaLeaderElection())
        if self.config["auto.leader.rebalance.enable"]:
            active_nursery.start_soon(self._auto_rebalance_scheduler)
        if self.zk.get_isr_change_notifications(watch=True):
            self.event_manager.put(IsrChangeNotification())
        log.info("controller %d epoch %d: failover done, %d live brokers, %d topics", self.broker_id, epoch,
                 len(context.live_brokers), len(context.all_topics))

    async def _hold_active_nursery(self, task_status: trio.TaskStatus[trio.Nursery] = trio.TASK_STATUS_IGNORED
                                   ) -> None:
        """A nursery that lives exactly as long as this broker is the controller (its channel senders)."""
        with trio.CancelScope() as scope:
            self._active_scope = scope
            async with trio.open_nursery() as nursery:
                task_status.started(nursery)
                await trio.sleep_forever()

    def on_controller_resignation(self) -> None:
        log.info("controller %d epoch %d resigns", self.broker_id, self.context.epoch)
        self.zk.unregister_handlers(BROKER_IDS_PATH, TOPICS_PATH, ISR_CHANGE_NOTIFICATION_PATH, DELETE_TOPICS_PATH,
                                    PREFERRED_REPLICA_ELECTION_PATH, REASSIGN_PARTITIONS_PATH,
                                    *(partition_state_path(tp) for tp in self.context.partitions_being_reassigned),
                                    *(topic_path(topic) for topic in self.context.all_topics))
        if self._active_scope is not None:
            self._active_scope.cancel()
            self._active_scope = None
        self.channel_manager = None
        self.broker_request_batch = None
        self.partition_state_machine = None
        self.replica_state_machine = None
        self.topic_deletion_manager = None
        self.context = ControllerContext(epoch=self.context.epoch)
        for waiters in (self._topics_online, self._partitions_added):
            for waiter in waiters.values():
                waiter.set()
            waiters.clear()
        for deletion in self._topics_deleted.values():
            deletion.finish(completed=False)
        self._topics_deleted.clear()

    # -- what the state machines need ------------------------------------------------------------------------------

    @property
    def _psm(self) -> PartitionStateMachine:
        assert self.partition_state_machine is not None
        return self.partition_state_machine

    @property
    def _rsm(self) -> ReplicaStateMachine:
        assert self.replica_state_machine is not None
        return self.replica_state_machine

    @property
    def _deletion(self) -> TopicDeletionManager:
        assert self.topic_deletion_manager is not None
        return self.topic_deletion_manager

    def _on_stop_replica_with_delete(self, broker_id: int, response: Any) -> None:
        """Called on a channel sender task: only queue the event."""
        self.event_manager.put(TopicDeletionStopReplicaResponseReceived(broker_id=broker_id, response=response))

    def _on_topic_deleted(self, topic: str) -> None:
        deletion = self._topics_deleted.pop(topic, None)
        if deletion is not None:
            deletion.finish(completed=True)

    def send_update_metadata_request(self, broker_ids: set[int], partitions: list[TopicPartition]) -> None:
        batch = self.broker_request_batch
        assert batch is not None
        batch.new_batch()
        batch.add_update_metadata_request_for_brokers(broker_ids, partitions)
        batch.send_requests_to_brokers(self.context.epoch)

    # -- broker changes (seed 003) --------------------------------------------------------------------------------

    def _process_broker_change(self) -> None:
        assert self.channel_manager is not None
        context = self.context
        current = self.zk.get_all_brokers(watch=True)
        known = context.live_or_shutting_down_broker_ids
        new = set(current) - known
        dead = known - set(current)
        bounced = {b for b in set(current) & known if current[b].epoch != context.live_brokers[b].epoch}
        log.info("controller %d: newly added brokers %s, dead brokers %s, bounced brokers %s, all live brokers %s",
                 self.broker_id, sorted(new), sorted(dead), sorted(bounced), sorted(current))
        for broker_id in dead | bounced:
            self.channel_manager.remove_broker(broker_id)
            del context.live_brokers[broker_id]
        if bounced:
            self.on_broker_failure(bounced)
        for broker_id in sorted(new | bounced):
            context.live_brokers[broker_id] = current[broker_id]
            self.channel_manager.add_broker(broker_id)
        if bounced:
            self.on_broker_startup(bounced)
        if new:
            self.on_broker_startup(new)
        if dead:
            self.on_broker_failure(dead)

    def on_broker_startup(self, new_brokers: set[int]) -> None:
        """Tell everyone about the new brokers, give them their replicas, elect where leaders are missing."""
        context = self.context
        self.send_update_metadata_request(context.live_or_shutting_down_broker_ids - new_brokers, [])
        self.send_update_metadata_request(new_brokers, context.all_partitions())
        for tp, reassignment in list(context.partitions_being_reassigned.items()):
            if set(reassignment.target_replicas) & new_brokers:
                self.on_partition_reassignment(tp)
        on_new = context.replicas_on_brokers(new_brokers)
        self._rsm.handle_state_changes([r for r in on_new if not context.is_topic_queued_up_for_deletion(r.topic)],
                                       ReplicaState.ONLINE)
        self._psm.trigger_online_partition_state_change()
        self._deletion.resume_deletion_for_topics(on_new)

    def on_broker_failure(self, dead_brokers: set[int]) -> None:
        """Partitions led by the dead go offline and get new leaders; their replicas go offline."""
        context = self.context
        context.shutting_down_broker_ids -= dead_brokers
        without_leader = [tp for tp, leadership in sorted(context.partition_leadership_info.items())
                          if leadership.leader_and_isr.leader in dead_brokers
                          and not context.is_topic_queued_up_for_deletion(tp.topic)]
        self._psm.handle_state_changes(without_leader, PartitionState.OFFLINE)
        self._psm.trigger_online_partition_state_change()
        on_dead = context.replicas_on_brokers(dead_brokers)
        self._rsm.handle_state_changes([r for r in on_dead if not context.is_topic_queued_up_for_deletion(r.topic)],
                                       ReplicaState.OFFLINE)
        self._deletion.fail_replica_deletion(r for r in on_dead if context.is_topic_queued_up_for_deletion(r.topic)
                                             and context.replica_states.get(r) is not ReplicaState.DELETION_SUCCESSFUL)
        if not without_leader:
            self.send_update_metadata_request(context.live_or_shutting_down_broker_ids, [])

    def _controlled_shutdown(self, broker_id: int, broker_epoch: int) -> ControlledShutdownResponse:
        """Move leadership off a stopping broker and stop its follower replicas; answer what it still leads."""
        if not self.is_active:
            return ControlledShutdownResponse(errors.NOT_CONTROLLER.code, error_message=(
                f"broker {self.broker_id} is not the controller"))
        context = self.context
        if broker_id not in context.live_or_shutting_down_broker_ids:
            return ControlledShutdownResponse(errors.BROKER_NOT_AVAILABLE.code,
                                              error_message=f"broker {broker_id} is not alive")
        if broker_epoch != -1 and broker_epoch < context.broker_epoch(broker_id):
            return ControlledShutdownResponse(errors.STALE_BROKER_EPOCH.code, error_message=(
                f"broker epoch {broker_epoch} is older than {context.broker_epoch(broker_id)}"))
        context.shutting_down_broker_ids.add(broker_id)
        log.info("controller %d: shutting down broker %d", self.broker_id, broker_id)
        for tp in context.partitions_on_broker(broker_id):
            leadership = context.partition_leadership_info.get(tp)
            if leadership is None or len(context.partition_replica_assignment(tp)) < 2:
                continue
            if leadership.leader_and_isr.leader == broker_id:
                self._psm.handle_state_changes([tp], PartitionState.ONLINE,
                                               controlled_shutdown_partition_leader_selector)
            else:
                self._rsm.handle_state_changes([PartitionAndReplica(tp.topic, tp.partition, broker_id)],
                                               ReplicaState.OFFLINE)
        remaining = [(tp.topic, tp.partition) for tp, leadership in sorted(context.partition_leadership_info.items())
                     if leadership.leader_and_isr.leader == broker_id
                     and len(context.partition_replica_assignment(tp)) > 1]
        return ControlledShutdownResponse(errors.NONE.code, remaining)

    # -- topics ---------------------------------------------------------------------------------------------------

    def _process_topic_change(self) -> None:
        context = self.context
        topics = set(self.zk.get_all_topics(watch=True))
        new_topics = topics - context.all_topics
        for topic in context.all_topics - topics:
            context.remove_topic(topic)
            self.zk.unregister_handlers(topic_path(topic))
        context.all_topics |= new_topics
        new_partitions = []
        for topic in sorted(new_topics):
            context.partition_assignments[topic] = self._watch_assignment(topic)
            new_partitions.extend(context.partitions_for_topic(topic))
        if new_partitions:
            self.on_new_partition_creation(new_partitions)
        for topic in new_topics:
            waiter = self._topics_online.pop(topic, None)
            if waiter is not None:
                waiter.set()

    def _watch_assignment(self, topic: str) -> dict[int, list[int]]:
        """Read a topic's assignment and watch it: added partitions arrive as a change of this znode."""
        self.zk.register_znode_change_handler(
            topic_path(topic), lambda event: self.event_manager.put(PartitionModifications(topic)))
        return self.zk.get_replica_assignment(topic, watch=True) or {}

    def _process_partition_modifications(self, topic: str) -> None:
        if topic not in self.context.all_topics:
            return
        assignment = self._watch_assignment(topic)
        added = sorted(set(assignment) - set(self.context.partition_assignments.get(topic, {})))
        if not added:
            return
        self.context.partition_assignments[topic] = assignment
        self.on_new_partition_creation([TopicPartition(topic, p) for p in added])
        waiter = self._partitions_added.pop(topic, None)
        if waiter is not None:
            waiter.set()

    def _create_partitions(self, request: CreatePartitionsRequest
                           ) -> tuple[list[CreatePartitionsTopicResult], list[trio.Event]]:
        """Extend topics' assignments (Kafka's way, continuing from the last partition) and let the watch act."""
        if not self.is_active:
            return [CreatePartitionsTopicResult(t.name, errors.NOT_CONTROLLER.code, "not the controller")
                    for t in request.topics], []
        results, waiters = [], []
        live = {b: info.rack for b, info in self.context.live_brokers.items() if b in self.context.live_broker_ids}
        for topic in request.topics:
            try:
                assignment = self._plan_new_partitions(topic, live)
                if not request.validate_only:
                    self.zk.controller_multi(self.context.epoch_zk_version,
                                             [self.zk.set_replica_assignment_op(topic.name, assignment)])
                    waiters.append(self._partitions_added.setdefault(topic.name, trio.Event()))
                results.append(CreatePartitionsTopicResult(topic.name, errors.NONE.code))
            except KafkaError as exc:
                results.append(CreatePartitionsTopicResult(topic.name, exc.code, exc.message))
        return results, waiters

    def _plan_new_partitions(self, topic: CreatePartitionsTopic, live: dict[int, str | None]) -> dict[int, list[int]]:
        current = self.context.partition_assignments.get(topic.name)
        if current is None:
            raise errors.UnknownTopicOrPartitionError(f"Topic '{topic.name}' does not exist.")
        if self.context.is_topic_queued_up_for_deletion(topic.name):
            raise errors.InvalidTopicError(f"Topic '{topic.name}' is queued for deletion.")
        if topic.count <= len(current):
            raise errors.InvalidPartitionsError(
                f"Topic '{topic.name}' has {len(current)} partitions; the new count {topic.count} must be larger.")
        new_count = topic.count - len(current)
        replication = len(current[0])
        if topic.assignments is not None:
            if len(topic.assignments) != new_count:
                raise errors.InvalidReplicaAssignmentError(
                    f"{len(topic.assignments)} assignments given for {new_count} new partitions.")
            added = {len(current) + i: list(replicas) for i, replicas in enumerate(topic.assignments)}
            validate_assignment({**current, **added}, set(live) | {r for rs in current.values() for r in rs})
        else:
            added = assign_replicas_to_brokers(new_count, replication, sorted(live), live, rng=self.rng,
                                               start_partition_id=len(current))
        return {**current, **added}

    def on_new_partition_creation(self, partitions: list[TopicPartition]) -> None:
        log.info("controller %d: new partitions %s", self.broker_id, [str(tp) for tp in partitions])
        replicas = self.context.replicas_for_partitions(partitions)
        self._psm.handle_state_changes(partitions, PartitionState.NEW)
        self._rsm.handle_state_changes(replicas, ReplicaState.NEW)
        self._psm.handle_state_changes(partitions, PartitionState.ONLINE)
        self._rsm.handle_state_changes(replicas, ReplicaState.ONLINE)

    def _create_topics(self, request: CreateTopicsRequest) -> tuple[list[CreatableTopicResult], list[trio.Event]]:
        if not self.is_active:
            return [CreatableTopicResult(t.name, errors.NOT_CONTROLLER.code, "not the controller")
                    for t in request.topics], []
        existing = set(self.zk.get_all_topics()) | self.context.all_topics
        live = {b: info.rack for b, info in self.context.live_brokers.items() if b in self.context.live_broker_ids}
        results, waiters = [], []
        for topic in request.topics:
            try:
                assignment, overrides = plan_topic(topic, self.config, existing, live, self.rng)
                if not request.validate_only:
                    self.zk.controller_multi(self.context.epoch_zk_version,
                                             self.zk.create_topic_ops(topic.name, assignment, overrides))
                    existing.add(topic.name)
                    waiters.append(self._topics_online.setdefault(topic.name, trio.Event()))
                results.append(CreatableTopicResult(topic.name, errors.NONE.code, None, len(assignment),
                                                    len(next(iter(assignment.values())))))
            except KafkaError as exc:
                results.append(CreatableTopicResult(topic.name, exc.code, exc.message))
            except NodeExistsError:
                results.append(CreatableTopicResult(topic.name, errors.TOPIC_ALREADY_EXISTS.code,
                                                    f"Topic '{topic.name}' already exists."))
        return results, waiters

    def _delete_topics(self, request: DeleteTopicsRequest) -> tuple[list[DeletableTopicResult], list[_Deletion]]:
        """Queue topics for deletion by writing `/admin/delete_topics/<topic>`; the watch does the rest."""
        if not self.is_active:
            return [DeletableTopicResult(t, errors.NOT_CONTROLLER.code, "not the controller")
                    for t in request.topic_names], []
        results, waiters = [], []
        for topic in request.topic_names:  # with deletion disabled every topic gets that answer, as in Kafka
            if not self.config["delete.topic.enable"]:
                results.append(DeletableTopicResult(topic, errors.TOPIC_DELETION_DISABLED.code,
                                                    "Topic deletion is disabled (delete.topic.enable=false)."))
            elif topic not in self.context.all_topics:
                results.append(DeletableTopicResult(topic, errors.UNKNOWN_TOPIC_OR_PARTITION.code,
                                                    f"Topic '{topic}' does not exist."))
            else:
                if not self.zk.exists(delete_topic_path(topic)):
                    self.zk.controller_multi(self.context.epoch_zk_version, [CreateOp(delete_topic_path(topic))])
                waiters.append(self._topics_deleted.setdefault(topic, _Deletion()))
                results.append(DeletableTopicResult(topic, errors.NONE.code))
        return results, waiters

    # -- partition reassignment ---------------------------------------------------------------------------------------

    def _alter_partition_reassignments(self, request: AlterPartitionReassignmentsRequest
                                       ) -> AlterPartitionReassignmentsResponse:
        """Validate, then write the targets to `/admin/reassign_partitions`; the znode's watch starts the moves."""
        if not self.is_active:
            return AlterPartitionReassignmentsResponse(errors.NOT_CONTROLLER.code, error_message="not the controller")
        accepted: dict[TopicPartition, list[int]] = {}
        responses = []
        for item in request.partitions:
            tp = TopicPartition(item.topic, item.partition)
            try:
                self._validate_reassignment(tp, item.replicas)
                accepted[tp] = list(item.replicas)
                responses.append(ReassignablePartitionResponse(item.topic, item.partition, errors.NONE.code))
            except KafkaError as exc:
                responses.append(ReassignablePartitionResponse(item.topic, item.partition, exc.code, exc.message))
        if accepted:
            self._write_reassignments({**self._pending_reassignments(), **accepted})
        return AlterPartitionReassignmentsResponse(errors.NONE.code, responses)

    def _validate_reassignment(self, tp: TopicPartition, replicas: list[int]) -> None:
        if tp not in self.context.partition_leadership_info or self.context.is_topic_queued_up_for_deletion(tp.topic):
            raise errors.UnknownTopicOrPartitionError(f"{tp} does not exist")
        if not replicas:
            raise errors.InvalidReplicaAssignmentError(f"the target replica list of {tp} is empty")
        if len(set(replicas)) != len(replicas):
            raise errors.InvalidReplicaAssignmentError(f"the target replica list of {tp} repeats a broker: {replicas}")
        unavailable = [r for r in replicas if not self.context.is_replica_online(r)]
        if unavailable:
            raise errors.InvalidReplicaAssignmentError(
                f"brokers {unavailable} in the target replicas of {tp} are not alive (or unknown)")
        if tp in self.context.partitions_being_reassigned:
            raise errors.ReassignmentInProgressError(f"{tp} is already being reassigned")

    def _write_reassignments(self, targets: dict[TopicPartition, list[int]]) -> None:
        data = encode_partition_reassignment(targets)
        if not targets:
            ops = [DeleteOp(REASSIGN_PARTITIONS_PATH)] if self.zk.exists(REASSIGN_PARTITIONS_PATH) else []
        elif self.zk.exists(REASSIGN_PARTITIONS_PATH):
            ops = [SetDataOp(REASSIGN_PARTITIONS_PATH, data)]
        else:
            ops = [CreateOp(REASSIGN_PARTITIONS_PATH, data)]
        if ops:
            self.zk.controller_multi(self.context.epoch_zk_version, ops)

    def _list_partition_reassignments(self, request: ListPartitionReassignmentsRequest
                                      ) -> ListPartitionReassignmentsResponse:
        if not self.is_active:
            return ListPartitionReassignmentsResponse(errors.NOT_CONTROLLER.code, error_message="not the controller")
        wanted = None if request.topic_partitions is None else {TopicPartition(t, p) for t, p in
                                                                request.topic_partitions}
        return ListPartitionReassignmentsResponse(errors.NONE.code, [
            OngoingReassignment(tp.topic, tp.partition, self.context.partition_replica_assignment(tp),
                                r.adding, r.removing)
            for tp, r in sorted(self.context.partitions_being_reassigned.items()) if wanted is None or tp in wanted])

    def _pending_reassignments(self) -> dict[TopicPartition, list[int]]:
        return {tp: r.target_replicas for tp, r in self.context.partitions_being_reassigned.items()}

    def _process_partition_reassignment(self) -> None:
        """Start the moves `/admin/reassign_partitions` lists; a request or a tool wrote it, so what cannot
        move (malformed, unknown partition, topic being deleted) is logged and removed from the znode, as
        Kafka's controller does, lest it stay there forever."""
        try:
            found = self.zk.get_data(REASSIGN_PARTITIONS_PATH, watch=True)
            targets, rejected = decode_partition_reassignment(found[0]) if found is not None else ({}, [])
        except ValueError as exc:
            targets, rejected = {}, [f"the znode is malformed: {exc}"]
        for tp, replicas in targets.items():
            if tp in self.context.partitions_being_reassigned:
                continue
            if tp not in self.context.partition_leadership_info or \
                    self.context.is_topic_queued_up_for_deletion(tp.topic):
                rejected.append(f"{tp} does not exist or its topic is being deleted")
                continue
            self.context.partitions_being_reassigned[tp] = ReassignmentContext(
                list(self.context.partition_replica_assignment(tp)), replicas)
            self.zk.register_znode_change_handler(partition_state_path(tp), lambda _, tp=tp: self.event_manager.put(
                PartitionReassignmentIsrChange(tp.topic, tp.partition)))
            self.on_partition_reassignment(tp)
        for reason in rejected:
            log.error("controller %d: ignoring a partition reassignment: %s", self.broker_id, reason)
        if rejected:
            self._write_reassignments(self._pending_reassignments())

    def on_partition_reassignment(self, tp: TopicPartition) -> None:
        """Kafka's two phases: grow to OAR + RAR and wait for RAR to join the ISR; then elect from RAR and
        remove what is no longer assigned."""
        context = self.context
        reassignment = context.partitions_being_reassigned[tp]
        state = self.zk.get_partition_state(tp, watch=True)
        if state is None:
            return
        context.partition_leadership_info[tp] = state
        target = reassignment.target_replicas
        if not set(target) <= set(state.leader_and_isr.isr):
            union = reassignment.original_replicas + reassignment.adding
            if context.partition_replica_assignment(tp) != union:
                self._set_assignment(tp, union)
                self._rsm.handle_state_changes(
                    [PartitionAndReplica(tp.topic, tp.partition, r) for r in reassignment.adding
                     if PartitionAndReplica(tp.topic, tp.partition, r) not in context.replica_states],
                    ReplicaState.NEW)
                self._psm.handle_state_changes([tp], PartitionState.ONLINE, no_op_partition_leader_selector)
            return
        log.info("controller %d: every target replica %s of %s is in the ISR; completing", self.broker_id, target, tp)
        self._rsm.handle_state_changes([PartitionAndReplica(tp.topic, tp.partition, r) for r in reassignment.adding],
                                       ReplicaState.ONLINE)
        context.partition_assignments[tp.topic][tp.partition] = list(target)
        leader = state.leader_and_isr.leader
        selector = reassigned_partition_leader_selector if leader not in target or \
            not context.is_replica_online(leader) else no_op_partition_leader_selector
        self._psm.handle_state_changes([tp], PartitionState.ONLINE, selector)
        removing = [PartitionAndReplica(tp.topic, tp.partition, r) for r in reassignment.removing]
        context.partition_assignments[tp.topic][tp.partition] = reassignment.original_replicas + reassignment.adding
        for replica_state in (ReplicaState.OFFLINE, ReplicaState.DELETION_STARTED, ReplicaState.DELETION_SUCCESSFUL,
                              ReplicaState.NON_EXISTENT):
            self._rsm.handle_state_changes(removing, replica_state)
        self._set_assignment(tp, list(target))
        del context.partitions_being_reassigned[tp]
        self.zk.unregister_handlers(partition_state_path(tp))
        self._write_reassignments(self._pending_reassignments())
        self.send_update_metadata_request(context.live_or_shutting_down_broker_ids, [tp])
        self._deletion.resume_deletions()  # the topic may have been waiting for this move to be deleted

    def _set_assignment(self, tp: TopicPartition, replicas: list[int]) -> None:
        assignment = dict(self.context.partition_assignments[tp.topic])
        assignment[tp.partition] = replicas
        self.zk.controller_multi(self.context.epoch_zk_version,
                                 [self.zk.set_replica_assignment_op(tp.topic, assignment)])
        self.context.partition_assignments[tp.topic] = assignment

    # -- leader elections on request (ElectLeaders, the admin znode) and the auto rebalance ------------------------

    def _elect_leaders(self, request: ElectLeadersRequest) -> ElectLeadersResponse:
        if not self.is_active:
            return ElectLeadersResponse(errors.NOT_CONTROLLER.code, error_message="not the controller")
        if request.election_type not in (PREFERRED_ELECTION, UNCLEAN_ELECTION):
            return ElectLeadersResponse(errors.INVALID_REQUEST.code,
                                        error_message=f"unknown election type {request.election_type}")
        partitions = self.context.all_partitions() if request.topic_partitions is None else \
            [TopicPartition(t, p) for t, p in request.topic_partitions]
        return ElectLeadersResponse(errors.NONE.code, [self._elect_leader(tp, request.election_type)
                                                       for tp in partitions])

    def _elect_leader(self, tp: TopicPartition, election_type: int) -> ElectionResult:
        """One partition of an ElectLeaders request, with the per-partition codes Kafka's ElectLeaders gives."""
        context = self.context
        leadership = self.zk.get_partition_state(tp) if tp in context.partition_leadership_info else None
        if leadership is None:
            return ElectionResult(tp.topic, tp.partition, errors.UNKNOWN_TOPIC_OR_PARTITION.code,
                                  f"{tp} does not exist")
        if context.is_topic_queued_up_for_deletion(tp.topic):
            return ElectionResult(tp.topic, tp.partition, errors.INVALID_TOPIC_EXCEPTION.code,
                                  f"topic {tp.topic} is being deleted")
        current = leadership.leader_and_isr
        if election_type == PREFERRED_ELECTION:
            preferred = context.partition_replica_assignment(tp)[0]
            if current.leader == preferred:
                return ElectionResult(tp.topic, tp.partition, errors.ELECTION_NOT_NEEDED.code,
                                      f"preferred replica {preferred} already leads {tp}")
            if not context.is_replica_online(preferred) or preferred not in current.isr:
                return ElectionResult(tp.topic, tp.partition, errors.PREFERRED_LEADER_NOT_AVAILABLE.code,
                                      f"preferred replica {preferred} of {tp} is not alive and in the ISR")
            if not self._psm.handle_state_changes([tp], PartitionState.ONLINE,
                                                  preferred_replica_partition_leader_selector):
                return ElectionResult(tp.topic, tp.partition, errors.PREFERRED_LEADER_NOT_AVAILABLE.code,
                                      f"the election of preferred replica {preferred} for {tp} failed")
            return ElectionResult(tp.topic, tp.partition, errors.NONE.code)
        if context.is_replica_online(current.leader):
            return ElectionResult(tp.topic, tp.partition, errors.ELECTION_NOT_NEEDED.code,
                                  f"{tp} has a live leader {current.leader}")
        elected = self._psm.handle_state_changes([tp], PartitionState.ONLINE, unclean_partition_leader_selector)
        if not elected:
            return ElectionResult(tp.topic, tp.partition, errors.ELIGIBLE_LEADERS_NOT_AVAILABLE.code,
                                  f"no live replica of {tp} can lead")
        return ElectionResult(tp.topic, tp.partition, errors.NONE.code)

    def _process_preferred_replica_election_znode(self) -> None:
        """Kafka's admin path: elect preferred leaders for the partitions listed, then remove the request."""
        try:
            found = self.zk.get_data(PREFERRED_REPLICA_ELECTION_PATH, watch=True)
            if found is None:
                return
            listed = decode_preferred_replica_election(found[0])
        except ValueError as exc:
            log.error("controller %d: ignoring %s: %s", self.broker_id, PREFERRED_REPLICA_ELECTION_PATH, exc)
        else:
            for tp in self.context.all_partitions() if listed is None else listed:
                self._elect_leader(tp, PREFERRED_ELECTION)
        self.zk.controller_multi(self.context.epoch_zk_version, [DeleteOp(PREFERRED_REPLICA_ELECTION_PATH)])

    async def _auto_rebalance_scheduler(self) -> None:
        """Lives in the controller's active nursery, so it stops when the controller resigns."""
        interval = self.config["leader.imbalance.check.interval.seconds"]
        while True:
            await trio.sleep(interval)
            await self.gate.checkpoint()
            self.event_manager.put(AutoPreferredReplicaLeaderElection())

    def check_and_trigger_auto_leader_rebalance(self) -> None:
        """Per broker, the share of partitions it should lead but does not; over the threshold, move them back.

        Not while partitions are being reassigned, as in Kafka: their preferred replicas are about to change."""
        context = self.context
        if context.partitions_being_reassigned:
            return
        threshold = self.config["leader.imbalance.per.broker.percentage"] / 100
        preferred_of: dict[int, list[TopicPartition]] = {}
        for tp in context.all_partitions():
            if tp in context.partition_leadership_info and not context.is_topic_queued_up_for_deletion(tp.topic):
                preferred_of.setdefault(context.partition_replica_assignment(tp)[0], []).append(tp)
        for broker_id, partitions in sorted(preferred_of.items()):
            not_led = [tp for tp in partitions
                       if context.partition_leadership_info[tp].leader_and_isr.leader != broker_id]
            ratio = len(not_led) / len(partitions)
            if ratio > threshold and context.is_replica_online(broker_id):
                log.info("controller %d: broker %d leads %d of its %d preferred partitions (imbalance %.0f%%); "
                         "rebalancing", self.broker_id, broker_id, len(partitions) - len(not_led), len(partitions),
                         100 * ratio)
                for tp in not_led:
                    self._elect_leader(tp, PREFERRED_ELECTION)

    # -- ISR change notifications ---------------------------------------------------------------------------------

    def _process_isr_change_notification(self) -> None:
        """Leaders changed ISRs: refresh them from the partition state znodes and tell every broker."""
        names = self.zk.get_isr_change_notifications(watch=True)
        if not names:
            return
        changed = sorted({tp for name in names for tp in self.zk.read_isr_change_notification(name)})
        refreshed = []
        for tp in changed:
            if tp.topic not in self.context.all_topics:
                continue
            state = self.zk.get_partition_state(tp)
            if state is not None:
                self.context.partition_leadership_info[tp] = state
                refreshed.append(tp)
        self.send_update_metadata_request(self.context.live_or_shutting_down_broker_ids, refreshed)
        self.zk.delete_isr_change_notifications(names, self.context.epoch_zk_version)

    # -- requests from brokers' KafkaApis -------------------------------------------------------------------------

    async def handle_request(self, request: Request, context: RequestContext) -> Response:
        """Serve a controller-bound request on the event queue and wait for its answer."""
        event: Any
        if isinstance(request, ControlledShutdownRequest):
            event = ControlledShutdown(broker_id=request.broker_id, broker_epoch=request.broker_epoch)
        elif type(request) in _ADMIN_HANDLERS:
            event = AdminRequest(request=request)
        else:
            raise errors.InvalidRequestError(f"{type(request).__name__} is not a controller request")
        self.event_manager.put(event)
        await event.done.wait()
        if event.result is None:
            raise errors.UnknownServerError(f"the controller failed to process {type(request).__name__}")
        response_type = _RESPONSE_AFTER_WAITING.get(type(request))
        if response_type is not None:
            results, waiters = event.result
            with trio.move_on_after(request.timeout_ms / 1000) as timeout:  # type: ignore[attr-defined]
                for waiter in waiters:
                    await waiter.wait()
            if timeout.cancelled_caught:
                for result in results:
                    if result.error_code == errors.NONE.code:
                        result.error_code = errors.REQUEST_TIMED_OUT.code
                        result.error_message = "Timed out waiting for the controller to finish."
            elif isinstance(request, DeleteTopicsRequest):
                # A created topic's znodes are written, so the next controller brings it online and the broker
                # still waits for its metadata; a deletion cut short by a resignation is not done yet.
                accepted = [result for result in results if result.error_code == errors.NONE.code]
                for result, deletion in zip(accepted, waiters):
                    if not deletion.completed:
                        result.error_code = errors.NOT_CONTROLLER.code
                        result.error_message = "The controller moved before the deletion completed; retry."
            return response_type(results)
        return event.result


class _Deletion:
    """A topic deletion a DeleteTopics request waits for; a resignation wakes the request without completing it."""

    def __init__(self) -> None:
        self._woken = trio.Event()
        self.completed = False

    def finish(self, *, completed: bool) -> None:
        self.completed = completed
        self._woken.set()

    async def wait(self) -> None:
        await self._woken.wait()


# The admin requests a controller serves, each with the handler the event loop runs for it.
_ADMIN_HANDLERS: dict[type[Request], Callable[[KafkaController, Any], Any]] = {
    CreateTopicsRequest: KafkaController._create_topics,
    DeleteTopicsRequest: KafkaController._delete_topics,
    CreatePartitionsRequest: KafkaController._create_partitions,
    ElectLeadersRequest: KafkaController._elect_leaders,
    AlterPartitionReassignmentsRequest: KafkaController._alter_partition_reassignments,
    ListPartitionReassignmentsRequest: KafkaController._list_partition_reassignments,
}

# The admin requests whose handler answers (results, waiters): the request handler waits, up to the request's
# timeout, for the topics to come online or go away before it answers with this response type.
_RESPONSE_AFTER_WAITING: dict[type[Request], Callable[[Any], Response]] = {
    CreateTopicsRequest: CreateTopicsResponse, DeleteTopicsRequest: DeleteTopicsResponse,
    CreatePartitionsRequest: CreatePartitionsResponse,
}
