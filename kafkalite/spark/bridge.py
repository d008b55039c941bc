"""Calling kafkalite's Trio clients from the synchronous methods Spark calls.

Spark calls a data source's methods on plain threads of processes it owns (the planner, the streaming runner,
executor workers). A one-off call runs its own short `trio.run`; calls that come again and again, as planning's
do, go to a client kept open on a Trio loop of its own thread (`KeptOpen`). A reader's `read()` is a generator
that Spark pulls at its own pace, and a Trio run cannot pause between its items: `KeptOpen.iterate` runs an async
generator of the kept resource (a consumer that a worker's reads of one partition share) on the loop and hands its
items over through a small queue, so fetching the next records overlaps Spark's work on the previous ones.
"""

from __future__ import annotations

import contextlib
import os
import queue
import threading
import weakref
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterator
from contextlib import AbstractAsyncContextManager
from typing import Any, Generic, TypeVar

import trio

from kafkalite.common.nursery import unwrap_single

_T = TypeVar("_T")
_R = TypeVar("_R")

_AHEAD = 8
"""Items fetched ahead of Spark: the Spark source's Arrow batches of about 1 MB, so a few MB held per task. Room
for several lets the producing thread hand most items over without blocking (see `iterate`), and convert the
next fetch while Spark works on the last one."""


def run(function: Callable[..., Awaitable[_T]], *args: Any) -> _T:
    """`trio.run(function, *args)`, raising an error itself rather than Trio's one-member ExceptionGroup."""
    try:
        return trio.run(function, *args)
    except BaseExceptionGroup as group:
        raise unwrap_single(group) from None


class KeptOpen(Generic[_R]):
    """A resource (an admin client) entered once on a Trio loop of its own thread, and used by many calls.

    Spark's streaming runner asks the cluster for offsets several times per micro-batch, from plain threads, for
    the life of the query; opening a client for each question (connecting, asking a broker for metadata) was
    most of what it cost. Spark's Kafka source keeps one admin client per query for the same reason. The loop
    ends when its owner is collected or closes it, and with the process: the thread is a daemon, and Spark never
    says when it is done. A call that fails ends the loop too, once the calls other threads made on it are
    answered, so whatever broke is not kept: the next call opens the resource afresh, as every call did before.
    A forked copy (the loop's thread stays in the parent) opens its own.
    """

    def __init__(self, make: Callable[[], AbstractAsyncContextManager[_R]]) -> None:
        self._make = make
        self._loop: _Loop[_R] | None = None
        self._opening = threading.Lock()  # two threads asking at once share one loop
        self._pid = os.getpid()

    def run(self, function: Callable[[_R], Awaitable[_T]]) -> _T:
        """`await function(resource)` on the loop, opened first if it is not, its error raised here."""
        ended = False
        while True:
            loop = self._current()
            try:
                return loop.call(function)
            except _Closed:  # by another thread (its question failed) before this call began: take the next loop
                self._discard(loop)
            except (trio.RunFinishedError, trio.Cancelled) as exc:  # the loop ended by itself: open another, once
                self._discard(loop)
                if ended:
                    raise RuntimeError(f"the Trio loop kept for {self._make} ended under the call") from exc
                ended = True
            except BaseExceptionGroup as group:
                self._discard(loop)
                raise unwrap_single(group) from None
            except BaseException:
                self._discard(loop)
                raise

    def iterate(self, source: Callable[[_R], AsyncGenerator[_T, None]]) -> Iterator[_T]:
        """The items of the async generator `source(resource)`, run on the loop and handed over through a small
        queue by a thread of its own; its error is raised here.

        Leaving the loop early (Spark's `limit()`, a cancelled task) stops the producing thread after the item it
        is working on, without waiting for it: the thread is a daemon and holds nothing Spark needs. A call whose
        loop ends under it is made again on a new loop (`run`), which a generator may be only while it has handed
        nothing over: after, its items would come twice, so the read fails instead.
        """
        items: queue.Queue[_T | _End] = queue.Queue(_AHEAD)
        stop, began = threading.Event(), threading.Event()

        async def produce(resource: _R) -> None:
            if began.is_set():
                raise RuntimeError(f"the Trio loop kept for {self._make} ended during a read that had handed out "
                                   f"items; it cannot be resumed")
            # Closed here when Spark stops early, not left to Trio's finalizer, which met the generator's fetch still
            # under way and printed "Exception ignored during finalization" tracebacks into the task's log.
            async with contextlib.aclosing(source(resource)) as generated:
                async for item in generated:
                    began.set()
                    try:  # a blocking put needs a worker thread, and a round trip through it for every item cost
                        items.put_nowait(item)  # about a tenth of a Spark reader's CPU: only a full queue waits in one
                    except queue.Full:
                        await trio.to_thread.run_sync(items.put, item)
                    if stop.is_set():
                        return

        def main() -> None:
            try:
                self.run(produce)
            except BaseException as exc:  # handed to the consuming thread, which raises it in Spark's task
                items.put(_End(exc))
            else:
                items.put(_End(None))

        threading.Thread(target=main, name="kafkalite-spark-read", daemon=True).start()
        try:
            while not isinstance(item := items.get(), _End):
                yield item
            if item.error is not None:
                raise item.error
        finally:
            stop.set()
            # Empty the queue: a producer blocked on it puts its item, sees `stop` and hands over its end, all with
            # room to spare. Taking one item only, its last put filled the queue again, and the end's put waited
            # for ever, a thread and its batches kept for each read Spark stopped early.
            while True:
                try:
                    items.get_nowait()
                except queue.Empty:
                    break

    def close(self) -> None:
        """End the loop, exiting the resource there, once the calls on it are answered; without waiting."""
        self._after_fork()
        with self._opening:
            loop, self._loop = self._loop, None
        if loop is not None:
            loop.finalizer()

    def _current(self) -> _Loop[_R]:
        self._after_fork()
        with self._opening:
            if self._loop is None:
                self._loop = _Loop(self._make)
                self._loop.finalizer = weakref.finalize(self, self._loop.close)
            return self._loop

    def _after_fork(self) -> None:
        """In a forked copy the loop's thread stayed in the parent, and its lock may be taken: forget both."""
        if self._pid != os.getpid():
            if self._loop is not None:
                self._loop.finalizer.detach()
            self._loop, self._opening, self._pid = None, threading.Lock(), os.getpid()

    def _discard(self, loop: _Loop[_R]) -> None:
        """Close `loop` (which a failed call used) and stop handing it out, unless another has replaced it."""
        with self._opening:
            if self._loop is loop:
                self._loop = None
        loop.finalizer()  # closes it once, and never again at collection or exit


