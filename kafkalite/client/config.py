"""Client configuration with the Java client's property names, types and defaults.

Code moving between kafkalite and Apache Kafka keeps its configs, so the keys are Kafka's (`linger.ms`,
`max.poll.records`); each also answers to its Python spelling (`linger_ms`) so it can be passed as a keyword.
An unknown key or a value of the wrong type raises InvalidConfigError (a KafkaError, code INVALID_CONFIG)
naming the key: a typo silently ignored would be a test checking nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafkalite.client.assignors import ASSIGNORS
from kafkalite.common.config import ConfigKey, _Config, _keys
from kafkalite.common.errors import InvalidConfigError

_INT_MAX = 2**31 - 1


class _AcksKey(ConfigKey):
    """`acks` is "all", "-1", "0", "1" or the number, as Kafka accepts; parsed to -1, 0 or 1."""

    __slots__ = ()

    def parse(self, value: Any) -> Any:
        text = str(value).strip().lower() if isinstance(value, (str, int)) and not isinstance(value, bool) else ""
        if text == "all":
            return -1
        if text in ("-1", "0", "1"):
            return int(text)
        raise InvalidConfigError(f"Invalid value {value!r} for configuration acks: must be one of all, -1, 0, 1")


class _AssignorsKey(ConfigKey):
    """`partition.assignment.strategy`: a comma-separated text or a list of assignor names, parsed to a tuple."""

    __slots__ = ()

    def parse(self, value: Any) -> Any:
        names = [n.strip() for n in value.split(",")] if isinstance(value, str) else \
            list(value) if isinstance(value, (list, tuple)) else None
        if not names or not all(isinstance(n, str) and n in ASSIGNORS for n in names):
            raise InvalidConfigError(f"Invalid value {value!r} for configuration {self.name}: expected assignor "
                                     f"names from {', '.join(ASSIGNORS)}")
        return tuple(names)


def _key(name: str, type_: str, default: Any, doc: str, **limits: Any) -> ConfigKey:
    return ConfigKey(name, type_, default, doc, aliases=(name.replace(".", "_"),), **limits)


_COMMON = (
    _key("client.id", "string", "", "Names the client in broker logs; one is generated when empty."),
    _key("request.timeout.ms", "int", 30000, "How long to wait for a response before retrying elsewhere.",
         at_least=0),
    _key("retry.backoff.ms", "long", 100, "Pause before retrying a failed request and between metadata refreshes.",
         at_least=0),
    _key("metadata.max.age.ms", "long", 300000, "Metadata older than this is refreshed even without an error, to "
         "learn of new partitions and brokers.", at_least=0),
    _key("reconnect.backoff.ms", "long", 50, "Pause before trying a broker again after it could not be reached; "
         "doubles with each failure in a row, up to reconnect.backoff.max.ms.", at_least=0),
    _key("reconnect.backoff.max.ms", "long", 1000, "Longest pause before trying an unreachable broker again.",
         at_least=0),
)

PRODUCER_CONFIG_KEYS = _keys(
    *_COMMON,
    _AcksKey("acks", "string", -1, "Replicas that must have a record before it is acknowledged: 0, 1 or all.",
             aliases=()),
    _key("linger.ms", "long", 5, "How long a batch waits for more records before it is sent.", at_least=0),
    _key("batch.size", "int", 16384, "Bytes of records per partition batch; a larger record gets its own batch.",
         at_least=0),
    _key("max.in.flight.requests.per.connection", "int", 5, "Produce requests in flight to one broker.",
         at_least=1),
    _key("retries", "int", _INT_MAX, "How often a failed batch is retried (within delivery.timeout.ms).",
         at_least=0),
    _key("delivery.timeout.ms", "int", 120000, "Upper bound from send() to success or failure of a record.",
         at_least=0),
    _key("enable.idempotence", "boolean", True, "Producer id and sequences make retries exactly once per partition."),
    _key("max.block.ms", "long", 60000, "How long send() waits for the topic's metadata.", at_least=0),
    _key("max.request.size", "int", 1048576, "Largest record the producer accepts.", at_least=1),
    _key("metadata.max.idle.ms", "long", 300000, "A topic not sent to for this long is dropped from the producer's "
         "metadata (KIP-526): no longer asked for, so not created again once deleted.", at_least=5000),
)

CONSUMER_CONFIG_KEYS = _keys(
    *_COMMON,
    _key("fetch.min.bytes", "int", 1, "Bytes a fetch waits for (up to fetch.max.wait.ms) before returning.",
         at_least=0),
    _key("fetch.max.wait.ms", "int", 500, "How long the broker holds a fetch waiting for fetch.min.bytes.",
         at_least=0),
    _key("fetch.max.bytes", "int", 52428800, "Bytes one fetch response may carry.", at_least=0),
    _key("max.partition.fetch.bytes", "int", 1048576, "Bytes per partition in one fetch response.", at_least=0),
    _key("max.poll.records", "int", 500, "Most records one poll() returns.", at_least=1),
    _key("auto.offset.reset", "string", "latest", "Where to start without a valid position: earliest, latest or "
         "none (raise).", choices=("latest", "earliest", "none")),
    _key("isolation.level", "string", "read_uncommitted", "Both levels read below the high watermark; "
         "kafkalite has no transactions.", choices=("read_uncommitted", "read_committed")),
    _key("default.api.timeout.ms", "int", 60000, "Upper bound of position() and other blocking calls.",
         at_least=0),
    _key("allow.auto.create.topics", "boolean", True, "Whether asking for an unknown topic may create it (if the "
         "broker's auto.create.topics.enable allows)."),
    _key("group.id", "nullable string", None, "The consumer group: needed by subscribe() and for committing offsets."),
    _key("group.instance.id", "nullable string", None, "Makes the consumer a static member (KIP-345): restarted "
         "within session.timeout.ms it gets its partitions back without a rebalance."),
    _key("session.timeout.ms", "int", 45000, "A member that sends no heartbeat for this long is dropped from "
         "its group (within the brokers' group.min/max.session.timeout.ms).", at_least=1),
    _key("heartbeat.interval.ms", "int", 3000, "How often a member heartbeats; well below session.timeout.ms.",
         at_least=1),
    _key("max.poll.interval.ms", "int", 300000, "A consumer that does not call poll() for this long leaves its "
         "group; also the rebalance timeout.", at_least=1),
    _key("enable.auto.commit", "boolean", True, "Commit the positions of a group's consumer from poll() every "
         "auto.commit.interval.ms, before a rebalance and on close."),
    _key("auto.commit.interval.ms", "int", 5000, "How often positions are committed with enable.auto.commit.",
         at_least=0),
    _AssignorsKey("partition.assignment.strategy", "string", ("range", "cooperative-sticky"),
                  "Assignors in order of preference: range, roundrobin, sticky, cooperative-sticky; the group "
                  "uses the first that every member supports.", aliases=("partition_assignment_strategy",)),
)

ADMIN_CONFIG_KEYS = _keys(
    *_COMMON,
    _key("default.api.timeout.ms", "int", 60000, "Upper bound of one admin call, retries included.", at_least=0),
)


class ClientConfig(_Config):
    """Validated client properties; `kind` picks the key set."""

    def __init__(self, keys: dict[str, ConfigKey], kind: str, values: Mapping[str, Any] | None = None) -> None:
        self._keys = keys
        self._kind = kind
        super().__init__(values)

    def explicitly_set(self, name: str) -> bool:
        return name in self.overrides


def producer_config(values: Mapping[str, Any]) -> ClientConfig:
    return ClientConfig(PRODUCER_CONFIG_KEYS, "producer", values)


def consumer_config(values: Mapping[str, Any]) -> ClientConfig:
    config = ClientConfig(CONSUMER_CONFIG_KEYS, "consumer", values)
    if config["heartbeat.interval.ms"] >= config["session.timeout.ms"]:  # as Kafka's consumer refuses it
        raise InvalidConfigError(f"heartbeat.interval.ms ({config['heartbeat.interval.ms']}) must be lower than "
                                 f"session.timeout.ms ({config['session.timeout.ms']}): the member would be dropped "
                                 "between its heartbeats")
    return config


def admin_config(values: Mapping[str, Any]) -> ClientConfig:
    return ClientConfig(ADMIN_CONFIG_KEYS, "admin", values)
