"""The native wire format: every type round-trips, and bad bytes are rejected with the field they broke."""

from __future__ import annotations

import copy
import dataclasses
import inspect
import struct
import subprocess
import sys
import typing

import msgpack
import pytest

from kafkalite.common.errors import INVALID_REQUEST, UNSUPPORTED_VERSION, InvalidRequestError
from kafkalite.common.records import Record, RecordBatch
from kafkalite.network import requests as r
from kafkalite.network.codec import (
    REQUEST_START, FrameDecoder, FrameTooLargeError, MalformedRequestError, RequestHeader,
    UnsupportedRequestVersionError, decode_body, decode_request, decode_response, encode_request, encode_response,
)
from kafkalite.network.responses import api_versions_response, error_response


def batch(base_offset: int = 0, *values: bytes) -> RecordBatch:
    records = [Record(b"key-%d" % i, value, 1_700_000_000_000 + i) for i, value in enumerate(values or (b"v",))]
    return RecordBatch.from_records(records, base_offset=base_offset)


def live_brokers() -> list[r.LiveBroker]:
    return [r.LiveBroker(1, [r.BrokerEndpoint("NATIVE", "127.0.0.1", 9092),
                             r.BrokerEndpoint("KAFKA", "127.0.0.1", 9093, "PLAINTEXT")], rack="rack-a"),
            r.LiveBroker(2, [], None)]


def requests() -> list[r.Request]:
    return [
        r.InitProducerIdRequest(None, 60000, -1, -1),
        r.ElectLeadersRequest(0, [("t", 0), ("t", 1)]),
        r.ElectLeadersRequest(1),
        r.DescribeConfigsRequest([r.ConfigResource(2, "t", ["retention.ms"]), r.ConfigResource(4, "1")]),
        r.AlterConfigsRequest([r.AlterConfigsResource(2, "t", {"retention.ms": "1000"})], True),
        r.IncrementalAlterConfigsRequest([r.IncrementalAlterConfigsResource(2, "t", [
            r.AlterableConfig("retention.ms", 0, "1000"), r.AlterableConfig("segment.ms", 1, None)])]),
        r.AlterPartitionReassignmentsRequest([r.ReassignablePartition("t", 0, [3, 1, 2])]),
        r.ListPartitionReassignmentsRequest([("t", 0)]),
        r.CreatePartitionsRequest([r.CreatePartitionsTopic("t", 4, [[1, 2], [2, 3]]), r.CreatePartitionsTopic("u", 2)]),
        r.LeaderAndIsrRequest(1, 3, 77, [
            r.LeaderAndIsrPartitionState("orders", 0, 3, 1, 5, (1, 2), 9, (1, 2, 3), is_new=True),
            r.LeaderAndIsrPartitionState("orders", 1, 3, 2, 0, (), 0, (2,)),
        ], live_brokers()),
        r.UpdateMetadataRequest(1, 3, 77, [
            r.UpdateMetadataPartitionState("orders", 0, 3, r.LEADER_DURING_DELETE, 5, (1,), 2, (1, 2), (2,)),
        ], live_brokers()),
        r.StopReplicaRequest(1, 3, 77, [r.StopReplicaPartition("orders", 0, True, 4),
                                        r.StopReplicaPartition("logs", 2, False)]),
        r.ControlledShutdownRequest(2, 1234),
        r.ProduceRequest(-1, 30000, [
            r.ProducePartitionData("orders", 0, [batch(0, b"a", b"b"), batch(2, b"")]),
            r.ProducePartitionData("orders", 1, []),
        ], transactional_id="tx-1"),
        r.FetchRequest(r.CONSUMER_REPLICA_ID, 500, 1, [r.FetchPartition("orders", 0, 42, 1024, 5, 0)],
                       max_bytes=1 << 20, isolation_level=r.READ_COMMITTED, broker_epoch=12),
        r.ListOffsetsRequest(r.CONSUMER_REPLICA_ID, [r.ListOffsetsPartition("orders", 0, r.EARLIEST_TIMESTAMP),
                                                     r.ListOffsetsPartition("orders", 1, 1_700_000_000_000, 3)]),
        r.DeleteRecordsRequest([r.DeleteRecordsPartition("orders", 0, 12),
                                r.DeleteRecordsPartition("orders", 1, r.HIGH_WATERMARK)], timeout_ms=5000),
        r.OffsetsForLeaderEpochRequest(2, [r.OffsetForLeaderPartition("orders", 0, 4, 5)]),
        r.MetadataRequest(["orders", "logs"], allow_auto_topic_creation=True),
        r.CreateTopicsRequest([
            r.CreatableTopic("orders", 3, 2, configs={"min.insync.replicas": "2"}),
            r.CreatableTopic("placed", assignments={0: [1, 2], 1: [2, 3]}),
        ], timeout_ms=5000, validate_only=True),
        r.DeleteTopicsRequest(["orders", "logs"], 1000),
        r.ApiVersionsRequest("kafkalite-tests", "0.1"),
        r.FindCoordinatorRequest("group-1"),
        r.JoinGroupRequest("group-1", 10000, 30000, "", "consumer", [r.JoinGroupProtocol("range", b"\x00\x02")],
                           "instance-1", "first join"),
        r.SyncGroupRequest("group-1", 3, "member-1", [r.SyncGroupAssignment("member-1", b"\x00\x01")], None,
                           "consumer", "range"),
        r.HeartbeatRequest("group-1", 3, "member-1"),
        r.LeaveGroupRequest("group-1", [r.MemberIdentity("member-1"), r.MemberIdentity("", "instance-1", "bye")]),
        r.OffsetCommitRequest("group-1", 3, "member-1", [r.OffsetCommitPartition("orders", 0, 42, 5, "meta")]),
        r.OffsetFetchRequest("group-1", [("orders", 0)]),
        r.DescribeGroupsRequest(["group-1", "group-2"]),
        r.ListGroupsRequest(["Stable"]),
        r.DeleteGroupsRequest(["group-1"]),
        r.OffsetDeleteRequest("group-1", [("orders", 0)]),
        r.DescribeLogDirsRequest([("orders", 0)]),
        r.DescribeLogDirsRequest(),
    ]


