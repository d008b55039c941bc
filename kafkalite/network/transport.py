"""The in-process network between brokers, the controller and in-process clients, with fault hooks.

A request runs in the sender's task (a task per request would cost more than most handlers), inside a cancel
scope that the destination broker owns: when the broker goes down, `unregister` cancels every request it was
serving, just as a process dying drops its connections, so a handler can never keep writing to a dead
broker's log. A broker that is paused holds requests at its door until it resumes, like a JVM in a long GC
pause.

A paused sender is held too: a response that arrives while it is paused is acted on only after it resumes,
so a frozen follower cannot slip in one more append from a fetch it sent just before the pause.

Ordering is the sender's business, as in Kafka: the controller keeps one in-flight request per broker
(`ControllerChannelManager`), so requests to one broker are handled in the order they were sent.

Faults: `partition(*groups)` cuts every link between nodes of different groups; `heal()` restores them. Nodes are
brokers (registered, by id) and senders, known by the name they send under: an in-process client's is its
client.id, so a test can cut one client off; `senders` lists the names seen, for a cut to refuse a typo. A
send over a cut link, or to a broker that is down, fails at once with NETWORK_EXCEPTION: in one process there
is no TCP timeout to wait for, and the callers' retry loops supply the delay Kafka's clients would see. A
handler that raises `ConnectionDropped` (a request fault) fails its request with NETWORK_EXCEPTION as well, as
the TCP listeners close that connection.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

import trio

from kafkalite.common.errors import NetworkExceptionError
from kafkalite.network.requests import Hurry, Request, RequestContext, Response

log = logging.getLogger(__name__)

NodeId = int | str
Handler = Callable[[Request, RequestContext], Awaitable[Response]]


class ConnectionDropped(Exception):
    """Raised by a handler for its request to get no answer: the connection it came on is dropped instead."""


class PauseGate:
    """Lets a node be frozen without losing its state: every loop of the node awaits `checkpoint()`."""

    def __init__(self) -> None:
        self._resumed = trio.Event()
        self._resumed.set()

    @property
    def paused(self) -> bool:
        return not self._resumed.is_set()

    def pause(self) -> None:
        if not self.paused:
            self._resumed = trio.Event()

    def resume(self) -> None:
        self._resumed.set()

    async def checkpoint(self) -> None:
        if self.paused:
            await self._resumed.wait()


@dataclass
class _Node:
    handler: Handler
    gate: PauseGate
    serving: set[trio.CancelScope] = field(default_factory=set)


class Transport:
    """Delivers requests to registered nodes and answers with their responses."""

    def __init__(self) -> None:
        self._nodes: dict[NodeId, _Node] = {}
        self._group_of: dict[NodeId, int] = {}
        self._contexts: dict[NodeId, RequestContext] = {}
        self._senders: set[NodeId] = set()

    def register(self, node_id: NodeId, handler: Handler, gate: PauseGate) -> None:
        self._nodes[node_id] = _Node(handler, gate)

    def unregister(self, node_id: NodeId) -> None:
        """The node is gone: refuse new requests and cancel the ones it was serving."""
        node = self._nodes.pop(node_id, None)
        if node is not None:
            for scope in node.serving:
                scope.cancel()

    @property
    def senders(self) -> frozenset[NodeId]:
        """Every name a request has been sent under: brokers, the cluster's own calls, in-process clients."""
        return frozenset(self._senders)

    def has_sent(self, node_id: NodeId) -> bool:
        return node_id in self._senders

    # -- faults ---------------------------------------------------------------------------------------------------

    def partition(self, *groups: Iterable[NodeId]) -> None:
        """Cut the links between every pair of nodes in different groups; nodes in no group keep all links."""
        self._group_of = {node: index for index, group in enumerate(groups) for node in group}

    def heal(self) -> None:
        self._group_of = {}

    def _context_of(self, source: NodeId) -> RequestContext:
        """The context of a request that brought none (broker to broker): one per sender, as it never changes."""
        context = self._contexts.get(source)
        if context is None:
            context = self._contexts[source] = RequestContext(source=source)
        return context

    def link_up(self, a: NodeId, b: NodeId) -> bool:
        group_a, group_b = self._group_of.get(a), self._group_of.get(b)
        return group_a is None or group_b is None or group_a == group_b

    # -- delivery -------------------------------------------------------------------------------------------------

    async def send(self, source: NodeId, destination: NodeId, request: Request,
                   context: RequestContext | None = None) -> Any:
        """Run `request` on `destination` and return its response; NETWORK_EXCEPTION if it cannot get there.

        Cancelling the caller abandons the request like a client closing its socket: what the handler did
        before its first wait (an append) stays done, what it was waiting for (replication) is not awaited.
        A sender that may abandon requests itself (on a timeout, or a fetch made stale) uses a `channel`.
        """
        self._senders.add(source)
        node = self._node_for(source, destination)
        with trio.CancelScope() as serving:
            node.serving.add(serving)
            try:
                response = await self._deliver(node, source, destination, request, context)
            finally:
                node.serving.discard(serving)
        if serving.cancelled_caught:
            raise NetworkExceptionError(f"Broker {destination} disconnected while handling {type(request).__name__}")
        return response

    def channel(self, source: NodeId, destination: NodeId) -> Channel:
        """A connection for a stream of requests from `source` to `destination`: `with transport.channel(...)`."""
        self._senders.add(source)
        return Channel(self, source, destination)

    def _node_for(self, source: NodeId, destination: NodeId) -> _Node:
        node = self._nodes.get(destination)
        if node is None:
            raise NetworkExceptionError(f"Broker {destination} is not available (connection refused)")
        if not self.link_up(source, destination):
            raise NetworkExceptionError(f"The link between {source} and {destination} is cut")
        return node

    async def _deliver(self, node: _Node, source: NodeId, destination: NodeId, request: Request,
                       context: RequestContext | None) -> Any:
        """The request's way through an open connection: the door of a paused broker, the handler, the way back.

        A sender already cancelled (its broker stopped) sends nothing: woken just before it was stopped, it may
        run on to its next request without meeting a checkpoint, and a fetch it got in would tell the leader it
        is alive and caught up after the controller has handled its death, putting it back in ISRs for good.
        """
        await trio.lowlevel.checkpoint_if_cancelled()
        await node.gate.checkpoint()
        try:
            response = await node.handler(request, context or self._context_of(source))
        except ConnectionDropped as exc:
            raise NetworkExceptionError(str(exc)) from None
        sender = self._nodes.get(source)
        if sender is not None:
            await sender.gate.checkpoint()  # a paused sender acts on no response until it resumes
        if not self.link_up(source, destination):
            raise NetworkExceptionError(f"The link between {source} and {destination} was cut")
        return response


