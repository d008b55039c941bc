"""KafkaController: election, failover, resignation, broker changes and controlled shutdown (seeds 001-004).

Every broker runs one; the one that creates the ephemeral `/controller` first is the controller, bumps
`/controller_epoch` in the same transaction, and runs `on_controller_failover`. The others watch `/controller`
and stand again when it disappears. The controller talks to brokers only through requests on the transport,
and writes to the coordination service only through multis that check `/controller_epoch`'s version, so a
deposed controller (a zombie back from a long pause) can neither change the cluster's state nor be believed by
brokers, which reject its stale controller epoch.

Everything the controller does is an event on one queue, and `ROUTES` below says, per event and per request,
who handles it and whether it needs an active controller; a request that finds none is answered
NOT_CONTROLLER there and only there. Losing the coordination service mid-event (a cut link, an expired
session) makes the controller resign once and do nothing until its session is back, healed or renewed
(`SessionReestablished`): then it runs the election again, and if `/controller` is still its own, a failover
with a new epoch. The roles a term needs (topic admin, deletion, reassignment, elections on request) are
built at failover and dropped at resignation; each gets the context, the coordination client, the state
machines and the request batch, never the controller.
"""

from __future__ import annotations

import inspect
import logging
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import trio

from kafkalite.common import errors
from kafkalite.common.clock import now_ms
from kafkalite.common.config import BrokerConfig
from kafkalite.common.types import TopicPartition
from kafkalite.controller.admin import AdminManager
from kafkalite.controller.channel_manager import ControllerChannelManager
from kafkalite.controller.context import ControllerContext
from kafkalite.controller.elections import Elections
from kafkalite.controller.event_manager import (
    AutoPreferredReplicaLeaderElection,
    BrokerChange,
    Completion,
    ControllerChange,
    ControllerEvent,
    ControllerEventManager,
    ControllerRequest,
    IsrChangeNotification,
    PartitionModifications,
    PartitionReassignment,
    PartitionReassignmentIsrChange,
    PreferredReplicaLeaderElection,
    Reelect,
    SessionReestablished,
    Startup,
    TopicChange,
    TopicConfigChange,
    TopicDeletion,
    TopicDeletionStopReplicaResponseReceived,
)
from kafkalite.controller.leader_selectors import controlled_shutdown_partition_leader_selector
from kafkalite.controller.partition_state_machine import PartitionState, PartitionStateMachine
from kafkalite.controller.reassignment import ReassignmentManager
from kafkalite.controller.replica_state_machine import VALID_PREVIOUS_STATES, ReplicaState, ReplicaStateMachine
from kafkalite.controller.request_batch import ControllerBrokerRequestBatch
from kafkalite.controller.topic_deletion_manager import TopicDeletionManager
from kafkalite.coordination.errors import CoordinationError
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
    partition_state_path,
    topic_path,
)
from kafkalite.coordination.service import EventType, WatchedEvent
from kafkalite.network.requests import (
    AlterPartitionReassignmentsRequest,
    ControlledShutdownRequest,
    ControlledShutdownResponse,
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    ElectLeadersRequest,
    ListPartitionReassignmentsRequest,
    Request,
    RequestContext,
    Response,
)
from kafkalite.network.responses import error_response
from kafkalite.network.transport import PauseGate, Transport

log = logging.getLogger(__name__)


