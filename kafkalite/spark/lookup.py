"""What the planning side asks the cluster: which partitions a query reads, and offsets by position or time.

A `ClusterLookup` keeps one `Admin` over TCP open for its questions (`bridge.KeptOpen`), as Spark's Kafka source
keeps an admin client per query: its streaming runner asks several times per micro-batch. Nothing else is kept:
the partitions and offsets are asked for afresh each time, and a question that fails closes the client, so the
next opens a new one. The admin client retries leader moves and unreachable brokers until
default.api.timeout.ms, so a failover between two micro-batches delays planning instead of failing the query.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping

from kafkalite.client import Admin, TopicPartition
from kafkalite.client.config import ADMIN_CONFIG_KEYS
from kafkalite.common import errors
from kafkalite.common.errors import KafkaError
from kafkalite.spark import bridge
from kafkalite.spark.options import LATEST, POSITION_NAMES, OffsetSpec, OptionError, SourceOptions, Subscription

log = logging.getLogger(__name__)

def _admin(bootstrap: str, client_config: Mapping[str, str]) -> Admin:
    """An admin client over TCP, with the `kafka.*` settings an admin client has (the rest are the consumer's)."""
    return Admin(bootstrap, {key: value for key, value in client_config.items() if key in ADMIN_CONFIG_KEYS})


def check_reachable(bootstrap: str, client_config: Mapping[str, str]) -> None:
    """One metadata request, failing at once (naming the bootstrap option) if no broker answers."""
    async def ask() -> None:
        async with _admin(bootstrap, client_config) as admin:
            await admin.metadata.fetch([])

    try:
        bridge.run(ask)
    except KafkaError as exc:
        raise OptionError("kafka.bootstrap.servers", bootstrap, f"the cluster cannot be reached ({exc})") from None


class ClusterLookup:
    """Blocking lookups against the cluster that `options` name, through an admin client kept open between them.

    Pickled (Spark sends readers to its executors), it carries only the options: a copy opens its own client.
    """

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self._client = bridge.KeptOpen(lambda: _admin(options.bootstrap, options.client_config))

    def __getstate__(self) -> dict[str, object]:
        return {"options": self.options}

    def __setstate__(self, state: dict[str, object]) -> None:
        self.__init__(state["options"])  # type: ignore[misc, arg-type]  # as made, with a client of its own

    def partitions(self) -> set[TopicPartition]:
        """The partitions the subscription covers now; topics that do not exist (yet) contribute none."""
        subscription = self.options.subscription
        if subscription.partitions:
            return set(subscription.partitions)
        listed = self._listed(list(subscription.topics) if subscription.pattern is None else None)
        return {tp for tp in listed if subscription.covers(tp)}

    def _listed(self, topics: list[str] | None) -> set[TopicPartition]:
        """The partitions of `topics` (None: of every topic but internal ones) that the cluster has."""
        async def ask(admin: Admin) -> set[TopicPartition]:
            response = await admin.metadata.fetch(topics)
            return {TopicPartition(topic.name, p.partition) for topic in response.topics
                    if topic.error_code == errors.NONE.code and not topic.is_internal for p in topic.partitions}

        return self._client.run(ask)

    def offsets(self, specs: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        """Offsets for EARLIEST, LATEST or a timestamp per partition; -1 where no record is at or after the time."""
        async def ask(admin: Admin) -> dict[TopicPartition, int]:
            found = await admin.list_offsets({tp: POSITION_NAMES.get(spec, spec) for tp, spec in specs.items()})
            return {tp: info.offset for tp, info in found.items()}

        return self._client.run(ask) if specs else {}

    def resolve(self, spec: OffsetSpec, partitions: Iterable[TopicPartition], *,
                default: int, starting: bool) -> dict[TopicPartition, int]:
        """Concrete offsets for `partitions` as `spec` says; partitions it does not name take `default`.

        A timestamp after every record of a partition resolves to its latest offset, except for a starting
        timestamp under startingOffsetsByTimestampStrategy=error, which fails naming the partition, as in Spark.
        """
        partitions = set(partitions)
        _check_names_every_partition(spec, partitions)
        offsets: dict[TopicPartition, int] = {}
        timestamps: dict[TopicPartition, int] = {}
        for tp in partitions:
            if spec.timestamp is not None:
                timestamps[tp] = spec.timestamp
            elif spec.timestamps is not None and tp in spec.timestamps:
                timestamps[tp] = spec.timestamps[tp]
            elif spec.offsets is not None and tp in spec.offsets:
                offsets[tp] = spec.offsets[tp]
            else:
                offsets[tp] = default if spec.position is None else spec.position
        found = self.offsets({**{tp: offset for tp, offset in offsets.items() if offset < 0}, **timestamps})
        missing = sorted(tp for tp in timestamps if found[tp] < 0)
        if missing and starting and self.options.by_timestamp_strategy == "error":
            raise OptionError(spec.option, spec.value, f"no record of {missing[0]} has timestamp "
                              f"{timestamps[missing[0]]} or a later one; set startingOffsetsByTimestampStrategy=latest "
                              "to start at the end instead")
        found.update(self.offsets({tp: LATEST for tp in missing}))
        return {**offsets, **found}

    def check_named_partitions(self, specs: list[OffsetSpec | None], subscription: Subscription) -> None:
        """Fail if an offsets option or `assign` names a partition the cluster lacks or the query does not read."""
        named: dict[TopicPartition, OffsetSpec | Subscription] = {tp: subscription for tp in subscription.partitions}
        for spec in specs:
            if spec is not None:
                named.update(dict.fromkeys(spec.named_partitions(), spec))
        if not named:
            return
        existing = self._listed(sorted({tp.topic for tp in named}))
        for tp, source in sorted(named.items()):
            if tp not in existing:
                raise OptionError(source.option, source.value,
                                  f"partition {tp.partition} of topic {tp.topic!r} does not exist")
            if not subscription.covers(tp):
                raise OptionError(source.option, source.value,
                                  f"topic {tp.topic!r} is not one the query subscribes to")
        read = self.partitions()
        for spec in specs:
            if spec is not None:
                _check_names_every_partition(spec, read)


def _check_names_every_partition(spec: OffsetSpec, partitions: set[TopicPartition]) -> None:
    """Offsets or timestamps per partition must name each partition the query reads, as Spark's Kafka source
    asserts: filling in the others would silently start them elsewhere than the pipeline's author meant."""
    named = spec.offsets if spec.offsets is not None else spec.timestamps
    if named is not None and set(named) != partitions:
        missing = ", ".join(f"{tp.topic}-{tp.partition}" for tp in sorted(partitions - set(named)))
        raise OptionError(spec.option, spec.value, f"name every partition the query reads, as in Spark's Kafka source "
                          f"(missing: {missing}; -2 means earliest, -1 latest)")
