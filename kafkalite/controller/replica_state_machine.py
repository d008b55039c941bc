"""ReplicaStateMachine: the seven replica states and what each move tells the brokers (seeds 002, 003).

The legal moves, and what each does; `VALID_PREVIOUS_STATES` below is this list as a table, and a move it lacks
raises IllegalStateTransition and changes nothing:

    NonExistent -> New         a replica is being created (new partition, reassignment); the partition's
                               election tells it its role.
    New, Online, Offline, DeletionIneligible -> Online
                               the replica is served: it gets the partition's current LeaderAndIsr (from New,
                               the election already sent it).
    New, Online, Offline, DeletionIneligible -> Offline
                               StopReplica (keep the log) to it; it leaves the ISR in the stored state, read
                               afresh (leader -1 if it led; the last ISR member stays), and the partition's
                               other replicas get the new LeaderAndIsr.
    Offline -> DeletionStarted StopReplica with delete; the answer moves it on.
    DeletionStarted -> DeletionSuccessful
                               the broker confirmed the deletion.
    Offline, DeletionStarted -> DeletionIneligible
                               it cannot be deleted now (broker down, deletion failed); the topic waits.
    DeletionSuccessful -> NonExistent
                               forgotten.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from kafkalite.controller.context import ControllerContext, IllegalStateTransition, PartitionAndReplica
from kafkalite.controller.request_batch import ControllerBrokerRequestBatch
from kafkalite.controller.states import ReplicaState
from kafkalite.coordination.errors import BadVersionError
from kafkalite.coordination.kafka_zk import KafkaZkClient, LeaderAndIsr, LeaderIsrAndControllerEpoch
from kafkalite.network.requests import NO_LEADER, Response

log = logging.getLogger(__name__)
state_change_log = logging.getLogger("kafkalite.state.change")


VALID_PREVIOUS_STATES: dict[ReplicaState, frozenset[ReplicaState]] = {
    ReplicaState.NEW: frozenset({ReplicaState.NON_EXISTENT}),
    ReplicaState.ONLINE: frozenset({ReplicaState.NEW, ReplicaState.ONLINE, ReplicaState.OFFLINE,
                                    ReplicaState.DELETION_INELIGIBLE}),
    ReplicaState.OFFLINE: frozenset({ReplicaState.NEW, ReplicaState.ONLINE, ReplicaState.OFFLINE,
                                     ReplicaState.DELETION_INELIGIBLE}),
    ReplicaState.DELETION_STARTED: frozenset({ReplicaState.OFFLINE}),
    ReplicaState.DELETION_SUCCESSFUL: frozenset({ReplicaState.DELETION_STARTED}),
    ReplicaState.DELETION_INELIGIBLE: frozenset({ReplicaState.OFFLINE, ReplicaState.DELETION_STARTED}),
    ReplicaState.NON_EXISTENT: frozenset({ReplicaState.DELETION_SUCCESSFUL}),
}


class ReplicaStateMachine:
    def __init__(self, controller_id: int, context: ControllerContext, zk: KafkaZkClient,
                 batch: ControllerBrokerRequestBatch,
                 on_stop_replica_with_delete: Callable[[int, Response], None] | None = None) -> None:
        self.controller_id = controller_id
        self.context = context
        self.zk = zk
        self.batch = batch
        self._on_stop_replica_with_delete = on_stop_replica_with_delete

    def startup(self) -> None:
        """Replicas on live brokers are online, the others cannot be deleted now; then tell the live ones, and
        take the others offline, out of every ISR, as Kafka's ReplicaStateMachine.startup does: a broker that
        died while there was no controller (the controller's own, say) would otherwise stay in the ISRs it was in
        until each leader's lag check dropped it, and acks=all writes would wait for it meanwhile."""
        online, offline = [], []
        for replica in self.context.replicas_for_partitions(self.context.all_partitions()):
            if self.context.is_replica_online(replica.replica, include_shutting_down=True):
                self.context.replica_states[replica] = ReplicaState.ONLINE
                online.append(replica)
            else:
                self.context.replica_states[replica] = ReplicaState.DELETION_INELIGIBLE
                if not self.context.is_topic_queued_up_for_deletion(replica.topic):
                    offline.append(replica)
        self.handle_state_changes(online, ReplicaState.ONLINE)
        self.handle_state_changes(offline, ReplicaState.OFFLINE)

    def handle_state_changes(self, replicas: Iterable[PartitionAndReplica], target: ReplicaState) -> None:
        replicas = list(replicas)
        if not replicas:
            return
        for replica in replicas:
            self._check_transition(replica, target)
        self.batch.new_batch()
        try:
            for replica in replicas:
                self._handle_state_change(replica, target)
            self.batch.send_requests_to_brokers(self.context.epoch)
        except BaseException:
            self.batch.clear()
            raise

    def _check_transition(self, replica: PartitionAndReplica, target: ReplicaState) -> None:
        current = self.context.replica_states.get(replica, ReplicaState.NON_EXISTENT)
        if current not in VALID_PREVIOUS_STATES[target]:
            message = (f"controller {self.controller_id} epoch {self.context.epoch}: illegal replica state "
                       f"transition of {replica} from {current.value} to {target.value}")
            state_change_log.error(message)
            raise IllegalStateTransition(message)

    def _handle_state_change(self, replica: PartitionAndReplica, target: ReplicaState) -> None:
        current = self.context.replica_states.get(replica, ReplicaState.NON_EXISTENT)
        tp = replica.topic_partition
        assignment = self.context.partition_replica_assignment(tp)
        if target is ReplicaState.ONLINE and current is not ReplicaState.NEW:
            leadership = self.context.partition_leadership_info.get(tp)
            if leadership is not None:
                self.batch.add_leader_and_isr_request_for_brokers([replica.replica], tp, leadership, assignment)
        elif target is ReplicaState.OFFLINE:
            self.batch.add_stop_replica_request_for_brokers([replica.replica], tp, delete_partition=False)
            leadership = self._remove_replica_from_isr(replica)
            if leadership is not None and not self.context.is_topic_queued_up_for_deletion(tp.topic):
                others = [r for r in assignment if r != replica.replica and self.context.is_replica_online(r)]
                self.batch.add_leader_and_isr_request_for_brokers(others, tp, leadership, assignment)
        elif target is ReplicaState.DELETION_STARTED:
            self.batch.add_stop_replica_request_for_brokers([replica.replica], tp, delete_partition=True,
                                                            callback=self._on_stop_replica_with_delete)
        if target is ReplicaState.NON_EXISTENT:
            self.context.replica_states.pop(replica, None)
        else:
            self.context.replica_states[replica] = target
        state_change_log.info("controller %d epoch %d changed replica %d of %s from %s to %s", self.controller_id,
                              self.context.epoch, replica.replica, tp, current.value, target.value)

    def _remove_replica_from_isr(self, replica: PartitionAndReplica) -> LeaderIsrAndControllerEpoch | None:
        """Take the replica out of the ISR (the last member stays, as in Kafka); leader -1 if it was the leader.

        As Kafka's doRemoveReplicasFromIsr, the state is read from the coordination service, not the cache: a
        leader may have added the replica back since the cache was filled, and its ISR change notification
        may not have arrived yet. Returns the new state to announce, or None when there was nothing to change."""
        tp = replica.topic_partition
        stored = self.zk.get_partition_state(tp)
        if stored is None:
            return None
        self.context.partition_leadership_info[tp] = stored
        lai = stored.leader_and_isr
        if replica.replica not in lai.isr and lai.leader != replica.replica:
            return None  # nothing to change, nothing to announce
        new_leader = NO_LEADER if lai.leader == replica.replica else lai.leader
        new_isr = lai.isr if len(lai.isr) == 1 else tuple(r for r in lai.isr if r != replica.replica)
        new_state = LeaderIsrAndControllerEpoch(lai.new_leader_and_isr(new_leader, new_isr), self.context.epoch)
        try:
            results = self.zk.controller_multi(self.context.epoch_zk_version,
                                               [self.zk.update_partition_state_op(tp, new_state)])
        except BadVersionError:
            log.error("controller %d: the state of %s changed while replica %d was being removed from its ISR",
                      self.controller_id, tp, replica.replica)
            return None
        written = new_state.leader_and_isr
        updated = LeaderIsrAndControllerEpoch(
            LeaderAndIsr(written.leader, written.leader_epoch, written.isr,
                         results[1].version), self.context.epoch)  # type: ignore[attr-defined]
        self.context.partition_leadership_info[tp] = updated
        return updated
