"""The cluster end to end: real brokers, a real controller, real replication, all on the mock clock.

Every scenario checks what a user of a Kafka cluster relies on: offsets, contents, leaders, ISR, high
watermarks, error codes, and that no acknowledged record is lost and replicas end with identical logs.
"""

from __future__ import annotations

import errno
import socket
from functools import partial
from typing import Any

import pytest
import trio

from kafkalite.cluster import Cluster, PartitionDescription
from kafkalite.common import errors
from kafkalite.common.records import Record, RecordBatch
from kafkalite.common.types import TopicPartition
from kafkalite.testing.checks import assert_replicas_agree, metadata_agrees
from kafkalite.coordination.kafka_zk import ControllerMovedError, LeaderIsrAndControllerEpoch
from kafkalite.network.requests import (
    FetchPartition,
    FetchRequest,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    ListOffsetsPartition,
    ListOffsetsRequest,
    UpdateMetadataRequest,
)

SESSION_MS = 6000
CONFIG = {"zookeeper.session.timeout.ms": SESSION_MS, "replica.lag.time.max.ms": 10000}


def values(n: int, prefix: str = "v") -> list[Record]:
    return [Record(None, f"{prefix}{i}".encode()) for i in range(n)]


async def describe(cluster: Cluster, topic: str, partition: int = 0) -> PartitionDescription:
    return (await cluster.describe_topic(topic))[partition]


async def read_values(cluster: Cluster, topic: str, partition: int = 0) -> list[bytes]:
    return [record.value for _, record in await cluster.fetch_all(topic, partition)]


async def test_create_topic_elects_a_leader_per_partition_and_every_broker_knows(autojump_clock) -> None:
    async with Cluster(brokers=3, config=CONFIG, seed=1) as cluster:
        assert cluster.controller_id in (1, 2, 3)
        await cluster.create_topic("orders", partitions=6, replication_factor=3)
        described = await cluster.describe_topic("orders")
        assert [d.partition for d in described] == list(range(6))
        for d in described:
            assert sorted(d.replicas) == [1, 2, 3]
            assert d.leader == d.replicas[0]
            assert sorted(d.isr) == [1, 2, 3]
            assert d.leader_epoch == 0
            assert d.high_watermark == 0
        # leaders spread over every broker
        assert {d.leader for d in described} == {1, 2, 3}
        await cluster.wait_until(lambda: metadata_agrees(cluster, "orders", 6))
        for broker_id in cluster.broker_ids:
            response = await cluster.metadata(broker_id, ["orders"])
            assert response.controller_id == cluster.controller_id
            assert sorted(b.node_id for b in response.brokers) == [1, 2, 3]
            assert [p.leader for p in sorted(response.topics[0].partitions, key=lambda p: p.partition)] == \
                [d.leader for d in described]


async def test_acks_all_produce_is_replicated_before_it_is_acknowledged(autojump_clock) -> None:
    async with Cluster(brokers=3, config=CONFIG, seed=2) as cluster:
        await cluster.create_topic("t", partitions=1, replication_factor=3, config={"min.insync.replicas": 2})
        assert await cluster.produce("t", 0, values(5)) == 0
        assert await cluster.produce("t", 0, values(3, "w")) == 5
        d = await describe(cluster, "t")
        assert d.high_watermark == 8
        assert all(leo == 8 for leo in d.log_end_offsets.values())  # every replica had it before the ack
        assert await read_values(cluster, "t") == [f"v{i}".encode() for i in range(5)] + \
            [f"w{i}".encode() for i in range(3)]
        await assert_replicas_agree(cluster, "t")


async def test_list_offset_answers_what_a_consumer_is_told_by_the_leader(autojump_clock) -> None:
    async with Cluster(brokers=3, config=CONFIG, seed=2) as cluster:
        await cluster.create_topic("t", partitions=1, replication_factor=3)
        assert await cluster.list_offset("t", 0) == 0
        await cluster.produce("t", 0, [Record(None, b"v", timestamp=1000 * i) for i in range(5)])
        assert await cluster.list_offset("t", 0) == 5
        assert await cluster.list_offset("t", 0, 2500) == 3  # the first offset at or after the timestamp
        assert await cluster.list_offset("t", 0, -2) == 0  # EARLIEST_TIMESTAMP: the log start
        with pytest.raises(errors.UnknownTopicOrPartitionError):
            await cluster.list_offset("t", 1)
        with pytest.raises(TypeError, match="timestamp"):
            await cluster.list_offset("t", 0, "latest")  # type: ignore[arg-type]


async def test_a_new_partition_replicates_without_waiting_out_a_parked_follower_fetch(autojump_clock) -> None:
    """A follower whose fetch to the leader is parked (nothing to read) must not hold a new partition of the same
    leader back for replica.fetch.wait.max.ms: the first acks=all produce to it is acknowledged at once."""
    config = {**CONFIG, "replica.fetch.wait.max.ms": 20_000, "replica.lag.time.max.ms": 30_000}
    async with Cluster(brokers=2, config=config, seed=2) as cluster:
        await cluster.create_topic("quiet", partitions=1, replication_factor=2)
        await cluster.produce("quiet", 0, values(1))
        leader = cluster.leader_for("quiet", 0)
        await trio.sleep(1)  # the follower's next fetch is now parked at the leader
        await cluster.create_topic("fresh", partitions=2, replication_factor=2)
        partition = next(p for p in range(2) if cluster.leader_for("fresh", p) == leader)
        started = trio.current_time()
        assert await cluster.produce("fresh", partition, values(3)) == 0
        assert trio.current_time() - started < 1
        assert cluster.high_watermark("fresh", partition) == 3
        assert await read_values(cluster, "fresh", partition) == [b"v0", b"v1", b"v2"]
        await assert_replicas_agree(cluster, "fresh")


async def test_controller_failover_increments_epoch_and_new_controller_knows_every_partition(autojump_clock) -> None:
    async with Cluster(brokers=3, config=CONFIG, seed=3) as cluster:
        await cluster.create_topic("a", partitions=4, replication_factor=2)
        await cluster.create_topic("b", partitions=2, replication_factor=3)
        old = cluster.controller_id
        old_epoch = cluster.controller().epoch
        await cluster.kill_broker(old)
        await cluster.wait_until(lambda: cluster.controller_id not in (None, old), timeout=SESSION_MS / 1000 + 5)
        new = cluster.controller()
        assert new.epoch == old_epoch + 1
        known = set(new.context.all_partitions())
        assert known == {TopicPartition("a", p) for p in range(4)} | {TopicPartition("b", p) for p in range(2)}
        # partitions the dead controller led moved to live replicas
        await cluster.wait_until(lambda: all(cluster.partition_state(t, p).leader in cluster.live_broker_ids
                                             for t, n in (("a", 4), ("b", 2)) for p in range(n)
                                             if set(cluster.partition_state(t, p).isr) - {old}))
        await cluster.wait_until(lambda: metadata_agrees(cluster, "b", 2))


