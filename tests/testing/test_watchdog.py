"""The virtual-time watchdog turns a frozen clock into a failure, and leaves honest tests alone.

These tests stall on purpose, and a stall is measured in wall seconds: they use short thresholds and poll
often, so that all of them together cost a few seconds.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
import trio

from kafkalite.testing.watchdog import VirtualTimeStalled, virtual_time_watchdog

QUICK = {"stall_after": 0.5, "poll_interval": 0.02, "grace": 0.3}


async def test_a_livelock_is_reported(autojump_clock: Any) -> None:
    async def retry_without_waiting() -> None:
        while True:
            await trio.lowlevel.checkpoint()

    with pytest.raises(VirtualTimeStalled, match=r"stopped at 60\.000 s .* a livelock.* Busiest tasks meanwhile: "
                                                 r"'[\w.<>]*retry_without_waiting' \(\d+ steps\) at test_watchdog"):
        async with virtual_time_watchdog(**QUICK), trio.open_nursery() as nursery:
            await trio.sleep(60)
            nursery.start_soon(retry_without_waiting)
            await trio.sleep(1)  # never ends: the clock cannot jump while a task is always runnable


async def test_a_synchronous_loop_is_interrupted(autojump_clock: Any) -> None:
    with pytest.raises(VirtualTimeStalled, match="a synchronous loop that never awaits"):
        async with virtual_time_watchdog(**QUICK):
            while True:
                pass


async def test_virtual_minutes_and_a_short_cpu_burst_pass(autojump_clock: Any) -> None:
    async with virtual_time_watchdog(**QUICK):
        await trio.sleep(600)
        busy_until = time.monotonic() + QUICK["stall_after"] / 2  # frozen, but for less than stall_after
        while time.monotonic() < busy_until:
            pass
        await trio.sleep(600)
    assert trio.current_time() == 1200


async def test_the_real_clock_always_moves() -> None:
    async with virtual_time_watchdog(**QUICK):
        await trio.sleep(QUICK["stall_after"] * 1.5)


def test_every_autojump_test_is_watched_and_the_fixture_watches_any_test(pytester: pytest.Pytester) -> None:
    """The repository's conftest covers each test on `autojump_clock`; the plugin's fixture covers whoever asks."""
    pytester.makeini("[pytest]\ntrio_mode = true\n")
    pytester.makeconftest((Path(__file__).parents[1] / "conftest.py").read_text())
    pytester.makepyfile(test_stalls='''
        import pytest
        import trio

        @pytest.mark.kafkalite_watchdog(stall_after=0.5)
        async def test_livelock_on_autojump(autojump_clock):
            while True:
                await trio.sleep(0)

        @pytest.mark.kafkalite_watchdog(stall_after=0.5)
        async def test_deadlock_under_the_fixture(kafkalite_watchdog, mock_clock):
            await trio.sleep(1)  # a MockClock without autojump: nothing ever moves it

        async def test_sleeping_virtual_minutes(autojump_clock):
            await trio.sleep(600)
    ''')
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines(["*_ test_livelock_on_autojump _*",
                                 "*VirtualTimeStalled: virtual time stopped at 0.000 s *, a livelock*",
                                 "*_ test_deadlock_under_the_fixture _*",
                                 "*VirtualTimeStalled: virtual time stopped at 0.000 s *, every task was waiting*"])


def test_a_test_asking_for_autojump_clock_by_mark_or_by_fixture_runs_on_it(pytester: pytest.Pytester) -> None:
    """pytest-trio gives `trio.run` the clock of a test that names it among its own arguments only; the
    repository's conftest gives one to a test that asks by `pytest.mark.usefixtures` or through a fixture too, or
    those tests would wait out their session timeouts and lag allowances on the wall clock."""
    pytester.makeini("[pytest]\ntrio_mode = true\n")
    pytester.makeconftest((Path(__file__).parents[1] / "conftest.py").read_text())
    pytester.makepyfile(test_marked='''
        import pytest
        import trio
        import trio.testing

        @pytest.fixture
        def given(autojump_clock):
            return autojump_clock

        def check_clock():
            clock = trio.lowlevel.current_clock()
            assert isinstance(clock, trio.testing.MockClock) and clock.autojump_threshold == 0

        @pytest.mark.usefixtures("autojump_clock")
        async def test_by_mark():
            check_clock()
            await trio.sleep(3600)

        async def test_through_a_fixture(given):
            check_clock()
            assert trio.lowlevel.current_clock() is given  # the fixtures' clock is the one that runs
            await trio.sleep(3600)
    ''')
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)
