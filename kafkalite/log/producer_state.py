"""Per-partition producer state: what makes an idempotent producer's retries land exactly once (KIP-98).

A producer numbers its batches per partition (base sequence) under a producer id and epoch. When a retry
arrives for a batch the leader already appended, because the response was lost, the leader recognises it
among the producer's last `MAX_CACHED_BATCHES` batches and answers with the original offset instead of
appending it twice; a batch that skips a sequence number means one was lost, and is refused. Kafka's producer
keeps at most five requests in flight per partition, which is why five batches are usually enough to remember.

They are not always enough: a batch whose answer was lost may be retried after its producer has had more than
five later batches appended (it kept the sequence because its outcome was unknown). Kafka answers that retry
OUT_OF_ORDER_SEQUENCE_NUMBER, and a producer that takes it for "not appended" renumbers the batches behind it
onto sequences the log already holds, whose retries are then acknowledged with another batch's offsets. Here a
sequence the producer has already passed is looked up in the log, and answered with its offsets; if retention
has removed it, with DUPLICATE_SEQUENCE_NUMBER, which Kafka's producer reads as "written, offset unknown".
"Passed" counts only from the first sequence the log holds for the producer's epoch: a leader with no state for
a producer accepts it at any sequence, so the sequences before that one may never have been appended.

The state is derived from the batch headers in the log and nothing else, so any replica can rebuild it: a
follower that becomes leader, or a log truncated to a leader epoch's end, has exactly the state of its log.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

from kafkalite.common.errors import (
    DuplicateSequenceNumberError, InvalidProducerEpochError, OutOfOrderSequenceNumberError)
from kafkalite.common.records import RecordBatch
from kafkalite.log.log import Log

MAX_CACHED_BATCHES = 5
NO_PRODUCER_ID = -1
_SEQUENCE_SPACE = 1 << 31  # sequences are int32 and wrap to 0 after Integer.MAX_VALUE, as in Kafka


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    max_timestamp: int  # on a LogAppendTime topic the time it was appended, which a retry is told again, as in Kafka


@dataclass(slots=True)
class ProducerStateEntry:
    producer_id: int
    producer_epoch: int
    first_seq: int  # the log holds every sequence of this epoch from here to `last_seq`
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=MAX_CACHED_BATCHES))

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1

    @property
    def last_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    def appended(self, batch: RecordBatch) -> bool:
        """Whether every sequence of `batch` lies in the stretch this epoch's batches in the log cover."""
        span = (self.last_seq - self.first_seq) % _SEQUENCE_SPACE
        return ((batch.base_sequence - self.first_seq) % _SEQUENCE_SPACE <= span
                and (_last_seq_of(batch) - self.first_seq) % _SEQUENCE_SPACE <= span)

    def find_duplicate(self, batch: RecordBatch) -> BatchMetadata | None:
        last_seq = _last_seq_of(batch)
        for cached in self.batches:
            if cached.first_seq == batch.base_sequence and cached.last_seq == last_seq:
                return cached
        return None


def _last_seq_of(batch: RecordBatch) -> int:
    return (batch.base_sequence + batch.record_count - 1) % _SEQUENCE_SPACE


def _find_in_log(log: Log, batch: RecordBatch) -> BatchMetadata | bool:
    """The offsets of the batch `log` holds with `batch`'s producer, epoch and sequences, newest first (a retry
    from beyond the cache is rare, and a producer's recent batches are near the end); else whether the log holds
    a batch of that producer and epoch that shares a sequence with `batch`: one with other bounds, so `batch` is
    no retry of it."""
    last_seq = _last_seq_of(batch)
    width = (last_seq - batch.base_sequence) % _SEQUENCE_SPACE
    overlapped = False
    for segment in reversed(log.segments):
        for stored in reversed(segment.batches):
            if stored.producer_id != batch.producer_id or stored.producer_epoch != batch.producer_epoch:
                continue
            stored_last = _last_seq_of(stored)
            if stored.base_sequence == batch.base_sequence and stored_last == last_seq:
                return BatchMetadata(stored.base_sequence, last_seq, stored.base_offset, stored.last_offset,
                                     stored.max_timestamp)
            span = (stored_last - stored.base_sequence) % _SEQUENCE_SPACE
            overlapped = overlapped or (batch.base_sequence - stored.base_sequence) % _SEQUENCE_SPACE <= span \
                or (stored.base_sequence - batch.base_sequence) % _SEQUENCE_SPACE <= width
    return overlapped


