"""The one door to kafka-python's protocol classes: every other module of the Kafka listener imports them here.

kafka-python (3.0) generates its request and response classes from Apache Kafka's own JSON message schemas,
every version of every API, flexible versions included, with compiled encoders and decoders. They are not
kafka-python's public API, so the version is pinned to a minor range and nothing outside this module names
them: a change upstream is fixed here once.

A message's fields are attributes named as in the schema, in snake_case (`topic_data`, `partition_index`); a
field the decoded version does not have reads as the schema's default. Nested types are reached through the
message class (`ProduceResponse.TopicProduceResponse.PartitionProduceResponse`); `entry` builds one by path.
"""

from __future__ import annotations

import io
import struct
from typing import Any, NamedTuple

from kafkalite.network.kafka import kafka_python_import

with kafka_python_import():
    from kafka.protocol.admin import (
        AlterConfigsRequest, AlterConfigsResponse, AlterPartitionReassignmentsRequest,
        AlterPartitionReassignmentsResponse, CreateAclsRequest, CreateAclsResponse, CreatePartitionsRequest,
        CreatePartitionsResponse, CreateTopicsRequest, CreateTopicsResponse, DeleteAclsRequest, DeleteAclsResponse,
        DeleteGroupsRequest, DeleteGroupsResponse, DeleteRecordsRequest, DeleteRecordsResponse,
        DeleteTopicsRequest, DeleteTopicsResponse, DescribeAclsRequest, DescribeAclsResponse,
        DescribeClusterRequest, DescribeClusterResponse, DescribeConfigsRequest, DescribeConfigsResponse,
        DescribeGroupsRequest, DescribeLogDirsRequest, DescribeLogDirsResponse,
        DescribeGroupsResponse, ElectLeadersRequest, ElectLeadersResponse, IncrementalAlterConfigsRequest,
        IncrementalAlterConfigsResponse, ListGroupsRequest, ListGroupsResponse, ListPartitionReassignmentsRequest,
        ListPartitionReassignmentsResponse,
    )
    from kafka.protocol.consumer import (
        FetchRequest, FetchResponse, HeartbeatRequest, HeartbeatResponse, JoinGroupRequest, JoinGroupResponse,
        LeaveGroupRequest, LeaveGroupResponse, ListOffsetsRequest, ListOffsetsResponse, OffsetCommitRequest,
        OffsetCommitResponse, OffsetDeleteRequest, OffsetDeleteResponse, OffsetFetchRequest, OffsetFetchResponse,
        OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse, SyncGroupRequest, SyncGroupResponse,
    )
    from kafka.protocol.metadata import (
        ApiVersionsRequest, ApiVersionsResponse, FindCoordinatorRequest, FindCoordinatorResponse, MetadataRequest,
        MetadataResponse,
    )
    from kafka.protocol.producer import (
        InitProducerIdRequest, InitProducerIdResponse, ProduceRequest, ProduceResponse,
    )