class _Closed(Exception):
    """A loop asked to close before the call began."""


class _Loop(Generic[_R]):
    """A Trio run on a daemon thread that holds `make()` entered until `close()` and its last call."""

    finalizer: weakref.finalize

    def __init__(self, make: Callable[[], AbstractAsyncContextManager[_R]]) -> None:
        started: queue.Queue[tuple[trio.lowlevel.TrioToken, _R, trio.CancelScope] | BaseException] = queue.Queue()

        async def keep() -> None:
            async with make() as resource:
                with trio.CancelScope() as scope:
                    started.put((trio.lowlevel.current_trio_token(), resource, scope))
                    await trio.sleep_forever()

        def main() -> None:
            try:
                run(keep)
            except BaseException as exc:  # read only if the resource could not be entered: then no call waits
                started.put(exc)

        threading.Thread(target=main, name="kafkalite-spark-kept", daemon=True).start()
        first = started.get()
        if isinstance(first, BaseException):
            raise first
        self.token, self.resource, self._scope = first
        self._lock = threading.Lock()
        self._calls = 0
        self._closing = False

    def call(self, function: Callable[[_R], Awaitable[_T]]) -> _T:
        with self._lock:
            if self._closing:
                raise _Closed
            self._calls += 1
        try:
            return trio.from_thread.run(function, self.resource, trio_token=self.token)
        finally:
            with self._lock:
                self._calls -= 1
                last = self._closing and not self._calls
            if last:
                self._end()

    def close(self) -> None:
        """Close once no call is under way: a call another thread made is answered, not cancelled."""
        with self._lock:
            self._closing = True
            idle = not self._calls
        if idle:
            self._end()

    def _end(self) -> None:
        try:
            self.token.run_sync_soon(self._scope.cancel)
        except trio.RunFinishedError:
            pass


class _End:
    def __init__(self, error: BaseException | None) -> None:
        self.error = error
