"""Request faults: a test makes chosen requests fail, stall or lose their connection, as franz-go's kfake lets a
test take over a request key (`ControlKey`).

Theory of operation. A `RequestFaults` table is the cluster's; every broker consults it for each request it is
about to serve, after the checks any request meets first (the controller's epochs, the broker's readiness, the
request's bounds), so a fault acts where the broker's own code would. The first fault that matches the request
(its API, the broker, its topics, its client id, and where it comes from) and has hits left takes it, in the
order the faults were added. A fault is one row of actions, applied in this order:

| action            | the client sees                             | the broker did                  |
| ----------------- | ------------------------------------------- | ------------------------------- |
| `delay` seconds   | the answer that late (on Trio's clock)      | held the request, then the rest |
| `error`           | that error on every entry of the answer (*) | nothing                         |
| `drop="request"`  | its connection closed, no answer            | nothing                         |
| `drop="response"` | its connection closed, no answer            | everything (a produce appended) |
| `delay` alone     | the normal answer, that late                | everything                      |

(*) A request that names one of the fault's topics is taken whole. A Metadata answer keeps its brokers and
controller, which Kafka always sends, and carries the error on each topic asked for; a fetch carries it on the
whole request and on each partition, as Kafka's below version 13.

The cluster's own traffic (followers' fetches, the controller's requests, a request one broker passes on to the
controller, and the harness's calls such as `Cluster.create_topic`) is left alone unless the fault asks for it:
a fault on Fetch is meant for the application's consumer, and one that hit the followers as well would shrink
every ISR. A request whose answer cannot carry an error (a Metadata request for all topics has no entry to carry
it) is served as if no error fault existed, and does not count as a hit.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import math
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Literal

import trio

from kafkalite.common import errors
from kafkalite.common.errors import ErrorCode, KafkaError
from kafkalite.network.kafka import kafka_python_import
from kafkalite.network.requests import (
    CLUSTER_ACTIONS, AlterPartitionReassignmentsRequest, ApiKey, CreatePartitionsRequest, CreateTopicsRequest,
    DeleteRecordsRequest, DeleteTopicsRequest, DescribeLogDirsRequest, ElectLeadersRequest, FetchRequest,
    ListOffsetsRequest, ListPartitionReassignmentsRequest, MetadataRequest, MetadataResponse, OffsetCommitRequest,
    OffsetDeleteRequest, OffsetFetchRequest, OffsetsForLeaderEpochRequest, ProduceRequest, Request, RequestContext,
    Response,
)
from kafkalite.network.responses import error_response
from kafkalite.network.transport import ConnectionDropped

log = logging.getLogger(__name__)

Drop = Literal["request", "response"]

_TOPICS: dict[type[Request], Callable[[Any], Iterable[str] | None]] = {
    ProduceRequest: lambda r: (p.topic for p in r.partitions),
    FetchRequest: lambda r: (p.topic for p in r.partitions),
    ListOffsetsRequest: lambda r: (p.topic for p in r.partitions),
    DeleteRecordsRequest: lambda r: (p.topic for p in r.partitions),
    OffsetCommitRequest: lambda r: (p.topic for p in r.partitions),
    OffsetsForLeaderEpochRequest: lambda r: (p.topic for p in r.partitions),
    AlterPartitionReassignmentsRequest: lambda r: (p.topic for p in r.partitions),
    OffsetFetchRequest: lambda r: None if r.partitions is None else (topic for topic, _ in r.partitions),
    OffsetDeleteRequest: lambda r: (topic for topic, _ in r.partitions),
    DescribeLogDirsRequest: lambda r: None if r.topic_partitions is None else (t for t, _ in r.topic_partitions),
    ElectLeadersRequest: lambda r: None if r.topic_partitions is None else (t for t, _ in r.topic_partitions),
    ListPartitionReassignmentsRequest: lambda r: None if r.topic_partitions is None else (t for t, _ in
                                                                                          r.topic_partitions),
    MetadataRequest: lambda r: r.topics,
    CreateTopicsRequest: lambda r: (t.name for t in r.topics),
    CreatePartitionsRequest: lambda r: (t.name for t in r.topics),
    DeleteTopicsRequest: lambda r: r.topic_names,
}
"""The topics each request names, for requests that name topics; None where it means every topic."""

_KEYS_WITH_TOPICS = frozenset(request_type.api_key for request_type in _TOPICS)


def api_name(api: ApiKey) -> str:
    """Kafka's name of an API: ApiKey.OFFSET_FOR_LEADER_EPOCH is OffsetForLeaderEpoch."""
    return "".join(part.capitalize() for part in api.name.split("_"))


_BY_NAME = {api_name(api).lower(): api for api in ApiKey}


