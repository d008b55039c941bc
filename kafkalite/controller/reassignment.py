"""Partition reassignment: moving a partition's replicas to a new list, Kafka's way since KIP-455.

A move from the original replicas (ORS) to the target replicas (TRS) runs in two phases, driven by the ISR:

    A  (not every target replica is in the ISR yet)
       A1. the assignment becomes RS = TRS + ORS (target first), with the replicas being added and removed kept
           beside it in the topic znode; a LeaderAndIsr with a new leader epoch goes to RS;
       A2. the added replicas become NewReplica and start following; the partition state's watch brings the
           move back here each time the ISR changes.
    B  (every target replica is in the ISR)
       B1. the added replicas become OnlineReplica;
       B2. RS = TRS in the controller's memory;
       B3. a LeaderAndIsr with RS = TRS goes out (a new leader from TRS if the current one is not in it or is
           down), so the leader no longer lets a removed replica back into the ISR;
       B4. the removed replicas go offline: the ISR in the coordination service shrinks without them and only
           the target replicas hear it; then they are stopped and deleted (B5);
       B6. the topic znode gets RS = TRS with nothing adding or removing; B7 the partition leaves
           `/admin/reassign_partitions` if a tool wrote it there; B8 every broker gets the new metadata.

A controller elected in the middle of a move rebuilds it from the topic znode (what is being added and
removed), so it resumes the move it did not start and lists it correctly.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Sequence

from kafkalite.common import errors
from kafkalite.common.errors import KafkaError
from kafkalite.common.types import TopicPartition
from kafkalite.controller.context import ControllerContext, PartitionAndReplica, ReassignmentContext
from kafkalite.controller.leader_selectors import no_op_partition_leader_selector, \
    reassigned_partition_leader_selector
from kafkalite.controller.partition_state_machine import PartitionState, PartitionStateMachine
from kafkalite.controller.replica_state_machine import ReplicaState, ReplicaStateMachine
from kafkalite.controller.request_batch import ControllerBrokerRequestBatch
from kafkalite.coordination.kafka_zk import (
    REASSIGN_PARTITIONS_PATH,
    KafkaZkClient,
    decode_partition_reassignment,
    encode_partition_reassignment,
    partition_state_path,
)
from kafkalite.coordination.service import DeleteOp, SetDataOp
from kafkalite.network.requests import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
    OngoingReassignment,
    ReassignablePartitionResponse,
)

log = logging.getLogger(__name__)


class ReassignmentManager:
    def __init__(self, controller_id: int, context: ControllerContext, zk: KafkaZkClient,
                 partition_state_machine: PartitionStateMachine, replica_state_machine: ReplicaStateMachine,
                 batch: ControllerBrokerRequestBatch, on_isr_change: Callable[[TopicPartition], None],
                 on_completed: Callable[[], None]) -> None:
        self.controller_id = controller_id
        self.context = context
        self.zk = zk
        self._partitions = partition_state_machine
        self._replicas = replica_state_machine
        self._batch = batch
        self._on_isr_change = on_isr_change  # queues the event that brings a move back here
        self._on_completed = on_completed  # a topic waiting to be deleted may go on

    # -- failover and the triggers --------------------------------------------------------------------------------

    def initialize(self) -> None:
        """At failover: the moves the topic znodes record as in progress (before any partition state changes)."""
        for topic in sorted(self.context.all_topics):
            for partition, (adding, removing) in sorted(self.zk.get_ongoing_reassignments(topic).items()):
                tp = TopicPartition(topic, partition)
                replicas = self.context.partition_replica_assignment(tp)
                original = [r for r in replicas if r not in adding]
                target = [r for r in replicas if r not in removing]
                self.context.partitions_being_reassigned[tp] = ReassignmentContext(original, target)

    def resume(self) -> None:
        """At failover, after the state machines started: carry every recorded move on."""
        for tp in sorted(self.context.partitions_being_reassigned):
            self._watch_isr(tp)
            self.on_partition_reassignment(tp)

    def on_broker_startup(self, new_brokers: set[int]) -> None:
        for tp, reassignment in sorted(self.context.partitions_being_reassigned.items()):
            if set(reassignment.target_replicas) & new_brokers:
                self.on_partition_reassignment(tp)

    def on_isr_change(self, tp: TopicPartition) -> None:
        if tp in self.context.partitions_being_reassigned:
            self.on_partition_reassignment(tp)

    def process_partition_reassignment(self) -> None:
        """Start the moves `/admin/reassign_partitions` lists. A tool wrote it (requests start their moves
        themselves), so what cannot move (malformed, unknown partition, topic being deleted) is logged and removed
        from the znode, as Kafka's controller does, lest it stay there forever."""
        targets, rejected = self._listed(watch=True) or ({}, [])
        failed: set[TopicPartition] = set()
        for tp, replicas in sorted(targets.items()):
            if tp in self.context.partitions_being_reassigned:
                continue
            if tp not in self.context.partition_leadership_info or \
                    self.context.is_topic_queued_up_for_deletion(tp.topic):
                rejected.append(f"{tp} does not exist or its topic is being deleted")
                failed.add(tp)
                continue
            self._start(tp, replicas)
        for reason in rejected:
            log.error("controller %d: ignoring a partition reassignment: %s", self.controller_id, reason)
        if rejected:
            self._remove_from_znode(failed)

    def _start(self, tp: TopicPartition, target: list[int]) -> None:
        self.context.partitions_being_reassigned[tp] = ReassignmentContext(
            list(self.context.partition_replica_assignment(tp)), target)
        self._watch_isr(tp)
        self.on_partition_reassignment(tp)

    def _redirect(self, tp: TopicPartition, target: list[int]) -> None:
        """A move in progress gets a new target; the original replicas cancel it (KIP-455's reassignTo and
        revertReassignment). The original replicas stay what they were, so a move moved again still knows where
        it came from. Replicas the move had added that the new one does not keep are stopped and deleted at once
        (Kafka's updateCurrentReassignment), after leadership has left them; then the move goes on from its
        first or its second phase, as its ISR allows.

        Raises if one of them leads and no replica of the new move can take over (none alive and in the ISR):
        the move then goes on as it was."""
        ongoing = self.context.partitions_being_reassigned[tp]
        reassignment = ReassignmentContext(ongoing.original_replicas, target)
        full = list(dict.fromkeys(target + ongoing.original_replicas))
        current = self.context.partition_replica_assignment(tp)
        unneeded = [r for r in current if r not in full]
        leader = self.context.partition_leadership_info[tp].leader_and_isr.leader
        if leader in unneeded and self.context.partition_states.get(tp) is PartitionState.ONLINE and not \
                self._partitions.handle_state_changes([tp], PartitionState.ONLINE,
                                                      reassigned_partition_leader_selector, replicas={tp: full}):
            raise errors.InvalidReplicaAssignmentError(
                f"replica {leader} leads {tp} and none of {full} is alive and in the ISR to take over")
        self.context.partitions_being_reassigned[tp] = reassignment
        if unneeded:
            log.info("controller %d: the move of %s now goes to %s; stopping replicas %s it had added",
                     self.controller_id, tp, target, unneeded)
            self._write_assignment(tp, full, (reassignment.adding, reassignment.removing))
            for replica_state in (ReplicaState.OFFLINE, ReplicaState.DELETION_STARTED,
                                  ReplicaState.DELETION_SUCCESSFUL, ReplicaState.NON_EXISTENT):
                self._replicas.handle_state_changes(self._replicas_of(tp, unneeded), replica_state)
        self.on_partition_reassignment(tp, written=bool(unneeded))

    def _watch_isr(self, tp: TopicPartition) -> None:
        self.zk.register_znode_change_handler(partition_state_path(tp), lambda _: self._on_isr_change(tp))

    # -- the move -------------------------------------------------------------------------------------------------

    def on_partition_reassignment(self, tp: TopicPartition, written: bool = False) -> None:
        """The move's next step, as its ISR allows; `written`: the assignment RS = TRS + ORS is stored already
        (a move given a new target), and the first phase still has to tell the replicas and start the new ones."""
        reassignment = self.context.partitions_being_reassigned[tp]
        state = self.zk.get_partition_state(tp, watch=True)
        if state is None:
            return
        self.context.partition_leadership_info[tp] = state
        moves = reassignment.adding or reassignment.removing  # a new order alone completes at once, as in Kafka
        if not moves or set(reassignment.target_replicas) <= set(state.leader_and_isr.isr):
            self._complete(tp, reassignment)
        else:
            self._start_new_replicas(tp, reassignment, written)

    def _start_new_replicas(self, tp: TopicPartition, reassignment: ReassignmentContext, written: bool) -> None:
        """Phase A: RS = TRS + ORS written with what is added and removed, a new epoch to RS, new replicas started."""
        full = list(dict.fromkeys(reassignment.target_replicas + reassignment.original_replicas))
        if not written:
            if self.context.partition_replica_assignment(tp) == full:
                return  # phase A is done; the ISR watch brings us back when the new replicas catch up
            self._write_assignment(tp, full, (reassignment.adding, reassignment.removing))
        if self.context.partition_states.get(tp) is PartitionState.ONLINE:
            # An offline partition keeps its state: a "new epoch, same leader" for a dead leader would mark it
            # online, and nothing would elect a leader when one comes back. Its next election tells RS.
            self._partitions.handle_state_changes([tp], PartitionState.ONLINE, no_op_partition_leader_selector,
                                                  replicas={tp: full})
        self._replicas.handle_state_changes(
            [r for r in self._replicas_of(tp, reassignment.adding) if r not in self.context.replica_states],
            ReplicaState.NEW)

    def _complete(self, tp: TopicPartition, reassignment: ReassignmentContext) -> None:
        """Phase B: every target replica is in the ISR."""
        log.info("controller %d: every target replica %s of %s is in the ISR; completing", self.controller_id,
                 reassignment.target_replicas, tp)
        target = reassignment.target_replicas
        self._replicas.handle_state_changes(self._replicas_of(tp, reassignment.adding), ReplicaState.ONLINE)
        self.context.partition_assignments[tp.topic][tp.partition] = tuple(target)
        leader = self.context.partition_leadership_info[tp].leader_and_isr.leader
        selector = no_op_partition_leader_selector if leader in target and self.context.is_replica_online(leader) \
            else reassigned_partition_leader_selector
        self._partitions.handle_state_changes([tp], PartitionState.ONLINE, selector, replicas={tp: target})
        removing = self._replicas_of(tp, reassignment.removing)
        for replica_state in (ReplicaState.OFFLINE, ReplicaState.DELETION_STARTED, ReplicaState.DELETION_SUCCESSFUL,
                              ReplicaState.NON_EXISTENT):
            self._replicas.handle_state_changes(removing, replica_state)
        self._write_assignment(tp, target, None)
        del self.context.partitions_being_reassigned[tp]
        self.zk.unregister_handlers(partition_state_path(tp))
        self._remove_from_znode({tp})
        self._batch.send_update_metadata_request(self.context.live_or_shutting_down_broker_ids, [tp])
        self._on_completed()

    @staticmethod
    def _replicas_of(tp: TopicPartition, brokers: Sequence[int]) -> list[PartitionAndReplica]:
        return [PartitionAndReplica(tp.topic, tp.partition, r) for r in brokers]

    def _write_assignment(self, tp: TopicPartition, replicas: list[int],
                          moving: tuple[list[int], list[int]] | None) -> None:
        """The topic's assignment with `tp` at `replicas`, and what every partition still being moved adds and
        removes (`moving` for `tp` itself, None once its move is complete)."""
        assignment = dict(self.context.partition_assignments[tp.topic])
        assignment[tp.partition] = tuple(replicas)
        reassigning = {other.partition: (r.adding, r.removing)
                       for other, r in self.context.partitions_being_reassigned.items()
                       if other.topic == tp.topic and other != tp}
        if moving is not None:
            reassigning[tp.partition] = moving
        self.zk.controller_multi(self.context.epoch_zk_version, [self.zk.set_replica_assignment_op(
            tp.topic, self.context.topic_ids.get(tp.topic), assignment, reassigning)])
        self.context.partition_assignments[tp.topic] = assignment

    # -- admin requests -------------------------------------------------------------------------------------------

    def alter_partition_reassignments(self, request: AlterPartitionReassignmentsRequest
                                      ) -> AlterPartitionReassignmentsResponse:
        """Kafka's API reassignments (KIP-455): each partition starts moving to its target, a move in progress
        takes the new target instead, and a null target cancels the move in progress (NO_REASSIGNMENT_IN_PROGRESS
        if there is none). A request that does not allow a change of replication factor (KIP-860) refuses a target
        whose size is not the original replicas'. Started here, so that a request that follows sees the move, and
        not written to `/admin/reassign_partitions`, which lists only the moves a tool wrote there: as in Kafka, a
        partition the request moves leaves it (the latest reassignment wins), and the others stay."""
        responses = []
        taken: set[TopicPartition] = set()
        for item in request.partitions:
            tp = TopicPartition(item.topic, item.partition)
            try:
                ongoing = self.context.partitions_being_reassigned.get(tp)
                original = self._validate(tp, item.replicas)
                if not request.allow_replication_factor_change and item.replicas is not None \
                        and len(item.replicas) != len(original):
                    raise errors.InvalidReplicationFactorError(  # KIP-860
                        f"The replication factor of {tp} would change from {len(original)} to {len(item.replicas)}, "
                        "and the request does not allow it")
                if ongoing is None and item.replicas is None:
                    raise errors.NoReassignmentInProgressError(f"{tp} is not being reassigned: nothing to cancel")
                if ongoing is None:
                    self._start(tp, list(item.replicas))  # type: ignore[arg-type]
                else:
                    self._redirect(tp, ongoing.original_replicas if item.replicas is None else list(item.replicas))
                taken.add(tp)
                responses.append(ReassignablePartitionResponse(item.topic, item.partition, errors.NONE.code))
            except KafkaError as exc:
                responses.append(ReassignablePartitionResponse(item.topic, item.partition, exc.code, exc.message))
        if taken:
            self._remove_from_znode(taken)
        return AlterPartitionReassignmentsResponse(errors.NONE.code, responses)

    def _validate(self, tp: TopicPartition, replicas: list[int] | None) -> Sequence[int]:
        """The replicas the partition's move (one under way, or the one asked for) started from, once `replicas`
        is found a target it may move to."""
        if tp not in self.context.partition_leadership_info or self.context.is_topic_queued_up_for_deletion(tp.topic):
            raise errors.UnknownTopicOrPartitionError(f"{tp} does not exist")
        ongoing = self.context.partitions_being_reassigned.get(tp)
        original = ongoing.original_replicas if ongoing is not None else self.context.assigned_replicas(tp)
        if replicas is None:
            return original
        if not replicas:
            raise errors.InvalidReplicaAssignmentError(f"the target replica list of {tp} is empty")
        if len(set(replicas)) != len(replicas):
            raise errors.InvalidReplicaAssignmentError(f"the target replica list of {tp} repeats a broker: {replicas}")
        # As Kafka's validateReplicas, only replicas the move adds must be alive: one may keep, reorder or drop a
        # replica whose broker is down
        unavailable = [r for r in replicas if r not in original and not self.context.is_replica_online(r)]
        if unavailable:
            raise errors.InvalidReplicaAssignmentError(
                f"brokers {unavailable} that the target replicas of {tp} add are not alive (or unknown)")
        return original

    def list_partition_reassignments(self, request: ListPartitionReassignmentsRequest
                                     ) -> ListPartitionReassignmentsResponse:
        wanted = None if request.topic_partitions is None else {TopicPartition(t, p)
                                                                for t, p in request.topic_partitions}
        return ListPartitionReassignmentsResponse(errors.NONE.code, [
            OngoingReassignment(tp.topic, tp.partition, self.context.partition_replica_assignment(tp),
                                r.adding, r.removing)
            for tp, r in sorted(self.context.partitions_being_reassigned.items()) if wanted is None or tp in wanted])

    def _listed(self, *, watch: bool = False) -> tuple[dict[TopicPartition, list[int]], list[str]] | None:
        """`/admin/reassign_partitions`'s well-formed moves and why each other entry was left out (all of them, if
        the znode is malformed); None without the znode (a watch then waits for its creation)."""
        try:
            found = self.zk.get_data(REASSIGN_PARTITIONS_PATH, watch=watch)
            return None if found is None else decode_partition_reassignment(found[0])
        except ValueError as exc:
            return {}, [f"the znode is malformed: {exc}"]

    def _remove_from_znode(self, partitions: Collection[TopicPartition]) -> None:
        """Kafka's maybeRemoveFromZkReassignment: `partitions` (a move done, or one that could not start, or one a
        request took over) leave `/admin/reassign_partitions` if it lists them, and so does any entry that is not
        well formed; the znode goes once it lists nothing. Without the znode, nothing is read or written: a move a
        request started costs no write of every other move in flight when it completes."""
        listed = self._listed()
        if listed is None:
            return
        targets, rejected = listed
        kept = {tp: replicas for tp, replicas in targets.items() if tp not in partitions}
        if len(kept) == len(targets) and not rejected:
            return
        self.zk.controller_multi(self.context.epoch_zk_version, [
            SetDataOp(REASSIGN_PARTITIONS_PATH, encode_partition_reassignment(kept)) if kept
            else DeleteOp(REASSIGN_PARTITIONS_PATH)])