async def test_leader_failover_with_acks_all_loses_no_acknowledged_record(autojump_clock) -> None:
    async with Cluster(brokers=3, config=CONFIG, seed=4) as cluster:
        await cluster.create_topic("t", partitions=1, replication_factor=3, config={"min.insync.replicas": 2})
        acked = []
        for i in range(20):
            await cluster.produce("t", 0, values(10, f"a{i}-"))
            acked.extend(f"a{i}-{j}".encode() for j in range(10))
        leader = cluster.leader_for("t", 0)
        epoch = cluster.partition_state("t", 0).leader_epoch
        killed_at = trio.current_time()
        await cluster.kill_broker(leader)
        await cluster.wait_for_leader("t", 0, not_on=[leader])
        elapsed = trio.current_time() - killed_at
        # the session runs out at most one heartbeat interval early; then the controller needs under 50 ms
        assert SESSION_MS / 1000 - SESSION_MS / 3000 <= elapsed <= SESSION_MS / 1000 + 0.05
        state = cluster.partition_state("t", 0)
        assert state.leader_epoch > epoch
        assert leader not in state.isr
        # the new leader accepts writes with acks=-1 (2 replicas left, min.insync.replicas=2)
        offset = await cluster.produce("t", 0, values(1, "after"))
        assert offset == 200
        acked.append(b"after0")
        assert await read_values(cluster, "t") == acked
        await cluster.restart_broker(leader)
        await cluster.wait_until(lambda: leader in cluster.partition_state("t", 0).isr, timeout=60)
        await assert_replicas_agree(cluster, "t")


async def test_not_enough_replicas_when_isr_shrinks_and_recovery_when_broker_returns(autojump_clock) -> None:
    async with Cluster(brokers=3, config=CONFIG, seed=5) as cluster:
        await cluster.create_topic("t", partitions=1, replication_factor=2, config={"min.insync.replicas": 2})
        await cluster.produce("t", 0, values(3))
        d = await describe(cluster, "t")
        follower = next(r for r in d.replicas if r != d.leader)
        await cluster.kill_broker(follower)
        await cluster.wait_until(lambda: cluster.partition_state("t", 0).isr == (d.leader,), timeout=60)
        with pytest.raises(errors.NotEnoughReplicasError) as info:
            await cluster.produce("t", 0, values(1, "x"))
        assert info.value.code == 19
        assert (await describe(cluster, "t")).log_end_offsets[d.leader] == 3  # nothing appended
        assert await cluster.produce("t", 0, values(1, "one"), acks=1) == 3  # acks=1 still works
        await cluster.restart_broker(follower)
        await cluster.wait_until(lambda: sorted(cluster.partition_state("t", 0).isr) == sorted(d.replicas),
                                 timeout=60)
        assert await cluster.produce("t", 0, values(1, "y")) == 4
        assert await read_values(cluster, "t") == [b"v0", b"v1", b"v2", b"one0", b"y0"]
        await assert_replicas_agree(cluster, "t")


async def test_isr_shrinks_when_follower_stalls_and_expands_when_it_catches_up(autojump_clock) -> None:
    async with Cluster(brokers=3, config=CONFIG, seed=6) as cluster:
        await cluster.create_topic("t", partitions=1, replication_factor=3)
        await cluster.produce("t", 0, values(2))
        d = await describe(cluster, "t")
        stalled = next(r for r in d.replicas if r != d.leader)
        # the follower cannot reach its leader but keeps its session: only the lag check can remove it
        cluster.partition_network({stalled}, {d.leader})
        await cluster.produce("t", 0, values(2, "p"), acks=1)
        cut_at = trio.current_time()
        await cluster.wait_until(lambda: stalled not in cluster.partition_state("t", 0).isr, timeout=30)
        lag_s = CONFIG["replica.lag.time.max.ms"] / 1000
        assert lag_s <= trio.current_time() - cut_at <= 1.5 * lag_s + 0.1  # checked every lag/2
        assert stalled in cluster.live_broker_ids
        # acks=-1 now completes with the remaining ISR
        assert await cluster.produce("t", 0, values(1, "q")) == 4
        cluster.heal()
        await cluster.wait_until(lambda: stalled in cluster.partition_state("t", 0).isr, timeout=60)
        await assert_replicas_agree(cluster, "t")
        await cluster.wait_until(lambda: metadata_agrees(cluster, "t", 1), timeout=30)
        assert await read_values(cluster, "t") == [b"v0", b"v1", b"p0", b"p1", b"q0"]


async def test_controlled_shutdown_moves_every_leader_off_the_broker_first(autojump_clock) -> None:
    async with Cluster(brokers=3, config=CONFIG, seed=7) as cluster:
        await cluster.create_topic("t", partitions=6, replication_factor=3)
        for p in range(6):
            await cluster.produce("t", p, values(2))
        victim = cluster.controller_id % 3 + 1  # not the controller
        led = [p for p in range(6) if cluster.leader_for("t", p) == victim]
        assert led
        before = {p: cluster.partition_state("t", p).leader_epoch for p in led}
        clean = await cluster.shutdown_broker(victim)
        assert clean
        for p in range(6):
            await assert_replicas_agree(cluster, "t", p)
        # leadership moved while it was still up: no election had to wait for a session timeout
        for p in range(6):
            state = cluster.partition_state("t", p)
            assert state.leader in cluster.live_broker_ids
            assert victim not in state.isr
            if p in led:
                assert state.leader_epoch > before[p]
            assert await read_values(cluster, "t", p) == [b"v0", b"v1"]
        await cluster.wait_until(lambda: metadata_agrees(cluster, "t", 6))


async def test_wait_for_leaders_waits_once_for_every_partition_a_dead_broker_led(autojump_clock) -> None:
    """One wait for many partitions: after the broker that led some of them dies, it returns once every one has a
    new leader acting as leader, with those leaders; by default it covers every partition of the topic, and an empty
    list returns at once. An unknown topic or partition is UNKNOWN_TOPIC_OR_PARTITION, and a wait that cannot end
    times out saying how many partitions it waited for."""
    async with Cluster(brokers=3, seed=3) as cluster:
        await cluster.create_topic("t", partitions=6, replication_factor=3)
        victim = cluster.leader_for("t", 0)
        led = [p for p in range(6) if cluster.leader_for("t", p) == victim]
        await cluster.kill_broker(victim)
        leaders = await cluster.wait_for_leaders("t", led, not_on=[victim])
        assert sorted(leaders) == led and victim not in leaders.values()
        for p, leader in leaders.items():
            assert cluster.leader_for("t", p) == leader
            assert cluster.broker(leader).replica_manager.get_partition(TopicPartition("t", p)).is_leader
        everything = await cluster.wait_for_leaders("t")
        assert everything == {p: cluster.leader_for("t", p) for p in range(6)}
        assert await cluster.wait_for_leaders("t", []) == {}
        with pytest.raises(errors.UnknownTopicOrPartitionError):
            await cluster.wait_for_leaders("nope")
        with pytest.raises(errors.UnknownTopicOrPartitionError):
            await cluster.wait_for_leaders("t", [0, 9])
        with pytest.raises(errors.RequestTimedOutError, match=r"leaders for 6 partition\(s\) of t"):
            await cluster.wait_for_leaders("t", not_on=[1, 2, 3], timeout=1)


