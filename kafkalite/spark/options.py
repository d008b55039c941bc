"""The connector's options: Spark's Kafka source and sink option names, parsed and checked once.

Spark hands a Python data source its options lower-cased, as strings. Every check here runs before any Spark job
(in `DataSource.schema()`, `reader()`, `streamReader()`, `writer()`), and a bad value raises `OptionError`, a
ValueError whose message names the option as users spell it (`startingOffsets`) and the value they gave: Spark
shows the message but not the options, so without both names a user cannot tell which line of their pipeline
is wrong.

Offsets and timestamps per partition are JSON as in Spark's Kafka source: `{"orders": {"0": 23, "1": -2}}`,
where -2 means earliest and -1 latest; `assign` is `{"orders": [0, 1]}`.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kafkalite.client.config import CONSUMER_CONFIG_KEYS, PRODUCER_CONFIG_KEYS, ClientConfig
from kafkalite.common.config import ConfigKey, config_names
from kafkalite.common.errors import InvalidConfigError, InvalidTopicError
from kafkalite.common.types import INTERNAL_TOPICS, TopicPartition, validate_topic_name

EARLIEST = -2
LATEST = -1
"""The offsets JSON spells earliest and latest as -2 and -1, as Kafka's ListOffsets does."""
POSITION_NAMES = {EARLIEST: "earliest", LATEST: "latest"}
_LONG_MAX = 2**63 - 1
_INT_MAX = 2**31 - 1
"""Spark parses offsets, timestamps and most numeric options as a Long, minPartitions and the retry count as an Int:
a value beyond fails there, so it fails here too, before any job, rather than deep in an admin request."""

log = logging.getLogger(__name__)

_SPELLING = {name.lower(): name for name in (
    "kafka.bootstrap.servers", "kafkalite.bootstrap.servers", "subscribe", "subscribePattern", "assign",
    "startingOffsets", "endingOffsets", "startingTimestamp", "endingTimestamp", "startingOffsetsByTimestamp",
    "endingOffsetsByTimestamp", "startingOffsetsByTimestampStrategy", "maxOffsetsPerTrigger",
    "minOffsetsPerTrigger", "maxTriggerDelay", "minPartitions", "maxRecordsPerPartition", "failOnDataLoss",
    "includeHeaders", "topic", "kafkaConsumer.pollTimeoutMs", "groupIdPrefix", "fetchOffset.numRetries",
    "fetchOffset.retryIntervalMs")}

# Kafka client settings the connector owns, refused as Spark's Kafka source and sink refuse them: the source
# assigns partitions and seeks itself and hands Spark bytes, the sink writes the columns' bytes.
_SOURCE_OWNED_KEYS = {
    "auto.offset.reset": "set the source option startingOffsets instead",
    "enable.auto.commit": "the connector keeps its offsets in Spark's checkpoint",
    "key.deserializer": "keys are read as bytes; cast the key column",
    "value.deserializer": "values are read as bytes; cast the value column",
    "interceptor.classes": "kafkalite's clients have no interceptors",
}
_SINK_OWNED_KEYS = {
    "key.serializer": "the key column is written as bytes (a string column as UTF-8)",
    "value.serializer": "the value column is written as bytes (a string column as UTF-8)",
    "interceptor.classes": "kafkalite's clients have no interceptors",
}
_IGNORED_CLIENT_KEYS = frozenset({"group.id"})
"""Accepted for pipelines moving from Spark's Kafka source, and unused: the connector reads without a group."""
_IGNORED_RETRY_OPTIONS = {"fetchoffset.numretries": _INT_MAX, "fetchoffset.retryintervalms": _LONG_MAX}
"""Spark's retries of a failed offset lookup: accepted, checked as integers, and unused, as kafkalite's admin client
already retries leader moves and unreachable brokers until default.api.timeout.ms (`kafka.default.api.timeout.ms`).
`groupIdPrefix` and `kafka.group.id` name the consumer group of Spark's readers: accepted and unused, as the
connector reads assigned partitions without a group (other unknown options are ignored, as Spark ignores them)."""

