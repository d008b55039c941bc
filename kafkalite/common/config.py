"""Broker and topic configuration, with Kafka's property names, types and defaults.

Users bring `server.properties` habits and topic configs from real clusters, so the keys are Kafka's own
(`min.insync.replicas`, not `min_isr`). Values may be given as Python values or as the strings a properties file
or an admin client would send ("2", "true"). Every unknown key and every value of the wrong type or out of range
is rejected with the key named, because a silently ignored typo in a test cluster's config is a test that
checks nothing.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from enum import IntEnum
from functools import cached_property
from typing import Any

from kafkalite.common.errors import InvalidConfigError, InvalidRequestError

_DAY_MS = 24 * 3600 * 1000
_LONG_MAX = (1 << 63) - 1


def _parse_int(value: Any) -> int:
    if isinstance(value, bool):
        raise ValueError("expected an integer, got a boolean")
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().lstrip("+-").isdigit():
        return int(value.strip())
    raise ValueError(f"expected an integer, got {value!r}")


def _integer_of(kind: str, bits: int) -> Callable[[Any], int]:
    """A parser of Kafka's INT or LONG, which refuses what the type cannot hold as Kafka's ConfigDef does: where
    the value is given, at startup or in the admin request, not later in everything that uses it."""
    low, high = -(1 << (bits - 1)), (1 << (bits - 1)) - 1

    def parse(value: Any) -> int:
        number = _parse_int(value)
        if not low <= number <= high:
            raise ValueError(f"Not a number of type {kind} (from {low} to {high})")
        return number

    return parse


_parse_int32 = _integer_of("INT", 32)


def _parse_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise ValueError(f"expected true or false, got {value!r}")


def _parse_float(value: Any) -> float:
    if isinstance(value, bool):
        raise ValueError("expected a number, got a boolean")
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            pass
    raise ValueError(f"expected a number, got {value!r}")


def _parse_str(value: Any) -> str:
    if isinstance(value, str):
        return value
    raise ValueError(f"expected a string, got {value!r}")


def _parse_optional_str(value: Any) -> str | None:
    return None if value is None else _parse_str(value)


def _list_items(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


def _parse_list(value: Any) -> str:
    """A list property keeps Kafka's comma-separated text ("delete,compact"), its items trimmed."""
    if isinstance(value, (list, tuple)) and all(isinstance(item, str) for item in value):
        return ",".join(item.strip() for item in value)
    return ",".join(_list_items(_parse_str(value)))


_PARSERS: dict[str, Callable[[Any], Any]] = {
    "int": _parse_int32, "long": _integer_of("LONG", 64), "boolean": _parse_bool, "double": _parse_float,
    "string": _parse_str, "nullable string": _parse_optional_str, "list": _parse_list,
    "nullable int": lambda value: None if value is None else _parse_int32(value),
}


def _replica_list(value: str) -> str | None:
    """Kafka's ThrottledReplicaListValidator: every replica, or some as partition:broker pairs."""
    if value == "*" or all(re.fullmatch(r"[0-9]+:[0-9]+", item) for item in value.split(",") if item):
        return None
    return ("must be the literal '*' or a list of replicas in the following format: "
            "[partitionId]:[brokerId],[partitionId]:[brokerId],...")


def _format_version(value: str) -> str | None:
    if re.fullmatch(r"0\.(8|9|10|11)\.[0-9](\.[0-9])?(-IV[0-9]+)?|[1-3]\.[0-9](\.[0-9])?(-IV[0-9]+)?", value):
        return None
    return "must be a Kafka version, such as 2.8 or 3.0-IV1"


def _no_remote_storage(value: bool) -> str | None:
    return ("Tiered Storage functionality is disabled in the broker. Topic cannot be configured with remote log "
            "storage.") if value else None


def _gzip_level(value: int) -> str | None:
    return None if value == -1 or 1 <= value <= 9 else "must be -1 (the codec's default) or from 1 to 9"


