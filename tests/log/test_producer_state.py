"""ProducerStateManager: duplicates answered with their offset, gaps and old epochs refused, state rebuilt from logs."""

import pytest

from kafkalite.common.errors import InvalidProducerEpochError, OutOfOrderSequenceNumberError
from kafkalite.common.records import Record, RecordBatch
from kafkalite.log import Log
from kafkalite.log.producer_state import MAX_CACHED_BATCHES, ProducerStateManager


def batch(seq: int, count: int = 2, *, pid: int = 7, epoch: int = 0, offset: int = 0) -> RecordBatch:
    return RecordBatch.from_records([Record(None, b"v%d" % i) for i in range(count)], base_offset=offset,
                                    producer_id=pid, producer_epoch=epoch, base_sequence=seq)


def accept(state: ProducerStateManager, stored: RecordBatch) -> int | None:
    """What a leader does: check, then remember the stored batch unless it was a duplicate."""
    duplicate = state.check(stored)
    if duplicate is None:
        state.update(stored)
        return None
    return duplicate.first_offset


def test_in_sequence_batches_are_accepted_and_remembered() -> None:
    state = ProducerStateManager()
    assert accept(state, batch(0, offset=0)) is None
    assert accept(state, batch(2, offset=2)) is None
    entry = state.last_entry(7)
    assert entry is not None and entry.last_seq == 3 and entry.last_offset == 3


def test_a_retried_batch_gets_its_original_offset() -> None:
    state = ProducerStateManager()
    accept(state, batch(0, offset=10))
    accept(state, batch(2, offset=12))
    assert accept(state, batch(0, offset=14)) == 10
    assert accept(state, batch(2, offset=14)) == 12
    assert state.last_entry(7).last_offset == 13  # type: ignore[union-attr]


def test_only_the_last_five_batches_are_recognised() -> None:
    state = ProducerStateManager()
    for i in range(MAX_CACHED_BATCHES + 1):
        accept(state, batch(i, count=1, offset=i))
    assert state.check(batch(1, count=1)).first_offset == 1
    with pytest.raises(OutOfOrderSequenceNumberError):
        state.check(batch(0, count=1))


def test_a_gap_is_out_of_order() -> None:
    state = ProducerStateManager()
    accept(state, batch(0))
    with pytest.raises(OutOfOrderSequenceNumberError, match="expected 2"):
        accept(state, batch(3, offset=2))
    assert state.last_entry(7).last_seq == 1  # type: ignore[union-attr]


def test_an_older_epoch_is_fenced_and_a_new_epoch_starts_at_zero() -> None:
    state = ProducerStateManager()
    accept(state, batch(0, epoch=3))
    with pytest.raises(InvalidProducerEpochError):
        state.check(batch(2, epoch=2))
    with pytest.raises(OutOfOrderSequenceNumberError):
        state.check(batch(2, epoch=4))
    assert accept(state, batch(0, epoch=4, offset=2)) is None
    assert state.last_entry(7).producer_epoch == 4  # type: ignore[union-attr]


def test_an_unknown_producer_is_accepted_at_any_sequence_and_non_idempotent_batches_are_ignored() -> None:
    state = ProducerStateManager()
    assert accept(state, batch(42)) is None
    plain = RecordBatch.from_records([Record(None, b"x")])
    assert accept(state, plain) is None and accept(state, plain) is None
    assert list(state.producers) == [7]


def test_sequences_wrap_after_int32_max() -> None:
    state = ProducerStateManager()
    accept(state, batch(2**31 - 2, count=2))
    assert accept(state, batch(0, offset=2)) is None


def test_producers_are_tracked_independently() -> None:
    state = ProducerStateManager()
    accept(state, batch(0, pid=1))
    accept(state, batch(0, pid=2, offset=2))
    assert state.check(batch(0, pid=1)).first_offset == 0
    assert state.check(batch(0, pid=2)).first_offset == 2


def test_check_alone_changes_nothing() -> None:
    state = ProducerStateManager()
    accept(state, batch(0))
    assert state.check(batch(2)) is None
    assert state.check(batch(2)) is None
    assert state.last_entry(7).last_seq == 1  # type: ignore[union-attr]


def _log_with(*batches: RecordBatch) -> Log:
    log = Log()
    for b in batches:
        log.append_as_leader(b, 0)
    return log


def test_rebuild_from_a_log_recognises_its_duplicates() -> None:
    log = _log_with(batch(0, pid=1), batch(0, pid=2), batch(2, pid=1))
    state = ProducerStateManager()
    state.rebuild_from(b for segment in log.segments for b in segment.batches)
    assert state.check(batch(2, pid=1)).first_offset == 4
    assert state.check(batch(0, pid=2)).first_offset == 2
    assert state.check(batch(4, pid=1)) is None


def test_truncate_and_reload_forgets_truncated_batches() -> None:
    log = _log_with(batch(0), batch(2), batch(4))
    state = ProducerStateManager()
    state.truncate_and_reload(log)
    assert state.check(batch(4)).first_offset == 4
    log.truncate_to(4)
    state.truncate_and_reload(log)
    assert state.check(batch(4)) is None  # no longer a duplicate: the retry must be appended again
    assert state.last_entry(7).last_offset == 3  # type: ignore[union-attr]
    with pytest.raises(OutOfOrderSequenceNumberError):
        state.check(batch(6))
