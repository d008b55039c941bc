"""Preferred-replica and unclean elections on request, and the controller's automatic leader rebalance."""

from __future__ import annotations

import gc
from collections import Counter
from typing import Any

import pytest
import trio

from kafkalite.cluster import Cluster, ElectionOutcome
from kafkalite.common import errors
from kafkalite.common.records import Record
from kafkalite.common.types import TopicPartition
from kafkalite.network.requests import PREFERRED_ELECTION, UNCLEAN_ELECTION, ElectLeadersRequest, \
    ElectLeadersResponse
from kafkalite.testing.checks import assert_replicas_agree, metadata_agrees, replica_batches

CONFIG = {"zookeeper.session.timeout.ms": 6000, "auto.leader.rebalance.enable": False}


def leaders(cluster: Cluster, topic: str, partitions: int) -> Counter[int]:
    return Counter(cluster.leader_for(topic, p) for p in range(partitions))


async def test_preferred_election_restores_leadership_after_a_failover(autojump_clock: Any) -> None:
    async with Cluster(brokers=3, config=CONFIG, seed=1) as cluster:
        await cluster.create_topic("t", partitions=6, replication_factor=3)
        for p in range(6):
            await cluster.produce("t", p, [Record(None, b"a")])
        victim = next(b for b in cluster.broker_ids if b != cluster.controller_id)
        await cluster.kill_broker(victim)
        await cluster.wait_until(lambda: victim not in leaders(cluster, "t", 6), timeout=60)
        await cluster.restart_broker(victim)
        await cluster.wait_until(lambda: all(victim in cluster.partition_state("t", p).isr for p in range(6)),
                                 timeout=60)
        assert leaders(cluster, "t", 6)[victim] == 0  # back in sync but leading nothing
        results = await cluster.elect_preferred_leaders()
        described = await cluster.describe_topic("t")
        for d in described:
            tp = TopicPartition("t", d.partition)
            assert results[tp].elected == (d.replicas[0] == victim)
            assert results[tp].error == (errors.NONE if d.replicas[0] == victim else errors.ELECTION_NOT_NEEDED)
            assert d.leader == d.replicas[0]
        assert leaders(cluster, "t", 6) == Counter({1: 2, 2: 2, 3: 2})
        for p in range(6):
            await cluster.wait_for_leader("t", p)
            assert await cluster.produce("t", p, [Record(None, b"b")]) == 1
            assert [r.value for _, r in await cluster.fetch_all("t", p)] == [b"a", b"b"]
            await assert_replicas_agree(cluster, "t", p)
        await cluster.wait_until(lambda: metadata_agrees(cluster, "t", 6), timeout=30)
        missing = await cluster.elect_preferred_leaders([TopicPartition("nope", 0)])
        assert missing == {TopicPartition("nope", 0): ElectionOutcome(errors.UNKNOWN_TOPIC_OR_PARTITION)}
        assert missing[TopicPartition("nope", 0)].message  # the controller says why


async def test_a_finished_election_leaves_nothing_of_itself_in_the_controller(autojump_clock: Any) -> None:
    """The controller's event loop let go of each request once it was answered only when the next event came: an
    election of every partition kept its response, an entry a partition, for as long as the cluster then idled,
    carried by the cyclic GC into its oldest generation and walked at every full collection."""
    def responses() -> list[ElectLeadersResponse]:  # in this process, earlier tests' included
        return [o for o in gc.get_objects() if isinstance(o, ElectLeadersResponse)]

    async with Cluster(brokers=3, config=CONFIG, seed=1) as cluster:
        await cluster.create_topic("t", partitions=30, replication_factor=3)
        gc.collect()
        before = responses()
        results = await cluster.elect_preferred_leaders()
        assert len(results) == 30
        await trio.sleep(1)
        gc.collect()
        assert [o for o in responses() if not any(o is earlier for earlier in before)] == []


async def test_auto_rebalance_brings_leader_counts_back(autojump_clock: Any) -> None:
    config = {**CONFIG, "auto.leader.rebalance.enable": True, "leader.imbalance.check.interval.seconds": 30,
              "leader.imbalance.per.broker.percentage": 10}
    async with Cluster(brokers=3, config=config, seed=2) as cluster:
        await cluster.create_topic("t", partitions=9, replication_factor=3)
        victim = next(b for b in cluster.broker_ids if b != cluster.controller_id)
        await cluster.kill_broker(victim)
        await cluster.wait_until(lambda: victim not in leaders(cluster, "t", 9), timeout=60)
        await cluster.restart_broker(victim)
        await cluster.wait_until(lambda: leaders(cluster, "t", 9) == Counter({1: 3, 2: 3, 3: 3}), timeout=120)
        for p in range(9):
            d = (await cluster.describe_topic("t"))[p]
            assert d.leader == d.replicas[0]
            await assert_replicas_agree(cluster, "t", p)


