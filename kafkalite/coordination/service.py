"""The coordination service: ZooKeeper's contract, in memory, on Trio's clock.

Kafka's controller is correct only because of a few ZooKeeper guarantees, and this module keeps exactly
those: every write gets a new zxid (Kafka reads a broker's epoch off its znode's czxid); conditional writes
compare versions (the controller fences itself with `/controller_epoch`'s version, leaders fence ISR writes
with the partition state's); `multi` is all or nothing; ephemeral nodes die with their session; watches are
one-shot and reach each session in the order the changes happened.

A session whose owner is cut off from the service (`set_reachable(owner, False)`) hears nothing, as a
ZooKeeper client hears nothing while disconnected: its watch events are held, and when the link heals it
first gets a CONNECTED event and then every held event in order. If it expired meanwhile, the held events
end with SESSION_EXPIRED, which is all a ZooKeeper client learns once it reconnects.

Operations are plain synchronous calls: the service lives in the same process, so an `await` would only add
scheduling points where another task could observe half an operation. Time enters only through sessions:
`run()` expires every session whose owner stopped heartbeating, on `trio.current_time()`, so a MockClock
drives session timeouts in tests.
"""

from __future__ import annotations

import enum
import itertools
import logging
import math
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import trio
from sortedcontainers import SortedSet

from kafkalite.coordination.errors import (
    BadArgumentsError,
    BadVersionError,
    ConnectionLossError,
    CoordinationError,
    NoChildrenForEphemeralsError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    SessionExpiredError,
)

log = logging.getLogger(__name__)

ANY_VERSION = -1


class EventType(enum.Enum):
    NODE_CREATED = "NodeCreated"
    NODE_DELETED = "NodeDeleted"
    NODE_DATA_CHANGED = "NodeDataChanged"
    NODE_CHILDREN_CHANGED = "NodeChildrenChanged"
    SESSION_EXPIRED = "SessionExpired"
    CONNECTED = "SyncConnected"  # the owner's link to the service healed; held events follow


@dataclass(frozen=True, slots=True)
class WatchedEvent:
    type: EventType
    path: str


class ZnodeStat(NamedTuple):
    """A znode's stat, as kazoo gives it: a named tuple, built for every write's answer (a frozen dataclass of ten
    fields cost four times as much to make)."""

    czxid: int
    mzxid: int
    pzxid: int
    ctime: float
    mtime: float
    version: int
    cversion: int
    ephemeral_owner: int
    data_length: int
    num_children: int


@dataclass(frozen=True, slots=True)
class CreateOp:
    path: str
    data: bytes = b""
    ephemeral: bool = False
    sequential: bool = False


@dataclass(frozen=True, slots=True)
class SetDataOp:
    path: str
    data: bytes
    version: int = ANY_VERSION


@dataclass(frozen=True, slots=True)
class DeleteOp:
    path: str
    version: int = ANY_VERSION


@dataclass(frozen=True, slots=True)
class CheckOp:
    path: str
    version: int


Op = CreateOp | SetDataOp | DeleteOp | CheckOp

# Which watches an event fires, as ZooKeeper's WatchManager does: False for data (get/exists) watches, True for
# child (get_children) watches. A deleted node fires both kinds, each session once.
_WATCH_KINDS_FIRED: dict[EventType, tuple[bool, ...]] = {
    EventType.NODE_CREATED: (False,),
    EventType.NODE_DATA_CHANGED: (False,),
    EventType.NODE_DELETED: (False, True),
    EventType.NODE_CHILDREN_CHANGED: (True,),
}


_SORTED_FROM = 32


