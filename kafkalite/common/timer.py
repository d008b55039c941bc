"""Kafka's SystemTimer for Trio: many deadlines kept by one task, instead of a cancel scope each.

Entering and leaving a Trio cancel scope with a deadline costs several microseconds: it registers the deadline
with the run loop and rebuilds the task's cancel status on the way in and out. On the replication path every
acks=all produce and each follower fetch it takes used to wait behind one, and so did the producer's sender on
every wake-up: together a fifth of what one batch cost. Kafka's purgatory hands its timeouts to a timing wheel
served by a reaper thread for the same reason; here a deadline is a heap push, a waiter that finishes early
withdraws its entry, and one task sleeps until the earliest deadline and sets the events that are due.

A deadline wakes its waiter; it does not cancel it. Waiters check the time when they wake and give up
themselves, so what they were doing is never cut off half-way.
"""

from __future__ import annotations

import heapq
import itertools
import math
from typing import NoReturn

import trio

_COMPACT_MIN = 64


class TimerEntry:
    """One scheduled wake-up; `Timer.cancel` withdraws it. The heap orders `(deadline, sequence, entry)`
    tuples, which compare in C."""

    __slots__ = ("event",)

    def __init__(self, event: trio.Event) -> None:
        self.event: trio.Event | None = event


class Timer:
    """Sets events at their deadlines on Trio's clock, once `run()` is started in a nursery.

    Withdrawn entries stay in the heap until they come due or until they are half of it, then the heap is
    rebuilt without them: a busy broker withdraws almost every entry (fetches are answered long before
    replica.fetch.wait.max.ms), and a 30-second produce timeout must not keep every answered request alive.
    """

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, TimerEntry]] = []
        self._sequence = itertools.count()
        self._withdrawn = 0
        self._sleeping_until = math.inf
        self._rearm = trio.Event()

    def __len__(self) -> int:
        """Entries still scheduled."""
        return len(self._heap) - self._withdrawn

    def schedule(self, deadline: float, event: trio.Event) -> TimerEntry:
        """Set `event` at `deadline` (Trio time) unless the entry is cancelled first."""
        entry = TimerEntry(event)
        heapq.heappush(self._heap, (deadline, next(self._sequence), entry))
        if deadline < self._sleeping_until:
            self._rearm.set()
        return entry

    def cancel(self, entry: TimerEntry) -> None:
        if entry.event is None:
            return
        entry.event = None
        self._withdrawn += 1
        if self._withdrawn > _COMPACT_MIN and self._withdrawn * 2 > len(self._heap):
            self._heap = [item for item in self._heap if item[2].event is not None]
            heapq.heapify(self._heap)
            self._withdrawn = 0

    async def run(self) -> NoReturn:
        while True:
            heap = self._heap
            now = trio.current_time()
            while heap and heap[0][0] <= now:
                event = heapq.heappop(heap)[2].event
                if event is None:
                    self._withdrawn -= 1
                else:
                    event.set()
            self._sleeping_until = heap[0][0] if heap else math.inf
            self._rearm = trio.Event()
            with trio.move_on_at(self._sleeping_until):
                await self._rearm.wait()
