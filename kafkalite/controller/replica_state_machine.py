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
from collections.abc import Callable, Iterable, Sequence

from kafkalite.common.types import TopicPartition
from kafkalite.controller.context import ControllerContext, IllegalStateTransition, PartitionAndReplica, ReplicaKey
from kafkalite.controller.request_batch import ControllerBrokerRequestBatch
from kafkalite.controller.states import ReplicaState
from kafkalite.coordination.errors import BadVersionError
from kafkalite.coordination.kafka_zk import KafkaZkClient, LeaderIsrAndControllerEpoch
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

    def startup(self, partitions: Sequence[TopicPartition]) -> None:
        """Replicas of `partitions` (every partition) on live brokers are online, the others cannot be deleted now;
        then tell the live ones (their LeaderAndIsr only: failover has just sent every broker every partition's
        state), and take the others offline, out of every ISR, as Kafka's ReplicaStateMachine.startup does: a broker
        that died while there was no controller (the controller's own, say) would otherwise stay in the ISRs it was in
        until each leader's lag check dropped it, and acks=all writes would wait for it meanwhile."""
        context, batch = self.context, self.batch
        states, live, leaderships = context.replica_states, context.live_brokers, context.partition_leadership_info
        logged = state_change_log.isEnabledFor(logging.INFO)
        offline: list[ReplicaKey] = []
        # One pass per partition, not per replica: a replica's move to Online from Online is always legal, and the
        # partition's LeaderAndIsr is built once for all of its live replicas.
        batch.new_batch()
        try:
            for tp in partitions:
                topic, partition = tp
                assignment = context.assigned_replicas(tp)
                online = []
                for broker_id in assignment:
                    if broker_id in live:
                        states[(topic, partition, broker_id)] = ReplicaState.ONLINE
                        online.append(broker_id)
                        if logged:
                            self._log_state_change((topic, partition, broker_id), ReplicaState.ONLINE,
                                                   ReplicaState.ONLINE)
                    else:
                        states[(topic, partition, broker_id)] = ReplicaState.DELETION_INELIGIBLE
                        if not context.is_topic_queued_up_for_deletion(topic):
                            offline.append((topic, partition, broker_id))
                leadership = leaderships.get(tp)
                if online and leadership is not None:
                    batch.add_leader_and_isr_request_for_brokers(online, tp, leadership, assignment,
                                                                 update_metadata=False)
            batch.send_requests_to_brokers(context.epoch)
        except BaseException:
            batch.clear()
            raise
        self.handle_state_changes(offline, ReplicaState.OFFLINE)

    def handle_state_changes(self, replicas: Iterable[ReplicaKey], target: ReplicaState) -> None:
        """Move `replicas` to `target` in one request batch."""
        replicas = list(replicas)
        if not replicas:
            return
        states, valid = self.context.replica_states, VALID_PREVIOUS_STATES[target]
        for replica in replicas:
            if states.get(replica, ReplicaState.NON_EXISTENT) not in valid:
                self._illegal_transition(replica, target)
        self.batch.new_batch()
        try:
            if target is ReplicaState.OFFLINE:
                self._take_offline(replicas)
            elif target is ReplicaState.ONLINE:
                self._bring_online(replicas)
            else:
                for replica in replicas:
                    self._handle_state_change(replica, target)
            self.batch.send_requests_to_brokers(self.context.epoch)
        except BaseException:
            self.batch.clear()
            raise

    def _illegal_transition(self, replica: ReplicaKey, target: ReplicaState) -> None:
        current = self.context.replica_states.get(replica, ReplicaState.NON_EXISTENT)
        message = (f"controller {self.controller_id} epoch {self.context.epoch}: illegal replica state "
                   f"transition of {PartitionAndReplica(*replica)} from {current.value} to {target.value}")
        state_change_log.error(message)
        raise IllegalStateTransition(message)

    def _handle_state_change(self, replica: ReplicaKey, target: ReplicaState) -> None:
        current = self.context.replica_states.get(replica, ReplicaState.NON_EXISTENT)
        if target is ReplicaState.DELETION_STARTED:
            topic, partition, broker_id = replica
            self.batch.add_stop_replica_request_for_brokers([broker_id], TopicPartition(topic, partition),
                                                            delete_partition=True,
                                                            callback=self._on_stop_replica_with_delete)
        self._set_state(replica, current, target)

    def _bring_online(self, replicas: list[ReplicaKey]) -> None:
        """Each replica gets its partition's current LeaderAndIsr, one per partition for all of its replicas (from
        New, the partition's election already sent it)."""
        context = self.context
        told: dict[tuple[str, int], list[int]] = {}
        for replica in replicas:
            current = context.replica_states.get(replica, ReplicaState.NON_EXISTENT)
            if current is not ReplicaState.NEW:
                topic, partition, broker_id = replica
                told.setdefault((topic, partition), []).append(broker_id)
            self._set_state(replica, current, ReplicaState.ONLINE)
        for (topic, partition), broker_ids in told.items():
            tp = TopicPartition(topic, partition)
            leadership = context.partition_leadership_info.get(tp)
            if leadership is not None:
                self.batch.add_leader_and_isr_request_for_brokers(broker_ids, tp, leadership,
                                                                  context.assigned_replicas(tp))

    def _set_state(self, replica: ReplicaKey, current: ReplicaState, target: ReplicaState) -> None:
        if target is ReplicaState.NON_EXISTENT:
            self.context.replica_states.pop(replica, None)
        else:
            self.context.set_replica_state(replica, target)
        if state_change_log.isEnabledFor(logging.INFO):
            self._log_state_change(replica, current, target)

    def _log_state_change(self, replica: ReplicaKey, current: ReplicaState, target: ReplicaState) -> None:
        topic, partition, broker_id = replica
        state_change_log.info("controller %d epoch %d changed replica %d of %s-%d from %s to %s", self.controller_id,
                              self.context.epoch, broker_id, topic, partition, current.value, target.value)

    def _take_offline(self, replicas: list[ReplicaKey]) -> None:
        """StopReplica (keep the log) to each replica; out of the ISR; the partitions' other replicas told.

        In rounds, each partition at most once per round, so that a partition losing two replicas (two brokers
        died) leaves its ISR one replica at a time, in the order given, as if they went one by one."""
        rounds: list[list[ReplicaKey]] = []
        seen: dict[tuple[str, int], int] = {}
        for replica in replicas:
            key = replica[:2]
            index = seen[key] = seen.get(key, -1) + 1
            if index == len(rounds):
                rounds.append([])
            rounds[index].append(replica)
        context = self.context
        for group in rounds:
            partitions = context.topic_partitions(replica[:2] for replica in group)  # each once a round
            current = [context.replica_states.get(replica, ReplicaState.NON_EXISTENT) for replica in group]
            for (_, _, broker_id), tp in zip(group, partitions):
                self.batch.add_stop_replica_request_for_brokers([broker_id], tp, delete_partition=False)
            removed, outside = self._remove_replicas_from_isr(group, partitions)
            for replica, tp, was in zip(group, partitions, current):
                leadership = removed.get(tp)
                if not context.is_topic_queued_up_for_deletion(tp.topic):
                    if leadership is not None:
                        assignment = context.assigned_replicas(tp)
                        others = [r for r in assignment if r != replica[2] and context.is_replica_online(r)]
                        self.batch.add_leader_and_isr_request_for_brokers(others, tp, leadership, assignment)
                    elif tp in outside:
                        # Kafka announces these too (doRemoveReplicasFromIsr returns them): the ISR is unchanged,
                        # but the replica is offline, and every broker's metadata must say so
                        self.batch.add_update_metadata_request_for_brokers(context.live_or_shutting_down_broker_ids,
                                                                           [tp])
                self._set_state(replica, was, ReplicaState.OFFLINE)

    def _remove_replicas_from_isr(self, replicas: list[ReplicaKey], partitions: list[TopicPartition]
                                  ) -> tuple[dict[TopicPartition, LeaderIsrAndControllerEpoch], set[TopicPartition]]:
        """Take each replica out of its partition's ISR (the last member stays, as in Kafka); leader -1 where it
        led. One replica per partition, `partitions` theirs in the same order; all read together, all written
        together (Kafka's removeReplicasFromIsr).

        As Kafka's doRemoveReplicasFromIsr, the states are read from the coordination service, not the cache: a
        leader may have added a replica back since the cache was filled, and its ISR change notification may
        not have arrived yet. Returns the new state to announce per partition (a replica whose partition's write
        failed its version check has none), and the partitions whose replica was in no ISR, nothing to write."""
        context = self.context
        stored = self.zk.get_partition_states(partitions, cached=context.partition_leadership_info)
        changes: dict[TopicPartition, LeaderIsrAndControllerEpoch] = {}
        owners: dict[TopicPartition, int] = {}
        outside: set[TopicPartition] = set()
        for replica, tp in zip(replicas, partitions):
            state = stored.get(tp)
            if state is None:
                continue
            context.partition_leadership_info[tp] = state
            lai = state.leader_and_isr
            broker_id = replica[2]
            if broker_id not in lai.isr and lai.leader != broker_id:
                outside.add(tp)
                continue
            new_leader = NO_LEADER if lai.leader == broker_id else lai.leader
            new_isr = lai.isr if len(lai.isr) == 1 else tuple(r for r in lai.isr if r != broker_id)
            changes[tp] = LeaderIsrAndControllerEpoch(lai.new_leader_and_isr(new_leader, new_isr), context.epoch)
            owners[tp] = broker_id
        written, failed = self.zk.update_leader_and_isr(context.epoch_zk_version, changes)
        for tp, exc in failed.items():
            if not isinstance(exc, BadVersionError):
                raise exc
            log.error("controller %d: the state of %s changed while replica %d was being removed from its ISR",
                      self.controller_id, tp, owners[tp])
        context.partition_leadership_info.update(written)
        return written, outside
