"""ControllerBrokerRequestBatch: state changes collect requests here and leave together (seed 001).

A state-machine pass may touch many partitions; batching turns it into one LeaderAndIsr, one
UpdateMetadata and one StopReplica per broker, sent in that order so that a broker learns its role before
the rest of the cluster is told about it, and stops a replica only after the new leader is known.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterable, Sequence

from kafkalite.common.types import TopicPartition
from kafkalite.controller.channel_manager import ControllerChannelManager, ResponseCallback
from kafkalite.controller.context import ControllerContext
from kafkalite.coordination.kafka_zk import LeaderIsrAndControllerEpoch
from kafkalite.network.requests import (
    LEADER_DURING_DELETE,
    BrokerEndpoint,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    LiveBroker,
    Response,
    StopReplicaPartition,
    StopReplicaRequest,
    UpdateMetadataPartitionState,
    UpdateMetadataRequest,
)

state_change_log = logging.getLogger("kafkalite.state.change")


class IllegalBatchState(Exception):
    """A new batch was started while the previous one still held unsent requests: they would be lost."""


class ControllerBrokerRequestBatch:
    def __init__(self, controller_id: int, context: ControllerContext,
                 channel_manager: ControllerChannelManager) -> None:
        self.controller_id = controller_id
        self.context = context
        self.channel_manager = channel_manager
        self.leader_and_isr_request_map: dict[int, dict[TopicPartition, LeaderAndIsrPartitionState]] = {}
        self.stop_replica_request_map: dict[int, list[StopReplicaPartition]] = {}
        self.stop_replica_callbacks: dict[int, ResponseCallback] = {}
        self.update_metadata_request_broker_set: set[int] = set()
        # The partitions' states are read when the batch is sent, once each, however many state changes
        # touched them: a failover touches every replica of every partition.
        self.update_metadata_request_partitions: dict[TopicPartition, None] = {}  # ordered, as sent
        self._leader_and_isr_states: dict[TopicPartition, LeaderAndIsrPartitionState] = {}

    def new_batch(self) -> None:
        if self.leader_and_isr_request_map or self.stop_replica_request_map or \
                self.update_metadata_request_broker_set:
            raise IllegalBatchState(
                "controller-to-broker request batch is not empty while creating a new one: "
                f"LeaderAndIsr for {sorted(self.leader_and_isr_request_map)}, StopReplica for "
                f"{sorted(self.stop_replica_request_map)}, UpdateMetadata for "
                f"{sorted(self.update_metadata_request_broker_set)} might be lost")

    def clear(self) -> None:
        self.leader_and_isr_request_map.clear()
        self.stop_replica_request_map.clear()
        self.stop_replica_callbacks.clear()
        self.update_metadata_request_broker_set.clear()
        self.update_metadata_request_partitions.clear()
        self._leader_and_isr_states.clear()

    def add_leader_and_isr_request_for_brokers(self, broker_ids: Iterable[int], tp: TopicPartition,
                                               leader_isr_and_controller_epoch: LeaderIsrAndControllerEpoch,
                                               replicas: Sequence[int], is_new: bool = False, *,
                                               update_metadata: bool = True) -> None:
        """LeaderAndIsr for `tp` to each broker, and (unless `update_metadata` is false) its state to every live
        broker in the batch's UpdateMetadata."""
        state = None
        for broker_id in broker_ids:
            if broker_id < 0:
                continue
            if state is None:
                state = self._leader_and_isr_state(tp, leader_isr_and_controller_epoch, replicas, is_new)
            self.leader_and_isr_request_map.setdefault(broker_id, {})[tp] = state
        if update_metadata:
            self.update_metadata_request_broker_set.update(self.context.live_brokers)
            self.update_metadata_request_partitions[tp] = None

    def _leader_and_isr_state(self, tp: TopicPartition, leadership: LeaderIsrAndControllerEpoch,
                              replicas: Sequence[int], is_new: bool) -> LeaderAndIsrPartitionState:
        """One state per partition and batch for every broker told, however many calls name it (a replica state
        change names one replica at a time): requests are not changed on their way."""
        lai = leadership.leader_and_isr
        state = LeaderAndIsrPartitionState(tp.topic, tp.partition, leadership.controller_epoch, lai.leader,
                                           lai.leader_epoch, lai.isr, lai.zk_version, tuple(replicas), is_new)
        built = self._leader_and_isr_states.get(tp)
        if built is not None and built == state:
            return built  # the one object every broker told of this partition in the batch shares
        self._leader_and_isr_states[tp] = state
        return state

    def add_update_metadata_request_for_brokers(self, broker_ids: Iterable[int],
                                                partitions: Iterable[TopicPartition] = ()) -> None:
        self.update_metadata_request_broker_set.update(b for b in broker_ids if b >= 0)
        self.update_metadata_request_partitions.update(dict.fromkeys(partitions))

    def update_metadata_partition_states(self) -> list[UpdateMetadataPartitionState]:
        """What the batch's UpdateMetadata says of its partitions, as the context holds them now."""
        context = self.context
        # offline: not alive, or shutting down, as Kafka's isReplicaOnline counts a broker on its way out
        leaderships, online, deleting = context.partition_leadership_info, context.live_broker_ids, \
            context.topics_to_be_deleted
        states = []
        for tp in self.update_metadata_request_partitions:
            leadership = leaderships.get(tp)
            if leadership is None:
                continue  # no leader assigned yet: nothing to tell
            lai = leadership.leader_and_isr
            replicas = context.assigned_replicas(tp)
            states.append(UpdateMetadataPartitionState(
                tp.topic, tp.partition, leadership.controller_epoch,
                LEADER_DURING_DELETE if tp.topic in deleting else lai.leader, lai.leader_epoch, lai.isr,
                lai.zk_version, tuple(replicas), tuple([r for r in replicas if r not in online])))
        return states

    def add_stop_replica_request_for_brokers(self, broker_ids: Iterable[int], tp: TopicPartition,
                                             delete_partition: bool,
                                             callback: Callable[[int, Response], None] | None = None) -> None:
        """`callback(broker_id, response)` hears the broker's answer: topic deletion waits for it.

        A broker that is not alive is left out now rather than when the batch is sent, which skips it too: the
        broker failure that follows a controlled shutdown stops every replica of a broker that is gone."""
        live = self.context.live_brokers
        for broker_id in broker_ids:
            if broker_id not in live:
                continue
            if callback is not None:
                self.stop_replica_callbacks[broker_id] = functools.partial(callback, broker_id)
            leadership = self.context.partition_leadership_info.get(tp)
            epoch = leadership.leader_and_isr.leader_epoch if leadership is not None else -1
            self.stop_replica_request_map.setdefault(broker_id, []).append(
                StopReplicaPartition(tp.topic, tp.partition, delete_partition, epoch))

    def send_update_metadata_request(self, broker_ids: Iterable[int], partitions: Iterable[TopicPartition]) -> None:
        """An UpdateMetadata on its own, in a batch of its own (Kafka's sendUpdateMetadataRequest)."""
        self.new_batch()
        self.add_update_metadata_request_for_brokers(broker_ids, partitions)
        self.send_requests_to_brokers(self.context.epoch)

    def send_requests_to_brokers(self, controller_epoch: int) -> None:
        try:
            self._send_leader_and_isr_requests(controller_epoch)
            self._send_update_metadata_requests(controller_epoch)
            self._send_stop_replica_requests(controller_epoch)
        finally:
            self.clear()

    def _live_brokers(self, broker_ids: Iterable[int]) -> list[LiveBroker]:
        brokers = []
        for broker_id in sorted(broker_ids):
            info = self.context.live_brokers.get(broker_id)
            if info is not None:
                brokers.append(LiveBroker(info.id, [BrokerEndpoint(ep.listener, ep.host, ep.port,
                                                                   ep.security_protocol) for ep in info.endpoints],
                                          info.rack))
        return brokers

    def _send_leader_and_isr_requests(self, controller_epoch: int) -> None:
        for broker_id, states in sorted(self.leader_and_isr_request_map.items()):
            if broker_id not in self.context.live_or_shutting_down_broker_ids:
                continue
            leaders = {state.leader for state in states.values()}
            for tp, state in states.items() if state_change_log.isEnabledFor(logging.INFO) else ():
                state_change_log.info("controller %d epoch %d sending LeaderAndIsr (leader=%d, epoch=%d, isr=%s) "
                                      "to broker %d for %s", self.controller_id, controller_epoch, state.leader,
                                      state.leader_epoch, state.isr, broker_id, tp)
            self.channel_manager.send_request(broker_id, LeaderAndIsrRequest(
                self.controller_id, controller_epoch, self.context.broker_epoch(broker_id),
                list(states.values()), self._live_brokers(leaders)))

    def _send_update_metadata_requests(self, controller_epoch: int) -> None:
        if not self.update_metadata_request_broker_set:
            return
        partition_states = self.update_metadata_partition_states()
        live_brokers = self._live_brokers(self.context.live_or_shutting_down_broker_ids)
        ids = self.context.topic_ids
        topic_ids = {topic: ids[topic] for topic in {state.topic for state in partition_states} if topic in ids}
        for broker_id in sorted(self.update_metadata_request_broker_set &
                                self.context.live_or_shutting_down_broker_ids):
            self.channel_manager.send_request(broker_id, UpdateMetadataRequest(
                self.controller_id, controller_epoch, self.context.broker_epoch(broker_id), partition_states,
                live_brokers, topic_ids))

    def _send_stop_replica_requests(self, controller_epoch: int) -> None:
        for broker_id, partitions in sorted(self.stop_replica_request_map.items()):
            if broker_id not in self.context.live_or_shutting_down_broker_ids:
                continue
            self.channel_manager.send_request(broker_id, StopReplicaRequest(
                self.controller_id, controller_epoch, self.context.broker_epoch(broker_id), partitions),
                self.stop_replica_callbacks.get(broker_id))