class Channel:
    """Requests from one node to another, all served inside one cancel scope that the sender holds open.

    A follower fetches from its leader without pause, and entering and leaving a Trio cancel scope costs as much
    as handling a small request: a channel pays for it once per connection instead of once per request. When
    the destination goes down it cancels the scope, as a dying process drops its connections, and the `with`
    block ends in NETWORK_EXCEPTION wherever it was. `hurry()` has the request in flight answered now, with what
    the handler has, for a sender that wants its next request out (a fetcher given new partitions while its fetch
    is parked).
    """

    def __init__(self, transport: Transport, source: NodeId, destination: NodeId) -> None:
        self._transport = transport
        self._source = source
        self._destination = destination
        self._scope = trio.CancelScope()
        self._node: _Node | None = None
        self._hurry = Hurry()
        self._context = RequestContext(source=source, hurry=self._hurry)

    def __enter__(self) -> Channel:
        self._node = self._transport._node_for(self._source, self._destination)
        self._scope.__enter__()
        self._node.serving.add(self._scope)
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> bool:
        assert self._node is not None
        self._node.serving.discard(self._scope)
        swallowed = self._scope.__exit__(exc_type, exc, tb)
        if self._scope.cancelled_caught:
            raise NetworkExceptionError(f"Broker {self._destination} disconnected")
        return swallowed

    def hurry(self) -> None:
        self._hurry.hurry()

    @property
    def deadline(self) -> float:
        return self._scope.deadline

    @deadline.setter
    def deadline(self, deadline: float) -> None:
        """When the channel breaks unless its sender moves this on: a client's request timeout, request by
        request. A deadline that passes cancels the channel for good, as Kafka's clients close a connection
        whose request timed out."""
        self._scope.deadline = deadline

    async def send(self, request: Request, context: RequestContext | None = None) -> Any:
        """The response; NETWORK_EXCEPTION if the link is cut (the broker going down ends the whole block)."""
        node = self._node
        assert node is not None, "send on a channel outside its `with` block"
        transport = self._transport
        if transport._node_for(self._source, self._destination) is not node:  # a broker restarted since
            raise NetworkExceptionError(f"Broker {self._destination} is not available (connection refused)")
        self._hurry.reset()
        return await transport._deliver(node, self._source, self._destination, request, context or self._context)
