"""How a client reaches brokers: the cluster's in-process transport, or native TCP connections.

Both speak the same request dataclasses and fail the same way (NETWORK_EXCEPTION when a broker cannot be
reached, REQUEST_TIMED_OUT after request.timeout.ms), so producer, consumer and admin do not know which one
they use. A broker that could not be reached is not tried again before reconnect.backoff.ms, doubling with each
failure in a row up to reconnect.backoff.max.ms, as Kafka's NetworkClient holds off: a client retrying with
retry.backoff.ms=0 would otherwise spin on a dead broker, and on the autojump clock keep virtual time (and with
it the session expiry that moves the broker's partitions elsewhere) from ever advancing.

Requests to one broker are handled by it in the order they were sent: a TCP connection gives that for free, and
the in-process transport gets it by letting one request at a time per broker through, in the order the client's
tasks asked (Trio's lock is first come, first served). Kafka's ordering guarantees for retried and pipelined
produce requests rest on exactly this.
"""

from __future__ import annotations

import itertools
import logging
import math
from abc import ABC, abstractmethod
from collections import defaultdict
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any, Protocol

import trio

from kafkalite.common.errors import KafkaError, NetworkExceptionError, RequestTimedOutError
from kafkalite.network.connection import Connection
from kafkalite.network.requests import MetadataBroker, Request, RequestContext
from kafkalite.network.transport import Channel, Transport

log = logging.getLogger(__name__)

NodeKey = int | str
"""A broker id, or "host:port" for a bootstrap server whose id is not known yet."""

_client_numbers = itertools.count(1)


def client_name(kind: str, client_id: str) -> str:
    """A unique name per client, as Kafka numbers `producer-1`, `consumer-2`; it is the client's transport
    identity too, so fault tests can cut one client off."""
    return client_id or f"{kind}-{next(_client_numbers)}"


class ClusterLike(Protocol):
    """What the in-process transport needs of a `kafkalite.cluster.Cluster` (which clients must not import)."""

    transport: Transport

    @property
    def broker_ids(self) -> list[int]: ...


class OneBlock:
    """A client serves one `async with` block: entered again, nested or after the first block ended, it would find
    its background tasks still running or gone for good (a producer took records it never sent), so it refuses."""

    def __init__(self) -> None:
        self._entered = False

    def enter(self, name: str) -> None:
        if self._entered:
            raise RuntimeError(f"{name} was opened already: a client serves one `async with` block; make a new one")
        self._entered = True


