"""Every API a broker serves, its errors, and that a bad request never hurts what was acknowledged."""

from __future__ import annotations

import dataclasses
from typing import Any

import msgpack
import pytest
import trio
from trio.testing import MockClock

from kafkalite.common import errors
from kafkalite.common.records import RecordBatch, _checksum
from kafkalite.common.types import TopicPartition
from kafkalite.network.requests import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    CreatableTopic,
    CreateTopicsRequest,
    FetchPartition,
    FetchRequest,
    ListOffsetsPartition,
    ListOffsetsRequest,
    MetadataRequest,
    OffsetForLeaderPartition,
    OffsetsForLeaderEpochRequest,
    ProducePartitionData,
    ProduceRequest,
    RequestContext,
    Response,
    StopReplicaPartition,
    StopReplicaRequest,
    UpdateMetadataRequest,
)
from kafkalite.network.responses import error_response

from .conftest import CLIENT, Harness, batch

TP = TopicPartition("orders", 0)
REPLICAS = [1, 2, 3]


async def committed(harness: Harness, *values: str) -> None:
    """Produce with acks=-1 and check it was acknowledged."""
    result = await harness.produce(1, TP, batch(*values))
    assert result.error_code == 0, result


async def assert_still_serving(harness: Harness, acknowledged: list[bytes]) -> None:
    """The broker still takes a normal produce and fetch, and what was acknowledged before is intact."""
    await committed(harness, "after")
    assert await harness.consume(1, TP) == [*acknowledged, b"after"]


@pytest.fixture
async def topic(harness: Harness) -> Harness:
    await harness.elect(TP, 1, REPLICAS, REPLICAS)
    await committed(harness, "one", "two")
    return harness


# -- produce errors ---------------------------------------------------------------------------------------------


async def test_produce_to_a_follower_is_not_leader(topic: Harness, autojump_clock: MockClock) -> None:
    result = await topic.produce(2, TP, batch("x"))
    assert result.error_code == errors.NOT_LEADER_OR_FOLLOWER.code
    assert topic.partition(2, TP).log.log_end_offset == 2
    await assert_still_serving(topic, [b"one", b"two"])


async def test_produce_to_an_unknown_partition(topic: Harness, autojump_clock: MockClock) -> None:
    result = await topic.produce(1, TopicPartition("nope", 0), batch("x"))
    assert result.error_code == errors.UNKNOWN_TOPIC_OR_PARTITION.code
    await assert_still_serving(topic, [b"one", b"two"])


@pytest.mark.parametrize("broker_config", [{"message.max.bytes": 200}])
async def test_batch_over_max_message_bytes_is_rejected(topic: Harness, autojump_clock: MockClock) -> None:
    result = await topic.produce(1, TP, batch("x" * 500))
    assert result.error_code == errors.MESSAGE_TOO_LARGE.code
    assert topic.partition(1, TP).log.log_end_offset == 2
    await assert_still_serving(topic, [b"one", b"two"])


async def test_corrupt_batch_is_rejected_and_nothing_of_the_request_is_appended(topic: Harness, autojump_clock: MockClock) -> None:
    good = batch("good")
    bad = dataclasses.replace(batch("bad"), crc=batch("bad").crc ^ 1)
    result = await topic.produce(1, TP, good, bad)
    assert result.error_code == errors.CORRUPT_MESSAGE.code
    assert topic.partition(1, TP).log.log_end_offset == 2
    await assert_still_serving(topic, [b"one", b"two"])


def _forged(payload_rows: object, record_count: int | None = None) -> RecordBatch:
    """A batch whose crc matches its (bad) payload, as a buggy or hostile client sends it."""
    return _claiming(payload=msgpack.packb(payload_rows),
                     record_count=record_count if record_count is not None else len(payload_rows))


def _claiming(**fields: Any) -> RecordBatch:
    """A batch with these header fields or payload, its crc computed again, as a buggy or hostile client sends it."""
    forged = dataclasses.replace(batch("x"), **fields)
    return dataclasses.replace(forged, crc=_checksum(forged.payload, forged.attributes, forged.record_count,
                                                     forged.first_timestamp, forged.max_timestamp, forged.producer_id,
                                                     forged.producer_epoch, forged.base_sequence))


