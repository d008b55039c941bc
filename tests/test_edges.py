"""What reaches a broker is checked before it does anything: each request below used to be acknowledged, answered
UNKNOWN_SERVER_ERROR, or stall every broker in the process. Each gets Kafka's error code with a message that
names the problem, changes nothing, and leaves the cluster serving what it had acknowledged."""

from __future__ import annotations

import time
from typing import Any

import pytest
import trio

from kafkalite.cluster import Cluster
from kafkalite.common import errors
from kafkalite.client import Consumer, Producer, TopicPartition
from kafkalite.common.errors import InvalidRecordError, UnknownTopicOrPartitionError
from kafkalite.common.records import Record
from kafkalite.network.requests import (
    TOPIC_RESOURCE,
    AlterConfigsRequest,
    AlterConfigsResource,
    ConfigResource,
    CreatableTopic,
    CreatePartitionsRequest,
    CreatePartitionsTopic,
    CreateTopicsRequest,
    DeleteTopicsRequest,
    DescribeConfigsRequest,
    InitProducerIdRequest,
    MetadataRequest,
    ProducePartitionData,
    ProduceRequest,
    Request,
    RequestContext,
)
from kafkalite.common.records import RecordBatch
from tests.conftest import SchedulingRounds

CONFIG = {"zookeeper.session.timeout.ms": 6000, "auto.leader.rebalance.enable": False}


async def send(cluster: Cluster, request: Request) -> Any:
    return await cluster.transport.send("client", cluster.controller_id, request, RequestContext(source="client"))


async def assert_still_serving(cluster: Cluster, acknowledged: list[bytes]) -> None:
    await cluster.produce("t", 0, [Record(None, b"after")])
    assert [r.value for _, r in await cluster.fetch_all("t", 0)] == [*acknowledged, b"after"]


@pytest.fixture
async def cluster(autojump_clock: Any) -> Any:
    async with Cluster(brokers=3, config=CONFIG, seed=1) as cluster:
        await cluster.create_topic("t", partitions=1, replication_factor=3)
        await cluster.produce("t", 0, [Record(None, b"acked")])
        yield cluster


async def test_a_record_that_is_not_bytes_is_refused_and_nothing_of_its_batch_appended(cluster: Cluster) -> None:
    with pytest.raises(InvalidRecordError, match="record 1 has a value of type int"):
        await cluster.produce("t", 0, [Record(None, b"fine"), Record(None, 42)])  # type: ignore[arg-type]
    with pytest.raises(InvalidRecordError, match="record 0 has a key of type str"):
        await cluster.produce("t", 0, [Record("k", b"v")])  # type: ignore[arg-type]
    assert cluster.high_watermark("t", 0) == 1
    await assert_still_serving(cluster, [b"acked"])


async def test_creating_more_partitions_than_one_request_may_is_refused_at_once(cluster: Cluster) -> None:
    started = time.perf_counter()
    for validate_only in (True, False):
        response = await send(cluster, CreateTopicsRequest([CreatableTopic("huge", 10_000_000, 1)],
                                                           validate_only=validate_only))
        result = response.topics[0]
        assert result.error_code == errors.INVALID_PARTITIONS.code
        assert "max.partitions.per.request" in result.error_message and "100000" in result.error_message
    response = await send(cluster, CreatePartitionsRequest([CreatePartitionsTopic("t", 10_000_000)]))
    assert response.results[0].error_code == errors.INVALID_PARTITIONS.code
    assert time.perf_counter() - started < 2  # no plan of ten million replicas was computed
    assert "huge" not in cluster.topics()
    await cluster.create_topic("fine", partitions=2, replication_factor=3)  # the controller is unharmed
    await assert_still_serving(cluster, [b"acked"])


async def test_a_request_naming_more_topics_than_one_request_may_is_refused_before_any_work(
        cluster: Cluster) -> None:
    names = [f"t{i}" for i in range(100_001)]
    started = time.perf_counter()
    response = await send(cluster, DeleteTopicsRequest(names))
    assert {r.error_code for r in response.responses} == {errors.INVALID_REQUEST.code}
    assert "at most 100000 (max.topics.per.request)" in response.responses[0].error_message
    assert time.perf_counter() - started < 5
    assert "t" in cluster.topics()
    await assert_still_serving(cluster, [b"acked"])