class ClientTransport(ABC):
    """Sends requests to brokers by node; tracks requests in flight per node to pick the least loaded one."""

    owned = False
    """Whether a client opened this transport for itself (`open_transport`) and closes it as it closes. A transport
    the application hands in is the application's to close, and may serve several clients."""

    serial = False
    """Whether a broker serves this transport's requests one at a time, so that a second request in flight to it
    only queues behind the first instead of overlapping it on the wire."""

    networked = True
    """Whether requests cross a network to brokers that work while the sender does. In-process, a broker serves a
    request in the sending task: nothing it does overlaps the sender's work, so there is no point in waiting until
    a request is on its way (`send`'s `sent`)."""

    def __init__(self, name: str, request_timeout_ms: int, reconnect_backoff_ms: int = 50,
                 reconnect_backoff_max_ms: int = 1000) -> None:
        self.name = name
        self.request_timeout_s = request_timeout_ms / 1000
        self._in_flight: defaultdict[NodeKey, int] = defaultdict(int)
        self._broker_ids: list[int] = []
        self.closed = False
        self._reconnect_backoff_ms = (reconnect_backoff_ms, max(reconnect_backoff_ms, reconnect_backoff_max_ms))
        self._unreachable: dict[NodeKey, tuple[int, float]] = {}
        """Nodes whose last attempt failed: failures in a row, and when the next attempt may start (Trio time)."""

    def update_brokers(self, brokers: Sequence[MetadataBroker]) -> None:
        self._broker_ids = [broker.node_id for broker in brokers]

    def add_node(self, broker: MetadataBroker) -> None:
        """Learn where one broker is (a group coordinator) without changing the brokers requests go to."""

    def least_loaded_nodes(self) -> list[NodeKey]:
        """Nodes to try for a request any broker can answer, least busy first (Kafka's leastLoadedNode); nodes
        still backing off after a failure last, the one free soonest first."""
        nodes: list[NodeKey] = list(self._broker_ids) or self._bootstrap_nodes()
        now = trio.current_time()
        return sorted(nodes, key=lambda node: (max(self._retry_at(node), now), self._in_flight[node]))

    def _retry_at(self, node: NodeKey) -> float:
        entry = self._unreachable.get(node)
        return -math.inf if entry is None else entry[1]

    async def ready(self, node: NodeKey, deadline: float = math.inf) -> None:
        """Wait until `node` may be tried again after a failure (reconnect.backoff.ms), or until `deadline`."""
        retry_at = self._retry_at(node)
        if retry_at > trio.current_time():
            await trio.sleep_until(min(retry_at, deadline))

    def reached(self, node: NodeKey) -> None:
        """A request to `node` was answered: the next failure backs off from reconnect.backoff.ms again."""
        if self._unreachable:
            self._unreachable.pop(node, None)

    def unreachable(self, node: NodeKey) -> None:
        """`node` could not be reached: hold off the next attempt, twice as long as after the failure before. The
        other requests that fail with it (in flight, or queued for the same connection) are the same failure, as
        Kafka counts a failed connection once, not once per request on it."""
        entry = self._unreachable.get(node)
        if entry is not None and entry[1] > trio.current_time():
            return
        failures = entry[0] + 1 if entry is not None else 1
        base_ms, max_ms = self._reconnect_backoff_ms
        backoff_ms = min(base_ms * 2 ** min(failures - 1, 32), max_ms)
        self._unreachable[node] = (failures, trio.current_time() + backoff_ms / 1000)

    async def send(self, node: NodeKey, request: Request, timeout_s: float | None = None,
                   sent: trio.Event | None = None) -> Any:
        """The response, NETWORK_EXCEPTION if the broker cannot be reached, or REQUEST_TIMED_OUT after
        request.timeout.ms (or `timeout_s`, for a request the broker may rightly hold longer, as a JoinGroup).

        `sent` is set once the request is written to the broker's connection, or as soon as it must first wait for
        something else (a backoff after a failure, a connection to open), so that a task waiting for it (the
        consumer's poll, for its prefetches) never waits on a broker: only on this task's own writing.
        """
        self.check_open()
        self._in_flight[node] += 1
        deadline = trio.current_time() + (self.request_timeout_s if timeout_s is None else timeout_s)
        try:
            if sent is not None and self._retry_at(node) > trio.current_time():
                sent.set()
            await self.ready(node, deadline)
            if trio.current_time() >= deadline:  # backing off until past the request's deadline: not tried
                raise self.timed_out(node, request)
            response = await self._send(node, request, deadline, sent)
        except NetworkExceptionError:  # `_send` marked the node unreachable, unless the deadline passed
            if trio.current_time() < deadline:
                raise
            raise self.timed_out(node, request) from None
        finally:
            self._in_flight[node] -= 1
        self.reached(node)
        return response

    def check_open(self) -> None:
        """RuntimeError once closed: a closed client's calls would otherwise open connections nobody closes."""
        if self.closed:
            raise RuntimeError(f"{self.name} is closed: it left its `async with` block; open a new client")

    def timed_out(self, node: NodeKey, request: Request | None = None) -> RequestTimedOutError:
        what = "" if request is None else f" to {type(request).__name__}"
        return RequestTimedOutError(f"no response from {node}{what} within {self.request_timeout_s * 1000:.0f} ms")

    def sibling(self) -> ClientTransport:
        """A second connection to each broker under the same client name, as Kafka's consumer opens one to its
        group coordinator: a JoinGroup parked there for a whole rebalance must not hold up the fetches queued
        behind it on the first. A transport of another kind has no second one, and shares. A second one is its
        client's to close."""
        return self

    def stream(self, node: NodeKey) -> RequestStream:
        """Requests to one broker one after another, as a producer's lane sends them: `with transport.stream(n)`.

        Each request is sent as `send` would send it; the in-process transport serves them all in one cancel
        scope instead of one per request.
        """
        self.check_open()
        return _RequestByRequest(self, node)

    async def send_to_any(self, request: Request) -> Any:
        """Send to the least loaded node that answers; NETWORK_EXCEPTION only if none does.

        That error names every node tried and the last one's failure: "no broker could be reached at
        localhost:9092" says what is wrong with a client's bootstrap servers, where a bare "connection refused"
        or a later "topic not present" does not.
        """
        nodes = self.least_loaded_nodes()
        failure: NetworkExceptionError | RequestTimedOutError | None = None
        for node in nodes:
            try:
                return await self.send(node, request)
            except (NetworkExceptionError, RequestTimedOutError) as exc:
                failure = exc
        if failure is None:
            raise NetworkExceptionError("no broker to send to")
        tried = sorted(nodes, key=lambda node: (isinstance(node, str), node))  # in a stable order, not the tried one
        error = NetworkExceptionError(f"no broker could be reached at {', '.join(map(self.node_name, tried))} "
                                      f"(last error: {failure})")
        raise error from failure

    def node_name(self, node: NodeKey) -> str:
        """How errors name a node: "broker 1", or the "host:port" of a bootstrap server."""
        return node if isinstance(node, str) else f"broker {node}"

    @abstractmethod
    def _bootstrap_nodes(self) -> list[NodeKey]: ...

    @abstractmethod
    async def _send(self, node: NodeKey, request: Request, deadline: float, sent: trio.Event | None) -> Any:
        """The response; NETWORK_EXCEPTION when the broker cannot be reached (`unreachable(node)` noted) or
        `deadline` (Trio time) passes. `sent`: as `send` says."""

    async def aclose(self) -> None:
        """Refuse requests from now on; the in-process transport holds nothing else to release."""
        self.closed = True