async def test_harness_calls_to_a_paused_broker_time_out_instead_of_waiting_forever(autojump_clock) -> None:
    """A paused broker holds every request at its door. The harness gives up as a Kafka client gives up after
    request.timeout.ms: create_topic within its `timeout`, produce within its timeout_ms and a few seconds, the
    others within 30 s; a controlled shutdown waits controller.socket.timeout.ms per try; a paused broker itself
    stops without one. Nothing acknowledged is lost, and the cluster recovers once the broker is back."""
    config = {**CONFIG, "zookeeper.session.timeout.ms": 120_000,  # paused brokers keep their sessions here
              "controller.socket.timeout.ms": 2000, "controlled.shutdown.retry.backoff.ms": 500,
              "controlled.shutdown.max.retries": 2}
    async with Cluster(brokers=3, config=config, seed=7) as cluster:
        await cluster.create_topic("t", partitions=1, replication_factor=3)
        await cluster.produce("t", 0, values(2))
        controller = cluster.controller_id
        leader = cluster.leader_for("t", 0)
        other = next(b for b in cluster.live_broker_ids if b not in (controller, leader))

        async def fails_within(seconds: float, call: Any) -> None:
            started = trio.current_time()
            with pytest.raises(errors.RequestTimedOutError, match="did not answer"):
                await call()
            assert trio.current_time() - started <= seconds + 0.01

        cluster.pause_broker(leader)
        await fails_within(2000 / 1000 + 5, lambda: cluster.produce("t", 0, values(1, "held"), timeout_ms=2000))
        await fails_within(30, lambda: cluster.fetch("t", 0, 0))
        await fails_within(30, lambda: cluster.metadata(leader))
        cluster.resume_broker(leader)
        cluster.pause_broker(controller)
        await fails_within(3, lambda: cluster.create_topic("u", 1, 1, timeout=3))
        await fails_within(3, lambda: cluster.delete_topic("t", timeout=3))
        started = trio.current_time()
        assert await cluster.shutdown_broker(other) is False  # its controller never answers: two tries, then stop
        assert 2 * 2 + 0.5 <= trio.current_time() - started < 2 * 2 + 0.5 + 1
        cluster.resume_broker(controller)
        cluster.pause_broker(leader)
        started = trio.current_time()
        assert await cluster.shutdown_broker(leader) is False
        assert trio.current_time() - started < 1 and leader not in cluster.live_broker_ids
        new_leader = await cluster.wait_for_leader("t", 0, not_on=[leader, other], timeout=200)  # its session ends
        assert new_leader == controller
        assert await read_values(cluster, "t") == [b"v0", b"v1"]
        await cluster.restart_broker(leader)
        await cluster.restart_broker(other)
        await cluster.wait_until(lambda: len(cluster.partition_state("t", 0).isr) == 3, timeout=60)
        await assert_replicas_agree(cluster, "t")


@pytest.mark.parametrize("unclean", [False, True])
async def test_unclean_leader_election(autojump_clock, unclean: bool) -> None:
    async with Cluster(brokers=3, config=CONFIG, seed=8) as cluster:
        await cluster.create_topic("t", partitions=1, replication_factor=2,
                                   config={"unclean.leader.election.enable": unclean})
        await cluster.produce("t", 0, values(2))
        d = await describe(cluster, "t")
        follower = next(r for r in d.replicas if r != d.leader)
        await cluster.kill_broker(follower)
        await cluster.wait_until(lambda: cluster.partition_state("t", 0).isr == (d.leader,), timeout=60)
        await cluster.produce("t", 0, values(1, "only-on-leader"), acks=1)
        await cluster.kill_broker(d.leader)
        await cluster.restart_broker(follower)
        await trio.sleep(3 * SESSION_MS / 1000)
        state = cluster.partition_state("t", 0)
        if unclean:
            assert state.leader == follower
            assert state.isr == (follower,)
            assert await read_values(cluster, "t") == [b"v0", b"v1"]  # the out-of-sync record is gone
        else:
            assert cluster.leader_for("t", 0) == -1  # stays offline rather than lose acknowledged data
            assert follower not in state.isr
            with pytest.raises(errors.LeaderNotAvailableError):
                await cluster.produce("t", 0, values(1, "x"))


async def test_kip101_follower_restart_after_hw_advance_then_leader_crash(autojump_clock) -> None:
    """KIP-101 scenario 1: a follower restarting must not truncate to its stale HW and then lead without data."""
    async with Cluster(brokers=3, config=CONFIG, seed=9) as cluster:
        await cluster.create_topic("t", partitions=1, replication_factor=2, config={"min.insync.replicas": 1})
        await cluster.produce("t", 0, values(1, "m1-"))
        await cluster.produce("t", 0, values(1, "m2-"))  # acks=-1: the follower has m2, maybe not yet its HW
        d = await describe(cluster, "t")
        leader, follower = d.leader, next(r for r in d.replicas if r != d.leader)
        await cluster.kill_broker(follower)
        await cluster.restart_broker(follower)
        await cluster.wait_until(lambda: sorted(cluster.partition_state("t", 0).isr) == sorted(d.replicas),
                                 timeout=60)
        await cluster.kill_broker(leader)
        assert await cluster.wait_for_leader("t", 0) == follower
        assert await read_values(cluster, "t") == [b"m1-0", b"m2-0"]
        await cluster.restart_broker(leader)
        await assert_replicas_agree(cluster, "t")


async def test_kip101_both_replicas_crash_and_restart_in_the_other_order(autojump_clock) -> None:
    """KIP-101 scenario 2: after an unclean restart the logs must converge instead of silently diverging."""
    async with Cluster(brokers=3, config=CONFIG, seed=10) as cluster:
        await cluster.create_topic("t", partitions=1, replication_factor=2,
                                   config={"unclean.leader.election.enable": True})
        await cluster.produce("t", 0, values(1, "m1-"))
        d = await describe(cluster, "t")
        leader, follower = d.leader, next(r for r in d.replicas if r != d.leader)
        cluster.pause_broker(follower)
        await cluster.produce("t", 0, values(1, "m2-"), acks=1)  # only on the leader
        await cluster.kill_broker(follower)
        await cluster.kill_broker(leader)
        await cluster.restart_broker(follower)
        assert await cluster.wait_for_leader("t", 0) == follower
        assert await cluster.produce("t", 0, values(1, "m3-"), acks=1) == 1
        await cluster.restart_broker(leader)
        await assert_replicas_agree(cluster, "t")
        assert await read_values(cluster, "t") == [b"m1-0", b"m3-0"]


async def test_divergent_follower_truncates_by_leader_epoch_under_a_reelected_leader(autojump_clock) -> None:
    """KIP-279: a returning replica holding records of an epoch the leader never saw truncates to where the leader's
    log diverged from it, instead of to its high watermark."""
    async with Cluster(brokers=3, config=CONFIG, seed=11) as cluster:
        await cluster.create_topic("t", partitions=1, replication_factor=2,
                                   config={"unclean.leader.election.enable": True})
        await cluster.produce("t", 0, values(1, "m1-"))
        d = await describe(cluster, "t")
        a, b = d.leader, next(r for r in d.replicas if r != d.leader)
        # a freezes; its session expires and b, the other ISR member, takes over and writes a record a never sees
        cluster.pause_broker(a)
        assert await cluster.wait_for_leader("t", 0, not_on=[a]) == b
        await cluster.kill_broker(a)
        await cluster.produce("t", 0, values(1, "b-only-"), acks=1)
        # b crashes; a comes back and is elected uncleanly; then b returns as a follower of the same leader
        await cluster.kill_broker(b)
        await cluster.restart_broker(a)
        assert await cluster.wait_for_leader("t", 0, not_on=[b]) == a
        await cluster.produce("t", 0, values(1, "a-only-"), acks=1)
        await cluster.restart_broker(b)
        await cluster.wait_until(lambda: sorted(cluster.partition_state("t", 0).isr) == sorted([a, b]),
                                 timeout=60)
        await assert_replicas_agree(cluster, "t")
        assert await read_values(cluster, "t") == [b"m1-0", b"a-only-0"]


