"""KafkaZkClient's batched partition state writes: one transaction for a batch, and a conflict costs its own
partition only."""

from __future__ import annotations

import pytest
import trio

from kafkalite.common.types import TopicPartition
from kafkalite.coordination import CoordinationService, NodeExistsError
from kafkalite.coordination.errors import BadVersionError, SessionExpiredError
from kafkalite.coordination.kafka_zk import (
    KafkaZkClient,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    partition_state_path,
)


@pytest.fixture
async def zk():
    service = CoordinationService()
    async with trio.open_nursery() as nursery:
        await nursery.start(service.run)
        client = KafkaZkClient(service, "controller", 60_000)
        client.ensure_persistent_paths()
        epoch, version = client.register_controller_and_increment_epoch(1, 0)
        client.session.multi(client.create_topic_ops("t", {p: [1, 2] for p in range(3)}, {}))
        yield client, epoch, version
        nursery.cancel_scope.cancel()


def state(leader: int, leader_epoch: int, version: int, controller_epoch: int = 1) -> LeaderIsrAndControllerEpoch:
    return LeaderIsrAndControllerEpoch(LeaderAndIsr(leader, leader_epoch, (1, 2), version), controller_epoch)


async def test_creating_states_where_one_exists_creates_the_others_and_their_parents(zk, autojump_clock) -> None:
    client, epoch, version = zk
    tps = [TopicPartition("t", p) for p in range(3)]
    client.session.create(partition_state_path(tps[1]), b"taken", make_parents=True)
    created, failed = client.create_partition_states(version, {tp: state(1, 0, 0, epoch) for tp in tps})
    assert created == [tps[0], tps[2]] and list(failed) == [tps[1]] and isinstance(failed[tps[1]], NodeExistsError)
    stored = client.get_partition_states([tps[0], tps[2]])
    assert stored == {tps[0]: state(1, 0, 0, epoch), tps[2]: state(1, 0, 0, epoch)}
    assert client.session.get(partition_state_path(tps[1]))[0] == b"taken"


async def test_a_stale_state_fails_alone_and_the_cache_is_only_kept_at_its_own_version(zk, autojump_clock) -> None:
    client, epoch, version = zk
    tps = [TopicPartition("t", p) for p in range(3)]
    created, _ = client.create_partition_states(version, {tp: state(1, 0, 0, epoch) for tp in tps})
    cached = client.get_partition_states(tps)
    client.session.set(partition_state_path(tps[2]), client.session.get(partition_state_path(tps[2]))[0])
    written, failed = client.update_leader_and_isr(version, {
        tp: LeaderIsrAndControllerEpoch(cached[tp].leader_and_isr.new_leader_and_isr(2, (2,)), epoch) for tp in tps})
    assert list(failed) == [tps[2]] and isinstance(failed[tps[2]], BadVersionError)
    assert written == {tp: LeaderIsrAndControllerEpoch(LeaderAndIsr(2, 1, (2,), 1), epoch) for tp in tps[:2]}
    again = client.get_partition_states(tps, cached={**cached, **written})
    assert again[tps[0]] is written[tps[0]] and again[tps[1]] is written[tps[1]]  # same version: the cached one
    assert again[tps[2]] == LeaderIsrAndControllerEpoch(LeaderAndIsr(1, 0, (1, 2), 1), epoch)  # moved on: read


async def test_a_call_cut_off_from_the_service_waits_for_the_link_and_fails_if_the_session_ended(
        autojump_clock) -> None:
    """As Kafka's ZooKeeperClient holds a request while disconnected: done once the link heals within the session;
    SessionExpiredError when the session ended meanwhile, even once a new one has replaced it."""
    service = CoordinationService()
    async with trio.open_nursery() as nursery:
        await nursery.start(service.run)
        client = KafkaZkClient(service, "broker-1", 6_000)
        nursery.start_soon(client.run)
        client.ensure_persistent_paths()
        for cut_s, ended in ((1, False), (20, True)):
            service.set_reachable("broker-1", False)
            outcome: list[object] = []

            async def call() -> None:
                try:
                    outcome.append(await client.when_reachable(lambda: client.get_children("/brokers")))
                except SessionExpiredError as exc:
                    outcome.append(exc)

            nursery.start_soon(call)
            await trio.sleep(cut_s)
            assert outcome == []
            first = client.session
            service.set_reachable("broker-1", True)
            await trio.sleep(3)  # past a heartbeat interval, which brings the new session
            assert (client.session is not first) == ended
            assert isinstance(outcome[0], SessionExpiredError if ended else list), outcome
        nursery.cancel_scope.cancel()
