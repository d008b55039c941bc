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

Faults: `partition(*groups)` cuts every link between nodes of different groups; `heal()` restores them. A
send over a cut link, or to a broker that is down, fails at once with NETWORK_EXCEPTION: in one process there
is no TCP timeout to wait for, and the callers' retry loops supply the delay Kafka's clients would see.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import trio

from kafkalite.common.errors import NetworkExceptionError
from kafkalite.network.requests import Request, RequestContext, Response

log = logging.getLogger(__name__)

NodeId = int | str
Handler = Callable[[Request, RequestContext], Awaitable[Response]]


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

    def register(self, node_id: NodeId, handler: Handler, gate: PauseGate) -> None:
        self._nodes[node_id] = _Node(handler, gate)

    def unregister(self, node_id: NodeId) -> None:
        """The node is gone: refuse new requests and cancel the ones it was serving."""
        node = self._nodes.pop(node_id, None)
        if node is not None:
            for scope in node.serving:
                scope.cancel()

    def is_registered(self, node_id: NodeId) -> bool:
        return node_id in self._nodes

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
                   context: RequestContext | None = None, scope: trio.CancelScope | None = None) -> Any:
        """Run `request` on `destination` and return its response; NETWORK_EXCEPTION if it cannot get there.

        Cancelling the caller abandons the request like a client closing its socket: what the handler did
        before its first wait (an append) stays done, what it was waiting for (replication) is not awaited.
        A caller that may abandon the request itself (a timeout, a fetch made stale) passes the unentered
        `scope` to serve it in: cancelling it, or its deadline passing, ends in NETWORK_EXCEPTION as if the
        broker had gone, and the request costs one cancel scope instead of two.
        """
        node = self._nodes.get(destination)
        if node is None:
            raise NetworkExceptionError(f"Broker {destination} is not available (connection refused)")
        if not self.link_up(source, destination):
            raise NetworkExceptionError(f"The link between {source} and {destination} is cut")
        with scope or trio.CancelScope() as serving:
            node.serving.add(serving)
            try:
                await node.gate.checkpoint()
                response = await node.handler(request, context or self._context_of(source))
            finally:
                node.serving.discard(serving)
        if serving.cancelled_caught:
            raise NetworkExceptionError(f"Broker {destination} disconnected while handling {type(request).__name__}")
        sender = self._nodes.get(source)
        if sender is not None:
            await sender.gate.checkpoint()  # a paused sender acts on no response until it resumes
        if not self.link_up(source, destination):
            raise NetworkExceptionError(f"The link between {source} and {destination} was cut")
        return response
