"""Bad input on a broker's KAFKA listener, for every API: answered where the API has an error code, cut off where
the stream cannot be trusted, and the broker keeps serving with everything acknowledged intact.

These run on the real clock: the kernel moves the bytes. Nothing sleeps; timeouts are safety nets.
"""

from __future__ import annotations

import base64
import random
import struct
import uuid
from typing import Any

import pytest
import trio

from kafkalite.cluster import Cluster
from kafkalite.common import errors
from kafkalite.common.consumer_protocol import Assignment, Subscription, encode_assignment, encode_subscription
from kafkalite.common.errors import CorruptMessageError
from kafkalite.common.kafka_records import crc32c
from kafkalite.common.records import Record, RecordBatch
from kafkalite.common.types import TopicPartition
from kafkalite.network import kafka, requests as native
from kafkalite.network.codec import FrameDecoder, RequestHeader, decode_response, encode_request
from kafkalite.network.kafka.apis import APIS
from kafkalite.network.kafka.protocol import (
    AlterPartitionReassignmentsRequest, ApiVersionsResponse, DeleteRecordsRequest, DescribeConfigsRequest,
    ElectLeadersRequest, FetchRequest, IncrementalAlterConfigsRequest, JoinGroupRequest, ListOffsetsRequest, Message,
    MetadataRequest, MetadataResponse, OffsetCommitRequest, OffsetFetchRequest, OffsetForLeaderEpochRequest,
    ProduceRequest, ProduceResponse, SyncGroupRequest, entry,
)

SAFETY_TIMEOUT = 20
TOPIC = "orders"


PRODUCE = 7  # what produce_frame sends: the newest version before the flexible ones, so `with_version` can relabel it


def request_frame(api_key: int, version: int | None = None, **fields: object) -> bytes:
    """A well-formed request frame for `api_key` (its fields' defaults unless given), length prefix included."""
    api = APIS[api_key]
    request = api.request(version=api.versions[1] if version is None else version, **fields)
    request.with_header(correlation_id=7, client_id="bad-input")
    return bytes(request.encode(header=True, framed=True))


def produce_frame(batch: bytes, acks: int = -1, version: int = PRODUCE) -> bytes:
    return request_frame(0, version, acks=acks, timeout_ms=5000, transactional_id=None, topic_data=[
        entry(ProduceRequest, "TopicProduceData", name=TOPIC, partition_data=[
            entry(ProduceRequest, "TopicProduceData.PartitionProduceData", index=0, records=batch)])])


def kafka_batch(value: bytes) -> bytes:
    return RecordBatch.from_records([Record(b"k", value, 1_700_000_000_000)]).to_kafka_bytes()


def truncated(frame: bytes) -> bytes:
    """The frame with its last body byte cut off and its length prefix saying so: a body too short for its
    schema."""
    body = frame[4:-1]
    return struct.pack(">i", len(body)) + body


def bad_crc(frame_bytes: bytes) -> bytes:
    data = bytearray(frame_bytes)
    data[-1] ^= 0xFF  # the last byte of the record batch, inside what the CRC covers
    return bytes(data)


def with_version(frame: bytes, version: int) -> bytes:
    return frame[:6] + struct.pack(">h", version) + frame[8:]


CLOSED = None
BAD_INPUTS: dict[str, tuple[bytes, int | None]] = {
    # kind: (bytes sent, error code answered with or CLOSED)
    **{f"truncated {api.request.name}": (truncated(request_frame(key)), CLOSED) for key, api in APIS.items()},
    **{f"unsupported version of {api.request.name}": (with_version(request_frame(key), api.versions[1] + 1), CLOSED)
       for key, api in APIS.items() if key != 18},
    "unsupported version of ApiVersions": (with_version(request_frame(18), 99), errors.UNSUPPORTED_VERSION.code),
    "unknown api key": (struct.pack(">ihhih", 10, 9999, 0, 7, -1), CLOSED),
    "frame too short for a header": (struct.pack(">i", 3) + b"\x00\x00\x00", CLOSED),
    "oversized frame": (struct.pack(">i", 200 * 1024 * 1024), CLOSED),
    "half a frame, then gone": (struct.pack(">i", 1000) + b"\x00" * 10, CLOSED),
    "random bytes": (random.Random(15).randbytes(4096), CLOSED),
    "bad crc": (bad_crc(produce_frame(kafka_batch(b"corrupt"))), errors.CORRUPT_MESSAGE.code),
    "not a record batch": (produce_frame(b"\x00" * 20), errors.CORRUPT_MESSAGE.code),
    "a batch the producer marked as stamped by the leader": (produce_frame(RecordBatch.from_records(
        [Record(b"k", b"stamped", 1_700_000_000_000)]).with_log_append_time(1_700_000_000_000).to_kafka_bytes()),
        errors.INVALID_TIMESTAMP.code),
    "a partition without a record batch": (produce_frame(b""), errors.INVALID_RECORD.code),
    "two record batches for one partition": (produce_frame(kafka_batch(b"one") + kafka_batch(b"two")),
                                             errors.INVALID_RECORD.code),
    "a codec Kafka has no number for": (produce_frame(RecordBatch.from_records(
        [Record(b"k", b"codec 5", 1_700_000_000_000)], attributes=0x05).to_kafka_bytes()),
        errors.UNSUPPORTED_COMPRESSION_TYPE.code),
    "a transaction marker from a client": (produce_frame(RecordBatch.from_records(
        [Record(b"\x00\x00\x00\x00", b"\x00\x00\x00\x00\x00\x00", 1_700_000_000_000)], attributes=0x20
    ).to_kafka_bytes()), errors.INVALID_RECORD.code),
}


async def exchange(port: int, data: bytes, answers: int | None = 1) -> list[bytes]:
    """Send bytes, then read response frames (without their length prefix): `answers` of them, or with None
    until the broker closes the connection."""
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    decoder = FrameDecoder()
    frames: list[bytes] = []
    async with stream:
        await stream.send_all(data)
        if data.startswith(struct.pack(">i", 1000)):
            return frames  # the client leaves mid-request
        while answers is None or len(frames) < answers:
            chunk = await stream.receive_some(65536)
            if not chunk:
                return frames
            decoder.feed(chunk)
            while (found := decoder.next_frame()) is not None:
                frames.append(found)
    return frames


def listener_port(cluster: Cluster, broker_id: int, listener: str) -> int:
    return next(ep.port for ep in cluster.broker(broker_id).endpoints if ep.listener == listener)


def kafka_port(cluster: Cluster, broker_id: int) -> int:
    return listener_port(cluster, broker_id, "KAFKA")


def native_port(cluster: Cluster, broker_id: int) -> int:
    return listener_port(cluster, broker_id, "NATIVE")


def native_metadata_frame(*topics: str) -> bytes:
    return encode_request(RequestHeader(native.ApiKey.METADATA, 0, 9, "native"), native.MetadataRequest(list(topics)))


