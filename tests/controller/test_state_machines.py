"""State machines refuse illegal moves; a request batch leaves in Kafka's order and is never silently dropped."""

from __future__ import annotations

import logging
from typing import Any

import pytest
import trio

from kafkalite.common.config import BrokerConfig
from kafkalite.common.types import TopicPartition
from kafkalite.controller.channel_manager import ControllerChannelManager
from kafkalite.controller.context import ControllerContext, IllegalStateTransition, PartitionAndReplica
from kafkalite.controller.partition_state_machine import PartitionState, PartitionStateMachine
from kafkalite.controller.replica_state_machine import ReplicaState, ReplicaStateMachine
from kafkalite.controller.request_batch import ControllerBrokerRequestBatch, IllegalBatchState
from kafkalite.coordination import CoordinationService
from kafkalite.coordination.kafka_zk import BrokerInfo, KafkaZkClient, LeaderAndIsr, LeaderIsrAndControllerEpoch
from kafkalite.network.requests import (
    LEADER_DURING_DELETE,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    StopReplicaRequest,
    StopReplicaResponse,
    UpdateMetadataRequest,
    UpdateMetadataResponse,
)
from kafkalite.network.transport import PauseGate, Transport

TP = TopicPartition("t", 0)


class Harness:
    """A controller's machinery against a real coordination service and transport; brokers record requests."""

    def __init__(self, nursery: trio.Nursery) -> None:
        self.service = CoordinationService()
        self.zk = KafkaZkClient(self.service, "controller", 60_000)
        self.zk.ensure_persistent_paths()
        epoch, version = self.zk.register_controller_and_increment_epoch(1, 0)
        self.context = ControllerContext(epoch=epoch, epoch_zk_version=version)
        self.context.live_brokers = {b: BrokerInfo(b, (), None, 10 * b) for b in (1, 2, 3)}
        self.context.partition_assignments = {"t": {0: [1, 2, 3]}}
        self.zk.session.multi(self.zk.create_topic_ops("t", {0: [1, 2, 3]}, {}))
        self.received: list[tuple[int, Any]] = []
        transport = Transport()
        for broker_id in (1, 2, 3):
            transport.register(broker_id, self._recorder(broker_id), PauseGate())
        self.channels = ControllerChannelManager(1, transport, PauseGate(), nursery)
        for broker_id in (1, 2, 3):
            self.channels.add_broker(broker_id)
        self.batch = ControllerBrokerRequestBatch(1, self.context, self.channels)
        self.partitions = PartitionStateMachine(1, BrokerConfig(), self.context, self.zk, self.batch)
        self.replicas = ReplicaStateMachine(1, self.context, self.zk, self.batch)

    def _recorder(self, broker_id: int):
        answers = {LeaderAndIsrRequest: LeaderAndIsrResponse(0), UpdateMetadataRequest: UpdateMetadataResponse(0),
                   StopReplicaRequest: StopReplicaResponse(0)}

        async def handle(request: Any, context: Any) -> Any:
            self.received.append((broker_id, request))
            return answers[type(request)]

        return handle


@pytest.fixture
async def harness(autojump_clock: Any):
    async with trio.open_nursery() as nursery:
        yield Harness(nursery)
        nursery.cancel_scope.cancel()