def responses() -> list[r.Response]:
    return [
        r.InitProducerIdResponse(0, 1000, 0),
        r.ElectLeadersResponse(0, [r.ElectionResult("t", 0, 84, "not needed")]),
        r.DescribeConfigsResponse([r.DescribeConfigsResult(0, 2, "t", [r.ConfigEntry("retention.ms", "1000", False)])]),
        r.AlterConfigsResponse([r.AlterConfigsResult(40, 2, "t", "bad")]),
        r.IncrementalAlterConfigsResponse([r.AlterConfigsResult(0, 2, "t"), r.AlterConfigsResult(42, 2, "u", "twice")]),
        r.AlterPartitionReassignmentsResponse(0, [r.ReassignablePartitionResponse("t", 0, 39, "bad")]),
        r.ListPartitionReassignmentsResponse(0, [r.OngoingReassignment("t", 0, [1, 2, 3], [3], [1])]),
        r.CreatePartitionsResponse([r.CreatePartitionsTopicResult("t", 37, "fewer")]),
        r.LeaderAndIsrResponse(0, [("orders", 0, 0), ("orders", 1, 6)]),
        r.UpdateMetadataResponse(77),
        r.DescribeLogDirsResponse(0, "memory:broker-1", [r.LogDirReplica("orders", 0, 1234, 0),
                                                         r.LogDirReplica("orders", 1, 0, -1)]),
        r.StopReplicaResponse(0, [r.PartitionError("orders", 0, 0)]),
        r.ControlledShutdownResponse(0, [("orders", 0), ("logs", 3)], error_message=None),
        r.ProduceResponse([r.ProducePartitionResponse("orders", 0, 0, 42, -1, 0),
                           r.ProducePartitionResponse("orders", 1, 6, error_message="not the leader")]),
        r.FetchResponse(0, [r.FetchPartitionResponse("orders", 0, 0, 10, 10, 0, [batch(0, b"a"), batch(1, b"b")]),
                            r.FetchPartitionResponse("orders", 1, 1, error_message="out of range")]),
        r.ListOffsetsResponse([r.ListOffsetsPartitionResponse("orders", 0, 0, -1, 17, 4)]),
        r.DeleteRecordsResponse([r.DeleteRecordsPartitionResult("orders", 0, 0, 12),
                                 r.DeleteRecordsPartitionResult("orders", 1, 1, error_message="beyond the HW")]),
        r.OffsetsForLeaderEpochResponse([r.EpochEndOffset("orders", 0, 0, 4, 100), r.EpochEndOffset("x", 1, 3)]),
        r.MetadataResponse([r.MetadataBroker(1, "127.0.0.1", 9092, "rack-a"), r.MetadataBroker(2, "h", 1)],
                           "cluster-1", 1, [
                               r.MetadataTopic(0, "orders", [r.MetadataPartition(0, 0, 1, 5, [1, 2], [1], [2])]),
                               r.MetadataTopic(3, "missing", error_message="unknown"),
                           ]),
        r.CreateTopicsResponse([r.CreatableTopicResult("orders", 0, None, 3, 2),
                                r.CreatableTopicResult("bad!", 17, "invalid name")]),
        r.DeleteTopicsResponse([r.DeletableTopicResult("orders", 0)]),
        r.ApiVersionsResponse(0, [r.ApiVersion(0, 0, 0), r.ApiVersion(18, 0, 3)]),
        r.FindCoordinatorResponse(0, 2, "127.0.0.1", 9093),
        r.JoinGroupResponse(0, 3, "consumer", "range", "member-1", "member-1",
                            [r.JoinGroupResponseMember("member-1", b"\x00", "instance-1")]),
        r.SyncGroupResponse(0, b"\x00\x01", "consumer", "range"),
        r.HeartbeatResponse(27, "rebalancing"),
        r.LeaveGroupResponse(0, [r.LeaveGroupMemberResponse("member-1", None, 25)]),
        r.OffsetCommitResponse([r.OffsetCommitPartitionResponse("orders", 0, 22, "stale")]),
        r.OffsetFetchResponse(0, [r.OffsetFetchPartitionResponse("orders", 0, 42, 5, "meta")]),
        r.DescribeGroupsResponse([r.DescribedGroup(0, "group-1", "Stable", "consumer", "range", [
            r.DescribedGroupMember("member-1", None, "client", "host", b"\x00", b"\x01")])]),
        r.ListGroupsResponse(0, [r.ListedGroup("group-1", "consumer", "Stable")]),
        r.DeleteGroupsResponse([r.DeletableGroupResult("group-1", 68, "not empty")]),
        r.OffsetDeleteResponse(0, [r.OffsetDeletePartitionResponse("orders", 0, 86)]),
    ]


