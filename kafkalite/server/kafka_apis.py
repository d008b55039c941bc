"""KafkaApis: one handler per API key, the broker's request edge.

Controller requests (LeaderAndIsr, UpdateMetadata, StopReplica) are fenced here, once, before anything else: a
request from a deposed controller (older controller epoch) or not addressed to this incarnation of the broker
(another broker epoch, or any epoch before the broker has registered) is refused whole and changes nothing.
Every other request waits until the broker is registered and has heard from the controller, as a Kafka
broker serves clients only then: a restarted broker would otherwise answer with an empty or stale picture.
Requests meant for the controller are forwarded to it. Any unexpected failure of a handler becomes
UNKNOWN_SERVER_ERROR in a response of the request's own type, so the client is answered and the broker
keeps serving.
"""

from __future__ import annotations

import dataclasses
import logging
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol

import trio

from kafkalite.common import errors
from kafkalite.common.config import (
    BROKER_CONFIG_KEYS, TOPIC_DEFAULT_FROM_BROKER, BrokerConfig, TopicConfig, optional_config_text,
)
from kafkalite.common.errors import ErrorCode, KafkaError
from kafkalite.common.consumer_protocol import CONSUMER_PROTOCOL_TYPE, decode_assignment, decode_subscription
from kafkalite.common.types import (
    GROUP_METADATA_TOPIC_NAME, INTERNAL_TOPICS, ZERO_UUID, TopicPartition, validate_topic_name,
)
from kafkalite.coordination.errors import CoordinationError
from kafkalite.coordination.kafka_zk import KafkaZkClient
from kafkalite.coordinator import GroupCoordinator
from kafkalite.network.requests import (
    GROUP_KEY_TYPE,
    TRANSACTION_KEY_TYPE,
    DeleteGroupsRequest,
    DescribeGroupsRequest,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    ListGroupsRequest,
    OffsetCommitPartitionResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetDeletePartitionResponse,
    OffsetDeleteRequest,
    OffsetFetchRequest,
    ProducePartitionResponse,
    SyncGroupRequest,
    BROKER_RESOURCE,
    TOPIC_RESOURCE,
    AlterConfigsRequest,
    AlterConfigsResponse,
    AlterConfigsResult,
    DEFAULT_CONFIG_SOURCE,
    STATIC_BROKER_CONFIG_SOURCE,
    TOPIC_CONFIG_SOURCE,
    ConfigEntry,
    ConfigResource,
    ConfigSynonym,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    DescribeConfigsResult,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
    AlterPartitionReassignmentsRequest,
    ApiVersionsRequest,
    ControlledShutdownRequest,
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteRecordsPartitionResult,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    DeleteTopicsRequest,
    DescribeLogDirsRequest,
    ElectLeadersRequest,
    FetchPartitionResponse,
    FetchRequest,
    FetchResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    ListPartitionReassignmentsRequest,
    ListOffsetsRequest,
    MetadataRequest,
    MetadataResponse,
    MetadataTopic,
    CreatableTopic,
    OffsetsForLeaderEpochRequest,
    ProduceRequest,
    ProduceResponse,
    Request,
    RequestContext,
    Response,
    StopReplicaRequest,
    UpdateMetadataRequest,
    UpdateMetadataResponse,
)
from kafkalite.network.responses import api_versions_response, error_response
from kafkalite.network.transport import Transport
from kafkalite.server.metadata_cache import MetadataCache
from kafkalite.server.replica_manager import ReplicaManager
from kafkalite.server.request_faults import RequestFaults

log = logging.getLogger(__name__)

METADATA_CHUNK = 1000  # topics answered between two checkpoints
MAX_PRODUCER_ID = (1 << 63) - 1
MAX_PRODUCER_EPOCH = (1 << 15) - 1  # an int16 on Kafka's wire
# A transactional producer is told what Kafka tells one whose transactional id it may not use: the one answer that
# every client (librdkafka too, which retries any other error at FindCoordinator for ever) takes as final.
_NO_TXN = "kafkalite has no transactions: leave transactional.id unset (an idempotent producer works)"


ControllerRequest = LeaderAndIsrRequest | UpdateMetadataRequest | StopReplicaRequest
CONTROLLER_REQUESTS = (LeaderAndIsrRequest, UpdateMetadataRequest, StopReplicaRequest)


class Controller(Protocol):
    """What a broker needs of the controller living in the same node (kafkalite.controller.KafkaController)."""

    @property
    def is_active(self) -> bool: ...

    async def handle_request(self, request: Request, context: RequestContext) -> Response: ...

    def on_topic_config_change(self) -> None: ...


