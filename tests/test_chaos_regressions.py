"""Defects the chaos harness found, each replayed on its own: the fault, then what a user relies on."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from kafkalite.client import Producer
from kafkalite.cluster import COORDINATION, Cluster, CoordinationTimeoutError
from kafkalite.common import errors
from kafkalite.common.records import Record, RecordBatch
from kafkalite.network.requests import InitProducerIdRequest, RequestContext

CONFIG = {"zookeeper.session.timeout.ms": 6000, "replica.lag.time.max.ms": 10000,
          "auto.leader.rebalance.enable": False}


async def test_a_session_that_expires_just_before_its_broker_is_cut_off_does_not_spin(autojump_clock: Any) -> None:
    """Its client heard the expiry, was cut off before reconnecting, and retried its heartbeat without waiting:
    virtual time froze (the suite's watchdog turns that into a failure)."""
    async with Cluster(brokers=3, config=CONFIG, seed=2) as cluster:
        victim = next(b for b in cluster.broker_ids if b != cluster.controller_id)
        cluster.service.expire(cluster._node(victim).zk.session.session_id)  # heard at once...
        cluster.partition_network({victim}, {COORDINATION})  # ...and cut off before its client could reconnect
        before = trio.current_time()
        await trio.sleep(10)
        assert trio.current_time() - before >= 10
        cluster.heal()
        def registered_anew() -> bool:
            info = cluster._zk().get_broker(victim)
            return info is not None and info.epoch == cluster.broker(victim).broker_epoch

        await cluster.wait_until(registered_anew, timeout=30)


async def test_a_broker_restarted_while_cut_off_from_the_coordination_service_starts_once_it_heals(
        autojump_clock: Any) -> None:
    """A restart waits for the coordination service, within zookeeper.connection.timeout.ms (the session timeout),
    and the broker registers and rejoins its ISRs once the cut heals; past that it gives up, stays stopped and
    unregistered, as Kafka's broker fails its startup, and a restart after healing brings it back."""
    async with Cluster(brokers=3, config=CONFIG, seed=3) as cluster:
        await cluster.create_topic("t", partitions=1, replication_factor=3)
        victim = next(b for b in cluster.broker_ids if b != cluster.controller_id)
        await cluster.kill_broker(victim)
        cluster.partition_network({victim}, {COORDINATION})
        async with trio.open_nursery() as nursery:
            nursery.start_soon(cluster.restart_broker, victim)
            await trio.sleep(3)  # within the timeout
            assert victim not in cluster.live_broker_ids  # waiting for the service, as Kafka's broker does
            cluster.heal()
        await cluster.wait_until(lambda: victim in cluster.partition_state("t", 0).isr, timeout=60)

        await cluster.kill_broker(victim)
        cluster.partition_network({victim}, {COORDINATION})
        with pytest.raises(CoordinationTimeoutError, match="heal"):
            await cluster.restart_broker(victim)
        assert victim not in cluster.live_broker_ids
        await cluster.wait_until(lambda: cluster._zk().get_broker(victim) is None, timeout=10)  # the old session's
        cluster.heal()
        await cluster.restart_broker(victim)
        await cluster.wait_until(lambda: victim in cluster.partition_state("t", 0).isr, timeout=60)


async def test_a_controlled_shutdown_cancelled_midway_still_stops_the_broker(autojump_clock: Any) -> None:
    """Left half shut down, the broker stayed up while the controller kept its replicas offline for good."""
    async with Cluster(brokers=3, config={**CONFIG, "controlled.shutdown.retry.backoff.ms": 5000}, seed=4) as cluster:
        await cluster.create_topic("t", partitions=1, replication_factor=2)
        victim = cluster.leader_for("t", 0)
        other = next(b for b in cluster.partition_state("t", 0).isr if b != victim)
        await cluster.kill_broker(other)  # the victim's leadership cannot move: its shutdown retries
        await cluster.wait_until(lambda: cluster.partition_state("t", 0).isr == (victim,), timeout=30)
        with trio.move_on_after(1):
            await cluster.shutdown_broker(victim)  # cancelled during its first backoff
        assert victim not in cluster.live_broker_ids
        await cluster.restart_broker(victim)
        await cluster.wait_for_leader("t", 0)
        assert await cluster.produce("t", 0, [Record(None, b"back")], acks=1) == 0


async def test_init_producer_id_on_a_broker_cut_off_from_the_service_is_retriable(autojump_clock: Any) -> None:
    """It was UNKNOWN_SERVER_ERROR, after which the producer gave up idempotence for good and later wrote
    retried batches twice."""
    async with Cluster(brokers=1, config=CONFIG, seed=5) as cluster:
        cluster.partition_network({1}, {COORDINATION})
        response = await cluster.transport.send("client", 1, InitProducerIdRequest(), RequestContext(source="c"))
        assert response.error_code == errors.COORDINATOR_NOT_AVAILABLE.code
        assert "coordination service" in response.error_message
        async with Producer(cluster, {"acks": "all"}) as producer:
            await trio.sleep(2)  # the producer asks for its id meanwhile, and is told to retry
            cluster.heal()
            await cluster.create_topic("pid", partitions=1, replication_factor=1)
            metadata = await (await producer.send("pid", b"v", partition=0))
            assert metadata.offset == 0 and producer.idempotent and producer.producer_id >= 0


def idempotent_batch(sequence: int, *values: bytes, producer_id: int = 1000) -> RecordBatch:
    return RecordBatch.from_records([Record(None, v) for v in values], producer_id=producer_id, producer_epoch=0,
                                    base_sequence=sequence)


async def test_a_retry_from_behind_the_last_five_batches_gets_its_original_offset(autojump_clock: Any) -> None:
    """Its answer was lost, and five more batches were appended before the retry: it was refused as out of
    order, the producer took that for "not appended" and renumbered later batches onto sequences the log held,
    which were then acknowledged with the earlier batches' offsets (seeds 2850, 4109 and 6518 of 10,000)."""
    async with Cluster(brokers=3, config=CONFIG, seed=6) as cluster:
        await cluster.create_topic("t", partitions=1, replication_factor=3)
        await cluster.wait_for_leader("t", 0)
        first = idempotent_batch(0, b"a", b"b")
        assert await cluster.produce("t", 0, first) == 0
        for sequence in range(2, 14, 2):
            await cluster.produce("t", 0, idempotent_batch(sequence, b"x", b"y"))
        assert await cluster.produce("t", 0, first) == 0
        assert cluster.high_watermark("t", 0) == 14
        assert [r.value for _, r in await cluster.fetch("t", 0, 0)][:3] == [b"a", b"b", b"x"]


async def test_a_leader_that_took_a_producer_for_new_does_not_claim_the_batches_before_it(
        autojump_clock: Any) -> None:
    """A new leader without a producer's earlier batch accepts its next batch at any sequence; a retry of the
    earlier one is behind the last sequence, yet was never appended there, so it is out of order, not a
    duplicate: answered as written, it would be acknowledged and lost."""
    async with Cluster(brokers=3, config=CONFIG, seed=7) as cluster:
        await cluster.create_topic("t", partitions=1, replication_factor=3)
        old = await cluster.wait_for_leader("t", 0)
        followers = [b for b in cluster.broker_ids if b != old]
        cluster.partition_network({old}, followers)
        assert await cluster.produce("t", 0, idempotent_batch(0, b"lost"), acks=1) == 0  # on the old leader only
        await cluster.kill_broker(old)
        cluster.heal()
        new = await cluster.wait_for_leader("t", 0, not_on=[old])
        assert new in followers
        assert await cluster.produce("t", 0, idempotent_batch(1, b"later")) == 0
        with pytest.raises(errors.OutOfOrderSequenceNumberError, match="got 0, expected 2"):
            await cluster.produce("t", 0, idempotent_batch(0, b"lost"))
        assert [r.value for _, r in await cluster.fetch("t", 0, 0)] == [b"later"]
