"""PartitionStateMachine: NewPartition, OnlinePartition, OfflinePartition, NonExistentPartition (seed 002).

The legal moves, and what each does (Kafka's doHandleStateChanges); `VALID_PREVIOUS_STATES` below is this
list as a table, and a move it lacks raises IllegalStateTransition and changes nothing:

    NonExistent -> New         the partition's replicas are known (from the assignment); nothing is written.
    New -> Online              the first live replica leads, every live replica is in the ISR; the state znode
                               is created and a LeaderAndIsr goes to the live replicas.
    Online, Offline -> Online  a leader selector elects from the state as stored (not as cached: a leader may
                               have changed the ISR since); written with a version check, then a LeaderAndIsr
                               to the replicas the selector names.
    New, Online, Offline -> Offline
                               the leader is gone; only the state changes until an election succeeds.
    Offline -> NonExistent     the topic is deleted.

One call moves a whole set of partitions in one request batch: one LeaderAndIsr and one UpdateMetadata per
broker, however many partitions changed.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence

from kafkalite.common.config import BrokerConfig, TopicConfig
from kafkalite.common.types import TopicPartition
from kafkalite.controller.context import ControllerContext, IllegalStateTransition
from kafkalite.controller.leader_selectors import (
    Election,
    LeaderSelector,
    NoLeaderAvailable,
    offline_partition_leader_selector,
)
from kafkalite.controller.request_batch import ControllerBrokerRequestBatch
from kafkalite.controller.states import PartitionState
from kafkalite.coordination.errors import BadVersionError, NodeExistsError
from kafkalite.coordination.kafka_zk import KafkaZkClient, LeaderAndIsr, LeaderIsrAndControllerEpoch

log = logging.getLogger(__name__)
state_change_log = logging.getLogger("kafkalite.state.change")

_Elected = tuple[Sequence[int], LeaderIsrAndControllerEpoch, Sequence[int], bool]
"""An elected partition: the brokers to tell, its new state, its assignment, whether it is new."""


VALID_PREVIOUS_STATES: dict[PartitionState, frozenset[PartitionState]] = {
    PartitionState.NEW: frozenset({PartitionState.NON_EXISTENT}),
    PartitionState.ONLINE: frozenset({PartitionState.NEW, PartitionState.ONLINE, PartitionState.OFFLINE}),
    PartitionState.OFFLINE: frozenset({PartitionState.NEW, PartitionState.ONLINE, PartitionState.OFFLINE}),
    PartitionState.NON_EXISTENT: frozenset({PartitionState.OFFLINE}),
}


class PartitionStateMachine:
    def __init__(self, controller_id: int, config: BrokerConfig, context: ControllerContext, zk: KafkaZkClient,
                 batch: ControllerBrokerRequestBatch) -> None:
        self.controller_id = controller_id
        self.config = config
        self.context = context
        self.zk = zk
        self.batch = batch

    def startup(self, partitions: Sequence[TopicPartition]) -> None:
        """Initial states of `partitions` (every partition) from what failover read, then elect leaders wherever
        there is none."""
        for tp in partitions:
            leadership = self.context.partition_leadership_info.get(tp)
            if leadership is None:
                self.context.partition_states[tp] = PartitionState.NEW
            elif self.context.is_replica_online(leadership.leader_and_isr.leader, include_shutting_down=True):
                self.context.partition_states[tp] = PartitionState.ONLINE
            else:
                self.context.partition_states[tp] = PartitionState.OFFLINE
        self.trigger_online_partition_state_change()

    def trigger_online_partition_state_change(self, *, unclean_only: bool = False) -> None:
        """Elect leaders for every New or Offline partition of a topic not being deleted; `unclean_only`: of a topic
        that allows unclean elections, after a topic's config changed (Kafka's TopicUncleanLeaderElectionEnable)."""
        context = self.context
        partitions = sorted(tp for tp, state in context.partition_states.items()
                            if state in (PartitionState.NEW, PartitionState.OFFLINE)
                            and not context.is_topic_queued_up_for_deletion(tp.topic))
        if unclean_only:
            allowed = {topic: self._unclean_allowed(topic) for topic in {tp.topic for tp in partitions}}
            partitions = [tp for tp in partitions if allowed[tp.topic]]
        self.handle_state_changes(partitions, PartitionState.ONLINE)

    def handle_state_changes(self, partitions: Iterable[TopicPartition], target: PartitionState,
                             selector: LeaderSelector = offline_partition_leader_selector, *,
                             replicas: Mapping[TopicPartition, Sequence[int]] | None = None
                             ) -> list[TopicPartition]:
        """Move `partitions` to `target` in one request batch; returns the partitions that made it.

        An election picks from `replicas[tp]` when given (a finishing reassignment's target replicas), else
        from the partition's assignment."""
        partitions = list(dict.fromkeys(partitions))
        if not partitions:
            return []
        states, valid = self.context.partition_states, VALID_PREVIOUS_STATES[target]
        for tp in partitions:
            if states.get(tp, PartitionState.NON_EXISTENT) not in valid:
                self._illegal_transition(tp, target)
        self.batch.new_batch()
        try:
            moved = self._do_handle_state_changes(partitions, target, selector, replicas or {})
            self.batch.send_requests_to_brokers(self.context.epoch)
        except BaseException:
            self.batch.clear()
            raise
        return moved

    def _illegal_transition(self, tp: TopicPartition, target: PartitionState) -> None:
        current = self.context.partition_states.get(tp, PartitionState.NON_EXISTENT)
        message = (f"controller {self.controller_id} epoch {self.context.epoch}: illegal partition state "
                   f"transition of {tp} from {current.value} to {target.value}")
        state_change_log.error(message)
        raise IllegalStateTransition(message)

    def _do_handle_state_changes(self, partitions: list[TopicPartition], target: PartitionState,
                                 selector: LeaderSelector, replicas: Mapping[TopicPartition, Sequence[int]]
                                 ) -> list[TopicPartition]:
        """The whole set at once, as Kafka's doHandleStateChanges: one read of the stored states, one write of
        the new ones (each partition's write succeeds or fails on its own), then the requests, partition by
        partition in the order given."""
        states = self.context.partition_states
        current = {tp: states.get(tp, PartitionState.NON_EXISTENT) for tp in partitions}
        if target is PartitionState.ONLINE:
            elected = self._initialize_leader_and_isr([tp for tp in partitions if current[tp] is PartitionState.NEW])
            elected.update(self._elect_leaders([tp for tp in partitions if current[tp] is not PartitionState.NEW],
                                               selector, replicas))
            partitions = [tp for tp in partitions if tp in elected]
            for tp in partitions:
                recipients, state, assignment, is_new = elected[tp]
                self.batch.add_leader_and_isr_request_for_brokers(recipients, tp, state, assignment, is_new=is_new)
        for tp in partitions:
            self._set_state(tp, current[tp], target)
        return partitions

    def _set_state(self, tp: TopicPartition, current: PartitionState, target: PartitionState) -> None:
        if target is PartitionState.NON_EXISTENT:
            self.context.partition_states.pop(tp, None)
        else:
            self.context.partition_states[tp] = target
        if not state_change_log.isEnabledFor(logging.INFO):
            return
        leadership = self.context.partition_leadership_info.get(tp)
        detail = "" if leadership is None else (
            f" with leader {leadership.leader_and_isr.leader}, epoch {leadership.leader_and_isr.leader_epoch}, "
            f"ISR {list(leadership.leader_and_isr.isr)}")
        state_change_log.info("controller %d epoch %d changed partition %s from %s to %s%s", self.controller_id,
                              self.context.epoch, tp, current.value, target.value, detail)

    def _initialize_leader_and_isr(self, partitions: list[TopicPartition]) -> dict[TopicPartition, _Elected]:
        """New partitions: the first live replica leads, every live replica is in the ISR; their state znodes
        are created together, and one that exists already is left out (logged)."""
        context = self.context
        states: dict[TopicPartition, LeaderIsrAndControllerEpoch] = {}
        for tp in partitions:
            assignment = context.assigned_replicas(tp)
            live = [r for r in assignment if context.is_replica_online(r)]
            if not live:
                state_change_log.error("controller %d epoch %d: no live replica of new partition %s (assigned %s)",
                                       self.controller_id, context.epoch, tp, list(assignment))
                continue
            states[tp] = LeaderIsrAndControllerEpoch(LeaderAndIsr(live[0], 0, tuple(live), 0), context.epoch)
        if not states:
            return {}
        created, failed = self.zk.create_partition_states(context.epoch_zk_version, states)
        for tp, exc in failed.items():
            if not isinstance(exc, NodeExistsError):
                raise exc
            state_change_log.error("controller %d epoch %d: partition state of new partition %s already exists",
                                   self.controller_id, context.epoch, tp)
        elected = {}
        for tp in created:
            state = context.partition_leadership_info[tp] = states[tp]
            assignment = context.assigned_replicas(tp)
            elected[tp] = (state.leader_and_isr.isr, state, assignment, True)
        return elected

    def _elect_leaders(self, partitions: list[TopicPartition], selector: LeaderSelector,
                       replicas: Mapping[TopicPartition, Sequence[int]]) -> dict[TopicPartition, _Elected]:
        """Ask the selector, write the results with version checks; what to tell whom for each one elected.

        The states are read from the coordination service, not the cache, as Kafka does: a leader may have
        changed an ISR since, and its ISR change notification may not have reached us yet. Reads and writes
        happen between two checkpoints, so nobody can write in between and a version mismatch cannot happen
        but by a bug; if one does, that partition alone is not elected."""
        if not partitions:
            return {}
        context = self.context
        stored = self.zk.get_partition_states(partitions, cached=context.partition_leadership_info)
        brokers = context.brokers()
        unclean: dict[str, bool] = {}  # each topic's config read once per batch
        elections: dict[TopicPartition, Election] = {}
        for tp in partitions:
            current = stored.get(tp)
            if current is None:
                continue
            context.partition_leadership_info[tp] = current
            if tp.topic not in unclean:
                unclean[tp.topic] = self._unclean_allowed(tp.topic)
            candidates = replicas.get(tp)
            if candidates is None:
                candidates = context.assigned_replicas(tp)
            try:
                elections[tp] = selector(candidates, current.leader_and_isr, brokers, unclean[tp.topic])
            except NoLeaderAvailable as exc:
                state_change_log.warning("controller %d epoch %d: no leader elected for %s: %s",
                                         self.controller_id, context.epoch, tp, exc)
        written, failed = self.zk.update_leader_and_isr(context.epoch_zk_version, {
            tp: LeaderIsrAndControllerEpoch(election.leader_and_isr, context.epoch)
            for tp, election in elections.items()})
        for tp, exc in failed.items():
            if not isinstance(exc, BadVersionError):
                raise exc
            log.error("controller %d: the state of %s changed while it was being elected", self.controller_id, tp)
        context.partition_leadership_info.update(written)
        return {tp: (elections[tp].replicas_to_receive_request, state, context.assigned_replicas(tp),
                     False) for tp, state in written.items()}

    def _unclean_allowed(self, topic: str) -> bool:
        return TopicConfig.for_broker(self.zk.get_topic_config(topic), self.config)["unclean.leader.election.enable"]
