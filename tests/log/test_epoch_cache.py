"""The leader-epoch cache against brute-force models: a list scan of KIP-279's rule, and the log itself."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalite.common.records import Record, RecordBatch
from kafkalite.log import UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET, Log, LogConfig

UNDEFINED = (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)


class NaiveCache:
    """The cache's contract written as plainly as possible: a list of entries, scanned."""

    def __init__(self) -> None:
        self.entries: list[tuple[int, int]] = []

    def assign(self, epoch: int, offset: int) -> None:
        if self.entries and self.entries[-1][0] == epoch and offset >= self.entries[-1][1]:
            return
        self.entries = [(e, o) for e, o in self.entries if e < epoch and o < offset]
        self.entries.append((epoch, offset))

    def truncate_from_end(self, end_offset: int) -> None:
        self.entries = [(e, o) for e, o in self.entries if o < end_offset]

    def truncate_from_start(self, start_offset: int) -> None:
        before = [(e, o) for e, o in self.entries if o <= start_offset]
        if before:
            self.entries = [(before[-1][0], start_offset)] + [(e, o) for e, o in self.entries if o > start_offset]

    def end_offset_for(self, requested: int, log_end_offset: int) -> tuple[int, int]:
        if requested == UNDEFINED_EPOCH or not self.entries:
            return UNDEFINED
        if requested == self.entries[-1][0]:
            return requested, log_end_offset
        higher = [(e, o) for e, o in self.entries if e > requested]
        lower_or_equal = [(e, o) for e, o in self.entries if e <= requested]
        if not higher:
            return UNDEFINED
        if not lower_or_equal:
            return requested, higher[0][1]
        return lower_or_equal[-1][0], higher[0][1]


operations = st.lists(st.one_of(
    st.tuples(st.just("assign"), st.integers(0, 12), st.integers(0, 60)),
    st.tuples(st.just("truncate_from_end"), st.integers(0, 60)),
    st.tuples(st.just("truncate_from_start"), st.integers(0, 60)),
), max_size=40)


@settings(max_examples=300, deadline=None)
@given(operations)
def test_cache_matches_the_naive_model(ops):
    cache, model = Log().leader_epoch_cache, NaiveCache()
    for op, *args in ops:
        getattr(cache, op)(*args)
        getattr(model, op)(*args)
        entries = cache.epoch_entries()
        assert entries == model.entries
        assert all(a[0] < b[0] and a[1] < b[1] for a, b in zip(entries, entries[1:]))
        assert cache.latest_epoch == (entries[-1][0] if entries else None)
        leo = max([o for _, o in entries], default=0) + 3
        for requested in range(-1, 15):
            assert cache.end_offset_for(requested, leo) == model.end_offset_for(requested, leo)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(
    st.tuples(st.just("append"), st.integers(0, 2), st.integers(1, 4)),
    st.tuples(st.just("truncate"), st.integers(0, 40)),
), max_size=30))
def test_end_offset_for_matches_the_epochs_written_in_the_log(ops):
    """The log labels every offset with the epoch that wrote it; the cache must answer from those labels.

    An epoch's end offset is the first offset written in a later epoch: the point a follower in that epoch
    must truncate to.
    """
    log = Log(LogConfig(segment_bytes=200), clock_ms=lambda: 0)
    labels: list[int] = []
    epoch = 0
    for op, *args in ops:
        if op == "append":
            bump, count = args
            epoch += bump
            stored = log.append_as_leader(RecordBatch.from_records([Record(None, b"x")] * count), epoch)
            labels.extend([epoch] * stored.record_count)
        else:
            log.truncate_to(args[0])
            del labels[log.log_end_offset:]
        assert len(labels) == log.log_end_offset
        for requested in range(-1, epoch + 3):
            assert log.leader_epoch_cache.end_offset_for(requested, log.log_end_offset) == \
                expected_end_offset(labels, requested)


def expected_end_offset(labels: list[int], requested: int) -> tuple[int, int]:
    if requested == UNDEFINED_EPOCH or not labels:
        return UNDEFINED
    if requested == labels[-1]:
        return requested, len(labels)
    if requested > labels[-1]:
        return UNDEFINED
    end = next(offset for offset, epoch in enumerate(labels) if epoch > requested)
    floor = [epoch for epoch in labels if epoch <= requested]
    return (floor[-1] if floor else requested), end


def test_end_offset_for_examples():
    cache = Log().leader_epoch_cache
    assert cache.end_offset_for(0, 10) == UNDEFINED
    for epoch, offset in [(2, 5), (4, 10), (7, 20)]:
        cache.assign(epoch, offset)
    assert cache.end_offset_for(7, 25) == (7, 25)  # the latest epoch ends at the log end
    assert cache.end_offset_for(4, 25) == (4, 20)
    assert cache.end_offset_for(5, 25) == (4, 20)  # an unknown epoch: the largest known below it
    assert cache.end_offset_for(2, 25) == (2, 10)
    assert cache.end_offset_for(1, 25) == (1, 5)  # below every entry: where known history starts
    assert cache.end_offset_for(8, 25) == UNDEFINED
    assert cache.end_offset_for(UNDEFINED_EPOCH, 25) == UNDEFINED


def test_assign_is_idempotent_for_the_latest_epoch_and_drops_conflicting_entries():
    cache = Log().leader_epoch_cache
    cache.assign(1, 0)
    cache.assign(1, 5)
    assert cache.epoch_entries() == [(1, 0)]
    cache.assign(2, 10)
    cache.assign(3, 20)
    cache.assign(4, 15)  # a new epoch at an offset below epoch 3's start removes epoch 3
    assert cache.epoch_entries() == [(1, 0), (2, 10), (4, 15)]
    cache.assign(4, 12)  # the same epoch moving earlier replaces it
    assert cache.epoch_entries() == [(1, 0), (2, 10), (4, 12)]
    with pytest.raises(ValueError):
        cache.assign(-1, 0)


def test_truncation_from_both_ends_and_clear():
    cache = Log().leader_epoch_cache
    for epoch, offset in [(1, 0), (2, 10), (3, 20)]:
        cache.assign(epoch, offset)
    cache.truncate_from_start(15)
    assert cache.epoch_entries() == [(2, 15), (3, 20)]
    cache.truncate_from_start(5)
    assert cache.epoch_entries() == [(2, 15), (3, 20)]
    cache.truncate_from_end(20)
    assert cache.epoch_entries() == [(2, 15)]
    cache.truncate_from_end(100)
    assert cache.epoch_entries() == [(2, 15)]
    cache.clear()
    assert cache.epoch_entries() == [] and cache.latest_epoch is None
