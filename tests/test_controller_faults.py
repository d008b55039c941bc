"""The controller and replica flows under faults: one regression test per defect found with the fault API.

Each scenario drives the real cluster on the mock clock (the suite's watchdog fails a test whose virtual time
stops, which is how a livelock shows), and ends with what a user relies on: one working controller, ISRs
holding only live replicas of the current assignment, acks=all writes that complete without waiting out a
lag timeout, and every acknowledged record still there.
"""

from __future__ import annotations

import logging

import pytest
import trio

from kafkalite.client import Admin
from kafkalite.cluster import COORDINATION, Cluster
from kafkalite.common import errors
from kafkalite.common.errors import NotControllerError
from kafkalite.common.records import Record
from kafkalite.common.types import TopicPartition
from kafkalite.controller.controller import ROUTES, route_for
from kafkalite.controller.event_manager import ControllerEvent, ControllerRequest
from kafkalite.network.requests import (
    AlterPartitionReassignmentsRequest,
    CreatableTopic,
    CreatePartitionsRequest,
    CreatePartitionsTopic,
    CreateTopicsRequest,
    ListPartitionReassignmentsRequest,
    MetadataRequest,
    ReassignablePartition,
    RequestContext,
    UpdateMetadataRequest,
)
from kafkalite.server.kafka_apis import KafkaApis
from kafkalite.testing.checks import assert_replicas_agree

SESSION_MS = 6000
LAG_MS = 10000
CONFIG = {"zookeeper.session.timeout.ms": SESSION_MS, "replica.lag.time.max.ms": LAG_MS,
          "auto.leader.rebalance.enable": False}


def values(n: int, prefix: str = "v") -> list[Record]:
    return [Record(None, f"{prefix}{i}".encode()) for i in range(n)]


async def produce_promptly(cluster: Cluster, topic: str, partition: int, records: list[Record]) -> int:
    """An acks=all produce that must not wait out a lag timeout (a dead or moved replica left in the ISR); a
    follower may still be in its replica.fetch.backoff.ms (1 s) after a leadership change."""
    started = trio.current_time()
    offset = await cluster.produce(topic, partition, records, acks=-1, timeout_ms=LAG_MS)
    assert trio.current_time() - started < 3, f"acks=all to {topic}-{partition} took {trio.current_time() - started}s"
    return offset


def assert_isr_live_and_assigned(cluster: Cluster, topic: str, partitions: int) -> None:
    controller = cluster.controller()
    for p in range(partitions):
        state = cluster.partition_state(topic, p)
        assigned = controller.context.partition_replica_assignment(TopicPartition(topic, p))
        assert set(state.isr) <= set(cluster.live_broker_ids) & set(assigned), \
            f"{topic}-{p}: ISR {state.isr}, live {cluster.live_broker_ids}, assigned {assigned}"


async def wait_settled(cluster: Cluster, topic: str, partitions: int) -> None:
    """Every partition led by a live broker and every live assigned replica back in the ISR."""
    def settled() -> bool:
        controller_id = cluster.controller_id
        if controller_id is None:
            return False
        context = cluster.controller(controller_id).context
        for p in range(partitions):
            state = cluster.partition_state(topic, p)
            live = set(context.partition_replica_assignment(TopicPartition(topic, p))) & set(cluster.live_broker_ids)
            if state.leader not in cluster.live_broker_ids or set(state.isr) != live:
                return False
        return True
    await cluster.wait_until(settled, timeout=120, what=f"{topic} settled")
    for p in range(partitions):
        await cluster.wait_for_leader(topic, p)


# -- 1, 2: a controller cut off from the coordination service ----------------------------------------------------

async def test_a_twice_expired_controller_session_does_not_spin_and_a_controller_is_elected(autojump_clock) -> None:
    async with Cluster(brokers=3, config=CONFIG, seed=1) as cluster:
        await cluster.create_topic("t", partitions=3, replication_factor=3, config={"min.insync.replicas": 2})
        old = cluster.controller_id
        await cluster.expire_session(old)
        await cluster.expire_session(old)
        before = trio.current_time()
        await trio.sleep(1)
        assert trio.current_time() - before == pytest.approx(1)
        await cluster.wait_until(lambda: cluster.controller_id is not None, timeout=30)
        await cluster.create_topic("after", partitions=2, replication_factor=3)
        await wait_settled(cluster, "t", 3)
        for p in range(3):
            assert await produce_promptly(cluster, "t", p, values(1)) == 0


