"""ControllerEventManager: one queue, one processing task (Kafka's controller since 1.1).

Watches fire inside coordination-service writes and requests arrive on many tasks, but every one of them only
puts an event on this queue; the single task that takes events off it is the only code that reads or changes
the controller's state. That is the whole concurrency story of the controller: no locks, no interleaving.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import trio

from kafkalite.network.transport import PauseGate

log = logging.getLogger(__name__)


class ControllerEvent:
    """Base of the controller's events; an event with a `done` event is awaited by whoever put it."""


@dataclass
class Startup(ControllerEvent):
    pass


@dataclass
class Reelect(ControllerEvent):
    """`/controller` disappeared: resign if we led, and stand again."""


@dataclass
class SessionReestablished(ControllerEvent):
    """Our link to the coordination service is back (healed, or a new session after expiry): act again."""


@dataclass
class ControllerChange(ControllerEvent):
    """`/controller` was written: resign if it is no longer us."""


@dataclass
class BrokerChange(ControllerEvent):
    pass


@dataclass
class TopicChange(ControllerEvent):
    pass


@dataclass
class IsrChangeNotification(ControllerEvent):
    pass


@dataclass
class TopicDeletion(ControllerEvent):
    """`/admin/delete_topics` changed (or a new controller picks up where the last one stopped)."""


@dataclass
class TopicDeletionStopReplicaResponseReceived(ControllerEvent):
    broker_id: int
    response: Any


@dataclass
class ControllerRequest(ControllerEvent):
    """A request for the controller (an admin request, a broker's ControlledShutdown), served on the queue one at
    a time; the request handler waits on `done` for `result`."""

    request: Any
    done: trio.Event = field(default_factory=trio.Event, init=False)
    result: Any = field(default=None, init=False)


@dataclass
class PartitionModifications(ControllerEvent):
    """A topic's assignment znode changed: partitions were added."""

    topic: str


@dataclass
class TopicConfigChange(ControllerEvent):
    """A topic's config changed (this node's broker heard of it): one that now allows unclean elections elects
    leaders for its offline partitions, as Kafka's TopicUncleanLeaderElectionEnable does."""


@dataclass
class PreferredReplicaLeaderElection(ControllerEvent):
    """`/admin/preferred_replica_election` was written (the znode Kafka's admin tools use)."""


@dataclass
class AutoPreferredReplicaLeaderElection(ControllerEvent):
    """The rebalance scheduler's tick."""


@dataclass
class PartitionReassignment(ControllerEvent):
    """`/admin/reassign_partitions` was written."""


@dataclass
class PartitionReassignmentIsrChange(ControllerEvent):
    """The ISR of a partition being reassigned changed: maybe every target replica has caught up."""

    topic: str
    partition: int


class Completion:
    """What a request waits for after its event was processed: a topic online, partitions added, a topic deleted.

    A controller that resigns finishes every completion with `completed=False`, which wakes the requests."""

    def __init__(self) -> None:
        self._woken = trio.Event()
        self.completed = False

    def finish(self, *, completed: bool) -> None:
        self.completed = completed
        self._woken.set()

    async def wait(self) -> None:
        await self._woken.wait()


class ControllerEventManager:
    def __init__(self, process: Callable[[ControllerEvent], Awaitable[None]], gate: PauseGate) -> None:
        self._process = process
        self._gate = gate
        self._send, self._receive = trio.open_memory_channel[ControllerEvent](math.inf)

    def put(self, event: ControllerEvent) -> None:
        self._send.send_nowait(event)

    async def run(self) -> None:
        async for event in self._receive:
            await self._gate.checkpoint()
            try:
                await self._process(event)
            except Exception:
                log.exception("controller: error while processing %s", type(event).__name__)
            finally:
                if isinstance(event, ControllerRequest):
                    event.done.set()
            # Not kept until the next event, which may be long in coming: a request's event holds its response, one
            # entry a partition (an election of every partition of a large cluster: one for each).
            del event
