"""Client configs take Kafka's names (or their Python spelling) and reject typos and bad values by name."""

import pytest

from kafkalite.client import Admin, Consumer, Producer
from kafkalite.client.transport import TcpTransport
from kafkalite.common.errors import InvalidConfigError

BOOTSTRAP = "127.0.0.1:9"  # never connected to: these tests only build clients


def test_kafka_names_and_keyword_spelling_are_the_same_key() -> None:
    producer = Producer(BOOTSTRAP, {"linger.ms": 7}, batch_size=100, acks="all")
    assert producer.config["linger.ms"] == 7 and producer.config["batch.size"] == 100
    assert producer.acks == -1 and producer.idempotent


@pytest.mark.parametrize(("acks", "parsed"), [("all", -1), (-1, -1), ("0", 0), (1, 1)])
def test_acks_spellings(acks: object, parsed: int) -> None:
    assert Producer(BOOTSTRAP, acks=acks).acks == parsed


@pytest.mark.parametrize(("client", "config", "named"), [
    (Producer, {"linger.msec": 1}, "linger.msec"),
    (Producer, {"batch.size": "big"}, "batch.size"),
    (Producer, {"acks": 2}, "acks"),
    (Producer, {"enable.idempotence": "yes"}, "enable.idempotence"),
    (Consumer, {"auto.offset.reset": "smallest"}, "auto.offset.reset"),
    (Consumer, {"max.poll.records": 0}, "max.poll.records"),
    (Consumer, {"partition.assignment.strategy": "fair"}, "partition.assignment.strategy"),
    (Consumer, {"session.timeout.ms": 0}, "session.timeout.ms"),
    (Admin, {"linger.ms": 5}, "linger.ms"),
])
def test_bad_configs_are_rejected_by_name(client: type, config: dict[str, object], named: str) -> None:
    with pytest.raises(InvalidConfigError, match=named.replace(".", r"\.")):
        client(BOOTSTRAP, config)


def test_a_heartbeat_must_come_within_the_session() -> None:
    """As Kafka's consumer: else the member would be dropped from its group between two heartbeats."""
    with pytest.raises(InvalidConfigError, match=r"heartbeat\.interval\.ms \(3000\) must be lower than "
                                                 r"session\.timeout\.ms \(3000\)"):
        Consumer(BOOTSTRAP, {"session.timeout.ms": 3000})
    assert Consumer(BOOTSTRAP, {"session.timeout.ms": 3000, "heartbeat.interval.ms": 1000}).config[
        "heartbeat.interval.ms"] == 1000


def test_one_setting_given_in_both_spellings_is_refused() -> None:
    """Python's keyword spelling and Kafka's: which was meant? The later one won, silently."""
    with pytest.raises(InvalidConfigError, match="'linger.ms' and 'linger_ms' both set producer config linger.ms"):
        Producer(BOOTSTRAP, {"linger.ms": 5, "linger_ms": 50})
    with pytest.raises(InvalidConfigError, match="both set consumer config max.poll.records"):
        Consumer(BOOTSTRAP, {"max.poll.records": 5}, max_poll_records=50)


def test_idempotence_yields_to_acks_unless_asked_for() -> None:
    assert not Producer(BOOTSTRAP, acks=1).idempotent
    with pytest.raises(InvalidConfigError, match="enable.idempotence"):
        Producer(BOOTSTRAP, {"acks": 1, "enable.idempotence": True})


def test_delivery_timeout_must_cover_linger_and_one_request() -> None:
    with pytest.raises(InvalidConfigError, match=r"delivery\.timeout\.ms \(1000\) should be equal to or larger "
                                                 r"than linger\.ms \+ request\.timeout\.ms \(5 \+ 30000\)"):
        Producer(BOOTSTRAP, {"delivery.timeout.ms": 1000})
    assert Producer(BOOTSTRAP, {"delivery.timeout.ms": 1000, "request.timeout.ms": 995})._delivery_timeout_s == 1.0


def test_bootstrap_must_be_a_cluster_or_servers() -> None:
    assert isinstance(Producer(BOOTSTRAP)._transport, TcpTransport)
    with pytest.raises(ValueError, match="host:port"):
        Consumer("localhost")
    with pytest.raises(TypeError):
        Admin(42)  # type: ignore[arg-type]


def test_metadata_max_age_is_kafkas_for_every_client() -> None:
    for client in (Producer, Consumer, Admin):
        assert client(BOOTSTRAP).config["metadata.max.age.ms"] == 300000
        assert client(BOOTSTRAP, metadata_max_age_ms=1000).config["metadata.max.age.ms"] == 1000
        with pytest.raises(InvalidConfigError, match=r"metadata\.max\.age\.ms"):
            client(BOOTSTRAP, {"metadata.max.age.ms": -1})


def test_metadata_max_idle_is_kafkas_for_the_producer() -> None:
    """KIP-526: how long the producer keeps asking for a topic it no longer sends to; at least 5 s, as in Kafka."""
    assert Producer(BOOTSTRAP).config["metadata.max.idle.ms"] == 300000
    assert Producer(BOOTSTRAP, metadata_max_idle_ms=5000).config["metadata.max.idle.ms"] == 5000
    with pytest.raises(InvalidConfigError, match=r"metadata\.max\.idle\.ms.*at least 5000"):
        Producer(BOOTSTRAP, {"metadata.max.idle.ms": 4999})