@pytest.mark.parametrize("kind", sorted(BAD_INPUTS))
async def test_bad_input_is_answered_or_cut_off_and_the_broker_keeps_serving(kind: str) -> None:
    data, expected = BAD_INPUTS[kind]
    with trio.fail_after(SAFETY_TIMEOUT):
        async with Cluster(brokers=3, seed=1) as cluster:
            await cluster.create_topic(TOPIC, partitions=1, replication_factor=3)
            leader = cluster.leader_for(TOPIC, 0)
            port = kafka_port(cluster, leader)
            [acked] = await exchange(port, produce_frame(kafka_batch(b"before")))
            assert ProduceResponse.decode(acked[4:], version=7).responses[0].partition_responses[0].error_code == 0

            answers = await exchange(port, data, None if expected is CLOSED else 1)
            if expected is CLOSED:
                assert answers == []
            elif kind.startswith("unsupported version"):
                (answer,) = answers
                response = ApiVersionsResponse.decode(answer[4:], version=0)
                assert response.error_code == expected and {a.api_key for a in response.api_keys} == set(APIS)
            else:
                (answer,) = answers
                partition = ProduceResponse.decode(answer[4:], version=7).responses[0].partition_responses[0]
                assert partition.error_code == expected

            [answer] = await exchange(port, request_frame(3, version=5, topics=None))
            metadata = MetadataResponse.decode(answer[4:], version=5)
            assert metadata.controller_id == cluster.controller_id
            assert {b.port for b in metadata.brokers} == {kafka_port(cluster, b) for b in (1, 2, 3)}
            assert [r.value for _, r in await cluster.fetch(TOPIC, 0, 0)] == [b"before"]


async def test_each_port_serves_both_protocols_and_sends_each_client_to_its_own_listeners_ports() -> None:
    """A Kafka client handed the NATIVE ports (`cluster.bootstrap_servers`), or kafkalite's client handed the KAFKA
    ports (the Spark connector's option is `kafka.bootstrap.servers`), had its connections closed until it gave
    up. A request's first byte says its protocol, so every port answers both, and Metadata names the ports
    of the listener that speaks the client's protocol, where its next connections go. Garbage that begins like the
    other protocol is cut off by that protocol's wire, and the broker keeps serving."""
    with trio.fail_after(SAFETY_TIMEOUT):
        async with Cluster(brokers=3, seed=3) as cluster:
            await cluster.create_topic(TOPIC, partitions=1, replication_factor=3)
            leader = cluster.leader_for(TOPIC, 0)
            [acked] = await exchange(native_port(cluster, leader), produce_frame(kafka_batch(b"at a native port")))
            [produced] = ProduceResponse.decode(acked[4:], version=7).responses[0].partition_responses
            assert (produced.error_code, produced.base_offset) == (0, 0)
            for broker in (1, 2, 3):
                [answer] = await exchange(native_port(cluster, broker), request_frame(3, version=5, topics=None))
                metadata = MetadataResponse.decode(answer[4:], version=5)
                assert sorted((b.node_id, b.port) for b in metadata.brokers) == [
                    (b, kafka_port(cluster, b)) for b in (1, 2, 3)]
                [answer] = await exchange(kafka_port(cluster, broker), native_metadata_frame(TOPIC))
                correlation_id, answered = decode_response(answer, native.MetadataResponse)
                assert correlation_id == 9
                assert sorted((b.node_id, b.port) for b in answered.brokers) == [
                    (b, native_port(cluster, b)) for b in (1, 2, 3)]
                assert [(t.name, [p.leader for p in t.partitions]) for t in answered.topics] == [(TOPIC, [leader])]
            assert await exchange(kafka_port(cluster, leader), struct.pack(">I", 4) + b"\x95\xc1\xc1\xc1", None) == []
            assert await exchange(native_port(cluster, leader), struct.pack(">I", 3) + b"\x00\x03\x00", None) == []
            assert [r.value for _, r in await cluster.fetch(TOPIC, 0, 0)] == [b"at a native port"]


def test_every_kafka_request_begins_with_the_byte_that_tells_it_from_a_native_request() -> None:
    assert {request_frame(key)[4] for key in APIS} == {kafka.REQUEST_START}


@pytest.mark.parametrize("listener", ["NATIVE", "KAFKA"])
async def test_a_request_in_the_protocol_of_a_listener_the_broker_lacks_is_refused_saying_so(
        listener: str, caplog: pytest.LogCaptureFixture) -> None:
    """A broker with one listener: a request in the other's protocol closes the connection with a log line naming
    the missing listener, and the port's own protocol is served on."""
    other = {"NATIVE": "KAFKA", "KAFKA": "NATIVE"}[listener]
    frames = {"KAFKA": request_frame(18, version=3), "NATIVE": native_metadata_frame()}
    with trio.fail_after(SAFETY_TIMEOUT):
        async with Cluster(brokers=1, config={"listeners": f"{listener}://127.0.0.1:0"}) as cluster:
            port = listener_port(cluster, 1, listener)
            assert await exchange(port, frames[other], None) == []
            assert f"{listener} listener: closing connection from 127.0.0.1:" in caplog.text
            assert f"the request is in the {other} listener's protocol, and this broker has no {other} listener" \
                in caplog.text
            [answer] = await exchange(port, frames[listener])
            if listener == "NATIVE":
                assert [b.port for b in decode_response(answer, native.MetadataResponse)[1].brokers] == [port]
            else:
                assert ApiVersionsResponse.decode(answer[4:], version=3).error_code == 0


async def test_bytes_after_a_request_body_are_ignored_as_by_kafka() -> None:
    """Kafka's RequestContext.parseRequest reads the body and ignores what follows it in the frame, and a client
    depends on that: librdkafka's all-topics Metadata v9 (confluent-kafka's `list_topics()`) writes its null topic
    array as four zero bytes where a one-byte varint belongs. These are its bytes, as it sent them."""
    librdkafka = (struct.pack(">hhih", 3, 9, 7, 7) + b"rdkafka" + b"\x00"  # header v2: no tagged fields
                  + b"\x00\x00\x00\x00" + b"\x01\x00\x00\x00")
    padded = request_frame(3, version=5, topics=None)[4:] + b"\x00" * 80
    with trio.fail_after(SAFETY_TIMEOUT):
        async with Cluster(brokers=3, seed=1) as cluster:
            await cluster.create_topic(TOPIC, partitions=2, replication_factor=3)
            await cluster.create_topic("other", partitions=1, replication_factor=1)
            port = kafka_port(cluster, 1)
            for frame, version, header in [(librdkafka, 9, 5), (padded, 5, 4)]:  # flexible: header tagged fields
                [answer] = await exchange(port, struct.pack(">i", len(frame)) + frame)
                metadata = MetadataResponse.decode(answer[header:], version=version)
                assert {(t.name, len(t.partitions)) for t in metadata.topics} == {(TOPIC, 2), ("other", 1)}
                assert metadata.controller_id == cluster.controller_id


async def test_acks_zero_gets_no_response_and_responses_keep_request_order() -> None:
    with trio.fail_after(SAFETY_TIMEOUT):
        async with Cluster(brokers=3, seed=2) as cluster:
            await cluster.create_topic(TOPIC, partitions=1, replication_factor=3)
            port = kafka_port(cluster, cluster.leader_for(TOPIC, 0))
            pipelined = (produce_frame(kafka_batch(b"quiet"), acks=0) + request_frame(18, version=0)
                         + produce_frame(kafka_batch(b"loud"), acks=1) + request_frame(3, version=1, topics=None))
            versions, produced, metadata = await exchange(port, pipelined, 3)
            assert ApiVersionsResponse.decode(versions[4:], version=0).error_code == 0
            assert ProduceResponse.decode(produced[4:], version=7).responses[0].partition_responses[0].base_offset == 1
            assert MetadataResponse.decode(metadata[4:], version=1).topics[0].name == TOPIC
            await cluster.wait_until(lambda: cluster.leader_for(TOPIC, 0) >= 0)
            found = []
            while len(found) < 2:
                found = await cluster.fetch(TOPIC, 0, 0)
                await trio.sleep(0.01)
            assert [r.value for _, r in found] == [b"quiet", b"loud"]