@dataclass
class _Term:
    """What a controller builds at failover and drops at resignation."""

    scope: trio.CancelScope  # its channel senders and the rebalance scheduler live here
    channel_manager: ControllerChannelManager
    batch: ControllerBrokerRequestBatch
    partitions: PartitionStateMachine
    replicas: ReplicaStateMachine
    admin: AdminManager
    deletion: TopicDeletionManager
    reassignment: ReassignmentManager
    elections: Elections


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
        self._term: _Term | None = None
        self._cut_off = False  # lost the coordination service; waiting for SessionReestablished

    @property
    def is_active(self) -> bool:
        return self._term is not None

    @property
    def epoch(self) -> int:
        return self.context.epoch

    @property
    def term(self) -> _Term:
        assert self._term is not None, "not the active controller"
        return self._term

    # -- lifecycle ------------------------------------------------------------------------------------------------

    async def startup(self, nursery: trio.Nursery) -> None:
        self._nursery = nursery
        reestablished = lambda: self.event_manager.put(SessionReestablished())  # noqa: E731
        self.zk.register_state_change_handler(f"controller-{self.broker_id}", reestablished, reestablished)
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
        route = route_for(event)
        if (self._cut_off and not route.while_cut_off) or (route.needs_active and not self.is_active):
            self._refuse(event)
            return
        try:
            result = route.handler(self, event.request if isinstance(event, ControllerRequest) else event)
            if inspect.iscoroutine(result):
                result = await result
            if isinstance(event, ControllerRequest):
                event.result = result
        except ControllerMovedError as exc:
            log.warning("controller %d: a write was fenced (%s); another controller was elected", self.broker_id, exc)
            self._refuse(event)
            self._on_controller_moved()
        except CoordinationError as exc:
            log.warning("controller %d: lost the coordination service while processing %s: %s", self.broker_id,
                        type(event).__name__, exc)
            self._refuse(event)
            self._on_coordination_lost()

    def _refuse(self, event: ControllerEvent) -> None:
        """The one place a request is answered NOT_CONTROLLER: no active controller here, or it just resigned."""
        if isinstance(event, ControllerRequest):
            event.result = error_response(event.request, errors.NOT_CONTROLLER.code,
                                          f"broker {self.broker_id} is not the controller")
        else:
            log.debug("controller %d: not the controller; dropping %s", self.broker_id, type(event).__name__)

    def _on_controller_moved(self) -> None:
        if self.is_active:
            self.on_controller_resignation()
        try:
            self.maybe_resign()
        except CoordinationError:
            self._on_coordination_lost()

    def _on_coordination_lost(self) -> None:
        """Resign once and wait for the session to come back; every event until then is dropped, so a cut
        link cannot make the controller spin."""
        if self.is_active:
            self.on_controller_resignation()
        self.active_controller_id = -1
        self._cut_off = True

    # -- election (seeds 002, 004) --------------------------------------------------------------------------------

    async def _process_reelect(self, _: ControllerEvent) -> None:
        self.maybe_resign()
        await self.elect()

    async def _process_session_reestablished(self, _: ControllerEvent) -> None:
        self._cut_off = False
        await self._process_reelect(_)

    def _process_controller_change(self, _: ControllerEvent) -> None:
        self.maybe_resign()

    def maybe_resign(self) -> None:
        """Learn who the controller is (and watch `/controller`); resign if it is no longer us."""
        current = self.zk.get_controller_id(watch=True)
        self.active_controller_id = current if current is not None else -1
        if self.is_active and current != self.broker_id:
            self.on_controller_resignation()

    async def elect(self) -> None:
        """Stand for controller: create `/controller` with a new epoch, unless someone holds it.

        If it is our own node, kept through a lost link to the coordination service after which we resigned,
        we are still the elected controller and start a new term (a new epoch) instead of sitting idle."""
        current = self.zk.get_controller_id(watch=True)
        if current is not None:
            self.active_controller_id = current
            if current == self.broker_id and not self.is_active and self.zk.controller_is_this_session():
                epoch, epoch_zk_version = self.zk.increment_controller_epoch()
                await self.on_controller_failover(epoch, epoch_zk_version)
            return
        elected = self.zk.register_controller_and_increment_epoch(self.broker_id, now_ms())
        if elected is None:
            current = self.zk.get_controller_id(watch=True)
            self.active_controller_id = current if current is not None else -1
            return
        self.active_controller_id = self.broker_id
        log.info("broker %d is the controller (epoch %d)", self.broker_id, elected[0])
        await self.on_controller_failover(*elected)

    async def on_controller_failover(self, epoch: int, epoch_zk_version: int) -> None:
        """Read the cluster into a fresh context, watch it, start the state machines, tell every broker."""
        assert self._nursery is not None
        context = self.context = ControllerContext(epoch=epoch, epoch_zk_version=epoch_zk_version)
        scope, active_nursery = await self._nursery.start(_hold_nursery)
        term = self._term = self._new_term(scope, active_nursery)
        put = self.event_manager.put
        self.zk.register_child_change_handler(BROKER_IDS_PATH, lambda _: put(BrokerChange()))
        self.zk.register_child_change_handler(TOPICS_PATH, lambda _: put(TopicChange()))
        self.zk.register_child_change_handler(ISR_CHANGE_NOTIFICATION_PATH, lambda _: put(IsrChangeNotification()))
        self.zk.register_child_change_handler(DELETE_TOPICS_PATH, lambda _: put(TopicDeletion()))
        self.zk.register_znode_change_handler(REASSIGN_PARTITIONS_PATH, lambda _: put(PartitionReassignment()))
        self.zk.register_znode_change_handler(PREFERRED_REPLICA_ELECTION_PATH,
                                              lambda _: put(PreferredReplicaLeaderElection()))
        context.live_brokers = self.zk.get_all_brokers(watch=True)
        context.all_topics = set(self.zk.get_all_topics(watch=True))
        for topic in sorted(context.all_topics):
            context.partition_assignments[topic] = term.admin.watch_assignment(topic)
        partitions = context.all_partitions()  # one TopicPartition each, shared by every cache built below
        context.partition_leadership_info.update(self.zk.get_partition_states(partitions))
        if self.config["delete.topic.enable"]:
            context.topics_to_be_deleted = set(self.zk.get_children(DELETE_TOPICS_PATH)) & context.all_topics
        term.reassignment.initialize()
        for broker_id in sorted(context.live_brokers):
            term.channel_manager.add_broker(broker_id)
        term.batch.send_update_metadata_request(context.live_or_shutting_down_broker_ids, partitions)
        term.replicas.startup(partitions)
        term.partitions.startup(partitions)
        # Resume what the previous controller had started, reassignments first: a topic being reassigned
        # waits for the move before it is deleted. Then requests queued while no one was controller.
        term.reassignment.resume()
        put(PartitionReassignment())
        put(TopicDeletion())
        put(PreferredReplicaLeaderElection())
        if self.config["auto.leader.rebalance.enable"]:
            active_nursery.start_soon(self._auto_rebalance_scheduler)
        if self.zk.get_isr_change_notifications(watch=True):
            put(IsrChangeNotification())
        log.info("controller %d epoch %d: failover done, %d live brokers, %d topics", self.broker_id, epoch,
                 len(context.live_brokers), len(context.all_topics))

    def _new_term(self, scope: trio.CancelScope, nursery: trio.Nursery) -> _Term:
        context, zk, put = self.context, self.zk, self.event_manager.put
        channel_manager = ControllerChannelManager(self.broker_id, self.transport, self.gate, nursery)
        batch = ControllerBrokerRequestBatch(self.broker_id, context, channel_manager)
        partitions = PartitionStateMachine(self.broker_id, self.config, context, zk, batch)
        replicas = ReplicaStateMachine(
            self.broker_id, context, zk, batch,
            lambda broker_id, response: put(TopicDeletionStopReplicaResponseReceived(broker_id, response)))
        admin = AdminManager(self.broker_id, self.config, context, zk, partitions, replicas,
                             lambda topic: lambda _: put(PartitionModifications(topic)), self.rng)
        deletion = TopicDeletionManager(self.broker_id, bool(self.config["delete.topic.enable"]), context, zk,
                                        partitions, replicas, batch, admin.on_topic_deleted)
        reassignment = ReassignmentManager(
            self.broker_id, context, zk, partitions, replicas, batch,
            lambda tp: put(PartitionReassignmentIsrChange(tp.topic, tp.partition)), deletion.resume_deletions)
        elections = Elections(self.broker_id, self.config, context, zk, partitions)
        return _Term(scope, channel_manager, batch, partitions, replicas, admin, deletion, reassignment, elections)

    def on_controller_resignation(self) -> None:
        term = self.term
        log.info("controller %d epoch %d resigns", self.broker_id, self.context.epoch)
        self.zk.unregister_handlers(BROKER_IDS_PATH, TOPICS_PATH, ISR_CHANGE_NOTIFICATION_PATH, DELETE_TOPICS_PATH,
                                    PREFERRED_REPLICA_ELECTION_PATH, REASSIGN_PARTITIONS_PATH,
                                    *(partition_state_path(tp) for tp in self.context.partitions_being_reassigned),
                                    *(topic_path(topic) for topic in self.context.all_topics))
        term.scope.cancel()
        term.admin.abandon()
        self._term = None
        self.context = ControllerContext(epoch=self.context.epoch)

    async def _auto_rebalance_scheduler(self) -> None:
        """Lives in the term's nursery, so it stops when the controller resigns."""
        interval = self.config["leader.imbalance.check.interval.seconds"]
        while True:
            await trio.sleep(interval)
            await self.gate.checkpoint()
            self.event_manager.put(AutoPreferredReplicaLeaderElection())

    # -- broker changes (seed 003) --------------------------------------------------------------------------------

    def _process_broker_change(self, _: ControllerEvent) -> None:
        context, channels = self.context, self.term.channel_manager
        current = self.zk.get_all_brokers(watch=True)
        known = context.live_or_shutting_down_broker_ids
        new = set(current) - known
        dead = known - set(current)
        bounced = {b for b in set(current) & known if current[b].epoch != context.live_brokers[b].epoch}
        log.info("controller %d: newly added brokers %s, dead brokers %s, bounced brokers %s, all live brokers %s",
                 self.broker_id, sorted(new), sorted(dead), sorted(bounced), sorted(current))
        for broker_id in dead | bounced:
            channels.remove_broker(broker_id)
            del context.live_brokers[broker_id]
        if bounced:
            self.on_broker_failure(bounced)
        for broker_id in sorted(new | bounced):
            context.live_brokers[broker_id] = current[broker_id]
            channels.add_broker(broker_id)
        if bounced:
            self.on_broker_startup(bounced)
        if new:
            self.on_broker_startup(new)
        if dead:
            self.on_broker_failure(dead)

    def on_broker_startup(self, new_brokers: set[int]) -> None:
        """Tell everyone about the new brokers, give them their replicas, elect where leaders are missing."""
        context, term = self.context, self.term
        term.batch.send_update_metadata_request(context.live_or_shutting_down_broker_ids - new_brokers, [])
        term.batch.send_update_metadata_request(new_brokers, context.all_partitions())
        term.reassignment.on_broker_startup(new_brokers)
        on_new = context.replicas_on_brokers(new_brokers)
        # As Kafka, replicas of topics queued for deletion too, unless already being deleted: a move under way
        # must reach its new replicas to complete, and the topic's deletion waits for it
        online_from = VALID_PREVIOUS_STATES[ReplicaState.ONLINE]
        term.replicas.handle_state_changes([r for r in on_new if not context.is_topic_queued_up_for_deletion(r[0])
                                            or context.replica_states.get(r) in online_from], ReplicaState.ONLINE)
        term.partitions.trigger_online_partition_state_change()
        term.deletion.resume_deletion_for_topics(on_new)

    def on_broker_failure(self, dead_brokers: set[int]) -> None:
        """Partitions led by the dead go offline and get new leaders; their replicas go offline."""
        context, term = self.context, self.term
        context.shutting_down_broker_ids -= dead_brokers
        without_leader = sorted(tp for tp, leadership in context.partition_leadership_info.items()
                                if leadership.leader_and_isr.leader in dead_brokers
                                and not context.is_topic_queued_up_for_deletion(tp.topic))
        term.partitions.handle_state_changes(without_leader, PartitionState.OFFLINE)
        term.partitions.trigger_online_partition_state_change()
        on_dead = context.replicas_on_brokers(dead_brokers)
        term.replicas.handle_state_changes(
            [r for r in on_dead if not context.is_topic_queued_up_for_deletion(r[0])], ReplicaState.OFFLINE)
        term.deletion.fail_replica_deletion(
            r for r in on_dead if context.is_topic_queued_up_for_deletion(r[0])
            and context.replica_states.get(r) is not ReplicaState.DELETION_SUCCESSFUL)
        if not without_leader:
            term.batch.send_update_metadata_request(context.live_or_shutting_down_broker_ids, [])

    def shutdown_broker(self, request: ControlledShutdownRequest) -> ControlledShutdownResponse:
        """Seed 003's shutdownBroker: move leadership off a stopping broker and stop its follower replicas, all
        partitions in one state change each; answer what it still leads."""
        context, term, broker_id = self.context, self.term, request.broker_id
        if broker_id not in context.live_or_shutting_down_broker_ids:
            return ControlledShutdownResponse(errors.BROKER_NOT_AVAILABLE.code,
                                              error_message=f"broker {broker_id} is not alive")
        if request.broker_epoch != context.broker_epoch(broker_id):
            return ControlledShutdownResponse(errors.STALE_BROKER_EPOCH.code, error_message=(
                f"broker epoch {request.broker_epoch} is not broker {broker_id}'s current epoch "
                f"{context.broker_epoch(broker_id)}"))
        context.shutting_down_broker_ids.add(broker_id)
        log.info("controller %d: shutting down broker %d", self.broker_id, broker_id)
        replicated = [tp for tp in context.partitions_on_broker(broker_id)
                      if tp in context.partition_leadership_info and len(context.partition_replica_assignment(tp)) > 1
                      and not context.is_topic_queued_up_for_deletion(tp.topic)]
        led = {tp: None for tp in replicated
               if context.partition_leadership_info[tp].leader_and_isr.leader == broker_id}  # ordered, and a set
        term.partitions.handle_state_changes(led, PartitionState.ONLINE, controlled_shutdown_partition_leader_selector)
        term.replicas.handle_state_changes([(tp.topic, tp.partition, broker_id) for tp in replicated if tp not in led],
                                           ReplicaState.OFFLINE)
        remaining = [(tp.topic, tp.partition) for tp in replicated
                     if context.partition_leadership_info[tp].leader_and_isr.leader == broker_id]
        return ControlledShutdownResponse(errors.NONE.code, remaining)

    def on_topic_config_change(self) -> None:
        """This node's broker heard that a topic's config changed (it runs Kafka's config handlers)."""
        self.event_manager.put(TopicConfigChange())

    # -- ISR change notifications ---------------------------------------------------------------------------------

    def _process_isr_change_notification(self, _: ControllerEvent) -> None:
        """Leaders changed ISRs: refresh them from the partition state znodes and tell every broker."""
        names = self.zk.get_isr_change_notifications(watch=True)
        if not names:
            return
        changed = sorted({tp for name in names for tp in self.zk.read_isr_change_notification(name)})
        refreshed = self.zk.get_partition_states(tp for tp in changed if tp.topic in self.context.all_topics)
        self.context.partition_leadership_info.update(refreshed)
        self.term.batch.send_update_metadata_request(self.context.live_or_shutting_down_broker_ids, refreshed)
        self.zk.delete_isr_change_notifications(names, self.context.epoch_zk_version)

    # -- requests from brokers' KafkaApis -------------------------------------------------------------------------

    async def handle_request(self, request: Request, context: RequestContext | None) -> Response:
        """Serve a controller-bound request on the event queue and wait for its answer."""
        if type(request) not in ROUTES:
            raise errors.InvalidRequestError(f"{type(request).__name__} is not a controller request")
        event = ControllerRequest(request)
        self.event_manager.put(event)
        await event.done.wait()
        if event.result is None:
            raise errors.UnknownServerError(f"the controller failed to process {type(request).__name__}")
        wait = ROUTES[type(request)].wait
        if wait is None or not isinstance(event.result, tuple):
            return event.result
        results, waiters = event.result
        await wait.wait_for(results, waiters, request.timeout_ms)  # type: ignore[attr-defined]
        return wait.response_type(results)


