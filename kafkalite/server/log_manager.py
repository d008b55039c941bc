"""LogManager: the broker's logs, one per hosted TopicPartition, and their high-watermark checkpoints.

The cluster creates one LogManager per broker id and keeps it across restarts, as a Kafka broker keeps its
log directories: a restarted broker finds its logs and the high watermarks it last checkpointed, so its first
truncation as a follower starts from what it really had, not from an empty disk.
"""

from __future__ import annotations

import logging

import trio

from kafkalite.common.clock import now_ms
from kafkalite.common.config import BrokerConfig, TopicConfig
from kafkalite.common.types import TopicPartition
from kafkalite.log import Log, LogConfig
from kafkalite.network.transport import PauseGate

log = logging.getLogger(__name__)

_log_configs: dict[LogConfig, LogConfig] = {}
_MAX_SHARED_LOG_CONFIGS = 1024
"""Distinct log configs kept for sharing: the table is the process's, outliving its clusters, so it starts over
past this many (the logs keep the objects they hold)."""
_last_log_config: tuple[TopicConfig | None, LogConfig] = (None, LogConfig())


def log_config_for(topic_config: TopicConfig) -> LogConfig:
    """The log settings of a topic config. Equal settings give the same (immutable) object, so the logs of a
    cluster share the few distinct configs there are instead of holding one each. A LeaderAndIsr's new
    partitions of one topic share one topic config object, so the last answer is kept by that object's
    identity: creating a 10,000-partition topic asked the same question 30,000 times."""
    global _last_log_config
    last_topic_config, last = _last_log_config
    if last_topic_config is topic_config:
        return last
    deletes = topic_config.delete  # a compacted topic's retention deletes nothing, as Kafka's deleteOldSegments
    config = LogConfig(segment_bytes=topic_config["segment.bytes"], segment_ms=topic_config["segment.ms"],
                       retention_ms=topic_config["retention.ms"] if deletes else -1,
                       retention_bytes=topic_config["retention.bytes"] if deletes else -1,
                       max_message_bytes=topic_config["max.message.bytes"])
    if len(_log_configs) >= _MAX_SHARED_LOG_CONFIGS and config not in _log_configs:
        _log_configs.clear()
    config = _log_configs.setdefault(config, config)
    _last_log_config = (topic_config, config)
    return config


class LogManager:
    """Owns the logs of one broker id; outlives any one incarnation of the broker."""

    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self._logs: dict[TopicPartition, Log] = {}
        self._high_watermarks: dict[TopicPartition, int] = {}

    def get_log(self, tp: TopicPartition) -> Log | None:
        return self._logs.get(tp)

    def get_or_create_log(self, tp: TopicPartition, topic_config: TopicConfig, created_ms: int | None = None) -> Log:
        existing = self._logs.get(tp)
        if existing is not None:
            # A log kept across the broker's restart: the topic's config may have changed while the broker
            # was down, and the config read now rules, as when Kafka loads its logs at startup
            existing.config = log_config_for(topic_config)
            return existing
        created = Log(log_config_for(topic_config), clock_ms=now_ms, name=str(tp), created_ms=created_ms)
        self._logs[tp] = created
        return created

    def delete_log(self, tp: TopicPartition) -> None:
        self._logs.pop(tp, None)
        self._high_watermarks.pop(tp, None)

    @property
    def logs(self) -> dict[TopicPartition, Log]:
        return dict(self._logs)

    @property
    def log_dir(self) -> str:
        """The name of the broker's one log directory, as DescribeLogDirs reports it: the logs live in memory."""
        return f"memory:broker-{self.config['broker.id']}"

    # -- the high-watermark checkpoint (Kafka's replication-offset-checkpoint file) -------------------------------

    def checkpointed_high_watermark(self, tp: TopicPartition) -> int:
        return self._high_watermarks.get(tp, 0)

    def checkpoint_high_watermark(self, tp: TopicPartition, high_watermark: int) -> None:
        self._high_watermarks[tp] = high_watermark

    # -- retention ------------------------------------------------------------------------------------------------

    async def run_retention(self, gate: PauseGate) -> None:
        """Delete expired segments every log.retention.check.interval.ms, each log up to its replica's high
        watermark; runs inside the broker's nursery, so it dies with it."""
        while True:
            await trio.sleep(self.config["log.retention.check.interval.ms"] / 1000)
            await gate.checkpoint()
            for tp, partition_log in list(self._logs.items()):
                try:
                    partition_log.delete_old_segments(self.checkpointed_high_watermark(tp))
                except Exception:
                    log.exception("retention failed for %s", tp)