async def test_a_big_metadata_request_is_answered_without_holding_up_the_other_brokers(cluster: Cluster) -> None:
    names = [f"nope{i}" for i in range(20_000)]
    other_work = SchedulingRounds()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(other_work.run)
        response = await send(cluster, MetadataRequest(names))
        nursery.cancel_scope.cancel()
    assert len(response.topics) == 20_000
    assert {t.error_code for t in response.topics} == {errors.UNKNOWN_TOPIC_OR_PARTITION.code}
    assert other_work.count >= 10  # the broker let others run while it worked through the names


@pytest.mark.parametrize("request_", [
    ProduceRequest(-1, -5, [ProducePartitionData("t", 0, [RecordBatch.from_records([Record(None, b"x")])])]),
    CreateTopicsRequest([CreatableTopic("neg", 1, 1)], timeout_ms=-1),
    DeleteTopicsRequest(["t"], timeout_ms=-1),
    CreatePartitionsRequest([CreatePartitionsTopic("t", 2)], timeout_ms=-10),
], ids=lambda request: type(request).__name__)
async def test_a_negative_timeout_is_an_invalid_request_and_changes_nothing(cluster: Cluster,
                                                                            request_: Request) -> None:
    response = await send(cluster, request_)
    entries = getattr(response, "partitions", None) or getattr(response, "topics", None) or \
        getattr(response, "responses", None) or response.results
    assert {e.error_code for e in entries} == {errors.INVALID_REQUEST.code}
    assert "timeout_ms" in entries[0].error_message
    assert sorted(cluster.topics()) == ["t"] and len(await cluster.describe_topic("t")) == 1
    await assert_still_serving(cluster, [b"acked"])


@pytest.mark.parametrize("name", ["", "..", ".", "a/b"])
async def test_config_requests_for_impossible_topic_names_are_invalid_topic(cluster: Cluster, name: str) -> None:
    described = await send(cluster, DescribeConfigsRequest([ConfigResource(TOPIC_RESOURCE, name)]))
    altered = await send(cluster, AlterConfigsRequest([AlterConfigsResource(TOPIC_RESOURCE, name,
                                                                            {"retention.ms": "1000"})]))
    for result in (described.results[0], altered.results[0]):
        assert result.error_code == errors.INVALID_TOPIC_EXCEPTION.code, result
    await assert_still_serving(cluster, [b"acked"])


async def test_init_producer_id_checks_what_it_is_handed(cluster: Cluster) -> None:
    fresh = await send(cluster, InitProducerIdRequest())
    assert fresh.error_code == errors.NONE.code and fresh.producer_epoch == 0
    bumped = await send(cluster, InitProducerIdRequest(producer_id=fresh.producer_id, producer_epoch=0))
    assert (bumped.error_code, bumped.producer_id, bumped.producer_epoch) == (errors.NONE.code, fresh.producer_id, 1)
    for producer_id, epoch in ((fresh.producer_id, 40_000), (fresh.producer_id, -2), (-1, 3), (1 << 64, 0)):
        refused = await send(cluster, InitProducerIdRequest(producer_id=producer_id, producer_epoch=epoch))
        assert refused.error_code == errors.INVALID_REQUEST.code, (producer_id, epoch)
    unknown = await send(cluster, InitProducerIdRequest(producer_id=10**12, producer_epoch=0))
    assert unknown.error_code == errors.UNKNOWN_PRODUCER_ID.code
    exhausted = await send(cluster, InitProducerIdRequest(producer_id=fresh.producer_id, producer_epoch=32767))
    assert exhausted.error_code == errors.NONE.code and exhausted.producer_epoch == 0
    assert exhausted.producer_id != fresh.producer_id