async def _hold_nursery(task_status: trio.TaskStatus[tuple[trio.CancelScope, trio.Nursery]] = trio.TASK_STATUS_IGNORED
                        ) -> None:
    """A nursery that lives exactly as long as its scope is not cancelled: a controller's term."""
    with trio.CancelScope() as scope:
        async with trio.open_nursery() as nursery:
            task_status.started((scope, nursery))
            await trio.sleep_forever()


@dataclass(frozen=True)
class Wait:
    """How a request waits, after its event, for what its event started (topics online, a deletion done).

    Past the request's timeout its successes become REQUEST_TIMED_OUT; a completion the controller abandoned by
    resigning becomes `unfinished` (None: the znodes are written, so the next controller finishes the work and
    the success stands)."""

    response_type: Callable[[Any], Response]
    unfinished: errors.ErrorCode | None = None

    async def wait_for(self, results: list[Any], waiters: list[Completion], timeout_ms: int) -> None:
        with trio.move_on_after(max(timeout_ms, 0) / 1000) as timeout:
            for waiter in waiters:
                await waiter.wait()
        accepted = [result for result in results if result.error_code == errors.NONE.code]
        for result, waiter in zip(accepted, waiters):
            if timeout.cancelled_caught and not waiter.completed:
                result.error_code = errors.REQUEST_TIMED_OUT.code
                result.error_message = "Timed out waiting for the controller to finish."
            elif not waiter.completed and self.unfinished is not None:
                result.error_code = self.unfinished.code
                result.error_message = "The controller moved before it finished; retry."