@dataclass(frozen=True, slots=True)
class ConfigKey:
    """One property: Kafka's name, its type and default, and the range Kafka accepts."""

    name: str
    type: str
    default: Any
    doc: str
    at_least: float | None = None
    at_most: float | None = None
    choices: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()
    rule: Callable[[Any], str | None] | None = None  # what else Kafka requires: the problem with a value, or None

    def parse(self, value: Any) -> Any:
        try:
            parsed = _PARSERS[self.type](value)
        except ValueError as exc:
            raise InvalidConfigError(f"Invalid value {value!r} for configuration {self.name}: {exc}") from None
        if parsed is None:
            return parsed
        if self.at_least is not None and parsed < self.at_least:
            raise InvalidConfigError(
                f"Invalid value {value!r} for configuration {self.name}: must be at least {self.at_least:g}")
        if self.at_most is not None and parsed > self.at_most:
            raise InvalidConfigError(
                f"Invalid value {value!r} for configuration {self.name}: must be at most {self.at_most:g}")
        items = parsed.split(",") if self.type == "list" else (parsed,)
        if self.choices and any(item not in self.choices for item in items):
            kind = "a list of one or more of" if self.type == "list" else "one of"
            raise InvalidConfigError(
                f"Invalid value {value!r} for configuration {self.name}: must be {kind} {', '.join(self.choices)}")
        problem = self.rule(parsed) if self.rule is not None else None
        if problem is not None:
            raise InvalidConfigError(f"Invalid value {value!r} for configuration {self.name}: {problem}")
        return parsed


class ConfigOp(IntEnum):
    """How IncrementalAlterConfigs changes one property (Kafka's AlterConfigOp.OpType, numbered as on the wire)."""

    SET = 0
    DELETE = 1  # back to the default
    APPEND = 2  # list properties only: add the items not there yet
    SUBTRACT = 3  # list properties only: remove the items given


def config_text(value: Any) -> str:
    """A config value as it travels in requests and znodes: text, booleans spelled as Kafka spells them."""
    return str(value).lower() if isinstance(value, bool) else str(value)


def optional_config_text(value: Any) -> str | None:
    """`config_text`, with None kept as null: a config without a value (a default of none, or a value a request
    leaves null, which the brokers refuse as Kafka's do) rather than the text 'None'."""
    return None if value is None else config_text(value)


def _keys(*keys: ConfigKey) -> dict[str, ConfigKey]:
    return {key.name: key for key in keys}