@pytest.mark.parametrize("bad, code, message", [
    (lambda: dataclasses.replace(_forged([[0, None, b"v", []]]), payload=b"\xc1garbage"), "CORRUPT_MESSAGE", "crc"),
    (lambda: _forged({"not": "records"}), "CORRUPT_MESSAGE", "not a list of records"),
    (lambda: _forged([[0, None, b"a", []], [0, None, b"b", []], [0, None, b"c", []]], record_count=1),
     "INVALID_RECORD", "claims 1 records but holds 3"),
    (lambda: _forged([[0, None, 42, []]]), "INVALID_RECORD", "value of type int"),
    (lambda: _forged([[0, 7, b"v", []]]), "INVALID_RECORD", "key of type int"),
    # what only a broker writes, or kafkalite does not serve, in Kafka's words (LogValidator.validateBatch)
    (lambda: _claiming(attributes=0x20), "INVALID_RECORD", "Clients are not allowed to write control records"),
    (lambda: _claiming(producer_id=5, producer_epoch=0),
     "INVALID_RECORD", "Invalid sequence number -1 in record batch with producerId 5"),
    (lambda: _claiming(attributes=0x10, producer_id=9, producer_epoch=0, base_sequence=0),
     "INVALID_TXN_STATE", "kafkalite has no transactions"),
    (lambda: _claiming(attributes=0x08),
     "INVALID_TIMESTAMP", "Producer should not set timestamp type to LogAppendTime"),
    # a codec no reader could undo: served to Kafka clients, the records would not decompress
    (lambda: _claiming(attributes=0x01), "INVALID_RECORD", "a native record batch is never compressed"),
    (lambda: _claiming(attributes=0x06), "UNSUPPORTED_COMPRESSION_TYPE", "Unknown compression type id: 6"),
])
async def test_a_batch_whose_records_break_the_rules_is_refused_with_a_reason_and_nothing_appended(
        topic: Harness, autojump_clock: MockClock, bad: Any, code: str, message: str) -> None:
    """The crc alone let a batch of garbage, or one whose header lies about its records, be acknowledged and
    replicated; consumers then failed on it. The leader checks every record first (Kafka's LogValidator), and
    refuses a header claiming what only a broker writes (a transaction marker, the log append time)."""
    result = await topic.produce(1, TP, batch("good"), bad())
    assert (errors.for_code(result.error_code).name, message in (result.error_message or "")) == (code, True), \
        result.error_message
    assert [topic.partition(b, TP).log.log_end_offset for b in REPLICAS] == [2, 2, 2]
    await assert_still_serving(topic, [b"one", b"two"])


async def test_invalid_acks(topic: Harness, autojump_clock: MockClock) -> None:
    result = await topic.produce(1, TP, batch("x"), acks=2)
    assert result.error_code == errors.INVALID_REQUIRED_ACKS.code
    await assert_still_serving(topic, [b"one", b"two"])


async def test_unexpected_failure_is_unknown_server_error_and_the_broker_keeps_serving(topic: Harness, autojump_clock: MockClock) -> None:
    request = ProduceRequest(-1, 1000, [ProducePartitionData(TP.topic, TP.partition, ["not a batch"])])  # type: ignore[list-item]
    response = await topic.send(1, request, CLIENT)
    assert response.partitions[0].error_code == errors.UNKNOWN_SERVER_ERROR.code
    assert "AttributeError" in response.partitions[0].error_message
    await assert_still_serving(topic, [b"one", b"two"])


# -- fetch ------------------------------------------------------------------------------------------------------


async def test_consumer_fetch_past_the_log_end_is_out_of_range(topic: Harness, autojump_clock: MockClock) -> None:
    result = await topic.fetch(1, TP, 3)
    assert result.error_code == errors.OFFSET_OUT_OF_RANGE.code
    assert (await topic.fetch(1, TP, 2)).batches == []
    await assert_still_serving(topic, [b"one", b"two"])


