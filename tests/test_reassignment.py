"""Partition reassignment: replicas move, leaders follow, nothing acknowledged is lost, logs agree."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from kafkalite.client import Admin
from kafkalite.cluster import Cluster
from kafkalite.common import errors
from kafkalite.common.records import Record
from kafkalite.common.types import TopicPartition
from kafkalite.network.requests import AlterPartitionReassignmentsRequest, ReassignablePartition

CONFIG = {"zookeeper.session.timeout.ms": 6000, "replica.lag.time.max.ms": 10000,
          "auto.leader.rebalance.enable": False}
TP = TopicPartition("t", 0)


def values(n: int, prefix: str = "v") -> list[Record]:
    return [Record(None, f"{prefix}{i}".encode()) for i in range(n)]


async def check_moved(cluster: Cluster, target: list[int], expected: list[bytes]) -> None:
    d = (await cluster.describe_topic("t"))[0]
    assert list(d.replicas) == target
    assert d.leader in target and set(d.isr) <= set(target)
    assert [r.value for _, r in await cluster.fetch_all("t", 0)] == expected
    await cluster.wait_until(lambda: cluster.high_watermark("t", 0) == len(expected), timeout=30)
    logs = {}
    for broker_id in cluster.broker_ids:
        log = cluster.log_manager(broker_id).get_log(TP)
        if broker_id in target:
            await cluster.wait_until(lambda b=broker_id: cluster.log_manager(b).get_log(TP).log_end_offset
                                     == len(expected), timeout=30)
            log = cluster.log_manager(broker_id).get_log(TP)
            logs[broker_id] = [(b.base_offset, b.payload) for b in log.read(0, 1 << 30)]
        else:  # a replica a move stopped is deleted when its broker gets the StopReplica
            await cluster.wait_until(lambda b=broker_id: cluster.log_manager(b).get_log(TP) is None, timeout=30,
                                     what=f"broker {broker_id} to delete its replica of {TP}")
    assert len({tuple(batches) for batches in logs.values()}) == 1


async def test_three_to_three_moving_the_leader(autojump_clock: Any) -> None:
    async with Cluster(brokers=4, config=CONFIG, seed=1) as cluster:
        await cluster.create_topic("t", partitions=1, replication_factor=3)
        await cluster.produce("t", 0, values(10))
        d = (await cluster.describe_topic("t"))[0]
        outsider = next(b for b in cluster.broker_ids if b not in d.replicas)
        target = [outsider] + [r for r in d.replicas if r != d.leader]
        await cluster.reassign_partitions({TP: target})
        assert cluster.leader_for("t", 0) != d.leader
        assert await cluster.list_partition_reassignments() == []
        await cluster.wait_for_leader("t", 0)
        await cluster.produce("t", 0, values(1, "after"))
        await check_moved(cluster, target, [f"v{i}".encode() for i in range(10)] + [b"after0"])


async def test_one_to_three_grows_the_replica_set(autojump_clock: Any) -> None:
    async with Cluster(brokers=3, config=CONFIG, seed=2) as cluster:
        await cluster.create_topic("t", partitions=1, replication_factor=1)
        await cluster.produce("t", 0, values(5), acks=1)
        leader = cluster.leader_for("t", 0)
        target = [leader] + [b for b in cluster.broker_ids if b != leader]
        await cluster.reassign_partitions({TP: target})
        assert cluster.leader_for("t", 0) == leader
        assert sorted(cluster.partition_state("t", 0).isr) == sorted(target)
        await check_moved(cluster, target, [f"v{i}".encode() for i in range(5)])


async def test_reassign_partitions_waits_for_the_moved_partitions_not_for_the_rest_of_their_topics(
        autojump_clock: Any) -> None:
    """`Cluster.reassign_partitions` returns once the partitions it moved are where they were sent, with leaders
    every broker knows, in several topics at once: a partition of the same topic without a leader (its only
    replica's broker is down) is none of its business. It once waited for every partition up to the highest one
    moved, and timed out here."""
    async with Cluster(brokers=4, config=CONFIG, seed=4) as cluster:
        await cluster.create_topic("t", partitions=3, replication_factor=1)
        await cluster.create_topic("u", partitions=1, replication_factor=1)
        await cluster.reassign_partitions({TopicPartition("t", 0): [1], TopicPartition("t", 1): [2],
                                           TopicPartition("t", 2): [2], TopicPartition("u", 0): [2]})
        await cluster.produce("t", 2, values(2), acks=-1)
        await cluster.kill_broker(1)  # t-0 has no live replica from now on
        await cluster.reassign_partitions({TopicPartition("t", 2): [3], TopicPartition("u", 0): [4]}, timeout=30)
        described = {(topic, d.partition): d for topic in ("t", "u") for d in await cluster.describe_topic(topic)}
        assert [(d.replicas, d.leader) for d in described.values()] == [((1,), -1), ((2,), 2), ((3,), 3), ((4,), 4)]
        for broker_id in cluster.live_broker_ids:
            cache = cluster.broker(broker_id).metadata_cache
            assert [cache.get_partition_info(TopicPartition(*key)).leader for key in [("t", 2), ("u", 0)]] == [3, 4]
        assert [r.value for _, r in await cluster.fetch_all("t", 2)] == [b"v0", b"v1"]


async def test_reassignment_resumes_after_controller_failover_and_target_broker_return(autojump_clock: Any) -> None:
    async with Cluster(brokers=4, config=CONFIG, seed=3) as cluster:
        await cluster.create_topic("t", partitions=1, replication_factor=2)
        await cluster.produce("t", 0, values(4))
        d = (await cluster.describe_topic("t"))[0]
        others = [b for b in cluster.broker_ids if b not in d.replicas]
        slow = next((b for b in others if b != cluster.controller_id), others[0])
        target = [d.replicas[0], slow]
        cluster.pause_broker(slow)  # it cannot catch up: the reassignment waits in its first phase
        response = await cluster.transport.send("client", cluster.controller_id, AlterPartitionReassignmentsRequest(
            [ReassignablePartition("t", 0, target)]))
        assert response.responses[0].error_code == errors.NONE.code
        await trio.sleep(1)
        ongoing = await cluster.list_partition_reassignments()
        assert [(o.topic, o.partition, o.adding_replicas) for o in ongoing] == [("t", 0, [slow])]
        old_controller = cluster.controller_id
        await cluster.kill_broker(old_controller)  # the controller dies mid-reassignment
        await cluster.kill_broker(slow)  # and the target broker is down too
        await cluster.wait_until(lambda: cluster.controller_id not in (None, old_controller), timeout=60)
        await cluster.restart_broker(slow)  # it comes back: the new controller resumes
        if old_controller in target:
            await cluster.restart_broker(old_controller)
        await cluster.wait_until(lambda: cluster.controller_id is not None and
                                 not cluster.controller().context.partitions_being_reassigned, timeout=120)
        await cluster.wait_for_leader("t", 0)
        if old_controller not in target:
            await cluster.restart_broker(old_controller)
        await check_moved(cluster, target, [f"v{i}".encode() for i in range(4)])


async def test_bad_reassignments_change_nothing(autojump_clock: Any) -> None:
    async with Cluster(brokers=3, config=CONFIG, seed=4) as cluster:
        await cluster.create_topic("t", partitions=1, replication_factor=2)
        await cluster.produce("t", 0, values(2))
        before = cluster.partition_state("t", 0)
        before_replicas = (await cluster.describe_topic("t"))[0].replicas
        dead = next(b for b in (3, 2, 1) if b not in before_replicas)  # adding it would be the move's
        await cluster.kill_broker(dead)
        await cluster.wait_until(lambda: cluster.controller_id is not None and
                                 dead not in cluster.controller().context.live_brokers, timeout=30)
        alive = cluster.controller_id
        cases = [([], errors.InvalidReplicaAssignmentError, "empty"),
                 ([alive, alive], errors.InvalidReplicaAssignmentError, "repeats"),
                 ([alive, 9], errors.InvalidReplicaAssignmentError, "not alive"),
                 ([alive, dead], errors.InvalidReplicaAssignmentError, "not alive")]
        for replicas, error, words in cases:
            with pytest.raises(error, match=words):
                await cluster.reassign_partitions({TP: replicas})
        with pytest.raises(errors.UnknownTopicOrPartitionError):
            await cluster.reassign_partitions({TopicPartition("t", 5): [alive]})
        assert await cluster.list_partition_reassignments() == []
        assert cluster.partition_state("t", 0).leader_epoch >= before.leader_epoch
        assert (await cluster.describe_topic("t"))[0].replicas == tuple(before_replicas)
        assert await cluster.produce("t", 0, values(1, "after"), acks=1) == 2
        await cluster.wait_until(lambda: cluster.high_watermark("t", 0) == 3, timeout=30)
        assert [r.value for _, r in await cluster.fetch_all("t", 0)] == [b"v0", b"v1", b"after0"]


async def test_a_move_may_keep_a_replica_whose_broker_is_down_and_a_new_order_completes_at_once(
        autojump_clock: Any) -> None:
    """As Kafka's validateReplicas, only the replicas a move adds must be alive; and a move that adds and removes
    nothing (a new order) is complete at once, as Kafka's isReassignmentComplete, with a replica out of the ISR."""
    async with Cluster(brokers=4, config=CONFIG, seed=6) as cluster:
        await cluster.create_topic("t", partitions=1, replication_factor=3)
        await cluster.produce("t", 0, values(3), acks=-1)
        replicas = list((await cluster.describe_topic("t"))[0].replicas)
        down = next(b for b in reversed(replicas) if b != cluster.controller_id)
        await cluster.kill_broker(down)
        await cluster.wait_until(lambda: down not in cluster.partition_state("t", 0).isr, timeout=30)
        reordered = [r for r in replicas if r != down][::-1] + [down]
        async with Admin(cluster) as admin:
            await admin.alter_partition_reassignments({TP: reordered})
        await cluster.wait_until(lambda: not cluster.controller().context.partitions_being_reassigned, timeout=5,
                                 what="the new order to complete")
        assert list((await cluster.describe_topic("t"))[0].replicas) == reordered
        kept = [r for r in replicas if r != down][:1] + [down]  # drops one live replica, keeps the dead one
        async with Admin(cluster) as admin:
            await admin.alter_partition_reassignments({TP: kept})
        await trio.sleep(30)
        assert [o.partition for o in await cluster.list_partition_reassignments()] == [0]  # waits for `down`
        await cluster.restart_broker(down)
        await cluster.wait_until(lambda: list(cluster.controller().context.partition_replica_assignment(TP)) == kept
                                 and not cluster.controller().context.partitions_being_reassigned, timeout=60)
        await cluster.wait_until(lambda: set(cluster.partition_state("t", 0).isr) == set(kept), timeout=60)
        assert [r.value for _, r in await cluster.fetch_all("t", 0)] == [b"v0", b"v1", b"v2"]


async def moving(cluster: Cluster, slow: int, target: list[int]) -> None:
    """Start moving TP to `target` with broker `slow` paused, so the move waits in its first phase."""
    cluster.pause_broker(slow)
    async with Admin(cluster) as admin:
        await admin.alter_partition_reassignments({TP: target})
    ongoing = await cluster.list_partition_reassignments()
    assert [(o.topic, o.partition, o.replicas[:len(target)]) for o in ongoing] == [("t", 0, target)]


async def test_a_move_in_progress_is_cancelled_back_to_its_replicas(autojump_clock: Any) -> None:
    """KIP-455: a null target cancels the move; the replica it had added is stopped and deleted at once, and the
    partition is where it was, with every record. A second cancel, or one for a partition nobody moves, is
    NO_REASSIGNMENT_IN_PROGRESS."""
    async with Cluster(brokers=4, config=CONFIG, seed=5) as cluster:
        await cluster.create_topic("t", partitions=1, replication_factor=2)
        await cluster.produce("t", 0, values(4))
        original = list((await cluster.describe_topic("t"))[0].replicas)
        slow = next(b for b in cluster.broker_ids if b not in original and b != cluster.controller_id)
        await moving(cluster, slow, [original[0], slow])
        async with Admin(cluster) as admin:
            await admin.alter_partition_reassignments({TP: None})
            assert await cluster.list_partition_reassignments() == []
            with pytest.raises(errors.NoReassignmentInProgressError, match="t-0 is not being reassigned"):
                await admin.alter_partition_reassignments({TP: None})
        cluster.resume_broker(slow)
        await cluster.wait_for_leader("t", 0)
        await cluster.produce("t", 0, values(1, "after"))
        await check_moved(cluster, original, [f"v{i}".encode() for i in range(4)] + [b"after0"])


async def test_a_move_in_progress_takes_a_new_target(autojump_clock: Any) -> None:
    """A new target for a partition being moved replaces the old one: the replica only the old target wanted is
    stopped and deleted, and the move completes to the new target."""
    async with Cluster(brokers=4, config=CONFIG, seed=6) as cluster:
        await cluster.create_topic("t", partitions=1, replication_factor=2)
        await cluster.produce("t", 0, values(4))
        original = list((await cluster.describe_topic("t"))[0].replicas)
        outsiders = [b for b in cluster.broker_ids if b not in original]
        slow = next(b for b in outsiders if b != cluster.controller_id)
        other = next(b for b in outsiders if b != slow)
        await moving(cluster, slow, [original[0], slow])
        target = [other, original[0]]
        await cluster.reassign_partitions({TP: target})
        cluster.resume_broker(slow)
        await cluster.produce("t", 0, values(1, "after"))
        await check_moved(cluster, target, [f"v{i}".encode() for i in range(4)] + [b"after0"])


async def test_cancelling_moves_leadership_off_an_added_replica_first(autojump_clock: Any) -> None:
    """A replica the move added has become leader (the original one died, and it was in the ISR). Cancelling
    must hand leadership back before stopping it: refused while no original replica is alive and in the ISR,
    the move going on as it was; done once one is."""
    async with Cluster(brokers=3, config=CONFIG, seed=7) as cluster:
        await cluster.create_topic("t", partitions=1, replication_factor=1)
        await cluster.produce("t", 0, values(3), acks=1)
        [first] = (await cluster.describe_topic("t"))[0].replicas
        fast, slow = [b for b in cluster.broker_ids if b != first]
        if slow == cluster.controller_id:
            fast, slow = slow, fast
        await moving(cluster, slow, [fast, slow])
        await cluster.wait_until(lambda: fast in cluster.partition_state("t", 0).isr)
        await cluster.kill_broker(first)
        await cluster.wait_until(lambda: cluster.leader_for("t", 0) == fast, timeout=60)
        async with Admin(cluster) as admin:
            with pytest.raises(errors.InvalidReplicaAssignmentError, match=f"replica {fast} leads t-0"):
                await admin.alter_partition_reassignments({TP: None})
            assert [o.replicas for o in await cluster.list_partition_reassignments()] == [[fast, slow, first]]
            await cluster.restart_broker(first)
            await cluster.wait_until(lambda: first in cluster.partition_state("t", 0).isr, timeout=60)
            await admin.alter_partition_reassignments({TP: None})
        assert await cluster.wait_for_leader("t", 0) == first
        cluster.resume_broker(slow)
        await check_moved(cluster, [first], [f"v{i}".encode() for i in range(3)])