BROKER_CONFIG_KEYS: dict[str, ConfigKey] = _keys(
    ConfigKey("broker.id", "int", 0, "The broker's id; the cluster numbers its brokers 1..N.", at_least=0),
    ConfigKey("broker.rack", "nullable string", None, "Rack of the broker, used for rack-aware replica assignment."),
    ConfigKey("listeners", "string", "NATIVE://127.0.0.1:0,KAFKA://127.0.0.1:0",
              "Comma-separated NAME://host:port listeners: NATIVE speaks kafkalite's msgpack protocol, KAFKA "
              "Apache Kafka's; port 0 picks a free port so parallel runs never clash."),
    ConfigKey("num.partitions", "int", 1, "Default partition count of new topics.", at_least=1),
    ConfigKey("default.replication.factor", "int", 1, "Default replication factor of new topics.", at_least=1),
    ConfigKey("min.insync.replicas", "int", 1,
              "Fewest in-sync replicas an acks=-1 produce needs, else NOT_ENOUGH_REPLICAS.", at_least=1),
    ConfigKey("unclean.leader.election.enable", "boolean", False,
              "Whether a replica outside the ISR may become leader, at the price of losing acknowledged records."),
    ConfigKey("replica.lag.time.max.ms", "long", 30000,
              "A follower that has not caught up for this long leaves the ISR.", at_least=1),
    ConfigKey("coordination.session.timeout.ms", "int", 18000,
              "Coordination-service session timeout: a broker that stops heartbeating for this long is dead.",
              at_least=1, aliases=("zookeeper.session.timeout.ms",)),
    ConfigKey("auto.leader.rebalance.enable", "boolean", True,
              "Whether the controller moves leadership back to preferred replicas on a schedule."),
    ConfigKey("leader.imbalance.check.interval.seconds", "long", 300,
              "How often the controller checks leader imbalance.", at_least=1),
    ConfigKey("leader.imbalance.per.broker.percentage", "int", 10,
              "Share of a broker's partitions not led by it that triggers a rebalance.", at_least=0, at_most=100),
    ConfigKey("controlled.shutdown.enable", "boolean", True,
              "Whether a stopping broker first asks the controller to move its leaderships away."),
    ConfigKey("log.segment.bytes", "int", 1 << 30, "Size at which a segment rolls.", at_least=14),
    ConfigKey("log.roll.ms", "long", 7 * _DAY_MS, "Age at which a segment rolls.", at_least=1),
    ConfigKey("log.retention.ms", "long", 7 * _DAY_MS, "Age after which whole segments are deleted; -1: never.",
              at_least=-1),
    ConfigKey("log.retention.bytes", "long", -1, "Size above which old segments are deleted; -1: unlimited.",
              at_least=-1),
    ConfigKey("log.retention.minutes", "nullable int", None, "log.retention.ms in minutes, when that is not set."),
    ConfigKey("log.retention.hours", "int", 168, "log.retention.ms in hours, when neither it nor "
              "log.retention.minutes is set."),
    ConfigKey("log.roll.hours", "int", 168, "log.roll.ms in hours, when that is not set.", at_least=1),
    ConfigKey("producer.id.expiration.ms", "int", 86400000,
              "How long a replica keeps an idempotent producer's state after its last batch (KIP-854).", at_least=1),
    ConfigKey("producer.id.expiration.check.interval.ms", "int", 600000,
              "How often each broker drops the producer state producer.id.expiration.ms let go.", at_least=1),
    ConfigKey("log.retention.check.interval.ms", "long", 300000,
              "How often each broker deletes the segments that retention.ms, retention.bytes or DeleteRecords let go.",
              at_least=1),
    ConfigKey("message.max.bytes", "int", 1048588, "Largest record batch the broker accepts.", at_least=0),
    ConfigKey("delete.topic.enable", "boolean", True, "Whether topics may be deleted."),
    ConfigKey("auto.create.topics.enable", "boolean", True,
              "Whether a Metadata request for an unknown topic creates it with the defaults."),
    ConfigKey("socket.request.max.bytes", "int", 100 * 1024 * 1024, "Largest request frame a listener accepts.",
              at_least=1),
    ConfigKey("connections.max.idle.ms", "long", 600000,
              "A listener closes a connection that has sent nothing for this long (half a frame included); "
              "-1: never.", at_least=-1),
    ConfigKey("max.topics.per.request", "int", 100_000,
              "Most topics (or config resources) one request may name: kafkalite's bound, since the brokers share "
              "one thread and a request naming millions would stall them all.", at_least=1),
    ConfigKey("max.partitions.per.request", "int", 100_000,
              "Most partitions one request may list, or CreateTopics / CreatePartitions create: kafkalite's "
              "bound, for the same reason.", at_least=1),
    ConfigKey("replica.fetch.max.bytes", "int", 1048576, "Bytes a follower asks for per partition.", at_least=0),
    ConfigKey("replica.fetch.wait.max.ms", "int", 500, "How long a follower's fetch may wait for data.",
              at_least=0),
    ConfigKey("replica.fetch.backoff.ms", "int", 1000, "Pause after a failed follower fetch.", at_least=0),
    ConfigKey("controller.socket.timeout.ms", "int", 30000,
              "How long the controller waits for a broker to answer a request.", at_least=1),
    ConfigKey("controlled.shutdown.max.retries", "int", 3, "Tries of a controlled shutdown.", at_least=0),
    ConfigKey("controlled.shutdown.retry.backoff.ms", "long", 5000, "Pause between controlled-shutdown tries.",
              at_least=0),
    ConfigKey("offsets.topic.num.partitions", "int", 50,
              "Partitions of __consumer_offsets, created on the first FindCoordinator; a group's coordinator is the "
              "leader of partition abs(hash(group id)) % this, so it must not change once the topic exists.",
              at_least=1),
    ConfigKey("offsets.topic.replication.factor", "int", 3,
              "Replicas of each __consumer_offsets partition, capped at the live brokers when it is created.",
              at_least=1),
    ConfigKey("offsets.commit.timeout.ms", "int", 5000,
              "How long a commit (or a group's new assignment) waits for every in-sync replica of its offsets "
              "partition.", at_least=1),
    ConfigKey("offsets.retention.minutes", "int", 7 * 24 * 60,
              "An empty group's committed offsets are deleted this long after they were committed.", at_least=1),
    ConfigKey("offsets.retention.check.interval.ms", "long", 600000,
              "How often the coordinator looks for expired offsets.", at_least=1),
    ConfigKey("offset.metadata.max.bytes", "int", 4096, "Largest metadata string a commit may carry.",
              at_least=0),
    ConfigKey("group.min.session.timeout.ms", "int", 6000,
              "Shortest session timeout a member may ask for, else INVALID_SESSION_TIMEOUT.", at_least=0),
    ConfigKey("group.max.session.timeout.ms", "int", 1800000,
              "Longest session timeout a member may ask for, else INVALID_SESSION_TIMEOUT.", at_least=0),
    ConfigKey("group.max.size", "int", 2147483647,
              "Most members a group may have: a member joining beyond it is refused with GROUP_MAX_SIZE_REACHED.",
              at_least=1),
    ConfigKey("group.initial.rebalance.delay.ms", "int", 0,
              "How long the first rebalance of an empty group waits for more members to join (Kafka's default "
              "is 3000; kafkalite's is 0 so that tests form groups at once).", at_least=0),
    ConfigKey("kafkalite.follower.truncation", "string", "leader-epoch",
              "A negative control for tests, never for use: how a follower truncates on becoming follower. "
              "leader-epoch (the default) asks the leader with OffsetsForLeaderEpoch (KIP-101 / KIP-279); "
              "high-watermark truncates to the follower's own high watermark, as the pre-KIP-101 code did, and "
              "is known to lose or diverge acknowledged data.", choices=("leader-epoch", "high-watermark")),
)

