"""The admin client: topics, cluster description, offsets and deleting records.

Each call retries what Kafka's AdminClient retries (no controller known, controller moved, broker not
reachable, leader moved) until default.api.timeout.ms, and raises anything else as the KafkaError subclass of
the broker's error code with the broker's message, so `except TopicAlreadyExistsError` works as in Java.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, NamedTuple, TypeVar, cast

import trio

from kafkalite.client.arguments import (
    broker_ids, collection, is_int, mapping, non_negative_int, topic_names, topic_partition, topic_partitions,
)
from kafkalite.client.config import admin_config
from kafkalite.client.metadata import STALE_METADATA_ERRORS, ClusterMetadata
from kafkalite.client.offsets import ListOffsetsResultInfo, list_offsets_once
from kafkalite.client.transport import ClientTransport, ClusterLike, OneBlock, open_transport
from kafkalite.common import errors
from kafkalite.common.config import ConfigOp, config_text, optional_config_text
from kafkalite.common.errors import KafkaError, RequestTimedOutError
from kafkalite.common.types import ZERO_UUID, TopicPartition
from kafkalite.network.requests import (
    BROKER_RESOURCE, EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP, PREFERRED_ELECTION,
    TOPIC_RESOURCE, UNCLEAN_ELECTION, AlterConfigsRequest, AlterConfigsResource, AlterConfigsResponse, ConfigEntry,
    ConfigResource,
    DescribeConfigsRequest, DescribeConfigsResponse, AlterableConfig, IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResource, IncrementalAlterConfigsResponse, AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse, CreatableTopic,
    CreatePartitionsRequest, CreatePartitionsResponse, CreatePartitionsTopic, CreateTopicsRequest,
    CreateTopicsResponse, DeleteRecordsPartition, DeleteRecordsRequest, DeleteRecordsResponse, DeleteTopicsRequest,
    DeleteTopicsResponse, DescribeLogDirsRequest, DescribeLogDirsResponse, ElectLeadersRequest, ElectLeadersResponse,
    ListPartitionReassignmentsRequest, MetadataBroker,
    ListPartitionReassignmentsResponse, OngoingReassignment, ReassignablePartition, Request,
    NO_GENERATION, DeleteGroupsRequest, DeleteGroupsResponse, DescribeGroupsRequest, DescribeGroupsResponse,
    GROUP_STATES, FindCoordinatorRequest, FindCoordinatorResponse, ListGroupsRequest, ListGroupsResponse,
    OffsetCommitPartition, OffsetCommitRequest, OffsetCommitResponse, OffsetFetchRequest, OffsetFetchResponse,
)
from kafkalite.common.consumer_protocol import CONSUMER_PROTOCOL_TYPE, decode_assignment

_T = TypeVar("_T")

OFFSET_SPECS = {"earliest": EARLIEST_TIMESTAMP, "latest": LATEST_TIMESTAMP, "max_timestamp": MAX_TIMESTAMP}
ELECTION_TYPES = {"preferred": PREFERRED_ELECTION, "unclean": UNCLEAN_ELECTION}
_COORDINATOR_MOVED = frozenset({errors.NOT_COORDINATOR.code, errors.COORDINATOR_NOT_AVAILABLE.code,
                                errors.COORDINATOR_LOAD_IN_PROGRESS.code})


@dataclass(slots=True)
class NewTopic:
    name: str
    num_partitions: int = -1  # -1: the broker's num.partitions
    replication_factor: int = -1  # -1: the broker's default.replication.factor
    configs: Mapping[str, Any] = field(default_factory=dict)


class PartitionDescription(NamedTuple):
    partition: int
    leader: int  # -1 while the partition has no leader
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...]


class TopicDescription(NamedTuple):
    name: str
    partitions: tuple[PartitionDescription, ...]
    is_internal: bool
    topic_id: str = ZERO_UUID  # Kafka's (KIP-516), as Uuid.toString prints it; another for a topic created again


class BrokerNode(NamedTuple):
    node_id: int
    host: str
    port: int
    rack: str | None


class ClusterDescription(NamedTuple):
    cluster_id: str
    controller_id: int | None
    brokers: tuple[BrokerNode, ...]


class GroupListing(NamedTuple):
    group_id: str
    protocol_type: str
    state: str
    coordinator: int


class MemberDescription(NamedTuple):
    member_id: str
    group_instance_id: str | None
    client_id: str
    host: str
    assignment: tuple[TopicPartition, ...]


class GroupDescription(NamedTuple):
    group_id: str
    state: str  # Empty, PreparingRebalance, CompletingRebalance, Stable, or Dead (no such group)
    protocol_type: str
    protocol: str  # the assignor in use
    members: tuple[MemberDescription, ...]
    coordinator: int


class GroupOffset(NamedTuple):
    """A group's committed offset of a partition, the partition's end (high watermark) and the difference, the
    lag: end minus committed, unclamped as kafka-consumer-groups reports it, so that an offset committed past the
    end (set there, or the log truncated under it) shows as negative instead of as a group caught up."""

    committed: int
    log_end_offset: int
    lag: int
    metadata: str | None


# kafka-consumer-groups' --reset-offsets specs: what each resets to.
RESET_SPECS = ("earliest", "latest", "offset", "shift", "datetime")


class _Retry(Exception):
    """A retriable outcome inside one attempt; carries the error to raise if time runs out."""

    def __init__(self, error: KafkaError) -> None:
        super().__init__(str(error))
        self.error = error


_call_deadline: ContextVar[float | None] = ContextVar("kafkalite_admin_call_deadline", default=None)
"""When the admin call under way in this task must end (Trio time); None outside one."""

_Call = TypeVar("_Call", bound=Callable[..., Awaitable[Any]])


def _one_deadline(call: _Call) -> _Call:
    """default.api.timeout.ms bounds the whole call, as Kafka's admin client gives each call one deadline. The steps
    of a call (the group's coordinator, then its committed offsets, then their end offsets; one broker after
    another) share it: with a budget each, a call took several times the timeout before it failed."""
    @functools.wraps(call)
    async def bounded(self: Any, *args: Any, **kwargs: Any) -> Any:
        if _call_deadline.get() is not None:  # a step of a call under way: the call's deadline holds
            return await call(self, *args, **kwargs)
        token = _call_deadline.set(trio.current_time() + self._timeout_ms / 1000)
        try:
            return await call(self, *args, **kwargs)
        finally:
            _call_deadline.reset(token)

    return cast(_Call, bounded)


class _GroupAdmin:
    """The admin's consumer-group calls, mixed into Admin: each finds the group's coordinator and asks it."""

    metadata: ClusterMetadata
    _transport: ClientTransport
    _timeout_ms: int
    _with_retries: Callable[..., Awaitable[Any]]
    _each_broker: Callable[..., Awaitable[dict[int, Any]]]
    list_offsets: Callable[..., Awaitable[dict[TopicPartition, ListOffsetsResultInfo]]]

    async def _coordinator_of(self, group_id: str) -> int:
        response: FindCoordinatorResponse = await self._transport.send_to_any(FindCoordinatorRequest(group_id))
        errors.raise_for(response.error_code, response.error_message)
        self._transport.add_node(MetadataBroker(response.node_id, response.host, response.port))
        return response.node_id

    async def _ask_coordinator(self, group_id: str, request: Request, what: str,
                               entries: Callable[[Any], Iterable[Any]] = lambda _: ()) -> tuple[int, Any]:
        """(coordinator, response), asking the group's coordinator found afresh until default.api.timeout.ms.

        An answer that the coordinator moved or is still loading the group is asked again, whether the whole
        response says it or one of its `entries` (DescribeGroups and DeleteGroups answer per group, OffsetCommit
        per partition), as Kafka's admin client does: a group read just after its coordinator failed over meets
        several in a row."""
        if not isinstance(group_id, str):
            raise TypeError(f"{what}() takes a group id (str), not {type(group_id).__name__} {group_id!r}")
        async def attempt() -> tuple[int, Any]:
            coordinator = await self._coordinator_of(group_id)
            response = await self._transport.send(coordinator, request)
            errors.raise_for(getattr(response, "error_code", 0), getattr(response, "error_message", None))
            for entry in entries(response):
                if entry.error_code in _COORDINATOR_MOVED:
                    errors.raise_for(entry.error_code, entry.error_message)
            return coordinator, response

        return await self._with_retries(attempt, what)  # type: ignore[no-any-return]

    @_one_deadline
    async def list_groups(self, states: Sequence[str] = ()) -> list[GroupListing]:
        """Every group of every broker (in the given states, any case), as kafka-consumer-groups --list shows
        them. A name that is no state is refused here: the broker, as Kafka's, would match nothing with it."""
        known = {state.lower() for state in GROUP_STATES}
        for state in collection(states, "list_groups(states=...)", "group states"):
            if not isinstance(state, str) or state.lower() not in known:
                raise ValueError(f"list_groups(states=...): {state!r} is not a group state; the states are "
                                 f"{', '.join(GROUP_STATES)}")
        await self._with_retries(self.metadata.refresh, "list_groups")

        async def attempt(broker: int) -> ListGroupsResponse:
            response: ListGroupsResponse = await self._transport.send(broker, ListGroupsRequest(list(states)))
            errors.raise_for(response.error_code, response.error_message)
            return response

        answers = await self._each_broker(sorted(self.metadata.brokers), attempt, "list_groups")
        return sorted(GroupListing(g.group_id, g.protocol_type, g.group_state, broker)
                      for broker, response in answers.items() for g in response.groups)

    @_one_deadline
    async def describe_groups(self, group_ids: Sequence[str]) -> dict[str, GroupDescription]:
        """State, assignor and members (with their assignments, for consumer groups) of each group."""
        described = {}
        for group_id in topic_names(group_ids, "describe_groups()", "group ids"):
            coordinator, response = await self._ask_coordinator(group_id, DescribeGroupsRequest([group_id]),
                                                                "describe_groups", lambda r: r.groups)
            group = cast(DescribeGroupsResponse, response).groups[0]
            errors.raise_for(group.error_code, group.error_message)
            described[group_id] = GroupDescription(group_id, group.group_state, group.protocol_type,
                                                   group.protocol_data, tuple(
                MemberDescription(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                                  tuple(decode_assignment(m.member_assignment).partitions)
                                  if group.protocol_type == CONSUMER_PROTOCOL_TYPE and m.member_assignment else ())
                for m in group.members), coordinator)
        return described

    @_one_deadline
    async def delete_groups(self, group_ids: Sequence[str]) -> None:
        """Delete empty groups with their offsets (NON_EMPTY_GROUP while a group has members)."""
        for group_id in topic_names(group_ids, "delete_groups()", "group ids"):
            _, response = await self._ask_coordinator(group_id, DeleteGroupsRequest([group_id]), "delete_groups",
                                                      lambda r: r.results)
            result = cast(DeleteGroupsResponse, response).results[0]
            errors.raise_for(result.error_code, result.error_message)

    @_one_deadline
    async def list_group_offsets(self, group_id: str) -> dict[TopicPartition, GroupOffset]:
        """The group's committed offsets, each with its partition's end offset and the lag between them."""
        _, response = await self._ask_coordinator(group_id, OffsetFetchRequest(group_id), "list_group_offsets")
        committed = {TopicPartition(p.topic, p.partition): p for p in cast(OffsetFetchResponse, response).partitions
                     if p.committed_offset >= 0}
        ends = await self.list_offsets({tp: "latest" for tp in committed}) if committed else {}
        return {tp: GroupOffset(p.committed_offset, ends[tp].offset, ends[tp].offset - p.committed_offset, p.metadata)
                for tp, p in sorted(committed.items())}

    @_one_deadline
    async def alter_group_offsets(self, group_id: str, offsets: Mapping[TopicPartition, int]) -> None:
        """Set an empty group's committed offsets (a group with members would overwrite them: NON_EMPTY_GROUP)."""
        wanted = {topic_partition(tp, "alter_group_offsets()"): non_negative_int(o, "offset")
                  for tp, o in mapping(offsets, "alter_group_offsets()", "TopicPartition to offsets").items()}
        await self._require_empty(group_id)
        request = OffsetCommitRequest(group_id, NO_GENERATION, "", [
            OffsetCommitPartition(tp.topic, tp.partition, offset) for tp, offset in sorted(wanted.items())])
        _, response = await self._ask_coordinator(group_id, request, "alter_group_offsets", lambda r: r.partitions)
        for result in cast(OffsetCommitResponse, response).partitions:
            if result.error_code == errors.UNKNOWN_MEMBER_ID.code:  # members joined since the check
                raise errors.NonEmptyGroupError(f"group {group_id} has active members; stop them first")
            errors.raise_for(result.error_code, result.error_message)

    async def _require_empty(self, group_id: str) -> None:
        state = (await self.describe_groups([group_id]))[group_id].state
        if state not in ("Empty", "Dead"):
            raise errors.NonEmptyGroupError(f"group {group_id} is {state}: offsets can be reset only while it has no "
                                            "members; stop its consumers first")

    @_one_deadline
    async def reset_group_offsets(self, group_id: str, partitions: Sequence[TopicPartition], spec: str,
                                  value: int = 0, *, dry_run: bool = False) -> dict[TopicPartition, int]:
        """kafka-consumer-groups --reset-offsets for an empty group: to the "earliest" or "latest" offset, to
        "offset" `value`, "shift" by `value` from the committed offset, or to the first offset at "datetime"
        `value` (epoch ms). Results are clamped to each partition's range. Returns the new offsets."""
        if spec not in RESET_SPECS:
            raise ValueError(f"reset spec must be one of {', '.join(RESET_SPECS)}, not {spec!r}")
        if spec == "offset":
            non_negative_int(value, "the offset to reset to")
        elif spec == "shift" and not is_int(value):
            raise TypeError(f"the shift must be an int, not {type(value).__name__} {value!r}")
        wanted = topic_partitions(partitions, "reset_group_offsets()")
        await self._require_empty(group_id)
        earliest = await self.list_offsets({tp: "earliest" for tp in wanted})
        latest = await self.list_offsets({tp: "latest" for tp in wanted})
        targets: dict[TopicPartition, int] = {}
        if spec == "datetime":
            found = await self.list_offsets({tp: non_negative_int(value, "datetime") for tp in wanted})
            targets = {tp: found[tp].offset if found[tp].offset >= 0 else latest[tp].offset for tp in wanted}
        elif spec == "shift":
            current = await self.list_group_offsets(group_id)
            targets = {tp: (current[tp].committed if tp in current else latest[tp].offset) + value for tp in wanted}
        else:
            fixed = {"earliest": earliest, "latest": latest}
            targets = {tp: fixed[spec][tp].offset if spec in fixed else value for tp in wanted}
        clamped = {tp: min(max(offset, earliest[tp].offset), latest[tp].offset) for tp, offset in targets.items()}
        if not dry_run:
            await self.alter_group_offsets(group_id, clamped)
        return clamped


