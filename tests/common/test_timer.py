"""The Timer that stands in for per-request cancel scopes: each event is set at its deadline, not before, and
a withdrawn entry never fires."""

from __future__ import annotations

from typing import Any

import trio

from kafkalite.common.timer import Timer


async def _set_at(timer: Timer, deadline: float, fired: list[tuple[str, float]], name: str) -> trio.Event:
    event = trio.Event()
    timer.schedule(deadline, event)

    async def record() -> None:
        await event.wait()
        fired.append((name, trio.current_time()))

    trio.lowlevel.spawn_system_task(record)
    return event


async def test_events_are_set_at_their_deadlines_in_deadline_order(autojump_clock: Any) -> None:
    timer = Timer()
    fired: list[tuple[str, float]] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(timer.run)
        start = trio.current_time()
        await _set_at(timer, start + 3, fired, "late")
        await _set_at(timer, start + 1, fired, "early")  # earlier than what the timer sleeps until
        await _set_at(timer, start + 2, fired, "middle")
        await trio.sleep(5)
        nursery.cancel_scope.cancel()
    assert [(name, at - start) for name, at in fired] == [("early", 1), ("middle", 2), ("late", 3)]
    assert len(timer) == 0


async def test_a_cancelled_entry_never_fires_and_is_dropped(autojump_clock: Any) -> None:
    timer = Timer()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(timer.run)
        start = trio.current_time()
        withdrawn, kept = trio.Event(), trio.Event()
        entry = timer.schedule(start + 1, withdrawn)
        timer.schedule(start + 2, kept)
        timer.cancel(entry)
        timer.cancel(entry)  # twice is harmless
        assert len(timer) == 1
        await kept.wait()
        assert trio.current_time() - start == 2 and not withdrawn.is_set()
        nursery.cancel_scope.cancel()


async def test_withdrawn_entries_do_not_pile_up(autojump_clock: Any) -> None:
    """A busy broker answers nearly every parked request before its deadline; the heap must not keep them all."""
    timer = Timer()
    start = trio.current_time()
    keep = trio.Event()
    timer.schedule(start + 1000, keep)
    for i in range(10_000):
        timer.cancel(timer.schedule(start + 30 + i, trio.Event()))
    assert len(timer) == 1
    assert len(timer._heap) < 200
    async with trio.open_nursery() as nursery:
        nursery.start_soon(timer.run)
        await keep.wait()
        assert trio.current_time() - start == 1000
        nursery.cancel_scope.cancel()