TOPIC_CONFIG_KEYS: dict[str, ConfigKey] = _keys(
    ConfigKey("cleanup.policy", "list", "delete",
              "delete: retention.ms and retention.bytes delete old segments. compact: records without a key are "
              "refused and retention deletes nothing; kafkalite's cleaner never runs, so every record is kept, "
              "which Kafka's guarantee (at least the latest record of each key) allows.",
              choices=("delete", "compact")),
    ConfigKey("delete.retention.ms", "long", _DAY_MS,
              "How long a compacted topic keeps tombstones at least; kafkalite keeps them for good.", at_least=0),
    ConfigKey("min.compaction.lag.ms", "long", 0, "Stored and described; nothing is compacted.", at_least=0),
    ConfigKey("max.compaction.lag.ms", "long", _LONG_MAX, "Stored and described; nothing is compacted.",
              at_least=1),
    ConfigKey("min.cleanable.dirty.ratio", "double", 0.5, "Stored and described; nothing is compacted.",
              at_least=0, at_most=1),
    ConfigKey("compression.type", "string", "producer",
              "Stored and described; batches are kept as the producer compressed them (Kafka recompresses them "
              "to any other codec named here).",
              choices=("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")),
    *(ConfigKey(f"compression.{codec}.level", "int", default, f"Stored and described, as compression.type is: "
                f"the level Kafka would recompress {codec} batches at.", at_least=low, at_most=high, rule=rule)
      for codec, default, low, high, rule in [("gzip", -1, -1, 9, _gzip_level), ("lz4", 9, 1, 17, None),
                                              ("zstd", 3, -131072, 22, None)]),
    ConfigKey("message.downconversion.enable", "boolean", True,
              "Stored and described: kafkalite serves only the v2 record format, so it never down-converts (Kafka "
              "4.0 does not either)."),
    *(ConfigKey(f"{side}.replication.throttled.replicas", "list", "",
                "Stored and described: the replicas Kafka throttles during a reassignment (KIP-73), '*' or "
                "partition:broker pairs. kafkalite has no throttle rates, so nothing is throttled.",
                rule=_replica_list) for side in ("leader", "follower")),
    ConfigKey("remote.storage.enable", "boolean", False,
              "Tiered storage (KIP-405), which kafkalite does not have: true is refused, as by a Kafka broker "
              "without remote.log.storage.system.enable.", rule=_no_remote_storage),
    *(ConfigKey(f"local.retention.{unit}", "long", -2, "Stored and described: the local share of a tiered "
                "topic's retention, which kafkalite has no use for.", at_least=-2) for unit in ("ms", "bytes")),
    *(ConfigKey(f"remote.log.{name}", "boolean", False, "Stored and described: a tiered topic's setting, which "
                "kafkalite has no use for.") for name in ("copy.disable", "delete.on.disable")),
    ConfigKey("message.format.version", "string", "3.0-IV1",
              "Stored and described, as Kafka 3.x ignores it: records are always in the v2 format.",
              rule=_format_version),
    ConfigKey("min.insync.replicas", "int", 1, BROKER_CONFIG_KEYS["min.insync.replicas"].doc, at_least=1),
    *(ConfigKey(name, kind, default, "A setting of Kafka's files on disk, stored and described: kafkalite's logs are "
                "in memory, so it changes nothing.", at_least=at_least)
      for name, kind, default, at_least in [
          ("segment.index.bytes", "int", 10 * 1024 * 1024, 4), ("index.interval.bytes", "int", 4096, 0),
          ("segment.jitter.ms", "long", 0, 0), ("file.delete.delay.ms", "long", 60000, 0),
          ("flush.messages", "long", _LONG_MAX, 1), ("flush.ms", "long", _LONG_MAX, 0),
          ("preallocate", "boolean", False, None)]),
    ConfigKey("unclean.leader.election.enable", "boolean", False,
              BROKER_CONFIG_KEYS["unclean.leader.election.enable"].doc),
    ConfigKey("segment.bytes", "int", 1 << 30, "Size at which a segment rolls.", at_least=14),
    ConfigKey("segment.ms", "long", 7 * _DAY_MS, "Age at which a segment rolls.", at_least=1),
    ConfigKey("retention.ms", "long", 7 * _DAY_MS, "Age after which segments are deleted; -1: never.",
              at_least=-1),
    ConfigKey("retention.bytes", "long", -1, "Size above which old segments are deleted; -1: unlimited.",
              at_least=-1),
    ConfigKey("max.message.bytes", "int", 1048588, "Largest record batch accepted.", at_least=0),
    ConfigKey("message.timestamp.type", "string", "CreateTime", "Which timestamp records keep.",
              choices=("CreateTime", "LogAppendTime")),
    ConfigKey("message.timestamp.before.max.ms", "long", _LONG_MAX,
              "How far behind the leader's clock a record's own timestamp may be (CreateTime topics), else the "
              "produce fails with INVALID_TIMESTAMP.", at_least=0),
    ConfigKey("message.timestamp.after.max.ms", "long", _LONG_MAX,
              "How far ahead of the leader's clock a record's own timestamp may be (CreateTime topics), else the "
              "produce fails with INVALID_TIMESTAMP. Kafka 4.0 made one hour the default; kafkalite keeps 3.x's, "
              "unlimited, so that tests may write records of any time.", at_least=0),
    ConfigKey("message.timestamp.difference.max.ms", "long", _LONG_MAX,
              "Kafka's older bound on both sides (deprecated in 3.6): before.max.ms and after.max.ms take it while "
              "they are at their default, as in Kafka.", at_least=0),
)