async def test_consumer_never_sees_records_above_the_high_watermark(topic: Harness, autojump_clock: MockClock) -> None:
    topic.gates[3].pause()
    assert (await topic.produce(1, TP, batch("uncommitted"), acks=1)).error_code == 0
    leader = topic.partition(1, TP)
    assert leader.log.log_end_offset == 3 and leader.high_watermark == 2
    assert await topic.consume(1, TP) == [b"one", b"two"]
    latest = await topic.send(1, ListOffsetsRequest(-1, [ListOffsetsPartition(TP.topic, 0, LATEST_TIMESTAMP)]), CLIENT)
    assert latest.partitions[0].offset == 2
    topic.gates[3].resume()
    await topic.wait_until(lambda: leader.high_watermark == 3)
    assert await topic.consume(1, TP) == [b"one", b"two", b"uncommitted"]


async def test_consumer_fetch_from_a_follower_is_not_leader(topic: Harness, autojump_clock: MockClock) -> None:
    assert (await topic.fetch(2, TP, 0)).error_code == errors.NOT_LEADER_OR_FOLLOWER.code


async def test_fetch_with_min_bytes_waits_for_data_then_returns_it(topic: Harness, autojump_clock: MockClock) -> None:
    results = []

    async def fetch() -> None:
        results.append((await topic.fetch(1, TP, 2, max_wait_ms=10_000, min_bytes=1), trio.current_time()))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(fetch)
        await trio.sleep(1)
        assert not results
        produced_at = trio.current_time()
        await committed(topic, "three")
    result, answered_at = results[0]
    assert result.error_code == 0 and [r.value for b in result.batches for r in b.records()] == [b"three"]
    assert answered_at - produced_at < 1


async def test_fetch_with_min_bytes_returns_empty_at_max_wait(topic: Harness, autojump_clock: MockClock) -> None:
    started = trio.current_time()
    result = await topic.fetch(1, TP, 2, max_wait_ms=700, min_bytes=1)
    assert result.error_code == 0 and result.batches == []
    assert trio.current_time() - started == pytest.approx(0.7)


async def test_fetch_with_a_fenced_or_unknown_leader_epoch(topic: Harness, autojump_clock: MockClock) -> None:
    for epoch, error in ((-1, errors.NONE), (0, errors.NONE), (1, errors.UNKNOWN_LEADER_EPOCH)):
        response = await topic.send(1, FetchRequest(-1, 0, 0, [FetchPartition(TP.topic, 0, 0, current_leader_epoch=epoch)]),
                                    CLIENT)
        assert response.partitions[0].error_code == error.code
    await topic.elect(TP, 1, REPLICAS, REPLICAS)
    response = await topic.send(1, FetchRequest(-1, 0, 0, [FetchPartition(TP.topic, 0, 0, current_leader_epoch=0)]),
                                CLIENT)
    assert response.partitions[0].error_code == errors.FENCED_LEADER_EPOCH.code


# -- offsets ----------------------------------------------------------------------------------------------------


async def test_list_offsets_earliest_latest_and_by_timestamp(topic: Harness, autojump_clock: MockClock) -> None:
    assert (await topic.produce(1, TP, batch("t1", timestamp=1_000), batch("t2", timestamp=2_000))).error_code == 0

    async def list_offset(timestamp: int) -> tuple[int, int]:
        response = await topic.send(1, ListOffsetsRequest(-1, [ListOffsetsPartition(TP.topic, 0, timestamp)]),
                                    CLIENT)
        result = response.partitions[0]
        assert result.error_code == 0
        return result.offset, result.timestamp

    assert (await list_offset(EARLIEST_TIMESTAMP))[0] == 0
    assert (await list_offset(LATEST_TIMESTAMP))[0] == 4
    assert await list_offset(1_500) == (3, 2_000)
    assert await list_offset(10**13) == (-1, -1)


async def test_offsets_for_leader_epoch(topic: Harness, autojump_clock: MockClock) -> None:
    await topic.elect(TP, 1, REPLICAS, REPLICAS)  # epoch 1 starts at offset 2
    await committed(topic, "three")
    request = OffsetsForLeaderEpochRequest(2, [OffsetForLeaderPartition(TP.topic, 0, 0),
                                               OffsetForLeaderPartition(TP.topic, 0, 1)])
    response = await topic.send(1, request)
    assert [(p.error_code, p.leader_epoch, p.end_offset) for p in response.partitions] == [(0, 0, 2), (0, 1, 3)]
    on_follower = await topic.send(2, request)
    assert on_follower.partitions[0].error_code == errors.NOT_LEADER_OR_FOLLOWER.code


