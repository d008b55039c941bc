"""A watchdog that turns frozen virtual time into a test failure instead of a hung CI job.

Why it exists: tests run on `trio.testing.MockClock(autojump_threshold=0)`, whose time jumps to the next
deadline whenever every task is blocked. A component that retries without waiting keeps some task runnable
forever, so the clock never jumps again: every `trio.sleep`, `fail_after` and `wait_until` deadline of the
test is now unreachable and the test hangs with no timeout ever firing. A wait that has no deadline at all
(a deadlock) freezes the clock the same way. A synchronous infinite loop is worse still: it stops the whole
Trio run, so nothing inside the run can notice anything.

So the watchdog watches from outside the run. A daemon thread reads the run's clock every `poll_interval`
wall seconds. Once virtual time has stood still for `stall_after` wall seconds in a row, it asks the loop
through `TrioToken.run_sync_soon` (thread-safe, never blocks) to count task steps for one more poll and then
to cancel the watched block, which raises `VirtualTimeStalled` naming the tasks that ran most meanwhile (the
ones spinning in a livelock) or saying that every task was waiting (a deadlock). If virtual time is still
frozen `grace` wall seconds after the stall was seen, either no task reaches a checkpoint any more (a
synchronous loop: the loop never ran the request) or the block ignores cancellation; the thread then raises
`VirtualTimeStalled` in the Trio thread itself with `PyThreadState_SetAsyncExc`, the only way to interrupt
Python code that never yields. That exception lands at the next bytecode the Trio thread runs: a loop stuck
inside one long C call is not interrupted until the call returns.

Only an unbroken stall measured in wall time counts, so a test that computes for a while without advancing
the clock is fine as long as each such stretch stays under `stall_after` (20 s by default, far above any
honest CPU burst in this repository's tests).

On Trio's real clock time always advances, so the watchdog never fires there: it is a no-op (a frozen loop
under the real clock is a wall-clock timeout's job). A `MockClock` without autojump only moves when the test
moves it, so a test waiting on one for longer than `stall_after` wall seconds is reported too.
"""

from __future__ import annotations

import ctypes
import threading
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import trio

__all__ = ["DEFAULT_STALL_AFTER", "VirtualTimeStalled", "run_with_watchdog", "virtual_time_watchdog"]

DEFAULT_STALL_AFTER = 20.0
"""Wall seconds of frozen virtual time that count as a stall."""

T = TypeVar("T")

_TRIO_DIR = str(Path(trio.__file__).parent)


class VirtualTimeStalled(AssertionError):
    """Virtual time stopped moving under a watchdog: a livelock, a deadlock or a synchronous loop."""


def _raised_async(message: str) -> type[VirtualTimeStalled]:
    """`PyThreadState_SetAsyncExc` raises a class, instantiated without arguments: one that carries `message`."""

    class Stalled(VirtualTimeStalled):
        def __init__(self) -> None:
            super().__init__(message)

    Stalled.__name__ = Stalled.__qualname__ = VirtualTimeStalled.__name__
    return Stalled


class _StepCounter(trio.abc.Instrument):
    """How often each task runs: while virtual time stands still, the busiest tasks are the ones spinning."""

    def __init__(self) -> None:
        self.steps: Counter[trio.lowlevel.Task] = Counter()

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        self.steps[task] += 1


def _where(task: trio.lowlevel.Task) -> str:
    """The innermost frames the task awaits in outside Trio itself: where it spins."""
    frames = [f"{Path(frame.f_code.co_filename).name}:{line} in {frame.f_code.co_name}"
              for frame, line in task.iter_await_frames() if not frame.f_code.co_filename.startswith(_TRIO_DIR)]
    return " < ".join(reversed(frames[-2:])) or "inside Trio"