# Where a topic config takes its default when the topic does not override it: Kafka's broker-level names.
TOPIC_DEFAULT_FROM_BROKER: dict[str, str] = {
    "min.insync.replicas": "min.insync.replicas",
    "unclean.leader.election.enable": "unclean.leader.election.enable",
    "segment.bytes": "log.segment.bytes",
    "segment.ms": "log.roll.ms",
    "retention.ms": "log.retention.ms",
    "retention.bytes": "log.retention.bytes",
    "max.message.bytes": "message.max.bytes",
}

# Broker properties that only set a topic config's default, with the topic config's type, range and rules.
for _topic_key, _broker_key in [("cleanup.policy", "log.cleanup.policy"), ("compression.type", "compression.type"),
                                *((f"message.timestamp.{name}", f"log.message.timestamp.{name}")
                                  for name in ("type", "before.max.ms", "after.max.ms", "difference.max.ms"))]:
    BROKER_CONFIG_KEYS[_broker_key] = dataclasses.replace(
        TOPIC_CONFIG_KEYS[_topic_key], name=_broker_key,
        doc=f"The default of the topic config {_topic_key}: {TOPIC_CONFIG_KEYS[_topic_key].doc}")
    TOPIC_DEFAULT_FROM_BROKER[_topic_key] = _broker_key


