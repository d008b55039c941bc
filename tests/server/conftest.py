"""A harness of real brokers with the test in the controller's seat.

The controller is written elsewhere, so these tests drive the brokers the way it would: they write partition
state znodes through a KafkaZkClient and send LeaderAndIsr, UpdateMetadata and StopReplica over the real
Transport from the node id "controller". Everything else is real: coordination service, transport, brokers.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest
import trio

from kafkalite.common.config import BrokerConfig
from kafkalite.common.errors import raise_for
from kafkalite.common.records import Record, RecordBatch
from kafkalite.common.types import TopicPartition
from kafkalite.coordination import CoordinationService
from kafkalite.coordination.kafka_zk import KafkaZkClient, LeaderAndIsr, LeaderIsrAndControllerEpoch
from kafkalite.network.requests import (
    CONSUMER_REPLICA_ID,
    BrokerEndpoint,
    FetchPartition,
    FetchPartitionResponse,
    FetchRequest,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    LiveBroker,
    ProducePartitionData,
    ProducePartitionResponse,
    ProduceRequest,
    Request,
    RequestContext,
    StopReplicaRequest,
    UpdateMetadataPartitionState,
    UpdateMetadataRequest,
)
from kafkalite.network.transport import PauseGate, Transport
from kafkalite.server import Broker, LogManager

CONTROLLER = "controller"
CLIENT = "client"
CONTROLLER_ID = -1  # the test is the controller, and it is no broker


def batch(*values: bytes | str, timestamp: int = -1) -> RecordBatch:
    return RecordBatch.from_records([Record(None, v.encode() if isinstance(v, str) else v, timestamp)
                                     for v in values])


@dataclass
class Harness:
    service: CoordinationService
    transport: Transport
    zk: KafkaZkClient  # the "controller's" own session
    brokers: dict[int, Broker] = field(default_factory=dict)
    gates: dict[int, PauseGate] = field(default_factory=dict)
    controller_epoch: int = 1

    # -- the controller's part --------------------------------------------------------------------------------

    def live_brokers(self) -> list[LiveBroker]:
        return [LiveBroker(b, [BrokerEndpoint(ep.listener, ep.host, ep.port) for ep in broker.endpoints])
                for b, broker in sorted(self.brokers.items())]

    def create_topic_znodes(self, tp: TopicPartition, replicas: Sequence[int], config: dict[str, Any]) -> None:
        if self.zk.get_replica_assignment(tp.topic) is None:
            self.zk.session.multi(self.zk.create_topic_ops(tp.topic, {tp.partition: list(replicas)}, config))

    def write_state(self, tp: TopicPartition, leader: int, isr: Sequence[int]) -> LeaderAndIsr:
        """What the controller writes before it tells brokers: a new leader epoch in the state znode."""
        current = self.zk.get_partition_state(tp)
        if current is None:
            state = LeaderIsrAndControllerEpoch(LeaderAndIsr(leader, 0, tuple(isr), 0), self.controller_epoch)
            self.zk.session.multi(self.zk.create_partition_state_ops(tp, state))
            return state.leader_and_isr
        lai = current.leader_and_isr.new_leader_and_isr(leader, isr)
        version = self.zk.conditional_update_partition_state(tp, LeaderIsrAndControllerEpoch(lai, self.controller_epoch))
        assert version is not None
        return LeaderAndIsr(lai.leader, lai.leader_epoch, lai.isr, version)

    def partition_state(self, tp: TopicPartition, lai: LeaderAndIsr, replicas: Sequence[int]
                        ) -> LeaderAndIsrPartitionState:
        return LeaderAndIsrPartitionState(tp.topic, tp.partition, self.controller_epoch, lai.leader, lai.leader_epoch,
                                          lai.isr, lai.zk_version, tuple(replicas))

    def leader_and_isr(self, states: list[LeaderAndIsrPartitionState], *, broker_epoch: int = -1,
                       controller_epoch: int | None = None) -> LeaderAndIsrRequest:
        leaders = {s.leader for s in states}
        return LeaderAndIsrRequest(CONTROLLER_ID, self.controller_epoch if controller_epoch is None else controller_epoch,
                                   broker_epoch, states, [b for b in self.live_brokers() if b.id in leaders])

    async def elect(self, tp: TopicPartition, leader: int, isr: Sequence[int], replicas: Sequence[int], *,
                    to: Sequence[int] | None = None, config: dict[str, Any] | None = None) -> LeaderAndIsr:
        """Create or move a partition's leadership as the controller would, telling `to` (default: replicas)."""
        self.create_topic_znodes(tp, replicas, config or {})
        lai = self.write_state(tp, leader, isr)
        await self.tell(tp, lai, replicas, replicas if to is None else to)
        await self.update_metadata([tp])
        return lai

    async def tell(self, tp: TopicPartition, lai: LeaderAndIsr, replicas: Sequence[int], to: Sequence[int]) -> None:
        """Deliver a LeaderAndIsr the controller already decided (a late delivery, for instance)."""
        request = self.leader_and_isr([self.partition_state(tp, lai, replicas)])
        for broker_id in to:
            response: LeaderAndIsrResponse = await self.send(broker_id, request)
            assert response.error_code == 0 and all(code == 0 for _, _, code in response.partition_errors), response

    async def update_metadata(self, tps: Sequence[TopicPartition] = ()) -> None:
        states = []
        for tp in tps:
            found = self.zk.get_partition_state(tp)
            assert found is not None
            lai = found.leader_and_isr
            states.append(UpdateMetadataPartitionState(tp.topic, tp.partition, self.controller_epoch, lai.leader,
                                                       lai.leader_epoch, lai.isr, lai.zk_version,
                                                       tuple(self.zk.get_replica_assignment(tp.topic)[tp.partition])))
        request = UpdateMetadataRequest(CONTROLLER_ID, self.controller_epoch, -1, states, self.live_brokers())
        for broker_id in self.brokers:
            if self.gates[broker_id].paused:
                continue
            response = await self.send(broker_id, request)
            assert response.error_code == 0

    async def send(self, broker_id: int, request: Request, source: str = CONTROLLER) -> Any:
        """Send as `source`; a controller request without a broker epoch (-1) is addressed, as the controller
        addresses it, to the broker's current incarnation."""
        if isinstance(request, (LeaderAndIsrRequest, UpdateMetadataRequest, StopReplicaRequest)) \
                and request.broker_epoch == -1:
            request = dataclasses.replace(request, broker_epoch=self.brokers[broker_id].broker_epoch)
        return await self.transport.send(source, broker_id, request, RequestContext(source=source))

    # -- the clients' part ------------------------------------------------------------------------------------

    async def produce(self, broker_id: int, tp: TopicPartition, *batches: RecordBatch, acks: int = -1,
                      timeout_ms: int = 30000) -> ProducePartitionResponse:
        response = await self.send(broker_id, ProduceRequest(acks, timeout_ms, [
            ProducePartitionData(tp.topic, tp.partition, list(batches))]), CLIENT)
        return response.partitions[0]

    async def fetch(self, broker_id: int, tp: TopicPartition, offset: int, *, max_wait_ms: int = 0,
                    min_bytes: int = 0, replica_id: int = CONSUMER_REPLICA_ID) -> FetchPartitionResponse:
        response = await self.send(broker_id, FetchRequest(replica_id, max_wait_ms, min_bytes,
                                                           [FetchPartition(tp.topic, tp.partition, offset)]), CLIENT)
        assert response.error_code == 0
        return response.partitions[0]

    async def consume(self, broker_id: int, tp: TopicPartition) -> list[bytes | None]:
        """Every committed value, following batches from offset 0."""
        values: list[bytes | None] = []
        offset = 0
        while True:
            result = await self.fetch(broker_id, tp, offset)
            raise_for(result.error_code, result.error_message)
            if not result.batches:
                return values
            for o, record in (pair for b in result.batches for pair in b.offsets_and_records()):
                if o >= offset:
                    values.append(record.value)
            offset = result.batches[-1].next_offset

    def partition(self, broker_id: int, tp: TopicPartition) -> Any:
        found = self.brokers[broker_id].replica_manager.get_partition(tp)
        assert found is not None, f"broker {broker_id} does not host {tp}"
        return found

    def batches(self, broker_id: int, tp: TopicPartition) -> list[RecordBatch]:
        log = self.partition(broker_id, tp).log
        return log.read(log.log_start_offset, 1 << 30)

    async def wait_until(self, condition: Callable[[], bool], timeout: float = 60, what: str = "condition") -> None:
        with trio.fail_after(timeout):
            while not condition():
                await trio.sleep(0.01)

    async def wait_replicated(self, tp: TopicPartition, replicas: Sequence[int]) -> None:
        """Until every replica's LEO and HW equal the leader's."""
        def done() -> bool:
            parts = [self.partition(b, tp) for b in replicas]
            return len({(p.log.log_end_offset, p.high_watermark) for p in parts}) == 1 \
                and parts[0].log.log_end_offset == parts[0].high_watermark
        await self.wait_until(done, what=f"{tp} replicated on {replicas}")


