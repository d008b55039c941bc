"""The leader-epoch cache: for each leader epoch, the first offset written in it (KIP-101, KIP-279).

A follower that truncates to its high watermark after a leader change can throw away acknowledged writes, or
keep a divergent suffix (KAFKA-1211, KAFKA-6361). Instead it asks the leader where the follower's latest
epoch ends and truncates there; this cache is what answers.
"""

from __future__ import annotations

import bisect
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kafkalite.log.log import Log

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class LeaderEpochCache:
    """Entries `(epoch, start_offset)` strictly increasing in both fields: a view of its log's epoch history.

    Two parallel tuples rather than a sorted map: the cache holds one entry per leader change, appends happen
    at the end, and both lookups are a bisect. The tuples of ints live on the `Log` and are replaced whole on a
    change (one per leader change). Every replica has a history while changes are rare, and the cyclic GC stops
    tracking a tuple of ints (empty ones are shared), so a replica's history costs the collector nothing and the
    view, made on use, is no long-lived object of its own to walk at every full collection.
    """

    __slots__ = ("_log",)

    def __init__(self, log: Log) -> None:
        self._log = log

    @property
    def latest_epoch(self) -> int | None:
        return self._log.latest_epoch

    def epoch_entries(self) -> list[tuple[int, int]]:
        return list(zip(self._log._epochs, self._log._epoch_offsets))

    def assign(self, epoch: int, start_offset: int) -> None:
        """Record that `epoch` starts at `start_offset`, as Kafka's LeaderEpochFileCache.assign does.

        Re-assigning the latest epoch at the same or a later offset is a no-op (every append of a leader calls
        this). Anything else first removes the entries it contradicts from the end (epoch >= `epoch` or start
        offset >= `start_offset`), so that the cache stays monotonic in both fields.
        """
        if epoch < 0 or start_offset < 0:
            raise ValueError(f"invalid leader epoch entry (epoch={epoch}, start_offset={start_offset})")
        log = self._log
        epochs, offsets = log._epochs, log._epoch_offsets
        if epochs and epochs[-1] == epoch and start_offset >= offsets[-1]:
            return
        keep = len(epochs)
        while keep and (epochs[keep - 1] >= epoch or offsets[keep - 1] >= start_offset):
            keep -= 1
        log._epochs = (*epochs[:keep], epoch)
        log._epoch_offsets = (*offsets[:keep], start_offset)

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """The largest epoch <= `requested_epoch` and the offset where it ends (OffsetsForLeaderEpoch).

        Matches Kafka's LeaderEpochFileCache.endOffsetFor:
        - the latest epoch ends at the log end offset, since it is still being written;
        - an epoch below every entry answers `(requested_epoch, first entry's start offset)`: the data before
          it is gone, and the follower must truncate to where this log's known history starts rather than
          fall back to its high watermark (which is what older Kafka did, and what loses writes);
        - an epoch above the latest, UNDEFINED_EPOCH, or an empty cache: `(-1, -1)`.
        """
        epochs = self._log._epochs
        if requested_epoch == UNDEFINED_EPOCH or not epochs:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if requested_epoch == epochs[-1]:
            return requested_epoch, log_end_offset
        higher = bisect.bisect_right(epochs, requested_epoch)
        if higher == len(epochs):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        offsets = self._log._epoch_offsets
        if higher == 0:
            return requested_epoch, offsets[0]
        return epochs[higher - 1], offsets[higher]

    def epoch_for_offset(self, offset: int) -> int:
        """The epoch `offset` was written in (the latest starting at or before it), UNDEFINED_EPOCH before every
        entry: what ListOffsets answers beside an offset, as Kafka's epochForOffset."""
        covering = bisect.bisect_right(self._log._epoch_offsets, offset)
        return self._log._epochs[covering - 1] if covering else UNDEFINED_EPOCH

    def truncate_from_end(self, end_offset: int) -> None:
        """Forget epochs that start at or after `end_offset`, after the log was truncated there."""
        log = self._log
        keep = bisect.bisect_left(log._epoch_offsets, end_offset)
        log._epochs = log._epochs[:keep]
        log._epoch_offsets = log._epoch_offsets[:keep]

    def truncate_from_start(self, start_offset: int) -> None:
        """Forget epochs wholly before `start_offset`; the epoch covering it now starts there.

        The covering epoch is kept so that OffsetsForLeaderEpoch still knows which epoch the log's first
        offset belongs to.
        """
        log = self._log
        covered = bisect.bisect_right(log._epoch_offsets, start_offset)
        if covered == 0:
            return
        log._epochs = log._epochs[covered - 1:]
        log._epoch_offsets = (start_offset, *log._epoch_offsets[covered:])

    def clear(self) -> None:
        self._log._epochs = self._log._epoch_offsets = ()

    def __repr__(self) -> str:
        return f"LeaderEpochCache({self.epoch_entries()})"