class ProducerStateManager:
    """Producer id -> epoch, last sequence and the offsets of its last batches, for one partition log.

    It works on the dict it is given, so that a partition can keep just that dict and make the manager on use:
    a dict with no producers in it is no object the cyclic GC walks, and most replicas of a large cluster have
    none, where a manager of their own would be one more long-lived object each.
    """

    __slots__ = ("producers",)

    def __init__(self, producers: dict[int, ProducerStateEntry] | None = None) -> None:
        self.producers: dict[int, ProducerStateEntry] = {} if producers is None else producers

    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self.producers.get(producer_id)

    def check(self, batch: RecordBatch, log: Log) -> BatchMetadata | None:
        """Validate a batch the leader is about to append: the original batch's offsets if it is a duplicate.

        Raises InvalidProducerEpochError for an epoch older than the producer's current one (a fenced
        zombie), OutOfOrderSequenceNumberError when the batch would leave a gap in the producer's sequence or
        overlaps appended batches without matching one, and DuplicateSequenceNumberError for a sequence already
        appended that `log` no longer holds.
        A producer the log has no state for is accepted at any sequence: its earlier batches may have been
        removed by retention, and refusing it would wedge it for good (Kafka does the same since KIP-360).
        """
        if batch.producer_id == NO_PRODUCER_ID:
            return None
        entry = self.producers.get(batch.producer_id)
        if entry is None:
            return None
        if batch.producer_epoch < entry.producer_epoch:
            raise InvalidProducerEpochError(
                f"producer {batch.producer_id} sent epoch {batch.producer_epoch}, older than its current epoch "
                f"{entry.producer_epoch}")
        if batch.producer_epoch > entry.producer_epoch:
            if batch.base_sequence != 0:
                raise OutOfOrderSequenceNumberError(
                    f"producer {batch.producer_id} started epoch {batch.producer_epoch} at sequence "
                    f"{batch.base_sequence}, expected 0")
            return None
        duplicate = entry.find_duplicate(batch)
        if duplicate is not None:
            return duplicate
        expected = (entry.last_seq + 1) % _SEQUENCE_SPACE
        if batch.base_sequence == expected:
            return None
        if entry.appended(batch):
            appended = _find_in_log(log, batch)
            if isinstance(appended, BatchMetadata):
                return appended
            if appended:  # Kafka's producer would read a duplicate as "written": it was not, in these bounds
                raise OutOfOrderSequenceNumberError(
                    f"out of order sequence number for producer {batch.producer_id} at epoch "
                    f"{entry.producer_epoch}: sequences {batch.base_sequence} to {_last_seq_of(batch)} overlap "
                    f"batches appended with other bounds, so they are no retry of one (expected {expected})")
            raise DuplicateSequenceNumberError(
                f"producer {batch.producer_id} at epoch {entry.producer_epoch} resent sequence "
                f"{batch.base_sequence}, already appended (its last sequence is {entry.last_seq}); the log "
                f"no longer holds the batch, so its offset is unknown")
        raise OutOfOrderSequenceNumberError(
            f"out of order sequence number for producer {batch.producer_id} at epoch {entry.producer_epoch}: "
            f"got {batch.base_sequence}, expected {expected} (the log holds sequences {entry.first_seq} to "
            f"{entry.last_seq})")

    def update(self, stored: RecordBatch) -> None:
        """Remember a batch as the log holds it (offsets assigned): after a leader append, on followers, on load."""
        if stored.producer_id == NO_PRODUCER_ID:
            return
        entry = self.producers.get(stored.producer_id)
        if entry is None or stored.producer_epoch != entry.producer_epoch:
            entry = self.producers[stored.producer_id] = ProducerStateEntry(
                stored.producer_id, stored.producer_epoch, stored.base_sequence)
        entry.batches.append(BatchMetadata(stored.base_sequence, _last_seq_of(stored), stored.base_offset,
                                           stored.last_offset, stored.max_timestamp))

    def rebuild_from(self, batches: Iterable[RecordBatch]) -> None:
        """Forget everything and replay `batches` (a log's, oldest first)."""
        self.producers.clear()
        for batch in batches:
            self.update(batch)

    def truncate_and_reload(self, log: Log) -> None:
        """Rebuild from what `log` holds after a truncation, so no truncated batch is mistaken for a duplicate."""
        self.rebuild_from(batch for segment in log.segments for batch in segment.batches)
