"""Kafka's bounds on a produced record's own timestamp (message.timestamp.before.max.ms, after.max.ms, and the older
difference.max.ms), on a real three-broker cluster.

A record whose CreateTime timestamp lies further from the leader's clock than the topic allows is INVALID_TIMESTAMP,
in Kafka's words, and nothing of its request to that partition is appended. Log append times are the broker's own,
so a LogAppendTime topic checks nothing, and a batch a producer marked as stamped with one is refused.
"""

from __future__ import annotations

import re

import pytest
import trio

from kafkalite.client import Admin, Producer, TopicPartition
from kafkalite.client.admin import NewTopic
from kafkalite.cluster import Cluster
from kafkalite.common import errors
from kafkalite.common.clock import now_ms
from kafkalite.common.records import NO_TIMESTAMP, Record, RecordBatch

pytestmark = pytest.mark.usefixtures("autojump_clock")

HOUR, MINUTE = 3_600_000, 60_000
LIMITED = {"message.timestamp.before.max.ms": str(HOUR), "message.timestamp.after.max.ms": str(MINUTE)}


def out_of_range(timestamp: int, offset: int, low: int, high: int) -> str:
    return re.escape(f"Timestamp {timestamp} of message with offset {offset} is out of range. The timestamp should "
                     f"be within [{low}, {high}]")


def log_ends(cluster: Cluster, topic: str) -> set[int]:
    return {cluster.log_manager(b).get_log(TopicPartition(topic, 0)).log_end_offset  # type: ignore[union-attr]
            for b in cluster.live_broker_ids}


async def test_records_older_or_newer_than_the_topic_allows_are_refused_and_nothing_of_them_is_appended() -> None:
    async with Cluster(brokers=3, seed=11) as cluster:
        await cluster.create_topic("t", 1, 3, config=LIMITED)
        now = now_ms()  # the mock clock stands still while nothing sleeps: the leader reads the same
        await cluster.produce("t", 0, [Record(b"k", b"in range", now - HOUR), Record(b"k", b"now", now + MINUTE)])
        with pytest.raises(errors.InvalidTimestampError, match=out_of_range(now - HOUR - 1, 0, now - HOUR,
                                                                            now + MINUTE)):
            await cluster.produce("t", 0, [Record(b"k", b"stale", now - HOUR - 1), Record(b"k", b"fine", now)])
        with pytest.raises(errors.InvalidTimestampError, match=out_of_range(now + MINUTE + 1, 1, now - HOUR,
                                                                            now + MINUTE)):
            await cluster.produce("t", 0, [Record(b"k", b"fine", now), Record(b"k", b"ahead", now + MINUTE + 1)])
        assert await cluster.produce("t", 0, [Record(b"k", b"untimed", NO_TIMESTAMP)]) == 2  # no timestamp: no check
        assert [r.value for _, r in await cluster.fetch("t", 0, 0)] == [b"in range", b"now", b"untimed"]
        assert log_ends(cluster, "t") == {3}


async def test_the_record_named_is_the_first_out_of_range_even_below_the_batch_first_timestamp() -> None:
    """A batch's header gives its first and its max timestamp; a record between may be older than both."""
    async with Cluster(brokers=3, seed=12) as cluster:
        await cluster.create_topic("t", 1, 3, config=LIMITED)
        now = now_ms()
        batch = RecordBatch.from_records([Record(None, b"a", now), Record(None, b"b", now - 2 * HOUR),
                                          Record(None, b"c", now - 3 * HOUR), Record(None, b"d", now)])
        assert (batch.first_timestamp, batch.max_timestamp) == (now, now)
        with pytest.raises(errors.InvalidTimestampError, match=out_of_range(now - 2 * HOUR, 1, now - HOUR,
                                                                            now + MINUTE)):
            await cluster.produce("t", 0, batch)
        assert log_ends(cluster, "t") == {0}


@pytest.mark.parametrize(("configs", "low", "high"), [
    ({"message.timestamp.difference.max.ms": str(HOUR)}, -HOUR, HOUR),
    ({"message.timestamp.difference.max.ms": str(HOUR), "message.timestamp.after.max.ms": str(MINUTE)}, -HOUR, MINUTE),
    ({"message.timestamp.before.max.ms": "0"}, 0, (1 << 63) - 1),
])
async def test_the_older_difference_setting_bounds_each_side_left_at_its_default(configs: dict[str, str], low: int,
                                                                                  high: int) -> None:
    async with Cluster(brokers=3, seed=13) as cluster:
        await cluster.create_topic("t", 1, 3, config=configs)
        now = now_ms()
        bounds = (now + low, min(now + high, (1 << 63) - 1))
        await cluster.produce("t", 0, [Record(None, b"lowest", bounds[0])])
        for timestamp in (bounds[0] - 1, bounds[1] + 1):
            if timestamp <= (1 << 63) - 1:
                with pytest.raises(errors.InvalidTimestampError, match=out_of_range(timestamp, 0, *bounds)):
                    await cluster.produce("t", 0, [Record(None, b"outside", timestamp)])
        assert [r.value for _, r in await cluster.fetch("t", 0, 0)] == [b"lowest"]