_DURATION = re.compile(r"\s*([0-9]+)\s*(us|ms|s|m|min|h|d)?\s*", re.IGNORECASE)
_DURATION_US = {None: 1000, "us": 1, "ms": 1000, "s": 10**6, "m": 60 * 10**6, "min": 60 * 10**6, "h": 3600 * 10**6,
                "d": 86400 * 10**6}
_INTEGER = re.compile(r"[+-]?[0-9]+")  # as Java's Long.parseLong: no spaces


class OptionError(ValueError):
    """A bad option value, raised before any job runs; the message names the option and the value."""

    def __init__(self, option: str, value: object, problem: str) -> None:
        shown = repr(value) if isinstance(value, str) and value != value.strip() else value  # spaces visible
        super().__init__(f"kafkalite option {spelled(option)}={shown!s}: {problem}")
        self.option = spelled(option)
        self.value = value


def spelled(option: str) -> str:
    """An option as users write it (`startingOffsets`), from the lower-cased key Spark hands over."""
    return _SPELLING.get(option.lower(), option)


@dataclass(frozen=True)
class OffsetSpec:
    """Where reading starts or ends: a position for every partition, per-partition offsets, or timestamps.

    Exactly one of the fields is set. `offsets` may hold EARLIEST or LATEST; `timestamps` maps partitions to epoch
    milliseconds, and `timestamp` applies one to every partition. `option` is where the spec came from, for errors.
    """

    option: str
    value: str
    position: int | None = None
    offsets: Mapping[TopicPartition, int] | None = None
    timestamp: int | None = None
    timestamps: Mapping[TopicPartition, int] | None = None

    def named_partitions(self) -> set[TopicPartition]:
        return set(self.offsets or ()) | set(self.timestamps or ())


@dataclass(frozen=True)
class Subscription:
    """Which partitions a query reads: named topics, topics matching a pattern, or assigned partitions."""

    option: str
    value: str
    topics: tuple[str, ...] = ()
    pattern: str | None = None
    partitions: tuple[TopicPartition, ...] = ()

    def covers(self, tp: TopicPartition) -> bool:
        """Whether the query reads `tp`. A pattern keeps a topic it matches anywhere in the name, as Spark's Kafka
        source does (ConsumerStrategy's SubscribePatternStrategy: `findFirstIn`), not only the whole name."""
        if self.partitions:
            return tp in self.partitions
        if self.pattern is not None:
            return re.search(self.pattern, tp.topic) is not None
        return tp.topic in self.topics


@dataclass(frozen=True)
class SourceOptions:
    bootstrap: str
    subscription: Subscription
    starting: OffsetSpec
    ending: OffsetSpec | None
    by_timestamp_strategy: str
    max_offsets_per_trigger: int | None
    min_offsets_per_trigger: int | None
    max_trigger_delay_ms: int
    min_partitions: int | None
    max_records_per_partition: int | None
    fail_on_data_loss: bool
    include_headers: bool
    poll_timeout_ms: int
    client_config: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class SinkOptions:
    bootstrap: str
    topic: str | None
    client_config: Mapping[str, str] = field(default_factory=dict)


def bootstrap_servers(options: Mapping[str, str]) -> str:
    """`kafka.bootstrap.servers` (Spark's Kafka name) or `kafkalite.bootstrap.servers`: "host:port,..."."""
    for option in ("kafka.bootstrap.servers", "kafkalite.bootstrap.servers"):
        value = options.get(option)
        if value is None:
            continue
        servers = [server.strip() for server in value.split(",") if server.strip()]
        for server in servers:
            host, colon, port = server.rpartition(":")
            if not host or not colon or not (port.isascii() and port.isdigit()):
                raise OptionError(option, value, f"{server!r} is not host:port")
        if not servers:
            raise OptionError(option, value, "name at least one host:port")
        return ",".join(servers)
    raise OptionError("kafka.bootstrap.servers", "(missing)",
                      "set kafka.bootstrap.servers (or kafkalite.bootstrap.servers) to the cluster's host:port,... "
                      "(EmbeddedCluster.bootstrap_servers)")