async def test_a_cluster_whose_process_stood_still_keeps_its_controller_and_its_brokers(autojump_clock) -> None:
    """A computation holding up the one thread for longer than the session timeout (the clock jumps while
    nothing runs, as a CreateTopics of 50,000 partitions does on the real clock) expires no session: the controller,
    its epoch and every broker's registration stay, and the cluster serves on. Before, every session expired at
    once, and on the real clock each next controller lost its own doing the same work."""
    async with Cluster(brokers=3, config=CONFIG, seed=1) as cluster:
        await cluster.create_topic("t", partitions=3, replication_factor=3, config={"min.insync.replicas": 2})
        before = cluster.describe_cluster()
        autojump_clock.jump(5 * SESSION_MS / 1000)
        await trio.sleep(SESSION_MS / 1000)
        after = cluster.describe_cluster()
        assert (after.controller_id, after.controller_epoch) == (before.controller_id, before.controller_epoch)
        assert after.brokers == before.brokers  # each registered, alive, under the same broker epoch
        for p in range(3):
            assert await produce_promptly(cluster, "t", p, values(1)) == 0


async def test_a_controller_cut_from_coordination_answers_not_controller_and_stays_quiet(autojump_clock) -> None:
    async with Cluster(brokers=3, config=CONFIG, seed=2) as cluster:
        await cluster.create_topic("t", partitions=3, replication_factor=3)
        controller_id = cluster.controller_id
        controller = cluster.controller(controller_id)
        cluster.partition_network({controller_id}, {COORDINATION})
        response = await cluster.transport.send("client", controller_id, CreateTopicsRequest(
            [CreatableTopic("new", 1, 1)], timeout_ms=1000))
        assert response.topics[0].error_code == errors.NOT_CONTROLLER.code  # retriable: clients look again
        assert NotControllerError("x").retriable
        assert not controller.is_active
        queued_before = controller.event_manager._receive.statistics().current_buffer_used
        await trio.sleep(1)  # virtual time moves: nothing retries without waiting
        assert controller.event_manager._receive.statistics().current_buffer_used <= queued_before
        cluster.heal()
        await cluster.wait_until(lambda: cluster.controller_id is not None, timeout=30)
        await cluster.create_topic("new", partitions=1, replication_factor=3)
        assert cluster.partition_state("new", 0).leader in cluster.live_broker_ids


# -- 6: a brief cut must not leave a zombie that believes it is the controller --------------------------------------

async def _cut_the_controller_briefly_then_check(cluster: Cluster, cut_s: float) -> None:
    await cluster.create_topic("t", partitions=2, replication_factor=3)
    controller_id = cluster.controller_id
    epoch = cluster.controller().epoch
    cluster.partition_network({controller_id}, {COORDINATION})
    response = await cluster.transport.send("client", controller_id, CreateTopicsRequest(
        [CreatableTopic("during", 1, 3)], timeout_ms=1000))
    assert response.topics[0].error_code == errors.NOT_CONTROLLER.code
    await trio.sleep(cut_s)
    cluster.heal()
    await cluster.wait_until(lambda: cluster.controller_id is not None, timeout=30)
    active = [b for b in cluster.live_broker_ids if cluster.controller(b).is_active]
    assert active == [cluster.controller_id]
    assert cluster.controller().epoch > epoch  # a new term, with state machines, not a zombie
    await cluster.create_topic("after", partitions=3, replication_factor=3)
    await cluster.create_partitions("t", 3)
    assert [cluster.partition_state("t", p).leader in cluster.live_broker_ids for p in range(3)] == [True] * 3


async def test_a_brief_cut_leaves_no_zombie_controller_on_the_mock_clock(autojump_clock) -> None:
    async with Cluster(brokers=3, config=CONFIG, seed=6) as cluster:
        await _cut_the_controller_briefly_then_check(cluster, 1)