async def test_unclean_election_on_request(autojump_clock: Any) -> None:
    async with Cluster(brokers=3, config=CONFIG, seed=3) as cluster:
        await cluster.create_topic("t", partitions=1, replication_factor=2)
        await cluster.produce("t", 0, [Record(None, b"a")])
        d = (await cluster.describe_topic("t"))[0]
        follower = next(r for r in d.replicas if r != d.leader)
        assert await cluster.elect_leaders(UNCLEAN_ELECTION, [TopicPartition("t", 0)]) == \
            {TopicPartition("t", 0): ElectionOutcome(errors.ELECTION_NOT_NEEDED)}
        await cluster.kill_broker(follower)
        await cluster.wait_until(lambda: cluster.partition_state("t", 0).isr == (d.leader,), timeout=60)
        await cluster.kill_broker(d.leader)
        await cluster.restart_broker(follower)
        await cluster.wait_until(lambda: cluster.controller_id is not None and d.leader not in
                                 cluster.controller().context.live_brokers and follower in
                                 cluster.controller().context.live_brokers, timeout=60)
        assert cluster.leader_for("t", 0) == -1  # unclean election is off for the topic
        result = await cluster.elect_leaders(UNCLEAN_ELECTION, [TopicPartition("t", 0)])
        assert result == {TopicPartition("t", 0): ElectionOutcome(errors.NONE)}
        assert result[TopicPartition("t", 0)].elected
        assert await cluster.wait_for_leader("t", 0) == follower
        response = await cluster.transport.send("client", cluster.controller_id, ElectLeadersRequest(7))
        assert response.error_code == errors.INVALID_REQUEST.code and "election type" in response.error_message


async def test_a_replica_back_from_leading_an_empty_epoch_catches_up(autojump_clock: Any) -> None:
    """Two unclean elections on request leave the follower with a last epoch it led without appending, and the
    leader with an earlier epoch, holding a record, that the follower never saw. The follower's truncation used
    to ask about its empty epoch forever, without yielding, which froze the whole cluster; now it truncates
    and replicates, and the record written while it was away survives."""
    tp = TopicPartition("t", 0)
    # Bounds the scenario in virtual time only: it cannot end a run that stops yielding or whose clock stops.
    with trio.fail_after(600):
        async with Cluster(brokers=3, config=CONFIG, seed=4) as cluster:

            async def restart_alone(up: int, down: int) -> None:
                """Kill `down`, and once the controller knows, start `up` again."""
                await cluster.kill_broker(down)
                await cluster.wait_until(lambda: cluster.controller_id is not None
                                         and down not in cluster.controller().context.live_brokers, timeout=60)
                await cluster.restart_broker(up)

            await cluster.create_topic("t", partitions=1, replication_factor=2)
            assert await cluster.produce("t", 0, [Record(None, b"a")]) == 0
            d = (await cluster.describe_topic("t"))[0]
            leader, follower = d.leader, next(r for r in d.replicas if r != d.leader)
            await cluster.kill_broker(follower)
            await cluster.wait_until(lambda: cluster.partition_state("t", 0).isr == (leader,), timeout=60)
            await restart_alone(leader, down=leader)  # a clean election: the leader is the whole ISR
            assert await cluster.wait_for_leader("t", 0) == leader
            assert await cluster.produce("t", 0, [Record(None, b"b")]) == 1
            assert [epoch > 0 for _, epoch, _ in replica_batches(cluster, leader, tp)] == [False, True]

            await restart_alone(follower, down=leader)
            assert await cluster.elect_leaders(UNCLEAN_ELECTION, [tp]) == {tp: ElectionOutcome(errors.NONE)}
            assert await cluster.wait_for_leader("t", 0) == follower  # leads from offset 1 and appends nothing

            await restart_alone(leader, down=follower)
            assert await cluster.elect_leaders(UNCLEAN_ELECTION, [tp]) == {tp: ElectionOutcome(errors.NONE)}
            assert await cluster.wait_for_leader("t", 0) == leader

            await cluster.restart_broker(follower)
            assert await cluster.produce("t", 0, [Record(None, b"c")]) == 2
            await assert_replicas_agree(cluster, "t", 0)
            assert sorted(cluster.partition_state("t", 0).isr) == sorted(d.replicas)
            assert [(o, r.value) for o, r in await cluster.fetch_all("t", 0)] == [(0, b"a"), (1, b"b"), (2, b"c")]
            assert cluster.high_watermark("t", 0) == 3


async def test_electing_every_partition_leaves_out_a_topic_being_deleted(autojump_clock: Any) -> None:
    """As Kafka, a null partition list means the partitions brokers know, which no longer include a topic whose
    deletion waits for a broker that is down: its partitions were answered INVALID_TOPIC_EXCEPTION."""
    async with Cluster(brokers=3, config=CONFIG, seed=7) as cluster:
        await cluster.create_topic("keep", partitions=1, replication_factor=3)
        await cluster.create_topic("gone", partitions=1, replication_factor=3)
        down = next(b for b in cluster.broker_ids if b != cluster.controller_id)
        await cluster.kill_broker(down)
        with pytest.raises(errors.RequestTimedOutError):
            await cluster.delete_topic("gone", timeout=5)  # waits for the broker that is down
        assert "gone" in cluster.controller().context.topics_to_be_deleted
        response = await cluster.transport.send("client", cluster.controller_id,
                                                ElectLeadersRequest(PREFERRED_ELECTION, None))
        assert response.error_code == errors.NONE.code
        assert {result.topic for result in response.results} == {"keep"}