# What one request may list: (what the entries are, the config key that bounds them, how many it lists). The
# brokers share one thread, so a request naming millions of topics would stall every one of them.
_ENTRIES: dict[type[Request], tuple[str, str, Callable[[Any], int]]] = {
    MetadataRequest: ("topics", "max.topics.per.request", lambda r: len(r.topics or ())),
    CreateTopicsRequest: ("topics", "max.topics.per.request", lambda r: len(r.topics)),
    DeleteTopicsRequest: ("topics", "max.topics.per.request", lambda r: len(r.topic_names)),
    CreatePartitionsRequest: ("topics", "max.topics.per.request", lambda r: len(r.topics)),
    DescribeConfigsRequest: ("resources", "max.topics.per.request", lambda r: len(r.resources)),
    AlterConfigsRequest: ("resources", "max.topics.per.request", lambda r: len(r.resources)),
    IncrementalAlterConfigsRequest: ("resources", "max.topics.per.request", lambda r: len(r.resources)),
    ProduceRequest: ("partitions", "max.partitions.per.request", lambda r: len(r.partitions)),
    FetchRequest: ("partitions", "max.partitions.per.request", lambda r: len(r.partitions)),
    ListOffsetsRequest: ("partitions", "max.partitions.per.request", lambda r: len(r.partitions)),
    DeleteRecordsRequest: ("partitions", "max.partitions.per.request", lambda r: len(r.partitions)),
    DescribeLogDirsRequest: ("partitions", "max.partitions.per.request", lambda r: len(r.topic_partitions or ())),
    OffsetsForLeaderEpochRequest: ("partitions", "max.partitions.per.request", lambda r: len(r.partitions)),
    ElectLeadersRequest: ("partitions", "max.partitions.per.request", lambda r: len(r.topic_partitions or ())),
    AlterPartitionReassignmentsRequest: ("partitions", "max.partitions.per.request", lambda r: len(r.partitions)),
    ListPartitionReassignmentsRequest: ("partitions", "max.partitions.per.request",
                                        lambda r: len(r.topic_partitions or ())),
    OffsetCommitRequest: ("partitions", "max.partitions.per.request", lambda r: len(r.partitions)),
    OffsetFetchRequest: ("partitions", "max.partitions.per.request", lambda r: len(r.partitions or ())),
    OffsetDeleteRequest: ("partitions", "max.partitions.per.request", lambda r: len(r.partitions)),
    JoinGroupRequest: ("protocols", "max.topics.per.request", lambda r: len(r.protocols)),
    SyncGroupRequest: ("assignments", "max.topics.per.request", lambda r: len(r.assignments)),
    LeaveGroupRequest: ("members", "max.topics.per.request", lambda r: len(r.members)),
    DescribeGroupsRequest: ("groups", "max.topics.per.request", lambda r: len(r.groups)),
    DeleteGroupsRequest: ("groups", "max.topics.per.request", lambda r: len(r.groups_names)),
}


def check_request_bounds(request: Request, config: BrokerConfig) -> tuple[ErrorCode, str] | None:
    """INVALID_REQUEST, naming the bound, for a request that asks for more than one request may, or that names
    a negative timeout; None if it may be served. Checked before any work is done."""
    timeout_ms = getattr(request, "timeout_ms", 0)
    if timeout_ms < 0:
        return errors.INVALID_REQUEST, f"timeout_ms is {timeout_ms}; it must be 0 or more"
    bound = _ENTRIES.get(type(request))
    if bound is not None:
        what, key, count = bound
        listed, limit = count(request), config[key]
        if listed > limit:
            return errors.INVALID_REQUEST, (f"{type(request).__name__} lists {listed} {what}; one request may list "
                                            f"at most {limit} ({key})")
    return None