def zstd_batch(value: bytes) -> bytes:
    """A batch compressed with zstd, as kafka-python's producer builds it (the value must compress, or it stays
    uncompressed)."""
    from kafka.record.default_records import DefaultRecordBatchBuilder

    builder = DefaultRecordBatchBuilder(magic=2, compression_type=4, is_transactional=False, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    builder.append(0, timestamp=1_700_000_000_000, key=None, value=value, headers=[])
    built = bytes(builder.build())
    assert RecordBatch.from_kafka_bytes(built)[0].attributes & 0x07 == 4
    return built


async def test_zstd_is_refused_below_produce_version_7_as_by_kafka() -> None:
    """Kafka's ProduceRequest.validateRecords: a client must speak Produce v7 to send zstd (KIP-110)."""
    with trio.fail_after(SAFETY_TIMEOUT):
        async with Cluster(brokers=3, seed=3) as cluster:
            await cluster.create_topic(TOPIC, partitions=1, replication_factor=3)
            port = kafka_port(cluster, cluster.leader_for(TOPIC, 0))
            for version, expected in ((3, errors.UNSUPPORTED_COMPRESSION_TYPE.code), (7, errors.NONE.code)):
                [answer] = await exchange(port, with_version(produce_frame(zstd_batch(b"z" * 1000)), version))
                partition = ProduceResponse.decode(answer[4:], version=version).responses[0].partition_responses[0]
                assert (version, partition.error_code) == (version, expected)
            assert [r.value for _, r in await cluster.fetch(TOPIC, 0, 0)] == [b"z" * 1000]


async def test_a_batch_in_a_pre_0_11_format_is_an_invalid_record_as_for_kafka() -> None:
    """Kafka's ProduceRequest.validateRecords takes only v2 batches from Produce v3 on: a magic 1 message set (as
    kafka-python's legacy builder makes it) is INVALID_RECORD, in Kafka's words, and the broker goes on serving."""
    from kafka.record.legacy_records import LegacyRecordBatchBuilder

    legacy = LegacyRecordBatchBuilder(magic=1, compression_type=0, batch_size=1 << 20)
    legacy.append(0, timestamp=1_700_000_000_000, key=None, value=b"old")
    with trio.fail_after(SAFETY_TIMEOUT):
        async with Cluster(brokers=3, seed=3) as cluster:
            await cluster.create_topic(TOPIC, partitions=1, replication_factor=3)
            port = kafka_port(cluster, cluster.leader_for(TOPIC, 0))
            [refused, taken] = await exchange(port, produce_frame(bytes(legacy.build()), version=8)
                                              + produce_frame(kafka_batch(b"new")), 2)
            partition = ProduceResponse.decode(refused[4:], version=8).responses[0].partition_responses[0]
            assert (partition.error_code, partition.error_message) == (  # messages came with version 8
                errors.INVALID_RECORD.code,
                "Produce requests with version 8 are only allowed to contain record batches with magic version 2")
            assert ProduceResponse.decode(taken[4:], version=7).responses[0].partition_responses[0].error_code == 0
            assert [r.value for _, r in await cluster.fetch(TOPIC, 0, 0)] == [b"new"]


async def test_an_acks_zero_produce_that_fails_closes_the_connection_as_kafka_does() -> None:
    """A producer with acks=0 hears nothing back; Kafka closes the connection when its produce fails, which is how
    the producer learns to refresh its metadata and find a moved leader. The requests pipelined behind it are not
    answered; a successful acks=0 produce leaves the connection open (the test above)."""
    with trio.fail_after(SAFETY_TIMEOUT):
        async with Cluster(brokers=3, seed=2) as cluster:
            await cluster.create_topic(TOPIC, partitions=1, replication_factor=3)
            leader = cluster.leader_for(TOPIC, 0)
            follower = next(b for b in (1, 2, 3) if b != leader)
            pipelined = produce_frame(kafka_batch(b"lost"), acks=0) + request_frame(18, version=0)
            assert await exchange(kafka_port(cluster, follower), pipelined, None) == []
            [answer] = await exchange(kafka_port(cluster, follower), request_frame(18, version=0))
            assert ApiVersionsResponse.decode(answer[4:], version=0).error_code == 0
            assert await cluster.fetch(TOPIC, 0, 0) == []


# -- consumer groups: errors as Kafka returns them ------------------------------------------------------------------

GROUP = "wire-group"


async def call(port: int, api_key: int, version: int, **fields: object) -> Message:
    """One request to the broker at `port` and its response, past the response header: the correlation id, and
    for a flexible version (header v1) an empty set of tagged fields, one byte."""
    [answer] = await exchange(port, request_frame(api_key, version, **fields))
    header = 5 if APIS[api_key].request.flexible_version_q(version) else 4
    return APIS[api_key].response.decode(answer[header:], version=version)


def join(member_id: str) -> dict[str, object]:
    return dict(group_id=GROUP, session_timeout_ms=10000, rebalance_timeout_ms=10000, member_id=member_id,
                group_instance_id=None, protocol_type="consumer", protocols=[
                    entry(JoinGroupRequest, "JoinGroupRequestProtocol", name="range",
                          metadata=encode_subscription(Subscription((TOPIC,))))])


def commit(generation: int, member_id: str, offset: int) -> dict[str, object]:
    return dict(group_id=GROUP, generation_id_or_member_epoch=generation, member_id=member_id, retention_time_ms=-1,
                topics=[entry(OffsetCommitRequest, "OffsetCommitRequestTopic", name=TOPIC, partitions=[
                    entry(OffsetCommitRequest, "OffsetCommitRequestTopic.OffsetCommitRequestPartition",
                          partition_index=0, committed_offset=offset, committed_metadata="")])])


FETCH_PARTITION_0 = dict(group_id=GROUP, topics=[
    entry(OffsetFetchRequest, "OffsetFetchRequestTopic", name=TOPIC, partition_indexes=[0])])


async def test_the_versions_kafka_python_sends_when_pinned_to_a_kafka_2_release() -> None:
    """kafka-python with api_version pinned sends its release's versions without asking: a JoinGroup below v4
    joins at once under the id the answer gives (no MEMBER_ID_REQUIRED, which those clients do not know), SyncGroup
    v0, InitProducerId v3 with the producer's id and epoch bumps the epoch (KIP-360), and Produce v8-9 (flexible)
    answer with the error message."""
    with trio.fail_after(SAFETY_TIMEOUT):
        async with Cluster(brokers=3, seed=3) as cluster:
            await cluster.create_topic(TOPIC, partitions=1, replication_factor=3)
            port = (await call(kafka_port(cluster, 1), 10, 2, key=GROUP, key_type=0)).port
            joined = await call(port, 11, 2, **join(""))
            assert (joined.error_code, joined.generation_id, joined.leader) == (0, 1, joined.member_id)
            assert joined.member_id and len(joined.members) == 1
            assignment = encode_assignment(Assignment((TopicPartition(TOPIC, 0),)))
            synced = await call(port, 14, 0, group_id=GROUP, generation_id=1, member_id=joined.member_id,
                                assignments=[entry(SyncGroupRequest, "SyncGroupRequestAssignment",
                                                   member_id=joined.member_id, assignment=assignment)])
            assert (synced.error_code, synced.assignment) == (0, assignment)

            leader = kafka_port(cluster, cluster.leader_for(TOPIC, 0))
            first = await call(leader, 22, 2, transactional_id=None, transaction_timeout_ms=60000)
            assert first.error_code == 0 and first.producer_epoch == 0
            bumped = await call(leader, 22, 3, transactional_id=None, transaction_timeout_ms=60000,
                                producer_id=first.producer_id, producer_epoch=first.producer_epoch)
            assert (bumped.error_code, bumped.producer_id, bumped.producer_epoch) == (0, first.producer_id, 1)

            for version, expected_offset in ((8, 0), (9, 1)):
                [answer] = await exchange(leader, produce_frame(kafka_batch(b"v%d" % version), version=version))
                header = 5 if APIS[0].request.flexible_version_q(version) else 4
                partition = ProduceResponse.decode(answer[header:], version=version).responses[0].partition_responses[0]
                assert (partition.error_code, partition.base_offset) == (0, expected_offset)
            corrupt = bytearray(kafka_batch(b"bad"))
            corrupt[-1] ^= 0xFF
            [answer] = await exchange(leader, produce_frame(bytes(corrupt), version=9))
            partition = ProduceResponse.decode(answer[5:], version=9).responses[0].partition_responses[0]
            assert partition.error_code == errors.CORRUPT_MESSAGE.code
            assert "is corrupt (stored crc" in partition.error_message


async def test_group_apis_answer_errors_as_kafka_does() -> None:
    """FindCoordinator, JoinGroup (MEMBER_ID_REQUIRED first), SyncGroup, Heartbeat (ILLEGAL_GENERATION,
    UNKNOWN_MEMBER_ID, REBALANCE_IN_PROGRESS), OffsetCommit and OffsetFetch (NOT_COORDINATOR at the top from v2,
    on every partition before), LeaveGroup, at the versions aiokafka and librdkafka send."""
    with trio.fail_after(SAFETY_TIMEOUT):
        async with Cluster(brokers=3, seed=3) as cluster:
            await cluster.create_topic(TOPIC, partitions=1, replication_factor=3)
            found = await call(kafka_port(cluster, 1), 10, 2, key=GROUP, key_type=0)
            assert found.error_code == 0
            port = found.port
            other = kafka_port(cluster, next(b for b in (1, 2, 3) if b != found.node_id))

            assert (await call(other, 11, 5, **join(""))).error_code == errors.NOT_COORDINATOR.code
            first = await call(port, 11, 5, **join(""))
            assert first.error_code == errors.MEMBER_ID_REQUIRED.code and first.member_id
            member = first.member_id
            joined = await call(port, 11, 5, **join(member))
            assert (joined.error_code, joined.generation_id, joined.leader, joined.protocol_name) == (
                0, 1, member, "range")
            synced = await call(port, 14, 3, group_id=GROUP, generation_id=1, member_id=member, group_instance_id=None,
                                assignments=[entry(SyncGroupRequest, "SyncGroupRequestAssignment", member_id=member,
                                                   assignment=encode_assignment(Assignment((TopicPartition(TOPIC, 0),))))])
            assert synced.error_code == 0 and synced.assignment == encode_assignment(
                Assignment((TopicPartition(TOPIC, 0),)))

            async def heartbeat(generation: int, member_id: str) -> int:
                return (await call(port, 12, 1, group_id=GROUP, generation_id=generation,
                                   member_id=member_id)).error_code

            assert await heartbeat(1, member) == 0
            assert await heartbeat(7, member) == errors.ILLEGAL_GENERATION.code
            assert await heartbeat(1, "stranger") == errors.UNKNOWN_MEMBER_ID.code

            committed = await call(port, 8, 2, **commit(1, member, 42))
            assert committed.topics[0].partitions[0].error_code == 0
            stale = await call(port, 8, 2, **commit(7, member, 43))
            assert stale.topics[0].partitions[0].error_code == errors.ILLEGAL_GENERATION.code
            fetched = await call(port, 9, 1, **FETCH_PARTITION_0)
            assert fetched.topics[0].partitions[0].committed_offset == 42
            elsewhere_v1 = await call(other, 9, 1, **FETCH_PARTITION_0)
            assert elsewhere_v1.topics[0].partitions[0].error_code == errors.NOT_COORDINATOR.code
            elsewhere_v5 = await call(other, 9, 5, **FETCH_PARTITION_0)
            assert elsewhere_v5.error_code == errors.NOT_COORDINATOR.code

            async with trio.open_nursery() as nursery:
                second = await call(port, 11, 5, **join(""))
                second_joined: list[Message] = []

                async def join_second() -> None:
                    second_joined.append(await call(port, 11, 5, **join(second.member_id)))

                nursery.start_soon(join_second)
                await cluster.wait_until(lambda: cluster.broker(found.node_id).group_coordinator.group(
                    GROUP).state.value == "PreparingRebalance")
                assert await heartbeat(1, member) == errors.REBALANCE_IN_PROGRESS.code
                rejoined = await call(port, 11, 5, **join(member))
            assert rejoined.generation_id == second_joined[0].generation_id == 2

            left = await call(port, 13, 1, group_id=GROUP, member_id="stranger")
            assert left.error_code == errors.UNKNOWN_MEMBER_ID.code
            assert (await call(port, 13, 1, group_id=GROUP, member_id=member)).error_code == 0


async def test_delete_records_answers_each_partition_at_version_0() -> None:
    """The low watermark where the deletion was done, Kafka's error code where not; v0 has a v0 response header."""
    with trio.fail_after(SAFETY_TIMEOUT):
        async with Cluster(brokers=3, seed=4) as cluster:
            await cluster.create_topic(TOPIC, partitions=1, replication_factor=3)
            port = kafka_port(cluster, cluster.leader_for(TOPIC, 0))
            for value in (b"a", b"b", b"c"):
                assert len(await exchange(port, produce_frame(kafka_batch(value)))) == 1
            deleted = await call(port, 21, 0, timeout_ms=5000, topics=[
                entry(DeleteRecordsRequest, "DeleteRecordsTopic", name=name, partitions=[
                    entry(DeleteRecordsRequest, "DeleteRecordsTopic.DeleteRecordsPartition", partition_index=index,
                          offset=offset) for index, offset in partitions])
                for name, partitions in ((TOPIC, ((0, 2),)), ("missing", ((0, 1),)))])
            assert [(t.name, [(p.partition_index, p.error_code, p.low_watermark) for p in t.partitions])
                    for t in deleted.topics] == [
                (TOPIC, [(0, 0, 2)]), ("missing", [(0, errors.UNKNOWN_TOPIC_OR_PARTITION.code, -1)])]
            assert [r.value for _, r in await cluster.fetch(TOPIC, 0, 2)] == [b"c"]


def alterable(resource_type: int, name: str, *configs: tuple[str, int, str | None]) -> Message:
    return entry(IncrementalAlterConfigsRequest, "AlterConfigsResource", resource_type=resource_type,
                 resource_name=name, configs=[
                     entry(IncrementalAlterConfigsRequest, "AlterConfigsResource.AlterableConfig", name=config,
                           config_operation=operation, value=value) for config, operation, value in configs])


async def test_incremental_alter_configs_answers_each_resource_on_its_own() -> None:
    """What no client library sends but a hand-rolled one might: a property named twice, an unknown operation, a
    null value to set, a broker's configs. Each is INVALID_REQUEST with a message, for its resource alone: the good
    resource in the same request is applied, validate_only applies nothing, and the broker keeps serving."""
    with trio.fail_after(SAFETY_TIMEOUT):
        async with Cluster(brokers=1, seed=5) as cluster:
            for topic in (TOPIC, "twice", "op", "null"):
                await cluster.create_topic(topic, partitions=1, replication_factor=1)
            port = kafka_port(cluster, 1)

            async def retention_ms() -> str:
                described = await call(port, 32, 1, include_synonyms=False, resources=[
                    entry(DescribeConfigsRequest, "DescribeConfigsResource", resource_type=2, resource_name=TOPIC,
                          configuration_keys=["retention.ms"])])
                return described.results[0].configs[0].value

            answer = await call(port, 44, 0, validate_only=False, resources=[
                alterable(2, TOPIC, ("retention.ms", 0, "1000")),
                alterable(2, "twice", ("retention.ms", 0, "1"), ("retention.ms", 1, None)),
                alterable(2, "op", ("retention.ms", 9, "1")),
                alterable(2, "null", ("retention.ms", 0, None)),
                alterable(4, "1", ("log.retention.ms", 0, "1"))])
            results = {r.resource_name: (r.error_code, r.error_message) for r in answer.responses}
            assert results[TOPIC] == (0, None)
            for name, message in (("twice", "duplicate config keys"), ("op", "Unknown operation 9"),
                                  ("null", "Null value not supported"), ("1", "broker configs are static")):
                code, text = results[name]
                assert code == errors.INVALID_REQUEST.code and message in text, name
            assert await retention_ms() == "1000"
            checked = await call(port, 44, 0, validate_only=True, resources=[
                alterable(2, TOPIC, ("retention.ms", 0, "2000"))])
            assert checked.responses[0].error_code == 0
            assert await retention_ms() == "1000"


async def test_describe_configs_says_where_each_topic_value_comes_from() -> None:
    """As Kafka's ConfigHelper: set on the topic TOPIC_CONFIG (1), inherited from a broker setting
    STATIC_BROKER_CONFIG (4) and not default, else DEFAULT_CONFIG (5). The inherited value was reported as the
    default, so a tool showing what a topic runs with (or diffing it against production) hid the broker's."""
    with trio.fail_after(SAFETY_TIMEOUT):
        async with Cluster(brokers=1, config={"log.retention.ms": 3_600_000}, seed=5) as cluster:
            await cluster.create_topic(TOPIC, partitions=1, replication_factor=1, config={"segment.ms": 60_000})
            described = await call(kafka_port(cluster, 1), 32, 1, include_synonyms=False, resources=[
                entry(DescribeConfigsRequest, "DescribeConfigsResource", resource_type=2, resource_name=TOPIC,
                      configuration_keys=["segment.ms", "retention.ms", "retention.bytes"])])
            assert [(c.name, c.value, c.config_source) for c in described.results[0].configs] == [
                ("segment.ms", "60000", 1), ("retention.ms", "3600000", 4), ("retention.bytes", "-1", 5)]
            old = await call(kafka_port(cluster, 1), 32, 0, resources=[
                entry(DescribeConfigsRequest, "DescribeConfigsResource", resource_type=2, resource_name=TOPIC,
                      configuration_keys=["segment.ms", "retention.ms", "retention.bytes"])])
            assert [c.is_default for c in old.results[0].configs] == [False, False, True]  # v0 has no source


async def test_describe_configs_from_version_3_types_each_config_and_documents_it_when_asked() -> None:
    """As Kafka's: from v3 each config has its ConfigDef type (BOOLEAN 1, STRING 2, INT 3, LONG 5, DOUBLE 6, LIST 7),
    which Java's Admin shows as ConfigEntry.type(), and its documentation only when the request asks (null
    otherwise); v4, the flexible encoding, the same. A broker's configs too, an alias answered under its own name
    with its property's type; a name kafkalite does not define is left out, as before."""
    topic_names = ["min.insync.replicas", "retention.ms", "unclean.leader.election.enable", "cleanup.policy",
                   "compression.type", "min.cleanable.dirty.ratio", "no.such.config"]
    with trio.fail_after(SAFETY_TIMEOUT):
        async with Cluster(brokers=1, seed=5) as cluster:
            await cluster.create_topic(TOPIC, partitions=1, replication_factor=1)
            port = kafka_port(cluster, 1)
            for version in (3, 4):
                for documented in (False, True):
                    described = await call(port, 32, version, include_synonyms=False,
                                           include_documentation=documented, resources=[
                        entry(DescribeConfigsRequest, "DescribeConfigsResource", resource_type=2,
                              resource_name=TOPIC, configuration_keys=topic_names),
                        entry(DescribeConfigsRequest, "DescribeConfigsResource", resource_type=4, resource_name="1",
                              configuration_keys=["zookeeper.session.timeout.ms", "broker.rack"])])
                    topic, broker = described.results
                    assert (topic.error_code, broker.error_code) == (0, 0)
                    assert [(c.name, c.config_type) for c in topic.configs] == [
                        ("min.insync.replicas", 3), ("retention.ms", 5), ("unclean.leader.election.enable", 1),
                        ("cleanup.policy", 7), ("compression.type", 2), ("min.cleanable.dirty.ratio", 6)]
                    assert [(c.name, c.value, c.config_type) for c in broker.configs] == [
                        ("zookeeper.session.timeout.ms", "18000", 3), ("broker.rack", None, 2)]
                    documentation = {c.name: c.documentation for r in described.results for c in r.configs}
                    if documented:
                        assert "in-sync replicas" in documentation["min.insync.replicas"]
                        assert "nothing is compacted" in documentation["min.cleanable.dirty.ratio"]
                        assert "session timeout" in documentation["zookeeper.session.timeout.ms"]
                        assert all(documentation.values()), (version, documentation)
                    else:
                        assert set(documentation.values()) == {None}, (version, documentation)
            # A resource type kafkalite does not serve fails alone, with Kafka's code and a message.
            mixed = await call(port, 32, 4, include_synonyms=False, include_documentation=True, resources=[
                entry(DescribeConfigsRequest, "DescribeConfigsResource", resource_type=9, resource_name="x",
                      configuration_keys=None),
                entry(DescribeConfigsRequest, "DescribeConfigsResource", resource_type=2, resource_name=TOPIC,
                      configuration_keys=["retention.ms"])])
            refused, served = mixed.results
            assert refused.error_code == errors.INVALID_REQUEST.code and "resource type 9" in refused.error_message
            assert (served.error_code, [(c.name, c.config_type) for c in served.configs]) == (0, [("retention.ms", 5)])


def election_results(answer: Message) -> dict[tuple[str, int], int]:
    return {(topic.topic, r.partition_id): r.error_code for topic in answer.replica_election_results
            for r in topic.partition_result}


async def test_elect_leaders_at_version_0_elects_preferred_and_errors_reach_every_partition() -> None:
    """Version 0 names no election type and means preferred; a request-wide error (an unknown election type) is
    answered at the top and on every partition named; a null partition list answers only the partitions that
    needed an election."""
    with trio.fail_after(SAFETY_TIMEOUT):
        async with Cluster(brokers=3, config={"auto.leader.rebalance.enable": False}, seed=6) as cluster:
            await cluster.create_topic(TOPIC, partitions=2, replication_factor=3)
            preferred = (await cluster.describe_topic(TOPIC))[0].replicas[0]
            await cluster.shutdown_broker(preferred)
            await cluster.restart_broker(preferred)
            await cluster.wait_until(lambda: preferred in cluster.partition_state(TOPIC, 0).isr)
            assert cluster.leader_for(TOPIC, 0) != preferred
            port = kafka_port(cluster, 1)
            both = [entry(ElectLeadersRequest, "TopicPartitions", topic=TOPIC, partitions=[0, 1])]

            unknown_type = await call(port, 43, 1, election_type=5, topic_partitions=both, timeout_ms=5000)
            assert unknown_type.error_code == errors.INVALID_REQUEST.code
            assert election_results(unknown_type) == {(TOPIC, 0): errors.INVALID_REQUEST.code,
                                                      (TOPIC, 1): errors.INVALID_REQUEST.code}
            assert cluster.leader_for(TOPIC, 0) != preferred

            elected = await call(port, 43, 0, topic_partitions=both, timeout_ms=5000)
            assert election_results(elected) == {(TOPIC, 0): 0, (TOPIC, 1): errors.ELECTION_NOT_NEEDED.code}
            assert cluster.leader_for(TOPIC, 0) == preferred
            everything = await call(port, 43, 1, election_type=0, topic_partitions=None, timeout_ms=5000)
            assert everything.error_code == 0 and election_results(everything) == {}


async def test_describe_cluster_lists_kafka_endpoints_and_refuses_controller_endpoints() -> None:
    """Version 1 (flexible): every live broker at its KAFKA endpoint and the real controller; endpoint type 2
    (KRaft controllers) is UNSUPPORTED_VERSION with a message, and the broker keeps serving."""
    with trio.fail_after(SAFETY_TIMEOUT):
        async with Cluster(brokers=3, seed=7) as cluster:
            port = kafka_port(cluster, 2)
            described = await call(port, 60, 1, include_cluster_authorized_operations=False, endpoint_type=1)
            assert (described.error_code, described.controller_id) == (0, cluster.controller_id)
            assert sorted((b.broker_id, b.port) for b in described.brokers) == [
                (b, kafka_port(cluster, b)) for b in (1, 2, 3)]
            refused = await call(port, 60, 1, include_cluster_authorized_operations=False, endpoint_type=2)
            assert refused.error_code == errors.UNSUPPORTED_VERSION.code and "broker endpoints" in refused.error_message
            assert (await call(port, 60, 0, include_cluster_authorized_operations=False)).error_code == 0


async def test_each_cluster_has_its_own_id_which_every_broker_answers_and_restarts_keep() -> None:
    """Kafka's getOrGenerateClusterId: the first broker to start writes a random id (a version-4 UUID in 22
    characters of URL-safe base64) to the coordination service, and every broker answers Metadata and DescribeCluster
    with it, after every broker has restarted too. Two clusters have two ids, so that a client or tool that keys
    state by cluster id (a replicator's loop detection, a UI listing clusters) tells them apart; the same seed gives
    the same id. Every cluster answered "kafkalite" before."""
    async def ids(cluster: Cluster) -> set[str]:
        found = set()
        for broker in cluster.live_broker_ids:
            port = kafka_port(cluster, broker)
            found.add((await call(port, 3, 9, topics=[], allow_auto_topic_creation=False,
                                  include_cluster_authorized_operations=False,
                                  include_topic_authorized_operations=False)).cluster_id)
            found.add((await call(port, 60, 0, include_cluster_authorized_operations=False)).cluster_id)
        return found

    with trio.fail_after(SAFETY_TIMEOUT):
        async with Cluster(brokers=3, seed=21) as first, Cluster(brokers=1, seed=22) as second, \
                Cluster(brokers=1, seed=21) as again:
            [cluster_id] = await ids(first)
            assert len(cluster_id) == 22 and uuid.UUID(bytes=base64.urlsafe_b64decode(cluster_id + "==")).version == 4
            assert first.cluster_id == first.describe_cluster().cluster_id == cluster_id  # what a test can compare with
            for broker in (1, 2, 3):
                await first.shutdown_broker(broker)
                await first.restart_broker(broker)
            assert await ids(first) == {cluster_id}
            [other] = await ids(second)
            assert other != cluster_id
            assert await ids(again) == {cluster_id}


async def test_a_kafka_batch_with_a_valid_crc_over_malformed_records_can_be_sought_past() -> None:
    """The leader checks a Kafka client's batch by its CRC only, so one whose CRC covers a record that lies about its
    length is stored; a native reader is told CORRUPT_MESSAGE with the batch's offsets and reads on once it seeks
    past it, and the records after it are intact."""
    from kafkalite.client import Consumer

    with trio.fail_after(SAFETY_TIMEOUT):
        async with Cluster(brokers=3, seed=8) as cluster:
            await cluster.create_topic(TOPIC, partitions=1, replication_factor=3)
            port = kafka_port(cluster, cluster.leader_for(TOPIC, 0))
            lying = bytearray(kafka_batch(b"lie"))
            lying[61] += 2  # the first record's length (a one-byte varint) now claims a byte more than it holds
            struct.pack_into(">I", lying, 17, crc32c(bytes(lying[21:])))
            for batch in (bytes(lying), kafka_batch(b"after")):
                [answer] = await exchange(port, produce_frame(batch))
                assert ProduceResponse.decode(answer[4:], version=7).responses[0].partition_responses[0].error_code == 0
            async with Consumer(cluster, {"auto.offset.reset": "earliest"}) as consumer:
                consumer.assign([TopicPartition(TOPIC, 0)])
                with pytest.raises(CorruptMessageError, match="offsets 0 to 0 cannot be decoded .*seek to 1 to skip"):
                    await consumer.poll(5)
                consumer.seek(TopicPartition(TOPIC, 0), 1)
                assert [(r.offset, r.value) for r in await consumer.poll(5)] == [(1, b"after")]


@pytest.mark.parametrize(("config", "refused", "code"), [
    ({"cleanup.policy": "compact"}, Record(None, b"no key", 1_700_000_000_000), errors.INVALID_RECORD.code),
    ({"message.timestamp.before.max.ms": str(5 * 365 * 24 * 3_600_000)}, Record(b"k", b"of 1970", 1_000),
     errors.INVALID_TIMESTAMP.code),
])
async def test_a_topic_that_checks_records_reads_every_record_of_a_kafka_batch_and_refuses_what_it_cannot_read(
        config: dict[str, str], refused: Record, code: int) -> None:
    """A compacted topic's leader needs each record's key, and one that bounds timestamps each record's timestamp,
    so it parses a Kafka client's batch as Kafka's LogValidator parses every batch: a valid CRC over malformed
    records is CORRUPT_MESSAGE and nothing is stored; a record without a key is INVALID_RECORD, one too old
    INVALID_TIMESTAMP; records after either are stored at the next offset."""
    with trio.fail_after(SAFETY_TIMEOUT):
        async with Cluster(brokers=3, seed=9) as cluster:
            await cluster.create_topic(TOPIC, partitions=1, replication_factor=3, config=config)
            port = kafka_port(cluster, cluster.leader_for(TOPIC, 0))
            lying = bytearray(kafka_batch(b"lie"))
            lying[61] += 2  # as above: the first record claims a byte more than it holds, under a valid CRC
            struct.pack_into(">I", lying, 17, crc32c(bytes(lying[21:])))
            expected = [errors.CORRUPT_MESSAGE.code, code, errors.NONE.code]
            for batch, expected_code in zip((bytes(lying), RecordBatch.from_records([refused]).to_kafka_bytes(),
                                             kafka_batch(b"kept")), expected):
                [answer] = await exchange(port, produce_frame(batch))
                partition = ProduceResponse.decode(answer[4:], version=7).responses[0].partition_responses[0]
                assert partition.error_code == expected_code
            assert partition.base_offset == 0
            assert [(r.key, r.value) for _, r in await cluster.fetch(TOPIC, 0, 0)] == [(b"k", b"kept")]


async def test_a_reassignment_that_may_not_change_the_replication_factor_keeps_it() -> None:
    """Version 1 (KIP-860): with allow_replication_factor_change false, a target of another size is
    INVALID_REPLICATION_FACTOR with a message and nothing moves; one of the same size moves."""
    with trio.fail_after(SAFETY_TIMEOUT):
        async with Cluster(brokers=4, seed=9) as cluster:
            await cluster.create_topic(TOPIC, partitions=1, replication_factor=2)
            replicas = list((await cluster.describe_topic(TOPIC))[0].replicas)
            outsider = next(b for b in cluster.broker_ids if b not in replicas)
            port = kafka_port(cluster, 1)

            async def move(target: list[int]) -> tuple[int, str | None]:
                answer = await call(port, 45, 1, timeout_ms=5000, allow_replication_factor_change=False, topics=[
                    entry(AlterPartitionReassignmentsRequest, "ReassignableTopic", name=TOPIC, partitions=[
                        entry(AlterPartitionReassignmentsRequest, "ReassignableTopic.ReassignablePartition",
                              partition_index=0, replicas=target)])])
                result = answer.responses[0].partitions[0]
                return result.error_code, result.error_message

            code, message = await move([*replicas, outsider])
            assert code == errors.INVALID_REPLICATION_FACTOR.code and "would change from 2 to 3" in message
            assert list((await cluster.describe_topic(TOPIC))[0].replicas) == replicas
            assert (await move([outsider, replicas[0]]))[0] == 0
            await cluster.wait_until(lambda: cluster.controller() is not None
                                     and not cluster.controller().context.partitions_being_reassigned)
            assert list((await cluster.describe_topic(TOPIC))[0].replicas) == [outsider, replicas[0]]


# -- leader epochs (KIP-320): Metadata v7+, ListOffsets v4+, OffsetForLeaderEpoch -----------------------------------

async def epoch_ends(port: int, version: int, *asked: tuple[str, int, int], replica_id: int = -1) -> list[tuple]:
    """OffsetForLeaderEpoch for (topic, epoch, current leader epoch) on partition 0 of each: (error, epoch, end)."""
    answer = await call(port, 23, version, replica_id=replica_id, topics=[
        entry(OffsetForLeaderEpochRequest, "OffsetForLeaderTopic", topic=topic, partitions=[
            entry(OffsetForLeaderEpochRequest, "OffsetForLeaderTopic.OffsetForLeaderPartition", partition=0,
                  leader_epoch=epoch, current_leader_epoch=current)])
        for topic, epoch, current in asked])
    return [(p.error_code, p.leader_epoch, p.end_offset) for topic in answer.topics for p in topic.partitions]


async def latest_offset(port: int, version: int, current_leader_epoch: int = -1, timestamp: int = -1
                        ) -> tuple[int, int, int]:
    """ListOffsets for the latest offset of TOPIC-0 (or another `timestamp`): (error, offset, leader epoch)."""
    answer = await call(port, 2, version, replica_id=-1, isolation_level=0, topics=[
        entry(ListOffsetsRequest, "ListOffsetsTopic", name=TOPIC, partitions=[
            entry(ListOffsetsRequest, "ListOffsetsTopic.ListOffsetsPartition", partition_index=0,
                  timestamp=timestamp, current_leader_epoch=current_leader_epoch)])])
    found = answer.topics[0].partitions[0]
    return found.error_code, found.offset, found.leader_epoch


async def test_leader_epochs_reach_kafka_clients_and_fence_their_requests() -> None:
    """Three records at the first leader's epoch, two at its successor's after a controlled shutdown. The
    successor answers where each epoch ends in its log, as a consumer checking its position after the change
    needs (versions 2 to 4, whatever replica id version 3+ names); Metadata (7, and flexible 9) and ListOffsets v4
    name its epoch;
    a stale or future current epoch is FENCED_LEADER_EPOCH or UNKNOWN_LEADER_EPOCH, an unknown topic
    UNKNOWN_TOPIC_OR_PARTITION, and a broker that does not lead answers NOT_LEADER_OR_FOLLOWER."""
    with trio.fail_after(SAFETY_TIMEOUT):
        async with Cluster(brokers=3, seed=10) as cluster:
            await cluster.create_topic(TOPIC, partitions=1, replication_factor=3)
            assert await cluster.produce(TOPIC, 0, [Record(None, b"%d" % i, 1000 + i % 2) for i in range(3)]) == 0
            first = cluster.leader_for(TOPIC, 0)
            await cluster.shutdown_broker(first)
            leader = await cluster.wait_for_leader(TOPIC, 0, not_on=[first])
            epoch = cluster.partition_state(TOPIC, 0).leader_epoch
            assert epoch > 0 and await cluster.produce(TOPIC, 0, [Record(None, b"%d" % i, 900) for i in (3, 4)]) == 3
            port = kafka_port(cluster, leader)

            for version in (2, 3, 4):
                assert await epoch_ends(port, version, (TOPIC, 0, epoch), (TOPIC, epoch - 1, -1),
                                        (TOPIC, epoch, -1), (TOPIC, epoch + 1, epoch)) == [
                    (errors.NONE.code, 0, 3), (errors.NONE.code, 0, 3), (errors.NONE.code, epoch, 5),
                    (errors.NONE.code, -1, -1)], f"version {version}"
            assert await epoch_ends(port, 3, (TOPIC, 0, epoch), replica_id=leader) == [(errors.NONE.code, 0, 3)]
            fenced = [(code, -1, -1) for code in (errors.FENCED_LEADER_EPOCH.code, errors.UNKNOWN_LEADER_EPOCH.code,
                                                  errors.UNKNOWN_TOPIC_OR_PARTITION.code)]
            assert await epoch_ends(port, 4, (TOPIC, 0, epoch - 1), (TOPIC, 0, epoch + 1), ("no-such-topic", 0, -1),
                                    ) == fenced
            follower = next(b for b in cluster.live_broker_ids if b != leader)
            assert await epoch_ends(kafka_port(cluster, follower), 3, (TOPIC, 0, -1), replica_id=leader) == [
                (errors.NOT_LEADER_OR_FOLLOWER.code, -1, -1)]

            for version in (7, 9):
                metadata = await call(port, 3, version, allow_auto_topic_creation=False,
                                      topics=[entry(MetadataRequest, "MetadataRequestTopic", name=TOPIC)])
                [partition] = metadata.topics[0].partitions
                assert (partition.leader_id, partition.leader_epoch) == (leader, epoch), f"version {version}"
            assert await latest_offset(port, 4) == (errors.NONE.code, 5, epoch)
            assert await latest_offset(port, 7) == (errors.NONE.code, 5, epoch)  # flexible from 6
            # Beside an offset found, the epoch it was written in, as Kafka answers: a client checks its position
            # for truncation against it. Only the latest offset carries the current epoch; nothing found, none.
            assert await latest_offset(port, 7, timestamp=-3) == (errors.NONE.code, 1, 0)  # KIP-734: 1001
            assert await latest_offset(port, 7, timestamp=-2) == (errors.NONE.code, 0, 0)
            assert await latest_offset(port, 7, timestamp=1001) == (errors.NONE.code, 1, 0)
            assert await latest_offset(port, 7, timestamp=5000) == (errors.NONE.code, -1, -1)
            assert (await latest_offset(port, 4, epoch - 1))[0] == errors.FENCED_LEADER_EPOCH.code
            assert (await latest_offset(port, 5, epoch + 1))[0] == errors.UNKNOWN_LEADER_EPOCH.code


async def fetched(port: int, version: int, offset: int, last_fetched_epoch: int = -1) -> tuple[int, Any, int | None]:
    """A consumer's Fetch of TOPIC-0 from `offset`: (error, DivergingEpoch as (epoch, end offset) or None, the base
    offset of the first batch sent or None)."""
    answer = await call(port, 1, version, replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20,
                        isolation_level=0, session_id=0, session_epoch=-1, forgotten_topics_data=[], rack_id="",
                        topics=[entry(FetchRequest, "FetchTopic", topic=TOPIC, partitions=[
                            entry(FetchRequest, "FetchTopic.FetchPartition", partition=0, current_leader_epoch=-1,
                                  fetch_offset=offset, last_fetched_epoch=last_fetched_epoch, log_start_offset=-1,
                                  partition_max_bytes=1 << 20)])])
    [partition] = answer.responses[0].partitions
    diverging = partition.diverging_epoch
    records = bytes(partition.records or b"")
    return (partition.error_code, None if diverging is None else (diverging.epoch, diverging.end_offset),
            struct.unpack_from(">q", records)[0] if records else None)


async def test_a_consumer_fetch_naming_the_epoch_it_last_read_is_told_where_the_leaders_log_diverges() -> None:
    """Fetch v12 (KIP-595): three records at the first leader's epoch 0, two at its successor's. A consumer that
    names the epoch of the record before its fetch offset gets records only where the leader's log holds that
    epoch up to the offset; otherwise no records and where the epoch ends (DivergingEpoch), from which it truncates
    its position, as Kafka answers any fetch that names an epoch. An epoch the leader has not reached yet is
    OFFSET_OUT_OF_RANGE. A negative epoch names none, as Kafka reads it, and neither does a fetch before version
    12: nothing is checked."""
    with trio.fail_after(SAFETY_TIMEOUT):
        async with Cluster(brokers=3, seed=10) as cluster:
            await cluster.create_topic(TOPIC, partitions=1, replication_factor=3)
            assert await cluster.produce(TOPIC, 0, [Record(None, b"%d" % i) for i in range(3)]) == 0
            first = cluster.leader_for(TOPIC, 0)
            await cluster.shutdown_broker(first)
            port = kafka_port(cluster, await cluster.wait_for_leader(TOPIC, 0, not_on=[first]))
            epoch = cluster.partition_state(TOPIC, 0).leader_epoch
            assert epoch > 0 and await cluster.produce(TOPIC, 0, [Record(None, b"%d" % i) for i in (3, 4)]) == 3

            assert await fetched(port, 12, 4, last_fetched_epoch=0) == (errors.NONE.code, (0, 3), None)
            assert await fetched(port, 12, 3, last_fetched_epoch=0) == (errors.NONE.code, None, 3)
            assert await fetched(port, 12, 1, last_fetched_epoch=0) == (errors.NONE.code, None, 0)
            assert await fetched(port, 12, 5, last_fetched_epoch=epoch) == (errors.NONE.code, None, None)
            assert await fetched(port, 12, 4, last_fetched_epoch=epoch + 1) == (
                errors.OFFSET_OUT_OF_RANGE.code, None, None)
            assert await fetched(port, 12, 4, last_fetched_epoch=-7) == (errors.NONE.code, None, 3)
            assert await fetched(port, 12, 4) == (errors.NONE.code, None, 3)
            assert await fetched(port, 11, 4) == (errors.NONE.code, None, 3)
            assert [r.value for _, r in await cluster.fetch(TOPIC, 0, 0)] == [b"%d" % i for i in range(5)]


@pytest.mark.parametrize(("version", "expected"), [(4, errors.LEADER_NOT_AVAILABLE), (5, errors.OFFSET_NOT_AVAILABLE)])
async def test_a_new_leader_catching_up_its_high_watermark_is_answered_by_list_offsets_version(
        version: int, expected: errors.KafkaError) -> None:
    """KIP-207: the followers learn the high watermark of two acknowledged records only on their next fetch
    response, parked at the leader, and the leader shuts down first. Its successor's high watermark trails the
    start of its epoch while the other follower, paused, fetches nothing: ListOffsets for the latest offset is
    OFFSET_NOT_AVAILABLE from version 5, LEADER_NOT_AVAILABLE before (as Kafka tells older clients), never the
    stale 0; once the follower fetches again it is 2."""
    config = {"replica.fetch.wait.max.ms": 30_000, "replica.lag.time.max.ms": 60_000}
    with trio.fail_after(SAFETY_TIMEOUT):
        async with Cluster(brokers=3, config=config, seed=11) as cluster:
            await cluster.create_topic(TOPIC, partitions=1, replication_factor=3)
            replicas = list((await cluster.describe_topic(TOPIC))[0].replicas)
            assert await cluster.produce(TOPIC, 0, [Record(None, b"a"), Record(None, b"b")]) == 0
            cluster.pause_broker(replicas[2])
            await cluster.shutdown_broker(replicas[0])
            assert await cluster.wait_for_leader(TOPIC, 0, not_on=[replicas[0]]) == replicas[1]
            port = kafka_port(cluster, replicas[1])
            assert (await latest_offset(port, version))[0] == expected.code
            cluster.resume_broker(replicas[2])
            await cluster.wait_until(lambda: cluster.high_watermark(TOPIC, 0) == 2)
            assert (await latest_offset(port, version))[:2] == (errors.NONE.code, 2)


async def test_a_new_leader_catching_up_answers_time_lookups_of_records_below_its_high_watermark(
        autojump_clock: Any) -> None:
    """Kafka's fetchOffsetForTimestamp: OFFSET_NOT_AVAILABLE only when no record below the high watermark
    matches. kafkalite refused every time lookup while the high watermark caught up, so offsets_for_times of old
    records stalled until the followers did. Here the third replica, paused, holds the high watermark at 1 while
    the second takes two more records and then the leadership (on the mock clock, for the parked fetches)."""
    config = {"replica.fetch.wait.max.ms": 30_000, "replica.lag.time.max.ms": 600_000,
              "zookeeper.session.timeout.ms": 600_000}  # the paused replica stays registered and in the ISR
    async with Cluster(brokers=3, config=config, seed=16) as cluster:  # the controller is not paused
        await cluster.create_topic(TOPIC, partitions=1, replication_factor=3)
        replicas = list((await cluster.describe_topic(TOPIC))[0].replicas)
        assert await cluster.produce(TOPIC, 0, [Record(None, b"a", 1000)]) == 0
        await trio.sleep(31)  # the followers' parked fetches come back with the high watermark 1
        cluster.pause_broker(replicas[2])
        assert await cluster.produce(TOPIC, 0, [Record(None, b"b", 2000), Record(None, b"c", 2001)], acks=1) == 1
        await trio.sleep(1)  # the second replica fetches them
        await cluster.shutdown_broker(replicas[0])
        assert await cluster.wait_for_leader(TOPIC, 0, not_on=[replicas[0]]) == replicas[1]
        port = kafka_port(cluster, replicas[1])
        assert await latest_offset(port, 5, timestamp=1000) == (errors.NONE.code, 0, 0)
        assert (await latest_offset(port, 5, timestamp=2000))[0] == errors.OFFSET_NOT_AVAILABLE.code
        assert (await latest_offset(port, 5))[0] == errors.OFFSET_NOT_AVAILABLE.code
        cluster.resume_broker(replicas[2])
        await cluster.wait_until(lambda: cluster.high_watermark(TOPIC, 0) == 3)
        assert await latest_offset(port, 5, timestamp=2000) == (errors.NONE.code, 1, 0)