def strip_prefix(frame: bytes) -> bytes:
    (length,) = struct.unpack_from(">I", frame)
    assert length == len(frame) - 4
    return frame[4:]


def raw_request(api_key: int, body: object, *, version: int = 0, correlation_id: int = 9) -> bytes:
    return msgpack.packb([api_key, version, correlation_id, "raw-client", body])


def test_samples_cover_every_request_and_response_type() -> None:
    assert {type(request) for request in requests()} == set(r.REQUEST_TYPES.values())
    assert {type(response) for response in responses()} == set(r.RESPONSE_TYPES.values())
    assert set(r.SUPPORTED_VERSIONS) == set(r.REQUEST_TYPES) == set(r.RESPONSE_TYPES)


@pytest.mark.parametrize("request_", requests(), ids=lambda request: type(request).__name__)
def test_every_request_round_trips(request_: r.Request) -> None:
    header = RequestHeader(request_.api_key, 0, 2**31 - 1, "client-é")
    frame = strip_prefix(encode_request(header, request_))
    assert frame[0] == REQUEST_START  # a port tells it from a Kafka request by this byte (ProtocolRouter)
    decoded_header, decoded = decode_request(frame)
    assert decoded_header == header
    assert decoded_header.api_key is request_.api_key
    assert decoded == request_