class KafkaApis:
    def __init__(self, broker_id: int, replica_manager: ReplicaManager, metadata_cache: MetadataCache,
                 zk: KafkaZkClient, transport: Transport, broker_epoch: Callable[[], int],
                 group_coordinator: GroupCoordinator, request_faults: RequestFaults | None = None) -> None:
        self.broker_id = broker_id
        self.request_faults = request_faults
        self.group_coordinator = group_coordinator
        self.replica_manager = replica_manager
        self.metadata_cache = metadata_cache
        self.controller: Controller | None = None
        self.cluster_id = ""  # the broker learns it from the coordination service before it serves anyone
        self._zk = zk
        self._transport = transport
        self._broker_epoch = broker_epoch
        self._handlers: dict[type[Request], Callable[[Any, RequestContext], Awaitable[Response]]] = {
            LeaderAndIsrRequest: self.handle_leader_and_isr,
            UpdateMetadataRequest: self.handle_update_metadata,
            StopReplicaRequest: self.handle_stop_replica,
            ControlledShutdownRequest: self.forward_to_controller,
            CreateTopicsRequest: self.handle_create_topics,
            CreatePartitionsRequest: self.handle_create_partitions,
            ElectLeadersRequest: self.forward_to_controller,
            AlterPartitionReassignmentsRequest: self.forward_to_controller,
            ListPartitionReassignmentsRequest: self.forward_to_controller,
            DescribeConfigsRequest: self.handle_describe_configs,
            AlterConfigsRequest: self.handle_alter_configs,
            IncrementalAlterConfigsRequest: self.handle_incremental_alter_configs,
            DeleteTopicsRequest: self.forward_to_controller,
            ProduceRequest: self.handle_produce,
            FetchRequest: self.handle_fetch,
            ListOffsetsRequest: self.handle_list_offsets,
            DeleteRecordsRequest: self.handle_delete_records,
            DescribeLogDirsRequest: self.handle_describe_log_dirs,
            OffsetsForLeaderEpochRequest: self.handle_offsets_for_leader_epoch,
            MetadataRequest: self.handle_metadata,
            ApiVersionsRequest: self.handle_api_versions,
            InitProducerIdRequest: self.handle_init_producer_id,
            FindCoordinatorRequest: self.handle_find_coordinator,
            JoinGroupRequest: self.handle_join_group,
            SyncGroupRequest: self.handle_sync_group,
            HeartbeatRequest: self.handle_heartbeat,
            LeaveGroupRequest: self.handle_leave_group,
            OffsetCommitRequest: self.handle_offset_commit,
            OffsetFetchRequest: self.handle_offset_fetch,
            OffsetDeleteRequest: self.handle_offset_delete,
            DescribeGroupsRequest: self.handle_describe_groups,
            ListGroupsRequest: self.handle_list_groups,
            DeleteGroupsRequest: self.handle_delete_groups,
        }
        self._producer_ids: range = range(0)
        self.controller_epoch = 0  # the highest controller epoch seen; older controllers are fenced
        self._ready = trio.Event()  # registered and told the cluster's state by the controller

    async def handle(self, request: Request, context: RequestContext) -> Response:
        handler = self._handlers.get(type(request))
        if handler is None:
            return self._error_response(request, errors.INVALID_REQUEST,
                                        f"{type(request).__name__} is not served by a broker")
        if isinstance(request, CONTROLLER_REQUESTS):
            fenced = self._fence(request)
            if fenced is not None:
                return self._error_response(request, *fenced)
        else:
            if not self._ready.is_set():
                await self._ready.wait()
            refused = check_request_bounds(request, self.replica_manager.config)
            if refused is not None:
                return self._error_response(request, *refused)
        faults = self.request_faults
        if faults is not None and faults.faults:
            return await faults.serve(self.broker_id, request, context, lambda: self._serve(handler, request, context))
        return await self._serve(handler, request, context)

    def _error_response(self, request: Request, error: ErrorCode, message: str | None = None) -> Response:
        """The request's own response type carrying `error` on the whole request or on every entry of it."""
        response = error_response(request, error.code, message)
        if response is None:  # a Metadata request for all topics has no entry to carry the error
            return MetadataResponse([], self.cluster_id, -1, [])
        return response

    async def _serve(self, handler: Callable[[Any, RequestContext], Awaitable[Response]], request: Request,
                     context: RequestContext) -> Response:
        """The handler's response; its failure as the request's own response type carrying the error."""
        try:
            return await handler(request, context)
        except KafkaError as exc:
            log.info("broker %d: %s from %s failed: %s", self.broker_id, type(request).__name__, context.source, exc)
            return self._error_response(request, exc.error, exc.message)
        except CoordinationError as exc:  # cut off from the service, or between sessions: a passing condition
            log.info("broker %d: %s from %s failed: %s", self.broker_id, type(request).__name__, context.source, exc)
            return self._error_response(request, errors.COORDINATOR_NOT_AVAILABLE,
                                        f"broker {self.broker_id} cannot reach the coordination service now; retry")
        except Exception as exc:
            log.exception("broker %d: %s from %s failed", self.broker_id, type(request).__name__, context.source)
            return self._error_response(request, errors.UNKNOWN_SERVER_ERROR, f"{type(exc).__name__}: {exc}")

    # -- controller requests --------------------------------------------------------------------------------------

    def _fence(self, request: ControllerRequest) -> tuple[ErrorCode, str] | None:
        """Why a controller request must be refused, or None; a request that passes raises the epoch we hold."""
        if request.controller_epoch < self.controller_epoch:
            message = (f"controller {request.controller_id}'s epoch {request.controller_epoch} is older than "
                       f"{self.controller_epoch}")
            log.warning("broker %d: %s refused: %s", self.broker_id, type(request).__name__, message)
            return errors.STALE_CONTROLLER_EPOCH, message
        broker_epoch = self._broker_epoch()
        if broker_epoch < 0 or request.broker_epoch != broker_epoch:
            message = (f"the request is for broker epoch {request.broker_epoch}; broker {self.broker_id}'s is "
                       f"{broker_epoch if broker_epoch >= 0 else 'not registered yet'}")
            # At INFO, as Kafka logs it: a broker restarted before its old registration expired gets the requests
            # the controller meant for the previous incarnation, and the controller tells the new one everything
            # once it registers. A warning here printed a line per request kind on every quick restart in tests.
            log.info("broker %d: %s refused: %s", self.broker_id, type(request).__name__, message)
            return errors.STALE_BROKER_EPOCH, message
        self.controller_epoch = request.controller_epoch
        return None

    async def handle_leader_and_isr(self, request: LeaderAndIsrRequest, context: RequestContext) -> Response:
        topic_configs = await self.replica_manager.read_new_topic_configs(request)
        fenced = self._fence(request)  # again: a newer controller may have spoken while the read waited for the link
        if fenced is not None:
            return self._error_response(request, *fenced)
        response = self.replica_manager.become_leader_or_follower(context.correlation_id, request, topic_configs)
        self._on_leadership_change(request, response)
        return response

    def _on_leadership_change(self, request: LeaderAndIsrRequest, response: LeaderAndIsrResponse) -> None:
        """Kafka's onLeadershipChange: the coordinator takes the offsets partitions this broker now leads and
        gives up those it now follows."""
        offsets_states = [state for state in request.partition_states if state.topic == GROUP_METADATA_TOPIC_NAME]
        if not offsets_states:
            return
        accepted = {partition for topic, partition, error_code in response.partition_errors
                    if topic == GROUP_METADATA_TOPIC_NAME and error_code == errors.NONE.code}
        for state in offsets_states:
            if state.partition in accepted:
                if state.leader == self.broker_id:
                    self.group_coordinator.on_election(state.partition, state.leader_epoch)
                else:
                    self.group_coordinator.on_resignation(state.partition, state.leader_epoch)

    async def handle_update_metadata(self, request: UpdateMetadataRequest, context: RequestContext) -> Response:
        deleted = self.replica_manager.maybe_update_metadata_cache(context.correlation_id, request)
        if deleted:
            self.group_coordinator.on_partitions_deleted(deleted)
        self._ready.set()
        return UpdateMetadataResponse(errors.NONE.code)

    async def handle_stop_replica(self, request: StopReplicaRequest, context: RequestContext) -> Response:
        response = self.replica_manager.stop_replicas(request)
        for stop in request.partitions:
            if stop.topic == GROUP_METADATA_TOPIC_NAME:
                self.group_coordinator.on_resignation(stop.partition, stop.leader_epoch)
        return response

    async def forward_to_controller(self, request: Request, context: RequestContext) -> Response:
        """Serve with the local controller if it is active, else pass the request on to the controller broker.

        A request that already came from another broker is not forwarded again: the sender believed we
        are the controller, and NOT_CONTROLLER tells it to look again instead of bouncing between brokers.

        A controller that goes silent (paused, cut off) does not hold the client past the request's timeout_ms
        (controller.socket.timeout.ms for one without): the request is answered REQUEST_TIMED_OUT then, as a Kafka
        broker's delayed operation answers. It is not sent again to a controller elected meanwhile: the silent
        one may have acted on it already, and the client would be told that its own topic exists.
        """
        controller = self.controller
        if controller is not None and controller.is_active:
            return await controller.handle_request(request, context)
        if isinstance(context.source, int):
            return self._error_response(request, errors.NOT_CONTROLLER,
                                        f"broker {self.broker_id} is not the controller")
        controller_id = self._controller_to_ask()
        if controller_id is None:
            return self._error_response(request, errors.NOT_CONTROLLER, "no controller is known")
        forwarded = RequestContext(self.broker_id, context.listener, context.client_id, context.correlation_id)
        timeout_ms = getattr(request, "timeout_ms", 0)
        bound_ms = timeout_ms if timeout_ms > 0 else self.replica_manager.config["controller.socket.timeout.ms"]
        with trio.move_on_after(bound_ms / 1000):
            return await self._transport.send(self.broker_id, controller_id, request, forwarded)
        return self._error_response(request, errors.REQUEST_TIMED_OUT, (
            f"the controller (broker {controller_id}) did not answer within {bound_ms} ms; what was asked may still "
            "be done"))

    def _controller_to_ask(self) -> int | None:
        """The controller as this broker knows it (its metadata; the coordination service while that names none
        or this broker), None if there is none or it is this broker, whose controller is not active."""
        controller_id = self.metadata_cache.controller_id
        if controller_id is None or controller_id == self.broker_id:
            controller_id = self._zk.get_controller_id()
        return None if controller_id == self.broker_id else controller_id

    async def handle_create_topics(self, request: CreateTopicsRequest, context: RequestContext) -> Response:
        """Create through the controller, then answer once this broker's metadata shows the new leaders.

        As Kafka's delayed create-topics operation does: a client that creates a topic and then asks the same
        broker for its metadata must find it.
        """
        response: CreateTopicsResponse = await self.forward_to_controller(request, context)  # type: ignore[assignment]
        if not request.validate_only:
            await self._await_partitions_online(
                [(result, result.name, result.num_partitions) for result in response.topics], request.timeout_ms)
        if request.include_configs:
            asked = {topic.name: topic.configs for topic in request.topics}
            for result in response.topics:
                if result.error_code == errors.NONE.code:
                    result.configs = self._topic_config_entries(asked[result.name])
        return response

    async def handle_create_partitions(self, request: CreatePartitionsRequest, context: RequestContext) -> Response:
        response: CreatePartitionsResponse = await self.forward_to_controller(request, context)  # type: ignore
        if not request.validate_only:
            counts = {topic.name: topic.count for topic in request.topics}
            await self._await_partitions_online(
                [(result, result.name, counts.get(result.name, 0)) for result in response.results], request.timeout_ms)
        return response

    async def _await_partitions_online(self, results: list[tuple[Any, str, int]], timeout_ms: int) -> None:
        """Wait until this broker's metadata has a leader for each successful result's partitions."""
        waiting = [(result, topic, count) for result, topic, count in results if result.error_code == errors.NONE.code]

        def online(cache: MetadataCache) -> bool:
            return all((info := cache.get_partition_info(TopicPartition(topic, p))) is not None and info.leader >= 0
                       for _, topic, count in waiting for p in range(count))

        with trio.move_on_after(timeout_ms / 1000) as waited:
            await self.metadata_cache.wait_until(online)
        if waited.cancelled_caught:
            for result, _, _ in waiting:
                result.error_code = errors.REQUEST_TIMED_OUT.code
                result.error_message = "Timed out waiting for the new partitions' metadata to reach this broker."

    # -- configs --------------------------------------------------------------------------------------------------

    async def handle_describe_configs(self, request: DescribeConfigsRequest, context: RequestContext) -> Response:
        results = []
        for resource in request.resources:
            try:
                results.append(DescribeConfigsResult(errors.NONE.code, resource.resource_type, resource.name,
                                                     self._describe_configs(resource, request.include_synonyms)))
            except KafkaError as exc:
                results.append(DescribeConfigsResult(exc.code, resource.resource_type, resource.name, [],
                                                     exc.message))
        return DescribeConfigsResponse(results)

    def _describe_configs(self, resource: ConfigResource, include_synonyms: bool = False) -> list[ConfigEntry]:
        """Each config's value and where it comes from: set on the resource, inherited from a broker setting (a
        topic's, as Kafka's STATIC_BROKER_CONFIG, not default), or the default; with `include_synonyms`, every
        place it could come from, in order of precedence (`_synonyms`)."""
        if resource.resource_type == TOPIC_RESOURCE:
            self._require_topic(resource.name)
            return self._topic_config_entries(self._zk.get_topic_config(resource.name), resource.config_names,
                                              include_synonyms)
        if resource.resource_type == BROKER_RESOURCE:
            if resource.name not in ("", str(self.broker_id)):
                raise errors.InvalidRequestError(f"Unexpected broker id, expected {self.broker_id} or empty string, "
                                                 f"but received {resource.name}")  # Kafka's words
            return self._config_entries(BROKER_RESOURCE, self.replica_manager.config, {}, frozenset(),
                                        resource.config_names, include_synonyms)
        raise errors.InvalidRequestError(f"unknown config resource type {resource.resource_type}")

    def _topic_config_entries(self, overrides: Mapping[str, Any], asked: list[str] | None = None,
                              include_synonyms: bool = False) -> list[ConfigEntry]:
        """A topic's configs with `overrides` set on it: as DescribeConfigs describes an existing topic, and
        CreateTopics (v5+) the one it creates."""
        broker_config = self.replica_manager.config
        topic_config = TopicConfig.for_broker(overrides, broker_config)
        own = topic_config.overrides
        inherited = frozenset(name for name, broker_key in TOPIC_DEFAULT_FROM_BROKER.items()
                              if broker_key in broker_config.overrides and name not in own)
        return self._config_entries(TOPIC_RESOURCE, topic_config, own, inherited, asked, include_synonyms)

    def _config_entries(self, resource_type: int, config: Any, own: Mapping[str, Any], inherited: frozenset[str],
                        asked: list[str] | None, include_synonyms: bool) -> list[ConfigEntry]:
        overrides = config.overrides
        entries = []
        for given in asked if asked is not None else sorted(config):
            name = config.canonical_name(given)  # answered under the name asked, an alias too; looked up as its own
            if name is not None:
                entries.append(ConfigEntry(
                    given, optional_config_text(config[name]), name not in overrides and name not in inherited,
                    resource_type == BROKER_RESOURCE, name in inherited,
                    _synonyms(resource_type, name, own, self.replica_manager.config) if include_synonyms else []))
        return entries

    def _require_topic(self, name: str) -> None:
        """INVALID_TOPIC_EXCEPTION for a name no topic can have ("", ".."), UNKNOWN_TOPIC_OR_PARTITION for a topic
        that does not exist; checked before the name becomes a coordination-service path."""
        validate_topic_name(name)
        if self._zk.get_replica_assignment(name) is None:
            raise errors.UnknownTopicOrPartitionError(f"Topic '{name}' does not exist.")

    async def handle_alter_configs(self, request: AlterConfigsRequest, context: RequestContext) -> Response:
        """Validate, write the topic's overrides and announce the change; brokers apply it from the notification.
        A null value is refused, as Kafka's ConfigAdminManager refuses it: the request replaces every override, and
        leaving one out would reset it to its default where the client may have meant something else."""
        def overrides(resource: Any) -> Mapping[str, Any]:
            nulls = [name for name, value in resource.configs.items() if value is None]
            if nulls:
                raise errors.InvalidRequestError(f"Null value not supported for : {', '.join(nulls)}")
            return resource.configs  # type: ignore[no-any-return]

        return AlterConfigsResponse(self._alter_configs(request.resources, request.validate_only, overrides))

    async def handle_incremental_alter_configs(self, request: IncrementalAlterConfigsRequest,
                                               context: RequestContext) -> Response:
        """As AlterConfigs, with the new overrides made from the stored ones and the request's operations. The read
        and the write happen with nothing in between (no await), so concurrent alters of one topic each see the
        other's changes; Kafka's ZooKeeper-era broker read and wrote without that guarantee."""
        def altered(resource: Any) -> dict[str, Any]:
            stored = TopicConfig.for_broker(self._zk.get_topic_config(resource.name), self.replica_manager.config)
            return stored.altered((c.name, c.config_operation, c.value) for c in resource.configs)

        return IncrementalAlterConfigsResponse(self._alter_configs(request.resources, request.validate_only, altered))

    def _alter_configs(self, resources: Sequence[Any], validate_only: bool,
                       overrides_of: Callable[[Any], Mapping[str, Any]]) -> list[AlterConfigsResult]:
        """Each topic's new overrides, `overrides_of(resource)`, checked whole and written unless `validate_only`;
        one result per resource, so one bad resource fails only itself; a resource named twice fails each time it
        is named, as in Kafka, since which one to apply would be a guess."""
        results = []
        counts = Counter((resource.resource_type, resource.name) for resource in resources)
        for resource in resources:
            try:
                if counts[resource.resource_type, resource.name] > 1:
                    raise errors.InvalidRequestError("Each resource must appear at most once.")
                if resource.resource_type != TOPIC_RESOURCE:
                    raise errors.InvalidRequestError("only topic configs can be altered; broker configs are static")
                self._require_topic(resource.name)
                overrides = TopicConfig.for_broker(overrides_of(resource), self.replica_manager.config).overrides
                if not validate_only:
                    self._zk.change_topic_config(resource.name, overrides)
                results.append(AlterConfigsResult(errors.NONE.code, resource.resource_type, resource.name))
            except KafkaError as exc:
                results.append(AlterConfigsResult(exc.code, resource.resource_type, resource.name, exc.message))
        return results

    # -- data path ------------------------------------------------------------------------------------------------

    async def handle_produce(self, request: ProduceRequest, context: RequestContext) -> Response:
        """Clients may not write internal topics: only the coordinators write `__consumer_offsets`, and a record
        of anyone else's there would be replayed as a group or an offset."""
        internal = [p for p in request.partitions if p.topic in INTERNAL_TOPICS]
        if not internal:
            return ProduceResponse(await self.replica_manager.append_records(request.timeout_ms, request.acks,
                                                                             request.partitions))
        allowed = [p for p in request.partitions if p.topic not in INTERNAL_TOPICS]
        results = await self.replica_manager.append_records(request.timeout_ms, request.acks, allowed) if allowed \
            else []
        return ProduceResponse(results + [ProducePartitionResponse(
            p.topic, p.partition, errors.INVALID_TOPIC_EXCEPTION.code,
            error_message=f"{p.topic} is an internal topic; only group coordinators write it") for p in internal])

    async def handle_fetch(self, request: FetchRequest, context: RequestContext) -> Response:
        if request.replica_id < 0 and any(p.topic_id != ZERO_UUID for p in request.partitions):
            return await self._fetch_by_topic_id(request, context)
        return await self.replica_manager.fetch_messages(request, context.hurry)

    async def _fetch_by_topic_id(self, request: FetchRequest, context: RequestContext) -> FetchResponse:
        """A consumer's fetch naming topics by id (Kafka's Fetch v13+): each id found in this broker's metadata,
        as Kafka's handleFetch does; an id it does not know (a topic deleted, or created again under the same name)
        is UNKNOWN_TOPIC_ID, which sends the client to refresh its metadata, and is answered at once."""
        cache, known, unknown, ids = self.metadata_cache, [], [], {}
        for p in request.partitions:
            name = cache.topic_name(p.topic_id) if p.topic_id != ZERO_UUID else p.topic
            if name is None:
                unknown.append(FetchPartitionResponse("", p.partition, errors.UNKNOWN_TOPIC_ID.code,
                                                      error_message=f"no topic has the id {p.topic_id}",
                                                      topic_id=p.topic_id))
            else:
                ids[name] = p.topic_id
                known.append(dataclasses.replace(p, topic=name))
        if not known:
            return FetchResponse(errors.NONE.code, unknown)
        response: FetchResponse = await self.replica_manager.fetch_messages(
            dataclasses.replace(request, partitions=known), context.hurry)  # type: ignore[assignment]
        for answered in response.partitions:
            answered.topic_id = ids.get(answered.topic, ZERO_UUID)
        response.partitions = unknown + response.partitions
        return response

    async def handle_list_offsets(self, request: ListOffsetsRequest, context: RequestContext) -> Response:
        return self.replica_manager.fetch_offsets(request)

    async def handle_delete_records(self, request: DeleteRecordsRequest, context: RequestContext) -> Response:
        """Records of internal topics are not deleted (INVALID_TOPIC_EXCEPTION, as Kafka's ReplicaManager answers):
        `__consumer_offsets` holds the groups and their committed offsets, which its coordinator replays."""
        allowed = [p for p in request.partitions if p.topic not in INTERNAL_TOPICS]
        results = await self.replica_manager.delete_records(request.timeout_ms, allowed)
        return DeleteRecordsResponse(results + [DeleteRecordsPartitionResult(
            p.topic, p.partition, errors.INVALID_TOPIC_EXCEPTION.code,
            error_message=f"cannot delete records of the internal topic {p.topic}")
            for p in request.partitions if p.topic in INTERNAL_TOPICS])

    async def handle_describe_log_dirs(self, request: DescribeLogDirsRequest, context: RequestContext) -> Response:
        return self.replica_manager.describe_log_dirs(request)

    async def handle_offsets_for_leader_epoch(self, request: OffsetsForLeaderEpochRequest,
                                              context: RequestContext) -> Response:
        return self.replica_manager.last_offset_for_leader_epoch(request)

    async def handle_metadata(self, request: MetadataRequest, context: RequestContext) -> Response:
        """Answered from the metadata cache, a thousand topics at a time with a checkpoint between, so a request
        for many topics does not hold up the other brokers; unknown topics are created if allowed."""
        cache = self.metadata_cache
        names = sorted(cache.get_all_topics()) if request.topics is None else request.topics
        topics: list[MetadataTopic] = []
        for start in range(0, len(names), METADATA_CHUNK):
            if start:
                await trio.lowlevel.checkpoint()
            topics += cache.get_topic_metadata(names[start:start + METADATA_CHUNK], context.listener)
        if request.topics is not None and request.allow_auto_topic_creation \
                and self.replica_manager.config["auto.create.topics.enable"]:
            await self._auto_create_topics(topics, context)
        controller_id = cache.controller_id
        return MetadataResponse(cache.get_alive_metadata_brokers(context.listener), self.cluster_id,
                                controller_id if controller_id is not None else -1, topics)

    async def _auto_create_topics(self, topics: list[MetadataTopic], context: RequestContext) -> None:
        """Kafka's auto.create.topics.enable: create the unknown topics with the broker's defaults and answer
        LEADER_NOT_AVAILABLE for them until they are online (the client asks again); a creation that cannot
        succeed (say a default replication factor above the live brokers) is answered with its error."""
        unknown = {topic.name: topic for topic in topics if topic.error_code == errors.UNKNOWN_TOPIC_OR_PARTITION.code}
        if not unknown:
            return
        request = CreateTopicsRequest([CreatableTopic(name) for name in unknown], timeout_ms=0)
        response: CreateTopicsResponse = await self.forward_to_controller(request, context)  # type: ignore
        for result in response.topics:
            topic = unknown[result.name]
            error = errors.for_code(result.error_code)
            if error in (errors.NONE, errors.TOPIC_ALREADY_EXISTS, errors.REQUEST_TIMED_OUT) or error.retriable:
                topic.error_code = errors.LEADER_NOT_AVAILABLE.code
                topic.error_message = f"topic {result.name!r} is being created (auto.create.topics.enable)"
            else:
                topic.error_code, topic.error_message = error.code, result.error_message

    async def handle_init_producer_id(self, request: InitProducerIdRequest, context: RequestContext) -> Response:
        """A new producer id, or, for a producer that names its id and epoch, the same id with the next epoch.

        Bumping the epoch fences the producer's earlier incarnation: its in-flight batches carry the old epoch
        and are refused with INVALID_PRODUCER_EPOCH (KIP-360).
        """
        if request.transactional_id is not None:
            return InitProducerIdResponse(errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED.code, error_message=_NO_TXN)
        producer_id, epoch = request.producer_id, request.producer_epoch
        if not (-1 <= producer_id <= MAX_PRODUCER_ID and -1 <= epoch <= MAX_PRODUCER_EPOCH) \
                or (producer_id < 0) != (epoch < 0):
            return InitProducerIdResponse(errors.INVALID_REQUEST.code, error_message=(
                f"producer id {producer_id} and epoch {epoch}: give both (an id from 0 to {MAX_PRODUCER_ID}, an "
                f"epoch from 0 to {MAX_PRODUCER_EPOCH}) to bump the epoch, or -1 for both to get a new id"))
        if producer_id >= 0:
            if producer_id > self._zk.latest_producer_id():
                return InitProducerIdResponse(errors.UNKNOWN_PRODUCER_ID.code, error_message=(
                    f"producer id {producer_id} was never handed out by this cluster"))
            if epoch < MAX_PRODUCER_EPOCH:
                return InitProducerIdResponse(errors.NONE.code, producer_id, epoch + 1)
            # the epoch is exhausted: a new id, as Kafka's producer id manager gives one
        if not self._producer_ids:
            self._producer_ids = self._zk.allocate_producer_id_block(self.broker_id)
        producer_id, self._producer_ids = self._producer_ids[0], self._producer_ids[1:]
        return InitProducerIdResponse(errors.NONE.code, producer_id, 0)

    async def handle_api_versions(self, request: ApiVersionsRequest, context: RequestContext) -> Response:
        return api_versions_response()

    # -- consumer groups: served by the group coordinator once checked here --------------------------------------

    async def handle_find_coordinator(self, request: FindCoordinatorRequest, context: RequestContext) -> Response:
        """The leader of the group's `__consumer_offsets` partition, creating the topic on first use.

        COORDINATOR_NOT_AVAILABLE while that partition has no live leader: the client asks again after its
        backoff, as it does when Kafka creates the topic.
        """
        if request.key_type == TRANSACTION_KEY_TYPE:
            return FindCoordinatorResponse(errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED.code, error_message=_NO_TXN)
        if request.key_type != GROUP_KEY_TYPE:
            return FindCoordinatorResponse(errors.INVALID_REQUEST.code, error_message=(
                f"key type {request.key_type} is not served: only group coordinators ({GROUP_KEY_TYPE}); "
                "kafkalite has no transactions"))
        if not request.key:
            return FindCoordinatorResponse(errors.INVALID_GROUP_ID.code, error_message="the group id is empty")
        cache = self.metadata_cache
        if not cache.contains_topic(GROUP_METADATA_TOPIC_NAME):
            await self._create_offsets_topic(context)
        tp = TopicPartition(GROUP_METADATA_TOPIC_NAME, self.group_coordinator.partition_for(request.key))
        info = cache.get_partition_info(tp)
        leader = info.leader if info is not None else -1
        node = next((b for b in cache.get_alive_metadata_brokers(context.listener) if b.node_id == leader), None)
        if node is None:
            return FindCoordinatorResponse(errors.COORDINATOR_NOT_AVAILABLE.code, error_message=(
                f"{tp}, which holds group {request.key}, has no live leader yet; retry"))
        return FindCoordinatorResponse(errors.NONE.code, node.node_id, node.host, node.port)

    async def _create_offsets_topic(self, context: RequestContext) -> None:
        """`__consumer_offsets` with offsets.topic.num.partitions, and offsets.topic.replication.factor capped
        at the live brokers; compacted, as in Kafka, which for kafkalite's logs means kept whole: nothing is
        cleaned, and retention deletes nothing from a compacted topic."""
        config = self.replica_manager.config
        partitions = config["offsets.topic.num.partitions"]
        replication = min(config["offsets.topic.replication.factor"], len(self.metadata_cache.get_alive_broker_ids()))
        request = CreateTopicsRequest([CreatableTopic(GROUP_METADATA_TOPIC_NAME, partitions, max(replication, 1),
                                                      configs={"cleanup.policy": "compact"})],
                                      timeout_ms=config["offsets.commit.timeout.ms"])
        response: CreateTopicsResponse = await self.forward_to_controller(request, context)  # type: ignore
        result = response.topics[0]
        if result.error_code not in (errors.NONE.code, errors.TOPIC_ALREADY_EXISTS.code):
            log.warning("broker %d: creating %s failed: %s %s", self.broker_id, GROUP_METADATA_TOPIC_NAME,
                        errors.for_code(result.error_code), result.error_message)
        await self._await_partitions_online([(result, GROUP_METADATA_TOPIC_NAME, partitions)], request.timeout_ms)

    async def handle_join_group(self, request: JoinGroupRequest, context: RequestContext) -> Response:
        if request.protocol_type == CONSUMER_PROTOCOL_TYPE:
            for protocol in request.protocols:
                decode_subscription(protocol.metadata)  # INVALID_REQUEST, naming what is wrong
        return await self.group_coordinator.handle_join_group(request, context.client_id,
                                                              context.client_host or str(context.source))

    async def handle_sync_group(self, request: SyncGroupRequest, context: RequestContext) -> Response:
        """A consumer group's assignment must decode (INVALID_REQUEST, naming what is wrong), or nobody gets it.

        The partitions it names are not looked up, as Kafka stores the bytes as they come: the leader's metadata
        may be ahead of this broker's (partitions just added) or behind it (a topic just deleted), and a refusal
        would fail the rebalance with an error no client expects from SyncGroup."""
        group = self.group_coordinator.group(request.group_id)
        protocol_type = request.protocol_type or (group.protocol_type if group is not None else None)
        if protocol_type == CONSUMER_PROTOCOL_TYPE:
            for entry in request.assignments:
                decode_assignment(entry.assignment)
        return await self.group_coordinator.handle_sync_group(request)

    async def handle_heartbeat(self, request: HeartbeatRequest, context: RequestContext) -> Response:
        return await self.group_coordinator.handle_heartbeat(request)

    async def handle_leave_group(self, request: LeaveGroupRequest, context: RequestContext) -> Response:
        return await self.group_coordinator.handle_leave_group(request)

    async def handle_offset_commit(self, request: OffsetCommitRequest, context: RequestContext) -> Response:
        """Partitions of unknown topics are answered UNKNOWN_TOPIC_OR_PARTITION here, the rest committed.

        Offsets are stored unchecked, as Kafka's broker stores them (its consumers refuse a negative one
        client-side, KAFKA-4081): refusing one would lose the valid commits sent beside it, and a negative offset
        reads back as no committed offset. A leader epoch below -1 (unknown) is refused, as kafkalite's consumer
        would fail on reading it back."""
        for p in request.partitions:
            if p.committed_leader_epoch < -1:
                raise errors.InvalidRequestError(f"commit of {p.topic}-{p.partition}: leader epoch "
                                                 f"{p.committed_leader_epoch} must be -1 (unknown) or more")
        if not request.group_id:
            raise errors.InvalidGroupIdError("the group id is empty")
        known, unknown = [], []
        for p in request.partitions:
            if self.metadata_cache.contains_partition(TopicPartition(p.topic, p.partition)):
                known.append(p)
            else:
                unknown.append(OffsetCommitPartitionResponse(p.topic, p.partition, errors.UNKNOWN_TOPIC_OR_PARTITION.code,
                                                             f"{p.topic}-{p.partition} does not exist"))
        if not known:
            return OffsetCommitResponse(unknown)
        request.partitions = known
        response = await self.group_coordinator.handle_commit_offsets(request)
        return OffsetCommitResponse(response.partitions + unknown)

    async def handle_offset_fetch(self, request: OffsetFetchRequest, context: RequestContext) -> Response:
        return await self.group_coordinator.handle_fetch_offsets(request)

    async def handle_offset_delete(self, request: OffsetDeleteRequest, context: RequestContext) -> Response:
        """As Kafka's: a partition no topic has is UNKNOWN_TOPIC_OR_PARTITION; the group's own errors (no such
        group) still answer the whole request."""
        known, unknown = [], []
        for topic, p in request.partitions:
            if self.metadata_cache.contains_partition(TopicPartition(topic, p)):
                known.append((topic, p))
            else:
                unknown.append(OffsetDeletePartitionResponse(topic, p, errors.UNKNOWN_TOPIC_OR_PARTITION.code,
                                                             f"{topic}-{p} does not exist"))
        request.partitions = known
        response = await self.group_coordinator.handle_delete_offsets(request)
        response.partitions += unknown
        return response

    async def handle_describe_groups(self, request: DescribeGroupsRequest, context: RequestContext) -> Response:
        return await self.group_coordinator.handle_describe_groups(request)

    async def handle_list_groups(self, request: ListGroupsRequest, context: RequestContext) -> Response:
        return await self.group_coordinator.handle_list_groups(request)

    async def handle_delete_groups(self, request: DeleteGroupsRequest, context: RequestContext) -> Response:
        return await self.group_coordinator.handle_delete_groups(request)


def _synonyms(resource_type: int, name: str, own: Mapping[str, Any], broker: BrokerConfig) -> list[ConfigSynonym]:
    """Kafka's synonyms of a config, in order of precedence: a topic's own setting; then the broker property
    that sets the topic's default (a broker's config: itself), as the broker sets it and as its default is. A
    topic config no broker property sets has only its own. Kafka names a few defaults by a property in larger
    units (log.retention.hours for retention.ms); kafkalite names the millisecond property it keeps."""
    found = []
    if resource_type == TOPIC_RESOURCE:
        if name in own:
            found.append(ConfigSynonym(name, optional_config_text(own[name]), TOPIC_CONFIG_SOURCE))
        broker_key = TOPIC_DEFAULT_FROM_BROKER.get(name)
        if broker_key is None:
            return found
        name = broker_key
    set_on_broker = broker.overrides
    if name in set_on_broker:
        found.append(ConfigSynonym(name, optional_config_text(set_on_broker[name]), STATIC_BROKER_CONFIG_SOURCE))
    default = BROKER_CONFIG_KEYS[name].default
    if default is not None:  # Kafka lists no default it does not have
        found.append(ConfigSynonym(name, optional_config_text(default), DEFAULT_CONFIG_SOURCE))
    return found
