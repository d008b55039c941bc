"""Responses the network edge builds by itself, without a broker: errors and the ApiVersions answer.

Kafka answers a request it cannot serve with the request's own response type carrying the error, because a
client waits for exactly that type under that correlation id. Responses with a top-level `error_code` carry the
error there (a fetch's on every partition too, as Kafka's below version 13). The others report per partition or
per topic, so the error can only be expressed when the decoded request is at hand to list its partitions;
without it there is no response that tells the client anything, and the caller closes the connection instead
(as Kafka does for a request it cannot parse).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from kafkalite.network.requests import (
    AlterConfigsRequest, AlterConfigsResponse, AlterConfigsResult, DescribeConfigsRequest, DescribeConfigsResponse,
    DescribeConfigsResult,
    SUPPORTED_VERSIONS, ApiVersion, ApiVersionsRequest, ApiVersionsResponse, CreatableTopicResult,
    CreatePartitionsRequest, CreatePartitionsResponse, CreatePartitionsTopicResult, CreateTopicsRequest,
    CreateTopicsResponse, DeletableTopicResult, DeleteTopicsRequest, DeleteTopicsResponse,
    EpochEndOffset, ListOffsetsPartitionResponse, ListOffsetsRequest, ListOffsetsResponse, MetadataRequest,
    MetadataResponse, MetadataTopic, OffsetsForLeaderEpochRequest, OffsetsForLeaderEpochResponse,
    ProducePartitionResponse, ProduceRequest, ProduceResponse, Request, Response, RESPONSE_TYPES,
    DeletableGroupResult, DeleteGroupsRequest, DeleteGroupsResponse, DescribedGroup, DescribeGroupsRequest,
    DescribeGroupsResponse, OffsetCommitPartitionResponse, OffsetCommitRequest, OffsetCommitResponse,
    DeleteRecordsPartitionResult, DeleteRecordsRequest, DeleteRecordsResponse, IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse, FetchPartitionResponse, FetchRequest, FetchResponse,
)


def api_versions_response(error_code: int = 0) -> ApiVersionsResponse:
    """The full version table, sent even with an error so that a client can pick a version and retry."""
    return ApiVersionsResponse(error_code, [ApiVersion(int(key), low, high)
                                            for key, (low, high) in sorted(SUPPORTED_VERSIONS.items())])


def _produce(request: Any, code: int, message: str | None) -> Response:
    return ProduceResponse([ProducePartitionResponse(p.topic, p.partition, code, error_message=message)
                            for p in request.partitions])


def _fetch(request: Any, code: int, message: str | None) -> Response:
    """On the whole request and on every partition, as Kafka answers a failed fetch below version 13."""
    return FetchResponse(code, [FetchPartitionResponse(p.topic, p.partition, code, error_message=message)
                                for p in request.partitions])


def _list_offsets(request: Any, code: int, message: str | None) -> Response:
    return ListOffsetsResponse([ListOffsetsPartitionResponse(p.topic, p.partition, code, error_message=message)
                                for p in request.partitions])


def _delete_records(request: Any, code: int, message: str | None) -> Response:
    return DeleteRecordsResponse([DeleteRecordsPartitionResult(p.topic, p.partition, code, error_message=message)
                                  for p in request.partitions])


def _offsets_for_leader_epoch(request: Any, code: int, message: str | None) -> Response:
    return OffsetsForLeaderEpochResponse([EpochEndOffset(p.topic, p.partition, code) for p in request.partitions])


def _metadata(request: Any, code: int, message: str | None) -> Response | None:
    if not request.topics:  # "all topics" has no names to hang the error on
        return None
    return MetadataResponse([], "", -1, [MetadataTopic(code, name, error_message=message)
                                         for name in request.topics])


def _create_topics(request: Any, code: int, message: str | None) -> Response:
    return CreateTopicsResponse([CreatableTopicResult(t.name, code, message) for t in request.topics])


def _delete_topics(request: Any, code: int, message: str | None) -> Response:
    return DeleteTopicsResponse([DeletableTopicResult(name, code, message) for name in request.topic_names])


def _create_partitions(request: Any, code: int, message: str | None) -> Response:
    return CreatePartitionsResponse([CreatePartitionsTopicResult(t.name, code, message) for t in request.topics])


def _describe_configs(request: Any, code: int, message: str | None) -> Response:
    return DescribeConfigsResponse([DescribeConfigsResult(code, r.resource_type, r.name, [], message)
                                    for r in request.resources])


def _alter_configs(request: Any, code: int, message: str | None) -> Response:
    response = IncrementalAlterConfigsResponse if isinstance(request, IncrementalAlterConfigsRequest) \
        else AlterConfigsResponse
    return response([AlterConfigsResult(code, r.resource_type, r.name, message) for r in request.resources])


def _offset_commit(request: Any, code: int, message: str | None) -> Response:
    return OffsetCommitResponse([OffsetCommitPartitionResponse(p.topic, p.partition, code, message)
                                 for p in request.partitions])


def _describe_groups(request: Any, code: int, message: str | None) -> Response:
    return DescribeGroupsResponse([DescribedGroup(code, group, error_message=message) for group in request.groups])


def _delete_groups(request: Any, code: int, message: str | None) -> Response:
    return DeleteGroupsResponse([DeletableGroupResult(group, code, message) for group in request.groups_names])


_PER_ENTRY: dict[type[Request], Callable[[Any, int, str | None], Response | None]] = {
    ProduceRequest: _produce,
    FetchRequest: _fetch,
    ListOffsetsRequest: _list_offsets,
    DeleteRecordsRequest: _delete_records,
    OffsetsForLeaderEpochRequest: _offsets_for_leader_epoch,
    MetadataRequest: _metadata,
    CreateTopicsRequest: _create_topics,
    DeleteTopicsRequest: _delete_topics,
    CreatePartitionsRequest: _create_partitions,
    DescribeConfigsRequest: _describe_configs,
    AlterConfigsRequest: _alter_configs,
    IncrementalAlterConfigsRequest: _alter_configs,
    OffsetCommitRequest: _offset_commit,
    DescribeGroupsRequest: _describe_groups,
    DeleteGroupsRequest: _delete_groups,
}


def error_response(request: Request | type[Request], error_code: int,
                   message: str | None = None) -> Response | None:
    """A response of the request's type reporting `error_code`, or None if that type cannot carry it.

    Pass the decoded request when there is one (a handler failed): per-partition response types then report
    the error on every partition asked for. Pass only the type when the body could not be decoded.
    """
    request_type = request if isinstance(request, type) else type(request)
    if request_type is ApiVersionsRequest:
        return api_versions_response(error_code)
    builder = _PER_ENTRY.get(request_type)
    if builder is not None and not isinstance(request, type):
        return builder(request, error_code, message)
    response_type = RESPONSE_TYPES[request_type.api_key]
    if not any(f.name == "error_code" for f in dataclasses.fields(response_type)):
        return None
    values: dict[str, Any] = {"error_code": error_code}
    if any(f.name == "error_message" for f in dataclasses.fields(response_type)):
        values["error_message"] = message
    return response_type(**values)