def client_config(options: Mapping[str, str], keys: dict[str, ConfigKey], kind: str,
                  owned: Mapping[str, str]) -> dict[str, str]:
    """The `kafka.*` options for the client, without the prefix, each checked as the `kind` client's `keys` say.

    A key kafkalite's client does not have is left out with a warning, as Spark hands every `kafka.*` option to
    Kafka's client, which warns of those it does not know: settings of a real Kafka client that kafkalite has no
    use for (`security.protocol`, `receive.buffer.bytes`, ...), or a consumer's setting in options a pipeline
    shares between its read and its write, must not stop a pipeline moving from Spark's Kafka source."""
    known = config_names(keys)
    config = {}
    for option, value in options.items():
        if not option.startswith("kafka.") or option == "kafka.bootstrap.servers":
            continue
        key = option.removeprefix("kafka.")
        if key in owned:
            raise OptionError(option, value, f"not supported: {owned[key]}")
        if key in _IGNORED_CLIENT_KEYS:
            continue
        if key not in known:
            log.warning("kafkalite option %s=%s: kafkalite's client has no setting %s; ignored", option, value, key)
            continue
        try:
            ClientConfig(keys, kind, {key: value})
        except InvalidConfigError as exc:
            raise OptionError(option, value, exc.message) from None
        config[key] = value
    return config


def source_options(options: Mapping[str, str], *, streaming: bool | None) -> SourceOptions:
    """Check the reading options; `streaming` None checks what batch and streaming reads share (at `load()`)."""
    starting_default = LATEST if streaming else EARLIEST
    ending = _offset_spec(options, "ending", LATEST, allowed=(LATEST,)) if not streaming else None
    if streaming and any(options.get(name) is not None for name in
                         ("endingoffsets", "endingtimestamp", "endingoffsetsbytimestamp")):
        option = next(name for name in ("endingoffsets", "endingtimestamp", "endingoffsetsbytimestamp")
                      if options.get(name) is not None)
        raise OptionError(option, options[option], "ending offsets apply to batch reads only, not streaming queries")
    starting = _offset_spec(options, "starting", starting_default,
                            allowed=(EARLIEST,) if streaming is False else (EARLIEST, LATEST))
    max_per_trigger = _positive_int(options, "maxoffsetspertrigger")
    min_per_trigger = _positive_int(options, "minoffsetspertrigger")
    if max_per_trigger is not None and min_per_trigger is not None and min_per_trigger > max_per_trigger:
        raise OptionError("minoffsetspertrigger", min_per_trigger,
                          f"must not exceed maxOffsetsPerTrigger ({max_per_trigger})")
    for option, maximum in _IGNORED_RETRY_OPTIONS.items():
        _int_option(options, option, minimum=0, maximum=maximum)
    return SourceOptions(
        bootstrap=bootstrap_servers(options),
        subscription=_subscription(options),
        starting=starting,
        ending=ending,
        by_timestamp_strategy=_choice(options, "startingoffsetsbytimestampstrategy", ("error", "latest"), "error"),
        max_offsets_per_trigger=max_per_trigger,
        min_offsets_per_trigger=min_per_trigger,
        max_trigger_delay_ms=_duration_ms(options, "maxtriggerdelay", "15m"),
        min_partitions=_positive_int(options, "minpartitions", maximum=_INT_MAX),
        max_records_per_partition=_positive_int(options, "maxrecordsperpartition"),
        fail_on_data_loss=_boolean(options, "failondataloss", True),
        include_headers=_boolean(options, "includeheaders", False),
        poll_timeout_ms=_positive_int(options, "kafkaconsumer.polltimeoutms") or 120_000,
        client_config=client_config(options, CONSUMER_CONFIG_KEYS, "consumer", _SOURCE_OWNED_KEYS),
    )


def sink_options(options: Mapping[str, str]) -> SinkOptions:
    topic = options.get("topic")
    if topic is not None and not topic.strip():
        raise OptionError("topic", repr(topic), "must name a topic")
    return SinkOptions(bootstrap_servers(options), topic,
                       client_config(options, PRODUCER_CONFIG_KEYS, "producer", _SINK_OWNED_KEYS))


