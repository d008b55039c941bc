"""ProducerStateManager: duplicates answered with their offset, gaps and old epochs refused, state rebuilt from logs."""

import pytest

from kafkalite.common.errors import (
    DuplicateSequenceNumberError, InvalidProducerEpochError, OutOfOrderSequenceNumberError)
from kafkalite.common.records import Record, RecordBatch
from kafkalite.log import Log
from kafkalite.log.log import LogConfig
from kafkalite.log.producer_state import (
    MAX_CACHED_BATCHES, BatchMetadata, ProducerStateEntry, ProducerStateManager)


def batch(seq: int, count: int = 2, *, pid: int = 7, epoch: int = 0) -> RecordBatch:
    return RecordBatch.from_records([Record(None, b"v%d" % i) for i in range(count)], producer_id=pid,
                                    producer_epoch=epoch, base_sequence=seq)


class Leader:
    """A partition leader's log and producer state, appended to the way `Partition` does."""

    def __init__(self, config: LogConfig = LogConfig()) -> None:
        self.log = Log(config)
        self.state = ProducerStateManager()

    def check(self, sent: RecordBatch) -> BatchMetadata | None:
        return self.state.check(sent, self.log)

    def accept(self, sent: RecordBatch) -> int:
        """Check, then append and remember the batch unless it was a duplicate: the offset it is at."""
        duplicate = self.check(sent)
        if duplicate is not None:
            return duplicate.first_offset
        stored = self.log.append_as_leader(sent, 0)
        self.state.update(stored)
        return stored.base_offset

    def entry(self) -> ProducerStateEntry:
        entry = self.state.last_entry(7)
        assert entry is not None
        return entry


def test_in_sequence_batches_are_accepted_and_remembered() -> None:
    leader = Leader()
    assert leader.accept(batch(0)) == 0
    assert leader.accept(batch(2)) == 2
    assert leader.entry().last_seq == 3 and leader.entry().last_offset == 3


def test_a_retried_batch_gets_its_original_offset() -> None:
    leader = Leader()
    leader.accept(batch(0, pid=1))
    leader.accept(batch(0))
    leader.accept(batch(2))
    assert leader.accept(batch(0)) == 2
    assert leader.accept(batch(2)) == 4
    assert leader.entry().last_offset == 5 and leader.log.log_end_offset == 6


def test_a_retry_from_beyond_the_last_five_batches_is_found_in_the_log() -> None:
    leader = Leader()
    for i in range(MAX_CACHED_BATCHES + 3):
        leader.accept(batch(i, count=1, pid=1))  # another producer's batches in between
        leader.accept(batch(i, count=1))
    assert leader.check(batch(0, count=1)) == BatchMetadata(0, 0, 1, 1, batch(0, count=1).max_timestamp)
    assert leader.check(batch(2, count=1)).first_offset == 5  # type: ignore[union-attr]
    assert leader.log.log_end_offset == 2 * (MAX_CACHED_BATCHES + 3)


def test_a_passed_sequence_the_log_no_longer_holds_is_a_duplicate_with_no_offset() -> None:
    leader = Leader(LogConfig(segment_bytes=batch(0, count=1).size_in_bytes))  # a segment per batch
    for i in range(MAX_CACHED_BATCHES + 1):
        leader.accept(batch(i, count=1))
    leader.log.maybe_increment_log_start_offset(3)  # DeleteRecords, then retention removes the first batches
    assert leader.log.delete_old_segments(leader.log.log_end_offset) == 3
    with pytest.raises(DuplicateSequenceNumberError, match="resent sequence 0"):
        leader.check(batch(0, count=1))
    with pytest.raises(OutOfOrderSequenceNumberError, match="got 5, expected 6"):
        leader.check(batch(5, count=2))  # straddles the last sequence: not a batch this producer sent


