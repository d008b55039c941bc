"""Integer configs hold Kafka's INT or LONG, as Kafka's ConfigDef parses them: a value past its type is refused
where it is given (a broker's startup, a CreateTopics or AlterConfigs request), in Kafka's words. It used to be
taken, and then failed what used it: every topic auto-created with `num.partitions=99999999999999`, or the
controller's write of a topic's config (UNKNOWN_SERVER_ERROR, with a traceback)."""

from __future__ import annotations

import re
from typing import Any

import pytest
import trio.testing

from kafkalite import Cluster
from kafkalite.client import Admin, NewTopic
from kafkalite.common.config import BrokerConfig, TopicConfig
from kafkalite.common.errors import InvalidConfigError

INT_MIN, INT_MAX = -(1 << 31), (1 << 31) - 1
LONG_MIN, LONG_MAX = -(1 << 63), (1 << 63) - 1


@pytest.mark.parametrize(("config", "values"), [
    (BrokerConfig, {"num.partitions": INT_MAX, "log.retention.hours": INT_MIN, "log.retention.ms": LONG_MAX,
                    "log.retention.bytes": str(LONG_MAX), "log.retention.minutes": str(INT_MAX)}),
    (TopicConfig, {"segment.bytes": str(INT_MAX), "retention.ms": LONG_MAX, "compression.zstd.level": -131072}),
])
def test_integers_up_to_the_ends_of_their_kafka_type_are_taken(config: type[Any], values: dict[str, Any]) -> None:
    assert config(values).overrides == {name: int(value) for name, value in values.items()}


@pytest.mark.parametrize(("config", "name", "value", "kind"), [
    (BrokerConfig, "num.partitions", "99999999999999", "INT (from -2147483648 to 2147483647)"),
    (BrokerConfig, "message.max.bytes", 99999999999, "INT"),
    (BrokerConfig, "log.retention.hours", INT_MIN - 1, "INT"),  # no lower bound of its own: -1 and below is never
    (BrokerConfig, "log.retention.minutes", str(INT_MAX + 1), "INT"),  # a nullable INT
    (BrokerConfig, "replica.lag.time.max.ms", str(LONG_MAX + 1),
     "LONG (from -9223372036854775808 to 9223372036854775807)"),
    (TopicConfig, "segment.bytes", INT_MAX + 1, "INT"),
    (TopicConfig, "retention.ms", LONG_MIN - 1, "LONG"),
])
def test_integers_past_their_kafka_type_are_refused_in_kafkas_words(config: type[Any], name: str, value: Any,
                                                                    kind: str) -> None:
    with pytest.raises(InvalidConfigError, match=re.escape(
            f"Invalid value {value!r} for configuration {name}: Not a number of type {kind}")):
        config({name: value})


async def test_a_topic_config_past_its_type_gets_invalid_config_from_the_admin_api(
        autojump_clock: trio.testing.MockClock) -> None:
    async with Cluster(brokers=1) as cluster, Admin(cluster) as admin:
        for name, value, kind in [("retention.ms", LONG_MAX + 1, "LONG"), ("segment.bytes", INT_MAX + 1, "INT")]:
            with pytest.raises(InvalidConfigError, match=f"configuration {name}: Not a number of type {kind}"):
                await admin.create_topics([NewTopic("huge", 1, 1, {name: str(value)})])
        assert "huge" not in await admin.list_topics()
        await admin.create_topics([NewTopic("kept", 1, 1, {"retention.ms": str(LONG_MAX)})])
        for incremental in (False, True):
            with pytest.raises(InvalidConfigError, match="configuration retention.ms: Not a number of type LONG"):
                await admin.alter_topic_configs({"kept": {"retention.ms": str(LONG_MAX + 1)}},
                                                incremental=incremental)
        configs = (await admin.describe_configs(topics=["kept"]))[("topic", "kept")]
        assert configs["retention.ms"].value == str(LONG_MAX)
