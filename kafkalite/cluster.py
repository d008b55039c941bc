"""`Cluster`: a coordination service and N brokers in one Trio nursery, with faults as API.

Each broker is a node: its own cancel scope and nursery holding the broker (KafkaServer), its controller
candidate and their shared coordination session, as one Kafka process holds a KafkaServer, a KafkaController
and a ZooKeeper client. Killing a broker cancels that scope and nothing else: its session is left to expire
on the coordination service's clock, as a crashed JVM's would. Its logs live in a `LogManager` the cluster
keeps, so a restart in the same process finds them again, as a restarted broker finds its log directory.
"""

from __future__ import annotations

import dataclasses
import inspect
import logging
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

import trio

from kafkalite.client import arguments
from kafkalite.common.config import BrokerConfig, config_text
from kafkalite.common.errors import (
    NONE,
    NOT_CONTROLLER,
    UNKNOWN_TOPIC_OR_PARTITION,
    ErrorCode,
    KafkaError,
    LeaderNotAvailableError,
    RequestTimedOutError,
    UnknownTopicOrPartitionError,
    for_code,
    raise_for,
)
from kafkalite.common.nursery import leave_nursery, unwrap_single
from kafkalite.common.records import Record, RecordBatch
from kafkalite.common.types import ZERO_UUID, TopicPartition
from kafkalite.controller import KafkaController
from kafkalite.coordination import CoordinationService
from kafkalite.coordination.kafka_zk import KafkaZkClient, LeaderAndIsr
from kafkalite.network.kafka import KAFKA_LISTENER, load_codec
from kafkalite.network.requests import (
    CONSUMER_REPLICA_ID,
    ApiKey,
    AlterPartitionReassignmentsRequest,
    ListPartitionReassignmentsRequest,
    OngoingReassignment,
    ReassignablePartition,
    PREFERRED_ELECTION,
    UNCLEAN_ELECTION,
    CreatableTopic,
    CreatePartitionsRequest,
    CreatePartitionsTopic,
    CreateTopicsRequest,
    DeleteTopicsRequest,
    ElectLeadersRequest,
    LATEST_TIMESTAMP,
    FetchPartition,
    FetchRequest,
    ListOffsetsPartition,
    ListOffsetsRequest,
    MetadataRequest,
    ProducePartitionData,
    ProduceRequest,
    Request,
    RequestContext,
)
from kafkalite.network.transport import PauseGate, Transport
from kafkalite.server import Broker, LogManager
from kafkalite.server.broker import parse_listeners
from kafkalite.server.request_faults import Drop, RequestFault, RequestFaults

log = logging.getLogger(__name__)

COORDINATION = "coordination"
"""The coordination service's name in `partition_network` groups."""

# `elect_leaders` takes Kafka's election types, PREFERRED_ELECTION and UNCLEAN_ELECTION, importable from here.

CLIENT = "cluster-client"
REQUEST_TIMEOUT_S = 30.0
"""How long a request the harness sends may go unanswered (a paused broker's), as Kafka's request.timeout.ms."""
PRODUCE_SLACK_S = 5.0
"""What `produce` allows beyond its own timeout_ms, which bounds the broker's wait for replication."""
RECONNECT_S = 0.1
"""How often a broker starting while cut off from the coordination service tries to reach it again."""
RETRY_BACKOFF_S = 0.1
"""How long the harness waits before asking again for a controller, as Kafka's AdminClient's retry.backoff.ms."""
CLUSTER_OBSERVER = "cluster-observer"


class CoordinationTimeoutError(RuntimeError):
    """A broker gave up starting because it could not reach the coordination service, as Kafka's broker fails its
    startup after zookeeper.connection.timeout.ms: waiting on would hang the test that started it, and virtual time
    goes on meanwhile, so no watchdog would notice. The broker stays stopped."""


class ClientNode(str):
    """An in-process client's name (its client.id) in `partition_network` groups, before it has sent a request.

    A plain string is taken for a client only once the client has talked to the cluster, so that a typo is refused
    rather than cutting nothing; this marker says the name is meant, as when a test cuts a client before starting
    it. It is the string itself, so the cut applies to the client of that name whenever it sends.
    """

    __slots__ = ()


@dataclass(frozen=True, slots=True)
class PartitionDescription:
    """One partition as a test wants to see it: the controller's decision and every replica's log."""

    topic: str
    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    high_watermark: int
    log_end_offsets: dict[int, int]
    log_start_offsets: dict[int, int]  # per replica: DeleteRecords and retention move them


@dataclass(frozen=True, slots=True)
class ElectionOutcome:
    """What an election request did for one partition: `elected`, or the Kafka error that says why not.

    ELECTION_NOT_NEEDED: the wanted leader already leads; PREFERRED_LEADER_NOT_AVAILABLE or
    ELIGIBLE_LEADERS_NOT_AVAILABLE: no replica may take over; UNKNOWN_TOPIC_OR_PARTITION. The controller's
    `message` explains; it is left out of comparisons, so `outcome == ElectionOutcome(ELECTION_NOT_NEEDED)` reads
    as it should.
    """

    error: ErrorCode
    message: str | None = field(default=None, compare=False)

    @property
    def elected(self) -> bool:
        return self.error == NONE


@dataclass(frozen=True, slots=True)
class BrokerDescription:
    id: int
    endpoints: tuple[str, ...]
    rack: str | None
    alive: bool
    is_controller: bool
    broker_epoch: int


@dataclass(frozen=True, slots=True)
class PartitionStates:
    """A partition's state and each replica's state, as the controller's state machines hold them."""

    state: str
    replica_states: dict[int, str]


@dataclass(frozen=True, slots=True)
class ClusterDescription:
    cluster_id: str | None
    brokers: tuple[BrokerDescription, ...]
    controller_id: int | None
    controller_epoch: int
    partitions: dict[TopicPartition, PartitionStates]


@dataclass
class _Node:
    broker_id: int
    config: BrokerConfig
    log_manager: LogManager
    gate: PauseGate = field(default_factory=PauseGate)
    scope: trio.CancelScope | None = None
    zk: KafkaZkClient | None = None
    broker: Broker | None = None
    controller: KafkaController | None = None
    stopped: trio.Event = field(default_factory=trio.Event)
    starts: int = 0
    starting: bool = False

    @property
    def alive(self) -> bool:
        """Started and not stopped since: a broker still starting (or failing to) is not reported as live."""
        return self.scope is not None and not self.stopped.is_set()


