"""Kafka's use of the coordination service: its paths, what it stores there, and session handling.

This is kafkalite's `KafkaZkClient`: the one place that knows `/brokers/ids/<id>` holds endpoints and
`/brokers/topics/<t>/partitions/<p>/state` holds a LeaderAndIsr. The broker and the controller share one
client per node, as a Kafka broker and its controller share one ZooKeeper session; when that session expires
the client opens a new one at once and tells its state-change handlers, so the broker can register again and
the controller can resign and stand for election again. A link to the service that heals before the session
expires tells the handlers that asked for it (the controller, which stopped acting when it lost the link).

Watches are one-shot. Handlers registered here are called when a watch on their path fires; they re-arm the
watch themselves by reading the path again with `watch=True`, exactly as Kafka's controller does when it
processes the event.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, TypeVar

import msgpack
import trio

from kafkalite.common.types import TopicPartition
from kafkalite.coordination.errors import (
    BadVersionError,
    ConnectionLossError,
    CoordinationError,
    NodeExistsError,
    NoNodeError,
    SessionExpiredError,
)
from kafkalite.coordination.service import (
    CheckOp,
    CoordinationService,
    CreateOp,
    DeleteOp,
    EventType,
    Op,
    Session,
    SetDataOp,
    WatchedEvent,
)

log = logging.getLogger(__name__)

K = TypeVar("K")
T = TypeVar("T")

BROKER_IDS_PATH = "/brokers/ids"
TOPICS_PATH = "/brokers/topics"
CONTROLLER_PATH = "/controller"
CONTROLLER_EPOCH_PATH = "/controller_epoch"
DELETE_TOPICS_PATH = "/admin/delete_topics"
REASSIGN_PARTITIONS_PATH = "/admin/reassign_partitions"
PREFERRED_REPLICA_ELECTION_PATH = "/admin/preferred_replica_election"
ISR_CHANGE_NOTIFICATION_PATH = "/isr_change_notification"
ISR_CHANGE_PREFIX = "isr_change_"
TOPIC_CONFIG_PATH = "/config/topics"
CONFIG_CHANGES_PATH = "/config/changes"
CONFIG_CHANGE_PREFIX = "config_change_"
CONFIG_CHANGE_EXPIRATION_S = 15 * 60
"""How long a `/config/changes` notification stays: Kafka's ZkNodeChangeNotificationListener (changeExpirationMs)."""
CLUSTER_ID_PATH = "/cluster/id"
PRODUCER_ID_BLOCK_PATH = "/latest_producer_id_block"
PRODUCER_ID_BLOCK_SIZE = 1000

# The persistent paths Kafka creates at start, so that watches on their children can always be set.
PERSISTENT_PATHS = (BROKER_IDS_PATH, TOPICS_PATH, DELETE_TOPICS_PATH, ISR_CHANGE_NOTIFICATION_PATH,
                    TOPIC_CONFIG_PATH, CONFIG_CHANGES_PATH)


def encode(value: Any) -> bytes:
    return msgpack.packb(value, use_bin_type=True)


def decode(data: bytes, *, use_list: bool = True) -> Any:
    """`use_list=False` gives tuples for arrays: the cyclic GC stops tracking a tuple of ints, so the 100,000
    replica lists of a large topic's znode, read at every controller failover, do not reach its oldest generation
    while they are alive."""
    return msgpack.unpackb(data, raw=False, strict_map_key=False, use_list=use_list)


def topic_path(topic: str) -> str:
    return f"{TOPICS_PATH}/{topic}"


def partition_state_path(tp: TopicPartition) -> str:
    return f"{TOPICS_PATH}/{tp.topic}/partitions/{tp.partition}/state"


def broker_path(broker_id: int) -> str:
    return f"{BROKER_IDS_PATH}/{broker_id}"


def topic_config_path(topic: str) -> str:
    return f"{TOPIC_CONFIG_PATH}/{topic}"


def delete_topic_path(topic: str) -> str:
    return f"{DELETE_TOPICS_PATH}/{topic}"


def encode_partition_reassignment(targets: Mapping[TopicPartition, Sequence[int]]) -> bytes:
    """`/admin/reassign_partitions` in Kafka's layout: {"version": 1, "partitions": [{topic, partition, replicas}]}."""
    return encode({"version": 1, "partitions": [{"topic": tp.topic, "partition": tp.partition,
                                                 "replicas": list(replicas)}
                                                for tp, replicas in sorted(targets.items())]})


