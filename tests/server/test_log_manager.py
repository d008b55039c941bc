"""The log settings a topic config gives, shared between logs, and the bound on what the process keeps of them."""

from __future__ import annotations

from kafkalite.common.config import TopicConfig
from kafkalite.server import log_manager
from kafkalite.server.log_manager import log_config_for


def test_equal_settings_share_one_config_and_the_process_keeps_a_bounded_number() -> None:
    """The table is the process's and outlives its clusters (a test suite starts hundreds), so it must not keep
    every distinct config ever made: a soak of five clusters with 100 retention changes each left 501."""
    first = log_config_for(TopicConfig({"retention.ms": 5000}))
    assert log_config_for(TopicConfig({"retention.ms": 5000})) is first
    for retention_ms in range(1, 3000):
        log_config_for(TopicConfig({"retention.ms": retention_ms}))
    assert len(log_manager._log_configs) <= 1024
    again = log_config_for(TopicConfig({"retention.ms": 2999}))
    assert again is log_config_for(TopicConfig({"retention.ms": 2999})) and again.retention_ms == 2999