@pytest.mark.parametrize("response", responses(), ids=lambda response: type(response).__name__)
def test_every_response_round_trips(response: r.Response) -> None:
    assert decode_response(strip_prefix(encode_response(12, response)), type(response)) == (12, response)


@pytest.mark.parametrize("message", [*requests(), *responses()], ids=lambda message: type(message).__name__)
def test_protocol_types_compare_field_by_field(message: r.Request | r.Response) -> None:
    """Equality is shared by the protocol's types rather than generated per class (`requests.message`); every
    round-trip test above rests on it telling a changed field apart, as a dataclass's own would."""
    assert message == copy.deepcopy(message)
    assert message.__eq__(object()) is NotImplemented and message != object()
    with pytest.raises(TypeError):
        hash(message)  # unhashable, as a dataclass with generated equality
    for name in [f.name for f in dataclasses.fields(message)]:
        assert dataclasses.replace(message, **{name: object()}) != message, name


def test_protocol_types_show_their_fields_as_dataclasses_do() -> None:
    assert repr(r.FetchPartition("t", 3, 42)) == (
        "FetchPartition(topic='t', partition=3, fetch_offset=42, partition_max_bytes=1048576, "
        "current_leader_epoch=-1, log_start_offset=-1, last_fetched_epoch=-1, topic_id='AAAAAAAAAAAAAAAAAAAAAA')")
    assert repr(r.FindCoordinatorRequest("g")).startswith("FindCoordinatorRequest(key='g', ")
    assert r.MetadataRequest(["a"]) == r.MetadataRequest(["a"]) != r.MetadataRequest(["b"])
    looped = r.MetadataRequest([])
    looped.topics = looped  # type: ignore[assignment]
    assert repr(looped).startswith("MetadataRequest(topics=..., ")  # as dataclass guards its repr


def test_a_protocol_type_keeps_its_own_equality_and_repr() -> None:
    @r.message
    class Named:
        name: str

        def __eq__(self, other: object) -> bool:
            return isinstance(other, Named) and self.name.lower() == other.name.lower()

        def __repr__(self) -> str:
            return f"<{self.name}>"

    assert Named("A") == Named("a") and repr(Named("A")) == "<A>"

    @r.message
    class Hashed:
        name: str

        def __hash__(self) -> int:
            return len(self.name)

    assert hash(Hashed("abc")) == 3 and Hashed("abc") == Hashed("abc") != Hashed("abd")


def protocol_types() -> list[type]:
    return [cls for cls in vars(r).values()
            if isinstance(cls, type) and dataclasses.is_dataclass(cls) and cls.__module__ == r.__name__
            and cls is not r.RequestContext]


def dataclass_twin(cls: type) -> type:
    """What `@dataclass(slots=True)` makes of the same fields: the reference `requests.message` must match."""
    return dataclasses.make_dataclass(cls.__name__, [
        (f.name, f.type, dataclasses.field(default=f.default, default_factory=f.default_factory))
        for f in dataclasses.fields(cls)], slots=True)