# -- arguments ------------------------------------------------------------------------------------------------------
# The brokers judge a request by its values, as Kafka's do: a topic name of the wrong type reached them as an empty
# name, a broker id "1" was "no broker 1". Types are checked here, before anything is sent, so that the error says
# what was expected; collections and partitions as the clients check theirs (kafkalite.client.arguments).

def _expect(value: Any, expected: type | tuple[type, ...], what: str) -> Any:
    """`value` if it has the expected type. A bool is no int here: True is never meant as broker 1 or a count."""
    kinds = expected if isinstance(expected, tuple) else (expected,)
    if isinstance(value, kinds) and not (isinstance(value, bool) and bool not in kinds):
        return value
    raise TypeError(f"{what} must be {' or '.join(k.__name__ for k in kinds)}, not {type(value).__name__} {value!r}")


def check_seconds(value: Any, what: str) -> float:
    if not _expect(value, (int, float), what) >= 0:  # NaN fails this too
        raise ValueError(f"{what} must be a number of seconds >= 0, not {value!r}")
    return value  # type: ignore[no-any-return]


def check_interval(value: Any, what: str = "interval") -> float:
    """A polling interval: one of 0 would check again without letting Trio's clock move, so a timeout on the mock
    clock could never fire and the wait would hang."""
    if not _expect(value, (int, float), what) > 0:  # NaN fails this too
        raise ValueError(f"{what} must be a number of seconds > 0 (the wait between checks: with 0 the clock never "
                         f"moves on, so the timeout could never fire), not {value!r}")
    return value  # type: ignore[no-any-return]


def _partition(topic: Any, partition: Any) -> TopicPartition:
    return TopicPartition(_expect(topic, str, "topic"), _expect(partition, int, "partition"))


def _config(config: Any, what: str) -> Mapping[str, Any]:
    for key in _expect(config, Mapping, what):
        if _expect(key, str, f"a key of {what}") == "broker.id":  # it was dropped without a word
            raise ValueError(f"{what} sets broker.id, which the cluster sets itself: its brokers are numbered 1..N "
                             "(give a broker its own settings with broker_configs={id: {...}})")
    return config  # type: ignore[no-any-return]


def check_cluster_arguments(brokers: Any, config: Any, broker_configs: Any, seed: Any) -> None:
    """`Cluster`'s (and `EmbeddedCluster`'s) arguments, checked where they are given rather than when brokers start."""
    if _expect(brokers, int, "brokers") < 1:
        raise ValueError("a cluster needs at least one broker")
    if config is not None:
        _config(config, "config")
    if broker_configs is not None:
        for broker_id, overrides in _expect(broker_configs, Mapping, "broker_configs").items():
            if not 1 <= _expect(broker_id, int, "a broker id in broker_configs") <= brokers:
                raise ValueError(f"broker_configs names broker {broker_id}, but the brokers are 1..{brokers}")
            _config(overrides, f"broker_configs[{broker_id}]")
    if seed is not None:
        _expect(seed, int, "seed")