async def test_a_log_append_time_topic_checks_nothing_as_the_leader_stamps_the_records() -> None:
    async with Cluster(brokers=3, seed=14) as cluster:
        await cluster.create_topic("t", 1, 3, config={**LIMITED, "message.timestamp.type": "LogAppendTime"})
        now = now_ms()
        await cluster.produce("t", 0, [Record(None, b"old", now - 10 * HOUR)])
        [(_, record)] = await cluster.fetch("t", 0, 0)
        assert (record.value, record.timestamp) == (b"old", now)


async def test_limits_are_described_altered_on_a_live_topic_and_validated() -> None:
    async with Cluster(brokers=3, seed=15) as cluster:
        async with Admin(cluster) as admin:
            await admin.create_topics([NewTopic("t", 1, 3)])
            described = (await admin.describe_configs(topics=["t"]))[("topic", "t")]
            names = ("message.timestamp.before.max.ms", "message.timestamp.after.max.ms",
                     "message.timestamp.difference.max.ms")
            assert {(described[n].value, described[n].is_default) for n in names} == {(str((1 << 63) - 1), True)}
            now = now_ms()
            await cluster.produce("t", 0, [Record(None, b"a day old", now - 24 * HOUR)])
            await admin.alter_topic_configs({"t": {"message.timestamp.before.max.ms": str(HOUR)}}, incremental=True)
            await trio.sleep(1)  # every replica has the new config
            now = now_ms()
            with pytest.raises(errors.InvalidTimestampError, match=out_of_range(now - 24 * HOUR, 0, now - HOUR,
                                                                                (1 << 63) - 1)):
                await cluster.produce("t", 0, [Record(None, b"a day old", now - 24 * HOUR)])
            for name in names:
                with pytest.raises(errors.InvalidConfigError, match=f"{name}.*must be at least 0"):
                    await admin.alter_topic_configs({"t": {name: "-1"}}, incremental=True)


async def test_the_native_producer_fails_the_send_and_keeps_sending_others() -> None:
    async with Cluster(brokers=3, seed=16) as cluster:
        await cluster.create_topic("t", 1, 3, config=LIMITED)
        async with Producer(cluster, {"acks": "all"}) as producer:
            with pytest.raises(errors.InvalidTimestampError, match="is out of range"):
                await (await producer.send("t", b"stale", timestamp=now_ms() - 2 * HOUR))
            sent = await (await producer.send("t", b"current"))
        assert sent.offset == 0
        assert [r.value for _, r in await cluster.fetch("t", 0, 0)] == [b"current"]


@pytest.mark.parametrize("timestamp_type", ["CreateTime", "LogAppendTime"])
async def test_a_batch_a_producer_marked_as_log_append_time_is_refused_on_any_topic(timestamp_type: str) -> None:
    """Only a leader stamps a batch with its clock: a producer's claim to have done so would give consumers the
    producer's time as the broker's."""
    async with Cluster(brokers=3, seed=17) as cluster:
        await cluster.create_topic("t", 1, 3, config={"message.timestamp.type": timestamp_type})
        stamped = RecordBatch.from_records([Record(None, b"stamped")]).with_log_append_time(1_000)
        refusal = ("Invalid timestamp type in message at offset 0. Producer should not set timestamp type to "
                   "LogAppendTime")
        with pytest.raises(errors.InvalidTimestampError, match=refusal):
            await cluster.produce("t", 0, stamped)
        assert await cluster.produce("t", 0, [Record(None, b"plain")]) == 0
        assert [r.value for _, r in await cluster.fetch("t", 0, 0)] == [b"plain"]


async def test_the_broker_properties_set_the_default_of_every_topic_that_does_not_override_it() -> None:
    """log.message.timestamp.* in the brokers' config, as in a server.properties: a topic without its own bound
    takes theirs; one with its own keeps it."""
    async with Cluster(brokers=3, seed=18, config={"log.message.timestamp.before.max.ms": HOUR}) as cluster:
        await cluster.create_topic("bounded", 1, 3)
        await cluster.create_topic("own", 1, 3, config={"message.timestamp.before.max.ms": str(24 * HOUR)})
        now = now_ms()
        with pytest.raises(errors.InvalidTimestampError, match=out_of_range(now - 2 * HOUR, 0, now - HOUR,
                                                                            (1 << 63) - 1)):
            await cluster.produce("bounded", 0, [Record(None, b"two hours old", now - 2 * HOUR)])
        assert await cluster.produce("own", 0, [Record(None, b"two hours old", now - 2 * HOUR)]) == 0
    with pytest.raises(errors.InvalidConfigError, match="log.message.timestamp.after.max.ms: must be at least 0"):
        Cluster(brokers=1, config={"log.message.timestamp.after.max.ms": -1})