async def test_new_partition_goes_online_with_first_live_replica_and_requests_leave_in_order(
        autojump_clock: Any, harness: Harness) -> None:
    harness.context.live_brokers.pop(1)  # the first replica is down: the next one leads
    replicas = harness.context.replicas_for_partitions([TP])
    harness.partitions.handle_state_changes([TP], PartitionState.NEW)
    harness.replicas.handle_state_changes(replicas, ReplicaState.NEW)
    harness.partitions.handle_state_changes([TP], PartitionState.ONLINE)
    await trio.sleep(1)
    state = harness.zk.get_partition_state(TP)
    assert state.leader_and_isr == LeaderAndIsr(2, 0, (2, 3), 0)
    assert state.controller_epoch == harness.context.epoch
    by_broker = {b: [type(r).__name__ for bb, r in harness.received if bb == b] for b in (2, 3)}
    assert by_broker == {2: ["LeaderAndIsrRequest", "UpdateMetadataRequest"],
                         3: ["LeaderAndIsrRequest", "UpdateMetadataRequest"]}
    leader_and_isr = next(r for b, r in harness.received if b == 2 and isinstance(r, LeaderAndIsrRequest))
    assert leader_and_isr.controller_epoch == harness.context.epoch and leader_and_isr.broker_epoch == 20
    assert [(s.leader, s.isr, s.replicas, s.is_new) for s in leader_and_isr.partition_states] == \
        [(2, (2, 3), (1, 2, 3), True)]
    assert [b.id for b in leader_and_isr.live_leaders] == [2]


async def test_illegal_transitions_raise_and_change_nothing(autojump_clock: Any, harness: Harness,
                                                             caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.ERROR, logger="kafkalite.state.change"):
        with pytest.raises(IllegalStateTransition, match="NonExistentPartition to OnlinePartition"):
            harness.partitions.handle_state_changes([TP], PartitionState.ONLINE)
        with pytest.raises(IllegalStateTransition, match="NonExistentReplica to OnlineReplica"):
            harness.replicas.handle_state_changes([PartitionAndReplica("t", 0, 1)], ReplicaState.ONLINE)
        with pytest.raises(IllegalStateTransition):
            harness.replicas.handle_state_changes([PartitionAndReplica("t", 0, 1)], ReplicaState.DELETION_STARTED)
    assert "illegal partition state transition" in caplog.text
    assert harness.context.partition_states == {} and harness.context.replica_states == {}
    assert harness.zk.get_partition_state(TP) is None
    harness.batch.new_batch()  # a failed pass leaves no half-built batch behind


async def test_offline_replica_leaves_the_isr_and_the_others_learn_it(autojump_clock: Any, harness: Harness) -> None:
    state = LeaderIsrAndControllerEpoch(LeaderAndIsr(1, 0, (1, 2, 3), 0), harness.context.epoch)
    harness.zk.controller_multi(harness.context.epoch_zk_version, harness.zk.create_partition_state_ops(TP, state))
    harness.context.partition_leadership_info[TP] = state
    for replica in harness.context.replicas_for_partitions([TP]):
        harness.context.replica_states[replica] = ReplicaState.ONLINE
    harness.replicas.handle_state_changes([PartitionAndReplica("t", 0, 3)], ReplicaState.OFFLINE)
    await trio.sleep(1)
    assert harness.zk.get_partition_state(TP).leader_and_isr == LeaderAndIsr(1, 1, (1, 2), 1)
    kinds = [(b, type(r).__name__) for b, r in harness.received]
    assert (3, "StopReplicaRequest") in kinds
    assert {b for b, kind in kinds if kind == "LeaderAndIsrRequest"} == {1, 2}
    assert kinds.index((3, "UpdateMetadataRequest")) < kinds.index((3, "StopReplicaRequest"))


def test_new_batch_refuses_to_drop_unsent_requests() -> None:
    context = ControllerContext(epoch=1)
    context.live_brokers = {1: BrokerInfo(1, (), None, 5)}
    context.partition_assignments = {"t": {0: [1]}}
    context.partition_leadership_info[TP] = LeaderIsrAndControllerEpoch(LeaderAndIsr(1, 0, (1,), 0), 1)
    batch = ControllerBrokerRequestBatch(1, context, None)  # type: ignore[arg-type]
    batch.new_batch()
    batch.add_update_metadata_request_for_brokers([1], [TP])
    with pytest.raises(IllegalBatchState, match="might be lost"):
        batch.new_batch()
    context.topics_to_be_deleted.add("t")
    batch.add_update_metadata_request_for_brokers([1], [TP])
    assert [state.leader for state in batch.update_metadata_partition_states()] == [LEADER_DURING_DELETE]