@dataclass(slots=True)
class _Znode:
    data: bytes
    czxid: int
    ctime: float
    ephemeral_owner: int
    mzxid: int = 0
    pzxid: int = 0
    mtime: float = 0.0
    version: int = 0
    cversion: int = 0
    # Made with the first child, as most znodes (partition states) have none; a sorted tuple while small, and a
    # SortedSet once large, so a partition's znode costs a few hundred bytes, the cyclic GC stops tracking the
    # tuple (of strings) of the 10,000 partition znodes holding one `state` each, and a directory of thousands of
    # topics is still listed without sorting it.
    children: tuple[str, ...] | SortedSet | None = None

    def add_child(self, name: str) -> None:
        children = self.children
        if children is None:
            self.children = (name,)
        elif isinstance(children, SortedSet):
            children.add(name)
        elif name not in children:
            self.children = SortedSet((*children, name)) if len(children) + 1 >= _SORTED_FROM else \
                tuple(sorted((*children, name)))

    def discard_child(self, name: str) -> None:
        children = self.children
        if isinstance(children, SortedSet):
            children.discard(name)
        elif children is not None and name in children:
            self.children = tuple(child for child in children if child != name)

    def child_names(self) -> list[str]:
        return list(self.children or ())

    def stat(self) -> ZnodeStat:
        return ZnodeStat(self.czxid, self.mzxid, self.pzxid, self.ctime, self.mtime, self.version, self.cversion,
                         self.ephemeral_owner, len(self.data), len(self.children or ()))


def _split(path: str) -> tuple[str, str]:
    parent, _, name = path.rpartition("/")
    return parent or "/", name


def validate_path(path: str) -> str:
    """ZooKeeper's path rules: absolute, no empty, `.` or `..` components, no trailing slash but on the root."""
    if not isinstance(path, str) or not path.startswith("/"):
        raise BadArgumentsError(str(path), "path must start with /")
    if path == "/" or ("//" not in path and "/." not in path and not path.endswith("/")):
        return path  # no empty component and none starting with a dot: the common case, without splitting
    if path.endswith("/"):
        raise BadArgumentsError(path, "path must not end with /")
    for component in path[1:].split("/"):
        if component in ("", ".", ".."):
            raise BadArgumentsError(path, f"invalid path component {component!r}")
    return path


# What an undo step reverts; the step is (kind, path, *values). A create's and a set's values are atomic (ints,
# floats, bytes), so the cyclic GC stops tracking those tuples at its next young collection and a transaction of
# 100,000 partition states does not carry them into its oldest generation; a delete keeps the node it removed.
_CREATED, _SET, _DELETED = range(3)


class _Transaction:
    """One atomic write: its zxid and time, the undo steps to roll it back, and the watch events to fire on commit."""

    def __init__(self, zxid: int) -> None:
        self.zxid = zxid
        self.now = trio.current_time()  # every node the transaction touches gets the same ctime or mtime
        # Undo steps as (kind, path, values...) and events as a flat [type, path, type, path, ...]: a closure and
        # an event object per op would give the cyclic GC about ten objects per znode to carry until the commit,
        # 2 million for a 100,000-partition topic's states. A WatchedEvent is made for an event a watch hears.
        self.undo: list[tuple[Any, ...]] = []
        self.events: list[EventType | str] = []

    def fire(self, kind: EventType, path: str) -> None:
        self.events += (kind, path)