async def test_a_brief_cut_leaves_no_zombie_controller_on_the_real_clock() -> None:
    async with Cluster(brokers=3, config={**CONFIG, "zookeeper.session.timeout.ms": 3000}, seed=6) as cluster:
        with trio.fail_after(20):
            await _cut_the_controller_briefly_then_check(cluster, 0.3)


# -- 3: a broker that shut down must leave the ISR -----------------------------------------------------------------

async def test_a_broker_readmitted_to_the_isr_after_its_controlled_shutdown_leaves_it_when_it_stops(
        autojump_clock) -> None:
    """After the shutdown election the stopping broker follows the new leader, which lets it back into the ISR;
    the controller hears of that only with the next ISR change notification. When the broker then stops, the
    controller must take it out of the ISR as stored, not as cached, or every acks=all write waits for it."""
    async with Cluster(brokers=4, config=CONFIG, seed=3) as cluster:
        await cluster.create_topic("t", partitions=4, replication_factor=3, config={"min.insync.replicas": 2})
        for p in range(4):
            await cluster.produce("t", p, values(3))
        stopping = next(b for b in cluster.broker_ids if b != cluster.controller_id)
        led = [p for p in range(4) if cluster.partition_state("t", p).leader == stopping]
        assert led
        node = cluster._node(stopping)
        assert await node.broker.controlled_shutdown()
        await cluster.wait_until(lambda: all(stopping in cluster.partition_state("t", p).isr for p in led))
        assert any(stopping not in cluster.controller().context.partition_leadership_info[
            TopicPartition("t", p)].leader_and_isr.isr for p in led)  # the controller's cache lags behind
        node.controller.shutdown()  # the rest of Cluster.shutdown_broker: the broker deregisters and stops
        node.zk.close()
        await cluster.kill_broker(stopping)
        await cluster.wait_until(lambda: all(stopping not in cluster.partition_state("t", p).isr for p in range(4)),
                                 timeout=5, what="the stopped broker out of every ISR")
        assert_isr_live_and_assigned(cluster, "t", 4)
        for p in range(4):
            await cluster.wait_for_leader("t", p)
            assert await produce_promptly(cluster, "t", p, values(1, "after")) == 3


@pytest.mark.parametrize("seed", range(20))
async def test_controlled_shutdown_leaves_no_stopped_broker_in_any_isr(autojump_clock, seed: int) -> None:
    async with Cluster(brokers=4, config=CONFIG, seed=seed) as cluster:
        await cluster.create_topic("t", partitions=4, replication_factor=3, config={"min.insync.replicas": 2})
        for p in range(4):
            await cluster.produce("t", p, values(3))
        stopping = cluster.random.choice(cluster.broker_ids)
        assert await cluster.shutdown_broker(stopping)
        await wait_settled(cluster, "t", 4)
        assert_isr_live_and_assigned(cluster, "t", 4)
        for p in range(4):
            assert await produce_promptly(cluster, "t", p, values(1, "after")) == 3


# -- 4, 5: reassignments back and forth, and one resumed by a new controller -------------------------------------

@pytest.mark.parametrize("seed", range(12))
async def test_a_completed_reassignment_leaves_no_moved_away_replica_in_the_isr(autojump_clock, seed: int) -> None:
    async with Cluster(brokers=4, config=CONFIG, seed=seed) as cluster:
        await cluster.create_topic("t", partitions=2, replication_factor=3, config={"min.insync.replicas": 2})
        acked: dict[int, list[bytes]] = {0: [], 1: []}
        for round_ in range(3):
            for p in range(2):
                await produce_promptly(cluster, "t", p, values(2, f"r{round_}-"))
                acked[p] += [f"r{round_}-{i}".encode() for i in range(2)]
            targets = {}
            for p in range(2):
                current = cluster.controller().context.partition_replica_assignment(TopicPartition("t", p))
                away = cluster.random.choice(current)
                spare = next(b for b in cluster.broker_ids if b not in current)
                targets[TopicPartition("t", p)] = [spare if r == away else r for r in current]
            await cluster.reassign_partitions(targets)
            for tp, target in targets.items():
                assert set(cluster.partition_state(tp.topic, tp.partition).isr) <= set(target)
            assert_isr_live_and_assigned(cluster, "t", 2)
        for p in range(2):
            await cluster.wait_for_leader("t", p)
            await produce_promptly(cluster, "t", p, values(1, "last-"))
            acked[p].append(b"last-0")
            assert [r.value for _, r in await cluster.fetch_all("t", p)] == acked[p]
            await assert_replicas_agree(cluster, "t", p)


