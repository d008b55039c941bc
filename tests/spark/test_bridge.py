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
