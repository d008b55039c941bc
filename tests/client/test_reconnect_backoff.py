"""reconnect.backoff.ms: a broker that could not be reached is not tried again at once.

Without it a client retrying with retry.backoff.ms=0 spun on a dead broker: on the autojump clock virtual time
then never advanced, so the session expiry that moves the dead broker's partitions elsewhere never came, and the
test hung (the watchdog failed it).
"""

from __future__ import annotations

import socket
from typing import Any

import pytest
import trio

from kafkalite.client import Admin, ClientTransport, Consumer, InProcessTransport, Producer, TcpTransport
from kafkalite.cluster import Cluster
from kafkalite.common.errors import (
    InvalidConfigError, NetworkExceptionError, NotEnoughReplicasError, RequestTimedOutError,
)
from kafkalite.common.records import Record, RecordBatch
from kafkalite.common.types import TopicPartition
from kafkalite.network.connection import Connection
from kafkalite.network.requests import (
    CONSUMER_REPLICA_ID, FetchPartition, FetchRequest, MetadataRequest, ProducePartitionData, ProduceRequest,
)

pytestmark = pytest.mark.usefixtures("autojump_clock")

TP = TopicPartition("t", 0)


async def test_a_producer_without_retry_backoff_delivers_after_its_leader_dies(autojump_clock: Any, cluster: Cluster,
                                                                              bootstrap: Any) -> None:
    await cluster.create_topic("t", partitions=1, replication_factor=3, config={"min.insync.replicas": 2})
    leader = cluster.leader_for("t", 0)
    async with Producer(bootstrap, retry_backoff_ms=0, linger_ms=0) as producer:
        assert (await (await producer.send("t", b"a"))).offset == 0
        await cluster.kill_broker(leader)
        assert (await (await producer.send("t", b"b"))).offset == 1
    assert cluster.leader_for("t", 0) not in (leader, -1)


async def test_an_admin_without_retry_backoff_answers_after_a_leader_dies(autojump_clock: Any, cluster: Cluster,
                                                                         bootstrap: Any) -> None:
    await cluster.create_topic("t", partitions=1, replication_factor=3)
    async with Producer(bootstrap) as producer:
        await (await producer.send("t", b"a"))
    async with Admin(bootstrap, {"retry.backoff.ms": 0}) as admin:
        await cluster.kill_broker(cluster.leader_for("t", 0))
        assert (await admin.list_offsets({TP: "latest"}))[TP].offset == 1


async def test_a_consumer_without_retry_backoff_reads_on_after_its_leader_dies(autojump_clock: Any, cluster: Cluster,
                                                                              bootstrap: Any) -> None:
    await cluster.create_topic("t", partitions=1, replication_factor=3, config={"min.insync.replicas": 2})
    async with Producer(bootstrap) as producer:
        await (await producer.send("t", b"a"))
        async with Consumer(bootstrap, {"retry.backoff.ms": 0, "auto.offset.reset": "earliest"}) as consumer:
            consumer.assign([TP])
            assert [r.value for r in await consumer.poll(5)] == [b"a"]
            await cluster.kill_broker(cluster.leader_for("t", 0))
            await (await producer.send("t", b"b"))
            with trio.fail_after(60):
                records = []
                while not records:
                    records = await consumer.poll(1)
    assert [(r.offset, r.value) for r in records] == [(1, b"b")]


async def test_a_producer_without_retry_backoff_follows_a_leader_moved_by_an_election(
        autojump_clock: Any, cluster: Cluster, bootstrap: Any) -> None:
    """No broker is down: the old leader answers NOT_LEADER_OR_FOLLOWER until the producer's metadata catches up.
    In-process those answers cost no time, and the producer retried them in a loop that never yielded."""
    await cluster.create_topic("t", partitions=1, replication_factor=3)
    preferred = cluster.leader_for("t", 0)
    await cluster.kill_broker(preferred)
    await cluster.wait_until(lambda: cluster.leader_for("t", 0) not in (preferred, -1), what="a new leader")
    await cluster.restart_broker(preferred)
    await cluster.wait_until(lambda: preferred in cluster.partition_state("t", 0).isr, what="the broker back in")
    async with Producer(bootstrap, linger_ms=0, retry_backoff_ms=0) as producer:
        assert (await (await producer.send("t", b"a"))).offset == 0
        await cluster.elect_preferred_leaders()
        await cluster.wait_for_leader("t", 0)
        assert cluster.leader_for("t", 0) == preferred
        assert (await (await producer.send("t", b"b"))).offset == 1