@pytest.mark.parametrize("seed", range(6))
async def test_moving_two_replicas_away_at_once_leaves_neither_in_the_isr(autojump_clock, seed: int) -> None:
    """With the old plus new replicas put back before the removed ones went offline, taking the second removed
    replica offline told the first one (still "assigned") the new leader epoch: it followed, fetched, and the
    leader let it back into the ISR just before it was stopped for good."""
    async with Cluster(brokers=5, config=CONFIG, seed=seed) as cluster:
        await cluster.create_topic("t", partitions=1, replication_factor=3, config={"min.insync.replicas": 2})
        await produce_promptly(cluster, "t", 0, values(5))
        current = cluster.controller().context.partition_replica_assignment(TopicPartition("t", 0))
        spares = [b for b in cluster.broker_ids if b not in current]
        target = [current[0], *spares]
        await cluster.reassign_partitions({TopicPartition("t", 0): target})
        await cluster.wait_until(lambda: set(cluster.partition_state("t", 0).isr) <= set(target), timeout=1,
                                 what="the moved-away replicas out of the ISR")
        assert_isr_live_and_assigned(cluster, "t", 1)
        await cluster.wait_for_leader("t", 0)
        assert await produce_promptly(cluster, "t", 0, values(1, "after")) == 5
        assert [r.value for _, r in await cluster.fetch_all("t", 0)] == [*(f"v{i}".encode() for i in range(5)),
                                                                          b"after0"]


async def test_a_new_controller_resumes_a_reassignment_and_lists_what_it_adds_and_removes(autojump_clock) -> None:
    async with Cluster(brokers=4, config=CONFIG, seed=7) as cluster:
        await cluster.create_topic("t", partitions=1, replication_factor=2)
        await cluster.produce("t", 0, values(4))
        original = list(cluster.controller().context.partition_replica_assignment(TopicPartition("t", 0)))
        controller_id = cluster.controller_id
        newcomer = next(b for b in cluster.broker_ids if b not in original and b != controller_id)
        target = [original[0], newcomer]
        cluster.pause_broker(newcomer)  # the move stays in its first phase: the new replica cannot catch up
        response = await cluster.transport.send("client", controller_id, AlterPartitionReassignmentsRequest(
            [ReassignablePartition("t", 0, target)]))
        assert response.responses[0].error_code == errors.NONE.code
        await cluster.wait_until(lambda: newcomer in cluster.controller().context.partition_replica_assignment(
            TopicPartition("t", 0)))
        epoch = cluster.controller().epoch
        await cluster.expire_session(controller_id)
        await cluster.wait_until(lambda: cluster.controller_id is not None and cluster.controller().epoch > epoch,
                                 timeout=30)
        listed = await cluster.list_partition_reassignments()
        assert [(o.adding_replicas, o.removing_replicas) for o in listed] == [([newcomer], [original[1]])]
        assert set(listed[0].replicas) == set(original) | {newcomer}
        cluster.resume_broker(newcomer)
        await cluster.wait_until(lambda: not cluster.controller().context.partitions_being_reassigned, timeout=60)
        assert cluster.controller().context.partition_replica_assignment(TopicPartition("t", 0)) == target
        assert await cluster.list_partition_reassignments() == []
        await cluster.wait_for_leader("t", 0)
        assert [r.value for _, r in await cluster.fetch_all("t", 0)] == [f"v{i}".encode() for i in range(4)]


# -- 9: a restarting broker answers only with the cluster's current state -----------------------------------------

