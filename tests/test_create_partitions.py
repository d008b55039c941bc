"""Adding partitions: Kafka's assignment continues, new partitions come online, old data stays; bad input refused."""

from __future__ import annotations

from typing import Any

import pytest

from kafkalite.cluster import Cluster
from kafkalite.common import errors
from kafkalite.common.records import Record
from kafkalite.network.requests import CreatePartitionsRequest, CreatePartitionsTopic
from kafkalite.testing.checks import assert_replicas_agree, metadata_agrees


async def test_adding_partitions_brings_them_online_and_keeps_the_old_ones(autojump_clock: Any) -> None:
    async with Cluster(brokers=3, config={"zookeeper.session.timeout.ms": 6000}, seed=1) as cluster:
        await cluster.create_topic("t", partitions=2, replication_factor=2)
        await cluster.produce("t", 0, [Record(None, b"old")])
        await cluster.create_partitions("t", 5)
        described = await cluster.describe_topic("t")
        assert [d.partition for d in described] == [0, 1, 2, 3, 4]
        for d in described:
            assert len(d.replicas) == 2 and len(set(d.replicas)) == 2
            assert d.leader in d.replicas and sorted(d.isr) == sorted(d.replicas)
        assert {d.leader for d in described} == {1, 2, 3}
        assert await cluster.produce("t", 4, [Record(None, b"new")]) == 0
        assert [r.value for _, r in await cluster.fetch_all("t", 0)] == [b"old"]
        for broker_id in cluster.live_broker_ids:
            response = await cluster.metadata(broker_id, ["t"])
            assert len(response.topics[0].partitions) == 5
        await cluster.wait_until(lambda: metadata_agrees(cluster, "t", 5), timeout=30)
        for p in (0, 4):
            await assert_replicas_agree(cluster, "t", p)


async def test_bad_partition_counts_are_refused_and_nothing_changes(autojump_clock: Any) -> None:
    async with Cluster(brokers=2, seed=2) as cluster:
        await cluster.create_topic("t", partitions=3, replication_factor=2)
        await cluster.produce("t", 0, [Record(None, b"kept")])
        for count, error in ((3, errors.InvalidPartitionsError), (1, errors.InvalidPartitionsError)):
            with pytest.raises(error) as info:
                await cluster.create_partitions("t", count)
            assert "must be larger" in info.value.message
        with pytest.raises(errors.UnknownTopicOrPartitionError):
            await cluster.create_partitions("missing", 4)
        response = await cluster.transport.send("client", cluster.controller_id, CreatePartitionsRequest(
            [CreatePartitionsTopic("t", 4, [[1, 1]])]))
        assert response.results[0].error_code == errors.INVALID_REPLICA_ASSIGNMENT.code
        response = await cluster.transport.send("client", cluster.controller_id, CreatePartitionsRequest(
            [CreatePartitionsTopic("t", 4, [[1, 7]])]))
        assert response.results[0].error_code == errors.INVALID_REPLICA_ASSIGNMENT.code
        assert len(await cluster.describe_topic("t")) == 3
        assert await cluster.produce("t", 0, [Record(None, b"after")]) == 1
        assert [r.value for _, r in await cluster.fetch_all("t", 0)] == [b"kept", b"after"]


async def test_new_partitions_on_a_broker_that_is_down_are_refused(autojump_clock: Any) -> None:
    """As Kafka, which checks the new partitions' replicas against the brokers registered: one on a broker that is
    down was accepted when that broker already held a replica of the topic, and with no live replica its
    partition had no leader."""
    async with Cluster(brokers=3, config={"zookeeper.session.timeout.ms": 6000}, seed=3) as cluster:
        await cluster.create_topic("t", partitions=1, replication_factor=3)
        down = next(b for b in cluster.broker_ids if b != cluster.controller_id)
        up = next(b for b in cluster.broker_ids if b not in (down, cluster.controller_id))
        await cluster.kill_broker(down)
        await cluster.wait_until(lambda: down not in cluster.controller().context.live_brokers, timeout=30)
        response = await cluster.transport.send("client", cluster.controller_id, CreatePartitionsRequest(
            [CreatePartitionsTopic("t", 2, [[down, up, cluster.controller_id]])]))
        assert response.results[0].error_code == errors.INVALID_REPLICA_ASSIGNMENT.code
        assert f"[{down}]" in response.results[0].error_message
        assert len(await cluster.describe_topic("t")) == 1
        await cluster.restart_broker(down)
        await cluster.wait_until(lambda: down in cluster.controller().context.live_brokers, timeout=30)
        response = await cluster.transport.send("client", cluster.controller_id, CreatePartitionsRequest(
            [CreatePartitionsTopic("t", 2, [[down, up, cluster.controller_id]])]))
        assert response.results[0].error_code == errors.NONE.code
        assert await cluster.wait_for_leader("t", 1) == down