class _Watchdog:
    """The thread watching one run's clock, and what it found (`stall`, read by the context manager).

    Once virtual time has stood still for `stall_after`, the thread has the loop count task steps for one
    `poll_interval`, then cancel: the message names the tasks that ran most in that window.
    """

    def __init__(self, scope: trio.CancelScope, stall_after: float, poll_interval: float, grace: float) -> None:
        self._scope = scope
        self._stall_after = stall_after
        self._poll_interval = poll_interval
        self._grace = grace
        self._clock = trio.lowlevel.current_clock()
        self._token = trio.lowlevel.current_trio_token()
        self._trio_thread = threading.get_ident()
        self._counter: _StepCounter | None = None  # installed while sampling, only touched in the Trio thread
        self._stopped = threading.Event()
        self._lock = threading.Lock()  # stop() and the asynchronous raise exclude each other
        self._cancel_delivered = False
        self._interrupted = False
        self.stall: str | None = None
        self._thread = threading.Thread(target=self._watch, name="virtual-time-watchdog", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """In the Trio thread, on leaving the watched block."""
        with self._lock:
            self._stopped.set()
        self._thread.join()
        self._stop_sampling()

    def _watch(self) -> None:
        last_time = self._clock.current_time()
        frozen_since = time.monotonic()
        sampling = cancelling = False
        while not self._stopped.wait(self._poll_interval):
            now = self._clock.current_time()
            if now != last_time:
                last_time, frozen_since, sampling = now, time.monotonic(), False
                continue
            frozen = time.monotonic() - frozen_since
            if frozen >= self._stall_after + self._grace:
                self._interrupt(now, frozen)
                return
            if frozen < self._stall_after or cancelling:
                continue
            try:
                if sampling:
                    cancelling = True
                    self._token.run_sync_soon(self._cancel, now, frozen)
                else:
                    sampling = True
                    self._token.run_sync_soon(self._start_sampling)
            except trio.RunFinishedError:
                return

    def _start_sampling(self) -> None:
        if self._counter is None:
            self._counter = _StepCounter()
            trio.lowlevel.add_instrument(self._counter)
        self._counter.steps.clear()

    def _stop_sampling(self) -> Counter[trio.lowlevel.Task]:
        counter, self._counter = self._counter, None
        if counter is None:
            return Counter()
        trio.lowlevel.remove_instrument(counter)
        return counter.steps

    def _cancel(self, virtual_time: float, frozen: float) -> None:
        """Runs in the Trio thread: the loop still schedules tasks, so cancelling the block ends the test."""
        self._cancel_delivered = True
        me = trio.lowlevel.current_task()  # the loop's system task that runs this callback
        busiest = [f"{task.name!r} ({steps} steps) at {_where(task)}"
                   for task, steps in self._stop_sampling().most_common(4) if task is not me][:3]
        if busiest:
            why = ("a livelock: some loop retries without waiting, so the autojump clock never advances. Busiest "
                   f"tasks meanwhile: {'; '.join(busiest)}")
        else:
            why = "every task was waiting on something with no deadline: a wait that nothing will end"
        if not self._interrupted:
            self.stall = f"virtual time stopped at {virtual_time:.3f} s for {frozen:.1f} wall seconds, {why}"
            self._scope.cancel()

    def _interrupt(self, virtual_time: float, frozen: float) -> None:
        if self._cancel_delivered:
            why = "and cancelling the test did not unfreeze it: a loop retries without waiting even when cancelled"
        else:
            why = (f"and the Trio loop ran nothing for {self._grace:.1f} s after being asked to: a synchronous loop "
                   "that never awaits")
        message = f"virtual time stopped at {virtual_time:.3f} s for {frozen:.1f} wall seconds {why}"
        with self._lock:
            if self._stopped.is_set():
                return
            self._interrupted = True
            ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(self._trio_thread),
                                                       ctypes.py_object(_raised_async(message)))


def _only_cancelled(exc: BaseException) -> bool:
    """Whether `exc` is just the watchdog's cancellation unwinding the tasks: nothing the message does not say."""
    if isinstance(exc, BaseExceptionGroup):
        return exc.split(trio.Cancelled)[1] is None
    return isinstance(exc, trio.Cancelled)


@asynccontextmanager
async def virtual_time_watchdog(stall_after: float = DEFAULT_STALL_AFTER, *, poll_interval: float = 0.25,
                                grace: float = 2.0) -> AsyncIterator[None]:
    """Fail the block with `VirtualTimeStalled` when virtual time stands still for `stall_after` wall seconds.

    Use it inside a Trio run; `poll_interval` and `grace` (wall seconds) are there for the watchdog's own
    tests, which cannot afford the defaults.
    """
    if not 0 < poll_interval < grace or stall_after <= 0:
        raise ValueError("stall_after must be positive, and grace longer than poll_interval (the watchdog samples "
                         "the spinning tasks for one poll_interval before it cancels)")
    with trio.CancelScope() as scope:
        watchdog = _Watchdog(scope, stall_after, poll_interval, grace)
        try:
            yield
        except BaseException as exc:
            if watchdog.stall is None or isinstance(exc, VirtualTimeStalled):
                raise
            raise VirtualTimeStalled(watchdog.stall) from (None if _only_cancelled(exc) else exc)
        finally:
            watchdog.stop()
    if watchdog.stall is not None:
        raise VirtualTimeStalled(watchdog.stall)


def run_with_watchdog(async_fn: Callable[..., Awaitable[T]], *args: object,
                      stall_after: float = DEFAULT_STALL_AFTER, **run_options: Any) -> T:
    """`trio.run` with the whole run under `virtual_time_watchdog`.

    pytest-trio takes it as `@pytest.mark.trio(run=functools.partial(run_with_watchdog, stall_after=...))`,
    which covers every async fixture's setup and teardown as well as the test.
    """

    async def watched() -> T:
        async with virtual_time_watchdog(stall_after):
            return await async_fn(*args)

    return trio.run(watched, **run_options)