__all__ = [
    "AlterConfigsRequest", "AlterConfigsResponse", "AlterPartitionReassignmentsRequest",
    "AlterPartitionReassignmentsResponse", "ApiVersionsRequest", "ApiVersionsResponse", "CreateAclsRequest",
    "CreateAclsResponse", "CreatePartitionsRequest", "CreatePartitionsResponse", "CreateTopicsRequest",
    "CreateTopicsResponse", "DeleteAclsRequest", "DeleteAclsResponse", "DeleteGroupsRequest",
    "DeleteGroupsResponse", "DeleteRecordsRequest", "DeleteRecordsResponse", "DeleteTopicsRequest",
    "DeleteTopicsResponse", "DescribeAclsRequest", "DescribeAclsResponse", "DescribeClusterRequest",
    "DescribeClusterResponse", "DescribeConfigsRequest", "DescribeConfigsResponse", "DescribeGroupsRequest",
    "DescribeGroupsResponse", "DescribeLogDirsRequest", "DescribeLogDirsResponse", "ElectLeadersRequest",
    "ElectLeadersResponse", "FetchRequest", "FetchResponse", "FindCoordinatorRequest", "FindCoordinatorResponse",
    "HeartbeatRequest", "HeartbeatResponse", "IncrementalAlterConfigsRequest", "IncrementalAlterConfigsResponse",
    "InitProducerIdRequest", "InitProducerIdResponse", "JoinGroupRequest", "JoinGroupResponse", "LeaveGroupRequest",
    "LeaveGroupResponse", "ListGroupsRequest", "ListGroupsResponse", "ListOffsetsRequest", "ListOffsetsResponse",
    "ListPartitionReassignmentsRequest", "ListPartitionReassignmentsResponse", "Message", "MetadataRequest",
    "MetadataResponse", "OffsetCommitRequest", "OffsetCommitResponse", "OffsetDeleteRequest",
    "OffsetDeleteResponse", "OffsetFetchRequest", "OffsetFetchResponse", "OffsetForLeaderEpochRequest",
    "OffsetForLeaderEpochResponse", "ProduceRequest", "ProduceResponse", "RequestHeader", "SyncGroupRequest",
    "SyncGroupResponse", "decode_request", "encode_response", "entry", "peek_header",
]

Message = Any
"""A kafka-python message or nested struct: untyped upstream, so typed as Any here."""

_HEADER = struct.Struct(">hhi")


class RequestHeader(NamedTuple):
    """The part of Kafka's request header that every version shares: enough to route and answer a request."""

    api_key: int
    api_version: int
    correlation_id: int


def peek_header(frame: bytes) -> RequestHeader | None:
    """The api key, version and correlation id a frame starts with; None if it is too short to hold them."""
    if len(frame) < _HEADER.size:
        return None
    return RequestHeader(*_HEADER.unpack_from(frame))


def decode_request(request_type: Any, frame: bytes, version: int) -> tuple[Message, str | None]:
    """(request, client id) from a whole frame, header included. Raises ValueError for anything malformed;
    kafka-python raises several types for short or inconsistent input, all of which mean a bad frame.

    Bytes after the body are ignored, as Kafka's RequestContext.parseRequest ignores them: the frame's length
    prefix, not the body, keeps the stream in step, and clients depend on it. librdkafka's all-topics Metadata
    (v9 and later: `list_topics()` in confluent-kafka) writes the topic count as four bytes where a one-byte
    varint belongs, and so sends three more bytes than the body holds.
    """
    try:
        reader = io.BytesIO(frame)
        header = request_type.parse_header(reader, version=version)
        flexible = request_type.flexible_version_q(version)
        decode_body = request_type._struct.compiled_decode_from(version, compact=flexible, tagged=flexible,
                                                                data_class=request_type)
        request, _ = decode_body(memoryview(frame), reader.tell())
    except Exception as exc:
        raise ValueError(f"{type(exc).__name__}: {exc}") from None
    request._header = header
    return request, header.client_id


def encode_response(response: Message, version: int, correlation_id: int) -> bytearray:
    """The response as a length-prefixed frame with its response header (v0, or v1 for flexible versions).

    A bytearray of its own, as the codec returns it (a copy out of its per-thread buffer): sockets take it as it
    is, and a fetch response of megabytes is not copied once more into bytes."""
    response.API_VERSION = version  # before the header: kafka-python mirrors the version into a request's header
    response.with_header(correlation_id=correlation_id)
    return response.encode(header=True, framed=True)


def entry(message_type: Any, path: str, **fields: Any) -> Message:
    """A nested struct of `message_type`, named by its dotted type path: `entry(ProduceResponse,
    "TopicProduceResponse.PartitionProduceResponse", index=0, ...)`."""
    cls = message_type
    for name in path.split("."):
        cls = getattr(cls, name)
    return cls(**fields)