class RequestStream:
    """`with stream:` around requests to one broker. A stream that breaks (its broker went down, one of its
    requests timed out) ends its block in NETWORK_EXCEPTION, and `failure()` says what to fail the request
    that was in flight with."""

    def __enter__(self) -> RequestStream:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> bool | None:
        return None

    async def send(self, request: Request) -> Any:
        raise NotImplementedError

    def failure(self) -> KafkaError:
        return NetworkExceptionError("the request was abandoned")


class _RequestByRequest(RequestStream):
    def __init__(self, transport: ClientTransport, node: NodeKey) -> None:
        self._transport = transport
        self._node = node

    async def send(self, request: Request) -> Any:
        return await self._transport.send(self._node, request)


class _InProcessStream(RequestStream):
    """Requests to one broker served in one cancel scope (a network `Channel`), whose deadline is each request's
    request.timeout.ms in turn. Entering and leaving a scope per request was a tenth of an acks=all produce."""

    def __init__(self, transport: InProcessTransport, node: NodeKey) -> None:
        self._transport = transport
        self._node = node
        self._channel = transport.channel_to(node)

    def __enter__(self) -> _InProcessStream:
        try:
            self._channel.__enter__()
        except NetworkExceptionError:
            self._transport.unreachable(self._node)
            raise
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> bool | None:
        try:
            return self._channel.__exit__(exc_type, exc, tb)
        except NetworkExceptionError:  # the broker went down under the stream (the channel raises it), not a timeout
            if trio.current_time() < self._channel.deadline:
                self._transport.unreachable(self._node)
            raise

    async def send(self, request: Request) -> Any:
        transport, node = self._transport, self._node
        transport._in_flight[node] += 1
        try:
            response = await self.exchange(request, trio.current_time() + transport.request_timeout_s)
        finally:
            transport._in_flight[node] -= 1
        transport.reached(node)
        return response

    async def exchange(self, request: Request, deadline: float) -> Any:
        """One request per broker at a time, in the order they came, like one Kafka connection.

        An idle broker is taken without yielding: the request then reaches the broker's handler before any other
        task runs, and a produce costs one scheduling round less. Waiting for a busy broker counts toward the
        request's deadline, as a request queued on a Kafka connection does.
        """
        self._channel.deadline = deadline
        lock = self._transport._locks[self._node]
        try:
            lock.acquire_nowait()
        except trio.WouldBlock:
            await lock.acquire()
        try:
            return await self._channel.send(request, self._transport._context)
        finally:
            lock.release()

    def failure(self) -> KafkaError:
        if trio.current_time() >= self._channel.deadline:
            return self._transport.timed_out(self._node)
        return NetworkExceptionError(f"Broker {self._node} disconnected")


class InProcessTransport(ClientTransport):
    serial = True
    networked = False

    def __init__(self, cluster_transport: Transport, bootstrap_broker_ids: Sequence[int], name: str,
                 request_timeout_ms: int = 30000, reconnect_backoff_ms: int = 50,
                 reconnect_backoff_max_ms: int = 1000) -> None:
        super().__init__(name, request_timeout_ms, reconnect_backoff_ms, reconnect_backoff_max_ms)
        self._transport = cluster_transport
        self._bootstrap = list(bootstrap_broker_ids)
        self._context = RequestContext(source=name, listener="NATIVE", client_id=name)
        self._locks: defaultdict[NodeKey, trio.Lock] = defaultdict(trio.Lock)

    def _bootstrap_nodes(self) -> list[NodeKey]:
        return list(self._bootstrap)

    def sibling(self) -> ClientTransport:
        return InProcessTransport(self._transport, self._bootstrap, self.name, int(self.request_timeout_s * 1000),
                                  *self._reconnect_backoff_ms)

    def stream(self, node: NodeKey) -> RequestStream:
        self.check_open()
        return _InProcessStream(self, node)

    def channel_to(self, node: NodeKey) -> Channel:
        return self._transport.channel(self.name, node)

    async def _send(self, node: NodeKey, request: Request, deadline: float, sent: trio.Event | None) -> Any:
        """A stream of one request: the broker serves it in one cancel scope, whose deadline is the request's."""
        if sent is not None:  # it is on its way as this task runs
            sent.set()
        with _InProcessStream(self, node) as stream:
            return await stream.exchange(request, deadline)


