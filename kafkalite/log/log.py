"""A partition's log: segments that roll by size and age, retention, truncation and offset lookups.

Batches are stored exactly as they arrived (only the leader rewrites two header fields, sharing the payload),
and every operation works on whole batches through sorted indexes, so appending and reading cost the same
for a batch of one record as for a batch of a thousand.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from dataclasses import dataclass

from kafkalite.common.clock import now_ms
from kafkalite.common.errors import (
    InvalidRecordError, MessageTooLargeError, OffsetOutOfRangeError, RecordListTooLargeError,
)
from kafkalite.common.records import NO_TIMESTAMP, RecordBatch
from kafkalite.log.epoch_cache import LeaderEpochCache
from kafkalite.log.segment import LogSegment

_WEEK_MS = 7 * 24 * 3600 * 1000


@dataclass(frozen=True, slots=True)
class LogConfig:
    """The topic-level log settings, named after Kafka's (log.segment.bytes, log.roll.ms, ...)."""

    segment_bytes: int = 1 << 30
    segment_ms: int = _WEEK_MS
    retention_ms: int = _WEEK_MS
    retention_bytes: int = -1
    max_message_bytes: int = 1048588


class UnexpectedAppendOffsetError(InvalidRecordError):
    """A follower was handed a batch that does not continue its log (Kafka's UnexpectedAppendOffsetException).

    It means the fetcher lost track of its position; appending would leave a hole or overwrite history.
    """


