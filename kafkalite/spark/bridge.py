"""Calling kafkalite's Trio clients from the synchronous methods Spark calls.

Spark calls a data source's methods on plain threads of processes it owns (the planner, the streaming runner,
executor workers), so each call that talks to the cluster runs its own short `trio.run`. A reader's `read()` is
a generator that Spark pulls at its own pace, and a Trio run cannot pause between its items: `iterate` runs the
async generator on a thread of its own and hands its items over through a small queue, so fetching the next
records overlaps Spark's work on the previous ones.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any, TypeVar

import trio

from kafkalite.common.nursery import unwrap_single

_T = TypeVar("_T")

_AHEAD = 2
"""Items fetched ahead of Spark: enough to keep the fetch going while Spark works, little held in memory."""


def run(function: Callable[..., Awaitable[_T]], *args: Any) -> _T:
    """`trio.run(function, *args)`, raising an error itself rather than Trio's one-member ExceptionGroup."""
    try:
        return trio.run(function, *args)
    except BaseExceptionGroup as group:
        raise unwrap_single(group) from None


class _End:
    def __init__(self, error: BaseException | None) -> None:
        self.error = error


def iterate(source: Callable[[], AsyncIterator[_T]]) -> Iterator[_T]:
    """The items of the async generator `source()` makes, produced on a Trio thread; its error is raised here.

    Leaving the loop early (Spark's `limit()`, a cancelled task) stops the producing thread after the item it is
    working on, without waiting for it: the thread is a daemon and holds nothing Spark needs.
    """
    items: queue.Queue[_T | _End] = queue.Queue(_AHEAD)
    stop = threading.Event()

    async def produce() -> None:
        async for item in source():
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
        try:
            items.get_nowait()  # make room for a producer blocked on a full queue, so it sees `stop`
        except queue.Empty:
            pass