class Cluster:
    """An async context manager holding a running cluster.

    `config` applies to every broker (Kafka property names); `broker_configs` overrides it per broker id, e.g.
    racks. Brokers are numbered 1..brokers. `seed` makes replica assignment reproducible.
    """

    def __init__(self, brokers: int = 3, config: Mapping[str, Any] | None = None, *,
                 broker_configs: Mapping[int, Mapping[str, Any]] | None = None, seed: int | None = None) -> None:
        check_cluster_arguments(brokers, config, broker_configs, seed)
        self.seed = seed if seed is not None else random.randrange(1 << 32)
        self.random = random.Random(self.seed)
        self.service = CoordinationService()
        self.transport = Transport()
        self.request_faults = RequestFaults(harness=CLIENT)
        self._nodes: dict[int, _Node] = {}
        for broker_id in range(1, brokers + 1):
            values = {**(config or {}), **(broker_configs or {}).get(broker_id, {}), "broker.id": broker_id}
            broker_config = BrokerConfig(values)
            self._nodes[broker_id] = _Node(broker_id, broker_config, LogManager(broker_config))
        self._nursery: trio.Nursery | None = None
        self._nursery_manager: Any = None
        self._observer: KafkaZkClient | None = None

    # -- lifecycle --------------------------------------------------------------------------------------------------

    async def __aenter__(self) -> Cluster:
        if any(endpoint.listener == KAFKA_LISTENER and endpoint.port
               for node in self._nodes.values() for endpoint in parse_listeners(node.config["listeners"])):
            load_codec()  # a Kafka client may come to a port fixed in advance without asking for the address
        self._nursery_manager = trio.open_nursery()
        self._nursery = await self._nursery_manager.__aenter__()
        try:
            await self._nursery.start(self.service.run)
            # The cluster's own view of the coordination service, outside every fault: what a test reads must
            # not depend on which brokers are cut off.
            self._observer = KafkaZkClient(self.service, CLUSTER_OBSERVER, session_timeout_ms=60_000)
            self._nursery.start_soon(self._observer.run)
            for node in self._nodes.values():
                await self._start_node(node)
            await self.wait_until(self._is_ready, timeout=60, what="a controller and every broker registered")
        except BaseException as exc:
            self._nursery.cancel_scope.cancel()
            await self._nursery_manager.__aexit__(None, None, None)
            # A broker that cannot start fails inside its own nursery: say what failed, not that a nursery did.
            cause = unwrap_single(exc)
            if cause is exc:
                raise
            raise cause from None
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> bool | None:
        """Stop every broker. What the block raised comes out as itself (see `leave_nursery`)."""
        assert self._nursery is not None
        self._nursery.cancel_scope.cancel()
        try:
            return await leave_nursery(self._nursery_manager, exc_type, exc, tb)
        finally:
            for node in self._nodes.values():
                if node.zk is not None:
                    node.zk.close()
            if self._observer is not None:
                self._observer.close()

    def _is_ready(self) -> bool:
        controller = self.controller_id
        if controller is None:
            return False
        live = self.live_broker_ids
        return all(set(self._nodes[b].broker.metadata_cache.get_alive_broker_ids()) >= set(live)  # type: ignore[union-attr]
                   for b in live)

    async def _start_node(self, node: _Node) -> None:
        assert self._nursery is not None
        node.scope = None  # the last incarnation's: until this one has started, the broker is not live
        node.stopped = trio.Event()
        node.starts += 1
        node.starting = True
        try:
            await self._nursery.start(self._run_node, node)
        finally:
            node.starting = False

    async def _await_coordination(self, node: _Node) -> None:
        """Return once the broker can reach the coordination service, or fail after zookeeper.connection.timeout.ms
        (Kafka's default for it, the session timeout, as kafkalite has no key of its own for it)."""
        timeout_ms = node.config.session_timeout_ms
        with trio.move_on_after(timeout_ms / 1000):
            while not self.transport.link_up(node.broker_id, COORDINATION):
                await trio.sleep(RECONNECT_S)
            return
        raise CoordinationTimeoutError(
            f"broker {node.broker_id} cannot reach the coordination service (partition_network cut it off) and gave "
            f"up starting after {timeout_ms} ms (zookeeper.connection.timeout.ms, which is the session timeout), as "
            "Kafka's broker does; it stays stopped: heal() the network first, then restart it")

    async def _run_node(self, node: _Node, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        try:
            await self._await_coordination(node)
            with trio.CancelScope() as scope:
                async with trio.open_nursery() as nursery:
                    node.gate = PauseGate()
                    node.zk = KafkaZkClient(self.service, f"broker-{node.broker_id}", node.config.session_timeout_ms)
                    self.service.set_reachable(node.zk.owner, self.transport.link_up(node.broker_id, COORDINATION))
                    # Its own stream per incarnation, drawn without touching the cluster's (which seeds the
                    # controllers): member ids stay reproducible and never repeat across restarts.
                    node.broker = Broker(node.config, node.zk, self.transport, node.log_manager, node.gate,
                                         rng=random.Random(f"{self.seed}-{node.broker_id}-{node.starts}"),
                                         request_faults=self.request_faults)
                    node.controller = KafkaController(node.config, node.zk, self.transport, node.gate,
                                                      rng=random.Random(self.random.random()))
                    node.broker.set_controller(node.controller)
                    nursery.start_soon(node.zk.run, node.gate.checkpoint)
                    await node.broker.startup(nursery)
                    # Its ports from now on, as a Kafka broker's are fixed in its server.properties: a restart
                    # binds the same ones, so bootstrap servers a client was given keep reaching it.
                    node.config = node.config.with_overrides({"listeners": ",".join(
                        ep.listener_spec for ep in node.broker.endpoints)})
                    await node.controller.startup(nursery)
                    node.scope = scope
                    task_status.started()
        finally:
            self.transport.unregister(node.broker_id)
            node.stopped.set()

    def _zk(self) -> KafkaZkClient:
        if self._observer is None:
            raise RuntimeError("the cluster is not running: use it as `async with Cluster(...)`")
        return self._observer

    def _node(self, broker_id: int) -> _Node:
        try:
            return self._nodes[_expect(broker_id, int, "broker id")]
        except KeyError:
            raise ValueError(f"no broker {broker_id} in this cluster (brokers: {sorted(self._nodes)})") from None

    def _live_node(self, broker_id: int) -> _Node:
        node = self._node(broker_id)
        if not node.alive:
            raise ValueError(f"broker {broker_id} is " + ("still starting: wait for its start to return"
                                                          if node.starting else "not running"))
        return node

    # -- what a test looks at ---------------------------------------------------------------------------------------

    @property
    def broker_ids(self) -> list[int]:
        return sorted(self._nodes)

    @property
    def live_broker_ids(self) -> list[int]:
        return [b for b, node in sorted(self._nodes.items()) if node.alive]

    @property
    def controller_id(self) -> int | None:
        """The broker whose controller is active with the newest epoch (a zombie may still think it is active)."""
        active = [(node.controller.epoch, b) for b, node in self._nodes.items()
                  if node.alive and node.controller is not None and node.controller.is_active]
        return max(active)[1] if active else None

    @property
    def cluster_id(self) -> str | None:
        """The id every broker gives clients in Metadata and DescribeCluster (Kafka's cluster id): random, written by
        the first broker to start and kept through restarts; None until a broker has started."""
        return self._zk().get_cluster_id()

    def broker(self, broker_id: int) -> Broker:
        """The running broker object, for tests that look inside (partitions, metadata cache)."""
        node = self._live_node(broker_id)
        assert node.broker is not None
        return node.broker

    def controller(self, broker_id: int | None = None) -> KafkaController:
        node = self._live_node(broker_id if broker_id is not None else self._require_controller())
        assert node.controller is not None
        return node.controller

    def log_manager(self, broker_id: int) -> LogManager:
        return self._node(broker_id).log_manager

    def _require_controller(self) -> int:
        controller = self.controller_id
        if controller is None:
            raise LeaderNotAvailableError("no active controller")
        return controller

    async def _ask_controller(self, request: Request, timeout: float,
                              entries: Callable[[Any], Sequence[Any]] = lambda response: (response,),
                              done_before: ErrorCode | None = None) -> Any:
        """The active controller's response, as Kafka's AdminClient gets one within its timeout: right after the
        controller dies there is none until its session expires and another is elected, and one that has just
        resigned answers NOT_CONTROLLER (in any of the response's `entries`), so the call waits and asks again,
        on Trio's clock, until `timeout`.

        A controller that resigned midway may have left the work to its successor, which finishes it: asked again,
        that one answers `done_before` (a deletion it completed: UNKNOWN_TOPIC_OR_PARTITION), which is then the
        success the call was waiting for."""
        deadline = trio.current_time() + timeout
        refused = None
        while True:
            controller = self.controller_id
            if controller is not None:
                response = await self._send(controller, request, max(deadline - trio.current_time(), 0))
                if not any(entry.error_code == NOT_CONTROLLER.code for entry in entries(response)):
                    for entry in entries(response) if refused is not None and done_before is not None else ():
                        if entry.error_code == done_before.code:
                            entry.error_code, entry.error_message = NONE.code, None
                    return response
                refused = controller
            if trio.current_time() >= deadline:
                break
            await trio.sleep(min(RETRY_BACKOFF_S, deadline - trio.current_time()))
        session_ms = max(node.config.session_timeout_ms for node in self._nodes.values())
        raise RequestTimedOutError(
            f"no controller was elected within {timeout:g} s to take {type(request).__name__}"
            + (f" (broker {refused} answered NOT_CONTROLLER)" if refused is not None else "")
            + f": a dead controller's successor is elected once its session expires (zookeeper.session.timeout.ms, "
            f"{session_ms} ms here), and none can be while every live broker is paused, stopped or cut off from "
            "the coordination service; give a longer timeout, or heal() and resume_broker() first")

    async def describe_topic(self, topic: str) -> list[PartitionDescription]:
        """Per partition the controller's leader, epoch and ISR, the leader's HW and every replica's LEO and log
        start offset."""
        zk = self._zk()
        assignment = zk.get_replica_assignment(_expect(topic, str, "topic"))
        if assignment is None:
            raise UnknownTopicOrPartitionError(f"topic {topic!r} does not exist")
        described = []
        for partition, replicas in sorted(assignment.items()):
            tp = TopicPartition(topic, partition)
            state = zk.get_partition_state(tp)
            leader, epoch, isr = (-1, -1, ()) if state is None else (
                state.leader_and_isr.leader, state.leader_and_isr.leader_epoch, state.leader_and_isr.isr)
            hw = -1
            if leader in self._nodes and self._nodes[leader].alive:
                leader_partition = self._nodes[leader].broker.replica_manager.get_partition(tp)  # type: ignore[union-attr]
                if leader_partition is not None and leader_partition.is_leader:
                    hw = leader_partition.high_watermark
            logs = {replica: self._nodes[replica].log_manager.get_log(tp) for replica in replicas
                    if replica in self._nodes}
            found = {replica: replica_log for replica, replica_log in logs.items() if replica_log is not None}
            described.append(PartitionDescription(
                topic, partition, leader, epoch, tuple(replicas), tuple(isr), hw,
                {replica: replica_log.log_end_offset for replica, replica_log in found.items()},
                {replica: replica_log.log_start_offset for replica, replica_log in found.items()}))
        return described

    # -- admin and data path for tests ------------------------------------------------------------------------------

    async def _send(self, broker_id: int, request: Request, timeout: float = REQUEST_TIMEOUT_S) -> Any:
        """The broker's response, or REQUEST_TIMED_OUT after `timeout` seconds (a paused broker holds requests at
        its door), as a Kafka client gives up after request.timeout.ms; the request is abandoned as a client
        closing its connection abandons it."""
        with trio.move_on_after(timeout):
            return await self.transport.send(CLIENT, broker_id, request, RequestContext(source=CLIENT))
        raise RequestTimedOutError(f"broker {broker_id} did not answer {type(request).__name__} within {timeout:g} s")

    async def create_topic(self, name: str, partitions: int = 1, replication_factor: int = 1,
                           config: Mapping[str, Any] | None = None, *, timeout: float = 30) -> None:
        """Create a topic and return once every partition has a leader known to every live broker.

        `partitions` and `replication_factor` of -1 take the brokers' `num.partitions` and
        `default.replication.factor`, as Kafka's CreateTopics does.
        """
        request = CreateTopicsRequest([CreatableTopic(
            _expect(name, str, "topic name"), _expect(partitions, int, "partitions"),
            _expect(replication_factor, int, "replication_factor"), None,
            {k: config_text(v) for k, v in _config(config or {}, "config").items()})],
            timeout_ms=int(check_seconds(timeout, "timeout") * 1000))
        response = await self._ask_controller(request, timeout, lambda response: response.topics)
        result = response.topics[0]
        raise_for(result.error_code, result.error_message)
        await self.wait_until(lambda: self._topic_online(name, partitions), timeout=timeout,
                              what=f"topic {name} online on every broker")

    async def create_partitions(self, topic: str, new_total: int, *, timeout: float = 30) -> None:
        """Grow a topic to `new_total` partitions; returns once the new ones have leaders every broker knows."""
        response = await self._ask_controller(CreatePartitionsRequest(
            [CreatePartitionsTopic(_expect(topic, str, "topic"), _expect(new_total, int, "new_total"))],
            timeout_ms=int(check_seconds(timeout, "timeout") * 1000)), timeout, lambda response: response.results)
        result = response.results[0]
        raise_for(result.error_code, result.error_message)
        await self.wait_until(lambda: self._topic_online(topic, new_total), timeout=timeout,
                              what=f"partitions of {topic} online on every broker")

    async def elect_leaders(self, election_type: int, partitions: Iterable[TopicPartition] | None = None, *,
                            timeout: float = 30) -> dict[TopicPartition, ElectionOutcome]:
        """Kafka's ElectLeaders (PREFERRED_ELECTION or UNCLEAN_ELECTION) for `partitions` (None: every partition).

        Returns each partition's outcome; an election refused as a whole (no controller elected within `timeout`,
        an invalid request) raises instead.
        """
        check_seconds(timeout, "timeout")
        if _expect(election_type, int, "election_type") not in (PREFERRED_ELECTION, UNCLEAN_ELECTION):
            raise ValueError(f"election_type must be PREFERRED_ELECTION ({PREFERRED_ELECTION}) or UNCLEAN_ELECTION "
                             f"({UNCLEAN_ELECTION}), not {election_type}")
        wanted = None if partitions is None else [
            (tp.topic, tp.partition) for tp in arguments.topic_partitions(partitions, "elect_leaders()")]
        response = await self._ask_controller(ElectLeadersRequest(election_type, wanted), timeout)
        raise_for(response.error_code, response.error_message)
        return {TopicPartition(r.topic, r.partition): ElectionOutcome(for_code(r.error_code), r.error_message)
                for r in response.results}

    async def elect_preferred_leaders(self, partitions: Iterable[TopicPartition] | None = None, *,
                                      timeout: float = 30) -> dict[TopicPartition, ElectionOutcome]:
        """Move leadership back to each partition's first assigned replica where it is alive and in the ISR."""
        return await self.elect_leaders(PREFERRED_ELECTION, partitions, timeout=timeout)

    async def reassign_partitions(self, targets: Mapping[TopicPartition, Sequence[int]], *,
                                  timeout: float = 60) -> None:
        """Move partitions to new replica lists (preferred leader first) and wait until the moves complete."""
        check_seconds(timeout, "timeout")
        targets = {arguments.topic_partition(tp, "reassign_partitions()"): arguments.broker_ids(
            replicas, f"reassign_partitions() for {tp}")
            for tp, replicas in arguments.mapping(targets, "reassign_partitions()", "replicas by partition").items()}
        response = await self._ask_controller(AlterPartitionReassignmentsRequest(
            [ReassignablePartition(tp.topic, tp.partition, replicas) for tp, replicas in targets.items()]), timeout,
            lambda response: (response, *response.responses))
        raise_for(response.error_code, response.error_message)
        for result in response.responses:
            raise_for(result.error_code, result.error_message)

        wanted = {tp: tuple(replicas) for tp, replicas in targets.items()}

        def done() -> bool:
            controller = self.controller_id
            if controller is None or self.controller(controller).context.partitions_being_reassigned:
                return False
            zk = self._zk()
            assignments = {topic: zk.get_assignment(topic) or {} for topic in {tp.topic for tp in wanted}}
            return all(assignments[tp.topic].get(tp.partition) == replicas for tp, replicas in wanted.items()) \
                and self._partitions_online(wanted)

        await self.wait_until(done, timeout=timeout, what="the reassignments to complete")

    async def list_partition_reassignments(self, *, timeout: float = 30) -> list[OngoingReassignment]:
        response = await self._ask_controller(ListPartitionReassignmentsRequest(), check_seconds(timeout, "timeout"))
        raise_for(response.error_code, response.error_message)
        return response.reassignments

    async def delete_topic(self, name: str, *, timeout: float = 30) -> None:
        """Delete a topic and return once its replicas are deleted and every live broker has forgotten it."""
        response = await self._ask_controller(DeleteTopicsRequest(
            [_expect(name, str, "topic name")], timeout_ms=int(check_seconds(timeout, "timeout") * 1000)), timeout,
            lambda response: response.responses, done_before=UNKNOWN_TOPIC_OR_PARTITION)
        result = response.responses[0]
        raise_for(result.error_code, result.error_message)
        await self.wait_until(lambda: not any(self._nodes[b].broker.metadata_cache.contains_topic(name)  # type: ignore
                                              for b in self.live_broker_ids),
                              timeout=timeout, what=f"topic {name} gone from every broker's metadata")

    def _topic_online(self, topic: str, partitions: int) -> bool:
        return self._partitions_online(TopicPartition(topic, p) for p in range(partitions))

    def _partitions_online(self, partitions: Iterable[TopicPartition]) -> bool:
        """Whether every live broker's metadata names a leader for each of `partitions`, and that leader is alive
        and leading it. The leader is looked at once per partition, not once per broker, when the brokers name the
        same one, as they do unless an update is on its way: topic creation and reassignment wait on this over
        every partition they touch."""
        caches = [self._nodes[b].broker.metadata_cache for b in self.live_broker_ids]  # type: ignore[union-attr]
        for tp in partitions:
            confirmed: int | None = None
            for cache in caches:
                info = cache.get_partition_info(tp)
                if info is None or info.leader < 0:
                    return False
                leader_id = info.leader
                if leader_id == confirmed:
                    continue
                leader = self._nodes.get(leader_id)
                if leader is None or not leader.alive:
                    return False
                partition = leader.broker.replica_manager.get_partition(tp)  # type: ignore[union-attr]
                if partition is None or not partition.is_leader:
                    return False
                confirmed = leader_id
        return True

    def partition_state(self, topic: str, partition: int) -> LeaderAndIsr:
        """Leader, leader epoch and ISR as the controller (or a leader's ISR change) last wrote them."""
        state = self._zk().get_partition_state(_partition(topic, partition))
        if state is None:
            raise UnknownTopicOrPartitionError(f"{topic}-{partition} does not exist")
        return state.leader_and_isr

    def leader_for(self, topic: str, partition: int) -> int:
        """The partition's leader as a client would see it: -1 while none is elected or the elected one is down.

        After a controller failover a partition whose leader died keeps that leader in its state until an
        election succeeds, exactly as in Kafka, whose metadata then answers LEADER_NOT_AVAILABLE.
        """
        leader = self.partition_state(topic, partition).leader
        return leader if leader in self._nodes and self._nodes[leader].alive else -1

    async def wait_for_leader(self, topic: str, partition: int, *, timeout: float = 60,
                              not_on: Iterable[int] = (), interval: float = 0.005) -> int:
        """Wait until a leader (not one of `not_on`) is elected and acting as leader; returns its id.

        The partition state changes first and the leader learns of it from the controller's LeaderAndIsr
        a moment later; a produce in between would get NOT_LEADER_OR_FOLLOWER, as a Kafka client would.
        """
        excluded = set(arguments.broker_ids(not_on, "wait_for_leader(not_on=)"))
        tp = _partition(topic, partition)
        return (await self._wait_for_leaders([tp], excluded, timeout, interval, f"a leader for {tp}"))[partition]

    async def wait_for_leaders(self, topic: str, partitions: Iterable[int] | None = None, *, timeout: float = 60,
                               not_on: Iterable[int] = (), interval: float = 0.005) -> dict[int, int]:
        """`wait_for_leader` for many partitions (by default every partition of the topic) at once: returns each
        one's leader once all have one acting as leader. After a broker dies, one wait covers the thousands of
        partitions it led, and each look stops at the first partition still without a leader acting as one."""
        excluded = set(arguments.broker_ids(not_on, "wait_for_leaders(not_on=)"))
        if partitions is None:
            assignment = self._zk().get_replica_assignment(_expect(topic, str, "topic"))
            if assignment is None:
                raise UnknownTopicOrPartitionError(f"topic {topic} does not exist")
            partitions = sorted(assignment)
        wanted = [_partition(topic, p) for p in _expect(partitions, Iterable, "partitions")]
        return await self._wait_for_leaders(wanted, excluded, timeout, interval,
                                            f"leaders for {len(wanted)} partition(s) of {topic}")

    async def _wait_for_leaders(self, wanted: Sequence[TopicPartition], excluded: set[int], timeout: float,
                                interval: float, what: str) -> dict[int, int]:
        leaders: dict[int, int] = {}

        def acting(tp: TopicPartition) -> int | None:
            state = self.partition_state(tp.topic, tp.partition)
            node = self._nodes.get(state.leader)
            if state.leader in excluded or node is None or not node.alive or node.broker is None:
                return None
            local = node.broker.replica_manager.get_partition(tp)
            ready = local is not None and local.is_leader and local.leader_epoch == state.leader_epoch
            return state.leader if ready else None

        def ready() -> bool:  # stops at the first partition without one: every look but the last is short
            leaders.clear()
            for tp in wanted:
                leader = acting(tp)
                if leader is None:
                    return False
                leaders[tp.partition] = leader
            return True

        await self.wait_until(ready, timeout=timeout, interval=interval, what=what)
        return dict(leaders)

    def high_watermark(self, topic: str, partition: int) -> int:
        """The committed offset on the partition's acting leader, or -1 while it has none."""
        leader = self.leader_for(topic, partition)
        if leader < 0 or self._nodes[leader].broker is None:
            return -1
        local = self._nodes[leader].broker.replica_manager.get_partition(TopicPartition(topic, partition))
        return local.high_watermark if local is not None and local.is_leader else -1

    def describe_cluster(self) -> ClusterDescription:
        """Every broker (alive or not), the controller and its epoch, and each partition's and replica's state
        in the active controller's state machines."""
        controller_id = self.controller_id
        brokers = []
        for broker_id, node in sorted(self._nodes.items()):
            registered = self._zk().get_broker(broker_id)
            endpoints = registered.endpoints if registered is not None else ()
            brokers.append(BrokerDescription(broker_id, tuple(ep.listener_spec for ep in endpoints),
                                             node.config["broker.rack"], node.alive and registered is not None,
                                             broker_id == controller_id,
                                             registered.epoch if registered is not None else -1))
        partitions: dict[TopicPartition, PartitionStates] = {}
        if controller_id is not None:
            context = self.controller(controller_id).context
            for tp in context.all_partitions():
                state = context.partition_states.get(tp)
                partitions[tp] = PartitionStates(
                    state.value if state is not None else "NonExistentPartition",
                    {r.replica: context.replica_states[r].value for r in context.replicas_for_partitions([tp])
                     if r in context.replica_states})
        epoch = self._zk().get_controller_epoch()
        return ClusterDescription(self.cluster_id, tuple(brokers), controller_id,
                                  epoch[0] if epoch is not None else 0, partitions)

    def describe_brokers(self) -> list[dict[str, Any]]:
        """Live brokers with their NATIVE endpoint and rack, and which one is the controller."""
        controller = self.controller_id
        described = []
        for broker_id in self.live_broker_ids:
            broker = self.broker(broker_id)
            endpoint = next(ep for ep in broker.endpoints if ep.listener == "NATIVE")
            described.append({"node_id": broker_id, "host": endpoint.host, "port": endpoint.port,
                              "rack": broker.config["broker.rack"], "controller": broker_id == controller})
        return described

    @property
    def bootstrap_servers(self) -> str:
        """`host:port,...` of the live brokers' NATIVE listeners, for kafkalite's clients over TCP."""
        return self.listener_bootstrap_servers("NATIVE")

    @property
    def kafka_bootstrap_servers(self) -> str:
        """`host:port,...` of the live brokers' KAFKA listeners: `bootstrap.servers` for Kafka's own clients
        (kafka-python, aiokafka, confluent-kafka, kcat, the Java client)."""
        return self.listener_bootstrap_servers("KAFKA")

    def listener_bootstrap_servers(self, listener: str) -> str:
        """`host:port,...` of the live brokers' endpoints for the listener named `listener` (empty if none).

        Handing out a KAFKA address loads the Kafka codec, before a Kafka client can use it (see `load_codec`)."""
        if listener == KAFKA_LISTENER:
            load_codec()
        return ",".join(ep.address for broker_id in self.live_broker_ids
                        for ep in self.broker(broker_id).endpoints if ep.listener == listener)

    def topics(self) -> list[str]:
        return self._zk().get_all_topics()

    def topic_id(self, topic: str) -> str:
        """The topic's id (Kafka's, KIP-516), as Uuid.toString prints it: what Kafka clients see in Metadata and
        CreateTopics and may delete the topic by. A topic created again under the same name has another. Kafka's
        zero UUID for a topic whose znode a tool wrote without an id, until the controller gives it one."""
        found = self._zk().get_topic_id_and_assignment(_expect(topic, str, "topic"))
        if found is None:
            raise UnknownTopicOrPartitionError(f"topic {topic!r} does not exist")
        return found[0] or ZERO_UUID

    async def produce(self, topic: str, partition: int, records: Sequence[Record] | RecordBatch, *,
                      acks: int = -1, timeout_ms: int = 30000) -> int:
        """Append to the partition's current leader; the base offset, or the broker's error as an exception.

        A leader that does not answer within `timeout_ms` and a few seconds more (a paused one) is REQUEST_TIMED_OUT:
        the records may or may not have been appended, as with a Kafka producer's timed-out request."""
        _expect(acks, int, "acks (-1, 0 or 1)")
        _expect(timeout_ms, int, "timeout_ms")
        if not isinstance(records, RecordBatch):
            for record in arguments.collection(records, "produce()", "Record (or a RecordBatch)"):
                _expect(record, Record, "a record")
        batch = records if isinstance(records, RecordBatch) else RecordBatch.from_records(records)
        leader = self.leader_for(topic, partition)
        if leader < 0:
            raise LeaderNotAvailableError(f"{topic}-{partition} has no leader")
        request = ProduceRequest(acks, timeout_ms, [ProducePartitionData(topic, partition, [batch])])
        response = await self._send(leader, request, max(timeout_ms, 0) / 1000 + PRODUCE_SLACK_S)
        result = response.partitions[0]
        raise_for(result.error_code, result.error_message)
        return result.base_offset

    async def fetch(self, topic: str, partition: int, offset: int, max_bytes: int = 1 << 20
                    ) -> list[tuple[int, Record]]:
        """Committed records (below the high watermark) from `offset` on, read from the leader, with offsets."""
        _expect(offset, int, "offset")
        _expect(max_bytes, int, "max_bytes")
        leader = self.leader_for(topic, partition)
        if leader < 0:
            raise LeaderNotAvailableError(f"{topic}-{partition} has no leader")
        request = FetchRequest(CONSUMER_REPLICA_ID, max_wait_ms=0, min_bytes=0,
                               partitions=[FetchPartition(topic, partition, offset, max_bytes)])
        response = await self._send(leader, request)
        raise_for(response.error_code)
        result = response.partitions[0]
        raise_for(result.error_code, result.error_message)
        return [(o, r) for batch in result.batches for o, r in batch.offsets_and_records() if o >= offset]

    async def list_offset(self, topic: str, partition: int, timestamp: int = LATEST_TIMESTAMP) -> int:
        """Ask the partition's current leader what a consumer's ListOffsets gets: the high watermark (the default,
        LATEST_TIMESTAMP), the log start (EARLIEST_TIMESTAMP), the record with the largest timestamp
        (MAX_TIMESTAMP) or the first offset at or after a timestamp in milliseconds. The broker's error is raised:
        OFFSET_NOT_AVAILABLE while a new leader's high watermark still lags its predecessor's (KIP-207)."""
        _expect(timestamp, int, "timestamp")
        leader = self.leader_for(topic, partition)
        if leader < 0:
            raise LeaderNotAvailableError(f"{topic}-{partition} has no leader")
        response = await self._send(leader, ListOffsetsRequest(
            CONSUMER_REPLICA_ID, [ListOffsetsPartition(topic, partition, timestamp)]))
        result = response.partitions[0]
        raise_for(result.error_code, result.error_message)
        return result.offset

    async def fetch_all(self, topic: str, partition: int) -> list[tuple[int, Record]]:
        """Every committed record of the partition, following batches until the high watermark."""
        records: list[tuple[int, Record]] = []
        offset = 0
        while True:
            page = await self.fetch(topic, partition, offset)
            if not page:
                return records
            records.extend(page)
            offset = page[-1][0] + 1

    async def metadata(self, broker_id: int, topics: list[str] | None = None) -> Any:
        if topics is not None:
            arguments.topic_names(topics, "metadata()")
        response = await self._send(_expect(broker_id, int, "broker id"), MetadataRequest(topics))
        return response

    # -- faults -----------------------------------------------------------------------------------------------------

    async def kill_broker(self, broker_id: int) -> None:
        """Crash: the broker's tasks are cancelled at once; its session expires after the session timeout."""
        await self._stop(self._live_node(broker_id))

    async def restart_broker(self, broker_id: int, *, new_ports: bool = False) -> None:
        """Start a stopped broker again with the logs it had, on the ports it had; it registers anew (a new broker
        epoch), and returns once it has: right after `kill_broker`, when the killed incarnation's session expires,
        as a restarted Kafka broker waits out its old registration. If one of those ports is taken meanwhile,
        OSError naming them, and the broker stays stopped; so it does, with CoordinationTimeoutError, if it cannot
        reach the coordination service within the session timeout (zookeeper.connection.timeout.ms, as Kafka's
        broker gives up): the broker is not live while it tries.

        `new_ports`: listen on free ports instead, as an operator whose broker's ports were taken would have to
        move it; clients find it again through metadata, as its registration names them (a bootstrap list that
        named only the old ones no longer reaches it)."""
        node = self._node(broker_id)
        if node.alive:
            raise ValueError(f"broker {broker_id} is running; kill or shut it down first")
        if node.starting:
            raise ValueError(f"broker {broker_id} is starting already: wait for that start to return")
        if new_ports:
            node.config = node.config.with_overrides({"listeners": ",".join(
                dataclasses.replace(ep, port=0).listener_spec for ep in parse_listeners(node.config["listeners"]))})
        try:
            await self._start_node(node)
        except BaseExceptionGroup as group:  # it fails in its own nursery: say what failed, as __aenter__ does
            cause = unwrap_single(group)
            if isinstance(cause, OSError):  # the bind's own error names no address
                raise OSError(cause.errno, f"broker {broker_id} cannot listen on the ports it had "
                                           f"({node.config['listeners']}): {cause.strerror}") from None
            raise cause from None

    async def shutdown_broker(self, broker_id: int) -> bool:
        """Controlled shutdown: leadership moves off the broker first, then it stops and deregisters at once.

        True if the controller moved everything off it. A paused broker cannot ask, so it stops without
        (False); so does one whose controller does not answer within controller.socket.timeout.ms on any of
        controlled.shutdown.max.retries tries, as in Kafka. Cancelled midway, it still stops the broker: one left
        half shut down would stay alive while the controller keeps its replicas offline for good."""
        node = self._live_node(broker_id)
        assert node.broker is not None and node.controller is not None and node.zk is not None
        clean = False
        try:
            if node.gate.paused:  # a frozen process stops without moving anything off it, as if killed
                log.info("broker %d is paused: it stops without a controlled shutdown", broker_id)
            else:
                clean = await node.broker.controlled_shutdown()
        finally:
            node.controller.shutdown()
            node.zk.close()
            await self._stop(node)
        return clean

    @staticmethod
    async def _stop(node: _Node) -> None:
        """Cancel the node's tasks and wait until they are gone, even if the caller is being cancelled: a broker
        said to be stopped must be stopped, or restarting it would find it still running."""
        assert node.scope is not None
        node.scope.cancel()
        with trio.CancelScope(shield=True):
            await node.stopped.wait()

    def session_deadline(self, broker_id: int) -> float:
        """When the broker's coordination session runs out unless it heartbeats again (Trio time)."""
        node = self._live_node(broker_id)
        assert node.zk is not None
        return node.zk.session.deadline

    async def expire_session(self, broker_id: int) -> None:
        """The broker's coordination session expires now: its registration and, if it had it, /controller go."""
        node = self._live_node(broker_id)
        assert node.zk is not None
        self.service.expire(node.zk.session.session_id)
        await trio.lowlevel.checkpoint()

    def pause_broker(self, broker_id: int) -> None:
        """Freeze the broker (a long GC pause): no heartbeats, no fetches, requests wait at its door."""
        self._live_node(broker_id).gate.pause()

    def resume_broker(self, broker_id: int) -> None:
        self._live_node(broker_id).gate.resume()

    def partition_network(self, *groups: Iterable[int | str]) -> None:
        """Cut traffic between the groups; put `COORDINATION` in a group to cut brokers off the service too.

        Each call replaces the cut before it (it does not add to it): to cut more, give the whole cut in one call;
        `heal()` removes it. A node in no group keeps every link. A node is a broker id, `COORDINATION`, or an
        in-process client by its client.id (the transport's name for it): a name the cluster has seen send a
        request, or any name marked `ClientNode("...")`, for a client that has not sent one yet. Clients over TCP
        are not cut. Fewer than two groups, a node the cluster does not know, or one in two groups is refused: the
        cut would silently not be the one the test meant.
        """
        checked: list[list[int | str]] = []
        placed: set[int | str] = set()
        for group in groups:
            checked.append(list(arguments.collection(group, "partition_network()",
                                                     "broker ids (and COORDINATION, client names) for each group")))
            for node in checked[-1]:
                self._check_network_node(_expect(node, (int, str), "a node"))
                if node in placed:
                    raise ValueError(f"node {node!r} is in two groups")
                placed.add(node)
        filled = sum(1 for group in checked if group)
        if filled < 2:
            raise ValueError(f"partition_network() cuts links between groups, and was given {len(checked)} "
                             f"({filled} not empty), which cuts nothing: to isolate a "
                             "node give it and everyone else, e.g. partition_network({1}, {2, 3, COORDINATION}); "
                             "heal() removes the cut")
        self.transport.partition(*checked)
        self._apply_coordination_links()

    def _check_network_node(self, node: int | str) -> None:
        if node in (CLIENT, CLUSTER_OBSERVER) or (isinstance(node, ClientNode) and node == COORDINATION):
            raise ValueError(f"{node!r} names the harness's own calls or the coordination service, not a client of "
                             "yours: give the client another client.id")
        if node in self._nodes or node == COORDINATION or isinstance(node, ClientNode) or (
                isinstance(node, str) and self.transport.has_sent(node)):
            return
        known = (f"no node {node!r} in this cluster: the brokers are {sorted(self._nodes)} and COORDINATION "
                 f"({COORDINATION!r}) is the coordination service")
        if isinstance(node, str):
            clients = sorted(name for name in self.transport.senders if isinstance(name, str))
            known += (f"; an in-process client is named by its client.id once it has sent a request (so far: "
                      f"{', '.join(clients) or 'none'}), or before that as ClientNode({node!r}) from kafkalite.cluster")
        raise ValueError(known)

    def heal(self) -> None:
        """Remove the cut `partition_network` made: every link is up again."""
        self.transport.heal()
        self._apply_coordination_links()

    def fail_requests(self, api: ApiKey | str, error: ErrorCode | type[KafkaError] | str | int | None = None, *,
                      drop: Drop | None = None, delay: float = 0.0, brokers: Iterable[int] | None = None,
                      topics: Iterable[str] | None = None, client_id: str | None = None, times: int | None = 1,
                      cluster_traffic: bool = False, message: str | None = None) -> RequestFault:
        """The next `times` requests of `api` (Kafka's name: "Produce", "Fetch", "JoinGroup"; None: every one
        until `.remove()`) get `error` on every entry of their answer without being served, or lose their
        connection (`drop="request"`: before the broker serves them; `"response"`: after, so a produce is
        appended and its producer must retry), or wait `delay` seconds first (on Trio's clock; alone, they are
        then served as usual). Only requests to `brokers`, naming one of `topics`, from `client_id`, if given.

        Requests from clients, over either listener or in-process, are taken; the cluster's own (followers'
        fetches, the controller's requests, this object's calls such as `create_topic`) only with
        `cluster_traffic=True`. Returns the fault: `.hits` counts the requests it took, `.active` turns false
        once it has taken `times`, `.remove()` ends it now; `clear_request_faults()` ends them all.
        """
        chosen = None
        if brokers is not None:
            chosen = frozenset(arguments.broker_ids(brokers, "fail_requests(brokers=...)"))
            unknown = sorted(chosen - set(self._nodes))
            if unknown:
                raise ValueError(f"no broker {unknown[0]} in this cluster: the brokers are {sorted(self._nodes)}")
        return self.request_faults.add(api, error=error, drop=drop, delay_s=delay, brokers=chosen, topics=topics,
                                       client_id=client_id, times=times, cluster_traffic=cluster_traffic,
                                       message=message)

    def clear_request_faults(self) -> None:
        """End every fault `fail_requests` added; requests in a fault's delay stay in it."""
        self.request_faults.clear()

    async def end_faults(self) -> None:
        """Undo every fault: request faults end, links heal, paused brokers resume and stopped ones start again
        with their logs (a crashed broker's session, which would expire by itself, expires at once, so that it
        registers again without waiting out the session timeout). What the faults did stays done (a leader moved,
        a broker's new epoch, records written). For a cluster shared by several tests, so that each meets it
        whole."""
        self.clear_request_faults()
        self.heal()
        for broker_id in self.live_broker_ids:
            if self._nodes[broker_id].gate.paused:
                self.resume_broker(broker_id)
        for broker_id in self.broker_ids:
            node = self._nodes[broker_id]
            if not node.alive and not node.starting:  # one starting meets the healed network anyway
                if node.zk is not None:
                    self.service.expire(node.zk.session.session_id)
                await self.restart_broker(broker_id)

    def _apply_coordination_links(self) -> None:
        for broker_id, node in self._nodes.items():
            self.service.set_reachable(f"broker-{broker_id}", self.transport.link_up(broker_id, COORDINATION))

    # -- waiting ----------------------------------------------------------------------------------------------------

    async def wait_until(self, condition: Callable[[], bool], *, timeout: float = 30, interval: float = 0.005,
                         what: str = "the condition") -> None:
        """Poll `condition` on Trio's clock (simulated under MockClock); REQUEST_TIMED_OUT after `timeout`."""
        if not callable(condition):
            raise TypeError(f"condition must be a function of no arguments, not {type(condition).__name__} "
                            f"{condition!r}")
        check_seconds(timeout, "timeout")
        check_interval(interval)
        with trio.move_on_after(timeout):
            done = condition()
            if inspect.isawaitable(done):  # always truthy: the wait would end at once, having checked nothing
                if inspect.iscoroutine(done):
                    done.close()
                raise TypeError("wait_until() takes a plain function: an async one returns an awaitable, which is "
                                "never false; await what it needs before, or check a value it sets")
            while not done:
                await trio.sleep(interval)
                done = condition()
            return
        raise RequestTimedOutError(f"timed out after {timeout}s waiting for {what}")
