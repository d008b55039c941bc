"""Delayed produce, delayed fetch and delayed delete-records: Kafka's purgatory, on Trio primitives.

A request that cannot be answered yet parks on what it waits for, and the partition wakes it when that
changes, so a waiting request costs nothing until it can make progress:

- an acks=-1 produce waits for the high watermark to pass its last offset. Each partition keeps its waiters
  in a heap by required offset, so an advance of the HW releases exactly the satisfied ones in O(log n) each;
- a fetch waits for data: a follower for the log end offset to move, a consumer for the high watermark. It
  parks one event in every partition it asked for and re-checks when any of them fires;
- a DeleteRecords waits, in the same way, for each partition's low watermark (the smallest log start offset in
  the ISR) to reach its offset: the partition wakes it when a follower reports a new log start or the ISR changes.

Deadlines are entries in the broker's `Timer` (Kafka's purgatory timer): a request that waits past its
deadline is woken and answers with what it has. Nothing polls, and no waiter pays for a cancel scope.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Sequence

import trio

from kafkalite.common import errors
from kafkalite.common.errors import ErrorCode
from kafkalite.common.timer import Timer

_sequence = itertools.count()  # orders delayed produces that wait for the same offset, first come first served


class DelayedProduce:
    """One partition's share of an acks=-1 produce: done once the HW reaches `required_offset`."""

    __slots__ = ("required_offset", "done", "error", "waiter")

    def __init__(self, required_offset: int) -> None:
        self.required_offset = required_offset
        self.done = False
        self.error: ErrorCode = errors.NONE
        self.waiter: trio.Event | None = None  # the request's wake-up, shared by its partitions

    def complete(self, error: ErrorCode) -> None:
        self.error = error
        self.done = True
        if self.waiter is not None:
            self.waiter.set()


class ProducePurgatory:
    """The delayed produces of one partition, released in order of the offset they wait for."""

    __slots__ = ("_heap",)

    def __init__(self) -> None:
        self._heap: list[tuple[int, int, DelayedProduce]] = []

    def watch(self, operation: DelayedProduce) -> None:
        heapq.heappush(self._heap, (operation.required_offset, next(_sequence), operation))

    def complete_up_to(self, high_watermark: int, error: ErrorCode) -> None:
        heap = self._heap
        while heap and heap[0][0] <= high_watermark:
            heapq.heappop(heap)[2].complete(error)

    def fail_all(self, error: ErrorCode) -> None:
        heap, self._heap = self._heap, []
        for _, _, operation in heap:
            operation.complete(error)


async def await_produce(operations: Sequence[DelayedProduce], deadline: float, timer: Timer) -> None:
    """Wait until every operation is done; those still pending at `deadline` end REQUEST_TIMED_OUT.

    The records stay appended either way, as in Kafka: a timeout says "not known to be replicated", not
    "not written".
    """
    while True:
        pending = [operation for operation in operations if not operation.done]
        if not pending:
            return
        if trio.current_time() >= deadline:
            for operation in pending:
                operation.error = errors.REQUEST_TIMED_OUT
            return
        wake = trio.Event()
        for operation in pending:
            operation.waiter = wake
        entry = timer.schedule(deadline, wake)
        try:
            await wake.wait()
        finally:
            timer.cancel(entry)


class FetchWatchers:
    """The fetches parked on one partition for one kind of progress (log end offset or high watermark)."""

    __slots__ = ("_events",)

    def __init__(self) -> None:
        self._events: set[trio.Event] | None = None  # made for the first fetch that parks: most partitions see none

    def watch(self, event: trio.Event) -> None:
        if self._events is None:
            self._events = set()
        self._events.add(event)

    def unwatch(self, event: trio.Event) -> None:
        if self._events is not None:
            self._events.discard(event)

    def wake_all(self) -> None:
        if self._events:
            events, self._events = self._events, None
            for event in events:
                event.set()


async def await_fetch(watchers: Sequence[FetchWatchers], deadline: float, timer: Timer,
                      ready: Callable[[], bool]) -> None:
    """Return as soon as `ready()` after some watched partition moved, or at `deadline`.

    The caller checks `ready()` once before calling, without awaiting in between, so no wake-up is lost.
    """
    while True:
        wake = trio.Event()
        for watcher in watchers:
            watcher.watch(wake)
        entry = timer.schedule(deadline, wake)
        try:
            await wake.wait()
        finally:
            timer.cancel(entry)
            for watcher in watchers:
                watcher.unwatch(wake)
        if trio.current_time() >= deadline or ready():
            return
