"""Shared fixtures: every timed test runs on Trio's autojump clock, so no test waits on the wall clock.

A test on that clock hangs instead of failing when virtual time freezes (a loop retrying without a wait keeps
the clock from ever jumping), so every such test also runs under the virtual-time watchdog.
"""

from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

import pytest
import trio.testing

from kafkalite.testing.pytest_plugin import watchdog_options
from kafkalite.testing.watchdog import run_with_watchdog


@pytest.fixture
def autojump_clock() -> trio.testing.MockClock:
    """A clock that jumps straight to the next deadline whenever every task is blocked.

    A test that asks for it, in its arguments, with `pytest.mark.usefixtures` or through a fixture, runs on it
    (see `_run_on_autojump_clock`): a minute of simulated sessions, retries and timeouts in milliseconds.
    """
    return trio.testing.MockClock(autojump_threshold=0)


@pytest.hookimpl(trylast=True)  # after pytest-trio has marked the async tests
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Run each Trio test that uses `autojump_clock` under the virtual-time watchdog, fixtures included.

    Not an autouse async fixture: pytest-trio runs only the async fixtures a test names in its arguments, and
    silently skips autouse ones. Its `trio` marker's `run` wraps the whole run instead, so a stall in a
    fixture's setup or teardown (a cluster starting or stopping) is caught as well as one in the test.
    """
    for item in items:
        if isinstance(item, pytest.Function) and "autojump_clock" in item.fixturenames \
                and item.get_closest_marker("trio") is not None:
            run = partial(_run_on_autojump_clock, item, **watchdog_options(item))
            item.add_marker(pytest.mark.trio(run=run), append=False)


def _run_on_autojump_clock(item: pytest.Function, async_fn: Callable[..., Awaitable[Any]], *args: object,
                           clock: trio.abc.Clock | None, **options: Any) -> Any:
    """`run_with_watchdog` on the test's `autojump_clock`, the very object its fixtures were given. pytest-trio
    hands `trio.run` the clock only of a test that names it among its own arguments; a test that gets it through
    `pytest.mark.usefixtures` or through a fixture would otherwise run on the wall clock, waiting out session
    timeouts for real."""
    if clock is None:
        clock = item.funcargs["autojump_clock"]
    return run_with_watchdog(async_fn, *args, clock=clock, **options)


class SchedulingRounds:
    """How many scheduling rounds the other tasks got while the code under test ran: for tests of when it yields.

    `run` checkpoints in a loop, so virtual time stands still while it runs: cancel it before anything waits on
    the clock."""

    def __init__(self) -> None:
        self.count = 0

    async def run(self) -> None:
        while True:
            await trio.lowlevel.checkpoint()
            self.count += 1