async def test_a_restarted_broker_refuses_its_previous_incarnations_requests_and_serves_current_metadata(
        autojump_clock, caplog: pytest.LogCaptureFixture) -> None:
    """The refusals are logged at INFO, as Kafka logs them: they are what a quick restart brings, not a fault, and
    at WARNING Python printed each one on the stderr of tests that configure no logging."""
    caplog.set_level(logging.INFO, logger="kafkalite.server.kafka_apis")
    async with Cluster(brokers=3, config=CONFIG, seed=9) as cluster:
        await cluster.create_topic("t", partitions=2, replication_factor=2)
        victim = next(b for b in cluster.broker_ids if b != cluster.controller_id)
        old_epoch = cluster.broker(victim).broker_epoch
        await cluster.kill_broker(victim)
        await cluster.create_partitions("t", 4)  # the controller still thinks the victim is up: its queue grows
        await cluster.restart_broker(victim)
        response = await cluster.transport.send("client", victim, UpdateMetadataRequest(
            cluster.controller_id, cluster.controller().epoch, old_epoch, [], []))
        assert response.error_code == errors.STALE_BROKER_EPOCH.code
        refusals = [r for r in caplog.records if r.name == "kafkalite.server.kafka_apis" and "refused" in r.message]
        assert refusals and {r.levelno for r in refusals} == {logging.INFO}
        assert f"the request is for broker epoch {old_epoch}" in refusals[-1].message
        metadata = await cluster.metadata(victim, ["t"])
        assert cluster.broker(victim).broker_epoch > old_epoch
        assert sorted(p.partition for p in metadata.topics[0].partitions) == [0, 1, 2, 3]
        assert all(p.leader in cluster.live_broker_ids for p in metadata.topics[0].partitions)


async def test_a_controller_request_without_this_brokers_epoch_is_refused_and_changes_nothing(
        autojump_clock) -> None:
    """Broker epoch -1 used to skip the check: an UpdateMetadata with no brokers then emptied the cache."""
    async with Cluster(brokers=1, config=CONFIG, seed=10) as cluster:
        apis: KafkaApis = cluster.broker(1).apis
        request = UpdateMetadataRequest(1, cluster.controller().epoch, -1, [], [])
        response = await apis.handle(request, RequestContext(source="client"))
        assert response.error_code == errors.STALE_BROKER_EPOCH.code
        assert cluster.broker(1).metadata_cache.get_alive_broker_ids() == [1]
        assert [b.node_id for b in (await apis.handle(MetadataRequest(None), RequestContext(source="c"))).brokers] \
            == [1]


# -- 11-14: found by a hunt comparing the controller's flows under faults with Kafka's -------------------------------

@pytest.mark.parametrize("fault", ["cut", "pause"])
async def test_a_topic_config_change_missed_during_a_lost_session_is_applied_and_the_cluster_lives(
        autojump_clock, fault: str) -> None:
    """The broker's config-change task read the service with nothing to catch a lost link or session: the error
    escaped into the cluster's nursery and took every broker down with it."""
    async with Cluster(brokers=3, config=CONFIG, seed=11) as cluster:
        await cluster.create_topic("t", partitions=1, replication_factor=3)
        victim = next(b for b in cluster.broker_ids if b != cluster.controller_id)
        if fault == "cut":
            cluster.partition_network({victim}, {COORDINATION})
        else:
            cluster.pause_broker(victim)
        async with Admin(cluster) as admin:
            await admin.alter_topic_configs({"t": {"retention.ms": 60000}}, incremental=True)
        await trio.sleep(3 * SESSION_MS / 1000)  # the victim's session expires meanwhile
        if fault == "cut":
            cluster.heal()
        else:
            cluster.resume_broker(victim)
        partition = cluster.broker(victim).replica_manager.get_partition(TopicPartition("t", 0))
        await cluster.wait_until(lambda: partition.topic_config["retention.ms"] == 60000, timeout=30,
                                 what="the new retention.ms on the victim")
        await wait_settled(cluster, "t", 1)
        assert sorted(cluster.live_broker_ids) == [1, 2, 3]
        await produce_promptly(cluster, "t", 0, values(2))


