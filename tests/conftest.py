"""Shared fixtures: every timed test runs on Trio's autojump clock, so no test waits on the wall clock."""

import pytest
import trio.testing


@pytest.fixture
def autojump_clock() -> trio.testing.MockClock:
    """A clock that jumps straight to the next deadline whenever every task is blocked.

    pytest-trio hands a fixture named `autojump_clock` to `trio.run` as its clock, so a test that asks for
    it runs a minute of simulated sessions, retries and timeouts in milliseconds.
    """
    return trio.testing.MockClock(autojump_threshold=0)