class TcpTransport(ClientTransport):
    """One native connection per broker, opened on first use and replaced after it breaks."""

    def __init__(self, bootstrap_servers: str, name: str, request_timeout_ms: int = 30000,
                 reconnect_backoff_ms: int = 50, reconnect_backoff_max_ms: int = 1000) -> None:
        super().__init__(name, request_timeout_ms, reconnect_backoff_ms, reconnect_backoff_max_ms)
        self._addresses: dict[NodeKey, tuple[str, int]] = {}
        for server in filter(None, (part.strip() for part in bootstrap_servers.split(","))):
            host, colon, port = server.rpartition(":")
            if not colon or not port.isdigit():
                raise ValueError(f"bootstrap server {server!r} is not host:port")
            self._addresses[server] = (host.strip("[]"), int(port))
        if not self._addresses:
            raise ValueError("bootstrap servers must name at least one host:port")
        self._bootstrap = list(self._addresses)
        self._bootstrap_servers = bootstrap_servers
        self._connections: dict[NodeKey, Connection] = {}
        self._opening: defaultdict[NodeKey, trio.Lock] = defaultdict(trio.Lock)

    def update_brokers(self, brokers: Sequence[MetadataBroker]) -> None:
        super().update_brokers(brokers)
        for broker in brokers:
            self.add_node(broker)

    def add_node(self, broker: MetadataBroker) -> None:
        self._addresses[broker.node_id] = (broker.host, broker.port)

    def _bootstrap_nodes(self) -> list[NodeKey]:
        return list(self._bootstrap)

    def sibling(self) -> ClientTransport:
        other = TcpTransport(self._bootstrap_servers, self.name, int(self.request_timeout_s * 1000),
                             *self._reconnect_backoff_ms)
        other._addresses.update(self._addresses)
        return other

    def node_name(self, node: NodeKey) -> str:
        address = self._addresses.get(node)
        if isinstance(node, str) or address is None:
            return super().node_name(node)
        return f"broker {node} at {address[0]}:{address[1]}"

    def _open(self, node: NodeKey) -> bool:
        """Whether `node`'s connection is open and no task is opening another."""
        connection = self._connections.get(node)
        return connection is not None and not connection.closed and not self._opening[node].locked()

    async def _connection(self, node: NodeKey) -> Connection:
        async with self._opening[node]:
            connection = self._connections.get(node)
            if connection is None or connection.closed:
                if self._retry_at(node) > trio.current_time():  # the attempt before this one in line just failed
                    raise NetworkExceptionError(f"{self.node_name(node)} could not be reached; tried again after "
                                                "reconnect.backoff.ms")
                if connection is not None:  # broken: its socket closes now, not when the GC finds its cycle
                    await connection.aclose()
                address = self._addresses.get(node)
                if address is None:
                    raise NetworkExceptionError(f"no known address for broker {node}")
                connection = await Connection.open(*address, client_id=self.name)
                self._connections[node] = connection
            return connection

    async def _send(self, node: NodeKey, request: Request, deadline: float, sent: trio.Event | None) -> Any:
        with trio.move_on_at(deadline):
            try:
                if sent is not None and not self._open(node):
                    sent.set()
                return await (await self._connection(node)).send(request, sent)
            except NetworkExceptionError:
                self.unreachable(node)
                raise
        raise NetworkExceptionError(f"no response from {node} by the deadline")

    async def aclose(self) -> None:
        await super().aclose()
        connections, self._connections = list(self._connections.values()), {}
        for connection in connections:
            with trio.CancelScope(shield=True):
                await connection.aclose()


def open_transport(bootstrap: ClusterLike | str | ClientTransport, kind: str,
                   config: Mapping[str, Any]) -> ClientTransport:
    """The transport `bootstrap` calls for: a Cluster (in-process), "host:port,..." (TCP), or a transport; its
    name, request timeout and reconnect backoff from the client's `config`. A transport handed in keeps its own
    settings, and the clients sharing it share which brokers it is backing off from."""
    if isinstance(bootstrap, ClientTransport):
        return bootstrap
    name = client_name(kind, config["client.id"])
    request_timeout_ms = config["request.timeout.ms"]
    backoff = (config["reconnect.backoff.ms"], config["reconnect.backoff.max.ms"])
    opened: ClientTransport
    if isinstance(bootstrap, str):
        opened = TcpTransport(bootstrap, name, request_timeout_ms, *backoff)
    elif isinstance(transport := getattr(bootstrap, "transport", None), Transport):
        opened = InProcessTransport(transport, bootstrap.broker_ids, name, request_timeout_ms, *backoff)
    else:
        raise TypeError(f"bootstrap must be a Cluster, 'host:port,...' or a ClientTransport, not {bootstrap!r}")
    opened.owned = True
    return opened