def _subscription(options: Mapping[str, str]) -> Subscription:
    given = [name for name in ("subscribe", "subscribepattern", "assign") if options.get(name) is not None]
    if not given:
        raise OptionError("subscribe", "(missing)", "set exactly one of subscribe, subscribePattern and assign")
    if len(given) > 1:
        raise OptionError(given[1], options[given[1]], "set exactly one of subscribe, subscribePattern and assign; "
                          f"{spelled(given[0])}={options[given[0]]} is set too")
    option = given[0]
    value = options[option]
    if option == "subscribe":
        topics = tuple(topic.strip() for topic in value.split(",") if topic.strip())
        if not topics:
            raise OptionError(option, repr(value), "name at least one topic")
        _check_topic_names(option, value, topics)
        return Subscription(option, value, topics=topics)
    if option == "subscribepattern":
        if not value.strip():
            raise OptionError(option, repr(value), "the pattern to subscribe to is empty")
        try:
            re.compile(value)
        except re.error as exc:
            raise OptionError(option, value, f"not a regular expression: {exc}") from None
        return Subscription(option, value, pattern=value)
    partitions = tuple(sorted(_partition_json(option, value, list_values=True)))
    if not partitions:
        raise OptionError(option, value, "assign at least one partition")
    _check_topic_names(option, value, [tp.topic for tp in partitions])
    return Subscription(option, value, partitions=partitions)


def _check_topic_names(option: str, value: str, topics: Sequence[str]) -> None:
    """Fail on a name no topic can have, as Spark's Kafka source fails on the cluster's INVALID_TOPIC_EXCEPTION,
    rather than read nothing from it as from a topic not created yet; and on an internal topic, whose records are
    the cluster's own bookkeeping, not the user's."""
    for topic in topics:
        try:
            validate_topic_name(topic)
        except InvalidTopicError as exc:
            raise OptionError(option, value, exc.message) from None
    internal = sorted(set(topics) & INTERNAL_TOPICS)  # whether or not the cluster made it yet
    if internal:
        raise OptionError(option, value, f"topic {internal[0]!r} is internal to the cluster and cannot be read, as "
                                         "a pattern subscription of Spark's Kafka source leaves internal topics out")


def _offset_spec(options: Mapping[str, str], side: str, default: int, allowed: tuple[int, ...]) -> OffsetSpec:
    """`startingOffsets` and friends; Spark's precedence: timestamp, then offsets by timestamp, then offsets."""
    timestamp_option, by_timestamp_option, offsets_option = \
        f"{side}timestamp", f"{side}offsetsbytimestamp", f"{side}offsets"
    if options.get(timestamp_option) is not None:
        value = options[timestamp_option]
        return OffsetSpec(timestamp_option, value, timestamp=_timestamp(timestamp_option, value))
    if options.get(by_timestamp_option) is not None:
        value = options[by_timestamp_option]
        timestamps = _partition_json(by_timestamp_option, value, list_values=False)
        for tp, ts in timestamps.items():
            _timestamp(by_timestamp_option, value, ts, f" (partition {tp.topic}-{tp.partition})")
        return OffsetSpec(by_timestamp_option, value, timestamps=timestamps)
    value = options.get(offsets_option)
    if value is None:
        return OffsetSpec(offsets_option, POSITION_NAMES[default], position=default)
    word = value.strip().lower()
    for position, name in POSITION_NAMES.items():
        if word == name:
            if position not in allowed:
                raise OptionError(offsets_option, value, f"{word} is not allowed here")
            return OffsetSpec(offsets_option, value, position=position)
    if not value.strip().startswith("{"):
        raise OptionError(offsets_option, value, 'must be "earliest", "latest" or JSON such as {"topic": {"0": 23}} '
                                                 "(-2: earliest, -1: latest)")
    offsets = _partition_json(offsets_option, value, list_values=False)
    for tp, offset in offsets.items():
        if offset < 0 and offset not in allowed:
            raise OptionError(offsets_option, value, f"offset {offset} of {tp.topic}-{tp.partition} is not allowed "
                                                     "here (-2: earliest, -1: latest, or an offset >= 0)")
        if offset > _LONG_MAX:
            raise OptionError(offsets_option, value, f"offset {offset} of {tp.topic}-{tp.partition} is beyond the "
                                                     f"largest offset, {_LONG_MAX}")
    return OffsetSpec(offsets_option, value, offsets=offsets)


