"""The partition log: offsets, rolling, reads at every boundary, truncation, retention, timestamp lookup."""

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalite.common.clock import now_ms
from kafkalite.common.errors import (
    InvalidRecordError, MessageTooLargeError, OffsetOutOfRangeError, RecordListTooLargeError,
)
from kafkalite.common.records import NO_TIMESTAMP, Record, RecordBatch
from kafkalite.log import Log, LogConfig, UnexpectedAppendOffsetError

HOUR_MS = 3600 * 1000


class FakeClock:
    def __init__(self, now: int = 1_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def batch(count: int = 5, *, timestamp: int = 1_000, value_size: int = 10, timestamps=None) -> RecordBatch:
    stamps = timestamps if timestamps is not None else [timestamp + i for i in range(count)]
    return RecordBatch.from_records([Record(None, b"v" * value_size, ts) for ts in stamps])


def make_log(clock=None, **config) -> Log:
    return Log(LogConfig(**config), clock_ms=clock or FakeClock(), name="t-0")


def offsets_of(batches):
    return [(b.base_offset, b.last_offset) for b in batches]


def filled_log(batches: int = 6, count: int = 5, clock=None, **config) -> Log:
    """A log with `batches` batches of `count` records, one segment per two batches."""
    size = batch(count).size_in_bytes
    log = make_log(clock, segment_bytes=2 * size, **config)
    for _ in range(batches):
        log.append_as_leader(batch(count), leader_epoch=0)
    return log


# -- appends and rolling ----------------------------------------------------------------------------------------

def test_leader_append_assigns_contiguous_offsets_and_epoch():
    log = make_log()
    stored = [log.append_as_leader(batch(3), leader_epoch=4) for _ in range(3)]
    assert offsets_of(stored) == [(0, 2), (3, 5), (6, 8)]
    assert all(b.partition_leader_epoch == 4 for b in stored)
    assert log.log_end_offset == 9
    assert log.latest_epoch == 4
    assert log.leader_epoch_cache.epoch_entries() == [(4, 0)]
    stored[0].validate()


def test_size_roll_keeps_offsets_contiguous_and_never_leaves_an_empty_segment_behind():
    log = filled_log(batches=7)
    assert [s.base_offset for s in log.segments] == [0, 10, 20, 30]
    assert [len(s.batches) for s in log.segments] == [2, 2, 2, 1]
    for older, newer in zip(log.segments, log.segments[1:]):
        assert older.next_offset == newer.base_offset
    assert offsets_of(log.read(0, 1 << 30)) == [(i, i + 4) for i in range(0, 35, 5)]
    assert log.size_in_bytes == 7 * batch().size_in_bytes


def test_a_batch_larger_than_a_segment_is_refused_as_in_kafka():
    big = batch(5, value_size=200)
    log = make_log(segment_bytes=big.size_in_bytes - 1)
    with pytest.raises(RecordListTooLargeError, match=f"Message batch size is {big.size_in_bytes} bytes in append to "
                       f"partition t-0, which exceeds the maximum configured segment size of {big.size_in_bytes - 1}"):
        log.append_as_leader(big, 0)
    assert (log.log_end_offset, log.size_in_bytes) == (0, 0)
    log = make_log(segment_bytes=big.size_in_bytes)  # exactly a segment: fits, and the next one rolls
    for _ in range(2):
        log.append_as_leader(big, 0)
    assert [s.base_offset for s in log.segments] == [0, 5]


def test_time_roll_measures_from_the_first_batchs_timestamp_as_kafka():
    """Records written with old timestamps roll (and so expire) as they would have when they were new."""
    clock = FakeClock()
    log = make_log(clock, segment_ms=HOUR_MS)
    log.append_as_leader(batch(timestamp=0), 0)  # the first batch's max timestamp is 4
    log.append_as_leader(batch(timestamp=HOUR_MS), 0)  # its max: exactly segment.ms later
    assert len(log.segments) == 1
    log.append_as_leader(batch(timestamp=HOUR_MS + 1), 0)  # past it
    assert [s.base_offset for s in log.segments] == [0, 10]
    log.append_as_leader(batch(timestamp=0), 0)  # older than the segment's first: no roll
    clock.now += 100 * HOUR_MS  # nor does the clock roll a segment whose records carry timestamps
    log.append_as_leader(batch(timestamp=HOUR_MS + 5), 0)
    assert [s.base_offset for s in log.segments] == [0, 10]


def test_time_roll_without_timestamps_follows_the_clock():
    clock = FakeClock()
    log = make_log(clock, segment_ms=HOUR_MS)
    untimed = batch(timestamps=[NO_TIMESTAMP] * 5)
    log.append_as_leader(untimed, 0)
    clock.now += HOUR_MS
    log.append_as_leader(untimed, 0)
    assert len(log.segments) == 1
    clock.now += 1
    log.append_as_leader(untimed, 0)
    assert [s.base_offset for s in log.segments] == [0, 10]
    assert log.segments[1].created_ms == clock.now


def test_a_log_given_its_creation_time_rolls_by_time_from_it():
    """A broker creating thousands of logs in one LeaderAndIsr reads the clock once and gives each log that time:
    its first segment counts segment.ms from it, as from the clock's own reading."""
    clock = FakeClock()
    created = clock.now - HOUR_MS
    log = Log(LogConfig(segment_ms=HOUR_MS), clock_ms=clock, created_ms=created)
    assert (log.segments[0].created_ms, log.segments[0].modified_ms) == (created, created)
    untimed = batch(timestamps=[NO_TIMESTAMP] * 5)
    log.append_as_leader(untimed, 0)
    assert len(log.segments) == 1
    clock.now += 1
    log.append_as_leader(untimed, 0)
    assert [s.base_offset for s in log.segments] == [0, 5]


def test_a_log_emptied_by_a_full_truncation_counts_segment_ms_from_the_truncation():
    """The empty segment a full truncation leaves is made when a batch first comes, but dated from the truncation,
    as Kafka's, which it creates there: segment.ms runs from then, not from the first append."""
    clock = FakeClock()
    log = make_log(clock, segment_ms=HOUR_MS)
    untimed = batch(timestamps=[NO_TIMESTAMP] * 5)
    log.append_as_leader(untimed, 0)
    clock.now += 2 * HOUR_MS
    log.truncate_fully_and_start_at(100)
    truncated_at = clock.now
    assert [(s.base_offset, s.created_ms, s.size_in_bytes) for s in log.segments] == [(100, truncated_at, 0)]
    assert log.size_in_bytes == 0
    clock.now += HOUR_MS
    log.append_as_leader(untimed, 0)  # the first batch of an empty segment never rolls it
    assert [(s.base_offset, s.created_ms) for s in log.segments] == [(100, truncated_at)]
    clock.now += 1
    log.append_as_leader(untimed, 0)
    assert [s.base_offset for s in log.segments] == [100, 105]


def test_an_idle_empty_segment_does_not_roll():
    clock = FakeClock()
    log = make_log(clock, segment_ms=HOUR_MS)
    clock.now += 5 * HOUR_MS
    log.append_as_leader(batch(), 0)
    assert len(log.segments) == 1


async def test_time_roll_follows_trio_clock(autojump_clock):
    log = Log(LogConfig(segment_ms=HOUR_MS))
    untimed = batch(timestamps=[NO_TIMESTAMP] * 5)
    log.append_as_leader(untimed, 0)
    await trio.sleep(3600.001)
    log.append_as_leader(untimed, 0)
    assert [s.base_offset for s in log.segments] == [0, 5]
    assert log.segments[1].created_ms - log.segments[0].created_ms > HOUR_MS
    assert abs(log.segments[1].created_ms - now_ms()) <= 1


def test_message_too_large_leaves_the_log_unchanged():
    big = batch(5, value_size=100)
    log = make_log(max_message_bytes=big.size_in_bytes - 1)
    with pytest.raises(MessageTooLargeError) as info:
        log.append_as_leader(big, 0)
    assert str(big.size_in_bytes) in str(info.value)
    assert log.log_end_offset == 0 and log.size_in_bytes == 0 and log.latest_epoch is None
    log.append_as_leader(batch(1), 0)
    assert log.log_end_offset == 1


def test_follower_keeps_the_leaders_offsets_and_learns_epochs():
    leader = make_log()
    follower = make_log()
    for epoch in (1, 1, 3):
        follower.append_as_follower(leader.append_as_leader(batch(), epoch))
    assert follower.read(0, 1 << 20) == leader.read(0, 1 << 20)
    assert follower.leader_epoch_cache.epoch_entries() == [(1, 0), (3, 10)]


def test_follower_append_at_the_wrong_offset_raises_and_names_the_offsets():
    log = make_log()
    log.append_as_follower(batch().with_offset(0, 0))
    with pytest.raises(UnexpectedAppendOffsetError) as info:
        log.append_as_follower(batch().with_offset(7, 0))
    assert isinstance(info.value, InvalidRecordError)
    assert "7" in str(info.value) and "5" in str(info.value)
    with pytest.raises(UnexpectedAppendOffsetError):
        log.append_as_follower(batch().with_offset(0, 0))
    assert log.log_end_offset == 5


def test_log_can_start_at_a_nonzero_offset():
    log = Log(LogConfig(), clock_ms=FakeClock(), log_start_offset=100)
    assert (log.log_start_offset, log.log_end_offset) == (100, 100)
    assert log.append_as_leader(batch(), 0).base_offset == 100
    with pytest.raises(OffsetOutOfRangeError):
        log.read(99, 1000)


# -- reads --------------------------------------------------------------------------------------------------

def test_reads_at_every_boundary():
    log = filled_log()  # batches [0-4][5-9] | [10-14][15-19] | [20-24][25-29]
    everything = 1 << 30
    assert offsets_of(log.read(0, everything))[0] == (0, 4)
    assert offsets_of(log.read(3, everything))[0] == (0, 4)  # mid-batch: the whole batch
    assert offsets_of(log.read(9, everything)) == [(5, 9), (10, 14), (15, 19), (20, 24), (25, 29)]
    assert offsets_of(log.read(10, everything))[0] == (10, 14)  # segment boundary
    assert offsets_of(log.read(29, everything)) == [(25, 29)]
    assert log.read(30, everything) == []  # log end
    for bad in (31, 1_000, -1):
        with pytest.raises(OffsetOutOfRangeError) as info:
            log.read(bad, everything)
        assert str(bad) in str(info.value) and "[0, 30)" in str(info.value)


def test_read_below_the_log_start_offset_is_out_of_range():
    log = filled_log()
    log.maybe_increment_log_start_offset(12)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(11, 1 << 20)
    assert offsets_of(log.read(12, 1 << 20))[0] == (10, 14)


def test_max_bytes_stops_before_exceeding_but_returns_one_batch_with_min_one_batch():
    log = filled_log()
    size = batch().size_in_bytes
    assert offsets_of(log.read(0, size)) == [(0, 4)]
    assert offsets_of(log.read(0, 2 * size - 1)) == [(0, 4)]
    assert offsets_of(log.read(0, 3 * size)) == [(0, 4), (5, 9), (10, 14)]  # across a segment boundary
    assert offsets_of(log.read(5, 3 * size)) == [(5, 9), (10, 14), (15, 19)]
    assert offsets_of(log.read(0, 1)) == [(0, 4)]
    assert offsets_of(log.read(10, 0)) == [(10, 14)]
    assert log.read(0, size - 1, min_one_batch=False) == []
    assert offsets_of(log.read(0, size, min_one_batch=False)) == [(0, 4)]


def test_max_offset_acts_as_the_high_watermark():
    log = filled_log()
    everything = 1 << 30
    assert offsets_of(log.read(0, everything, max_offset=10)) == [(0, 4), (5, 9)]
    assert offsets_of(log.read(0, everything, max_offset=11)) == [(0, 4), (5, 9), (10, 14)]
    assert log.read(10, everything, max_offset=10) == []
    assert log.read(15, everything, max_offset=10) == []
    assert log.read(0, everything, max_offset=0) == []
    assert offsets_of(log.read(0, everything, max_offset=30)) == offsets_of(log.read(0, everything))


def test_reads_of_the_stored_batches_are_the_stored_objects():
    log = make_log()
    stored = log.append_as_leader(batch(), 0)
    assert log.read(0, 1 << 20)[0] is stored


# -- truncation -------------------------------------------------------------------------------------------------

def test_truncation_inside_a_batch_removes_the_whole_batch():
    log = filled_log()
    log.truncate_to(17)
    assert log.log_end_offset == 15
    assert offsets_of(log.read(0, 1 << 30))[-1] == (10, 14)
    assert [s.base_offset for s in log.segments] == [0, 10]
    assert log.append_as_leader(batch(), 1).base_offset == 15


def test_truncation_at_a_segment_boundary_drops_the_emptied_segment():
    log = filled_log()
    log.truncate_to(20)
    assert log.log_end_offset == 20
    assert [s.base_offset for s in log.segments] == [0, 10]
    log.truncate_to(12)
    assert log.log_end_offset == 10
    assert [s.base_offset for s in log.segments] == [0]
    assert log.append_as_leader(batch(), 0).base_offset == 10
    assert log.read(10, 1 << 20)[0].base_offset == 10


def test_truncation_to_zero_then_appending_starts_again_at_zero():
    log = filled_log()
    log.truncate_to(0)
    assert (log.log_start_offset, log.log_end_offset, log.size_in_bytes) == (0, 0, 0)
    assert len(log.segments) == 1
    assert log.read(0, 1 << 20) == []
    assert log.latest_epoch is None
    assert offsets_of([log.append_as_leader(batch(), 2) for _ in range(3)]) == [(0, 4), (5, 9), (10, 14)]
    assert log.leader_epoch_cache.epoch_entries() == [(2, 0)]


def test_truncation_at_or_past_the_end_removes_no_records():
    log = filled_log()
    for offset in (30, 31, 100):
        log.truncate_to(offset)
        assert log.log_end_offset == 30
    assert len(log.segments) == 3
    assert log.leader_epoch_cache.epoch_entries() == [(0, 0)]


@pytest.mark.parametrize("offset", [10, 11])
def test_truncation_at_or_past_the_end_drops_a_trailing_epoch_without_records(offset):
    """A replica that became leader of epoch 3 at offset 10 and lost leadership before appending keeps an entry
    (3, 10) that no record backs; Kafka's truncateTo drops it even when no record goes."""
    log = make_log()
    log.append_as_leader(batch(10), 0)
    log.leader_epoch_cache.assign(3, log.log_end_offset)  # what Partition.make_leader does
    assert log.leader_epoch_cache.epoch_entries() == [(0, 0), (3, 10)]
    log.truncate_to(offset)
    assert log.log_end_offset == 10
    assert log.latest_epoch == 0
    assert log.leader_epoch_cache.epoch_entries() == [(0, 0)]
    assert offsets_of(log.read(0, 1 << 20)) == [(0, 9)]


def test_truncation_trims_the_epoch_cache_from_the_end():
    log = make_log()
    for epoch in (1, 1, 2, 2, 5):
        log.append_as_leader(batch(), epoch)
    assert log.leader_epoch_cache.epoch_entries() == [(1, 0), (2, 10), (5, 20)]
    log.truncate_to(22)
    assert log.leader_epoch_cache.epoch_entries() == [(1, 0), (2, 10)]
    log.truncate_to(10)
    assert log.leader_epoch_cache.epoch_entries() == [(1, 0)]
    assert log.leader_epoch_cache.end_offset_for(1, log.log_end_offset) == (1, 10)
    log.append_as_leader(batch(), 6)
    assert log.leader_epoch_cache.epoch_entries() == [(1, 0), (6, 10)]


def test_truncation_below_the_first_segment_restarts_the_log_there():
    log = filled_log()
    log.maybe_increment_log_start_offset(20)
    log.delete_old_segments(log.log_end_offset)
    log.truncate_to(3)
    assert (log.log_start_offset, log.log_end_offset) == (3, 3)
    assert log.append_as_leader(batch(), 0).base_offset == 3


def test_truncate_fully_and_start_at():
    log = filled_log()
    log.truncate_fully_and_start_at(1_000)
    assert (log.log_start_offset, log.log_end_offset, log.size_in_bytes) == (1_000, 1_000, 0)
    assert [s.base_offset for s in log.segments] == [1_000]
    assert log.latest_epoch is None
    with pytest.raises(OffsetOutOfRangeError):
        log.read(999, 1 << 20)
    assert log.read(1_000, 1 << 20) == []
    log.append_as_follower(batch().with_offset(1_000, 7))
    assert offsets_of(log.read(1_000, 1 << 20)) == [(1_000, 1_004)]
    assert log.leader_epoch_cache.epoch_entries() == [(7, 1_000)]


# -- retention ----------------------------------------------------------------------------------------------------

def test_retention_by_time_uses_the_largest_timestamp_and_takes_the_active_segment_too():
    clock = FakeClock(now=10 * HOUR_MS)
    size = batch().size_in_bytes
    log = make_log(clock, segment_bytes=size, retention_ms=HOUR_MS)
    for ts in (1 * HOUR_MS, 2 * HOUR_MS, 9 * HOUR_MS + 1, 2 * HOUR_MS):
        log.append_as_leader(batch(timestamp=ts), 0)
    assert [s.base_offset for s in log.segments] == [0, 5, 10, 15]
    assert log.delete_old_segments(log.log_end_offset) == 2
    assert [s.base_offset for s in log.segments] == [10, 15]
    assert log.log_start_offset == 10
    with pytest.raises(OffsetOutOfRangeError):
        log.read(5, 1 << 20)
    clock.now = 100 * HOUR_MS
    assert log.delete_old_segments(log.log_end_offset) == 2  # the active one too, as Kafka's: one is rolled first
    assert [s.base_offset for s in log.segments] == [20]
    assert (log.log_start_offset, log.log_end_offset, log.size_in_bytes) == (20, 20, 0)
    assert log.delete_old_segments(log.log_end_offset) == 0  # an empty active segment stays
    assert log.append_as_leader(batch(), 0).base_offset == 20


def test_retention_never_passes_the_high_watermark():
    """Kafka's deletableSegments: a segment goes only once the high watermark has passed its end, so no record goes
    before it is committed (a follower may not have it yet) and the log start never passes the high watermark."""
    clock = FakeClock(now=100 * HOUR_MS)
    size = batch().size_in_bytes
    log = make_log(clock, segment_bytes=size, retention_ms=HOUR_MS)
    for _ in range(4):
        log.append_as_leader(batch(), 0)
    assert log.delete_old_segments(high_watermark=9) == 1  # [0, 5) is committed; [5, 10) is not all
    assert log.delete_old_segments(high_watermark=15) == 2
    assert log.delete_old_segments(high_watermark=19) == 0  # the active segment holds offset 19
    assert (log.log_start_offset, log.log_end_offset) == (15, 20)
    log.config = LogConfig(segment_bytes=size, retention_ms=-1, retention_bytes=0)
    log.maybe_increment_log_start_offset(17)
    assert log.delete_old_segments(high_watermark=19) == 0
    assert log.delete_old_segments(high_watermark=20) == 1
    assert (log.log_start_offset, log.log_end_offset) == (20, 20)


def test_retention_by_time_falls_back_to_the_last_append_without_timestamps():
    clock = FakeClock(now=10 * HOUR_MS)
    size = batch().size_in_bytes
    log = make_log(clock, segment_bytes=size, retention_ms=HOUR_MS)
    log.append_as_leader(batch(timestamps=[-1] * 5), 0)
    clock.now += HOUR_MS
    log.append_as_leader(batch(timestamps=[-1] * 5), 0)
    assert log.delete_old_segments(log.log_end_offset) == 0
    clock.now += 1
    assert log.delete_old_segments(log.log_end_offset) == 1
    log.append_as_leader(batch(timestamps=[-1] * 5), 0)  # the active segment, appended to at 11h + 1
    clock.now += HOUR_MS
    assert log.delete_old_segments(log.log_end_offset) == 1
    assert [s.base_offset for s in log.segments] == [10]
    clock.now += 1  # more than an hour after its last append: the active segment goes too
    assert log.delete_old_segments(log.log_end_offset) == 1
    assert (log.log_start_offset, log.log_end_offset) == (15, 15)


def test_unlimited_retention_keeps_everything():
    clock = FakeClock()
    log = filled_log(clock=clock, retention_ms=-1, retention_bytes=-1)
    clock.now = 10**15
    assert log.delete_old_segments(log.log_end_offset) == 0


def test_retention_by_bytes_deletes_oldest_while_the_rest_still_meets_the_limit():
    log = filled_log(batches=7, retention_ms=-1)  # 4 segments of 2, 2, 2, 1 batches
    size = batch().size_in_bytes
    log.config = LogConfig(segment_bytes=2 * size, retention_ms=-1, retention_bytes=3 * size)
    assert log.delete_old_segments(log.log_end_offset) == 2  # 7 -> 5 -> 3 batches
    assert [s.base_offset for s in log.segments] == [20, 30]
    assert log.log_start_offset == 20
    log.config = LogConfig(segment_bytes=2 * size, retention_ms=-1, retention_bytes=0)
    assert log.delete_old_segments(log.log_end_offset) == 2
    assert [s.base_offset for s in log.segments] == [35]
    assert log.log_start_offset == 35


def test_retention_truncates_the_epoch_cache_from_the_start():
    size = batch().size_in_bytes
    log = make_log(segment_bytes=size, retention_ms=-1, retention_bytes=0)
    for epoch in (1, 2, 2, 3):
        log.append_as_leader(batch(), epoch)
    assert log.delete_old_segments(high_watermark=15) == 3
    assert log.leader_epoch_cache.epoch_entries() == [(3, 15)]
    log2 = make_log(segment_bytes=size, retention_ms=-1, retention_bytes=0)
    for epoch in (1, 2, 2, 2):
        log2.append_as_leader(batch(), epoch)
    log2.delete_old_segments(high_watermark=15)
    assert log2.leader_epoch_cache.epoch_entries() == [(2, 15)]


def test_log_start_offset_moves_forward_only_and_frees_whole_segments():
    log = filled_log()
    log.maybe_increment_log_start_offset(7)
    log.maybe_increment_log_start_offset(3)
    assert log.log_start_offset == 7
    assert log.delete_old_segments(log.log_end_offset) == 0  # segment [0, 10) still holds offsets 7..9
    log.maybe_increment_log_start_offset(10)
    assert log.delete_old_segments(log.log_end_offset) == 1
    assert log.log_start_offset == 10
    with pytest.raises(OffsetOutOfRangeError):
        log.maybe_increment_log_start_offset(31)


# -- timestamps -----------------------------------------------------------------------------------------------

def test_fetch_offset_by_timestamp_across_segments():
    size = batch().size_in_bytes
    log = make_log(segment_bytes=2 * size)
    for start in (100, 200, 300, 400, 500, 600):
        log.append_as_leader(batch(timestamp=start), 0)
    assert log.fetch_offset_by_timestamp(0) == (0, 100)
    assert log.fetch_offset_by_timestamp(102) == (2, 102)
    assert log.fetch_offset_by_timestamp(105) == (5, 200)
    assert log.fetch_offset_by_timestamp(350) == (15, 400)  # in a later segment
    assert log.fetch_offset_by_timestamp(604) == (29, 604)
    assert log.fetch_offset_by_timestamp(605) is None


def test_fetch_offset_by_timestamp_with_non_monotonic_timestamps():
    log = make_log()
    log.append_as_leader(batch(timestamps=[50, 10, 70, 20]), 0)
    log.append_as_leader(batch(timestamps=[30, 90, 5]), 0)
    assert log.fetch_offset_by_timestamp(60) == (2, 70)
    assert log.fetch_offset_by_timestamp(80) == (5, 90)
    assert log.fetch_offset_by_timestamp(15) == (0, 50)
    assert log.fetch_offset_by_timestamp(91) is None


def test_fetch_offset_by_timestamp_skips_records_below_the_log_start_offset():
    log = make_log()
    log.append_as_leader(batch(timestamps=[10, 20, 30, 40]), 0)
    log.maybe_increment_log_start_offset(2)
    assert log.fetch_offset_by_timestamp(0) == (2, 30)


def test_fetch_offset_by_timestamp_decodes_only_the_batch_holding_the_answer(monkeypatch):
    log = make_log()
    for start in range(0, 1000, 100):
        log.append_as_leader(batch(timestamp=start), 0)
    decoded = []
    original = RecordBatch.records
    monkeypatch.setattr(RecordBatch, "records", lambda self: decoded.append(self.base_offset) or original(self))
    assert log.fetch_offset_by_timestamp(703) == (38, 703)
    assert decoded == [35]


def test_offset_of_max_timestamp_is_the_first_record_with_the_largest_timestamp_across_segments():
    size = batch().size_in_bytes
    log = make_log(segment_bytes=2 * size)
    log.append_as_leader(batch(timestamps=[50, 10, 70, 20]), 0)
    log.append_as_leader(batch(timestamps=[30, 90, 5]), 0)
    log.append_as_leader(batch(timestamps=[90, 40]), 0)  # the same largest timestamp, later: not the answer
    log.append_as_leader(batch(timestamps=[60]), 0)  # in a later segment, smaller
    assert len(log.segments) > 1
    assert log.offset_of_max_timestamp() == (5, 90)
    log.maybe_increment_log_start_offset(6)  # the first 90 is gone: the next one answers
    assert log.offset_of_max_timestamp() == (7, 90)


def test_offset_of_max_timestamp_is_none_when_the_largest_was_deleted():
    log = make_log()
    log.append_as_leader(batch(timestamps=[10, 90, 20]), 0)
    log.maybe_increment_log_start_offset(2)
    assert log.offset_of_max_timestamp() is None


def test_empty_log_answers_nothing():
    log = make_log()
    assert log.fetch_offset_by_timestamp(0) is None
    assert log.offset_of_max_timestamp() is None
    assert log.read(0, 100) == []
    assert log.delete_old_segments(0) == 0
    assert log.size_in_bytes == 0


def test_empty_logs_share_no_state_with_the_log_that_is_written():
    """Empty segments and epoch caches share immutable empties; writing one log must leave the others empty."""
    written, untouched = make_log(), make_log()
    written.append_as_leader(batch(3), leader_epoch=0)
    written.truncate_to(0)
    written.append_as_leader(batch(2), leader_epoch=1)
    assert offsets_of(written.read(0, 1 << 20)) == [(0, 1)]
    assert written.leader_epoch_cache.epoch_entries() == [(1, 0)]
    assert untouched.read(0, 1 << 20) == [] and untouched.size_in_bytes == 0
    assert untouched.leader_epoch_cache.epoch_entries() == []
    assert untouched.fetch_offset_by_timestamp(0) is None


# -- reads against a naive scan -----------------------------------------------------------------------------------

@settings(max_examples=200, deadline=None)
@given(sizes=st.lists(st.tuples(st.integers(1, 4), st.integers(0, 60)), min_size=1, max_size=25),
       segment_bytes=st.integers(50, 400), data=st.data())
def test_reads_match_a_naive_scan(sizes, segment_bytes, data):
    largest = max(batch(count, value_size=value_size).size_in_bytes for count, value_size in sizes)
    log = make_log(segment_bytes=max(segment_bytes, largest))  # a larger batch would be refused
    stored = [log.append_as_leader(batch(count, value_size=value_size), 0) for count, value_size in sizes]
    start = data.draw(st.integers(0, log.log_end_offset), label="start")
    max_bytes = data.draw(st.integers(0, 600), label="max_bytes")
    max_offset = data.draw(st.none() | st.integers(0, log.log_end_offset + 2), label="max_offset")
    min_one = data.draw(st.booleans(), label="min_one_batch")
    expected, used = [], 0
    for b in stored if max_offset is None or start < max_offset else []:
        if b.last_offset < start or (max_offset is not None and b.base_offset >= max_offset):
            continue
        if used + b.size_in_bytes > max_bytes and not (min_one and not expected):
            break
        expected.append(b)
        used += b.size_in_bytes
    assert log.read(start, max_bytes, max_offset=max_offset, min_one_batch=min_one) == expected
