import pytest

from kafkalite.common.config import BrokerConfig, TopicConfig
from kafkalite.common.errors import InvalidConfigError


def test_defaults_are_kafkas() -> None:
    config = BrokerConfig()
    assert config["min.insync.replicas"] == 1
    assert config["unclean.leader.election.enable"] is False
    assert config["replica.lag.time.max.ms"] == 30000
    assert config["leader.imbalance.per.broker.percentage"] == 10
    assert config["leader.imbalance.check.interval.seconds"] == 300
    assert config["log.segment.bytes"] == 1 << 30
    assert config["message.max.bytes"] == 1048588
    assert config["delete.topic.enable"] is True
    assert config["listeners"] == "NATIVE://127.0.0.1:0,KAFKA://127.0.0.1:0"
    assert config.session_timeout_ms == 18000


def test_strings_are_parsed_like_a_properties_file() -> None:
    config = BrokerConfig({"min.insync.replicas": "2", "unclean.leader.election.enable": "TRUE",
                           "broker.id": 3})
    assert config["min.insync.replicas"] == 2
    assert config["unclean.leader.election.enable"] is True
    assert config.broker_id == 3
    assert config.overrides == {"min.insync.replicas": 2, "unclean.leader.election.enable": True, "broker.id": 3}


def test_zookeeper_session_timeout_is_an_alias() -> None:
    config = BrokerConfig({"zookeeper.session.timeout.ms": 6000})
    assert config.session_timeout_ms == 6000
    assert config["zookeeper.session.timeout.ms"] == 6000


@pytest.mark.parametrize(("values", "named"), [
    ({"min.insync.replica": 2}, "min.insync.replica"),
    ({"min.insync.replicas": "two"}, "min.insync.replicas"),
    ({"min.insync.replicas": 0}, "min.insync.replicas"),
    ({"delete.topic.enable": "yes"}, "delete.topic.enable"),
    ({"num.partitions": True}, "num.partitions"),
    ({"leader.imbalance.per.broker.percentage": 101}, "leader.imbalance.per.broker.percentage"),
    ({"listeners": 9092}, "listeners"),
])
def test_bad_keys_and_values_name_the_key(values: dict, named: str) -> None:
    with pytest.raises(InvalidConfigError) as info:
        BrokerConfig(values)
    assert named in str(info.value)
    assert info.value.code == 40


def test_topic_config_takes_broker_defaults_and_overrides() -> None:
    broker = BrokerConfig({"min.insync.replicas": 2, "log.retention.ms": 1000})
    topic = TopicConfig.for_broker({"retention.ms": "5000"}, broker)
    assert topic["min.insync.replicas"] == 2
    assert topic["retention.ms"] == 5000
    assert topic.overrides == {"retention.ms": 5000}
    with pytest.raises(InvalidConfigError, match="segment.byte"):
        TopicConfig.for_broker({"segment.byte": 1}, broker)
    with pytest.raises(InvalidConfigError, match="cleanup.policy"):
        TopicConfig({"cleanup.policy": "shred"})
