"""A controller state change over many partitions is one batch: one LeaderAndIsr per broker, one coordination
write, and a conflicting write on one partition costs that partition only."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from kafkalite.cluster import Cluster
from kafkalite.common import errors
from kafkalite.common.types import TopicPartition
from kafkalite.coordination.kafka_zk import partition_state_path
from kafkalite.network.requests import LeaderAndIsrRequest
from kafkalite.testing.checks import metadata_agrees

CONFIG = {"zookeeper.session.timeout.ms": 6000, "auto.leader.rebalance.enable": False}
PARTITIONS = 12


def record_leader_and_isr(cluster: Cluster, monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, LeaderAndIsrRequest]]:
    """Every LeaderAndIsr the transport delivers, with its destination, in order."""
    sent: list[tuple[int, LeaderAndIsrRequest]] = []
    deliver = cluster.transport.send

    async def send(source: Any, destination: Any, request: Any, context: Any = None) -> Any:
        if isinstance(request, LeaderAndIsrRequest):
            sent.append((destination, request))
        return await deliver(source, destination, request, context)

    monkeypatch.setattr(cluster.transport, "send", send)
    return sent


async def preferred_by(cluster: Cluster, broker_id: int) -> list[int]:
    return [d.partition for d in await cluster.describe_topic("t") if d.replicas[0] == broker_id]


async def restarted_follower(cluster: Cluster) -> int:
    """A broker that was killed and is back in every ISR, leading nothing."""
    await cluster.create_topic("t", partitions=PARTITIONS, replication_factor=3)
    victim = next(b for b in cluster.broker_ids if b != cluster.controller_id)
    await cluster.kill_broker(victim)
    await cluster.wait_until(lambda: all(cluster.leader_for("t", p) not in (victim, -1) for p in range(PARTITIONS)),
                             timeout=60)
    await cluster.restart_broker(victim)
    await cluster.wait_until(lambda: all(victim in cluster.partition_state("t", p).isr for p in range(PARTITIONS)),
                             timeout=60)
    return victim


async def test_a_preferred_election_of_many_partitions_is_one_leader_and_isr_per_broker(
        autojump_clock: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    async with Cluster(brokers=3, config=CONFIG, seed=1) as cluster:
        victim = await restarted_follower(cluster)
        before = {p: cluster.partition_state("t", p) for p in range(PARTITIONS)}
        moving = await preferred_by(cluster, victim)
        assert len(moving) == PARTITIONS // 3
        sent = record_leader_and_isr(cluster, monkeypatch)
        results = await cluster.elect_preferred_leaders()
        assert sorted(tp.partition for tp, outcome in results.items() if outcome.elected) == moving
        await cluster.wait_until(lambda: metadata_agrees(cluster, "t", PARTITIONS), timeout=30)
        # one request per broker, each naming every partition whose leader moved
        assert Counter(destination for destination, _ in sent) == Counter(cluster.broker_ids)
        for _, request in sent:
            assert sorted(state.partition for state in request.partition_states) == moving
        for p in range(PARTITIONS):
            after = cluster.partition_state("t", p)
            if p in moving:
                assert (after.leader, after.leader_epoch) == (victim, before[p].leader_epoch + 1)
            else:
                assert (after.leader, after.leader_epoch) == (before[p].leader, before[p].leader_epoch)
            assert sorted(after.isr) == sorted(before[p].isr) == [1, 2, 3]
            assert cluster.leader_for("t", p) == after.leader


async def test_a_conflicting_write_on_one_partition_leaves_the_others_of_the_batch_elected(
        autojump_clock: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """As with ZooKeeper, a leader may write a partition's state between the controller's read and its write;
    that partition's version check fails and it alone is not elected."""
    async with Cluster(brokers=3, config=CONFIG, seed=1) as cluster:
        victim = await restarted_follower(cluster)
        moving = await preferred_by(cluster, victim)
        conflicted = TopicPartition("t", moving[1])
        before = {p: cluster.partition_state("t", p) for p in range(PARTITIONS)}
        zk = cluster.controller().zk
        update = zk.update_leader_and_isr

        def racing_update(epoch_zk_version: int, states: Any) -> Any:
            if conflicted in states:  # someone else writes it first, once
                monkeypatch.setattr(zk, "update_leader_and_isr", update)
                path = partition_state_path(conflicted)
                data, _ = zk.session.get(path)
                zk.session.set(path, data)
            return update(epoch_zk_version, states)

        monkeypatch.setattr(zk, "update_leader_and_isr", racing_update)
        results = await cluster.elect_preferred_leaders()
        assert results[conflicted].error == errors.PREFERRED_LEADER_NOT_AVAILABLE
        assert sorted(tp.partition for tp, outcome in results.items() if outcome.elected) == \
            [p for p in moving if p != conflicted.partition]
        await cluster.wait_until(lambda: metadata_agrees(cluster, "t", PARTITIONS), timeout=30)
        for p in range(PARTITIONS):
            after = cluster.partition_state("t", p)
            elected = p in moving and p != conflicted.partition
            assert after.leader == (victim if elected else before[p].leader)
            assert after.leader_epoch == before[p].leader_epoch + (1 if elected else 0)
            assert sorted(after.isr) == [1, 2, 3]
            assert cluster.leader_for("t", p) == after.leader
        # nothing is left half done: asked again, the partition is elected like the others
        again = await cluster.elect_preferred_leaders([conflicted])
        assert again[conflicted].elected
        assert cluster.partition_state("t", conflicted.partition).leader == victim
        await cluster.wait_until(lambda: cluster.leader_for("t", conflicted.partition) == victim, timeout=30)


async def test_controlled_shutdown_moves_every_led_partition_in_one_leader_and_isr_per_broker(
        autojump_clock: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    async with Cluster(brokers=3, config=CONFIG, seed=1) as cluster:
        await cluster.create_topic("t", partitions=PARTITIONS, replication_factor=3)
        victim = next(b for b in cluster.broker_ids if b != cluster.controller_id)
        led = [p for p in range(PARTITIONS) if cluster.leader_for("t", p) == victim]
        assert len(led) == PARTITIONS // 3
        before = {p: cluster.partition_state("t", p) for p in range(PARTITIONS)}
        sent = record_leader_and_isr(cluster, monkeypatch)
        await cluster.shutdown_broker(victim)
        moved = [(destination, request) for destination, request in sent
                 if any(state.partition in led for state in request.partition_states)]
        assert sorted(destination for destination, _ in moved) == sorted(cluster.broker_ids)  # the victim too
        for _, request in moved:
            assert sorted(state.partition for state in request.partition_states if state.partition in led) == led
        for p in range(PARTITIONS):
            after = cluster.partition_state("t", p)
            assert after.leader != victim and victim not in after.isr
            assert sorted(after.isr) == sorted(r for r in before[p].isr if r != victim)
            assert after.leader == (after.isr[0] if p in led else before[p].leader)
            assert after.leader_epoch == before[p].leader_epoch + 1  # once: a new leader, or the ISR shrank