def _partition_json(option: str, value: str, *, list_values: bool) -> Any:
    """`{"t": {"0": 5}}` as {TopicPartition: 5}; with `list_values`, `{"t": [0, 1]}` as a set of partitions."""
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError as exc:
        raise OptionError(option, value, f"malformed JSON: {exc}") from None
    shape = '{"topic": [0, 1]}' if list_values else '{"topic": {"0": 23}}'
    if not isinstance(parsed, dict):
        raise OptionError(option, value, f"must be a JSON object such as {shape}")
    result: Any = set() if list_values else {}
    for topic, inner in parsed.items():
        if list_values and isinstance(inner, list) and all(_is_int(p) and 0 <= p <= _INT_MAX for p in inner):
            result.update(TopicPartition(topic, p) for p in inner)
        elif not list_values and isinstance(inner, dict) and all(_is_int(v) for v in inner.values()) \
                and all(re.fullmatch("[0-9]+", key) and int(key) <= _INT_MAX for key in inner):
            result.update({TopicPartition(topic, int(p)): v for p, v in inner.items()})
        else:
            raise OptionError(option, value, f"topic {topic!r} is not in the shape {shape}")
    return result


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _timestamp(option: str, value: str, timestamp: int | None = None, where: str = "") -> int:
    """`timestamp`, or the option's `value` itself, as epoch milliseconds; a message shows the option's whole value,
    as the user gave it, and `where` says which partition's timestamp is wrong."""
    if timestamp is None:
        if _INTEGER.fullmatch(value) is None:
            raise OptionError(option, value, "not a timestamp in epoch milliseconds")
        timestamp = int(value)
    if timestamp < 0:
        raise OptionError(option, value, f"a timestamp must not be negative{where}")
    if timestamp > _LONG_MAX:
        raise OptionError(option, value, f"a timestamp must be at most {_LONG_MAX}{where}")
    return timestamp


def _positive_int(options: Mapping[str, str], option: str, maximum: int = _LONG_MAX) -> int | None:
    return _int_option(options, option, minimum=1, maximum=maximum)


def _int_option(options: Mapping[str, str], option: str, *, minimum: int, maximum: int = _LONG_MAX) -> int | None:
    value = options.get(option)
    if value is None:
        return None
    if _INTEGER.fullmatch(value) is None:  # not int()'s "1_000" nor other scripts' digits, as Java's parsing
        raise OptionError(option, value, "not an integer")
    number = int(value)
    if number < minimum:
        raise OptionError(option, value, "must be positive" if minimum == 1 else f"must be at least {minimum}")
    if number > maximum:
        raise OptionError(option, value, f"must be at most {maximum}")
    return number


def _boolean(options: Mapping[str, str], option: str, default: bool) -> bool:
    return _choice(options, option, ("true", "false"), str(default).lower()) == "true"


def _choice(options: Mapping[str, str], option: str, choices: tuple[str, ...], default: str) -> str:
    value = options.get(option)
    if value is None:
        return default
    if value.strip().lower() not in choices:
        raise OptionError(option, value, f"must be one of {', '.join(choices)}")
    return value.strip().lower()


def _duration_ms(options: Mapping[str, str], option: str, default: str) -> int:
    """A duration as Spark writes them ("15m", "30s", "500ms"; a bare number is milliseconds)."""
    value = options.get(option, default)
    match = _DURATION.fullmatch(value)
    if match is None:
        raise OptionError(option, value.strip() or repr(value), "not a duration such as 500ms, 30s, 5m or 1h")
    unit = match.group(2).lower() if match.group(2) else None
    return int(match.group(1)) * _DURATION_US[unit] // 1000
