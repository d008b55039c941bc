"""Handing a Trio async generator's items to Spark's synchronous reader thread."""

from __future__ import annotations

import itertools
import threading
from collections.abc import AsyncGenerator

import pytest
import trio

from kafkalite.spark import bridge

pytestmark = pytest.mark.spark


def test_a_read_left_early_closes_its_generator_in_its_own_run() -> None:
    """Spark stops pulling a reader early (`limit()`, a cancelled task). The generator was left to Trio's finalizer,
    whose close runs cancelled: the reader's consumer could not close its fetch session and connections, and Trio
    logged "Exception ignored during finalization" tracebacks into the task's log for every such read."""
    cleaned_up = threading.Event()

    async def source() -> AsyncGenerator[int, None]:
        try:
            for number in itertools.count():
                yield number
        finally:
            await trio.sleep(0)  # async clean-up, as a consumer closing what it opened
            cleaned_up.set()

    items = bridge.iterate(source)
    assert [next(items), next(items)] == [0, 1]
    items.close()
    assert cleaned_up.wait(30)


def test_a_read_left_early_with_its_queue_full_ends_its_thread() -> None:
    """Stopping took one item off a full queue; the producer's last put filled it again, and handing over its end
    then waited for ever: a thread and its queued batches kept for every read Spark stopped early."""
    filled = threading.Event()

    async def source() -> AsyncGenerator[int, None]:
        for number in itertools.count():
            if number > bridge._AHEAD:  # 1 to _AHEAD fill the queue: this one waits for Spark
                filled.set()
            yield number

    before = set(threading.enumerate())
    items = bridge.iterate(source)
    assert next(items) == 0
    assert filled.wait(30)
    items.close()
    (reader,) = set(threading.enumerate()) - before
    reader.join(30)
    assert not reader.is_alive()