async def test_a_producer_without_retry_backoff_gives_up_on_too_few_replicas_in_time(
        autojump_clock: Any, cluster: Cluster, bootstrap: Any) -> None:
    """NOT_ENOUGH_REPLICAS is retried until delivery.timeout.ms; retried at no cost, virtual time never got there."""
    await cluster.create_topic("t", partitions=1, replication_factor=2, config={"min.insync.replicas": 2})
    leader = cluster.leader_for("t", 0)
    follower = next(b for b in cluster.partition_state("t", 0).isr if b != leader)
    async with Producer(bootstrap, retry_backoff_ms=0, linger_ms=0, delivery_timeout_ms=5000,
                        request_timeout_ms=5000) as producer:
        await (await producer.send("t", b"a"))
        await cluster.kill_broker(follower)
        await cluster.wait_until(lambda: cluster.partition_state("t", 0).isr == (leader,), what="the ISR shrunk")
        started = trio.current_time()
        with pytest.raises(NotEnoughReplicasError):
            await (await producer.send("t", b"b"))
        assert trio.current_time() - started == pytest.approx(5.0, abs=0.01)


async def _transport(cluster: Cluster, bootstrap: Any, backoff_ms: int = 50) -> ClientTransport:
    """A client transport of the kind `bootstrap` names, knowing every broker, backing off `backoff_ms` to 1 s."""
    if isinstance(bootstrap, Cluster):
        return InProcessTransport(cluster.transport, cluster.broker_ids, "probe", 30000, backoff_ms, 1000)
    transport = TcpTransport(bootstrap, "probe", 30000, backoff_ms, 1000)
    transport.update_brokers((await cluster.metadata(cluster.live_broker_ids[0])).brokers)
    return transport


async def test_a_request_is_sent_once_it_leaves_not_once_it_is_answered(autojump_clock: Any, cluster: Cluster,
                                                                       bootstrap: Any) -> None:
    """`send(sent=...)` is what lets the consumer's poll return with its prefetches on their way: the event is set
    as the request leaves, here a fetch that the leader parks for its fetch.max.wait.ms of 500 ms, and at once when
    the request must first wait out a backoff (after a failure), which is not the caller's to wait for."""
    await cluster.create_topic("t", partitions=1, replication_factor=3)
    leader = cluster.leader_for("t", 0)
    transport = await _transport(cluster, bootstrap)
    await transport.send(leader, MetadataRequest([]))  # connected: no connection to open first
    request = FetchRequest(CONSUMER_REPLICA_ID, 500, 1, [FetchPartition("t", 0, 0, 1 << 20, -1)])

    async def parked_fetch(backoff_s: float) -> None:
        sent, answered = trio.Event(), trio.Event()

        async def fetch() -> None:
            response = await transport.send(leader, request, sent=sent)
            assert response.partitions[0].error_code == 0 and response.partitions[0].batches == []
            answered.set()

        started = trio.current_time()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(fetch)
            await sent.wait()
            assert trio.current_time() - started < 0.001 and not answered.is_set()
        assert trio.current_time() - started == pytest.approx(backoff_s + 0.5, abs=0.01)

    await parked_fetch(0)
    transport.unreachable(leader)  # as after a failed request: the next waits reconnect.backoff.ms first
    await parked_fetch(0.05)
    await transport.aclose()


async def test_requests_failing_together_count_as_one_failure(autojump_clock: Any, cluster: Cluster,
                                                               bootstrap: Any) -> None:
    """Five requests waiting at a broker that dies fail together: one failed connection to Kafka, so the next
    attempt waits 50 ms, not 800 ms as after five failures in a row."""
    transport = await _transport(cluster, bootstrap)
    await transport.send(1, MetadataRequest([]))
    cluster.pause_broker(1)
    failures = []

    async def send() -> None:
        with pytest.raises(NetworkExceptionError):
            await transport.send(1, MetadataRequest([]))
        failures.append(trio.current_time())

    async with trio.open_nursery() as nursery:
        for _ in range(5):
            nursery.start_soon(send)
        await trio.sleep(1)
        await cluster.kill_broker(1)
    assert len(failures) == 5 and max(failures) == min(failures)
    with pytest.raises(NetworkExceptionError):
        await transport.send(1, MetadataRequest([]))
    assert round((trio.current_time() - failures[0]) * 1000) == 50
    await transport.aclose()


