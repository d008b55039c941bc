"""Compacted topics (cleanup.policy=compact) on a real three-broker cluster.

kafkalite's cleaner never runs: a compacted topic keeps every record, which Kafka's guarantee (at least the latest
record of each key survives) allows; a Kafka log is in that state until its cleaner gets to it. What Kafka does
enforce, kafkalite does: records need a key, retention deletes nothing, DeleteRecords is refused.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio

from kafkalite.client import Admin, Producer, TopicPartition
from kafkalite.client.admin import NewTopic
from kafkalite.cluster import Cluster
from kafkalite.common import errors
from kafkalite.common.records import Record
from kafkalite.common.types import GROUP_METADATA_TOPIC_NAME
from kafkalite.common.config import BROKER_CONFIG_KEYS

pytestmark = pytest.mark.usefixtures("autojump_clock")

RETENTION_CHECK_S = BROKER_CONFIG_KEYS["log.retention.check.interval.ms"].default / 1000

# Connect's and Schema Registry's internal topics, and stream processors' changelogs, are created like this.
CHANGELOG = {"cleanup.policy": "compact", "min.compaction.lag.ms": "0", "delete.retention.ms": "86400000",
             "min.cleanable.dirty.ratio": "0.01", "max.compaction.lag.ms": "60000", "compression.type": "lz4"}
# Segments that roll every second and would all be past retention by the time it runs, were it to run.
SHORT_LIVED = {"retention.ms": "1000", "segment.ms": "1000", "retention.bytes": "1"}


def log_starts(cluster: Cluster, topic: str) -> set[int]:
    return {cluster.log_manager(b).get_log(TopicPartition(topic, 0)).log_start_offset  # type: ignore[union-attr]
            for b in cluster.live_broker_ids}


async def test_a_compacted_topic_takes_keyed_records_and_tombstones_and_refuses_records_without_a_key() -> None:
    async with Cluster(brokers=3, seed=5) as cluster:
        async with Admin(cluster) as admin:
            await admin.create_topics([NewTopic("changelog", 1, 3, configs=CHANGELOG)])
            described = (await admin.describe_configs(topics=["changelog"]))[("topic", "changelog")]
        assert {name: described[name].value for name in CHANGELOG} == CHANGELOG
        async with Producer(cluster, {"acks": "all"}) as producer:
            kept = [await (await producer.send("changelog", b"v1", key=b"k")),
                    await (await producer.send("changelog", None, key=b"k"))]  # a tombstone
            with pytest.raises(errors.InvalidRecordError,
                               match="Compacted topic cannot accept message without key in topic partition "
                                     "changelog-0"):
                await (await producer.send("changelog", b"no key"))
            after = await (await producer.send("changelog", b"v2", key=b"k"))
        assert [m.offset for m in kept + [after]] == [0, 1, 2]
        assert [(r.key, r.value) for _, r in await cluster.fetch("changelog", 0, 0)] == [
            (b"k", b"v1"), (b"k", None), (b"k", b"v2")]  # the refused record was never appended


@pytest.mark.parametrize(("policy", "deletes"), [("compact", False), ("delete,compact", True), ("delete", True)])
async def test_retention_deletes_segments_only_under_the_delete_policy(policy: str, deletes: bool) -> None:
    async with Cluster(brokers=3, seed=6) as cluster:
        await cluster.create_topic("t", 1, 3, config={**SHORT_LIVED, "cleanup.policy": policy})
        for i in range(3):
            await cluster.produce("t", 0, [Record(b"k%d" % i, b"v%d" % i)])
            await trio.sleep(2)  # the next append rolls a new segment
        await trio.sleep(RETENTION_CHECK_S + 1)
        assert log_starts(cluster, "t") == ({3} if deletes else {0})  # the active segment too, as in Kafka
        remaining = [r.value for _, r in await cluster.fetch("t", 0, 3 if deletes else 0)]
        assert remaining == ([] if deletes else [b"v0", b"v1", b"v2"])


async def test_a_topic_altered_to_compact_stops_deleting_and_refuses_delete_records() -> None:
    async with Cluster(brokers=3, seed=7) as cluster:
        await cluster.create_topic("t", 1, 3, config=SHORT_LIVED)
        async with Admin(cluster) as admin:
            await admin.alter_topic_configs({"t": {"cleanup.policy": "compact"}}, incremental=True)
            for i in range(3):
                await cluster.produce("t", 0, [Record(b"k", b"v%d" % i)])
                await trio.sleep(2)
            await trio.sleep(RETENTION_CHECK_S + 1)
            assert log_starts(cluster, "t") == {0}
            with pytest.raises(errors.PolicyViolationError,
                               match="Records of partition t-0 can not be deleted due to the configured policy"):
                await admin.delete_records({TopicPartition("t", 0): 2})
        assert log_starts(cluster, "t") == {0}
        assert len(await cluster.fetch("t", 0, 0)) == 3


async def test_the_offsets_topic_is_compacted_as_in_kafka() -> None:
    async with Cluster(brokers=3, seed=8) as cluster:
        await cluster.create_topic("t", 1, 3)
        async with Admin(cluster) as admin:
            await admin.alter_group_offsets("g", {TopicPartition("t", 0): 0})  # creates __consumer_offsets
            described: Any = await admin.describe_configs(topics=[GROUP_METADATA_TOPIC_NAME])
            assert described[("topic", GROUP_METADATA_TOPIC_NAME)]["cleanup.policy"].value == "compact"
            assert (await admin.list_group_offsets("g"))[TopicPartition("t", 0)].committed == 0


async def test_log_cleanup_policy_in_the_brokers_config_compacts_every_topic_that_does_not_say_otherwise() -> None:
    async with Cluster(brokers=3, seed=8, config={"log.cleanup.policy": "compact"}) as cluster:
        await cluster.create_topic("compacted", 1, 3)
        await cluster.create_topic("deleting", 1, 3, config={"cleanup.policy": "delete"})
        with pytest.raises(errors.InvalidRecordError, match="Compacted topic cannot accept message without key"):
            await cluster.produce("compacted", 0, [Record(None, b"no key")])
        assert await cluster.produce("deleting", 0, [Record(None, b"no key")]) == 0
        async with Admin(cluster) as admin:
            described = (await admin.describe_configs(topics=["compacted"]))[("topic", "compacted")]
        assert described["cleanup.policy"].value == "compact"
