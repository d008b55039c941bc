"""Retention on a running cluster, as Kafka's: what expires goes every log.retention.check.interval.ms, the segment
being written included, and never a record the high watermark has not passed."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from kafkalite.client import Admin, Consumer, Producer, TopicPartition
from kafkalite.cluster import Cluster
from kafkalite.common.errors import RecordListTooLargeError
from kafkalite.common.records import Record, RecordBatch

pytestmark = pytest.mark.usefixtures("autojump_clock")

TP = TopicPartition("t", 0)


def log_starts(cluster: Cluster) -> dict[int, int]:
    return {b: cluster.log_manager(b).get_log(TP).log_start_offset for b in cluster.live_broker_ids}  # type: ignore


async def test_an_expired_topic_is_emptied_even_with_one_segment(autojump_clock: Any) -> None:
    """A test topic never fills its first segment (1 GiB, a week): with only older segments deletable, retention.ms
    deleted nothing on it. As in Kafka, the expired active segment goes too, a new one rolled at the log end."""
    async with Cluster(brokers=3, config={"log.retention.check.interval.ms": 1000}, seed=3) as cluster:
        await cluster.create_topic("t", 1, 3, {"retention.ms": 5000})
        async with Producer(cluster, {"acks": "all"}) as producer:
            for value in (b"a", b"b", b"c"):
                await (await producer.send("t", value, partition=0))
            await trio.sleep(4)
            assert log_starts(cluster) == {1: 0, 2: 0, 3: 0}  # not expired yet
            await trio.sleep(3)
            assert log_starts(cluster) == {1: 3, 2: 3, 3: 3}
            async with Admin(cluster) as admin:
                offsets = await admin.list_offsets({TP: "earliest"})
                assert offsets[TP].offset == 3 == (await admin.list_offsets({TP: "latest"}))[TP].offset
            assert (await (await producer.send("t", b"d", partition=0))).offset == 3
        async with Consumer(cluster, {"auto.offset.reset": "earliest"}) as consumer:
            consumer.assign([TP])
            consumer.seek(TP, 0)  # gone: reset to the earliest there is
            records = []
            with trio.fail_after(30):
                while not records:
                    records = await consumer.poll(1)
            assert [(r.offset, r.value) for r in records] == [(3, b"d")]


async def test_records_the_high_watermark_has_not_passed_are_never_deleted(autojump_clock: Any) -> None:
    """An acks=1 write the follower has not fetched yet is uncommitted: retention deleted it on the leader all the
    same, so the follower could never get it and the log start passed the high watermark."""
    config = {"log.retention.check.interval.ms": 1000, "replica.lag.time.max.ms": 60000}
    async with Cluster(brokers=2, config=config, seed=4) as cluster:
        size = RecordBatch.from_records([Record(None, b"x" * 30)]).size_in_bytes  # a segment per batch
        await cluster.create_topic("t", 1, 2, {"segment.bytes": size, "retention.bytes": 0})
        await cluster.produce("t", 0, [Record(None, b"x" * 30)], acks=-1)
        await trio.sleep(1)  # the follower hears of the high watermark too
        leader = cluster.leader_for("t", 0)
        follower = next(b for b in cluster.live_broker_ids if b != leader)
        cluster.partition_network([leader], [follower])
        for _ in range(4):
            await cluster.produce("t", 0, [Record(None, b"y" * 30)], acks=1)
        await trio.sleep(3)  # retention ran on both, twice
        assert cluster.high_watermark("t", 0) == 1
        assert log_starts(cluster) == {leader: 1, follower: 1}  # the committed record went, no other
        cluster.heal()
        with trio.fail_after(30):
            while cluster.log_manager(follower).get_log(TP).log_end_offset < 5:  # type: ignore[union-attr]
                await trio.sleep(0.1)
        await trio.sleep(3)
        assert cluster.high_watermark("t", 0) == 5
        assert log_starts(cluster) == {leader: 5, follower: 5}


async def test_a_batch_larger_than_a_segment_is_refused_with_kafkas_error(autojump_clock: Any) -> None:
    async with Cluster(brokers=1) as cluster:
        await cluster.create_topic("t", 1, 1, {"segment.bytes": 100})
        with pytest.raises(RecordListTooLargeError, match="exceeds the maximum configured segment size of 100"):
            await cluster.produce("t", 0, [Record(None, b"x" * 300)])
        assert await cluster.produce("t", 0, [Record(None, b"x")]) == 0  # nothing appended; the partition serves on


async def test_a_config_changed_while_a_broker_was_down_rules_its_log_once_it_is_back(autojump_clock: Any) -> None:
    """The broker's logs outlive its restart, as a Kafka broker's log directory does; the topic config read when it
    hosts the partition again, not the one its log was made with, sets retention and the largest batch taken."""
    async with Cluster(brokers=3, config={"log.retention.check.interval.ms": 1000}, seed=1) as cluster:
        await cluster.create_topic("t", 1, 3)
        preferred = cluster.leader_for("t", 0)
        await cluster.kill_broker(preferred)
        await cluster.wait_for_leader("t", 0, not_on=[preferred])
        async with Admin(cluster) as admin:
            await admin.alter_topic_configs({"t": {"retention.ms": 3000, "max.message.bytes": 3_000_000}},
                                            incremental=True)
        await cluster.restart_broker(preferred)
        await trio.sleep(5)  # back in every ISR
        await cluster.elect_preferred_leaders()
        await trio.sleep(1)  # the LeaderAndIsr reaches the brokers
        assert cluster.leader_for("t", 0) == preferred
        for value in (b"a", b"b", b"c"):
            await cluster.produce("t", 0, [Record(None, value)], acks=-1)
        await trio.sleep(10)
        assert log_starts(cluster) == {1: 3, 2: 3, 3: 3}  # the leader expired them too, and led the followers
        big = await cluster.produce("t", 0, [Record(None, b"x" * 1_500_000)], acks=-1)  # above the 1 MiB default
        assert big == 3


async def test_config_change_notifications_are_purged_once_every_broker_has_had_time_to_read_them(
        autojump_clock: Any) -> None:
    """Kafka's brokers delete `/config/changes` notifications 15 minutes old when they process the next one: one
    znode per change would otherwise pile up for the cluster's life, every broker listing them all at each change."""
    from kafkalite.coordination.kafka_zk import CONFIG_CHANGES_PATH

    async with Cluster(brokers=3, seed=1) as cluster:
        await cluster.create_topic("t", 1, 3)
        zk = cluster.broker(1).zk
        async with Admin(cluster) as admin:
            for retention_ms in (100_000, 200_000, 300_000):
                await admin.alter_topic_configs({"t": {"retention.ms": retention_ms}})
            await trio.sleep(1)
            assert len(zk.get_children(CONFIG_CHANGES_PATH)) == 3
            await trio.sleep(15 * 60)
            await admin.alter_topic_configs({"t": {"retention.ms": 400_000}})
            await trio.sleep(1)
        assert len(zk.get_children(CONFIG_CHANGES_PATH)) == 1
        assert {cluster.log_manager(b).get_log(TP).config.retention_ms for b in (1, 2, 3)} == {400_000}  # type: ignore