async def test_zombie_controller_is_fenced(autojump_clock) -> None:
    async with Cluster(brokers=3, config=CONFIG, seed=12) as cluster:
        await cluster.create_topic("t", partitions=3, replication_factor=3)
        zombie_id = cluster.controller_id
        zombie = cluster.controller(zombie_id)
        zombie_epoch = zombie.epoch
        zombie_epoch_version = zombie.context.epoch_zk_version
        cluster.pause_broker(zombie_id)
        await cluster.wait_until(lambda: cluster.controller_id not in (None, zombie_id), timeout=60)
        assert cluster.controller().epoch == zombie_epoch + 1
        cluster.resume_broker(zombie_id)
        await cluster.wait_until(lambda: not zombie.is_active, timeout=60)
        # a write fenced by the old epoch's version fails and changes nothing
        before = cluster.partition_state("t", 0)
        with pytest.raises(ControllerMovedError):
            zombie.zk.controller_multi(zombie_epoch_version, [zombie.zk.update_partition_state_op(
                TopicPartition("t", 0), LeaderIsrAndControllerEpoch(before.new_leader_and_isr(zombie_id, [zombie_id]),
                                                                    zombie_epoch))])
        assert cluster.partition_state("t", 0) == before
        # a request stamped with the old epoch is rejected by every broker and changes nothing
        for broker_id in cluster.live_broker_ids:
            if broker_id == zombie_id:
                continue
            before = cluster.broker(broker_id).metadata_cache.get_partition_info(TopicPartition("t", 0))
            response = await cluster.transport.send(zombie_id, broker_id, UpdateMetadataRequest(
                zombie_id, zombie_epoch, -1, [], []))
            assert response.error_code == errors.STALE_CONTROLLER_EPOCH.code
            response = await cluster.transport.send(zombie_id, broker_id, LeaderAndIsrRequest(
                zombie_id, zombie_epoch, -1,
                [LeaderAndIsrPartitionState("t", 0, zombie_epoch, broker_id, 99, [broker_id], 0, [1, 2, 3])], []))
            assert response.error_code == errors.STALE_CONTROLLER_EPOCH.code
            assert cluster.broker(broker_id).metadata_cache.get_partition_info(TopicPartition("t", 0)) == before
        await cluster.produce("t", 0, values(1))
        await assert_replicas_agree(cluster, "t")


async def test_bad_input_gets_kafka_error_codes_and_the_cluster_keeps_serving(autojump_clock) -> None:
    async with Cluster(brokers=3, config={**CONFIG, "message.max.bytes": 10000}, seed=13) as cluster:
        await cluster.create_topic("t", partitions=1, replication_factor=3)
        await cluster.produce("t", 0, values(3))
        cases = [
            (dict(name="bad name!"), errors.InvalidTopicError),
            (dict(name="x" * 250), errors.InvalidTopicError),
            (dict(name="zero", partitions=0), errors.InvalidPartitionsError),
            (dict(name="neg", partitions=-3), errors.InvalidPartitionsError),
            (dict(name="rf", replication_factor=4), errors.InvalidReplicationFactorError),
            (dict(name="cfg", config={"no.such.key": 1}), errors.InvalidConfigError),
            (dict(name="cfg2", config={"min.insync.replicas": "many"}), errors.InvalidConfigError),
            (dict(name="t"), errors.TopicAlreadyExistsError),
        ]
        for kwargs, error in cases:
            with pytest.raises(error) as info:
                await cluster.create_topic(**kwargs)
            assert info.value.message
            if kwargs["name"] != "t":
                assert kwargs["name"] not in cluster.topics()  # nothing half-created
        with pytest.raises(errors.UnknownTopicOrPartitionError):
            await cluster.produce("nope", 0, values(1))
        leader = cluster.leader_for("t", 0)
        follower = next(b for b in cluster.broker_ids if b != leader)
        batch = RecordBatch.from_records(values(1))
        from kafkalite.network.requests import ProducePartitionData, ProduceRequest
        response = await cluster.transport.send("client", follower, ProduceRequest(
            -1, 1000, [ProducePartitionData("t", 0, [batch])]))
        assert response.partitions[0].error_code == errors.NOT_LEADER_OR_FOLLOWER.code
        with pytest.raises(errors.MessageTooLargeError):
            await cluster.produce("t", 0, [Record(None, b"x" * 20000)])
        response = await cluster.transport.send("client", leader, FetchRequest(
            -1, 0, 0, [FetchPartition("t", 0, 99)]))
        assert response.partitions[0].error_code == errors.OFFSET_OUT_OF_RANGE.code
        for timestamp, offset in ((-1, 3), (-2, 0)):
            response = await cluster.transport.send("client", leader, ListOffsetsRequest(
                -1, [ListOffsetsPartition("t", 0, timestamp)]))
            assert [(p.error_code, p.offset) for p in response.partitions] == [(0, offset)]
        # still serving, nothing acknowledged lost
        assert await cluster.produce("t", 0, values(1, "after")) == 3
        assert await read_values(cluster, "t") == [b"v0", b"v1", b"v2", b"after0"]
        await assert_replicas_agree(cluster, "t")


async def test_expired_session_makes_the_broker_reregister_with_a_new_epoch(autojump_clock) -> None:
    async with Cluster(brokers=3, config=CONFIG, seed=14) as cluster:
        await cluster.create_topic("t", partitions=3, replication_factor=3)
        broker_id = next(b for b in cluster.broker_ids if b != cluster.controller_id)
        old_epoch = cluster.broker(broker_id).broker_epoch
        await cluster.expire_session(broker_id)
        await cluster.wait_until(lambda: cluster.broker(broker_id).broker_epoch > old_epoch, timeout=30)
        for p in range(3):
            await cluster.produce("t", p, values(1))
        await cluster.wait_until(lambda: all(broker_id in cluster.partition_state("t", p).isr for p in range(3)),
                                 timeout=60)
        for p in range(3):
            await assert_replicas_agree(cluster, "t", p)


async def test_a_broker_restarted_right_after_a_crash_waits_out_its_old_session_and_holds_requests_meanwhile(
        autojump_clock: Any) -> None:
    """As a restarted Kafka broker must: the crashed incarnation's registration lives until its session expires,
    so the new one registers only then, and serves clients only once registered and told the cluster's state by
    the controller. A client that reaches it meanwhile (its listeners are open) waits, then gets the whole picture,
    not the empty one a fresh broker has."""
    from kafkalite.client import Admin

    async with Cluster(brokers=3, config=CONFIG, seed=15) as cluster:
        await cluster.create_topic("t", partitions=3, replication_factor=3)
        victim = next(b for b in cluster.broker_ids if b != cluster.controller_id)
        address = native_address(cluster, victim)
        old_epoch, expires = cluster.broker(victim).broker_epoch, cluster.session_deadline(victim)
        await cluster.kill_broker(victim)
        answered: dict[str, Any] = {}

        async def ask_the_restarting_broker() -> None:
            async with Admin(address, {"reconnect.backoff.max.ms": 100}) as admin:
                answered["topics"] = await admin.describe_topics(["t"])
                answered["at"] = trio.current_time()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(ask_the_restarting_broker)
            await cluster.restart_broker(victim)
            restarted = trio.current_time()
        assert restarted >= expires
        assert cluster.broker(victim).broker_epoch > old_epoch
        assert answered["at"] >= restarted
        partitions = answered["topics"]["t"].partitions
        assert [p.partition for p in partitions] == [0, 1, 2]
        assert all(p.leader in cluster.live_broker_ids and victim in p.replicas for p in partitions)


