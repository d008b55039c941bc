"""Request and response types, one pair per Kafka API key, shared by every transport.

The in-process path hands these objects to a broker's `KafkaApis` as they are; the TCP listener encodes the
same objects as msgpack. Field names are Kafka's request schema fields in snake_case, so Kafka's protocol
documentation describes them. Record batches travel as `RecordBatch` objects and are never re-encoded on the
in-process path.

Conventions, as in Kafka: an error that concerns the whole request goes in the response's `error_code`; an
error about one partition goes in that partition's entry and the other partitions are still served.
"""

from __future__ import annotations

import reprlib
import sys
from collections.abc import Callable
from dataclasses import MISSING, Field, dataclass, field, fields
from enum import IntEnum
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar, dataclass_transform

from kafkalite.common.records import RecordBatch
from kafkalite.common.types import ZERO_UUID

if TYPE_CHECKING:
    import trio


class ApiKey(IntEnum):
    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    LEADER_AND_ISR = 4
    STOP_REPLICA = 5
    UPDATE_METADATA = 6
    CONTROLLED_SHUTDOWN = 7
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    API_VERSIONS = 18
    INIT_PRODUCER_ID = 22
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DELETE_RECORDS = 21
    OFFSET_FOR_LEADER_EPOCH = 23
    DESCRIBE_CONFIGS = 32
    ALTER_CONFIGS = 33
    DESCRIBE_LOG_DIRS = 35
    CREATE_PARTITIONS = 37
    ELECT_LEADERS = 43
    DELETE_GROUPS = 42
    INCREMENTAL_ALTER_CONFIGS = 44
    ALTER_PARTITION_REASSIGNMENTS = 45
    LIST_PARTITION_REASSIGNMENTS = 46
    OFFSET_DELETE = 47


CLUSTER_ACTIONS: frozenset[ApiKey] = frozenset({ApiKey.LEADER_AND_ISR, ApiKey.STOP_REPLICA, ApiKey.UPDATE_METADATA,
                                               ApiKey.CONTROLLED_SHUTDOWN})
"""The cluster's own traffic (Kafka's ClusterAction operations): it travels the in-process transport, and a
client listener refuses it with CLUSTER_AUTHORIZATION_FAILED, as a Kafka broker refuses it to a client."""

# Sentinels Kafka gives meaning to.
NO_LEADER = -1
LEADER_DURING_DELETE = -2  # in UpdateMetadata: the topic is being deleted, drop it from the metadata cache
CONSUMER_REPLICA_ID = -1  # Fetch/ListOffsets from a client rather than a follower
EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
MAX_TIMESTAMP = -3  # ListOffsets: the record with the largest timestamp (KIP-734)
UNDEFINED_EPOCH = -1
HIGH_WATERMARK = -1  # DeleteRecords: delete every record below the high watermark
UNDEFINED_EPOCH_OFFSET = -1
READ_UNCOMMITTED = 0
READ_COMMITTED = 1


class Hurry:
    """A sender's way to have its request in flight answered now with what the handler has, instead of after a
    wait: a follower given new partitions while its fetch is parked at the leader. Abandoning the request would
    lose its response, and with it what the leader's fetch session moved on to (KIP-227).

    The channel `reset`s it for each request; a handler about to wait hands its wake-up event to `park`, which
    refuses when the sender hurried already, and calls `unpark` when the wait ends.
    """

    __slots__ = ("hurried", "_wake")

    def __init__(self) -> None:
        self.hurried = False
        self._wake: trio.Event | None = None

    def reset(self) -> None:
        self.hurried = False

    def hurry(self) -> None:
        self.hurried = True
        if self._wake is not None:
            self._wake.set()

    def park(self, wake: trio.Event) -> bool:
        """Whether the handler may wait: `wake` is set if the sender hurries while it does."""
        if self.hurried:
            return False
        self._wake = wake
        return True

    def unpark(self) -> None:
        self._wake = None


@dataclass(frozen=True, slots=True)
class RequestContext:
    """Who sent a request and on which listener: the parts of Kafka's request header a handler needs."""

    source: int | str  # broker id for inter-broker traffic, a client name otherwise
    listener: str = "NATIVE"
    client_id: str = ""
    correlation_id: int = 0
    hurry: Hurry | None = None  # on an in-process channel whose sender may want an answer before the wait is over
    client_host: str = ""  # a TCP client's address as Kafka's group descriptions show it ("/127.0.0.1")


_M = TypeVar("_M")