async def test_a_leader_and_isr_reaching_a_broker_cut_off_from_the_service_waits_for_the_link(autojump_clock) -> None:
    """Reading the new topic's config failed at once, the LeaderAndIsr was answered with an error that nothing
    resends, and the partition's elected leader never hosted it: produce failed for good after the cut healed."""
    async with Cluster(brokers=3, config=CONFIG, seed=12) as cluster:
        leader, follower = [b for b in cluster.broker_ids if b != cluster.controller_id]
        cluster.partition_network({leader}, {COORDINATION})  # its links to the other brokers stay up
        response = await cluster.transport.send("client", cluster.controller_id, CreateTopicsRequest(
            [CreatableTopic("t", -1, -1, {0: [leader, follower]}, {})], 1000))
        assert response.topics[0].error_code == errors.NONE.code
        await trio.sleep(SESSION_MS / 3000)  # shorter than the session
        assert cluster.broker(leader).replica_manager.get_partition(TopicPartition("t", 0)) is None
        cluster.heal()
        await cluster.wait_until(
            lambda: cluster.broker(leader).replica_manager.get_partition(TopicPartition("t", 0)) is not None,
            timeout=5, what="the leader hosting t-0")
        assert cluster.leader_for("t", 0) == leader
        assert await produce_promptly(cluster, "t", 0, values(3)) == 0
        assert [r.value for _, r in await cluster.fetch_all("t", 0)] == [b"v0", b"v1", b"v2"]


async def test_a_topic_deleted_during_its_move_is_deleted_once_the_adding_broker_restarts(autojump_clock) -> None:
    """As Kafka's onBrokerStartup, a restarted broker's replicas of a topic queued for deletion come online too:
    the move reaches its new replica and completes, then the deletion. They were left out, and both waited for
    ever."""
    async with Cluster(brokers=4, config=CONFIG, seed=13) as cluster:
        a, b, c = [x for x in cluster.broker_ids if x != cluster.controller_id]
        await create_assigned(cluster, "t", [a, b])
        await cluster.produce("t", 0, values(3), acks=-1)
        cluster.pause_broker(c)  # the adding replica cannot catch up
        async with Admin(cluster) as admin:
            await admin.alter_partition_reassignments({TopicPartition("t", 0): [a, c]})
        with pytest.raises(errors.RequestTimedOutError):
            await cluster.delete_topic("t", timeout=5)  # waits for the move, as in Kafka
        await cluster.kill_broker(c)
        await cluster.restart_broker(c)
        await cluster.wait_until(lambda: "t" not in cluster.topics(), timeout=60, what="t deleted")
        assert await cluster.list_partition_reassignments() == []
        assert all(cluster.log_manager(x).get_log(TopicPartition("t", 0)) is None for x in (a, b, c))


async def test_turning_unclean_election_on_for_a_topic_elects_its_offline_partitions_at_once(autojump_clock) -> None:
    """Kafka's TopicUncleanLeaderElectionEnable (KAFKA-6835): the partition stayed offline until some broker
    came or went."""
    async with Cluster(brokers=3, config=CONFIG, seed=14) as cluster:
        isr_member, lagging = [b for b in cluster.broker_ids if b != cluster.controller_id]
        await create_assigned(cluster, "t", [isr_member, lagging])
        await cluster.produce("t", 0, values(3), acks=-1)
        cluster.pause_broker(lagging)
        await cluster.wait_until(lambda: cluster.partition_state("t", 0).isr == (isr_member,), timeout=120)
        await cluster.kill_broker(lagging)
        await cluster.kill_broker(isr_member)  # the only ISR member: the partition goes offline
        await cluster.restart_broker(lagging)  # back, out of the ISR, with no leader to catch up from
        await trio.sleep(10)
        assert cluster.leader_for("t", 0) == -1  # unclean election is off for the topic
        async with Admin(cluster) as admin:
            await admin.alter_topic_configs({"t": {"unclean.leader.election.enable": "true"}}, incremental=True)
        await cluster.wait_until(lambda: cluster.leader_for("t", 0) == lagging, timeout=2,
                                 what="an unclean election of the live replica")
        assert cluster.partition_state("t", 0).isr == (lagging,)
        assert await produce_promptly(cluster, "t", 0, values(1, "after")) == 3