async def test_network_partition_isolating_a_leader_from_the_coordination_service(autojump_clock) -> None:
    from kafkalite.cluster import COORDINATION

    async with Cluster(brokers=3, config=CONFIG, seed=15) as cluster:
        await cluster.create_topic("t", partitions=1, replication_factor=3, config={"min.insync.replicas": 2})
        await cluster.produce("t", 0, values(5))
        leader = cluster.leader_for("t", 0)
        others = [b for b in cluster.broker_ids if b != leader]
        cluster.partition_network({leader}, {*others, COORDINATION})
        assert await cluster.wait_for_leader("t", 0, not_on=[leader]) in others
        # the isolated old leader cannot take acks=-1 writes: its followers stopped fetching from it
        assert await cluster.produce("t", 0, values(1, "new")) == 5
        cluster.heal()
        await cluster.wait_until(lambda: sorted(cluster.partition_state("t", 0).isr) == [1, 2, 3], timeout=120)
        await assert_replicas_agree(cluster, "t")
        assert await read_values(cluster, "t") == [f"v{i}".encode() for i in range(5)] + [b"new0"]


async def test_describe_cluster_shows_brokers_and_state_machines(autojump_clock) -> None:
    async with Cluster(brokers=3, config=CONFIG, broker_configs={1: {"broker.rack": "r1"}}, seed=16) as cluster:
        await cluster.create_topic("t", partitions=2, replication_factor=3)
        described = cluster.describe_cluster()
        assert described.controller_id == cluster.controller_id and described.controller_epoch == 1
        assert [(b.id, b.alive, b.is_controller) for b in described.brokers] == \
            [(b, True, b == cluster.controller_id) for b in (1, 2, 3)]
        assert described.brokers[0].rack == "r1"
        assert all(b.endpoints[0].startswith("NATIVE://127.0.0.1:") and b.broker_epoch > 0
                   for b in described.brokers)
        assert {tp: s.state for tp, s in described.partitions.items()} == \
            {TopicPartition("t", 0): "OnlinePartition", TopicPartition("t", 1): "OnlinePartition"}
        assert all(set(s.replica_states.values()) == {"OnlineReplica"} for s in described.partitions.values())
        victim = next(b for b in cluster.broker_ids if b != cluster.controller_id)
        await cluster.kill_broker(victim)
        await cluster.wait_until(lambda: not cluster.describe_cluster().brokers[victim - 1].alive
                                 and all(s.replica_states[victim] == "OfflineReplica"
                                         for s in cluster.describe_cluster().partitions.values()), timeout=60)


async def test_config_requests_bad_input(autojump_clock) -> None:
    from kafkalite.network.requests import (
        BROKER_RESOURCE, AlterConfigsRequest, AlterConfigsResource, ConfigResource, DescribeConfigsRequest,
    )

    async with Cluster(brokers=1, config=CONFIG, seed=17) as cluster:
        await cluster.create_topic("t", partitions=1, replication_factor=1)
        await cluster.produce("t", 0, values(1))
        response = await cluster.transport.send("client", 1, AlterConfigsRequest(
            [AlterConfigsResource(BROKER_RESOURCE, "1", {"num.partitions": "3"})]))
        assert response.results[0].error_code == errors.INVALID_REQUEST.code
        assert "broker configs are static" in response.results[0].error_message
        response = await cluster.transport.send("client", 1, DescribeConfigsRequest([ConfigResource(99, "x"),
                                                                                    ConfigResource(BROKER_RESOURCE, "7")]))
        assert [r.error_code for r in response.results] == [errors.INVALID_REQUEST.code] * 2
        assert response.results[1].error_message == "Unexpected broker id, expected 1 or empty string, but received 7"
        assert await cluster.produce("t", 0, values(1, "after")) == 1


async def test_an_error_raised_in_the_block_comes_out_as_itself(autojump_clock) -> None:
    with pytest.raises(errors.UnknownTopicOrPartitionError):
        async with Cluster(brokers=1, config=CONFIG) as cluster:
            await cluster.describe_topic("missing")
    with pytest.raises(KeyError) as info:
        async with Cluster(brokers=1, config=CONFIG):
            raise KeyError("mine")
    assert type(info.value) is KeyError and info.value.args == ("mine",)


async def test_a_cluster_cancelled_from_outside_stops_quietly(autojump_clock) -> None:
    with trio.move_on_after(5) as scope:
        async with Cluster(brokers=1, config=CONFIG) as cluster:
            await trio.sleep_forever()
    assert scope.cancelled_caught and cluster.live_broker_ids == []


async def test_a_failure_of_the_clusters_own_tasks_still_surfaces(autojump_clock) -> None:
    async def crash() -> None:
        raise OSError("disk on fire")

    with pytest.raises(BaseExceptionGroup) as info:
        async with Cluster(brokers=1, config=CONFIG) as cluster:
            cluster._nursery.start_soon(crash)  # a bug inside the cluster, outside the block
            await trio.sleep_forever()
    assert info.value.split(OSError)[0] is not None
    # the block failing too (here while it is cancelled) hides neither
    with pytest.raises(BaseExceptionGroup) as info:
        async with Cluster(brokers=1, config=CONFIG) as cluster:
            cluster._nursery.start_soon(crash)
            try:
                await trio.sleep_forever()
            finally:
                raise KeyError("mine")  # noqa: B012
    assert info.value.split(OSError)[0] is not None and info.value.split(KeyError)[0] is not None


async def test_a_broker_that_cannot_start_says_why(autojump_clock) -> None:
    with pytest.raises(errors.InvalidConfigError, match="Invalid listener 'nonsense'"):
        async with Cluster(brokers=1, config={"listeners": "nonsense"}):
            pass


def test_cluster_arguments_of_the_wrong_type_say_what_was_expected() -> None:
    for kwargs, error, message in [
        (dict(brokers="3"), TypeError, "brokers must be int, not str '3'"),
        (dict(brokers=True), TypeError, "brokers must be int"),
        (dict(brokers=0), ValueError, "at least one broker"),
        (dict(config=[("min.insync.replicas", 2)]), TypeError, "config must be Mapping"),
        (dict(broker_configs={4: {"broker.rack": "r4"}}), ValueError,
         "broker_configs names broker 4, but the brokers are 1..3"),
        (dict(broker_configs={"1": {}}), TypeError, "a broker id in broker_configs must be int"),
        (dict(seed="x"), TypeError, "seed must be int"),
        (dict(config={"broker.id": 7}), ValueError, "config sets broker.id, which the cluster sets itself"),
        (dict(broker_configs={1: {"broker.id": 9}}), ValueError, r"broker_configs\[1\] sets broker.id"),
    ]:
        with pytest.raises(error, match=message):
            Cluster(**kwargs)