@dataclass_transform(field_specifiers=(field,))
def message(cls: type[_M]) -> type[_M]:
    """`@dataclass(slots=True)` for the protocol's types, with equality and repr made once here instead of generated
    (compiled from source) for each of the hundred-odd classes, much of what importing this module cost: every
    Spark query pays that import in the fresh process Spark starts for its planning. Equal and shown as a dataclass
    would be, and unhashable like one. Its `__init__` is also made here, as dataclass would make it, but when it is
    first looked up (`_LazyInit`): a process uses a few of these types, and compiling the others' was a third of
    the import. A class without a docstring gets the one dataclass would give it, its signature, formatted from its
    fields rather than by `inspect.signature`."""
    undocumented = not cls.__doc__
    if undocumented:
        cls.__doc__ = cls.__name__  # for now: dataclass leaves a docstring alone
    if "__init__" in cls.__dict__ or "__post_init__" in cls.__dict__:
        raise TypeError(f"{cls.__name__}: a protocol type takes the __init__ that `message` makes")
    made = dataclass(slots=True, eq=False, repr=False, init=False)(cls)
    parameters = [f for f in fields(made) if f.init]
    if len(parameters) != len(fields(made)) or any(f.kw_only for f in parameters):
        raise TypeError(f"{cls.__name__}: a protocol type's fields are all positional parameters of its __init__")
    if undocumented:
        made.__doc__ = f"{cls.__name__}({', '.join(_parameter(f) for f in parameters)})"
    made.__init__ = _LazyInit(made, parameters)  # type: ignore[assignment, method-assign]
    compared = tuple(f.name for f in fields(made) if f.compare)
    shown = tuple(f.name for f in fields(made) if f.repr)

    def __eq__(self: Any, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return [getattr(self, name) for name in compared] == [getattr(other, name) for name in compared]

    @reprlib.recursive_repr()
    def __repr__(self: Any) -> str:
        return f"{type(self).__qualname__}({', '.join(f'{name}={getattr(self, name)!r}' for name in shown)})"

    if "__eq__" not in cls.__dict__:  # as dataclass keeps a class's own
        made.__eq__ = __eq__  # type: ignore[assignment,method-assign]
        if "__hash__" not in cls.__dict__:
            made.__hash__ = None  # type: ignore[assignment]
    if "__repr__" not in cls.__dict__:
        made.__repr__ = __repr__  # type: ignore[assignment,method-assign]
    return made


class _LazyInit:
    """A protocol type's `__init__` until it is first looked up, to be called or read (`inspect.signature`,
    `help`): then the one `_init` makes, put in its place on the class for good."""

    __slots__ = ("cls", "parameters")

    def __init__(self, cls: type, parameters: list[Field[Any]]) -> None:
        self.cls, self.parameters = cls, parameters

    def __get__(self, instance: object, owner: type | None = None) -> Any:
        init = _init(self.cls, self.parameters)
        setattr(self.cls, "__init__", init)
        return init.__get__(instance, owner)


def _init(cls: type, parameters: list[Field[Any]]) -> Callable[..., None]:
    """The `__init__` dataclass makes for `cls`, made as dataclass makes it: each parameter assigned, defaults and
    default factories alike, compiled in the class's module, so its annotations resolve there."""
    values: dict[str, Any] = {"_NO_ARGUMENT": _NO_ARGUMENT}
    signature, body = [], []
    for f in parameters:
        if f.default is not MISSING:
            values[f"_default_{f.name}"] = f.default
            signature.append(f"{f.name}=_default_{f.name}")
            body.append(f"self.{f.name} = {f.name}")
        elif f.default_factory is not MISSING:
            values[f"_factory_{f.name}"] = f.default_factory
            signature.append(f"{f.name}=_NO_ARGUMENT")
            body.append(f"self.{f.name} = _factory_{f.name}() if {f.name} is _NO_ARGUMENT else {f.name}")
        else:
            signature.append(f.name)
            body.append(f"self.{f.name} = {f.name}")
    source = (f"def make({', '.join(values)}):\n"
              f" def __init__(self, {', '.join(signature)}):\n  " + ("\n  ".join(body) or "pass") + "\n"
              " return __init__")
    made: dict[str, Any] = {}
    exec(source, sys.modules[cls.__module__].__dict__, made)  # a function of its own is the fastest to call
    init: Callable[..., None] = made["make"](**values)
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__annotations__ = {**{f.name: f.type for f in parameters}, "return": None}
    return init


class _NoArgument:
    """A default factory's parameter left out (dataclass's `_HAS_DEFAULT_FACTORY`), shown as dataclass shows it."""

    def __repr__(self) -> str:
        return "<factory>"


_NO_ARGUMENT = _NoArgument()


def _parameter(f: Field[Any]) -> str:
    """A field as `inspect.signature` shows it in a dataclass's docstring (the annotations are strings here)."""
    if f.default is not MISSING:
        return f"{f.name}: {f.type!r} = {f.default!r}"
    return f"{f.name}: {f.type!r}" + (" = <factory>" if f.default_factory is not MISSING else "")


class Request:
    api_key: ClassVar[ApiKey]


class Response:
    pass


# ---------------------------------------------------------------------------------------------------------------
# Controller -> broker (seeds 000, 001, 003)


@message
class LeaderAndIsrPartitionState:
    """One partition's leadership, shared by every broker the batch tells: tuples, as in
    `UpdateMetadataPartitionState`, so no broker can change it under another and the cyclic GC does not track
    the replica lists of a 100,000-partition LeaderAndIsr."""

    topic: str
    partition: int
    controller_epoch: int
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    zk_version: int
    replicas: tuple[int, ...]
    is_new: bool = False


@message
class BrokerEndpoint:
    listener: str
    host: str
    port: int
    security_protocol: str = "PLAINTEXT"


@message
class LiveBroker:
    id: int
    endpoints: list[BrokerEndpoint]
    rack: str | None = None


@message
class LeaderAndIsrRequest(Request):
    api_key: ClassVar[ApiKey] = ApiKey.LEADER_AND_ISR
    controller_id: int
    controller_epoch: int
    broker_epoch: int
    partition_states: list[LeaderAndIsrPartitionState]
    live_leaders: list[LiveBroker]


@message
class PartitionError:
    topic: str
    partition: int
    error_code: int


@message
class LeaderAndIsrResponse(Response):
    error_code: int
    # (topic, partition, error code) of every partition the request named, as plain tuples, which the cyclic GC
    # stops tracking: a new controller names every partition, and objects made by the ten thousand outlive enough
    # young collections to bring on a full one
    partition_errors: list[tuple[str, int, int]] = field(default_factory=list)


@message
class UpdateMetadataPartitionState:
    """One partition's metadata. Every broker's cache keeps the controller's object as sent, so its replica lists
    are tuples: nobody can change them under another broker, and the cyclic GC does not track a tuple of ints
    (a 100,000-partition cluster keeps 300,000 of them)."""

    topic: str
    partition: int
    controller_epoch: int
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    zk_version: int
    replicas: tuple[int, ...]
    offline_replicas: tuple[int, ...] = ()


@message
class UpdateMetadataRequest(Request):
    api_key: ClassVar[ApiKey] = ApiKey.UPDATE_METADATA
    controller_id: int
    controller_epoch: int
    broker_epoch: int
    partition_states: list[UpdateMetadataPartitionState]
    live_brokers: list[LiveBroker]
    topic_ids: dict[str, str] = field(default_factory=dict)  # of the topics whose partitions it names


@message
class UpdateMetadataResponse(Response):
    error_code: int


@message
class StopReplicaPartition:
    topic: str
    partition: int
    delete_partition: bool
    leader_epoch: int = -1


@message
class StopReplicaRequest(Request):
    api_key: ClassVar[ApiKey] = ApiKey.STOP_REPLICA
    controller_id: int
    controller_epoch: int
    broker_epoch: int
    partitions: list[StopReplicaPartition]


@message
class StopReplicaResponse(Response):
    error_code: int
    partition_errors: list[PartitionError] = field(default_factory=list)


@message
class ControlledShutdownRequest(Request):
    api_key: ClassVar[ApiKey] = ApiKey.CONTROLLED_SHUTDOWN
    broker_id: int
    broker_epoch: int


@message
class ControlledShutdownResponse(Response):
    error_code: int
    remaining_partitions: list[tuple[str, int]] = field(default_factory=list)
    error_message: str | None = None


# ---------------------------------------------------------------------------------------------------------------
# Replication and clients


@message
class ProducePartitionData:
    topic: str
    partition: int
    batches: list[RecordBatch]


@message
class ProduceRequest(Request):
    api_key: ClassVar[ApiKey] = ApiKey.PRODUCE
    acks: int
    timeout_ms: int
    partitions: list[ProducePartitionData]
    transactional_id: str | None = None


@message
class ProducePartitionResponse:
    topic: str
    partition: int
    error_code: int
    base_offset: int = -1
    log_append_time: int = -1
    log_start_offset: int = -1
    error_message: str | None = None


@message
class ProduceResponse(Response):
    partitions: list[ProducePartitionResponse]


@message
class FetchPartition:
    topic: str
    partition: int
    fetch_offset: int
    partition_max_bytes: int = 1048576
    current_leader_epoch: int = -1
    log_start_offset: int = -1
    # a follower checking its log against the leader's (KIP-595's truncation on fetch): the epoch of its last
    # record, which the leader's log must hold up to fetch_offset; UNDEFINED_EPOCH (consumers): no check
    last_fetched_epoch: int = -1
    # a consumer naming the topic by its id (Kafka's Fetch v13+): `topic` is then found from it, by the broker
    topic_id: str = ZERO_UUID


@message
class ForgottenPartition:
    topic: str
    partition: int


@message
class FetchRequest(Request):
    api_key: ClassVar[ApiKey] = ApiKey.FETCH
    replica_id: int
    max_wait_ms: int
    min_bytes: int
    partitions: list[FetchPartition]
    max_bytes: int = 52428800
    isolation_level: int = READ_UNCOMMITTED
    broker_epoch: int = -1  # a follower's own broker epoch, so a leader can ignore fetches from a dead incarnation
    # A follower's incremental fetch session (KIP-227, server/fetch_session.py): id 0 opens one; epoch -1 is a
    # fetch without a session; `partitions` then names only what changed, and `forgotten` what left.
    session_id: int = 0
    session_epoch: int = -1
    forgotten: list[ForgottenPartition] = field(default_factory=list)


@message
class FetchPartitionResponse:
    topic: str
    partition: int
    error_code: int
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    batches: list[RecordBatch] = field(default_factory=list)
    error_message: str | None = None
    # Kafka's DivergingEpoch: the follower's last fetched epoch is not the leader's up to its fetch offset. The
    # largest epoch the leader has up to the follower's, and where it ends there; the follower truncates by them
    # as by an OffsetsForLeaderEpoch answer. -1: no divergence (or not checked)
    diverging_epoch: int = -1
    diverging_end_offset: int = -1
    topic_id: str = ZERO_UUID  # as the request named the topic, when it did by id


@message
class FetchResponse(Response):
    error_code: int
    partitions: list[FetchPartitionResponse] = field(default_factory=list)
    session_id: int = 0  # the follower's session, when it fetched in one


@message
class ListOffsetsPartition:
    topic: str
    partition: int
    timestamp: int  # EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, or epoch milliseconds
    current_leader_epoch: int = -1


@message
class ListOffsetsRequest(Request):
    api_key: ClassVar[ApiKey] = ApiKey.LIST_OFFSETS
    replica_id: int
    partitions: list[ListOffsetsPartition]
    isolation_level: int = READ_UNCOMMITTED


@message
class ListOffsetsPartitionResponse:
    topic: str
    partition: int
    error_code: int
    timestamp: int = -1
    offset: int = -1
    leader_epoch: int = -1
    error_message: str | None = None


@message
class ListOffsetsResponse(Response):
    partitions: list[ListOffsetsPartitionResponse]


@message
class DeleteRecordsPartition:
    topic: str
    partition: int
    offset: int  # records below it are deleted; HIGH_WATERMARK: every record below the high watermark


@message
class DeleteRecordsRequest(Request):
    """Kafka's DeleteRecords: each partition's leader moves its log start offset to the offset given."""

    api_key: ClassVar[ApiKey] = ApiKey.DELETE_RECORDS
    partitions: list[DeleteRecordsPartition]
    timeout_ms: int = 30000  # how long to wait for the in-sync replicas to move their log start as well


@message
class DeleteRecordsPartitionResult:
    topic: str
    partition: int
    error_code: int
    low_watermark: int = -1  # the partition's log start offset once the deletion is done
    error_message: str | None = None


@message
class DeleteRecordsResponse(Response):
    partitions: list[DeleteRecordsPartitionResult]


@message
class DescribeLogDirsRequest(Request):
    """The replicas a broker holds, with their sizes (Kafka's DescribeLogDirs, asked of each broker)."""

    api_key: ClassVar[ApiKey] = ApiKey.DESCRIBE_LOG_DIRS
    topic_partitions: list[tuple[str, int]] | None = None  # None: every replica the broker holds


@message
class LogDirReplica:
    topic: str
    partition: int
    size: int  # bytes of record batches the replica's log holds
    offset_lag: int  # how far the log end is behind the high watermark (0), or -1 for a replica not online


@message
class DescribeLogDirsResponse(Response):
    error_code: int
    log_dir: str = ""
    replicas: list[LogDirReplica] = field(default_factory=list)
    error_message: str | None = None


@message
class OffsetForLeaderPartition:
    topic: str
    partition: int
    leader_epoch: int
    current_leader_epoch: int = -1


@message
class OffsetsForLeaderEpochRequest(Request):
    api_key: ClassVar[ApiKey] = ApiKey.OFFSET_FOR_LEADER_EPOCH
    replica_id: int
    partitions: list[OffsetForLeaderPartition]


@message
class EpochEndOffset:
    topic: str
    partition: int
    error_code: int
    leader_epoch: int = UNDEFINED_EPOCH
    end_offset: int = UNDEFINED_EPOCH_OFFSET


@message
class OffsetsForLeaderEpochResponse(Response):
    partitions: list[EpochEndOffset]


@message
class MetadataRequest(Request):
    api_key: ClassVar[ApiKey] = ApiKey.METADATA
    topics: list[str] | None = None  # None: every topic
    allow_auto_topic_creation: bool = False


@message
class MetadataBroker:
    node_id: int
    host: str
    port: int
    rack: str | None = None


@message
class MetadataPartition:
    error_code: int
    partition: int
    leader: int
    leader_epoch: int
    replicas: list[int]
    isr: list[int]
    offline_replicas: list[int] = field(default_factory=list)


@message
class MetadataTopic:
    error_code: int
    name: str
    partitions: list[MetadataPartition] = field(default_factory=list)
    is_internal: bool = False
    error_message: str | None = None
    topic_id: str = ZERO_UUID


@message
class MetadataResponse(Response):
    brokers: list[MetadataBroker]
    cluster_id: str
    controller_id: int
    topics: list[MetadataTopic]


@message
class CreatableTopic:
    name: str
    num_partitions: int = -1  # -1: the broker's num.partitions
    replication_factor: int = -1  # -1: the broker's default.replication.factor
    assignments: dict[int, list[int]] | None = None  # partition -> replicas, instead of the two counts
    configs: dict[str, str | None] = field(default_factory=dict)  # a null value is refused, as in Kafka


@message
class CreateTopicsRequest(Request):
    api_key: ClassVar[ApiKey] = ApiKey.CREATE_TOPICS
    topics: list[CreatableTopic]
    timeout_ms: int = 30000
    validate_only: bool = False
    include_configs: bool = False  # each created (or validated) topic's configs in its result, as DescribeConfigs


@message
class CreatableTopicResult:
    name: str
    error_code: int
    error_message: str | None = None
    num_partitions: int = -1
    replication_factor: int = -1
    topic_id: str = ZERO_UUID
    configs: list[ConfigEntry] | None = None  # when the request asks for them and the topic was created


@message
class CreateTopicsResponse(Response):
    topics: list[CreatableTopicResult]


@message
class DeleteTopicsRequest(Request):
    api_key: ClassVar[ApiKey] = ApiKey.DELETE_TOPICS
    topic_names: list[str]
    timeout_ms: int = 30000


@message
class DeletableTopicResult:
    name: str
    error_code: int
    error_message: str | None = None


@message
class DeleteTopicsResponse(Response):
    responses: list[DeletableTopicResult]


@message
class InitProducerIdRequest(Request):
    """Asks for a producer id and epoch, which make a producer's retries idempotent (KIP-98).

    With `producer_id` and `producer_epoch` of a live producer the broker bumps the epoch instead (KIP-360).
    """

    api_key: ClassVar[ApiKey] = ApiKey.INIT_PRODUCER_ID
    transactional_id: str | None = None
    transaction_timeout_ms: int = 60000
    producer_id: int = -1
    producer_epoch: int = -1


@message
class InitProducerIdResponse(Response):
    error_code: int
    producer_id: int = -1
    producer_epoch: int = -1
    error_message: str | None = None


@message
class CreatePartitionsTopic:
    name: str
    count: int  # the new total number of partitions
    assignments: list[list[int]] | None = None  # replicas of each new partition, instead of Kafka's assignment


@message
class CreatePartitionsRequest(Request):
    api_key: ClassVar[ApiKey] = ApiKey.CREATE_PARTITIONS
    topics: list[CreatePartitionsTopic]
    timeout_ms: int = 30000
    validate_only: bool = False


@message
class CreatePartitionsTopicResult:
    name: str
    error_code: int
    error_message: str | None = None


@message
class CreatePartitionsResponse(Response):
    results: list[CreatePartitionsTopicResult]


PREFERRED_ELECTION = 0
UNCLEAN_ELECTION = 1


@message
class ElectLeadersRequest(Request):
    api_key: ClassVar[ApiKey] = ApiKey.ELECT_LEADERS
    election_type: int  # PREFERRED_ELECTION or UNCLEAN_ELECTION
    topic_partitions: list[tuple[str, int]] | None = None  # None: every partition
    timeout_ms: int = 30000


@message
class ElectionResult:
    topic: str
    partition: int
    error_code: int
    error_message: str | None = None


@message
class ElectLeadersResponse(Response):
    error_code: int
    results: list[ElectionResult] = field(default_factory=list)
    error_message: str | None = None


@message
class ReassignablePartition:
    topic: str
    partition: int
    replicas: list[int] | None  # the target replica list, preferred leader first; None cancels the move


@message
class AlterPartitionReassignmentsRequest(Request):
    api_key: ClassVar[ApiKey] = ApiKey.ALTER_PARTITION_REASSIGNMENTS
    partitions: list[ReassignablePartition]
    timeout_ms: int = 30000
    allow_replication_factor_change: bool = True  # False: a target of another size is INVALID_REPLICATION_FACTOR


@message
class ReassignablePartitionResponse:
    topic: str
    partition: int
    error_code: int
    error_message: str | None = None


@message
class AlterPartitionReassignmentsResponse(Response):
    error_code: int
    responses: list[ReassignablePartitionResponse] = field(default_factory=list)
    error_message: str | None = None


@message
class ListPartitionReassignmentsRequest(Request):
    api_key: ClassVar[ApiKey] = ApiKey.LIST_PARTITION_REASSIGNMENTS
    topic_partitions: list[tuple[str, int]] | None = None  # None: every ongoing reassignment
    timeout_ms: int = 30000


@message
class OngoingReassignment:
    topic: str
    partition: int
    replicas: list[int]
    adding_replicas: list[int]
    removing_replicas: list[int]


@message
class ListPartitionReassignmentsResponse(Response):
    error_code: int
    reassignments: list[OngoingReassignment] = field(default_factory=list)
    error_message: str | None = None


TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4


@message
class ConfigResource:
    resource_type: int  # TOPIC_RESOURCE or BROKER_RESOURCE
    name: str  # the topic, or the broker id as text
    config_names: list[str] | None = None  # None: every config


@message
class DescribeConfigsRequest(Request):
    api_key: ClassVar[ApiKey] = ApiKey.DESCRIBE_CONFIGS
    resources: list[ConfigResource]
    include_synonyms: bool = False


# Where a config value comes from, in a synonym: Kafka's ConfigSource ids (DescribeConfigs v1+)
TOPIC_CONFIG_SOURCE = 1  # set on the topic (Kafka's DYNAMIC_TOPIC_CONFIG)
STATIC_BROKER_CONFIG_SOURCE = 4  # set in the broker's config
DEFAULT_CONFIG_SOURCE = 5


@message
class ConfigSynonym:
    """One place a config's value may come from, as Kafka lists them: the topic's own setting, then the broker
    property that sets its default, then that property's default."""

    name: str
    value: str | None
    source: int  # TOPIC_CONFIG_SOURCE, STATIC_BROKER_CONFIG_SOURCE or DEFAULT_CONFIG_SOURCE


@message
class ConfigEntry:
    name: str
    value: str | None
    is_default: bool
    read_only: bool = False
    from_broker: bool = False  # a topic's value inherited from a broker setting (log.retention.ms), not its own
    synonyms: list[ConfigSynonym] = field(default_factory=list)  # in order of precedence, when asked for


@message
class DescribeConfigsResult:
    error_code: int
    resource_type: int
    name: str
    configs: list[ConfigEntry] = field(default_factory=list)
    error_message: str | None = None


@message
class DescribeConfigsResponse(Response):
    results: list[DescribeConfigsResult]


@message
class AlterConfigsResource:
    resource_type: int
    name: str
    configs: dict[str, str | None]  # the resource's whole set of overrides, as Kafka's AlterConfigs replaces them;
    # a null value is refused


@message
class AlterConfigsRequest(Request):
    api_key: ClassVar[ApiKey] = ApiKey.ALTER_CONFIGS
    resources: list[AlterConfigsResource]
    validate_only: bool = False


@message
class AlterConfigsResult:
    error_code: int
    resource_type: int
    name: str
    error_message: str | None = None


@message
class AlterConfigsResponse(Response):
    results: list[AlterConfigsResult]


@message
class AlterableConfig:
    name: str
    config_operation: int  # a `ConfigOp`: SET, DELETE, APPEND or SUBTRACT
    value: str | None


@message
class IncrementalAlterConfigsResource:
    resource_type: int
    name: str
    configs: list[AlterableConfig]  # only the overrides to change, in order (KIP-339)


@message
class IncrementalAlterConfigsRequest(Request):
    api_key: ClassVar[ApiKey] = ApiKey.INCREMENTAL_ALTER_CONFIGS
    resources: list[IncrementalAlterConfigsResource]
    validate_only: bool = False


@message
class IncrementalAlterConfigsResponse(Response):
    results: list[AlterConfigsResult]


# ---------------------------------------------------------------------------------------------------------------
# Consumer groups and committed offsets (served by the group coordinator of each group)

GROUP_KEY_TYPE = 0  # FindCoordinator for a group
TRANSACTION_KEY_TYPE = 1  # for a transactional id: not served
NO_GENERATION = -1  # an OffsetCommit from outside group management (assign() or an admin)


@message
class FindCoordinatorRequest(Request):
    api_key: ClassVar[ApiKey] = ApiKey.FIND_COORDINATOR
    key: str  # the group id
    key_type: int = GROUP_KEY_TYPE


@message
class FindCoordinatorResponse(Response):
    error_code: int
    node_id: int = -1
    host: str = ""
    port: int = -1
    error_message: str | None = None


@message
class JoinGroupProtocol:
    name: str  # an assignor: "range", "roundrobin", "sticky", "cooperative-sticky"
    metadata: bytes  # for protocol type "consumer", a ConsumerProtocolSubscription


@message
class JoinGroupRequest(Request):
    api_key: ClassVar[ApiKey] = ApiKey.JOIN_GROUP
    group_id: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    member_id: str  # "" on the first join: the coordinator answers MEMBER_ID_REQUIRED with one
    protocol_type: str
    protocols: list[JoinGroupProtocol]
    group_instance_id: str | None = None  # static membership (KIP-345)
    reason: str | None = None
    require_known_member_id: bool = True  # KIP-394: False for Kafka's JoinGroup below v4, whose clients join at once


@message
class JoinGroupResponseMember:
    member_id: str
    metadata: bytes
    group_instance_id: str | None = None


@message
class JoinGroupResponse(Response):
    error_code: int
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    member_id: str = ""
    members: list[JoinGroupResponseMember] = field(default_factory=list)  # only the leader gets them
    error_message: str | None = None


@message
class SyncGroupAssignment:
    member_id: str
    assignment: bytes


@message
class SyncGroupRequest(Request):
    api_key: ClassVar[ApiKey] = ApiKey.SYNC_GROUP
    group_id: str
    generation_id: int
    member_id: str
    assignments: list[SyncGroupAssignment] = field(default_factory=list)  # from the leader only
    group_instance_id: str | None = None
    protocol_type: str | None = None
    protocol_name: str | None = None


@message
class SyncGroupResponse(Response):
    error_code: int
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None
    error_message: str | None = None


@message
class HeartbeatRequest(Request):
    api_key: ClassVar[ApiKey] = ApiKey.HEARTBEAT
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None = None


@message
class HeartbeatResponse(Response):
    error_code: int
    error_message: str | None = None


@message
class MemberIdentity:
    member_id: str
    group_instance_id: str | None = None
    reason: str | None = None


@message
class LeaveGroupRequest(Request):
    api_key: ClassVar[ApiKey] = ApiKey.LEAVE_GROUP
    group_id: str
    members: list[MemberIdentity]


@message
class LeaveGroupMemberResponse:
    member_id: str
    group_instance_id: str | None
    error_code: int


@message
class LeaveGroupResponse(Response):
    error_code: int
    members: list[LeaveGroupMemberResponse] = field(default_factory=list)
    error_message: str | None = None


@message
class OffsetCommitPartition:
    topic: str
    partition: int
    committed_offset: int
    committed_leader_epoch: int = -1
    committed_metadata: str | None = None


@message
class OffsetCommitRequest(Request):
    api_key: ClassVar[ApiKey] = ApiKey.OFFSET_COMMIT
    group_id: str
    generation_id: int  # NO_GENERATION with member_id "" from outside group management
    member_id: str
    partitions: list[OffsetCommitPartition]
    group_instance_id: str | None = None


@message
class OffsetCommitPartitionResponse:
    topic: str
    partition: int
    error_code: int
    error_message: str | None = None


@message
class OffsetCommitResponse(Response):
    partitions: list[OffsetCommitPartitionResponse]


@message
class OffsetFetchRequest(Request):
    api_key: ClassVar[ApiKey] = ApiKey.OFFSET_FETCH
    group_id: str
    partitions: list[tuple[str, int]] | None = None  # None: every partition the group committed


@message
class OffsetFetchPartitionResponse:
    topic: str
    partition: int
    committed_offset: int  # -1: nothing committed
    committed_leader_epoch: int = -1
    metadata: str | None = None
    error_code: int = 0


@message
class OffsetFetchResponse(Response):
    error_code: int
    partitions: list[OffsetFetchPartitionResponse] = field(default_factory=list)
    error_message: str | None = None


@message
class DescribeGroupsRequest(Request):
    api_key: ClassVar[ApiKey] = ApiKey.DESCRIBE_GROUPS
    groups: list[str]


@message
class DescribedGroupMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    member_metadata: bytes
    member_assignment: bytes


@message
class DescribedGroup:
    error_code: int
    group_id: str
    group_state: str = ""  # Empty, PreparingRebalance, CompletingRebalance, Stable or Dead
    protocol_type: str = ""
    protocol_data: str = ""  # the chosen protocol (assignor) once the group is Stable, as in Kafka
    members: list[DescribedGroupMember] = field(default_factory=list)
    error_message: str | None = None


@message
class DescribeGroupsResponse(Response):
    groups: list[DescribedGroup]


GROUP_STATES = ("Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead")
"""The states of a classic group, as ListGroups and DescribeGroups name them."""


@message
class ListGroupsRequest(Request):
    api_key: ClassVar[ApiKey] = ApiKey.LIST_GROUPS
    states_filter: list[str] = field(default_factory=list)  # empty: every state; any case; others match nothing


@message
class ListedGroup:
    group_id: str
    protocol_type: str
    group_state: str


@message
class ListGroupsResponse(Response):
    error_code: int
    groups: list[ListedGroup] = field(default_factory=list)
    error_message: str | None = None


@message
class DeleteGroupsRequest(Request):
    api_key: ClassVar[ApiKey] = ApiKey.DELETE_GROUPS
    groups_names: list[str]


@message
class DeletableGroupResult:
    group_id: str
    error_code: int
    error_message: str | None = None


@message
class DeleteGroupsResponse(Response):
    results: list[DeletableGroupResult]


@message
class OffsetDeleteRequest(Request):
    api_key: ClassVar[ApiKey] = ApiKey.OFFSET_DELETE
    group_id: str
    partitions: list[tuple[str, int]]


@message
class OffsetDeletePartitionResponse:
    topic: str
    partition: int
    error_code: int
    error_message: str | None = None


@message
class OffsetDeleteResponse(Response):
    error_code: int
    partitions: list[OffsetDeletePartitionResponse] = field(default_factory=list)
    error_message: str | None = None


# ---------------------------------------------------------------------------------------------------------------
# Version negotiation: answered by a TCP listener itself, before any handler sees a request


@message
class ApiVersionsRequest(Request):
    api_key: ClassVar[ApiKey] = ApiKey.API_VERSIONS
    client_software_name: str = ""
    client_software_version: str = ""


@message
class ApiVersion:
    api_key: int
    min_version: int
    max_version: int


@message
class ApiVersionsResponse(Response):
    error_code: int
    api_keys: list[ApiVersion] = field(default_factory=list)


REQUEST_TYPES: dict[ApiKey, type[Request]] = {
    cls.api_key: cls for cls in (
        LeaderAndIsrRequest, UpdateMetadataRequest, StopReplicaRequest, ControlledShutdownRequest,
        ProduceRequest, FetchRequest, ListOffsetsRequest, OffsetsForLeaderEpochRequest, MetadataRequest,
        CreateTopicsRequest, DeleteTopicsRequest, InitProducerIdRequest, ApiVersionsRequest,
        CreatePartitionsRequest, ElectLeadersRequest, AlterPartitionReassignmentsRequest,
        ListPartitionReassignmentsRequest, DescribeConfigsRequest, AlterConfigsRequest,
        IncrementalAlterConfigsRequest, FindCoordinatorRequest,
        JoinGroupRequest, SyncGroupRequest, HeartbeatRequest, LeaveGroupRequest, OffsetCommitRequest,
        OffsetFetchRequest, DescribeGroupsRequest, ListGroupsRequest, DeleteGroupsRequest, OffsetDeleteRequest,
        DeleteRecordsRequest, DescribeLogDirsRequest,
    )
}

RESPONSE_TYPES: dict[ApiKey, type[Response]] = {
    ApiKey.LEADER_AND_ISR: LeaderAndIsrResponse,
    ApiKey.UPDATE_METADATA: UpdateMetadataResponse,
    ApiKey.STOP_REPLICA: StopReplicaResponse,
    ApiKey.CONTROLLED_SHUTDOWN: ControlledShutdownResponse,
    ApiKey.PRODUCE: ProduceResponse,
    ApiKey.FETCH: FetchResponse,
    ApiKey.LIST_OFFSETS: ListOffsetsResponse,
    ApiKey.OFFSET_FOR_LEADER_EPOCH: OffsetsForLeaderEpochResponse,
    ApiKey.METADATA: MetadataResponse,
    ApiKey.CREATE_TOPICS: CreateTopicsResponse,
    ApiKey.DELETE_TOPICS: DeleteTopicsResponse,
    ApiKey.DELETE_RECORDS: DeleteRecordsResponse,
    ApiKey.DESCRIBE_LOG_DIRS: DescribeLogDirsResponse,
    ApiKey.INIT_PRODUCER_ID: InitProducerIdResponse,
    ApiKey.API_VERSIONS: ApiVersionsResponse,
    ApiKey.CREATE_PARTITIONS: CreatePartitionsResponse,
    ApiKey.ELECT_LEADERS: ElectLeadersResponse,
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: AlterPartitionReassignmentsResponse,
    ApiKey.LIST_PARTITION_REASSIGNMENTS: ListPartitionReassignmentsResponse,
    ApiKey.DESCRIBE_CONFIGS: DescribeConfigsResponse,
    ApiKey.ALTER_CONFIGS: AlterConfigsResponse,
    ApiKey.INCREMENTAL_ALTER_CONFIGS: IncrementalAlterConfigsResponse,
    ApiKey.FIND_COORDINATOR: FindCoordinatorResponse,
    ApiKey.JOIN_GROUP: JoinGroupResponse,
    ApiKey.SYNC_GROUP: SyncGroupResponse,
    ApiKey.HEARTBEAT: HeartbeatResponse,
    ApiKey.LEAVE_GROUP: LeaveGroupResponse,
    ApiKey.OFFSET_COMMIT: OffsetCommitResponse,
    ApiKey.OFFSET_FETCH: OffsetFetchResponse,
    ApiKey.DESCRIBE_GROUPS: DescribeGroupsResponse,
    ApiKey.LIST_GROUPS: ListGroupsResponse,
    ApiKey.DELETE_GROUPS: DeleteGroupsResponse,
    ApiKey.OFFSET_DELETE: OffsetDeleteResponse,
}

# The versions a TCP listener accepts, {api_key: (min_version, max_version)}; every schema is still at version 0.
SUPPORTED_VERSIONS: dict[ApiKey, tuple[int, int]] = {key: (0, 0) for key in REQUEST_TYPES}