class Admin(_GroupAdmin):
    """`async with Admin(cluster_or_bootstrap_servers) as admin:`."""

    def __init__(self, bootstrap: ClusterLike | str | ClientTransport, config: Mapping[str, Any] | None = None,
                 **kwargs: Any) -> None:
        self.config = cfg = admin_config({**(config or {}), **kwargs})
        self._transport = open_transport(bootstrap, "admin", cfg)
        self._block = OneBlock()
        self.metadata = ClusterMetadata(self._transport, cfg["retry.backoff.ms"], cfg["metadata.max.age.ms"])
        self._timeout_ms: int = cfg["default.api.timeout.ms"]

    async def __aenter__(self) -> Admin:
        self._block.enter(self._transport.name)
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        if self._transport.owned:
            await self._transport.aclose()

    async def _with_retries(self, attempt: Callable[[], Awaitable[_T]], what: str,
                            final: tuple[type[KafkaError], ...] = ()) -> _T:
        """Run `attempt` until it returns, refreshing metadata after each retriable failure (but `final` ones)."""
        last: KafkaError | None = None
        deadline = _call_deadline.get()
        with trio.move_on_at(trio.current_time() + self._timeout_ms / 1000 if deadline is None else deadline):
            while True:
                try:
                    return await attempt()
                except _Retry as retry:
                    last = retry.error
                except KafkaError as exc:
                    if not exc.retriable or isinstance(exc, final):
                        raise
                    last = exc
                try:
                    await self.metadata.refresh()
                except KafkaError as exc:
                    last = exc
        raise RequestTimedOutError(f"{what} timed out after {self._timeout_ms} ms"
                                   + (f"; last error: {last}" if last is not None else ""))

    async def _each_broker(self, brokers: Sequence[int], attempt: Callable[[int], Awaitable[_T]],
                           what: str) -> dict[int, _T]:
        """`attempt(broker)` with retries for every broker at once, as Kafka's admin client asks them in parallel:
        a slow broker costs the call its own time, not the sum of all, within the call's one deadline. Once every
        broker has answered or failed, the failure of the first in `brokers` is raised."""
        outcomes: dict[int, _T | KafkaError] = {}

        async def ask(broker: int) -> None:
            try:
                outcomes[broker] = await self._with_retries(functools.partial(attempt, broker), what)
            except KafkaError as exc:
                outcomes[broker] = exc

        async with trio.open_nursery() as nursery:
            for broker in brokers:
                nursery.start_soon(ask, broker)
        answers: dict[int, _T] = {}
        for broker in brokers:
            outcome = outcomes[broker]
            if isinstance(outcome, KafkaError):
                raise outcome
            answers[broker] = outcome
        return answers

    async def _send_to_controller(self, request: Request) -> Any:
        """Send to the controller if known; any broker forwards to it otherwise."""
        controller = self.metadata.controller_id
        if controller is None:
            return await self._transport.send_to_any(request)
        return await self._transport.send(controller, request)

    @staticmethod
    def _raise_results(results: Sequence[Any]) -> None:
        for result in results:
            if result.error_code == errors.NOT_CONTROLLER.code:
                raise _Retry(errors.NotControllerError(result.error_message))
        for result in results:
            errors.raise_for(result.error_code, result.error_message)

    # -- topics -------------------------------------------------------------------------------------------------

    @_one_deadline
    async def create_topics(self, new_topics: Sequence[NewTopic], *, validate_only: bool = False) -> None:
        """Create the topics; the first topic's failure is raised (e.g. TopicAlreadyExistsError).

        Arguments of the wrong type raise TypeError here; values of the right type that the brokers refuse (a
        bad name, zero partitions) get Kafka's error codes from them.
        """
        new_topics = [_checked_new_topic(t) for t in collection(new_topics, "create_topics()", "NewTopic")]
        request = CreateTopicsRequest(
            [CreatableTopic(t.name, t.num_partitions, t.replication_factor, None,
                            {k: optional_config_text(v) for k, v in t.configs.items()}) for t in new_topics],
            timeout_ms=self.config["request.timeout.ms"], validate_only=validate_only)

        async def attempt() -> None:
            response: CreateTopicsResponse = await self._send_to_controller(request)
            self._raise_results(response.topics)

        await self._with_retries(attempt, "create_topics")

    @_one_deadline
    async def delete_topics(self, names: Sequence[str]) -> None:
        request = DeleteTopicsRequest(topic_names(names, "delete_topics()"),
                                      timeout_ms=self.config["request.timeout.ms"])

        async def attempt() -> None:
            response: DeleteTopicsResponse = await self._send_to_controller(request)
            self._raise_results(response.responses)

        await self._with_retries(attempt, "delete_topics", final=(errors.UnknownTopicOrPartitionError,))

    @_one_deadline
    async def create_partitions(self, new_totals: Mapping[str, int]) -> None:
        """Grow each topic to its new partition count (INVALID_PARTITIONS if that does not grow it)."""
        totals = mapping(new_totals, "create_partitions()", "topic names to partition counts")
        topic_names(totals, "create_partitions()")
        for topic, total in totals.items():
            if not is_int(total):
                raise TypeError(f"create_partitions() takes int partition counts, not {total!r} for {topic!r}")
        request = CreatePartitionsRequest([CreatePartitionsTopic(t, n) for t, n in totals.items()],
                                          timeout_ms=self.config["request.timeout.ms"])

        async def attempt() -> None:
            response: CreatePartitionsResponse = await self._send_to_controller(request)
            self._raise_results(response.results)

        await self._with_retries(attempt, "create_partitions", final=(errors.UnknownTopicOrPartitionError,))

    @_one_deadline
    async def elect_leaders(self, election_type: str = "preferred",
                            partitions: Sequence[TopicPartition] | None = None) -> dict[TopicPartition, int]:
        """Kafka's ElectLeaders ("preferred" or "unclean"): each partition's error code, 0 where it was elected."""
        if election_type not in ELECTION_TYPES:
            raise ValueError(f"election_type must be 'preferred' or 'unclean', not {election_type!r}")
        request = ElectLeadersRequest(ELECTION_TYPES[election_type], None if partitions is None else [
            (tp.topic, tp.partition) for tp in topic_partitions(partitions, "elect_leaders()")])

        async def attempt() -> dict[TopicPartition, int]:
            response: ElectLeadersResponse = await self._send_to_controller(request)
            self._raise_results([response])
            return {TopicPartition(r.topic, r.partition): r.error_code for r in response.results}

        return await self._with_retries(attempt, "elect_leaders")

    @_one_deadline
    async def alter_partition_reassignments(self, targets: Mapping[TopicPartition, Sequence[int] | None]) -> None:
        """Start moving partitions to new replica lists; `list_partition_reassignments` shows the progress.

        A partition already moving moves to its new list instead, and None cancels its move (back to the
        replicas it had), as Kafka's AlterPartitionReassignments does (KIP-455)."""
        where = "alter_partition_reassignments()"
        request = AlterPartitionReassignmentsRequest([
            ReassignablePartition(*topic_partition(tp, where),
                                  None if replicas is None else broker_ids(replicas, where))
            for tp, replicas in mapping(targets, where, "TopicPartition to broker ids").items()])

        async def attempt() -> None:
            response: AlterPartitionReassignmentsResponse = await self._send_to_controller(request)
            self._raise_results([response])
            self._raise_results(response.responses)

        await self._with_retries(attempt, "alter_partition_reassignments")

    @_one_deadline
    async def list_partition_reassignments(self) -> dict[TopicPartition, OngoingReassignment]:
        async def attempt() -> dict[TopicPartition, OngoingReassignment]:
            response: ListPartitionReassignmentsResponse = await self._send_to_controller(
                ListPartitionReassignmentsRequest())
            self._raise_results([response])
            return {TopicPartition(r.topic, r.partition): r for r in response.reassignments}

        return await self._with_retries(attempt, "list_partition_reassignments")

    @_one_deadline
    async def describe_configs(self, topics: Sequence[str] = (), brokers: Sequence[int] = (), *,
                               include_synonyms: bool = False) -> dict[tuple[str, str], dict[str, ConfigEntry]]:
        """Configs of topics and brokers, keyed ("topic", name) / ("broker", id); entries say what is default.
        `include_synonyms`: each entry also lists where else its value could come from (`ConfigEntry.synonyms`),
        as Kafka's DescribeConfigs does when asked."""
        resources = [ConfigResource(TOPIC_RESOURCE, t) for t in topic_names(topics, "describe_configs()")] + \
            [ConfigResource(BROKER_RESOURCE, str(b)) for b in broker_ids(brokers, "describe_configs()")]
        described: dict[tuple[str, str], dict[str, ConfigEntry]] = {}

        async def attempt() -> dict[tuple[str, str], dict[str, ConfigEntry]]:
            for resource in resources:  # a broker describes its own configs, so each goes to its broker
                node = int(resource.name) if resource.resource_type == BROKER_RESOURCE else None
                request = DescribeConfigsRequest([resource], bool(include_synonyms))
                response: DescribeConfigsResponse = await (self._transport.send(node, request) if node is not None
                                                           else self._transport.send_to_any(request))
                self._raise_results(response.results)
                kind = "topic" if resource.resource_type == TOPIC_RESOURCE else "broker"
                described[(kind, resource.name)] = {entry.name: entry for entry in response.results[0].configs}
            return described

        return await self._with_retries(attempt, "describe_configs", final=(errors.UnknownTopicOrPartitionError,))

    @_one_deadline
    async def alter_topic_configs(self, configs: Mapping[str, Mapping[str, Any]], *,
                                  validate_only: bool = False, incremental: bool = False) -> None:
        """Replace each topic's config overrides (Kafka's AlterConfigs); brokers apply them as they are noticed.

        `incremental=True` changes only the properties named, leaving the topic's other overrides as they are
        (Kafka's IncrementalAlterConfigs); there a value of None deletes the override, back to the default."""
        where = "alter_topic_configs()"
        given = mapping(configs, where, "topic names to config overrides")
        topic_names(given, where)
        topics = {topic: mapping(overrides, where, f"config names to values for {topic!r}")
                  for topic, overrides in given.items()}
        request: AlterConfigsRequest | IncrementalAlterConfigsRequest
        if incremental:
            request = IncrementalAlterConfigsRequest([IncrementalAlterConfigsResource(TOPIC_RESOURCE, topic, [
                AlterableConfig(k, ConfigOp.DELETE, None) if v is None else AlterableConfig(k, ConfigOp.SET,
                                                                                            config_text(v))
                for k, v in overrides.items()]) for topic, overrides in topics.items()], validate_only)
        else:
            request = AlterConfigsRequest([AlterConfigsResource(TOPIC_RESOURCE, topic, {
                k: optional_config_text(v) for k, v in overrides.items()}) for topic, overrides in topics.items()],
                validate_only)

        async def attempt() -> None:
            response: AlterConfigsResponse | IncrementalAlterConfigsResponse = \
                await self._transport.send_to_any(request)
            self._raise_results(response.results)

        await self._with_retries(attempt, "alter_topic_configs", final=(errors.UnknownTopicOrPartitionError,))

    @_one_deadline
    async def list_topics(self) -> list[str]:
        response = await self._with_retries(lambda: self.metadata.fetch(None), "list_topics")
        return sorted(t.name for t in response.topics if t.error_code == errors.NONE.code)

    @_one_deadline
    async def describe_topics(self, names: Sequence[str]) -> dict[str, TopicDescription]:
        """Leader, epoch, replicas and ISR of every partition, as the brokers' metadata has them."""
        topics = topic_names(names, "describe_topics()")
        response = await self._with_retries(lambda: self.metadata.fetch(topics), "describe_topics")
        described = {}
        for topic in response.topics:
            errors.raise_for(topic.error_code, topic.error_message)
            described[topic.name] = TopicDescription(topic.name, tuple(
                PartitionDescription(p.partition, p.leader, p.leader_epoch, tuple(p.replicas), tuple(p.isr),
                                     tuple(p.offline_replicas))
                for p in sorted(topic.partitions, key=lambda p: p.partition)), topic.is_internal, topic.topic_id)
        return described

    @_one_deadline
    async def describe_log_dirs(self, brokers: Sequence[int] = ()) -> dict[int, dict[str, dict[TopicPartition, int]]]:
        """Each broker's log directories (kafkalite's brokers have one, in memory) and the size in bytes of each
        replica in it, as Kafka's describeLogDirs: per broker, the given ones or every live one."""
        asked = broker_ids(brokers, "describe_log_dirs()")
        await self._with_retries(self.metadata.refresh, "describe_log_dirs")
        unknown = sorted(set(asked) - set(self.metadata.brokers))
        if unknown:
            raise errors.BrokerNotAvailableError(f"describe_log_dirs(): no live broker {unknown}; the live brokers are "
                                                 f"{sorted(self.metadata.brokers)}")

        async def attempt(broker: int) -> DescribeLogDirsResponse:
            response: DescribeLogDirsResponse = await self._transport.send(broker, DescribeLogDirsRequest())
            errors.raise_for(response.error_code, response.error_message)
            return response

        answers = await self._each_broker(asked or sorted(self.metadata.brokers), attempt, "describe_log_dirs")
        return {broker: {response.log_dir: {TopicPartition(r.topic, r.partition): r.size for r in response.replicas}}
                for broker, response in answers.items()}

    @_one_deadline
    async def describe_cluster(self) -> ClusterDescription:
        response = await self._with_retries(lambda: self.metadata.fetch([]), "describe_cluster")
        return ClusterDescription(response.cluster_id, self.metadata.controller_id, tuple(
            BrokerNode(b.node_id, b.host, b.port, b.rack) for b in response.brokers))

    # -- offsets ------------------------------------------------------------------------------------------------

    @_one_deadline
    async def list_offsets(self, specs: Mapping[TopicPartition, str | int]
                           ) -> dict[TopicPartition, ListOffsetsResultInfo]:
        """Offsets per partition for "earliest", "latest", "max_timestamp" (the record with the largest
        timestamp, KIP-734) or a timestamp (the first offset at or after it).

        "latest" is the high watermark: what a consumer can read, not what the leader has appended. A lookup by
        time that finds nothing a consumer can read answers offset -1 and timestamp -1, as Kafka does.
        """
        timestamps = {topic_partition(tp, "list_offsets()"): _offset_spec(spec)
                      for tp, spec in mapping(specs, "list_offsets()", "TopicPartition to offset specs").items()}
        found: dict[TopicPartition, ListOffsetsResultInfo] = {}

        async def attempt() -> dict[TopicPartition, ListOffsetsResultInfo]:
            await self._look_up(timestamps)
            self._require_partitions(timestamps)
            missing = await list_offsets_once(self._transport, self.metadata, timestamps, found)
            if missing:
                raise _Retry(errors.NotLeaderOrFollowerError(f"no leader known, or the leader moved, for {missing}"))
            return found

        with self.metadata.transient((tp.topic for tp in timestamps), fresh=True):
            return await self._with_retries(attempt, "list_offsets", final=(errors.UnknownTopicOrPartitionError,))

    @_one_deadline
    async def delete_records(self, offsets: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        """Kafka's deleteRecords: delete every record below each partition's offset (-1: below the high
        watermark). Returns each partition's low watermark, its log start offset from now on on every replica of
        a live broker. Raises UnknownTopicOrPartitionError for a partition that does not exist, and the brokers' errors:
        OffsetOutOfRangeError for an offset beyond the high watermark or negative, InvalidTopicError for an
        internal topic."""
        where = "delete_records()"
        wanted: dict[TopicPartition, int] = {}
        for tp, offset in mapping(offsets, where, "TopicPartition to offsets").items():
            if not is_int(offset):
                raise TypeError(f"{where} takes int offsets (-1: the high watermark), not {offset!r} for {tp!r}")
            wanted[topic_partition(tp, where)] = offset
        low_watermarks: dict[TopicPartition, int] = {}

        async def attempt() -> dict[TopicPartition, int]:
            await self._look_up(wanted)
            remaining = [tp for tp in wanted if tp not in low_watermarks]
            self._require_partitions(remaining)
            stale: list[KafkaError] = []  # leaders moved, or in-sync replicas were slow to follow
            # the leader waits a tenth less than the request may take, so that its answer, and the replicas it
            # names when it gives up waiting for them, arrives before the request times out here
            waited_ms = self.config["request.timeout.ms"] * 9 // 10
            for leader_id, tps in self._by_leader(remaining).items():
                response: DeleteRecordsResponse = await self._transport.send(leader_id, DeleteRecordsRequest(
                    [DeleteRecordsPartition(tp.topic, tp.partition, wanted[tp]) for tp in tps], waited_ms))
                for result in response.partitions:
                    if result.error_code == errors.NONE.code:
                        low_watermarks[TopicPartition(result.topic, result.partition)] = result.low_watermark
                    elif result.error_code in STALE_METADATA_ERRORS:
                        stale.append(errors.for_code(result.error_code).exception(result.error_message))
                    else:
                        errors.raise_for(result.error_code, result.error_message)
            missing = [tp for tp in wanted if tp not in low_watermarks]
            if missing:
                raise _Retry(stale[0] if stale else errors.NotLeaderOrFollowerError(f"no answer for {missing}"))
            return low_watermarks

        with self.metadata.transient((tp.topic for tp in wanted), fresh=True):
            return await self._with_retries(attempt, "delete_records", final=(errors.UnknownTopicOrPartitionError,))

    async def _look_up(self, tps: Iterable[TopicPartition]) -> None:
        """Metadata for the call's partitions, looked up by the call: as Kafka's admin client keeps none between
        calls, each call looks its topics up again (`ClusterMetadata.transient(fresh=True)`), so a topic deleted, or
        created again with other partitions, since the last call is seen as it is now. Looked up again once
        metadata.max.age.ms old, as leaders known that long ago may have moved."""
        if self.metadata.expired() or not all(self.metadata.knows(tp.topic) for tp in tps):
            await self.metadata.refresh()

    def _require_partitions(self, tps: Iterable[TopicPartition]) -> None:
        """UNKNOWN_TOPIC_OR_PARTITION, not a retry, for a partition the metadata says does not exist: Kafka's admin
        fails such a call at once rather than after default.api.timeout.ms."""
        for tp in tps:
            if isinstance(self.metadata.topic_errors.get(tp.topic), errors.UnknownTopicOrPartitionError) \
                    or (tp.topic in self.metadata.topics and not self.metadata.lists(tp)):
                raise errors.UnknownTopicOrPartitionError(f"{tp} does not exist")

    def _by_leader(self, tps: Iterable[TopicPartition]) -> dict[int, list[TopicPartition]]:
        """The partitions grouped by the leader the metadata names; a retry while one has no leader known."""
        by_leader: dict[int, list[TopicPartition]] = {}
        for tp in tps:
            leader = self.metadata.leader_for(tp)
            if leader is None:
                raise _Retry(errors.LeaderNotAvailableError(f"no leader known for {tp}"))
            by_leader.setdefault(leader.leader, []).append(tp)
        return by_leader


def _checked_new_topic(topic: Any) -> NewTopic:
    if not isinstance(topic, NewTopic):
        raise TypeError(f"create_topics() takes NewTopic items, not {topic!r}")
    if not isinstance(topic.name, str):
        raise TypeError(f"a NewTopic name must be a str, not {type(topic.name).__name__}")
    for field_name in ("num_partitions", "replication_factor"):
        if not is_int(getattr(topic, field_name)):
            raise TypeError(f"NewTopic {topic.name!r}: {field_name} must be an int (-1: the broker's default), not "
                            f"{type(getattr(topic, field_name)).__name__}")
    mapping(topic.configs, f"NewTopic {topic.name!r}", "config names to values")
    return topic


def _offset_spec(spec: Any) -> int:
    """"earliest", "latest", "max_timestamp" or a timestamp in epoch milliseconds, as ListOffsets takes it."""
    if isinstance(spec, str):
        if spec not in OFFSET_SPECS:
            raise ValueError(f"an offset spec is 'earliest', 'latest', 'max_timestamp' or a timestamp (int), not "
                             f"{spec!r}")
        return OFFSET_SPECS[spec]
    return non_negative_int(spec, "an offset spec timestamp")