def resolve_api(api: ApiKey | str) -> ApiKey:
    """An ApiKey from itself or from Kafka's name of it ("Produce", "OffsetForLeaderEpoch"; any case)."""
    if isinstance(api, ApiKey):
        return api
    if not isinstance(api, str):
        raise TypeError(f"the API must be a Kafka API name such as 'Produce', or an ApiKey, not "
                        f"{type(api).__name__} {api!r}")
    found = _BY_NAME.get(api.replace("_", "").lower())
    if found is None:
        raise ValueError(f"no API {api!r}: the brokers serve {', '.join(sorted(map(api_name, ApiKey)))}")
    return found


def _kafkas(error: str | int) -> ErrorCode | None:
    """One of Kafka's errors that kafkalite does not define, by name or number, from kafka-python's table.

    Imported here, when a fault names such an error (see `load_codec` for why not sooner), in the thread that
    names it."""
    with kafka_python_import():
        import kafka.errors

    for known in kafka.errors.kafka_errors.values():
        if error in (known.message, known.errno):
            return ErrorCode(known.errno, known.message, bool(known.retriable), known.description)
    return None


def resolve_error(error: ErrorCode | type[KafkaError] | str | int) -> ErrorCode:
    """An ErrorCode from itself, its exception class, its name or its number; NONE is no error.

    A name or number may be any of Kafka's, also one kafkalite never answers itself (29,
    TOPIC_AUTHORIZATION_FAILED), looked up in kafka-python's table of Kafka's errors: Kafka's clients know it,
    kafkalite's own see UNKNOWN_SERVER_ERROR.
    """
    if isinstance(error, type) and issubclass(error, KafkaError) and hasattr(error, "error"):
        found: ErrorCode | None = error.error
    elif isinstance(error, ErrorCode):
        found = error
    elif isinstance(error, str):
        found = next((e for e in errors.all_errors() if e.name == error.upper()), None) or _kafkas(error.upper())
    elif isinstance(error, int) and not isinstance(error, bool):
        if not -1 <= error <= 0x7FFF:
            raise ValueError(f"error code {error} is none of Kafka's: they run from -1 up, within an int16")
        found = errors.for_code(error)
        if found.code != error:  # for_code's stand-in for a number it does not know
            found = _kafkas(error) or ErrorCode(error, f"error code {error}", False,
                                                "an error code kafkalite does not define")
    else:
        raise TypeError(f"the error must be an ErrorCode (kafkalite.common.errors.NOT_LEADER_OR_FOLLOWER), its "
                        f"name, its number or its exception class, not {type(error).__name__} {error!r}")
    if found is None:
        raise ValueError(f"no Kafka error {error!r}")
    if found is errors.NONE:
        raise ValueError("NONE is not an error: to slow requests down give only a delay")
    return found


def _default_message(error: ErrorCode | None) -> str:
    """Names the injected error: a client that does not know its code (kafkalite's own, for one such as
    TOPIC_AUTHORIZATION_FAILED) reports UNKNOWN_SERVER_ERROR, and only this message says which error was meant."""
    injected = "a fault the test injected (Cluster.fail_requests)"
    return injected if error is None else f"{error.name} (error code {error.code}), {injected}"


@dataclasses.dataclass(eq=False, repr=False, kw_only=True)
class RequestFault:
    """One fault: which requests it takes, what it does to them, and how many it has taken (`hits`).

    `remove()` ends it; one added with `times` ends by itself after that many hits (`active` then turns false).
    """

    _table: RequestFaults
    id: int
    api: ApiKey
    error: ErrorCode | None
    drop: Drop | None
    delay_s: float
    brokers: frozenset[int] | None
    topics: frozenset[str] | None
    client_id: str | None
    times: int | None
    cluster_traffic: bool
    message: str
    hits: int = 0

    @property
    def active(self) -> bool:
        return self in self._table.faults

    def remove(self) -> None:
        self._table.remove(self)

    def __repr__(self) -> str:
        action = (f"error={self.error.name}" if self.error is not None else
                  f"drop={self.drop!r}" if self.drop is not None else "delay only")
        return (f"<RequestFault #{self.id} {api_name(self.api)} {action} delay={self.delay_s}s hits={self.hits}"
                f"{'' if self.times is None else f'/{self.times}'}{'' if self.active else ' (ended)'}>")

    def _takes(self, broker_id: int, request: Request, context: RequestContext, harness: str) -> bool:
        if request.api_key is not self.api or (self.brokers is not None and broker_id not in self.brokers):
            return False
        if not self.cluster_traffic and (not isinstance(context.source, str) or context.source == harness):
            return False
        if self.client_id is not None and context.client_id != self.client_id:
            return False
        if self.topics is not None:
            named = _TOPICS[type(request)](request)
            if named is not None and self.topics.isdisjoint(named):
                return False
        return self.error is None or error_response(request, self.error.code) is not None

    async def _apply(self, broker_id: int, request: Request, serve: Callable[[], Awaitable[Response]]) -> Response:
        if self.delay_s:
            await trio.sleep(self.delay_s)
        if self.error is not None:
            response = error_response(request, self.error.code, self.message)
            assert response is not None  # checked by _takes
            if isinstance(response, MetadataResponse):  # the brokers and controller still come, as from Kafka
                return dataclasses.replace(await serve(), topics=response.topics)  # type: ignore[type-var]
            return response
        if self.drop == "request":
            raise ConnectionDropped(f"broker {broker_id} dropped the connection before serving "
                                    f"{type(request).__name__}: {self.message}")
        response = await serve()
        if self.drop == "response":
            raise ConnectionDropped(f"broker {broker_id} served {type(request).__name__} and dropped the "
                                    f"connection instead of answering: {self.message}")
        return response


