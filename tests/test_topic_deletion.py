"""Topic deletion end to end: replicas deleted, metadata forgotten everywhere, re-creation from offset 0."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from kafkalite.cluster import Cluster
from kafkalite.common import errors
from kafkalite.common.records import Record
from kafkalite.common.types import TopicPartition
from kafkalite.controller.replica_state_machine import ReplicaState
from kafkalite.network.requests import DeleteTopicsRequest

CONFIG = {"zookeeper.session.timeout.ms": 6000}


def values(n: int, prefix: str = "v") -> list[Record]:
    return [Record(None, f"{prefix}{i}".encode()) for i in range(n)]


def assert_gone(cluster: Cluster, topic: str, partitions: int) -> None:
    assert topic not in cluster.topics()
    for broker_id in cluster.live_broker_ids:
        assert not cluster.broker(broker_id).metadata_cache.contains_topic(topic)
    for broker_id in cluster.broker_ids:
        for p in range(partitions):
            assert cluster.log_manager(broker_id).get_log(TopicPartition(topic, p)) is None


async def test_delete_with_every_broker_up_then_recreate_from_offset_zero(autojump_clock: Any) -> None:
    async with Cluster(brokers=3, config=CONFIG, seed=1) as cluster:
        await cluster.create_topic("t", partitions=3, replication_factor=3)
        await cluster.create_topic("keep", partitions=1, replication_factor=3)
        for p in range(3):
            await cluster.produce("t", p, values(5))
        await cluster.produce("keep", 0, values(2))
        await cluster.delete_topic("t")
        assert_gone(cluster, "t", 3)
        with pytest.raises(errors.UnknownTopicOrPartitionError):
            await cluster.produce("t", 0, values(1))
        with pytest.raises(errors.UnknownTopicOrPartitionError):
            await cluster.delete_topic("t")
        await cluster.create_topic("t", partitions=1, replication_factor=3)
        assert await cluster.produce("t", 0, values(1, "again")) == 0
        assert [r.value for _, r in await cluster.fetch_all("t", 0)] == [b"again0"]
        assert [r.value for _, r in await cluster.fetch_all("keep", 0)] == [b"v0", b"v1"]  # untouched


async def test_deletion_waits_for_a_dead_broker_and_completes_when_it_returns(autojump_clock: Any) -> None:
    async with Cluster(brokers=3, config=CONFIG, seed=2) as cluster:
        await cluster.create_topic("t", partitions=2, replication_factor=3)
        await cluster.produce("t", 0, values(3))
        down = next(b for b in cluster.broker_ids if b != cluster.controller_id)
        await cluster.kill_broker(down)
        await cluster.wait_until(lambda: down not in cluster.controller().context.live_brokers, timeout=30)
        with pytest.raises(errors.RequestTimedOutError):
            await cluster.delete_topic("t", timeout=5)
        context = cluster.controller().context
        assert {context.replica_states[r] for r in context.replicas_on_brokers({down})} == \
            {ReplicaState.DELETION_INELIGIBLE}
        others = context.replicas_on_brokers(set(cluster.live_broker_ids))
        assert {context.replica_states[r] for r in others} == {ReplicaState.DELETION_SUCCESSFUL}
        assert "t" in cluster.topics()
        await cluster.restart_broker(down)
        await cluster.wait_until(lambda: "t" not in cluster.topics(), timeout=60)
        await cluster.wait_until(lambda: cluster.log_manager(down).get_log(TopicPartition("t", 0)) is None,
                                 timeout=30)
        assert_gone(cluster, "t", 2)


async def test_deletion_survives_a_controller_failover(autojump_clock: Any) -> None:
    async with Cluster(brokers=3, config=CONFIG, seed=3) as cluster:
        await cluster.create_topic("t", partitions=2, replication_factor=2)
        await cluster.produce("t", 0, values(3))
        old = cluster.controller_id
        holder = next(b for b in cluster.broker_ids if b != old)
        cluster.pause_broker(holder)  # its replicas cannot be deleted while it is frozen
        async with trio.open_nursery() as nursery:
            nursery.start_soon(cluster.controller().handle_request, DeleteTopicsRequest(["t"], 1000), None)
            await trio.sleep(0.5)
            await cluster.kill_broker(old)
            cluster.resume_broker(holder)
        await cluster.wait_until(lambda: cluster.controller_id not in (None, old), timeout=60)
        await cluster.restart_broker(old)  # the new controller resumes the deletion; it completes once all are back
        await cluster.wait_until(lambda: "t" not in cluster.topics(), timeout=60)
        await cluster.wait_until(lambda: all(cluster.log_manager(b).get_log(TopicPartition("t", p)) is None
                                             for b in cluster.broker_ids for p in range(2)), timeout=60)
        assert_gone(cluster, "t", 2)


async def test_delete_errors(autojump_clock: Any) -> None:
    async with Cluster(brokers=1, config={"delete.topic.enable": False}, seed=4) as cluster:
        await cluster.create_topic("t", partitions=1, replication_factor=1)
        await cluster.produce("t", 0, values(2))
        for topic in ("t", "missing"):
            with pytest.raises(errors.TopicDeletionDisabledError) as info:
                await cluster.delete_topic(topic)
            assert "delete.topic.enable" in info.value.message
        assert "t" in cluster.topics()
        assert await cluster.produce("t", 0, values(1, "after")) == 2  # still serving, nothing lost
        assert [r.value for _, r in await cluster.fetch_all("t", 0)] == [b"v0", b"v1", b"after0"]


async def test_a_deleted_topic_leaves_no_watch_behind_in_the_controller(autojump_clock: Any) -> None:
    """The controller watched each topic's assignment znode and kept the handler after the deletion: one per
    topic name ever deleted, for the life of a cluster a test session shares."""
    async with Cluster(brokers=3, seed=5) as cluster:
        watched = cluster.controller().zk._handlers.znode
        before = set(watched)
        for i in range(20):
            await cluster.create_topic(f"t{i}", partitions=1, replication_factor=3)
            await cluster.delete_topic(f"t{i}")
        await trio.sleep(5)
        assert set(watched) == before
        await cluster.create_topic("t0", partitions=1, replication_factor=3)
        await cluster.create_partitions("t0", 2)  # the watch of a topic created again brings its new partition
        assert await cluster.wait_for_leader("t0", 1) in cluster.live_broker_ids