# -- metadata ---------------------------------------------------------------------------------------------------


async def test_metadata_is_answered_from_the_cache_by_any_broker(topic: Harness, autojump_clock: MockClock) -> None:
    other = TopicPartition("leaderless", 0)
    topic.create_topic_znodes(other, [2], {})
    topic.write_state(other, -1, [])
    await topic.update_metadata([TP, other])
    for broker_id in (1, 2, 3):
        response = await topic.send(broker_id, MetadataRequest(None), CLIENT)
        assert [b.node_id for b in response.brokers] == [1, 2, 3]
        by_name = {t.name: t for t in response.topics}
        assert by_name["orders"].error_code == 0
        assert [(p.partition, p.leader, p.replicas, p.isr) for p in by_name["orders"].partitions] == \
            [(0, 1, REPLICAS, REPLICAS)]
        assert by_name["leaderless"].partitions[0].error_code == errors.LEADER_NOT_AVAILABLE.code
    response = await topic.send(3, MetadataRequest(["orders", "missing"]), CLIENT)
    assert [(t.name, t.error_code) for t in response.topics] == \
        [("orders", 0), ("missing", errors.UNKNOWN_TOPIC_OR_PARTITION.code)]
    other_listener = await topic.transport.send(CLIENT, 1, MetadataRequest(None),
                                                RequestContext(CLIENT, listener="REPLICATION"))
    assert other_listener.brokers == []


# -- stop replica -----------------------------------------------------------------------------------------------


async def test_stop_replica_with_delete_removes_the_log(topic: Harness, autojump_clock: MockClock) -> None:
    request = StopReplicaRequest(0, topic.controller_epoch, -1, [StopReplicaPartition(TP.topic, 0, True)])
    response = await topic.send(3, request)
    assert response.error_code == 0 and response.partition_errors[0].error_code == 0
    broker = topic.brokers[3]
    assert broker.replica_manager.get_partition(TP) is None
    assert broker.log_manager.get_log(TP) is None
    assert broker.replica_manager.replica_fetcher_manager.fetcher_source_ids() == []


async def test_stop_replica_without_delete_stops_fetching_and_keeps_the_log(topic: Harness, autojump_clock: MockClock) -> None:
    request = StopReplicaRequest(0, topic.controller_epoch, -1, [StopReplicaPartition(TP.topic, 0, False)])
    assert (await topic.send(3, request)).error_code == 0
    broker = topic.brokers[3]
    assert broker.log_manager.get_log(TP) is not None
    assert broker.replica_manager.replica_fetcher_manager.fetch_state(TP) is None


# -- controller-bound requests ----------------------------------------------------------------------------------


class _ActiveController:
    """Stands in for the controller (written elsewhere): records what reached it."""

    is_active = True

    def __init__(self) -> None:
        self.seen: list[tuple[Any, RequestContext]] = []

    async def handle_request(self, request: Any, context: RequestContext) -> Response:
        self.seen.append((request, context))
        answer = error_response(request, errors.NONE.code)
        assert answer is not None
        return answer


async def test_controller_requests_without_a_controller_are_not_controller(harness: Harness, autojump_clock: MockClock) -> None:
    response = await harness.send(1, CreateTopicsRequest([CreatableTopic("t", 1, 1)]), CLIENT)
    assert response.topics[0].error_code == errors.NOT_CONTROLLER.code


async def test_controller_requests_are_forwarded_to_the_controller_broker(harness: Harness, autojump_clock: MockClock) -> None:
    controller = _ActiveController()
    harness.brokers[1].set_controller(controller)
    assert harness.zk.register_controller_and_increment_epoch(1, 0) is not None
    response = await harness.send(2, CreateTopicsRequest([CreatableTopic("t", 1, 1)]), CLIENT)
    assert response.topics[0].error_code == 0
    (request, context), = controller.seen
    assert isinstance(request, CreateTopicsRequest) and context.source == 2
    # A request another broker sent to a broker whose controller is not active is refused, not bounced on.
    bounced = await harness.send(3, CreateTopicsRequest([CreatableTopic("t", 1, 1)]), 2)  # type: ignore[arg-type]
    assert bounced.topics[0].error_code == errors.NOT_CONTROLLER.code


