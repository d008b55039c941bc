"""The leader-epoch cache: for each leader epoch, the first offset written in it (KIP-101, KIP-279).

A follower that truncates to its high watermark after a leader change can throw away acknowledged writes, or
keep a divergent suffix (KAFKA-1211, KAFKA-6361). Instead it asks the leader where the follower's latest
epoch ends and truncates there; this cache is what answers.
"""

from __future__ import annotations

import bisect

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class LeaderEpochCache:
    """Entries `(epoch, start_offset)` strictly increasing in both fields.

    Two parallel tuples rather than a sorted map: the cache holds one entry per leader change, appends happen
    at the end, and both lookups are a bisect. Tuples of ints, replaced whole on a change, because every replica
    has a cache and changes are rare (one per leader change), while the cyclic GC would walk two lists per
    replica at every full collection; it stops tracking a tuple of ints, and empty ones are shared.
    """

    __slots__ = ("_epochs", "_offsets")

    def __init__(self) -> None:
        self._epochs: tuple[int, ...] = ()
        self._offsets: tuple[int, ...] = ()

    @property
    def latest_epoch(self) -> int | None:
        return self._epochs[-1] if self._epochs else None

    def epoch_entries(self) -> list[tuple[int, int]]:
        return list(zip(self._epochs, self._offsets))

    def assign(self, epoch: int, start_offset: int) -> None:
        """Record that `epoch` starts at `start_offset`, as Kafka's LeaderEpochFileCache.assign does.

        Re-assigning the latest epoch at the same or a later offset is a no-op (every append of a leader calls
        this). Anything else first removes the entries it contradicts from the end (epoch >= `epoch` or start
        offset >= `start_offset`), so that the cache stays monotonic in both fields.
        """
        if epoch < 0 or start_offset < 0:
            raise ValueError(f"invalid leader epoch entry (epoch={epoch}, start_offset={start_offset})")
        if self._epochs and self._epochs[-1] == epoch and start_offset >= self._offsets[-1]:
            return
        keep = len(self._epochs)
        while keep and (self._epochs[keep - 1] >= epoch or self._offsets[keep - 1] >= start_offset):
            keep -= 1
        self._epochs = (*self._epochs[:keep], epoch)
        self._offsets = (*self._offsets[:keep], start_offset)

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """The largest epoch <= `requested_epoch` and the offset where it ends (OffsetsForLeaderEpoch).

        Matches Kafka's LeaderEpochFileCache.endOffsetFor:
        - the latest epoch ends at the log end offset, since it is still being written;
        - an epoch below every entry answers `(requested_epoch, first entry's start offset)`: the data before
          it is gone, and the follower must truncate to where this log's known history starts rather than
          fall back to its high watermark (which is what older Kafka did, and what loses writes);
        - an epoch above the latest, UNDEFINED_EPOCH, or an empty cache: `(-1, -1)`.
        """
        if requested_epoch == UNDEFINED_EPOCH or not self._epochs:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if requested_epoch == self._epochs[-1]:
            return requested_epoch, log_end_offset
        higher = bisect.bisect_right(self._epochs, requested_epoch)
        if higher == len(self._epochs):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if higher == 0:
            return requested_epoch, self._offsets[0]
        return self._epochs[higher - 1], self._offsets[higher]

    def truncate_from_end(self, end_offset: int) -> None:
        """Forget epochs that start at or after `end_offset`, after the log was truncated there."""
        keep = bisect.bisect_left(self._offsets, end_offset)
        self._epochs = self._epochs[:keep]
        self._offsets = self._offsets[:keep]

    def truncate_from_start(self, start_offset: int) -> None:
        """Forget epochs wholly before `start_offset`; the epoch covering it now starts there.

        The covering epoch is kept so that OffsetsForLeaderEpoch still knows which epoch the log's first
        offset belongs to.
        """
        covered = bisect.bisect_right(self._offsets, start_offset)
        if covered == 0:
            return
        self._epochs = self._epochs[covered - 1:]
        self._offsets = (start_offset, *self._offsets[covered:])

    def clear(self) -> None:
        self._epochs = ()
        self._offsets = ()

    def __repr__(self) -> str:
        return f"LeaderEpochCache({self.epoch_entries()})"
