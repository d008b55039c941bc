"""Offset ranges: how a micro-batch or a batch read divides into Spark partitions, and how much it admits.

Pure functions of offsets, so the rules users rely on (no micro-batch above maxOffsetsPerTrigger, contiguous
ranges per partition, ranges split for minPartitions without gaps or overlaps) are tested without Spark or a
cluster. Offsets travel through Spark's checkpoint as JSON, where dict keys are strings:
`{"orders": {"0": 123}}`, the shape Spark's Kafka source writes. Offsets a query still had to read that are
gone are data loss, which both planning and reading report.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pyspark.sql.datasource import InputPartition

from kafkalite.common.types import TopicPartition

if TYPE_CHECKING:
    from kafkalite.spark.options import SourceOptions

log = logging.getLogger(__name__)

Offsets = dict[TopicPartition, int]


@dataclass(frozen=True)
class OffsetRange(InputPartition):
    """Records `start` (inclusive) to `end` (exclusive) of one partition: one Spark task reads exactly these."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return self.end - self.start


def to_json(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    nested: dict[str, dict[str, int]] = {}
    for tp, offset in sorted(offsets.items()):
        nested.setdefault(tp.topic, {})[str(tp.partition)] = offset
    return nested


def from_json(nested: Mapping[str, Mapping[str, int]]) -> Offsets:
    return {TopicPartition(topic, int(partition)): offset
            for topic, partitions in nested.items() for partition, offset in partitions.items()}


def available(start: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int]) -> int:
    """Records between `start` and `latest`, over every partition of `latest`."""
    return sum(max(0, offset - start[tp]) for tp, offset in latest.items())


def rate_limit(start: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int], max_rows: int) -> Offsets:
    """End offsets admitting at most `max_rows` records, shared out in proportion to each partition's backlog.

    Each partition gets the floor of its share, and the rows that rounding leaves over go one each to the
    partitions with the largest remainders, so a batch holds exactly min(`max_rows`, backlog) records and even a
    limit smaller than the number of partitions moves forward. (Spark's Kafka source rounds small shares up, which
    can exceed the limit.)
    """
    backlog = {tp: max(0, offset - start[tp]) for tp, offset in latest.items()}
    total = sum(backlog.values())
    if total <= max_rows:
        return dict(latest)
    taken = {tp: lag * max_rows // total for tp, lag in backlog.items()}
    remainders = {tp: lag * max_rows % total for tp, lag in backlog.items()}  # integers: no rounding surprises
    left = max_rows - sum(taken.values())
    for tp in sorted(remainders, key=lambda tp: (-remainders[tp], tp))[:left]:
        taken[tp] += 1
    return {tp: start[tp] + taken[tp] if backlog[tp] else latest[tp] for tp in latest}


def split(ranges: list[OffsetRange], min_partitions: int | None,
          max_records: int | None = None) -> list[OffsetRange]:
    """`ranges` cut into Spark partitions exactly as Spark's KafkaOffsetRangeCalculator.getRanges cuts them, so a
    pipeline gets the same tasks under either source.

    maxRecordsPerPartition first gives each range ceil(size / max_records) pieces. Then, if that leaves fewer
    pieces than minPartitions, the pieces whose share of minPartitions rounds to one stay whole, and the other
    pieces share what is left of minPartitions in proportion to their size (SPARK-36576): without setting the
    small ones aside, their records diluted the large ones' share while they took a task each anyway. Spark sets
    a piece aside by its Kafka partition, so one small piece keeps every piece of its partition whole. Shares
    round half up, as Scala's math.round does (Python's round() rounds half to even).
    """
    if max_records is not None:
        ranges = [piece for r in ranges for piece in _cut(r, -(-r.size // max_records))]
    if min_partitions is None or len(ranges) >= min_partitions:
        return ranges
    total = sum(r.size for r in ranges)
    whole = [r for r in ranges if _share(r.size, total, min_partitions) == 1]
    whole_partitions = {(r.topic, r.partition) for r in whole}
    rest_total = total - sum(r.size for r in whole)
    rest_min_partitions = max(min_partitions - len(whole), 1)
    return [piece for r in ranges for piece in _cut(
        r, 1 if (r.topic, r.partition) in whole_partitions else _share(r.size, rest_total, rest_min_partitions))]


def _share(size: int, total: int, min_partitions: int) -> int:
    """Spark's getPartCount, max(math.round(size.toDouble / total * minPartitions), 1), in the same doubles. Java
    rounds x to floor(x), plus one if the fraction left is at least a half: floor(x + 0.5) errs on the double
    just below 0.5."""
    share = size / total * min_partitions
    whole = math.floor(share)
    return max(whole + (share - whole >= 0.5), 1)


def _cut(r: OffsetRange, parts: int) -> list[OffsetRange]:
    """`r` in `parts` pieces as Spark's getDividedPartition cuts it: each takes what is left divided by the pieces
    left, so the larger pieces come last (10 in 3: 3, 3, 4). Spark then drops empty pieces; cutting no more pieces
    than records gives the same pieces without looping over a minPartitions of millions."""
    parts = min(parts, r.size)
    pieces = []
    start, left = r.start, r.size
    for part in range(parts):
        end = start + left // (parts - part)
        pieces.append(OffsetRange(r.topic, r.partition, start, end))
        left -= end - start
        start = end
    return pieces


class DataLossError(RuntimeError):
    """Records a query still had to read are gone (retention, a deleted topic), and failOnDataLoss is true."""


def report_data_loss(options: SourceOptions, message: str) -> None:
    """Fail with `message` under failOnDataLoss=true (the default), or log it and go on, as Spark's Kafka source."""
    if options.fail_on_data_loss:
        raise DataLossError(f"{message}. Some data may have been lost because they are not available in the cluster "
                            "any more (retention, or a deleted topic). Set failOnDataLoss=false to skip them "
                            "instead of failing the query.")
    log.warning("%s; skipped, as failOnDataLoss is false", message)
