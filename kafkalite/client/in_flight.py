"""Work a consumer's poll starts and waits for, which outlives a poll that times out first.

Kafka's consumer sends the requests a poll needs (JoinGroup, OffsetFetch, ListOffsets) and handles their answers
in whichever poll they arrive in; `poll(Duration.ZERO)` in a loop therefore gets there. A Trio task that awaited
them inside the poll's timeout would abandon each at the timeout and start it again at the next poll, so a short
timeout would never get anywhere. `InFlight` runs the work in the client's nursery instead: the poll that starts
it waits for it, and if that poll times out, the next one waits for the same work, or takes its outcome.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

import trio

_T = TypeVar("_T")


class _Round(Generic[_T]):
    def __init__(self, key: object) -> None:
        self.key = key
        self.done = trio.Event()
        self.outcome: tuple[bool, _T | BaseException] | None = None


class InFlight(Generic[_T]):
    """One kind of work, at most one at a time; its result, or its error, goes to the poll that takes it (and to
    any other poll that waited for the same work)."""

    def __init__(self, what: str) -> None:
        self._what = what
        self._round: _Round[_T] | None = None

    async def wait(self, nursery: trio.Nursery | None, work: Callable[[], Awaitable[_T]], key: object) -> _T:
        """The outcome of the work under way, started now (in `nursery`) if none is. `key` says what the work is
        for (the assignment and seeks it looks up positions for, the subscription it joins with): work under way
        for another key, or done for it and never taken, is stale, and dropped; it is not an answer to this."""
        current = self._round
        if current is None or current.key != key:
            if nursery is None:
                raise RuntimeError(f"{self._what}: the client is not open")
            current = self._round = _Round(key)
            nursery.start_soon(self._run, current, work)
        if not current.done.is_set():  # done already: no checkpoint, which a poll's spent timeout would cancel
            await current.done.wait()
        if self._round is current:
            self._round = None  # taken: the next wait starts the work again
        if current.outcome is None:  # the nursery was cancelled under it: the client is closing
            raise RuntimeError(f"{self._what}: the client closed while it was under way")
        ok, value = current.outcome
        if not ok:
            raise value  # type: ignore[misc]
        return value  # type: ignore[return-value]

    @staticmethod
    async def _run(current: _Round[_T], work: Callable[[], Awaitable[_T]]) -> None:
        try:
            current.outcome = (True, await work())
        except Exception as exc:  # the poll that takes the outcome raises it; the client lives on
            current.outcome = (False, exc)
        finally:
            current.done.set()
