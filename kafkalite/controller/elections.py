"""Leader elections on request: ElectLeaders, `/admin/preferred_replica_election` and the auto leader rebalance.

Each request is checked partition by partition first (Kafka's per-partition answers: ELECTION_NOT_NEEDED,
PREFERRED_LEADER_NOT_AVAILABLE, ...); the partitions that pass are elected together in one state change, one
request batch, as Kafka's controller does, however many there are.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from kafkalite.common import errors
from kafkalite.common.config import BrokerConfig
from kafkalite.common.types import TopicPartition
from kafkalite.controller.context import ControllerContext
from kafkalite.controller.leader_selectors import (
    LeaderSelector,
    preferred_replica_partition_leader_selector,
    unclean_partition_leader_selector,
)
from kafkalite.controller.partition_state_machine import PartitionState, PartitionStateMachine
from kafkalite.coordination.kafka_zk import (
    PREFERRED_REPLICA_ELECTION_PATH,
    KafkaZkClient,
    LeaderIsrAndControllerEpoch,
    decode_preferred_replica_election,
)
from kafkalite.coordination.service import DeleteOp
from kafkalite.network.requests import (
    PREFERRED_ELECTION,
    UNCLEAN_ELECTION,
    ElectionResult,
    ElectLeadersRequest,
    ElectLeadersResponse,
)

log = logging.getLogger(__name__)

_SELECTORS: dict[int, LeaderSelector] = {
    PREFERRED_ELECTION: preferred_replica_partition_leader_selector,
    UNCLEAN_ELECTION: unclean_partition_leader_selector,
}


class Elections:
    def __init__(self, controller_id: int, config: BrokerConfig, context: ControllerContext, zk: KafkaZkClient,
                 partition_state_machine: PartitionStateMachine) -> None:
        self.controller_id = controller_id
        self.config = config
        self.context = context
        self.zk = zk
        self._partitions = partition_state_machine

    def elect_leaders(self, request: ElectLeadersRequest) -> ElectLeadersResponse:
        if request.election_type not in _SELECTORS:
            return ElectLeadersResponse(errors.INVALID_REQUEST.code,
                                        error_message=f"unknown election type {request.election_type}")
        if request.topic_partitions is None:  # as Kafka, every partition brokers know, so none of a topic being deleted
            partitions = [tp for tp in self.context.all_partitions()
                          if not self.context.is_topic_queued_up_for_deletion(tp.topic)]
        else:
            partitions = [TopicPartition(t, p) for t, p in request.topic_partitions]
        return ElectLeadersResponse(errors.NONE.code, self.elect(partitions, request.election_type))

    def elect(self, partitions: Iterable[TopicPartition], election_type: int) -> list[ElectionResult]:
        """Every partition's outcome, in the order asked; the eligible ones elected in one state change."""
        partitions = list(dict.fromkeys(partitions))
        existing = (PartitionState.ONLINE, PartitionState.OFFLINE)
        stored = self.zk.get_partition_states((tp for tp in partitions
                                               if self.context.partition_states.get(tp) in existing),
                                              cached=self.context.partition_leadership_info)
        refused = {tp: self._refusal(tp, election_type, stored.get(tp)) for tp in partitions}
        eligible = [tp for tp in partitions if refused[tp] is None]
        elected = set(self._partitions.handle_state_changes(eligible, PartitionState.ONLINE,
                                                             _SELECTORS[election_type]))
        results = []
        for tp in partitions:
            refusal = refused[tp]
            if refusal is None and tp not in elected:
                refusal = (errors.ELIGIBLE_LEADERS_NOT_AVAILABLE if election_type == UNCLEAN_ELECTION else
                           errors.PREFERRED_LEADER_NOT_AVAILABLE, f"the election for {tp} found no eligible leader")
            code, message = refusal if refusal is not None else (errors.NONE, None)
            results.append(ElectionResult(tp.topic, tp.partition, code.code, message))
        return results

    def _refusal(self, tp: TopicPartition, election_type: int, leadership: LeaderIsrAndControllerEpoch | None
                 ) -> tuple[errors.ErrorCode, str] | None:
        """Why `tp` cannot be elected now, as Kafka's ElectLeaders answers it; None if it may be.

        `leadership` is the state as stored (None: none, or the partition is not online or offline): a leader
        may have let the preferred replica back in since the controller's cache was filled (ISR change
        notifications come in batches)."""
        context = self.context
        if leadership is None:
            return errors.UNKNOWN_TOPIC_OR_PARTITION, f"{tp} does not exist"
        context.partition_leadership_info[tp] = leadership
        if context.is_topic_queued_up_for_deletion(tp.topic):
            return errors.INVALID_TOPIC_EXCEPTION, f"topic {tp.topic} is being deleted"
        current = leadership.leader_and_isr
        if election_type == PREFERRED_ELECTION:
            preferred = context.partition_replica_assignment(tp)[0]
            if current.leader == preferred:
                return errors.ELECTION_NOT_NEEDED, f"preferred replica {preferred} already leads {tp}"
            if not context.is_replica_online(preferred) or preferred not in current.isr:
                return (errors.PREFERRED_LEADER_NOT_AVAILABLE,
                        f"preferred replica {preferred} of {tp} is not alive and in the ISR")
        elif context.is_replica_online(current.leader):
            return errors.ELECTION_NOT_NEEDED, f"{tp} has a live leader {current.leader}"
        return None

    def process_preferred_replica_election_znode(self) -> None:
        """Kafka's admin path: elect preferred leaders for the partitions listed, then remove the request."""
        try:
            found = self.zk.get_data(PREFERRED_REPLICA_ELECTION_PATH, watch=True)
            if found is None:
                return
            listed = decode_preferred_replica_election(found[0])
        except ValueError as exc:
            log.error("controller %d: ignoring %s: %s", self.controller_id, PREFERRED_REPLICA_ELECTION_PATH, exc)
        else:
            wanted = self.context.all_partitions() if listed is None else listed
            self.elect([tp for tp in wanted if tp in self.context.partition_leadership_info], PREFERRED_ELECTION)
        self.zk.controller_multi(self.context.epoch_zk_version, [DeleteOp(PREFERRED_REPLICA_ELECTION_PATH)])

    def check_and_trigger_auto_leader_rebalance(self) -> None:
        """Per broker, the share of partitions it should lead but does not; over the threshold, move them back,
        every broker's in one election.

        Not while partitions are being reassigned, as in Kafka: their preferred replicas are about to change."""
        context = self.context
        if context.partitions_being_reassigned:
            return
        threshold = self.config["leader.imbalance.per.broker.percentage"] / 100
        preferred_of: dict[int, list[TopicPartition]] = {}
        for tp in context.all_partitions():
            if tp in context.partition_leadership_info and not context.is_topic_queued_up_for_deletion(tp.topic):
                preferred_of.setdefault(context.partition_replica_assignment(tp)[0], []).append(tp)
        imbalanced = []
        for broker_id, partitions in sorted(preferred_of.items()):
            not_led = [tp for tp in partitions
                       if context.partition_leadership_info[tp].leader_and_isr.leader != broker_id]
            ratio = len(not_led) / len(partitions)
            if ratio > threshold and context.is_replica_online(broker_id):
                log.info("controller %d: broker %d leads %d of its %d preferred partitions (imbalance %.0f%%); "
                         "rebalancing", self.controller_id, broker_id, len(partitions) - len(not_led),
                         len(partitions), 100 * ratio)
                imbalanced += not_led
        if imbalanced:
            self.elect(imbalanced, PREFERRED_ELECTION)