class Log:
    __slots__ = ("config", "name", "_clock_ms", "_log_start_offset", "_older", "_active", "_empty_since_ms",
                 "_segment_bases", "_log_end_offset", "_epochs", "_epoch_offsets")

    def __init__(self, config: LogConfig = LogConfig(), *, clock_ms: Callable[[], int] = now_ms,
                 log_start_offset: int = 0, name: str = "", created_ms: int | None = None) -> None:
        """`created_ms`: when the first segment was created (for segment.ms), if the caller has read the clock
        already: a broker creating thousands of replicas in one LeaderAndIsr reads it once, not once a log."""
        self.config = config
        self.name = name
        self._clock_ms = clock_ms
        self._log_start_offset = log_start_offset
        # The segments: the active one apart, so that a log with one segment (nearly every log of a large cluster)
        # holds no list of them for the cyclic GC to walk, only the shared empty tuple.
        self._older: tuple[LogSegment, ...] = ()
        # The active segment is made by the first append (`_active_segment`): most logs of a large cluster never
        # see one, and an empty segment object each was one more object per replica for the cyclic GC to walk.
        # Until then None, and `_empty_since_ms` is when it was due, its creation time for segment.ms.
        self._active: LogSegment | None = None
        self._empty_since_ms = clock_ms() if created_ms is None else created_ms
        # The segments' base offsets, for bisect: a tuple of ints, replaced whole on a roll, truncation or retention
        # (rare), as the cyclic GC stops tracking it where it would walk a list per log at every full collection.
        self._segment_bases: tuple[int, ...] = (log_start_offset,)
        self._log_end_offset = log_start_offset  # kept, not derived: every produce and fetch asks for it
        # The leader-epoch history, read and changed through `leader_epoch_cache`: two tuples of ints on the log
        # itself rather than an object per replica that the cyclic GC would walk at every full collection.
        self._epochs: tuple[int, ...] = ()
        self._epoch_offsets: tuple[int, ...] = ()

    # -- state --------------------------------------------------------------------------------------------

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self._log_end_offset

    @property
    def segments(self) -> tuple[LogSegment, ...]:
        """Every segment, oldest first, the active one last (an empty one made for the caller if none is yet)."""
        active = self._active
        if active is None:
            active = LogSegment(self._segment_bases[-1], self._empty_since_ms)
        return (*self._older, active)

    @property
    def size_in_bytes(self) -> int:
        older = sum(segment.size_in_bytes for segment in self._older)
        return older if self._active is None else older + self._active.size_in_bytes

    def _active_segment(self) -> LogSegment:
        active = self._active
        if active is None:
            active = self._active = LogSegment(self._segment_bases[-1], self._empty_since_ms)
        return active

    @property
    def leader_epoch_cache(self) -> LeaderEpochCache:
        return LeaderEpochCache(self)

    @property
    def latest_epoch(self) -> int | None:
        return self._epochs[-1] if self._epochs else None

    # -- appends --------------------------------------------------------------------------------------------

    def append_as_leader(self, batch: RecordBatch, leader_epoch: int) -> RecordBatch:
        """Assign the batch its offsets and epoch and store it; returns the stored batch.

        The crc is not checked here: the broker validates once at the request edge, and the offsets and epoch
        rewritten here are outside the crc.
        """
        if batch.size_in_bytes > self.config.max_message_bytes:
            raise MessageTooLargeError(
                f"{self._label()}batch of {batch.size_in_bytes} bytes exceeds max.message.bytes "
                f"({self.config.max_message_bytes})")
        if batch.size_in_bytes > self.config.segment_bytes:
            raise RecordListTooLargeError(
                f"Message batch size is {batch.size_in_bytes} bytes in append to partition {self.name}, which "
                f"exceeds the maximum configured segment size of {self.config.segment_bytes}.")
        stored = batch.with_offset(self.log_end_offset, leader_epoch)
        self._append(stored)
        return stored

    def append_as_follower(self, batch: RecordBatch) -> None:
        """Store a batch fetched from the leader, keeping the leader's offsets and epoch.

        max.message.bytes is not enforced: the leader already accepted the batch, and a follower that refused
        it could never catch up.
        """
        if batch.base_offset != self.log_end_offset:
            raise UnexpectedAppendOffsetError(
                f"{self._label()}follower append of batch at offsets {batch.base_offset}..{batch.last_offset} "
                f"does not continue the log end offset {self.log_end_offset}")
        self._append(batch)

    def _append(self, batch: RecordBatch) -> None:
        epoch = batch.partition_leader_epoch
        if epoch >= 0 and (not self._epochs or epoch > self._epochs[-1]):
            self.leader_epoch_cache.assign(epoch, batch.base_offset)
        active = self._active_segment()
        if not active.is_empty() and (active.size_in_bytes + batch.size_in_bytes > self.config.segment_bytes
                                      or self._waited_for_roll(active, batch) > self.config.segment_ms):
            active = self._roll()
        if batch.max_timestamp < 0:
            active.modified_ms = self._clock_ms()
        active.append(batch)
        self._log_end_offset = batch.base_offset + batch.record_count

    def _waited_for_roll(self, active: LogSegment, batch: RecordBatch) -> int:
        """How long the active segment has been filling, as Kafka's timeWaitedForRoll measures it: from its first
        batch's timestamp to this batch's, so records written with old timestamps roll (and expire) as they would
        have when they were new; by the clock only for batches without timestamps."""
        first = active.first_batch_timestamp
        return batch.max_timestamp - first if first >= 0 else self._clock_ms() - active.created_ms

    def _roll(self) -> LogSegment:
        segment = LogSegment(self.log_end_offset, self._clock_ms())
        self._older += (self._active_segment(),)
        self._active = segment
        self._segment_bases += (segment.base_offset,)
        return segment

    # -- reads --------------------------------------------------------------------------------------------

    def read(self, start_offset: int, max_bytes: int, *, max_offset: int | None = None,
             min_one_batch: bool = True) -> list[RecordBatch]:
        """Whole batches from the one holding `start_offset`.

        A batch that starts before `start_offset` is returned whole (the consumer skips the records before
        its position, as Kafka's do). The result stops before exceeding `max_bytes`, except that with
        `min_one_batch` the first batch is returned however large, so an oversized batch cannot stall a
        consumer. `max_offset` (exclusive; the high watermark for consumers) hides batches starting at or
        above it.
        """
        end_offset = self.log_end_offset
        if start_offset < self._log_start_offset or start_offset > end_offset:
            raise OffsetOutOfRangeError(
                f"{self._label()}offset {start_offset} is out of range: the log holds "
                f"[{self._log_start_offset}, {end_offset})")
        if start_offset == end_offset or (max_offset is not None and start_offset >= max_offset):
            return []
        result: list[RecordBatch] = []
        remaining = max_bytes
        segments = self.segments
        for index in range(bisect.bisect_right(self._segment_bases, start_offset) - 1, len(segments)):
            segment = segments[index]
            batches = segment.read(start_offset, remaining, max_offset, min_one_batch and not result)
            result.extend(batches)
            if batches:
                remaining -= sum(batch.size_in_bytes for batch in batches)
                if remaining <= 0 or batches[-1].next_offset != segment.next_offset:
                    break
            elif not segment.is_empty():
                break
        return result

    def fetch_offset_by_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """ListOffsets by time: the first offset whose record timestamp is >= `timestamp`, and that timestamp.

        Segments and batches whose largest timestamp is below the target are skipped without decoding.
        """
        for segment in self.segments:
            if segment.largest_timestamp >= timestamp:
                found = segment.find_offset_by_timestamp(timestamp, self._log_start_offset)
                if found is not None:
                    return found
        return None

    def offset_of_max_timestamp(self) -> tuple[int, int] | None:
        """ListOffsets for MAX_TIMESTAMP (KIP-734): the first record with the largest timestamp, its offset and
        timestamp; None for a log without records.

        Each segment keeps its largest timestamp, so this is the lookup by time for that timestamp. Records below
        the log start do not count: when the largest timestamp was deleted with them, the answer is None, where
        Kafka's segment index would still name the deleted record.
        """
        largest = max((segment.largest_timestamp for segment in self.segments), default=NO_TIMESTAMP)
        return None if largest == NO_TIMESTAMP else self.fetch_offset_by_timestamp(largest)

    # -- truncation and retention -----------------------------------------------------------------------------

    def truncate_to(self, offset: int) -> None:
        """Remove every offset >= `offset`, for a follower whose suffix diverged from the leader's.

        Truncation is at batch boundaries, as in Kafka: if `offset` falls inside a batch, that whole batch
        goes too, and the new log end offset is that batch's base offset. The log keeps at least one
        (possibly empty) segment, whose end becomes the active end.

        At or past the log end there are no records to remove, but the epoch cache may still end in an epoch
        that starts at the log end: this replica led that epoch and appended nothing before losing leadership.
        That entry goes too, as in Kafka's Log.truncateTo. A follower that kept it would ask its leader about
        that epoch again after every truncation and never finish (see `truncation_offset` in the fetcher).
        """
        if offset >= self.log_end_offset:
            self.leader_epoch_cache.truncate_from_end(self.log_end_offset)
            return
        if offset < self._segment_bases[0]:
            self.truncate_fully_and_start_at(offset)
            return
        index = bisect.bisect_right(self._segment_bases, offset) - 1
        segments = self.segments
        new_end = segments[index].truncate_to(offset)
        keep = index + 1 if (index == 0 or new_end > segments[index].base_offset) else index
        active = segments[keep - 1]
        self._older, self._active = segments[:keep - 1], active
        self._segment_bases = self._segment_bases[:keep]
        self._log_end_offset = active.next_offset
        self._log_start_offset = min(self._log_start_offset, new_end)
        self.leader_epoch_cache.truncate_from_end(new_end)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Drop everything and restart empty at `offset` (a follower far behind a leader's log start)."""
        self._older = ()
        self._active, self._empty_since_ms = None, self._clock_ms()
        self._segment_bases = (offset,)
        self._log_end_offset = offset
        self._log_start_offset = offset
        self.leader_epoch_cache.clear()

    def maybe_increment_log_start_offset(self, offset: int) -> None:
        """Move the log start forward (DeleteRecords, or a follower following its leader's log start).

        Keeping it at or below the high watermark is the caller's job; the segments it passes are removed by
        the next `delete_old_segments`.
        """
        if offset <= self._log_start_offset:
            return
        if offset > self.log_end_offset:
            raise OffsetOutOfRangeError(
                f"{self._label()}cannot move the log start offset to {offset}, beyond the log end offset "
                f"{self.log_end_offset}")
        self._log_start_offset = offset
        self.leader_epoch_cache.truncate_from_start(offset)

    def delete_old_segments(self, high_watermark: int) -> int:
        """Apply retention (time, size, log start offset) to whole segments, oldest first; returns how many went.

        As Kafka's deletableSegments: a segment goes only once `high_watermark` has passed its end, so no record
        goes before it is committed and the log start never passes the high watermark. The active segment goes
        too when its records qualify (a new, empty one is rolled first: a log always has one to append to); an
        empty active segment never does. A segment whose records carry no timestamps expires by when it was last
        appended to, as Kafka's by its file's modification time.
        """
        active = self._active
        if not self._older and (active is None or active.is_empty()):  # most logs of a large cluster, every pass
            return 0
        now = self._clock_ms()
        retention_ms = self.config.retention_ms
        retention_bytes = self.config.retention_bytes
        segments = self.segments
        size = self.size_in_bytes
        deleted = 0
        while deleted < len(segments):
            segment = segments[deleted]
            following = segments[deleted + 1] if deleted + 1 < len(segments) else None
            if high_watermark < (self._log_end_offset if following is None else following.base_offset):
                break
            if following is None and segment.is_empty():
                break
            newest = segment.largest_timestamp
            if newest < 0:
                newest = segment.modified_ms
            if not ((retention_ms >= 0 and newest < now - retention_ms)
                    or (retention_bytes >= 0 and size - segment.size_in_bytes >= retention_bytes)
                    or (following is not None and following.base_offset <= self._log_start_offset)):
                break
            size -= segment.size_in_bytes
            deleted += 1
        if deleted:
            if deleted == len(segments):
                self._roll()
            self._older = self._older[deleted:]
            self._segment_bases = self._segment_bases[deleted:]
            self._log_start_offset = max(self._log_start_offset, self._segment_bases[0])
            self.leader_epoch_cache.truncate_from_start(self._log_start_offset)
        return deleted

    def _label(self) -> str:
        return f"{self.name}: " if self.name else ""

    def __repr__(self) -> str:
        return (f"Log({self.name!r}, log_start_offset={self._log_start_offset}, "
                f"log_end_offset={self.log_end_offset}, segments={len(self._segment_bases)})")