class CoordinationService:
    """The znode tree, the sessions and the watches."""

    def __init__(self) -> None:
        self._nodes: dict[str, _Znode] = {"/": _Znode(b"", 0, 0.0, 0)}
        self._zxid = 0
        self._next_session_id = 1
        self._sessions: dict[int, Session] = {}
        self._unreachable: set[str] = set()
        self._data_watches: dict[str, set[int]] = {}
        self._child_watches: dict[str, set[int]] = {}
        self._ephemerals: dict[int, set[str]] = {}
        self._deliveries: deque[tuple[Session, WatchedEvent | None]] = deque()
        self._delivering = False
        self._held: dict[Session, list[WatchedEvent | None]] = {}  # events of sessions cut off from us
        self._wakeup = trio.Event()
        self._next_wake = math.inf  # when `run` means to look at the deadlines again

    @property
    def zxid(self) -> int:
        return self._zxid

    # -- sessions -------------------------------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Expire sessions whose deadline passed. Wakes at the earliest deadline, and at least every third of the
        shortest session timeout, as often as the owners heartbeat: waking later than that means the whole
        process was held up (`_credit_stall`)."""
        task_status.started()
        while True:
            now = trio.current_time()
            self._credit_stall(now)
            for session in [s for s in self._sessions.values() if s._deadline <= now]:
                log.info("session 0x%x of %s expired", session.session_id, session.owner or "?")
                self._end_session(session, expired=True)
            earliest = min((s._deadline for s in self._sessions.values()), default=math.inf)
            shortest = min((s.timeout for s in self._sessions.values()), default=math.inf)
            self._next_wake = min(earliest, now + shortest / 3)
            self._wakeup = trio.Event()
            with trio.move_on_at(self._next_wake):
                await self._wakeup.wait()

    def _credit_stall(self, now: float) -> None:
        """Give every session back the time the process stood still.

        ZooKeeper's clients heartbeat from a thread of their own, so a long computation in a broker never costs it
        its session. Here the service, the brokers and their heartbeats share one thread: a controller event
        over tens of thousands of partitions holds them all up for longer than a short session timeout, and
        without this every session would expire at once, the next controller would take as long over the same
        work, and so on without end. `run` wakes at least every third of the shortest timeout; finding itself
        later than that, it knows nobody could heartbeat meanwhile, and moves every deadline on by as much. A
        stall only postpones an expiry: an owner that is dead or paused still loses its session once it has
        stayed silent for its timeout of time in which it could have spoken."""
        stall = now - self._next_wake
        if stall <= 0 or not self._sessions or stall <= min(s.timeout for s in self._sessions.values()) / 3:
            return
        log.info("the process stood still for %.3f s: session deadlines move on by as much", stall)
        for session in self._sessions.values():
            session._deadline += stall
        self._next_wake = now

    def connect(self, timeout_ms: int, *, owner: str = "") -> Session:
        if owner in self._unreachable:
            raise ConnectionLossError("/", f"{owner} cannot reach the coordination service")
        self._credit_stall(trio.current_time())  # before the new session is there: it did not wait through it
        session = Session(self, self._next_session_id, owner, timeout_ms / 1000)
        self._next_session_id += 1
        self._sessions[session.session_id] = session
        self._wakeup.set()
        return session

    def set_reachable(self, owner: str, reachable: bool) -> None:
        """Fault hook: an unreachable owner's calls fail with ConnectionLoss, its heartbeats are lost and its
        watch events are held until it is reachable again."""
        if not reachable:
            self._unreachable.add(owner)
            return
        if owner not in self._unreachable:
            return
        self._unreachable.discard(owner)
        sessions = [s for s in self._sessions.values() if s.owner == owner]
        sessions += [s for s in self._held if s.owner == owner and s._ended]
        for session in sessions:
            if not session._ended:
                self._deliveries.append((session, WatchedEvent(EventType.CONNECTED, "")))
            self._deliveries.extend((session, event) for event in self._held.pop(session, ()))
        self._deliver()

    def expire(self, session_id: int) -> None:
        session = self._sessions.get(session_id)
        if session is not None:
            self._end_session(session, expired=True)

    def _end_session(self, session: Session, *, expired: bool) -> None:
        if session._ended:
            return
        session._ended = True
        session._expired = expired
        del self._sessions[session.session_id]
        for child, path in session._watches:
            watches = self._watch_table(child)
            ids = watches[path]
            ids.discard(session.session_id)
            if not ids:
                del watches[path]
        session._watches.clear()
        ephemerals = self._ephemerals.pop(session.session_id, set())
        if ephemerals:
            txn = self._begin()
            for path in sorted(ephemerals):
                self._delete(txn, path, ANY_VERSION)
            self._commit(txn)
        if expired:
            self._queue(session, WatchedEvent(EventType.SESSION_EXPIRED, ""))
        self._queue(session, None)
        self._deliver()

    def _check_session(self, session: Session, path: str) -> None:
        if session.owner in self._unreachable:
            raise ConnectionLossError(path, f"{session.owner} cannot reach the coordination service")
        if not session._ended and trio.current_time() > session._deadline:
            self._credit_stall(trio.current_time())  # the owner may be first to run after a stall
            if trio.current_time() > session._deadline:
                self._end_session(session, expired=True)  # the deadline is the rule, whether or not `run` woke yet
        if session._ended:
            state = "expired" if session._expired else "closed"
            raise SessionExpiredError(path, f"session 0x{session.session_id:x} is {state}")

    # -- reads ----------------------------------------------------------------------------------------------------

    def _get_node(self, path: str) -> _Znode:
        node = self._nodes.get(path) if type(path) is str else None  # a stored path was validated when created
        if node is None:
            raise NoNodeError(validate_path(path), "no node")
        return node

    def _watch_table(self, child: bool) -> dict[str, set[int]]:
        return self._child_watches if child else self._data_watches

    def _watch(self, child: bool, path: str, session: Session) -> None:
        self._watch_table(child).setdefault(path, set()).add(session.session_id)
        session._watches.add((child, path))

    def get(self, session: Session, path: str, watch: bool) -> tuple[bytes, ZnodeStat]:
        self._check_session(session, path)
        node = self._get_node(path)
        if watch:
            self._watch(False, path, session)
        return node.data, node.stat()

    def get_many(self, session: Session, paths: Sequence[str]) -> list[tuple[bytes, int] | None]:
        """Each path's data and version, None where there is no node: the reads a ZooKeeper client pipelines
        (Kafka's controller reads every partition state of an election so), with one session check."""
        self._check_session(session, paths[0] if paths else "/")
        nodes = self._nodes
        found = []
        for path in paths:
            node = nodes.get(path) if type(path) is str else None
            if node is None:
                validate_path(path)
                found.append(None)
            else:
                found.append((node.data, node.version))
        return found

    def exists(self, session: Session, path: str, watch: bool) -> ZnodeStat | None:
        self._check_session(session, path)
        node = self._nodes.get(validate_path(path))
        if watch:
            self._watch(False, path, session)
        return None if node is None else node.stat()

    def get_children(self, session: Session, path: str, watch: bool) -> list[str]:
        self._check_session(session, path)
        node = self._get_node(path)
        if watch:
            self._watch(True, path, session)
        return node.child_names()

    def dump(self) -> dict[str, tuple[bytes, ZnodeStat]]:
        """Every znode with its data and stat, for tests and debugging."""
        return {path: (node.data, node.stat()) for path, node in self._nodes.items()}

    # -- writes ---------------------------------------------------------------------------------------------------

    def write(self, session: Session, ops: Iterable[Op], *, make_parents: bool = False) -> list[object]:
        """Apply `ops` as one transaction: all of them, or (on the first failure) none of them.

        `ops` may be made as they are taken (a generator), each gone once applied: a transaction of thousands
        of ops then holds none of them long enough for the cyclic GC to carry it into its oldest generation."""
        ops = iter(ops)
        first = next(ops, None)
        self._check_session(session, "/" if first is None else first.path)
        txn = self._begin()
        results: list[object] = []
        try:
            for index, op in enumerate(() if first is None else itertools.chain((first,), ops)):
                try:
                    results.append(self._apply(txn, session, op, make_parents))
                except CoordinationError as exc:
                    exc.index = index
                    raise
        except BaseException:
            self._roll_back(txn)
            raise
        self._commit(txn)
        return results

    def _roll_back(self, txn: _Transaction) -> None:
        """Undo a failed transaction's steps, last first: the tree is as it was before it began."""
        nodes = self._nodes
        for kind, path, *values in reversed(txn.undo):
            if kind == _SET:
                node = nodes[path]
                node.data, node.version, node.mzxid, node.mtime = values
                continue
            parent_path, name = _split(path)
            parent = nodes[parent_path]
            if kind == _CREATED:
                node = nodes.pop(path)
                parent.discard_child(name)
                parent.cversion, parent.pzxid = values
            else:
                node, parent.cversion, parent.pzxid = values
                nodes[path] = node
                parent.add_child(name)
            owned = self._ephemerals.get(node.ephemeral_owner)
            if owned is not None:
                if kind == _CREATED:
                    owned.discard(path)
                else:
                    owned.add(path)

    def _begin(self) -> _Transaction:
        return _Transaction(self._zxid + 1)

    def _commit(self, txn: _Transaction) -> None:
        self._zxid = txn.zxid
        events = txn.events
        for kind, path in zip(events[::2], events[1::2]):
            fired: set[int] = set()
            for child in _WATCH_KINDS_FIRED[kind]:
                watching = self._watch_table(child).pop(path, None)
                if watching is None:  # most events: a transaction creating a topic's partitions fires few watches
                    continue
                for session_id in watching:
                    fired.add(session_id)
                    self._sessions[session_id]._watches.discard((child, path))
            if fired:
                event = WatchedEvent(kind, path)
                for session_id in sorted(fired):
                    self._queue(self._sessions[session_id], event)
        self._deliver()

    def _apply(self, txn: _Transaction, session: Session, op: Op, make_parents: bool) -> object:
        if isinstance(op, CreateOp):
            return self._create(txn, session, op, make_parents)
        if isinstance(op, SetDataOp):
            return self._set(txn, op.path, op.data, op.version)
        if isinstance(op, DeleteOp):
            self._delete(txn, op.path, op.version)
            return None
        if not isinstance(op, CheckOp):
            raise TypeError(f"not a coordination op: {op!r}")
        node = self._get_node(op.path)
        if op.version != ANY_VERSION and node.version != op.version:
            raise BadVersionError(op.path, f"version is {node.version}, expected {op.version}")
        return None

    def _create(self, txn: _Transaction, session: Session, op: CreateOp, make_parents: bool) -> str:
        path = validate_path(op.path) if not op.sequential else op.path
        parent_path, name = _split(path)
        parent = self._nodes.get(parent_path)
        if parent is None:  # a stored path was validated when it was created
            validate_path(parent_path)
            if make_parents:
                self._create(txn, session, CreateOp(parent_path), make_parents=True)
                parent = self._nodes.get(parent_path)
        if parent is None:
            raise NoNodeError(parent_path, f"parent of {path} does not exist")
        if parent.ephemeral_owner:
            raise NoChildrenForEphemeralsError(path, "ephemeral nodes cannot have children")
        if op.sequential:
            name = f"{name}{parent.cversion:010d}"
            path = validate_path(f"{parent_path.rstrip('/')}/{name}")
        if path in self._nodes:
            raise NodeExistsError(path, "node exists")
        owner = session.session_id if op.ephemeral else 0
        node = _Znode(op.data, txn.zxid, txn.now, owner, txn.zxid, txn.zxid, txn.now)
        txn.undo.append((_CREATED, path, parent.cversion, parent.pzxid))
        self._nodes[path] = node
        parent.add_child(name)
        parent.cversion += 1
        parent.pzxid = txn.zxid
        if owner:
            self._ephemerals.setdefault(owner, set()).add(path)
        txn.fire(EventType.NODE_CREATED, path)
        txn.fire(EventType.NODE_CHILDREN_CHANGED, parent_path)
        return path

    def _set(self, txn: _Transaction, path: str, data: bytes, version: int) -> ZnodeStat:
        node = self._get_node(path)
        if version != ANY_VERSION and node.version != version:
            raise BadVersionError(path, f"version is {node.version}, expected {version}")
        txn.undo.append((_SET, path, node.data, node.version, node.mzxid, node.mtime))
        node.data, node.version, node.mzxid, node.mtime = data, node.version + 1, txn.zxid, txn.now
        txn.fire(EventType.NODE_DATA_CHANGED, path)
        return node.stat()

    def _delete(self, txn: _Transaction, path: str, version: int) -> None:
        if validate_path(path) == "/":
            raise BadArgumentsError(path, "the root cannot be deleted")
        node = self._get_node(path)
        if version != ANY_VERSION and node.version != version:
            raise BadVersionError(path, f"version is {node.version}, expected {version}")
        if node.children:
            raise NotEmptyError(path, f"node has {len(node.children)} children")
        parent_path, name = _split(path)
        parent = self._nodes[parent_path]
        txn.undo.append((_DELETED, path, node, parent.cversion, parent.pzxid))
        del self._nodes[path]
        parent.discard_child(name)
        parent.cversion += 1
        parent.pzxid = txn.zxid
        owned = self._ephemerals.get(node.ephemeral_owner)
        if owned is not None:
            owned.discard(path)
        txn.fire(EventType.NODE_DELETED, path)
        txn.fire(EventType.NODE_CHILDREN_CHANGED, parent_path)

    # -- watch delivery -------------------------------------------------------------------------------------------

    def _queue(self, session: Session, event: WatchedEvent | None) -> None:
        """Queue `event` for `session`; None marks the end of its events, after everything queued before it."""
        self._deliveries.append((session, event))

    def _deliver(self) -> None:
        """Deliver queued events in order; a listener that writes queues its events behind the current ones."""
        if self._delivering:
            return
        self._delivering = True
        try:
            while self._deliveries:
                session, event = self._deliveries.popleft()
                if session.owner in self._unreachable:
                    self._held.setdefault(session, []).append(event)
                else:
                    session._deliver(event)
        finally:
            self._delivering = False


class Session:
    """A client's session: its calls, its ephemeral nodes and the events of the watches it set."""

    def __init__(self, service: CoordinationService, session_id: int, owner: str, timeout: float) -> None:
        self._service = service
        self.session_id = session_id
        self.owner = owner
        self.timeout = timeout
        self._deadline = trio.current_time() + timeout
        self._ended = False
        self._expired = False
        self._send, self.events = trio.open_memory_channel[WatchedEvent](math.inf)
        self._listeners: list[Callable[[WatchedEvent], None]] = []
        self._watches: set[tuple[bool, str]] = set()  # (child watch?, path), to drop them when the session ends

    def __repr__(self) -> str:
        return f"Session(0x{self.session_id:x}, owner={self.owner!r})"

    @property
    def expired(self) -> bool:
        return self._expired

    @property
    def closed(self) -> bool:
        return self._ended

    @property
    def deadline(self) -> float:
        """When the session expires unless it heartbeats first (Trio time): when a crashed owner is noticed."""
        return self._deadline

    def add_listener(self, callback: Callable[[WatchedEvent], None]) -> None:
        """Have `callback` called with each event, synchronously, once the write that fired it is complete.

        Listeners replace `events`: from the first listener on, events are no longer buffered there, so a
        long-lived session whose owner only listens does not accumulate every event it ever saw.
        """
        self._listeners.append(callback)

    def _deliver(self, event: WatchedEvent | None) -> None:
        if event is None:
            self._send.close()  # `async for event in session.events` ends with the session
        elif not self._listeners:
            self._send.send_nowait(event)
        for listener in self._listeners if event is not None else ():
            try:
                listener(event)
            except Exception:
                # As ZooKeeper's event thread does: a failing watcher must neither fail the write that fired
                # it (another client's call) nor hold back the events queued behind it.
                log.exception("listener of session 0x%x failed on %s", self.session_id, event)

    def heartbeat(self) -> None:
        self._service._check_session(self, "/")
        self._deadline = trio.current_time() + self.timeout

    async def keep_alive(self) -> None:
        """Heartbeat every third of the timeout until the session ends (returns) or the caller is cancelled."""
        while not self._ended:
            try:
                self.heartbeat()
            except ConnectionLossError:
                pass
            except SessionExpiredError:
                return
            await trio.sleep(self.timeout / 3)

    def close(self) -> None:
        """End the session now: its ephemeral nodes go at once instead of after the timeout."""
        self._service._end_session(self, expired=False)

    def create(self, path: str, data: bytes = b"", *, ephemeral: bool = False, sequential: bool = False,
               make_parents: bool = False) -> str:
        return self._service.write(self, [CreateOp(path, data, ephemeral, sequential)],
                                   make_parents=make_parents)[0]  # type: ignore[return-value]

    def get(self, path: str, *, watch: bool = False) -> tuple[bytes, ZnodeStat]:
        return self._service.get(self, path, watch)

    def set(self, path: str, data: bytes, version: int = ANY_VERSION) -> ZnodeStat:
        return self._service.write(self, [SetDataOp(path, data, version)])[0]  # type: ignore[return-value]

    def delete(self, path: str, version: int = ANY_VERSION) -> None:
        self._service.write(self, [DeleteOp(path, version)])

    def exists(self, path: str, *, watch: bool = False) -> ZnodeStat | None:
        return self._service.exists(self, path, watch)

    def get_many(self, paths: Sequence[str]) -> list[tuple[bytes, int] | None]:
        """(data, version) of each path, None where there is none; sets no watch."""
        return self._service.get_many(self, paths)

    def get_children(self, path: str, *, watch: bool = False) -> list[str]:
        return self._service.get_children(self, path, watch)

    def multi(self, ops: Iterable[Op]) -> list[object]:
        """All of `ops` or none; on failure the failing op's error, with `.index` set to its position."""
        return self._service.write(self, ops)