def decode_partition_reassignment(value: Any) -> tuple[dict[TopicPartition, list[int]], list[str]]:
    """The well-formed entries of `/admin/reassign_partitions`, and why each other entry was left out.

    Tools write this znode directly, so it is read as input from outside: a payload of the wrong shape raises
    ValueError; an entry with no replicas or a broker listed twice could never complete and is left out.
    """
    if not isinstance(value, dict) or not isinstance(value.get("partitions"), list):
        raise ValueError(f"expected {{'version': 1, 'partitions': [...]}}, got {value!r:.200}")
    targets: dict[TopicPartition, list[int]] = {}
    rejected: list[str] = []
    for entry in value["partitions"]:
        topic, partition, replicas = (entry.get(k) for k in ("topic", "partition", "replicas")) \
            if isinstance(entry, dict) else (None, None, None)
        if not isinstance(topic, str) or type(partition) is not int or not isinstance(replicas, list) \
                or not all(type(r) is int for r in replicas):
            rejected.append(f"{entry!r:.200} is not {{'topic': str, 'partition': int, 'replicas': [int]}}")
        elif not replicas or len(set(replicas)) != len(replicas):
            rejected.append(f"{topic}-{partition}: the replicas {replicas} are empty or repeat a broker")
        else:
            targets[TopicPartition(topic, partition)] = replicas
    return targets, rejected


def decode_preferred_replica_election(value: Any) -> list[TopicPartition] | None:
    """`/admin/preferred_replica_election`: the partitions listed, or None (no list) for every partition."""
    if value is None or (isinstance(value, dict) and value.get("partitions") is None):
        return None
    listed = value.get("partitions") if isinstance(value, dict) else None
    if not isinstance(listed, list) or not all(isinstance(p, dict) and isinstance(p.get("topic"), str)
                                               and type(p.get("partition")) is int for p in listed):
        raise ValueError(f"expected {{'partitions': [{{'topic': str, 'partition': int}}]}}, got {value!r:.200}")
    return [TopicPartition(p["topic"], p["partition"]) for p in listed]


@dataclass(frozen=True, slots=True)
class EndPoint:
    listener: str
    host: str
    port: int
    security_protocol: str = "PLAINTEXT"

    @property
    def address(self) -> str:
        """`host:port`, an IPv6 host in brackets (`[::1]:9092`) as Kafka's clients and `listeners` spell it."""
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    @property
    def listener_spec(self) -> str:
        """`NAME://host:port`, one entry of the `listeners` property."""
        return f"{self.listener}://{self.address}"


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    """What a broker registers about itself; `epoch` is its znode's creation zxid (KIP-380's broker epoch)."""

    id: int
    endpoints: tuple[EndPoint, ...]
    rack: str | None = None
    epoch: int = -1

    def endpoint(self, listener: str) -> EndPoint | None:
        return next((ep for ep in self.endpoints if ep.listener == listener), None)