def test_a_batch_overlapping_appended_ones_without_matching_one_is_out_of_order() -> None:
    """Kafka answers a batch that is no exact retry OUT_OF_ORDER_SEQUENCE_NUMBER; DUPLICATE_SEQUENCE_NUMBER, which
    producers read as "written", would report records that were never appended in those bounds."""
    leader = Leader()
    leader.accept(batch(0, count=2))
    leader.accept(batch(2, count=2))
    for sent in (batch(0, count=1), batch(1, count=1), batch(1, count=2), batch(3, count=1), batch(0, count=4)):
        with pytest.raises(OutOfOrderSequenceNumberError, match="overlap batches appended with other bounds"):
            leader.check(sent)
    assert leader.check(batch(2, count=2)) == BatchMetadata(2, 3, 2, 3, batch(2, count=2).max_timestamp)
    assert leader.log.log_end_offset == 4


def test_a_gap_is_out_of_order() -> None:
    leader = Leader()
    leader.accept(batch(0))
    with pytest.raises(OutOfOrderSequenceNumberError, match="expected 2"):
        leader.accept(batch(3))
    assert leader.entry().last_seq == 1 and leader.log.log_end_offset == 2


def test_an_older_epoch_is_fenced_and_a_new_epoch_starts_at_zero() -> None:
    leader = Leader()
    leader.accept(batch(0, epoch=3))
    with pytest.raises(InvalidProducerEpochError):
        leader.check(batch(2, epoch=2))
    with pytest.raises(OutOfOrderSequenceNumberError):
        leader.check(batch(2, epoch=4))
    assert leader.accept(batch(0, epoch=4)) == 2
    assert leader.entry().producer_epoch == 4


def test_an_unknown_producer_is_accepted_at_any_sequence_and_non_idempotent_batches_are_ignored() -> None:
    leader = Leader()
    assert leader.accept(batch(42)) == 0
    plain = RecordBatch.from_records([Record(None, b"x")])
    assert leader.accept(plain) == 2 and leader.accept(plain) == 3
    assert list(leader.state.producers) == [7]


def test_sequences_wrap_after_int32_max() -> None:
    leader = Leader()
    leader.accept(batch(2**31 - 2, count=2))
    assert leader.accept(batch(0)) == 2
    assert leader.accept(batch(2**31 - 2, count=2)) == 0  # a retry from before the wrap is still recognised


def test_producers_are_tracked_independently() -> None:
    leader = Leader()
    leader.accept(batch(0, pid=1))
    leader.accept(batch(0, pid=2))
    assert leader.check(batch(0, pid=1)).first_offset == 0  # type: ignore[union-attr]
    assert leader.check(batch(0, pid=2)).first_offset == 2  # type: ignore[union-attr]


def test_check_alone_changes_nothing() -> None:
    leader = Leader()
    leader.accept(batch(0))
    assert leader.check(batch(2)) is None
    assert leader.check(batch(2)) is None
    assert leader.entry().last_seq == 1


def _log_with(*batches: RecordBatch) -> Log:
    log = Log()
    for b in batches:
        log.append_as_leader(b, 0)
    return log


def test_rebuild_from_a_log_recognises_its_duplicates() -> None:
    log = _log_with(batch(0, pid=1), batch(0, pid=2), batch(2, pid=1))
    state = ProducerStateManager()
    state.rebuild_from(b for segment in log.segments for b in segment.batches)
    assert state.check(batch(2, pid=1), log).first_offset == 4  # type: ignore[union-attr]
    assert state.check(batch(0, pid=2), log).first_offset == 2  # type: ignore[union-attr]
    assert state.check(batch(4, pid=1), log) is None


def test_truncate_and_reload_forgets_truncated_batches() -> None:
    log = _log_with(batch(0), batch(2), batch(4))
    state = ProducerStateManager()
    state.truncate_and_reload(log)
    assert state.check(batch(4), log).first_offset == 4  # type: ignore[union-attr]
    log.truncate_to(4)
    state.truncate_and_reload(log)
    assert state.check(batch(4), log) is None  # no longer a duplicate: the retry must be appended again
    assert state.last_entry(7).last_offset == 3  # type: ignore[union-attr]
    with pytest.raises(OutOfOrderSequenceNumberError):
        state.check(batch(6), log)
