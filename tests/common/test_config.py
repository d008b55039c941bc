import pytest

from kafkalite.common.config import BrokerConfig, ConfigOp, TopicConfig
from kafkalite.common.errors import InvalidConfigError, InvalidRequestError


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
    ({"producer.id.expiration.ms": 0}, "producer.id.expiration.ms"),
    ({"producer.id.expiration.check.interval.ms": "soon"}, "producer.id.expiration.check.interval.ms"),
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


@pytest.mark.parametrize(("given", "retention_ms", "segment_ms"), [
    ({}, 7 * 24 * 3_600_000, 7 * 24 * 3_600_000),
    ({"log.retention.hours": "1"}, 3_600_000, 7 * 24 * 3_600_000),  # as Kafka's sample server.properties gives it
    ({"log.retention.minutes": 5, "log.retention.hours": 1}, 300_000, 7 * 24 * 3_600_000),
    ({"log.retention.ms": 7, "log.retention.minutes": 5}, 7, 7 * 24 * 3_600_000),
    ({"log.retention.hours": -1}, -1, 7 * 24 * 3_600_000),  # negative: unlimited
    ({"log.roll.hours": 2, "log.retention.minutes": -5}, -1, 7_200_000),
    ({"log.roll.ms": 10, "log.roll.hours": 2}, 7 * 24 * 3_600_000, 10),
])
def test_retention_and_roll_times_in_hours_and_minutes_take_kafkas_precedence(given: dict, retention_ms: int,
                                                                              segment_ms: int) -> None:
    """They were unknown broker configs, so a server.properties copied from Kafka's (log.retention.hours=168)
    did not start a cluster."""
    topic = TopicConfig.for_broker({}, BrokerConfig(given))
    assert (topic["retention.ms"], topic["segment.ms"]) == (retention_ms, segment_ms)


def test_incremental_ops_change_only_the_properties_they_name() -> None:
    """KIP-339's four operations on a topic's overrides; what is not named keeps its override, and APPEND and
    SUBTRACT start from the default when the list property has no override."""
    topic = TopicConfig.for_broker({"retention.ms": 5000, "segment.ms": 60000}, BrokerConfig())
    altered = topic.altered([("retention.ms", ConfigOp.SET, "7000"), ("segment.ms", ConfigOp.DELETE, None),
                             ("cleanup.policy", ConfigOp.APPEND, "delete")])
    assert altered == {"retention.ms": "7000", "cleanup.policy": "delete"}
    assert TopicConfig(altered).overrides == {"retention.ms": 7000, "cleanup.policy": "delete"}
    assert topic.overrides == {"retention.ms": 5000, "segment.ms": 60000}  # the config itself is unchanged
    assert topic.altered([("max.message.bytes", ConfigOp.DELETE, None)]) == topic.overrides
    assert TopicConfig({"cleanup.policy": " delete "})["cleanup.policy"] == "delete"
    emptied = TopicConfig().altered([("cleanup.policy", ConfigOp.SUBTRACT, "delete")])
    assert emptied == {"cleanup.policy": ""}
    with pytest.raises(InvalidConfigError, match="cleanup.policy: must be a list of one or more of delete, compact"):
        TopicConfig(emptied)
    both = TopicConfig(TopicConfig().altered([("cleanup.policy", ConfigOp.APPEND, "compact")]))
    assert (both["cleanup.policy"], both.delete, both.compact) == ("delete,compact", True, True)
    compacted = TopicConfig(both.altered([("cleanup.policy", ConfigOp.SUBTRACT, "delete")]))
    assert (compacted["cleanup.policy"], compacted.delete, compacted.compact) == ("compact", False, True)


@pytest.mark.parametrize(("ops", "error", "message"), [
    ([("retention.mss", ConfigOp.SET, "1")], InvalidConfigError, "Unknown topic config name: retention.mss"),
    ([("retention.mss", ConfigOp.DELETE, None)], InvalidConfigError, "Unknown topic config name: retention.mss"),
    ([("retention.ms", ConfigOp.APPEND, "1")], InvalidConfigError,
     "Config value append is not allowed for config key: retention.ms, which is not a list"),
    ([("retention.ms", ConfigOp.SUBTRACT, "1")], InvalidConfigError, "Config value subtract is not allowed"),
    ([("retention.ms", ConfigOp.SET, "1"), ("retention.ms", ConfigOp.DELETE, None)], InvalidRequestError,
     "duplicate config keys: retention.ms"),
    ([("retention.ms", 7, "1")], InvalidRequestError, "Unknown operation 7 for configuration retention.ms"),
    ([("retention.ms", ConfigOp.SET, None)], InvalidRequestError,
     r"Null value not supported for configuration retention.ms \(SET\)"),
    ([("cleanup.policy", ConfigOp.APPEND, None)], InvalidRequestError, "Null value not supported"),
])
def test_bad_incremental_ops_name_the_property(ops: list, error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        TopicConfig().altered(ops)


@pytest.mark.parametrize("values", [
    {"replica.lag.time.max.ms": 300},  # below the default wait, 500 ms
    {"replica.fetch.wait.max.ms": 40_000},  # above the default lag time, 30 s
])
def test_a_follower_may_not_wait_at_its_leader_longer_than_it_may_lag(values: dict[str, int]) -> None:
    """Kafka's KafkaConfig refuses it in these words: an idle partition's follower parked at its leader for longer
    than the lag time would leave the ISR and rejoin it over and over."""
    with pytest.raises(InvalidConfigError, match=r"replica.fetch.wait.max.ms \(\d+\) should always be less than or "
                                                 r"equal to replica.lag.time.max.ms \(\d+\) to prevent frequent "
                                                 r"changes in ISR"):
        BrokerConfig(values)
    taken = BrokerConfig({**values, "replica.fetch.wait.max.ms": 300, "replica.lag.time.max.ms": 300})
    assert (taken["replica.fetch.wait.max.ms"], taken["replica.lag.time.max.ms"]) == (300, 300)
