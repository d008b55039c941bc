"""Partition logs: segments, truncation, retention and the leader-epoch cache."""

from kafkalite.log.epoch_cache import UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET, LeaderEpochCache
from kafkalite.log.log import Log, LogConfig, UnexpectedAppendOffsetError
from kafkalite.log.segment import LogSegment

__all__ = [
    "UNDEFINED_EPOCH",
    "UNDEFINED_EPOCH_OFFSET",
    "LeaderEpochCache",
    "Log",
    "LogConfig",
    "LogSegment",
    "UnexpectedAppendOffsetError",
]
