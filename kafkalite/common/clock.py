"""Milliseconds since the Unix epoch, driven by Trio's clock.

Record timestamps, segment ages and retention are compared against each other, so they must come from one
clock. Kafka uses the wall clock; kafkalite anchors Trio's clock to the wall clock once per `trio.run`, so that
timestamps look like real epoch milliseconds while a `MockClock` can still jump a five-minute scenario forward
in no time, and segment roll and retention follow the jump.
"""

from __future__ import annotations

import time

import trio

_ANCHOR: trio.lowlevel.RunVar[float] = trio.lowlevel.RunVar("kafkalite_clock_anchor")


def now_ms() -> int:
    """Epoch milliseconds: the wall clock at the start of this Trio run plus Trio time elapsed since."""
    try:
        anchor = _ANCHOR.get()
    except LookupError:
        anchor = time.time() - trio.current_time()
        _ANCHOR.set(anchor)
    except RuntimeError:  # outside a Trio run: there is no simulated time to follow
        return int(time.time() * 1000)
    return int((anchor + trio.current_time()) * 1000)


def pin_epoch(epoch_s: float) -> None:
    """Anchor this Trio run's clock at `epoch_s` instead of the wall clock: a replayed run then sees the very same
    millisecond timestamps (the wall clock's fraction of a millisecond would otherwise round differently from
    one run to the next, and decide comparisons made exactly at a timeout)."""
    _ANCHOR.set(epoch_s - trio.current_time())