def config_names(keys: Mapping[str, ConfigKey]) -> frozenset[str]:
    """Every name a key set answers to: its keys' names and their aliases."""
    return frozenset(_canonical_keys(keys))


def _canonical_keys(keys: Mapping[str, ConfigKey]) -> dict[str, str]:
    names = {name: name for name in keys}
    for key in keys.values():
        names.update({alias: key.name for alias in key.aliases})
    return names


class _Config(Mapping[str, Any]):
    """A validated, read-only map of property name to parsed value, defaults filled in."""

    _keys: dict[str, ConfigKey]
    _kind: str

    def __init__(self, values: Mapping[str, Any] | None = None,
                 defaults: Mapping[str, Any] | None = None) -> None:
        names = _canonical_keys(self._keys)
        parsed: dict[str, Any] = {name: key.default for name, key in self._keys.items()}
        parsed.update(defaults or {})
        self._overrides: dict[str, Any] = {}
        spelled: dict[str, str] = {}
        for given, value in (values or {}).items():
            name = names.get(given)
            if name is None:
                raise InvalidConfigError(f"Unknown {self._kind} config name: {given}")
            if name in spelled:  # "linger.ms" and "linger_ms": which was meant?
                raise InvalidConfigError(f"{spelled[name]!r} and {given!r} both set {self._kind} config {name}; "
                                         "give it once")
            spelled[name] = given
            parsed[name] = self._overrides[name] = self._keys[name].parse(value)
        self._values = parsed

    def __getitem__(self, name: str) -> Any:
        try:
            return self._values[name]
        except KeyError:  # an alias (zookeeper.session.timeout.ms) or an unknown key
            return self._values[_canonical_keys(self._keys).get(name, name)]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def canonical_name(self, name: str) -> str | None:
        """The property `name` names, itself or through an alias (zookeeper.session.timeout.ms); None if none."""
        return _canonical_keys(self._keys).get(name)

    @classmethod
    def definition(cls, name: str) -> ConfigKey | None:
        """The definition of the property `name` names, itself or through an alias; None if none: its type and
        documentation, which Kafka's DescribeConfigs gives a client from version 3."""
        canonical = _canonical_keys(cls._keys).get(name)
        return None if canonical is None else cls._keys[canonical]

    @property
    def overrides(self) -> dict[str, Any]:
        """Only what was set explicitly: what a describe-configs call reports as non-default."""
        return dict(self._overrides)

    def altered(self, ops: Iterable[tuple[str, int, str | None]]) -> dict[str, Any]:
        """The overrides once `ops` (name, `ConfigOp`, value) are applied, as Kafka's IncrementalAlterConfigs
        applies them (KIP-339): only the named properties change, where AlterConfigs replaces them all.

        The values are not checked here; building the config from the result checks each. Unlike Kafka, a DELETE
        of a property that does not exist fails (INVALID_CONFIG) like every other unknown name: a typo that
        silently deletes nothing is a test that checks nothing."""
        names = _canonical_keys(self._keys)
        overrides = dict(self._overrides)
        seen: set[str] = set()
        for given, code, value in ops:
            name = names.get(given)
            if name is None:
                raise InvalidConfigError(f"Unknown {self._kind} config name: {given}")
            if name in seen:
                raise InvalidRequestError(f"Error due to duplicate config keys: {name} is named twice")
            seen.add(name)
            try:
                op = ConfigOp(code)
            except ValueError:
                raise InvalidRequestError(f"Unknown operation {code} for configuration {name}: expected 0 (SET), "
                                          f"1 (DELETE), 2 (APPEND) or 3 (SUBTRACT)") from None
            if op is ConfigOp.DELETE:
                overrides.pop(name, None)
            elif value is None:
                raise InvalidRequestError(f"Null value not supported for configuration {name} ({op.name})")
            elif op is ConfigOp.SET:
                overrides[name] = value
            elif self._keys[name].type != "list":
                raise InvalidConfigError(f"Config value {op.name.lower()} is not allowed for config key: {name}, "
                                         f"which is not a list")
            else:
                current = _list_items(config_text(overrides.get(name, self._values[name])))
                items = _list_items(value)
                kept = current if op is ConfigOp.APPEND else [item for item in current if item not in items]
                added = [item for item in items if item not in current] if op is ConfigOp.APPEND else []
                overrides[name] = ",".join(kept + added)
        return overrides

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._overrides!r})"