@dataclass(frozen=True)
class Route:
    """One row of the controller's dispatch: the handler, whether it needs an active controller, whether it runs
    while the coordination service is out of reach, and, for a request, how it waits for its outcome."""

    handler: Callable[[KafkaController, Any], Any]
    needs_active: bool = True
    while_cut_off: bool = False
    wait: Wait | None = None


def _term(role: str, method: str) -> Callable[[KafkaController, Any], Any]:
    """A handler that calls `method` of one of the active term's roles."""
    return lambda controller, arg: getattr(getattr(controller.term, role), method)(arg)


def _term_noarg(role: str, method: str) -> Callable[[KafkaController, Any], Any]:
    return lambda controller, _: getattr(getattr(controller.term, role), method)()


ROUTES: dict[type, Route] = {
    # the election and the controller's own lifecycle
    Startup: Route(KafkaController._process_reelect, needs_active=False),
    Reelect: Route(KafkaController._process_reelect, needs_active=False),
    ControllerChange: Route(KafkaController._process_controller_change, needs_active=False),
    SessionReestablished: Route(KafkaController._process_session_reestablished, needs_active=False,
                                while_cut_off=True),
    # the cluster's changes, seen through watches
    BrokerChange: Route(KafkaController._process_broker_change),
    IsrChangeNotification: Route(KafkaController._process_isr_change_notification),
    TopicChange: Route(_term_noarg("admin", "process_topic_change")),
    PartitionModifications: Route(lambda c, event: c.term.admin.process_partition_modifications(event.topic)),
    TopicConfigChange: Route(lambda c, _: c.term.partitions.trigger_online_partition_state_change(unclean_only=True)),
    TopicDeletion: Route(_term_noarg("deletion", "process_topic_deletion")),
    TopicDeletionStopReplicaResponseReceived: Route(
        lambda c, event: c.term.deletion.on_stop_replica_response(event.broker_id, event.response)),
    PartitionReassignment: Route(_term_noarg("reassignment", "process_partition_reassignment")),
    PartitionReassignmentIsrChange: Route(
        lambda c, event: c.term.reassignment.on_isr_change(TopicPartition(event.topic, event.partition))),
    PreferredReplicaLeaderElection: Route(_term_noarg("elections", "process_preferred_replica_election_znode")),
    AutoPreferredReplicaLeaderElection: Route(_term_noarg("elections", "check_and_trigger_auto_leader_rebalance")),
    # requests (inside a ControllerRequest event)
    ControlledShutdownRequest: Route(KafkaController.shutdown_broker),
    CreateTopicsRequest: Route(_term("admin", "create_topics"), wait=Wait(CreateTopicsResponse)),
    CreatePartitionsRequest: Route(_term("admin", "create_partitions"), wait=Wait(CreatePartitionsResponse)),
    DeleteTopicsRequest: Route(_term("admin", "delete_topics"),
                               wait=Wait(DeleteTopicsResponse, unfinished=errors.NOT_CONTROLLER)),
    ElectLeadersRequest: Route(_term("elections", "elect_leaders")),
    AlterPartitionReassignmentsRequest: Route(_term("reassignment", "alter_partition_reassignments")),
    ListPartitionReassignmentsRequest: Route(_term("reassignment", "list_partition_reassignments")),
}


def route_for(event: ControllerEvent) -> Route:
    """The row for an event (for a ControllerRequest, the row of its request); a missing row is a bug."""
    key = type(event.request) if isinstance(event, ControllerRequest) else type(event)
    try:
        return ROUTES[key]
    except KeyError:
        raise LookupError(f"the controller has no route for {key.__name__}") from None