async def test_methods_given_arguments_of_the_wrong_type_say_what_was_expected(autojump_clock) -> None:
    async with Cluster(brokers=3, config=CONFIG, seed=18) as cluster:
        await cluster.create_topic("t", partitions=2, replication_factor=3)
        await cluster.produce("t", 0, values(1))
        tp = TopicPartition("t", 0)
        for call, error, message in [
            (lambda: cluster.create_topic(123), TypeError, "topic name must be str, not int 123"),
            (lambda: cluster.create_topic("a", "3"), TypeError, "partitions must be int, not str '3'"),
            (lambda: cluster.create_topic("a", 1, 1.0), TypeError, "replication_factor must be int, not float"),
            (lambda: cluster.create_topic("a", config=["retention.ms"]), TypeError, "config must be Mapping"),
            (lambda: cluster.create_topic("a", config={1: 2}), TypeError, "a key of config must be str"),
            (lambda: cluster.create_topic("a", timeout=-1), ValueError, "timeout must be a number of seconds >= 0"),
            (lambda: cluster.create_partitions("t", "4"), TypeError, "new_total must be int"),
            (lambda: cluster.delete_topic(["t"]), TypeError, "topic name must be str, not list"),
            (lambda: cluster.kill_broker("1"), TypeError, "broker id must be int, not str '1'"),
            (lambda: cluster.restart_broker(1.0), TypeError, "broker id must be int, not float"),
            (lambda: cluster.shutdown_broker(True), TypeError, "broker id must be int, not bool"),
            (lambda: cluster.expire_session("1"), TypeError, "broker id must be int"),
            (lambda: cluster.reassign_partitions([tp]), TypeError, r"reassign_partitions\(\) takes a mapping"),
            (lambda: cluster.reassign_partitions({tp: "12"}), TypeError,
             r"reassign_partitions\(\) for t-0 takes a collection of broker ids, not str '12'"),
            (lambda: cluster.reassign_partitions({tp: ["1"]}), TypeError, "a broker id in .* for t-0 must be an int"),
            (lambda: cluster.reassign_partitions({"t": [1]}), TypeError, r"takes a TopicPartition\(topic, partition\)"),
            (lambda: cluster.elect_leaders("unclean"), TypeError, "election_type must be int"),
            (lambda: cluster.elect_leaders(7), ValueError, "PREFERRED_ELECTION .0. or UNCLEAN_ELECTION .1., not 7"),
            (lambda: cluster.elect_preferred_leaders(tp), TypeError,
             r"elect_leaders\(\) takes a collection of TopicPartition"),
            (lambda: cluster.elect_preferred_leaders(["t"]), TypeError, r"elect_leaders\(\) takes a TopicPartition"),
            (lambda: cluster.produce("t", "0", values(1)), TypeError, "partition must be int, not str '0'"),
            (lambda: cluster.produce("t", 0, b"x"), TypeError, r"produce\(\) takes a collection of Record"),
            (lambda: cluster.produce("t", 0, [b"x"]), TypeError, "a record must be Record, not bytes"),
            (lambda: cluster.produce("t", 0, values(1), acks="all"), TypeError, "acks .-1, 0 or 1. must be int"),
            (lambda: cluster.fetch("t", 0, "0"), TypeError, "offset must be int"),
            (lambda: cluster.fetch_all(0, 0), TypeError, "topic must be str"),
            (lambda: cluster.wait_for_leader("t", "0"), TypeError, "partition must be int"),
            (lambda: cluster.wait_for_leader("t", 0, not_on=1), TypeError,
             r"not_on=\) takes a collection of broker ids"),
            (lambda: cluster.wait_for_leaders("t", 3), TypeError, "partitions must be Iterable, not int 3"),
            (lambda: cluster.wait_for_leaders("t", ["0"]), TypeError, "partition must be int"),
            (lambda: cluster.wait_for_leaders("t", not_on=1), TypeError,
             r"wait_for_leaders\(not_on=\) takes a collection of broker ids"),
            (lambda: cluster.wait_until(True), TypeError, "condition must be a function"),
            # a wait that never lets the clock move could never time out: it hung (the watchdog caught it)
            (lambda: cluster.wait_until(lambda: False, timeout=1, interval=0), ValueError,
             r"interval must be a number of seconds > 0 \(the wait between checks: with 0 the clock never moves"),
            (lambda: cluster.wait_for_leader("t", 0, not_on=[1, 2, 3], timeout=1, interval=-1), ValueError,
             "interval must be a number of seconds > 0"),
            (lambda: cluster.wait_until(cluster.end_faults), TypeError,  # it returned at once, having checked nothing
             r"wait_until\(\) takes a plain function: an async one returns an awaitable"),
            (lambda: cluster.describe_topic(1), TypeError, "topic must be str"),
        ]:
            with pytest.raises(error, match=message):
                await call()
        for sync_call, error, message in [
            (lambda: cluster.pause_broker("1"), TypeError, "broker id must be int"),
            (lambda: cluster.resume_broker("1"), TypeError, "broker id must be int"),
            (lambda: cluster.partition_network({99}, {1}), ValueError,
             r"no node 99 in this cluster: the brokers are \[1, 2, 3\]"),
            (lambda: cluster.partition_network({"coord"}, {1}), ValueError,
             "no node 'coord' in this cluster: the brokers are \\[1, 2, 3\\] and COORDINATION \\('coordination'\\)"),
            (lambda: cluster.partition_network(1, {2}), TypeError, r"partition_network\(\) takes a collection"),
            (lambda: cluster.partition_network("12", "3"), TypeError, r"partition_network\(\) takes a collection"),
            (lambda: cluster.partition_network({True}, {2}), TypeError, "a node must be int or str, not bool"),
            (lambda: cluster.partition_network({1, 2}, {2, 3}), ValueError, "node 2 is in two groups"),
            (lambda: cluster.partition_state("t", "0"), TypeError, "partition must be int"),
            (lambda: cluster.leader_for(None, 0), TypeError, "topic must be str"),
            (lambda: cluster.high_watermark("t", 0.0), TypeError, "partition must be int"),
        ]:
            with pytest.raises(error, match=message):
                sync_call()
        # nothing was half done: no topic created or deleted, no broker stopped, no link cut
        assert cluster.topics() == ["t"] and cluster.live_broker_ids == [1, 2, 3]
        assert await cluster.produce("t", 0, values(1, "after")) == 1
        assert await read_values(cluster, "t") == [b"v0", b"after0"]


async def test_a_trio_cluster_lists_its_bootstrap_servers_for_tcp_clients(autojump_clock) -> None:
    from kafkalite.client import Admin

    async with Cluster(brokers=3, config=CONFIG, seed=19) as cluster:
        await cluster.create_topic("t", partitions=1, replication_factor=3)
        for listener, servers in (("NATIVE", cluster.bootstrap_servers), ("KAFKA", cluster.kafka_bootstrap_servers)):
            assert servers == ",".join(endpoint.removeprefix(f"{listener}://") for b in cluster.describe_cluster().brokers
                                       for endpoint in b.endpoints if endpoint.startswith(f"{listener}://"))
        async with Admin(cluster.bootstrap_servers) as admin:
            assert await admin.list_topics() == ["t"]
        await cluster.kill_broker(3)
        assert len(cluster.bootstrap_servers.split(",")) == 2  # live brokers only


