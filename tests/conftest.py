"""Shared fixtures: every timed test runs on Trio's autojump clock, so no test waits on the wall clock.

A test on that clock hangs instead of failing when virtual time freezes (a loop retrying without a wait keeps
the clock from ever jumping), so every such test also runs under the virtual-time watchdog.
"""

from functools import partial

import pytest
import trio.testing

from kafkalite.testing.pytest_plugin import watchdog_options
from kafkalite.testing.watchdog import run_with_watchdog


@pytest.fixture
def autojump_clock() -> trio.testing.MockClock:
    """A clock that jumps straight to the next deadline whenever every task is blocked.

    pytest-trio hands a fixture named `autojump_clock` to `trio.run` as its clock, so a test that asks for
    it runs a minute of simulated sessions, retries and timeouts in milliseconds.
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
        if "autojump_clock" in getattr(item, "fixturenames", ()) and item.get_closest_marker("trio") is not None:
            run = partial(run_with_watchdog, **watchdog_options(item))
            item.add_marker(pytest.mark.trio(run=run), append=False)
