"""Calling kafkalite's Trio clients from the synchronous methods Spark calls.

Spark calls a data source's methods on plain threads of processes it owns (the planner, the streaming runner,
executor workers), so each call that talks to the cluster runs its own short `trio.run`. A reader's `read()` is
a generator that Spark pulls at its own pace, and a Trio run cannot pause between its items: `iterate` runs the
async generator on a thread of its own and hands its items over through a small queue, so fetching the next
records overlaps Spark's work on the previous ones.
"""

from __future__ import annotations

import contextlib
import queue
import threading
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterator
from typing import Any, TypeVar

import trio

from kafkalite.common.nursery import unwrap_single

_T = TypeVar("_T")

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


class _End:
    def __init__(self, error: BaseException | None) -> None:
        self.error = error


def iterate(source: Callable[[], AsyncGenerator[_T, None]]) -> Iterator[_T]:
    """The items of the async generator `source()` makes, produced on a Trio thread; its error is raised here.

    Leaving the loop early (Spark's `limit()`, a cancelled task) stops the producing thread after the item it is
    working on, without waiting for it: the thread is a daemon and holds nothing Spark needs.
    """
    items: queue.Queue[_T | _End] = queue.Queue(_AHEAD)
    stop = threading.Event()

    async def produce() -> None:
        # Closed here when Spark stops early, not left to Trio's finalizer, which met the generator's fetch still
        # under way and printed "Exception ignored during finalization" tracebacks into the task's log.
        async with contextlib.aclosing(source()) as generated:
            async for item in generated:
                try:  # a blocking put needs a worker thread, and a round trip through it for every item cost about
                    items.put_nowait(item)  # a tenth of a Spark reader's CPU: only a full queue waits in one
                except queue.Full:
                    await trio.to_thread.run_sync(items.put, item)
                if stop.is_set():
                    return

    def main() -> None:
        try:
            run(produce)
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
        # room to spare. Taking one item only, its last put filled the queue again, and the end's put waited for
        # ever, a thread and its batches kept for each read Spark stopped early.
        while True:
            try:
                items.get_nowait()
            except queue.Empty:
                break