BROKER_DEFAULTS = {"replica.lag.time.max.ms": 10000, "replica.fetch.backoff.ms": 100,
                   "coordination.session.timeout.ms": 6000}


@pytest.fixture
def broker_config() -> dict[str, Any]:
    """Per-test overrides of the brokers' config (a test may replace this fixture's value)."""
    return {}


@pytest.fixture
async def harness(broker_config: dict[str, Any]) -> AsyncIterator[Harness]:
    """Three brokers. Tests take `autojump_clock` themselves: pytest-trio only uses a clock the test requests."""
    async with start_brokers(3, broker_config) as h:
        yield h


@asynccontextmanager
async def start_brokers(count: int, config: dict[str, Any]) -> AsyncIterator[Harness]:
    """A coordination service and `count` started, registered brokers, all cancelled on exit."""
    async with trio.open_nursery() as nursery:
        service = CoordinationService()
        await nursery.start(service.run)
        transport = Transport()
        zk = KafkaZkClient(service, CONTROLLER, 6000)
        nursery.start_soon(zk.run)
        harness = Harness(service, transport, zk)
        for broker_id in range(1, count + 1):
            broker_config = BrokerConfig({**BROKER_DEFAULTS, **config, "broker.id": broker_id})
            gate = PauseGate()
            broker_zk = KafkaZkClient(service, f"broker-{broker_id}", broker_config.session_timeout_ms)
            broker = Broker(broker_config, broker_zk, transport, LogManager(broker_config), gate)
            nursery.start_soon(broker_zk.run, gate.checkpoint)
            await broker.startup(nursery)
            harness.brokers[broker_id] = broker
            harness.gates[broker_id] = gate
        await harness.update_metadata()
        yield harness
        nursery.cancel_scope.cancel()