async def test_controlled_shutdown_without_a_controller_gives_up(harness: Harness, autojump_clock: MockClock) -> None:
    assert await harness.brokers[2].controlled_shutdown() is False


# -- fencing ----------------------------------------------------------------------------------------------------


async def test_stale_controller_epoch_changes_nothing(topic: Harness, autojump_clock: MockClock) -> None:
    topic.controller_epoch = 5
    await topic.update_metadata([TP])
    topic.controller_epoch = 4
    lai = topic.write_state(TP, 2, [2])
    request = topic.leader_and_isr([topic.partition_state(TP, lai, REPLICAS)])
    for broker_id in REPLICAS:
        assert (await topic.send(broker_id, request)).error_code == errors.STALE_CONTROLLER_EPOCH.code
    stop = StopReplicaRequest(0, 4, -1, [StopReplicaPartition(TP.topic, 0, True)])
    assert (await topic.send(1, stop)).error_code == errors.STALE_CONTROLLER_EPOCH.code
    metadata = UpdateMetadataRequest(0, 4, -1, [], [])
    assert (await topic.send(1, metadata)).error_code == errors.STALE_CONTROLLER_EPOCH.code
    assert topic.brokers[1].metadata_cache.get_alive_broker_ids() == [1, 2, 3]
    leader = topic.partition(1, TP)
    assert leader.is_leader and leader.leader_epoch == 0
    await assert_still_serving(topic, [b"one", b"two"])


async def test_stale_leader_epoch_is_fenced_per_partition(topic: Harness, autojump_clock: MockClock) -> None:
    other = TopicPartition("orders", 1)
    lai_other = topic.write_state(other, 1, [1])
    stale = topic.partition_state(TP, topic.zk.get_partition_state(TP).leader_and_isr, REPLICAS)
    fresh = topic.partition_state(other, lai_other, [1])
    response = await topic.send(1, topic.leader_and_isr([stale, fresh]))
    assert response.error_code == 0
    assert {(partition, code) for _, partition, code in response.partition_errors} == \
        {(0, errors.FENCED_LEADER_EPOCH.code), (1, 0)}
    assert topic.partition(1, other).is_leader
    assert topic.partition(1, TP).leader_epoch == 0
    await assert_still_serving(topic, [b"one", b"two"])


async def test_partition_not_assigned_here_is_unknown(topic: Harness, autojump_clock: MockClock) -> None:
    other = TopicPartition("orders", 2)
    lai = topic.write_state(other, 2, [2])
    response = await topic.send(1, topic.leader_and_isr([topic.partition_state(other, lai, [2])]))
    assert response.partition_errors == [("orders", 2, errors.UNKNOWN_TOPIC_OR_PARTITION.code)]
    assert topic.brokers[1].replica_manager.get_partition(other) is None


async def test_stale_broker_epoch_changes_nothing(topic: Harness, autojump_clock: MockClock) -> None:
    broker = topic.brokers[2]
    lai = topic.write_state(TP, 2, [2])
    request = topic.leader_and_isr([topic.partition_state(TP, lai, REPLICAS)], broker_epoch=broker.broker_epoch - 1)
    assert (await topic.send(2, request)).error_code == errors.STALE_BROKER_EPOCH.code
    assert not topic.partition(2, TP).is_leader and topic.partition(2, TP).leader_epoch == 0
    current = topic.leader_and_isr([topic.partition_state(TP, lai, REPLICAS)], broker_epoch=broker.broker_epoch)
    assert (await topic.send(2, current)).error_code == 0
    assert topic.partition(2, TP).is_leader


async def test_a_new_session_registers_again_with_a_new_broker_epoch(harness: Harness, autojump_clock: MockClock) -> None:
    broker = harness.brokers[2]
    old_epoch = broker.broker_epoch
    harness.service.expire(broker.zk.session.session_id)
    await harness.wait_until(lambda: broker.broker_epoch > old_epoch, timeout=30)
    registered = harness.zk.get_all_brokers()
    assert registered[2].epoch == broker.broker_epoch
    assert registered[2].endpoints == broker.endpoints
