"""Offset planning without Spark or a cluster: read limits and minPartitions splits, exact to the record."""

from __future__ import annotations

import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkalite.common.types import TopicPartition
from kafkalite.spark.planning import OffsetRange, from_json, rate_limit, split, to_json

pytestmark = pytest.mark.spark

TPS = [TopicPartition("t", p) for p in range(4)]


@given(st.lists(st.tuples(st.integers(0, 1000), st.integers(0, 5000)), min_size=1, max_size=4),
       st.integers(1, 20_000))
def test_rate_limit_admits_exactly_the_limit_or_the_backlog(bounds: list[tuple[int, int]], max_rows: int) -> None:
    start = {tp: begin for tp, (begin, _) in zip(TPS, bounds)}
    latest = {tp: begin + lag for tp, (begin, lag) in zip(TPS, bounds)}
    end = rate_limit(start, latest, max_rows)
    assert all(start[tp] <= end[tp] <= latest[tp] for tp in start)
    assert sum(end[tp] - start[tp] for tp in start) == min(max_rows, sum(lag for _, lag in bounds))


def test_rate_limit_shares_in_proportion_to_backlog() -> None:
    start = dict.fromkeys(TPS[:2], 0)
    assert rate_limit(start, {TPS[0]: 300, TPS[1]: 100}, 100) == {TPS[0]: 75, TPS[1]: 25}


@given(st.lists(st.tuples(st.integers(0, 1000), st.integers(1, 5000)), min_size=1, max_size=4),
       st.integers(1, 30))
def test_split_covers_each_range_without_gaps_or_overlaps(bounds: list[tuple[int, int]], min_partitions: int) -> None:
    ranges = [OffsetRange("t", p, begin, begin + size) for p, (begin, size) in enumerate(bounds)]
    parts = split(ranges, min_partitions)
    for r in ranges:
        mine = [part for part in parts if part.partition == r.partition]
        assert mine[0].start == r.start and mine[-1].end == r.end
        assert all(a.end == b.start and a.size > 0 for a, b in zip(mine, mine[1:]))
    if sum(r.size for r in ranges) >= min_partitions * 2:
        assert len(parts) >= min(min_partitions, len(ranges)) and len(parts) >= len(ranges)


@given(st.lists(st.tuples(st.integers(0, 1000), st.integers(1, 5000)), min_size=1, max_size=4),
       st.integers(1, 2000), st.none() | st.integers(1, 30))
def test_max_records_per_partition_cuts_every_range_to_at_most_that_many(
        bounds: list[tuple[int, int]], max_records: int, min_partitions: int | None) -> None:
    """maxRecordsPerPartition first (ceil(size / max) near-equal pieces), then minPartitions, as in Spark."""
    ranges = [OffsetRange("t", p, begin, begin + size) for p, (begin, size) in enumerate(bounds)]
    parts = split(ranges, min_partitions, max_records)
    for r in ranges:
        mine = [part for part in parts if part.partition == r.partition]
        assert mine[0].start == r.start and mine[-1].end == r.end
        assert all(a.end == b.start for a, b in zip(mine, mine[1:]))
        assert all(0 < part.size <= max_records for part in mine)
        assert len(mine) >= -(-r.size // max_records)


def test_max_records_per_partition_alone_and_with_min_partitions() -> None:
    ranges = [OffsetRange("t", 0, 0, 1000), OffsetRange("t", 1, 0, 100)]
    assert [(r.partition, r.start, r.end) for r in split(ranges, None, 400)] == \
        [(0, 0, 333), (0, 333, 666), (0, 666, 1000), (1, 0, 100)]
    assert len(split(ranges, 8, 400)) == 7  # partition 1 stays whole; the 3 pieces share 7: 2 parts each


@pytest.mark.parametrize("sizes, min_partitions, max_records, expected", [
    ([1000, 3], 3, None, [(0, 0, 500), (0, 500, 1000), (1, 0, 3)]),
    ([1000, 3], 10, None, [(0, 111 * i, 111 * (i + 1)) for i in range(8)] + [(0, 888, 1000), (1, 0, 3)]),
    ([1000] + [1] * 9, 20, None, 20),
    ([5000] + [10] * 30, 40, None, 40),
    ([50, 50], 5, None, [(p, start, end) for p in range(2) for start, end in [(0, 16), (16, 33), (33, 50)]]),
    ([9000, 900, 10], 6, 3000, 5),
    ([9000, 900, 10], 7, 3000, 8),
    ([3], 3, 2, [(0, 0, 1), (0, 1, 3)]),  # its piece of 1 stays whole, and so, in Spark, does the piece of 2
])
def test_min_partitions_splits_as_spark_kafka_offset_range_calculator(
        sizes: list[int], min_partitions: int, max_records: int | None,
        expected: int | list[tuple[int, int, int]]) -> None:
    """The tasks Spark's getRanges makes (SPARK-36576): ranges whose share of minPartitions rounds to one stay whole
    and the rest share what is left, rounding half up (50 of 100 records with 5 partitions: 2.5, so 3 parts). The
    older formula made 4, 11, 29, 68, 4, 8, 8 and 3 tasks."""
    ranges = [OffsetRange("t", p, 0, size) for p, size in enumerate(sizes)]
    parts = [(r.partition, r.start, r.end) for r in split(ranges, min_partitions, max_records)]
    assert (len(parts) if isinstance(expected, int) else parts) == expected


def test_offsets_round_trip_through_checkpoint_json() -> None:
    offsets = {TopicPartition("a", 0): 5, TopicPartition("a", 10): 7, TopicPartition("b", 1): 0}
    assert to_json(offsets) == {"a": {"0": 5, "10": 7}, "b": {"1": 0}}
    assert from_json(to_json(offsets)) == offsets


def test_planning_loads_neither_the_read_path_nor_the_sink() -> None:
    """Spark imports the source afresh in a new process for every query's planning, before its first micro-batch;
    the modules only executors' reads (pyarrow.compute, the consumer's Arrow path) and writes need stay out."""
    heavy = ["pyarrow.compute", "kafkalite.spark.records", "kafkalite.spark.sink"]
    script = f"import sys, kafkalite.spark; print([name for name in {heavy!r} if name in sys.modules])"
    loaded = subprocess.run([sys.executable, "-c", script], check=True, capture_output=True, text=True).stdout
    assert loaded.strip() == "[]"