async def create_assigned(cluster: Cluster, topic: str, replicas: list[int]) -> None:
    """A one-partition topic on `replicas`, first the preferred leader, online."""
    response = await cluster.transport.send("client", cluster.controller_id, CreateTopicsRequest(
        [CreatableTopic(topic, -1, -1, {0: replicas}, {})], 30000))
    assert response.topics[0].error_code == errors.NONE.code
    await cluster.wait_for_leader(topic, 0)


# -- 10 and the shape: one route per event and request ------------------------------------------------------------

def test_every_controller_event_and_request_has_a_route() -> None:
    events = {cls for cls in _subclasses(ControllerEvent) if cls is not ControllerRequest}
    assert events <= set(ROUTES), f"events without a route: {events - set(ROUTES)}"
    forwarded = {CreateTopicsRequest, CreatePartitionsRequest, AlterPartitionReassignmentsRequest,
                 ListPartitionReassignmentsRequest}
    assert forwarded <= set(ROUTES)
    assert route_for(ControllerRequest(CreatePartitionsRequest([CreatePartitionsTopic("t", 2)]))).wait is not None
    with pytest.raises(LookupError, match="no route"):
        route_for(ControllerRequest(MetadataRequest(None)))


def _subclasses(cls: type) -> set[type]:
    found = set()
    for sub in cls.__subclasses__():
        found |= {sub} | _subclasses(sub)
    return found


def test_the_seed_flows_are_findable_by_their_names() -> None:
    from kafkalite.controller.controller import KafkaController
    from kafkalite.network.requests import ControlledShutdownRequest
    assert ROUTES[ControlledShutdownRequest].handler is KafkaController.shutdown_broker
    for name in ("elect", "on_controller_failover", "on_controller_resignation", "maybe_resign",
                 "on_broker_startup", "on_broker_failure"):
        assert callable(getattr(KafkaController, name))



async def test_a_request_forwarded_to_a_silent_controller_is_answered_when_its_timeout_runs_out(autojump_clock) -> None:
    """A CreateTopics sent to a broker that is not the controller is forwarded. With the controller paused, it
    used to wait at its door until it resumed, past the request's timeout and past the failover. Now it is
    answered REQUEST_TIMED_OUT when its timeout runs out, as a Kafka broker's delayed operation answers, and is not
    sent again to the next controller (the silent one may have acted on it); the next request goes there."""
    async with Cluster(brokers=3, config=CONFIG, seed=1) as cluster:
        controller = cluster.controller_id
        assert controller is not None
        others = [b for b in cluster.broker_ids if b != controller]
        context = RequestContext(source="admin", client_id="admin")
        cluster.pause_broker(controller)
        started = trio.current_time()
        for broker_id, timeout_ms in zip(others, (2000, 10000)):  # within the session, and past the failover
            request = CreateTopicsRequest([CreatableTopic(f"timed-out-{broker_id}", 1, 3)], timeout_ms=timeout_ms)
            response = await cluster.transport.send("admin", broker_id, request, context)
            assert response.topics[0].error_code == errors.REQUEST_TIMED_OUT.code
            assert response.topics[0].error_message == (
                f"the controller (broker {controller}) did not answer within {timeout_ms} ms; what was asked may "
                "still be done")
            assert trio.current_time() - started == pytest.approx(timeout_ms / 1000, abs=0.1)
            started = trio.current_time()
        assert cluster.controller_id in others
        cluster.resume_broker(controller)
        resumed = cluster.broker(controller).metadata_cache
        await cluster.wait_until(lambda: resumed.controller_id == cluster.controller_id,
                                 timeout=30)  # the resumed one has learnt it is no longer controller
        for broker_id in cluster.broker_ids:
            request = CreateTopicsRequest([CreatableTopic(f"via-{broker_id}", 2, 2)], timeout_ms=30000)
            assert (await cluster.transport.send("admin", broker_id, request, context)).topics[0].error_code == 0
        assert not {f"timed-out-{b}" for b in others} & set(cluster.topics())