def test_election_types_and_outcomes_are_importable_from_kafkalite() -> None:
    import kafkalite
    from kafkalite import COORDINATION, PREFERRED_ELECTION, UNCLEAN_ELECTION, ElectionOutcome

    assert {"COORDINATION", "PREFERRED_ELECTION", "UNCLEAN_ELECTION", "ElectionOutcome"} <= set(kafkalite.__all__)
    assert (PREFERRED_ELECTION, UNCLEAN_ELECTION, COORDINATION) == (0, 1, "coordination")
    assert ElectionOutcome(errors.NONE).elected
    refused = ElectionOutcome(errors.ELECTION_NOT_NEEDED, "t-0 is led by its preferred replica")
    assert not refused.elected and refused.error.name == "ELECTION_NOT_NEEDED"
    assert refused == ElectionOutcome(errors.ELECTION_NOT_NEEDED)


async def test_a_restarted_broker_serves_on_the_ports_it_had(autojump_clock: Any) -> None:
    """As a Kafka broker's, fixed in its server.properties: a broker restarted on new ports left the bootstrap
    servers a client (or a Spark query's options) was given pointing at nothing once every broker had restarted."""
    from kafkalite.client import Admin

    async with Cluster(brokers=2) as cluster:
        await cluster.create_topic("t", 1, 2)
        native, kafka = cluster.bootstrap_servers, cluster.kafka_bootstrap_servers
        for broker_id in cluster.broker_ids:
            await cluster.kill_broker(broker_id)
        for broker_id in cluster.broker_ids:
            await cluster.restart_broker(broker_id)
        assert (cluster.bootstrap_servers, cluster.kafka_bootstrap_servers) == (native, kafka)
        async with Admin(native) as admin:
            assert await admin.list_topics() == ["t"]


async def test_a_broker_whose_port_was_taken_restarts_on_new_ports_only_when_asked_and_clients_find_it(
        autojump_clock: Any) -> None:
    """Something else took a killed broker's port: the restart is refused, naming it, and the broker stays
    stopped; `new_ports=True` moves it (the chaos harness's supervisor does, as its sweep's processes all bind port
    0), and a client bootstrapped from another broker reaches it there through metadata."""
    from kafkalite.client import Admin, Producer

    async with Cluster(brokers=3) as cluster:
        old = native_address(cluster, 3)
        await cluster.kill_broker(3)
        with socket.socket() as taken:
            taken.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # past the connections the broker left
            taken.bind(("127.0.0.1", int(old.rpartition(":")[2])))
            taken.listen()
            with pytest.raises(OSError, match=f"broker 3 cannot listen on the ports it had .*{old}") as refused:
                await cluster.restart_broker(3)
            assert refused.value.errno == errno.EADDRINUSE and cluster.live_broker_ids == [1, 2]
            await cluster.restart_broker(3, new_ports=True)
            new = native_address(cluster, 3)
        assert new != old and cluster.live_broker_ids == [1, 2, 3]
        await cluster.create_topic("moved", 3, 3)  # each broker leads one partition
        led = next(p for p in range(3) if cluster.leader_for("moved", p) == 3)
        async with Admin(native_address(cluster, 1)) as admin:
            moved = next(b for b in (await admin.describe_cluster()).brokers if b.node_id == 3)
            assert f"{moved.host}:{moved.port}" == new
        async with Producer(native_address(cluster, 1), {"acks": "all"}) as producer:
            assert (await (await producer.send("moved", b"found", partition=led))).offset == 0


def native_address(cluster: Cluster, broker_id: int) -> str:
    return next(ep.address for ep in cluster.broker(broker_id).endpoints if ep.listener == "NATIVE")


async def test_a_broker_started_while_cut_off_from_the_coordination_service_gives_up_and_is_not_reported_live(
        autojump_clock: Any) -> None:
    """As Kafka's broker fails its startup after zookeeper.connection.timeout.ms: the restart waited for the service
    for ever (virtual time moving on, so no watchdog saw it) while the cluster reported the broker live, listed its
    old port in bootstrap_servers and handed out its previous incarnation."""
    from kafkalite.cluster import COORDINATION, CoordinationTimeoutError

    async with Cluster(brokers=3, config=CONFIG, seed=20) as cluster:
        await cluster.create_topic("t", partitions=1, replication_factor=3)
        address = native_address(cluster, 3)
        cluster.partition_network({3}, {1, 2, COORDINATION})
        await cluster.kill_broker(3)
        seen: list[tuple[list[int], str, str]] = []

        async def look_while_it_starts() -> None:
            await trio.sleep(1)
            with pytest.raises(ValueError, match="broker 3 is still starting") as starting:
                cluster.broker(3)
            seen.append((cluster.live_broker_ids, cluster.bootstrap_servers, str(starting.value)))

        started = trio.current_time()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(look_while_it_starts)
            with pytest.raises(CoordinationTimeoutError, match=r"broker 3 cannot reach the coordination service .* "
                                                               r"after 6000 ms .* heal\(\) the network first"):
                with trio.fail_after(SESSION_MS / 1000 + 1):  # it waited for ever, the clock moving on
                    await cluster.restart_broker(3)
        assert trio.current_time() - started == pytest.approx(SESSION_MS / 1000)
        assert seen[0][0] == [1, 2] and address not in seen[0][1]
        assert cluster.live_broker_ids == [1, 2] and address not in cluster.bootstrap_servers
        assert [b.alive for b in cluster.describe_cluster().brokers] == [True, True, False]
        with pytest.raises(ValueError, match="broker 3 is not running"):
            cluster.broker(3)
        cluster.heal()
        await cluster.restart_broker(3)
        assert cluster.live_broker_ids == [1, 2, 3] and native_address(cluster, 3) == address
        await cluster.wait_until(lambda: 3 in cluster.partition_state("t", 0).isr)

    starting = Cluster(brokers=2, config=CONFIG, seed=21)  # the same at the cluster's own start
    starting.partition_network({2}, {1, COORDINATION})
    with pytest.raises(CoordinationTimeoutError, match="broker 2 cannot reach the coordination service"):
        async with starting:
            pass


async def test_partition_network_refuses_a_cut_of_fewer_than_two_groups_and_replaces_the_last_cut(
        autojump_clock: Any) -> None:
    """partition_network({1}) was taken and cut nothing."""
    from kafkalite.cluster import COORDINATION

    async with Cluster(brokers=3, config=CONFIG, seed=22) as cluster:
        for groups in [(), ({1},), ({1}, set()), ({1, 2, 3, COORDINATION},)]:
            with pytest.raises(ValueError, match=r"which cuts nothing: to isolate a node give it and everyone else, "
                                                 r"e\.g\. partition_network\(\{1\}, \{2, 3, COORDINATION\}\); "
                                                 r"heal\(\) removes the cut"):
                cluster.partition_network(*groups)
        assert cluster.transport.link_up(1, 2)
        cluster.partition_network({1}, {2})
        assert not cluster.transport.link_up(1, 2)
        cluster.partition_network({3}, {COORDINATION})  # replaces the first cut, as documented
        assert cluster.transport.link_up(1, 2) and not cluster.transport.link_up(3, COORDINATION)
        cluster.heal()
        assert cluster.transport.link_up(3, COORDINATION)