async def test_attempts_at_a_dead_broker_wait_twice_as_long_each_time_up_to_the_max(autojump_clock: Any,
                                                                                   cluster: Cluster) -> None:
    """50, 100, 200, 400, 800 ms, then reconnect.backoff.max.ms; an answer starts the doubling again."""
    transport = InProcessTransport(cluster.transport, cluster.broker_ids, "probe", 30000, 50, 1000)
    await cluster.kill_broker(1)
    failed_at = []
    for _ in range(7):
        with pytest.raises(NetworkExceptionError):
            await transport.send(1, MetadataRequest([]))
        failed_at.append(trio.current_time())
    gaps = [round((later - earlier) * 1000) for earlier, later in zip(failed_at, failed_at[1:])]
    assert gaps == [50, 100, 200, 400, 800, 1000]
    await cluster.restart_broker(1)
    started = trio.current_time()
    await transport.send(1, MetadataRequest([]))  # waits out the last backoff, then is answered
    assert round((trio.current_time() - started) * 1000) <= 1000
    await cluster.kill_broker(1)
    with pytest.raises(NetworkExceptionError):
        await transport.send(1, MetadataRequest([]))
    first_failure = trio.current_time()
    with pytest.raises(NetworkExceptionError):
        await transport.send(1, MetadataRequest([]))
    assert round((trio.current_time() - first_failure) * 1000) == 50


async def test_a_request_for_any_broker_goes_to_a_live_one_before_a_backing_off_one(autojump_clock: Any,
                                                                                   cluster: Cluster) -> None:
    transport = InProcessTransport(cluster.transport, cluster.broker_ids, "probe", 30000, 1000, 1000)
    await cluster.kill_broker(1)
    with pytest.raises(NetworkExceptionError):
        await transport.send(1, MetadataRequest([]))
    started = trio.current_time()
    response = await transport.send_to_any(MetadataRequest([]))
    assert trio.current_time() == started  # broker 1 waits out its second; the others answer now
    assert {broker.node_id for broker in response.brokers} >= {2, 3}  # answered by one of them


async def test_requests_waiting_for_a_connection_that_cannot_open_fail_with_it(
        autojump_clock: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Three requests ask for a connection to a port nobody listens on: one attempt is made, and the two queued
    behind it fail with it rather than each trying again within reconnect.backoff.ms."""
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]  # nothing listens once it closes: connecting is refused
    attempts = []
    real_open = Connection.open

    async def counted_open(*args: Any, **kwargs: Any) -> Connection:
        attempts.append(trio.current_time())
        return await real_open(*args, **kwargs)

    monkeypatch.setattr(Connection, "open", counted_open)
    transport = TcpTransport(f"127.0.0.1:{port}", "probe", 30000, 50, 1000)
    failures = []

    async def send() -> None:
        with pytest.raises(NetworkExceptionError):
            await transport.send(f"127.0.0.1:{port}", MetadataRequest([]))
        failures.append(trio.current_time())

    async with trio.open_nursery() as nursery:
        for _ in range(3):
            nursery.start_soon(send)
    assert len(attempts) == 1 and len(failures) == 3
    with pytest.raises(NetworkExceptionError):
        await transport.send(f"127.0.0.1:{port}", MetadataRequest([]))
    assert len(attempts) == 2 and round((attempts[1] - attempts[0]) * 1000) == 50
    await transport.aclose()


async def test_a_request_whose_deadline_comes_before_the_backoff_ends_is_never_sent(
        autojump_clock: Any, cluster: Cluster, bootstrap: Any) -> None:
    """A produce timed out without reaching the broker must not be appended after its client gave up on it: a
    retry would write it twice. One whose request timeout ends before the broker may be tried again is not sent."""
    await cluster.create_topic("t", partitions=1, replication_factor=1)
    leader = cluster.leader_for("t", 0)
    transport = await _transport(cluster, bootstrap, backoff_ms=1000)
    transport.unreachable(leader)
    batch = RecordBatch.from_records([Record(None, b"v", 1_700_000_000_000)])
    started = trio.current_time()
    with pytest.raises(RequestTimedOutError):
        await transport.send(leader, ProduceRequest(-1, 5000, [ProducePartitionData("t", 0, [batch])]), 0.2)
    assert round((trio.current_time() - started) * 1000) == 200
    await trio.sleep(2)
    assert cluster.high_watermark("t", 0) == 0
    await transport.aclose()


@pytest.mark.parametrize("client", [Producer, Consumer, Admin])
@pytest.mark.parametrize("key", ["reconnect.backoff.ms", "reconnect.backoff.max.ms"])
async def test_a_negative_reconnect_backoff_is_refused(client: Any, key: str, cluster: Cluster) -> None:
    with pytest.raises(InvalidConfigError, match=key.replace(".", r"\.")):
        client(cluster, {key: -1})