async def test_a_retried_batch_on_a_log_append_time_topic_is_told_the_time_it_was_appended(cluster: Cluster) -> None:
    """As Kafka's: a duplicate answers with the append time stored with it, not the time of the retry, which the
    client would take for the records' timestamp and which no consumer ever reads."""
    await cluster.create_topic("lat", 1, 3, {"message.timestamp.type": "LogAppendTime"})
    producer = await send(cluster, InitProducerIdRequest())
    batch = RecordBatch.from_records([Record(None, b"once")], producer_id=producer.producer_id,
                                     producer_epoch=producer.producer_epoch, base_sequence=0)
    request = ProduceRequest(-1, 5000, [ProducePartitionData("lat", 0, [batch])])

    async def produce() -> Any:
        leader = cluster.leader_for("lat", 0)
        response = await cluster.transport.send("client", leader, request, RequestContext(source="client"))
        return response.partitions[0]

    first = await produce()
    await trio.sleep(2)
    retried = await produce()
    assert (retried.error_code, retried.base_offset) == (errors.NONE.code, first.base_offset) == (errors.NONE.code, 0)
    assert retried.log_append_time == first.log_append_time > 0
    [(_, record)] = await cluster.fetch_all("lat", 0)
    assert record.timestamp == first.log_append_time


async def test_metadata_for_an_unknown_topic_creates_it_when_allowed(cluster: Cluster) -> None:
    first = await send(cluster, MetadataRequest(["auto"], allow_auto_topic_creation=True))
    assert first.topics[0].error_code == errors.LEADER_NOT_AVAILABLE.code
    with trio.fail_after(10):  # a client asks again until the topic is online
        while (await send(cluster, MetadataRequest(["auto"], allow_auto_topic_creation=True))
               ).topics[0].error_code != errors.NONE.code:
            await trio.sleep(0.1)
    described = await cluster.describe_topic("auto")
    assert [(d.partition, len(d.replicas)) for d in described] == [(0, 1)]  # num.partitions, replication factor
    untouched = await send(cluster, MetadataRequest(["not-asked"]))
    assert untouched.topics[0].error_code == errors.UNKNOWN_TOPIC_OR_PARTITION.code
    assert "not-asked" not in cluster.topics()
    bad = await send(cluster, MetadataRequest([".."], allow_auto_topic_creation=True))
    assert bad.topics[0].error_code == errors.INVALID_TOPIC_EXCEPTION.code


async def test_auto_topic_creation_can_be_turned_off(autojump_clock: Any) -> None:
    async with Cluster(brokers=1, config={**CONFIG, "auto.create.topics.enable": False}) as cluster:
        response = await send(cluster, MetadataRequest(["auto"], allow_auto_topic_creation=True))
        assert response.topics[0].error_code == errors.UNKNOWN_TOPIC_OR_PARTITION.code
        await trio.sleep(1)
        assert cluster.topics() == []


async def test_auto_creation_that_cannot_succeed_says_why(autojump_clock: Any) -> None:
    async with Cluster(brokers=1, config={**CONFIG, "default.replication.factor": 3}) as cluster:
        response = await send(cluster, MetadataRequest(["auto"], allow_auto_topic_creation=True))
        assert response.topics[0].error_code == errors.INVALID_REPLICATION_FACTOR.code
        assert "larger than available brokers: 1" in response.topics[0].error_message


async def test_a_producer_sending_to_a_new_topic_creates_it_and_a_consumer_reads_it(autojump_clock: Any) -> None:
    async with Cluster(brokers=3, config={**CONFIG, "num.partitions": 2}) as cluster:
        async with Producer(cluster) as producer:
            metadata = await (await producer.send("fresh", b"v0", partition=1))
        assert (metadata.topic, metadata.partition, metadata.offset) == ("fresh", 1, 0)
        assert len(await cluster.describe_topic("fresh")) == 2
        async with Consumer(cluster, {"auto.offset.reset": "earliest"}) as consumer:
            consumer.assign([TopicPartition("fresh", 1)])
            with trio.fail_after(30):
                records = []
                while not records:
                    records = await consumer.poll(1)
        assert [r.value for r in records] == [b"v0"]


async def test_with_auto_creation_off_a_producer_gets_unknown_topic(autojump_clock: Any) -> None:
    async with Cluster(brokers=1, config={**CONFIG, "auto.create.topics.enable": False}) as cluster:
        async with Producer(cluster, {"max.block.ms": 2000}) as producer:
            with pytest.raises(UnknownTopicOrPartitionError, match="fresh"):
                await producer.send("fresh", b"v0")
        assert cluster.topics() == []