_TIMES_IN_UNITS = {
    "log.retention.ms": {"log.retention.minutes": 60_000, "log.retention.hours": 3_600_000},
    "log.roll.ms": {"log.roll.hours": 3_600_000},
}
"""The broker properties that a server.properties may give in larger units, in Kafka's order of precedence, and
the milliseconds in one of each."""


class BrokerConfig(_Config):
    """A broker's configuration (Kafka's `KafkaConfig`)."""

    _keys = BROKER_CONFIG_KEYS
    _kind = "broker"

    def __init__(self, values: Mapping[str, Any] | None = None, defaults: Mapping[str, Any] | None = None) -> None:
        """Kafka's precedence for a time a server.properties may give in several units: log.retention.ms, else
        log.retention.minutes, else log.retention.hours (a negative one meaning unlimited); log.roll.ms, else
        log.roll.hours. The unit given sets the millisecond property, as if it had been given."""
        super().__init__(values, defaults)
        given = self._overrides
        for millis, units in _TIMES_IN_UNITS.items():
            unit = next((unit for unit in units if given.get(unit) is not None), None)
            if millis not in given and unit is not None:
                self._values[millis] = given[millis] = max(given[unit] * units[unit], -1)
        wait, lag = self._values["replica.fetch.wait.max.ms"], self._values["replica.lag.time.max.ms"]
        if wait > lag:
            # Kafka's KafkaConfig refuses it so: an idle partition's follower, parked that long at the leader,
            # would be dropped from the ISR and added back over and over
            raise InvalidConfigError(f"replica.fetch.wait.max.ms ({wait}) should always be less than or equal to "
                                     f"replica.lag.time.max.ms ({lag}) to prevent frequent changes in ISR")

    def with_overrides(self, values: Mapping[str, Any]) -> BrokerConfig:
        return BrokerConfig({**self.overrides, **values})

    @property
    def broker_id(self) -> int:
        return self._values["broker.id"]

    @property
    def session_timeout_ms(self) -> int:
        return self._values["coordination.session.timeout.ms"]

    def topic_defaults(self) -> dict[str, Any]:
        """The topic configs a topic gets from this broker when it does not override them."""
        return {topic_key: self._values[broker_key] for topic_key, broker_key in TOPIC_DEFAULT_FROM_BROKER.items()}


class TopicConfig(_Config):
    """A topic's configuration: its overrides on top of the broker's defaults."""

    _keys = TOPIC_CONFIG_KEYS
    _kind = "topic"

    @classmethod
    def for_broker(cls, values: Mapping[str, Any] | None, broker: BrokerConfig) -> TopicConfig:
        return cls(values, defaults=broker.topic_defaults())

    @cached_property
    def compact(self) -> bool:
        """cleanup.policy names compact: records need keys (Kafka's LogValidator). Worked out once, as every
        produce asks."""
        return "compact" in self._values["cleanup.policy"].split(",")

    def timestamp_bounds(self, clock: Callable[[], int]) -> tuple[int, int] | None:
        """The range a produced record's own timestamp must lie in, from the leader's `clock` (epoch ms), read only
        if there is a range: None when the topic keeps log append times or limits neither side."""
        limits = self._timestamp_limits
        if limits is None:
            return None
        now = clock()
        return now - limits[0], min(now + limits[1], _LONG_MAX)

    @cached_property
    def _timestamp_limits(self) -> tuple[int, int] | None:
        """(before, after) the leader's clock, each falling back to message.timestamp.difference.max.ms while at
        its default, as in Kafka's LogConfig; worked out once, as every produce asks."""
        values = self._values
        if values["message.timestamp.type"] != "CreateTime":
            return None
        difference = values["message.timestamp.difference.max.ms"]
        before, after = values["message.timestamp.before.max.ms"], values["message.timestamp.after.max.ms"]
        limits = (difference if before == _LONG_MAX else before, difference if after == _LONG_MAX else after)
        return None if limits == (_LONG_MAX, _LONG_MAX) else limits

    @property
    def delete(self) -> bool:
        """cleanup.policy names delete: retention deletes old segments, and DeleteRecords may move the log start."""
        return "delete" in self._values["cleanup.policy"].split(",")