async def test_an_in_process_client_is_cut_off_by_its_client_id(autojump_clock: Any) -> None:
    """A client's name was refused (the chaos nemesis's cut-client then cut nothing); a typo must still be."""
    from kafkalite.client import Producer
    from kafkalite.cluster import ClientNode

    async with Cluster(brokers=3, config=CONFIG, seed=23) as cluster:
        await cluster.create_topic("t", partitions=1, replication_factor=3)
        with pytest.raises(ValueError, match=r"no node 'app' in this cluster: .* an in-process client is named by "
                                             r"its client.id once it has sent a request \(so far: cluster-client\), "
                                             r"or before that as ClientNode\('app'\)"):
            cluster.partition_network({"app"}, {1, 2, 3})
        cluster.partition_network({ClientNode("not-yet")}, {1, 2, 3})  # marked: taken before it sends
        for reserved in ("cluster-client", ClientNode("coordination")):  # the harness's own calls, the service
            with pytest.raises(ValueError, match="give the client another client.id"):
                cluster.partition_network({reserved}, {1, 2, 3})
        async with Producer(cluster, {"client.id": "app"}) as producer:
            assert (await (await producer.send("t", b"before", partition=0))).offset == 0
            with pytest.raises(ValueError, match="no node 'apq' .*so far: app, cluster-client"):
                cluster.partition_network({"apq"}, {1, 2, 3})
            cluster.partition_network({"app"}, {1, 2, 3})
            during = await producer.send("t", b"during", partition=0)
            await trio.sleep(5)
            assert not during.done() and cluster.high_watermark("t", 0) == 1
            cluster.heal()
            assert (await during).offset == 1


async def test_a_deletion_the_resigned_controller_left_to_its_successor_is_a_success(autojump_clock: Any) -> None:
    """A controller that resigns mid-deletion answers NOT_CONTROLLER, and its successor finishes the deletion from
    the znode. Asked again, it answered UNKNOWN_TOPIC_OR_PARTITION, which delete_topic raised for the topic it had
    itself deleted."""
    async with Cluster(brokers=3, config=CONFIG, seed=2) as cluster:
        await cluster.create_topic("d", partitions=1, replication_factor=3)
        controller = cluster.controller_id
        assert controller is not None
        other = next(b for b in cluster.broker_ids if b != controller)
        cluster.pause_broker(other)  # its StopReplica holds the deletion
        async with trio.open_nursery() as nursery:
            nursery.start_soon(partial(cluster.delete_topic, "d", timeout=60))
            await trio.sleep(0.5)
            await cluster.expire_session(controller)
            cluster.resume_broker(other)
        assert "d" not in cluster.topics()


async def test_admin_calls_right_after_the_controller_dies_wait_for_the_next_one(autojump_clock: Any) -> None:
    """As Kafka's AdminClient retries until a controller exists: they failed at once with "no active controller"."""
    async with Cluster(brokers=3, config=CONFIG, seed=24) as cluster:
        await cluster.create_topic("old", partitions=1, replication_factor=1)

        async def kill_the_controller() -> int:
            victim = cluster.controller_id
            assert victim is not None
            if "old" in cluster.topics() and cluster.partition_state("old", 0).leader == victim:  # deleting it waits
                await cluster.reassign_partitions({TopicPartition("old", 0): [victim % 3 + 1]})
            await cluster.kill_broker(victim)
            return victim

        killed = await kill_the_controller()
        started = trio.current_time()
        await cluster.create_topic("t", partitions=1, replication_factor=2, timeout=30)
        assert SESSION_MS / 1000 / 2 <= trio.current_time() - started <= SESSION_MS / 1000 + 1
        assert cluster.controller_id not in (None, killed) and cluster.leader_for("t", 0) >= 0
        await cluster.restart_broker(killed)
        for call in [lambda: cluster.create_partitions("t", 2), lambda: cluster.delete_topic("old"),
                     cluster.elect_preferred_leaders, cluster.list_partition_reassignments]:
            victim = await kill_the_controller()
            await call()
            await cluster.restart_broker(victim)
        assert cluster.topics() == ["t"] and len(await cluster.describe_topic("t")) == 2


async def test_an_admin_call_answered_not_controller_asks_the_next_controller(autojump_clock: Any) -> None:
    """A controller cut off the coordination service resigns and answers NOT_CONTROLLER: the call asks again."""
    from kafkalite.cluster import COORDINATION

    async with Cluster(brokers=3, config=CONFIG, seed=25) as cluster:
        zombie = cluster.controller_id
        cluster.partition_network({zombie}, {COORDINATION})
        async with trio.open_nursery() as nursery:
            nursery.start_soon(lambda: cluster.create_topic("t", partitions=1, replication_factor=2, timeout=30))
            await cluster.wait_until(lambda: cluster.controller_id not in (None, zombie), timeout=20)
            cluster.heal()  # the topic is created once every live broker knows it: the zombie too
        assert cluster.controller_id != zombie and cluster.partition_state("t", 0).leader >= 0


async def test_an_admin_call_with_no_controller_to_elect_says_so_after_its_timeout(autojump_clock: Any) -> None:
    async with Cluster(brokers=1, config=CONFIG, seed=26) as cluster:
        await cluster.kill_broker(1)
        started = trio.current_time()
        with pytest.raises(errors.RequestTimedOutError, match=r"no controller was elected within 5 s to take "
                                                              r"CreateTopicsRequest: .*zookeeper.session.timeout.ms"):
            await cluster.create_topic("t", timeout=5)
        assert trio.current_time() - started == pytest.approx(5)


async def test_replicas_forget_an_idempotent_producer_idle_for_producer_id_expiration_ms(autojump_clock) -> None:
    """Kafka's removeExpiredProducers (KIP-854): every replica drops a producer whose last batch is
    producer.id.expiration.ms old, checked every producer.id.expiration.check.interval.ms; one still writing is
    kept, and a forgotten one that writes again is taken and tracked anew."""
    from kafkalite.client import Producer

    config = {**CONFIG, "producer.id.expiration.ms": 60_000, "producer.id.expiration.check.interval.ms": 10_000}
    async with Cluster(brokers=3, config=config, seed=5) as cluster:
        await cluster.create_topic("ids", partitions=1, replication_factor=3)

        def known() -> list[set[int]]:
            return [set(cluster.broker(b).replica_manager.get_partition(TopicPartition("ids", 0)).producer_state
                        .producers) for b in cluster.broker_ids]

        async with Producer(cluster, {"enable.idempotence": True}) as idle, \
                Producer(cluster, {"enable.idempotence": True}) as busy:
            await (await idle.send("ids", b"once", partition=0))
            for _ in range(8):
                await (await busy.send("ids", b"again", partition=0))
                await trio.sleep(10)
            assert known() == [{busy.producer_id}] * 3
            await (await idle.send("ids", b"back", partition=0))
            await trio.sleep(1)
            assert known() == [{idle.producer_id, busy.producer_id}] * 3
        values = [record.value for _, record in await cluster.fetch("ids", 0, 0)]
        assert values == [b"once"] + [b"again"] * 8 + [b"back"]