@pytest.mark.parametrize("cls", protocol_types(), ids=lambda cls: cls.__name__)
def test_protocol_types_are_made_as_dataclass_makes_them(cls: type) -> None:
    """`message` makes each type's __init__ (on first use) and docstring itself; both as dataclass's would be."""
    twin = dataclass_twin(cls)
    required = [f.name for f in dataclasses.fields(cls)
                if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
    values = {name: object() for name in required}
    made, expected = cls(*values.values()), twin(*values.values())
    assert [getattr(made, f.name) for f in dataclasses.fields(cls)] == \
        [getattr(expected, f.name) for f in dataclasses.fields(twin)]
    assert cls(**values) == made
    assert str(inspect.signature(cls)) == str(inspect.signature(twin))
    assert cls.__init__.__module__ == r.__name__  # its annotations resolve where the type's do
    hints = typing.get_type_hints(cls)
    assert typing.get_type_hints(cls.__init__) == {**{f.name: hints[f.name] for f in dataclasses.fields(cls)},
                                                   "return": type(None)}
    if cls.__doc__.startswith(f"{cls.__name__}("):  # undocumented: the signature, as dataclass writes it
        assert cls.__doc__ == twin.__doc__.replace(twin.__qualname__, cls.__name__, 1)
    factory_made = [f.name for f in dataclasses.fields(cls) if f.default_factory is not dataclasses.MISSING]
    for name in factory_made:  # a fresh default for every instance, never one shared
        assert getattr(cls(*values.values()), name) is not getattr(made, name)
    with pytest.raises(TypeError, match="missing|positional"):
        cls(*list(values.values())[:-1]) if required else cls(*[object()] * (len(dataclasses.fields(cls)) + 1))
    with pytest.raises(TypeError, match="unexpected keyword argument 'no_such_field'"):
        cls(*values.values(), no_such_field=1)


def test_protocol_types_show_their_signature_before_their_first_instance() -> None:
    """`message` compiles a type's __init__ when it is first looked up: `help()`, `inspect` and Hypothesis's
    `st.builds` read it before any instance exists, and must see the parameters, not a stand-in's."""
    script = (
        "import dataclasses, inspect\n"
        "from kafkalite.network import requests as r\n"
        "types = [c for c in vars(r).values() if isinstance(c, type) and dataclasses.is_dataclass(c)"
        " and c.__module__ == r.__name__]\n"
        "print([str(inspect.signature(c)) for c in types])\n"
        "print([str(inspect.signature(c)) for c in types])\n")
    first, again = subprocess.run([sys.executable, "-c", script], check=True, capture_output=True,
                                  text=True).stdout.splitlines()
    assert first == again and "*args" not in first and "topics: 'list[str] | None' = None" in first


def test_message_refuses_what_it_cannot_make_as_dataclass_would() -> None:
    with pytest.raises(TypeError, match="takes the __init__ that `message` makes"):
        @r.message
        class OwnInit:
            name: str

            def __init__(self, name: str) -> None:
                self.name = name

    with pytest.raises(TypeError, match="all positional parameters"):
        @r.message
        class KeywordOnly:
            name: str = dataclasses.field(kw_only=True)


def test_containers_come_back_as_their_declared_types() -> None:
    shutdown = decode_response(strip_prefix(encode_response(
        1, r.ControlledShutdownResponse(0, [("orders", 0)]))), r.ControlledShutdownResponse)[1]
    assert shutdown.remaining_partitions == [("orders", 0)]
    assert type(shutdown.remaining_partitions[0]) is tuple
    create = decode_request(strip_prefix(encode_request(RequestHeader(r.ApiKey.CREATE_TOPICS, 0, 1, ""), (
        r.CreateTopicsRequest([r.CreatableTopic("t", assignments={0: [1, 2], 7: [3]})])))))[1]
    assert create.topics[0].assignments == {0: [1, 2], 7: [3]}


def test_record_batches_travel_with_their_payload_untouched() -> None:
    original = batch(5, b"x" * 1000, b"y")
    request = r.ProduceRequest(1, 100, [r.ProducePartitionData("t", 0, [original])])
    frame = encode_request(RequestHeader(r.ApiKey.PRODUCE, 0, 1, ""), request)
    assert original.payload in frame
    decoded = decode_request(strip_prefix(frame))[1].partitions[0].batches[0]
    assert type(decoded) is RecordBatch
    assert decoded.payload == original.payload
    assert decoded.to_wire() == original.to_wire()


def test_omitted_trailing_fields_take_their_defaults() -> None:
    header, metadata = decode_request(raw_request(r.ApiKey.METADATA, []))
    assert metadata == r.MetadataRequest()
    _, fetch = decode_request(raw_request(r.ApiKey.FETCH, [1, 500, 1, [["t", 0, 42]]]))
    assert fetch == r.FetchRequest(1, 500, 1, [r.FetchPartition("t", 0, 42)])


@pytest.mark.parametrize(("api_key", "body", "message"), [
    (r.ApiKey.PRODUCE, [1, 100, [["orders", 0, []], [5, 1, []]]],
     "ProduceRequest.partitions[1].topic: expected str, got int"),
    (r.ApiKey.PRODUCE, [True, 100, []], "ProduceRequest.acks: expected int, got bool"),
    (r.ApiKey.PRODUCE, [1, 1.5, []], "ProduceRequest.timeout_ms: expected int, got float"),
    (r.ApiKey.PRODUCE, [1, 100, "orders"], "ProduceRequest.partitions: expected list, got str"),
    (r.ApiKey.PRODUCE, {"acks": 1}, "ProduceRequest: expected ProduceRequest as a list of 3 to 4 fields, got dict"),
    (r.ApiKey.PRODUCE, [1, 100, [["orders", 0, ["batch"]]]],
     "ProduceRequest.partitions[0].batches[0]: expected RecordBatch as a list, got str"),
    (r.ApiKey.METADATA, ["orders"], "MetadataRequest.topics: expected list or None, got str"),
    (r.ApiKey.METADATA, [["a", 3]], "MetadataRequest.topics[1]: expected str, got int"),
    (r.ApiKey.METADATA, [None, 1], "MetadataRequest.allow_auto_topic_creation: expected bool, got int"),
    (r.ApiKey.CONTROLLED_SHUTDOWN, [1, 2, 3],
     "ControlledShutdownRequest: expected 2 fields for ControlledShutdownRequest, got 3"),
    (r.ApiKey.FETCH, [1, 2], "FetchRequest: expected 4 to 10 fields for FetchRequest, got 2"),
    (r.ApiKey.LEADER_AND_ISR, [1, 1, 1, [["t", 0, 1, 1, 1, [1], 0]], []],
     "LeaderAndIsrRequest.partition_states[0]: expected 8 to 9 fields for LeaderAndIsrPartitionState, got 7"),
    (r.ApiKey.CREATE_TOPICS, [[["t", 1, 1, {"0": [1]}]]],
     "CreateTopicsRequest.topics[0].assignments['0']: expected int, got str"),
    (r.ApiKey.CREATE_TOPICS, [[["t", 1, 1, None, {"retention.ms": 1000}]]],
     "CreateTopicsRequest.topics[0].configs['retention.ms']: expected str or None, got int"),
    (r.ApiKey.CREATE_PARTITIONS, [[["t", "4"]]], "CreatePartitionsRequest.topics[0].count: expected int, got str"),
    (r.ApiKey.CREATE_PARTITIONS, [[["t", 4, [[1, "2"]]]]],
     "CreatePartitionsRequest.topics[0].assignments[0][1]: expected int, got str"),
    (r.ApiKey.ELECT_LEADERS, ["preferred"], "ElectLeadersRequest.election_type: expected int, got str"),
    (r.ApiKey.ELECT_LEADERS, [0, [["t", 0, 1]]],
     "ElectLeadersRequest.topic_partitions[0]: expected a tuple of 2, got list of 3"),
    (r.ApiKey.ALTER_PARTITION_REASSIGNMENTS, [[["t", 0, "1,2"]]],
     "AlterPartitionReassignmentsRequest.partitions[0].replicas: expected list or None, got str"),
    (r.ApiKey.LIST_PARTITION_REASSIGNMENTS, [[[0, "t"]]],
     "ListPartitionReassignmentsRequest.topic_partitions[0][0]: expected str, got int"),
])
def test_a_mistyped_body_is_rejected_naming_the_field(api_key: r.ApiKey, body: object, message: str) -> None:
    with pytest.raises(MalformedRequestError) as caught:
        decode_request(raw_request(api_key, body))
    assert caught.value.message == message
    assert caught.value.code == INVALID_REQUEST.code
    assert isinstance(caught.value, InvalidRequestError)
    assert caught.value.header == RequestHeader(api_key, 0, 9, "raw-client")


def test_an_invalid_record_batch_is_rejected_naming_the_field() -> None:
    with pytest.raises(MalformedRequestError) as caught:
        decode_request(raw_request(r.ApiKey.PRODUCE, [1, 100, [["t", 0, [batch().to_wire(), ["junk"]]]]]))
    assert caught.value.message.startswith("ProduceRequest.partitions[0].batches[1]: invalid RecordBatch: ")


@pytest.mark.parametrize(("payload", "message"), [
    (b"\xc1\xc1\xc1", "frame is not valid msgpack"),
    (b"", "frame is not valid msgpack"),
    (msgpack.packb([0, 0, 1, "c", []]) + b"\x00", "frame is not valid msgpack"),
    (msgpack.packb({"api_key": 0}), "request frame: expected [api_key, api_version, correlation_id, client_id, "
                                    "body], got dict"),
    (msgpack.packb([0, 0, 1, []]), "request frame: expected"),
    (msgpack.packb(["0", 0, 1, "c", []]), "request header api_key: expected int, got str"),
    (msgpack.packb([0, 0, 1, None, []]), "request header client_id: expected str, got None"),
])
def test_an_unreadable_header_is_rejected_without_a_header(payload: bytes, message: str) -> None:
    with pytest.raises(MalformedRequestError) as caught:
        decode_request(payload)
    assert caught.value.message.startswith(message)
    assert caught.value.header is None


def test_an_unknown_api_key_keeps_its_header() -> None:
    with pytest.raises(MalformedRequestError, match="unknown API key 99") as caught:
        decode_request(raw_request(99, []))
    assert caught.value.header == RequestHeader(99, 0, 9, "raw-client")


def test_an_unsupported_version_is_rejected_before_the_body_is_read() -> None:
    with pytest.raises(UnsupportedRequestVersionError, match="PRODUCE version 3 is not supported") as caught:
        decode_request(raw_request(r.ApiKey.PRODUCE, "a body of some other version", version=3))
    assert caught.value.code == UNSUPPORTED_VERSION.code
    assert caught.value.header == RequestHeader(r.ApiKey.PRODUCE, 3, 9, "raw-client")


def test_a_mistyped_response_is_rejected_naming_the_field() -> None:
    with pytest.raises(MalformedRequestError) as caught:
        decode_response(msgpack.packb([1, [[["t", 0, "0"]]]]), r.ProduceResponse)
    assert caught.value.message == "ProduceResponse.partitions[0].error_code: expected int, got str"
    with pytest.raises(MalformedRequestError, match="response frame: expected"):
        decode_response(msgpack.packb(["1", []]), r.ProduceResponse)


def test_decode_body_accepts_nested_dataclasses_directly() -> None:
    assert decode_body(r.BrokerEndpoint, ["NATIVE", "h", 1]) == r.BrokerEndpoint("NATIVE", "h", 1)


# ---------------------------------------------------------------------------------------------------------------
# Frames


def frames_of(*payloads: bytes) -> bytes:
    return b"".join(struct.pack(">I", len(payload)) + payload for payload in payloads)


def drain(decoder: FrameDecoder) -> list[bytes]:
    out = []
    while (frame := decoder.next_frame()) is not None:
        out.append(frame)
    return out


@pytest.mark.parametrize("chunk_size", [1, 2, 3, 5, 7, 1000])
def test_frame_decoder_reassembles_frames_from_any_chunking(chunk_size: int) -> None:
    payloads = [b"first", b"", b"x" * 300, b"last"]
    stream = frames_of(*payloads)
    decoder = FrameDecoder(max_frame_bytes=300)
    received = []
    for start in range(0, len(stream), chunk_size):
        decoder.feed(stream[start:start + chunk_size])
        received.extend(drain(decoder))
    assert received == payloads
    assert decoder.buffered_bytes == 0


def test_frame_decoder_reports_a_partial_frame() -> None:
    decoder = FrameDecoder()
    decoder.feed(frames_of(b"whole") + frames_of(b"partial")[:6])
    assert drain(decoder) == [b"whole"]
    assert decoder.buffered_bytes == 6


def test_frame_decoder_rejects_an_oversized_frame_on_its_length_alone() -> None:
    decoder = FrameDecoder(max_frame_bytes=10)
    decoder.feed(frames_of(b"0123456789") + struct.pack(">I", 11))
    assert decoder.next_frame() == b"0123456789"
    with pytest.raises(FrameTooLargeError, match="frame of 11 bytes exceeds the limit of 10 bytes"):
        decoder.next_frame()


# ---------------------------------------------------------------------------------------------------------------
# Error responses


def error_codes(response: r.Response) -> set[int]:
    """Every error code a response carries: its own and its entries'."""
    codes = set()
    if hasattr(response, "error_code"):
        codes.add(response.error_code)
    for f in dataclasses.fields(response):
        value = getattr(response, f.name)
        if isinstance(value, list):
            codes.update(entry.error_code for entry in value if hasattr(entry, "error_code"))
    return codes


@pytest.mark.parametrize("request_", requests(), ids=lambda request: type(request).__name__)
def test_every_request_has_an_error_response_of_its_own_type(request_: r.Request) -> None:
    response = error_response(request_, 37, "bad partitions")
    assert type(response) is r.RESPONSE_TYPES[request_.api_key]
    assert error_codes(response) == {37}
    round_tripped = decode_response(strip_prefix(encode_response(1, response)), type(response))[1]
    assert round_tripped == response


def test_error_responses_without_the_request_exist_only_for_top_level_error_codes() -> None:
    with_top_level_code = {request_type for request_type in r.REQUEST_TYPES.values()
                           if error_response(request_type, 42, "bad") is not None}
    assert with_top_level_code == {r.LeaderAndIsrRequest, r.UpdateMetadataRequest, r.StopReplicaRequest,
                                   r.ControlledShutdownRequest, r.FetchRequest, r.ApiVersionsRequest,
                                   r.InitProducerIdRequest, r.ElectLeadersRequest,
                                   r.AlterPartitionReassignmentsRequest, r.ListPartitionReassignmentsRequest,
                                   r.FindCoordinatorRequest, r.JoinGroupRequest, r.SyncGroupRequest,
                                   r.HeartbeatRequest, r.LeaveGroupRequest, r.OffsetFetchRequest,
                                   r.ListGroupsRequest, r.OffsetDeleteRequest, r.DescribeLogDirsRequest}
    assert error_response(r.ControlledShutdownRequest, 42, "bad") == r.ControlledShutdownResponse(
        42, error_message="bad")
    assert error_response(r.MetadataRequest(topics=None), 42, "bad") is None


def test_api_versions_lists_every_supported_api() -> None:
    response = api_versions_response()
    assert response.error_code == 0
    assert {(v.api_key, v.min_version, v.max_version) for v in response.api_keys} == {
        (int(key), low, high) for key, (low, high) in r.SUPPORTED_VERSIONS.items()}
    assert error_response(r.ApiVersionsRequest, UNSUPPORTED_VERSION.code).api_keys == response.api_keys