class RequestFaults:
    """The cluster's faults, consulted by every broker; `harness` is the source name of the cluster's own calls."""

    def __init__(self, harness: str) -> None:
        self.faults: tuple[RequestFault, ...] = ()  # replaced, never changed in place: read from another thread
        self._harness = harness
        self._ids = itertools.count(1)

    def add(self, api: ApiKey | str, *, error: ErrorCode | type[KafkaError] | str | int | None = None,
            drop: Drop | None = None, delay_s: float = 0.0, brokers: frozenset[int] | None = None,
            topics: Iterable[str] | None = None, client_id: str | None = None, times: int | None = 1,
            cluster_traffic: bool = False, message: str | None = None) -> RequestFault:
        """A new fault, checked whole first: a fault that could never take a request is refused, naming why."""
        key = resolve_api(api)
        if key is ApiKey.API_VERSIONS:
            raise ValueError("ApiVersions is answered by the listener itself, before any broker code: it cannot be "
                             "failed")
        if key in CLUSTER_ACTIONS and not cluster_traffic:
            raise ValueError(f"{api_name(key)} is the cluster's own traffic: pass cluster_traffic=True to fail it")
        code = None if error is None else resolve_error(error)
        if drop not in (None, "request", "response"):
            raise ValueError(f"drop must be 'request' (before the broker serves it) or 'response' (after), not "
                             f"{drop!r}")
        if code is not None and drop is not None:
            raise ValueError("give an error or a drop, not both: an answered request has no connection to drop")
        if not isinstance(delay_s, (int, float)) or isinstance(delay_s, bool) or not 0 <= delay_s < math.inf:
            raise ValueError(f"delay must be a finite number of seconds >= 0, not {delay_s!r}")
        if code is None and drop is None and not delay_s:
            raise ValueError("the fault does nothing: give an error, a drop or a delay")
        if times is not None and (not isinstance(times, int) or isinstance(times, bool) or times < 1):
            raise ValueError(f"times must be a count >= 1, or None for every matching request, not {times!r}")
        if not isinstance(cluster_traffic, bool):
            raise TypeError(f"cluster_traffic must be True or False, not {cluster_traffic!r}")
        if message is not None and not isinstance(message, str):
            raise TypeError(f"message must be a str, not {type(message).__name__}")
        if client_id is not None and not isinstance(client_id, str):
            raise TypeError(f"client_id must be a str, not {type(client_id).__name__}")
        names = None
        if topics is not None:
            if isinstance(topics, str) or not all(isinstance(t, str) for t in topics):
                raise TypeError(f"topics must be a collection of topic names, not {topics!r}")
            if key not in _KEYS_WITH_TOPICS:
                raise ValueError(f"{api_name(key)} requests name no topics; the APIs that do are "
                                 f"{', '.join(sorted(api_name(k) for k in _KEYS_WITH_TOPICS))}")
            names = frozenset(topics)
        fault = RequestFault(_table=self, id=next(self._ids), api=key, error=code, drop=drop, delay_s=float(delay_s),
                             brokers=brokers, topics=names, client_id=client_id, times=times,
                             cluster_traffic=cluster_traffic,
                             message=message or _default_message(code))
        self.faults = (*self.faults, fault)
        return fault

    def remove(self, fault: RequestFault) -> None:
        self.faults = tuple(f for f in self.faults if f is not fault)

    def clear(self) -> None:
        self.faults = ()

    async def serve(self, broker_id: int, request: Request, context: RequestContext,
                    serve: Callable[[], Awaitable[Response]]) -> Response:
        """`serve()`'s response, unless a fault takes the request: then what the fault makes of it."""
        for fault in self.faults:
            if fault._takes(broker_id, request, context, self._harness):
                break
        else:
            return await serve()
        fault.hits += 1
        if fault.times is not None and fault.hits >= fault.times:
            self.remove(fault)
        log.info("broker %d: %s from %s taken by %r", broker_id, type(request).__name__, context.source, fault)
        return await fault._apply(broker_id, request, serve)