class LeaderAndIsr(NamedTuple):
    """A partition's leader, leader epoch and ISR, and the version of its znode (zkVersion): the one it was read
    at, or for a state to write, the one the write gives (see `new_leader_and_isr`).

    This and LeaderIsrAndControllerEpoch are named tuples rather than frozen dataclasses: a controller makes one
    of each per partition it moves, thousands in a controlled shutdown, and a frozen dataclass's `__init__` sets
    each field through `object.__setattr__`, four times slower than a tuple is built."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    zk_version: int = 0

    def new_leader_and_isr(self, leader: int, isr: Sequence[int]) -> LeaderAndIsr:
        """The state a controller's write of this change makes: every leadership or ISR change bumps the leader
        epoch, as in Kafka, and the write gives the znode the next version, which the state carries already.
        Kafka's keeps the version read, and its write makes a third object with the written one: over a batch
        of thousands, the cyclic GC carried both into its oldest generation. `update_leader_and_isr` writes it
        if the znode is still at the version before, and answers with this very state."""
        return LeaderAndIsr(leader, self.leader_epoch + 1, tuple(isr), self.zk_version + 1)


class LeaderIsrAndControllerEpoch(NamedTuple):
    leader_and_isr: LeaderAndIsr
    controller_epoch: int


def encode_partition_state(state: LeaderIsrAndControllerEpoch) -> bytes:
    lai = state.leader_and_isr
    return encode({"leader": lai.leader, "leader_epoch": lai.leader_epoch, "isr": list(lai.isr),
                   "controller_epoch": state.controller_epoch})


def decode_partition_state(data: bytes, zk_version: int) -> LeaderIsrAndControllerEpoch:
    raw = decode(data, use_list=False)  # the ISR as a tuple already
    return LeaderIsrAndControllerEpoch(
        LeaderAndIsr(raw["leader"], raw["leader_epoch"], tuple(raw["isr"]), zk_version), raw["controller_epoch"])


class ControllerMovedError(Exception):
    """A controller write failed its `/controller_epoch` check: another broker has been elected since."""


@dataclass
class _Handlers:
    znode: dict[str, Callable[[WatchedEvent], None]] = field(default_factory=dict)
    child: dict[str, Callable[[WatchedEvent], None]] = field(default_factory=dict)
    new_session: dict[str, Callable[[], None]] = field(default_factory=dict)
    reconnected: dict[str, Callable[[], None]] = field(default_factory=dict)


class KafkaZkClient:
    """One node's connection to the coordination service, with Kafka's reads and writes on top."""

    def __init__(self, service: CoordinationService, owner: str, session_timeout_ms: int) -> None:
        self.service = service
        self.owner = owner
        self.session_timeout_ms = session_timeout_ms
        self._handlers = _Handlers()
        self._expired = trio.Event()  # set when the session's expiry is heard: reconnect without waiting
        self._link_news = trio.Event()  # set, and replaced, when a cut-off link heals or the session ends
        self.session = self._connect()

    def _connect(self) -> Session:
        session = self.service.connect(self.session_timeout_ms, owner=self.owner)
        session.add_listener(self._dispatch)
        return session

    # -- session lifecycle ------------------------------------------------------------------------------------------

    async def run(self, checkpoint: Callable[[], Awaitable[None]] | None = None) -> None:
        """Heartbeat the session; when it expires, open a new one and let the state handlers re-register.

        `checkpoint` is awaited before every heartbeat: a paused node (a GC pause) stops heartbeating, so its
        session expires after the timeout exactly as a frozen JVM's would.
        """
        interval = self.session_timeout_ms / 3000
        while True:
            if checkpoint is not None:
                await checkpoint()
            try:
                self.session.heartbeat()
            except ConnectionLossError:
                # Cut off from the service: the session runs out unless the link heals in time. Only the clock
                # brings the next try (an expiry heard before the cut would otherwise wake the loop at once).
                await trio.sleep(interval)
                continue
            except SessionExpiredError:
                if self.session.closed and not self.session.expired:
                    return
                await self._reconnect()
                continue
            with trio.move_on_after(interval):
                await self._expired.wait()

    async def _reconnect(self) -> None:
        log.info("coordination session of %s expired; opening a new one", self.owner)
        while True:
            try:
                self._expired = trio.Event()
                self.session = self._connect()
                break
            except ConnectionLossError:
                await trio.sleep(self.session_timeout_ms / 3000)
        for handler in list(self._handlers.new_session.values()):
            handler()

    def close(self) -> None:
        self.session.close()

    def register_state_change_handler(self, name: str, on_new_session: Callable[[], None],
                                      on_reconnected: Callable[[], None] | None = None) -> None:
        """`on_new_session` after an expired session was replaced; `on_reconnected` when the link to the service
        heals within the session. Both are called synchronously: they should only queue work."""
        self._handlers.new_session[name] = on_new_session
        if on_reconnected is not None:
            self._handlers.reconnected[name] = on_reconnected

    def register_znode_change_handler(self, path: str, handler: Callable[[WatchedEvent], None]) -> None:
        self._handlers.znode[path] = handler

    def register_child_change_handler(self, path: str, handler: Callable[[WatchedEvent], None]) -> None:
        self._handlers.child[path] = handler

    def unregister_handlers(self, *paths: str) -> None:
        for path in paths:
            self._handlers.znode.pop(path, None)
            self._handlers.child.pop(path, None)

    async def when_reachable(self, call: Callable[[], T]) -> T:
        """`call()` (a read or write of the service), held while this node is cut off from the service and tried
        again when the link heals, as Kafka's ZooKeeperClient holds a request while disconnected. It fails only
        when the session ended meanwhile (SessionExpiredError), also if a new one has replaced it already: the old
        one's watches are gone, and whoever holds state from it must start again on the next session."""
        session = self.session
        while True:
            news = self._link_news
            if self.session is not session:
                raise SessionExpiredError("/", f"the session of {self.owner} ended while a call waited for the link")
            try:
                return call()
            except ConnectionLossError:
                await news.wait()

    def _dispatch(self, event: WatchedEvent) -> None:
        if event.type in (EventType.SESSION_EXPIRED, EventType.CONNECTED):
            self._link_news.set()
            self._link_news = trio.Event()
        if event.type is EventType.SESSION_EXPIRED:
            self._expired.set()  # `run` reconnects now
            return
        if event.type is EventType.CONNECTED:
            for handler in list(self._handlers.reconnected.values()):
                handler()
            return
        table = self._handlers.child if event.type is EventType.NODE_CHILDREN_CHANGED else self._handlers.znode
        handler = table.get(event.path)
        if handler is None and event.type is EventType.NODE_DELETED:
            handler = self._handlers.child.get(event.path)
        if handler is not None:
            handler(event)

    # -- generic --------------------------------------------------------------------------------------------------

    def ensure_persistent_paths(self) -> None:
        for path in PERSISTENT_PATHS:
            try:
                self.session.create(path, make_parents=True)
            except NodeExistsError:
                pass

    def exists(self, path: str, *, watch: bool = False) -> bool:
        return self.session.exists(path, watch=watch) is not None

    def get_children(self, path: str, *, watch: bool = False) -> list[str]:
        try:
            return self.session.get_children(path, watch=watch)
        except NoNodeError:
            if watch:
                self.session.exists(path, watch=True)
            return []

    def get_data(self, path: str, *, watch: bool = False, use_list: bool = True) -> tuple[Any, int] | None:
        """(decoded data, version), or None when the node does not exist (a watch then waits for its creation);
        `use_list` as in `decode`."""
        try:
            data, stat = self.session.get(path, watch=watch)
        except NoNodeError:
            if watch:
                self.session.exists(path, watch=True)
            return None
        return (decode(data, use_list=use_list) if data else None), stat.version

    def create_persistent(self, path: str, value: Any = None) -> None:
        self.session.create(path, encode(value) if value is not None else b"", make_parents=True)

    def delete_recursive(self, path: str) -> None:
        for child in self.get_children(path):
            self.delete_recursive(f"{path}/{child}")
        try:
            self.session.delete(path)
        except NoNodeError:
            pass

    # -- brokers --------------------------------------------------------------------------------------------------

    def register_broker(self, broker: BrokerInfo) -> int:
        """Create the ephemeral `/brokers/ids/<id>`; returns the broker epoch (the znode's czxid)."""
        data = encode({"endpoints": [[ep.listener, ep.host, ep.port, ep.security_protocol]
                                     for ep in broker.endpoints], "rack": broker.rack})
        path = broker_path(broker.id)
        self.session.create(path, data, ephemeral=True, make_parents=True)
        _, stat = self.session.get(path)
        return stat.czxid

    def get_broker(self, broker_id: int) -> BrokerInfo | None:
        try:
            data, stat = self.session.get(broker_path(broker_id))
        except NoNodeError:
            return None
        raw = decode(data)
        return BrokerInfo(broker_id, tuple(EndPoint(*ep) for ep in raw["endpoints"]), raw["rack"], stat.czxid)

    def get_all_brokers(self, *, watch: bool = False) -> dict[int, BrokerInfo]:
        brokers = {}
        for child in self.get_children(BROKER_IDS_PATH, watch=watch):
            info = self.get_broker(int(child))
            if info is not None:
                brokers[info.id] = info
        return brokers

    # -- controller election ----------------------------------------------------------------------------------------

    def get_controller_id(self, *, watch: bool = False) -> int | None:
        found = self.get_data(CONTROLLER_PATH, watch=watch)
        return None if found is None else found[0]["brokerid"]

    def controller_is_this_session(self) -> bool:
        """Whether `/controller` is this session's own node: a controller that resigned on losing the link
        and finds it still there after the link healed is still the elected one."""
        stat = self.session.exists(CONTROLLER_PATH)
        return stat is not None and stat.ephemeral_owner == self.session.session_id

    def register_controller_and_increment_epoch(self, broker_id: int, timestamp_ms: int) -> tuple[int, int] | None:
        """Create the ephemeral `/controller` and bump `/controller_epoch` in one transaction (seed 004; Kafka's
        registerControllerAndIncrementControllerEpoch), so no broker is ever elected without a new epoch.

        Returns (epoch, epoch zk version) for fencing later writes, or None if another broker is controller.
        """
        controller = CreateOp(CONTROLLER_PATH, encode({"version": 1, "brokerid": broker_id,
                                                       "timestamp": timestamp_ms}), ephemeral=True)
        try:
            return self._bump_controller_epoch([controller])
        except NodeExistsError as exc:
            if exc.index == 0:
                return None
            raise

    def increment_controller_epoch(self) -> tuple[int, int]:
        """A new epoch for a controller whose `/controller` survived a lost link (see controller_is_this_session)."""
        stat = self.session.exists(CONTROLLER_PATH)
        if stat is None or stat.ephemeral_owner != self.session.session_id:
            raise ControllerMovedError("/controller is no longer this session's")
        return self._bump_controller_epoch([CheckOp(CONTROLLER_PATH, stat.version)])

    def _bump_controller_epoch(self, ops: list[Op]) -> tuple[int, int]:
        found = self.get_data(CONTROLLER_EPOCH_PATH)
        epoch = 1 if found is None else found[0] + 1
        bump = CreateOp(CONTROLLER_EPOCH_PATH, encode(epoch)) if found is None else \
            SetDataOp(CONTROLLER_EPOCH_PATH, encode(epoch), version=found[1])
        results = self.session.multi([*ops, bump])
        written = results[-1]
        return epoch, 0 if isinstance(written, str) else written.version  # type: ignore[attr-defined]

    def get_controller_epoch(self) -> tuple[int, int] | None:
        return self.get_data(CONTROLLER_EPOCH_PATH)

    def controller_multi(self, epoch_zk_version: int, ops: Iterable[Op]) -> list[object]:
        """Every controller write: the ops (a generator may make them as they are written) plus a check that
        `/controller_epoch` is still ours."""
        try:
            return self.session.multi(itertools.chain((CheckOp(CONTROLLER_EPOCH_PATH, epoch_zk_version),), ops))
        except BadVersionError as exc:
            if getattr(exc, "index", None) == 0:
                raise ControllerMovedError(f"controller epoch znode version is no longer {epoch_zk_version}") \
                    from None
            raise

    def controller_multi_each(self, epoch_zk_version: int, keys: Iterable[K], ops_for: Callable[[K], Sequence[Op]]
                              ) -> tuple[dict[K, object], dict[K, CoordinationError]]:
        """Controller writes that succeed or fail group by group, as the writes a ZooKeeper client pipelines do
        (Kafka's controller sends a whole batch's partition states so).

        All groups go in one transaction; if a group's op fails (a version moved on, a node exists), that group
        is left out and the others are written one transaction each, so a conflict costs its own group only and
        several cost no more than writing each group alone. `ops_for(key)` makes a group's ops when the
        transaction takes them, again for a group written alone: the ops of thousands of partitions are not all
        held until the transaction ends, which carried each into the cyclic GC's oldest generation. Returns
        the result of each written group's last op and each failed group's error; ControllerMovedError (or a
        lost session) fails them all, as it does every controller write."""
        done: dict[K, object] = {}
        failed: dict[K, CoordinationError] = {}
        keys = list(keys)
        if not keys:
            return done, failed
        owners: list[K] = []  # the group of each op, as the transaction takes them

        def all_ops() -> Iterator[Op]:
            for key in keys:
                for op in ops_for(key):
                    owners.append(key)
                    yield op

        try:
            results = self.controller_multi(epoch_zk_version, all_ops())
        except CoordinationError as exc:
            if not exc.index:  # no op failed (the session), or the epoch check did
                raise
            failed[owners[exc.index - 1]] = exc
        else:
            for key, result in zip(owners, itertools.islice(results, 1, None)):  # after the epoch check
                done[key] = result  # a group's later ops overwrite its earlier ones' results
            return done, failed
        for key in keys:
            if key in failed:
                continue
            try:
                done[key] = self.controller_multi(epoch_zk_version, ops_for(key))[-1]
            except CoordinationError as exc:
                if not exc.index:
                    raise
                failed[key] = exc
        return done, failed

    # -- the cluster's id -------------------------------------------------------------------------------------------

    def create_or_get_cluster_id(self, proposed: str) -> str:
        """Kafka's getOrGenerateClusterId: the id the cluster's first broker wrote, or `proposed` if this broker is
        the first. Every broker, and every restart, then answers clients with the same id."""
        try:
            self.session.create(CLUSTER_ID_PATH, encode({"version": "1", "id": proposed}), make_parents=True)
            return proposed
        except NodeExistsError:
            found = self.get_cluster_id()
            assert found is not None  # never deleted
            return found

    def get_cluster_id(self) -> str | None:
        """The cluster's id, None until its first broker has started."""
        found = self.get_data(CLUSTER_ID_PATH)
        return None if found is None else str(found[0]["id"])

    # -- idempotent producers ---------------------------------------------------------------------------------------

    def allocate_producer_id_block(self, broker_id: int) -> range:
        """Claim the next block of producer ids with a version-checked write, as Kafka's ProducerIdManager does.

        Every broker hands out ids from its own block, so two brokers never give one id to two producers.
        """
        while True:
            found = self.get_data(PRODUCER_ID_BLOCK_PATH)
            start = 0 if found is None else found[0]["end"] + 1
            block = encode({"version": 1, "broker": broker_id, "start": start,
                            "end": start + PRODUCER_ID_BLOCK_SIZE - 1})
            try:
                if found is None:
                    self.session.create(PRODUCER_ID_BLOCK_PATH, block)
                else:
                    self.session.set(PRODUCER_ID_BLOCK_PATH, block, version=found[1])
            except (NodeExistsError, BadVersionError):
                continue  # another broker claimed a block meanwhile: read again
            return range(start, start + PRODUCER_ID_BLOCK_SIZE)

    def latest_producer_id(self) -> int:
        """The largest producer id any broker may have handed out (-1: none yet)."""
        found = self.get_data(PRODUCER_ID_BLOCK_PATH)
        return -1 if found is None else found[0]["end"]

    # -- topics and partitions --------------------------------------------------------------------------------------

    def get_all_topics(self, *, watch: bool = False) -> list[str]:
        return self.get_children(TOPICS_PATH, watch=watch)

    def get_replica_assignment(self, topic: str, *, watch: bool = False) -> dict[int, list[int]] | None:
        assignment = self.get_assignment(topic, watch=watch)
        return None if assignment is None else {p: list(replicas) for p, replicas in assignment.items()}

    def get_assignment(self, topic: str, *, watch: bool = False) -> dict[int, tuple[int, ...]] | None:
        """The topic's replica assignment as the controller caches it: each partition's replicas a tuple, which the
        cyclic GC stops tracking (a list per partition would reach its oldest generation at every failover)."""
        found = self.get_topic_id_and_assignment(topic, watch=watch)
        return None if found is None else found[1]

    def get_topic_id_and_assignment(self, topic: str, *, watch: bool = False
                                    ) -> tuple[str | None, dict[int, tuple[int, ...]]] | None:
        """The topic znode's id (None in one written without, as by Kafka before 2.8) and assignment, in one read."""
        found = self.get_data(topic_path(topic), watch=watch, use_list=False)
        if found is None or found[0] is None:
            return None
        return found[0].get("topic_id"), {int(p): replicas for p, replicas in found[0]["partitions"].items()}

    def get_ongoing_reassignments(self, topic: str) -> dict[int, tuple[list[int], list[int]]]:
        """(adding replicas, removing replicas) of each partition of `topic` in the middle of a reassignment, as
        Kafka keeps them in the topic znode (KIP-455), so a new controller can resume a move it did not start."""
        found = self.get_data(topic_path(topic), use_list=False)
        if found is None or found[0] is None:
            return {}
        adding, removing = found[0].get("adding_replicas", {}), found[0].get("removing_replicas", {})
        return {int(p): (list(adding.get(p, [])), list(removing.get(p, []))) for p in set(adding) | set(removing)}

    def create_topic_ops(self, topic: str, assignment: dict[int, list[int]], config: dict[str, Any],
                         topic_id: str | None = None) -> list[Op]:
        """A new topic's assignment, id and config, to be written in one transaction; the topic watch does the rest.
        Without an id, the controller gives the topic one when it finds it, as Kafka's does since 2.8.

        NodeExistsError from the multi means the topic exists: TOPIC_ALREADY_EXISTS, nothing half-created.
        """
        return [
            CreateOp(topic_config_path(topic), encode({"version": 1, "config": config})),
            self.set_replica_assignment_op(topic, topic_id, assignment, create=True),
        ]

    def set_replica_assignment_op(self, topic: str, topic_id: str | None, assignment: Mapping[int, Sequence[int]],
                                  reassigning: Mapping[int, tuple[Sequence[int], Sequence[int]]] | None = None, *,
                                  create: bool = False) -> Op:
        """The topic znode, as Kafka's TopicZNode (version 3 with an id): its id, its assignment and, in
        `reassigning`, the (adding, removing) replicas of partitions being moved. Replica lists are lists or tuples,
        which pack alike.

        Kafka writes the whole topic znode at every step of a partition's move, so moving all of a topic's P
        partitions writes it 2P times: the partitions' map is built in C (`map`, `zip`), not entry by entry."""
        moving = sorted((reassigning or {}).items())
        partitions = sorted(assignment)
        data: dict[str, Any] = {"version": 2 if topic_id is None else 3}
        if topic_id is not None:
            data["topic_id"] = topic_id
        data["partitions"] = dict(zip(map(str, partitions), map(assignment.__getitem__, partitions)))
        data["adding_replicas"] = {str(p): adding for p, (adding, _) in moving if adding}
        data["removing_replicas"] = {str(p): removing for p, (_, removing) in moving if removing}
        return (CreateOp if create else SetDataOp)(topic_path(topic), encode(data))

    def change_topic_config(self, topic: str, config: dict[str, Any]) -> None:
        """Replace a topic's overrides and announce it under `/config/changes`, which every broker watches."""
        self.session.multi([
            SetDataOp(topic_config_path(topic), encode({"version": 1, "config": config})),
            CreateOp(f"{CONFIG_CHANGES_PATH}/{CONFIG_CHANGE_PREFIX}", encode({"version": 2,
                                                                             "entity_path": f"topics/{topic}"}),
                     sequential=True),
        ])

    def purge_config_changes(self) -> None:
        """Delete the `/config/changes` notifications older than CONFIG_CHANGE_EXPIRATION_S, as Kafka's brokers
        purge them each time they process notifications: every live broker has long applied them (a broker that
        was away re-reads every config when it comes back), and kept, they would pile up, one per change, for
        every broker to list at each change."""
        cutoff = trio.current_time() - CONFIG_CHANGE_EXPIRATION_S  # znode times are Trio times
        for child in self.get_children(CONFIG_CHANGES_PATH):
            path = f"{CONFIG_CHANGES_PATH}/{child}"
            try:
                if self.session.get(path)[1].ctime < cutoff:
                    self.session.delete(path)
            except NoNodeError:
                pass  # another broker purged it first

    def get_topic_config(self, topic: str) -> dict[str, Any]:
        found = self.get_data(topic_config_path(topic))
        return {} if found is None or found[0] is None else dict(found[0]["config"])

    def get_partition_state(self, tp: TopicPartition, *, watch: bool = False) -> LeaderIsrAndControllerEpoch | None:
        try:
            data, stat = self.session.get(partition_state_path(tp), watch=watch)
        except NoNodeError:
            return None
        return decode_partition_state(data, stat.version)

    def get_partition_states(self, partitions: Iterable[TopicPartition], *,
                             cached: Mapping[TopicPartition, LeaderIsrAndControllerEpoch] | None = None
                             ) -> dict[TopicPartition, LeaderIsrAndControllerEpoch]:
        """The stored state of each partition that has one, read together (Kafka's getTopicPartitionStates).

        A state whose znode version is its entry's in `cached` is that entry, not decoded again: every write bumps
        the version, and the controller drops a topic's states when it deletes the topic, so in its cache a
        version names one content. A controller that reads back thousands of states it already holds (a
        controlled shutdown, the broker failure after it) keeps its objects and decodes only what changed, instead
        of replacing each with two new ones that the cyclic GC would carry into its oldest generation."""
        partitions = list(partitions)
        found = self.session.get_many([partition_state_path(tp) for tp in partitions])
        known = cached if cached is not None else {}
        states = {}
        for tp, data in zip(partitions, found):
            if data is not None:
                held = known.get(tp)
                states[tp] = held if held is not None and held.leader_and_isr.zk_version == data[1] \
                    else decode_partition_state(*data)
        return states

    def create_partition_state_ops(self, tp: TopicPartition, state: LeaderIsrAndControllerEpoch) -> list[Op]:
        """A new partition's state znode and the parents it lacks."""
        return self._create_partition_state_ops(tp, state, {})

    def _create_partition_state_ops(self, tp: TopicPartition, state: LeaderIsrAndControllerEpoch,
                                    partition_dirs: dict[str, set[str]]) -> list[Op]:
        """`partition_dirs` holds, per topic, the partition znodes that exist or that earlier ops create: each
        topic's are listed once, not looked up two by two per partition."""
        base = f"{TOPICS_PATH}/{tp.topic}/partitions"
        ops: list[Op] = []
        known = partition_dirs.get(tp.topic)
        if known is None:
            listed = self.exists(base)
            known = partition_dirs[tp.topic] = set(self.get_children(base)) if listed else set()
            if not listed:
                ops.append(CreateOp(base))
        name = str(tp.partition)
        if name not in known:
            ops.append(CreateOp(f"{base}/{name}"))
            known.add(name)
        ops.append(CreateOp(partition_state_path(tp), encode_partition_state(state)))
        return ops

    def create_partition_states(self, epoch_zk_version: int, states: Mapping[TopicPartition,
                                                                             LeaderIsrAndControllerEpoch]
                                ) -> tuple[list[TopicPartition], dict[TopicPartition, CoordinationError]]:
        """Create new partitions' state znodes, one transaction for them all; returns the partitions created
        and, per partition, why it was not (NodeExistsError: its state exists already).

        A topic's `partitions` znode, when missing, is created with its first partition's: if that one fails,
        its state existed, so the parent did too, and the others still find it."""
        partition_dirs: dict[str, set[str]] = {}
        # made once, not as written: a group written alone must still create the parents it was the first to
        groups = {tp: self._create_partition_state_ops(tp, state, partition_dirs) for tp, state in states.items()}
        done, failed = self.controller_multi_each(epoch_zk_version, groups, groups.__getitem__)
        return list(done), failed

    def update_partition_state_op(self, tp: TopicPartition, state: LeaderIsrAndControllerEpoch) -> Op:
        """A version-checked write of a state made by `new_leader_and_isr`: it fails if anyone changed the
        partition since it was read, that is unless the znode is at the version before the state's."""
        return SetDataOp(partition_state_path(tp), encode_partition_state(state),
                         version=state.leader_and_isr.zk_version - 1)

    def update_leader_and_isr(self, epoch_zk_version: int, states: Mapping[TopicPartition,
                                                                          LeaderIsrAndControllerEpoch]
                              ) -> tuple[dict[TopicPartition, LeaderIsrAndControllerEpoch],
                                         dict[TopicPartition, CoordinationError]]:
        """Version-checked writes of partition states made by `new_leader_and_isr` (Kafka's updateLeaderAndIsr):
        each fails on its own if anyone changed that partition since it was read. Returns the states written
        (the very objects given, whose zk version is the written one) and per partition the error of a write
        that failed."""
        done, failed = self.controller_multi_each(
            epoch_zk_version, states, lambda tp: (self.update_partition_state_op(tp, states[tp]),))
        return {tp: states[tp] for tp in done}, failed

    def conditional_update_partition_state(self, tp: TopicPartition, state: LeaderIsrAndControllerEpoch
                                           ) -> int | None:
        """The leader's ISR update: a version-checked set of a state that names the version the set gives the
        znode, as every state written here does (`new_leader_and_isr`); that version, or None if the znode has
        moved on from the one before."""
        try:
            stat = self.session.set(partition_state_path(tp), encode_partition_state(state),
                                    version=state.leader_and_isr.zk_version - 1)
        except (BadVersionError, NoNodeError):
            return None
        return stat.version

    def create_isr_change_notification(self, partitions: Sequence[TopicPartition]) -> str:
        return self.session.create(
            f"{ISR_CHANGE_NOTIFICATION_PATH}/{ISR_CHANGE_PREFIX}",
            encode({"version": 1, "partitions": [{"topic": tp.topic, "partition": tp.partition}
                                                  for tp in partitions]}),
            sequential=True, make_parents=True)

    def get_isr_change_notifications(self, *, watch: bool = False) -> list[str]:
        return self.get_children(ISR_CHANGE_NOTIFICATION_PATH, watch=watch)

    def read_isr_change_notification(self, name: str) -> list[TopicPartition]:
        found = self.get_data(f"{ISR_CHANGE_NOTIFICATION_PATH}/{name}")
        if found is None:
            return []
        return [TopicPartition(p["topic"], p["partition"]) for p in found[0]["partitions"]]

    def delete_isr_change_notifications(self, names: Sequence[str], epoch_zk_version: int) -> None:
        ops: list[Op] = [DeleteOp(f"{ISR_CHANGE_NOTIFICATION_PATH}/{name}") for name in names
                         if self.exists(f"{ISR_CHANGE_NOTIFICATION_PATH}/{name}")]
        if ops:
            self.controller_multi(epoch_zk_version, ops)


__all__ = [
    "BROKER_IDS_PATH", "TOPICS_PATH", "CONTROLLER_PATH", "CONTROLLER_EPOCH_PATH", "DELETE_TOPICS_PATH",
    "REASSIGN_PARTITIONS_PATH", "PREFERRED_REPLICA_ELECTION_PATH", "ISR_CHANGE_NOTIFICATION_PATH",
    "TOPIC_CONFIG_PATH", "BrokerInfo", "EndPoint", "LeaderAndIsr", "LeaderIsrAndControllerEpoch",
    "KafkaZkClient", "ControllerMovedError", "SessionExpiredError", "encode", "decode", "topic_path",
    "partition_state_path", "broker_path", "delete_topic_path", "encode_partition_reassignment",
    "decode_partition_reassignment", "decode_preferred_replica_election",
]
