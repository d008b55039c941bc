"""The producer's recovery, as Kafka's: from sequence gaps and lost producer state (a new producer id), from
refused producer ids (fatal), and delivery.timeout.ms holding for requests the broker keeps."""

from __future__ import annotations

import pytest
import trio

from kafkalite import UNCLEAN_ELECTION
from kafkalite.client import Producer
from kafkalite.cluster import Cluster
from kafkalite.common import errors
from kafkalite.common.types import TopicPartition

pytestmark = pytest.mark.usefixtures("autojump_clock")


async def values(cluster: Cluster, topic: str) -> list[tuple[int, bytes | None]]:
    return [(offset, record.value) for offset, record in await cluster.fetch_all(topic, 0)]


def producer_ids(cluster: Cluster, topic: str) -> list[tuple[int, int, int]]:
    """(base offset, producer id, base sequence) of each batch the leader of partition 0 holds."""
    log = cluster.log_manager(cluster.leader_for(topic, 0)).get_log(TopicPartition(topic, 0))
    assert log is not None
    return [(batch.base_offset, batch.producer_id, batch.base_sequence) for batch in log.read(0, 1 << 20)]


async def test_a_gap_an_unclean_election_left_moves_the_producer_to_a_new_id_at_once() -> None:
    """The new leader lost five acknowledged records, so it answers the producer's next batch with
    OUT_OF_ORDER_SEQUENCE_NUMBER: nothing in flight can fill that gap. As Kafka's producer bumps its epoch, this
    one takes a new producer id and delivers the batch after one retry backoff, instead of resending the same
    sequence until delivery.timeout.ms (two minutes of a stalled partition, then the record lost)."""
    config = {"zookeeper.session.timeout.ms": 6000, "replica.lag.time.max.ms": 2000}
    async with Cluster(brokers=2, config=config, seed=3) as cluster:
        await cluster.create_topic("t", partitions=1, replication_factor=2, config={"min.insync.replicas": 1})
        leader = cluster.leader_for("t", 0)
        follower = next(b for b in cluster.partition_state("t", 0).isr if b != leader)
        async with Producer(cluster, acks="all", linger_ms=0, retry_backoff_ms=100) as producer:
            for i in range(5):
                await (await producer.send("t", b"a%d" % i, partition=0))
            await cluster.kill_broker(follower)
            await cluster.wait_until(lambda: cluster.partition_state("t", 0).isr == (leader,), timeout=60)
            lost = [(await (await producer.send("t", b"b%d" % i, partition=0))).offset for i in range(5)]
            assert lost == [5, 6, 7, 8, 9]
            first_id = producer.producer_id
            await cluster.kill_broker(leader)
            await cluster.restart_broker(follower)
            await trio.sleep(10)  # the old leader's session expires
            await cluster.elect_leaders(UNCLEAN_ELECTION, [TopicPartition("t", 0)])
            await cluster.wait_until(lambda: cluster.leader_for("t", 0) == follower, timeout=60)
            started = trio.current_time()
            with trio.fail_after(1):
                after = await (await producer.send("t", b"after", partition=0))
            assert trio.current_time() - started < 0.5  # the old leader's refusal, then a gap, each a backoff
            following = await (await producer.send("t", b"next", partition=0))
            assert (after.offset, following.offset) == (5, 6)
            assert producer.producer_id != first_id
        assert await values(cluster, "t") == [(i, b"a%d" % i) for i in range(5)] + [(5, b"after"), (6, b"next")]
        assert producer_ids(cluster, "t")[-2:] == [(5, producer.producer_id, 0), (6, producer.producer_id, 1)]


async def test_unknown_producer_id_is_retried_under_a_new_id(cluster: Cluster) -> None:
    """UNKNOWN_PRODUCER_ID says the leader lost the producer's state: Kafka's idempotent producer always retries
    it, under a new epoch, and does not fail the record."""
    await cluster.create_topic("t", partitions=1, replication_factor=3)
    async with Producer(cluster, linger_ms=0) as producer:
        await (await producer.send("t", b"warm", partition=0))
        first_id = producer.producer_id
        fault = cluster.fail_requests("Produce", errors.UNKNOWN_PRODUCER_ID)
        assert (await (await producer.send("t", b"x", partition=0))).offset == 1
        assert (await (await producer.send("t", b"y", partition=0))).offset == 2
    assert fault.hits == 1
    assert await values(cluster, "t") == [(0, b"warm"), (1, b"x"), (2, b"y")]
    assert producer_ids(cluster, "t") == [(0, first_id, 0), (1, producer.producer_id, 0), (2, producer.producer_id, 1)]
    assert producer.producer_id != first_id


async def test_the_first_batch_under_a_new_id_goes_alone_so_a_later_one_cannot_overtake_it(cluster: Cluster) -> None:
    """A leader takes any first sequence from a producer id it does not know. The first batch under a new id was
    refused once (NOT_ENOUGH_REPLICAS) while the second, sent behind it, was served: that one was written first,
    and the first could never be, its sequence now behind the log's. Until the leader has acknowledged a batch
    under the id, a partition has one in flight, so both are written, in the order sent."""
    await cluster.create_topic("t", partitions=1, replication_factor=3)
    async with Producer(cluster, linger_ms=0, delivery_timeout_ms=10000, request_timeout_ms=3000,
                        retry_backoff_ms=100) as producer:
        await (await producer.send("t", b"warm", partition=0))
        cluster.fail_requests("Produce", errors.UNKNOWN_PRODUCER_ID)  # a new id for what follows
        first = await producer.send("t", b"x1", partition=0)
        refused = cluster.fail_requests("Produce", errors.NOT_ENOUGH_REPLICAS, delay=0.5)
        await trio.sleep(0.2)
        second = await producer.send("t", b"x2", partition=0)
        assert [(await first).offset, (await second).offset] == [1, 2]
    assert refused.hits == 1
    assert await values(cluster, "t") == [(0, b"warm"), (1, b"x1"), (2, b"x2")]
    assert [sequence for _, _, sequence in producer_ids(cluster, "t")] == [0, 0, 1]


@pytest.mark.parametrize("late", ["appended", "refused"])
async def test_a_record_in_flight_fails_at_its_delivery_timeout_and_its_late_answer_is_ignored(
        cluster: Cluster, late: str) -> None:
    """delivery.timeout.ms bounds the time from send() to the record's outcome (KIP-91), also when the broker holds
    the last attempt: the record fails at its deadline, not request.timeout.ms later, saying that attempt is
    unanswered. The broker may append it later all the same; the producer ignores that answer (a refusal does not
    make it send the record again) and, its sequence now unknown, takes a new producer id, so the next record is
    written once, after it."""
    await cluster.create_topic("t", partitions=1, replication_factor=3)
    async with Producer(cluster, linger_ms=0, request_timeout_ms=5000, delivery_timeout_ms=6000,
                        retry_backoff_ms=100) as producer:
        await (await producer.send("t", b"warm", partition=0))
        first_id = producer.producer_id
        refusing = cluster.fail_requests("Produce", errors.NOT_LEADER_OR_FOLLOWER, times=None)
        started = trio.current_time()
        handle = await producer.send("t", b"x", partition=0)
        await trio.sleep(5.5)
        refusing.remove()
        # answered 8.5 s after send(), within request.timeout.ms
        held = cluster.fail_requests("Produce", errors.NOT_LEADER_OR_FOLLOWER if late == "refused" else None, delay=3)
        with pytest.raises(errors.NotLeaderOrFollowerError) as expired:
            await handle
        assert trio.current_time() - started == pytest.approx(6, abs=0.001)
        assert str(expired.value).startswith(
            "NOT_LEADER_OR_FOLLOWER: Expiring 1 record(s) for t-0: 6000 ms has passed since batch creation, after ")
        assert "attempt(s), the last unanswered so far (it may yet be written), the one before failing with " \
               "NOT_LEADER_OR_FOLLOWER" in str(expired.value)
        following = await (await producer.send("t", b"y", partition=0))
        assert trio.current_time() - started >= 8.5  # after the held request came back
        assert held.hits == 1
        with pytest.raises(errors.NotLeaderOrFollowerError):
            handle.result()  # the late answer changed nothing
        assert producer.producer_id != first_id
    written = [b"warm", b"x", b"y"] if late == "appended" else [b"warm", b"y"]
    assert await values(cluster, "t") == list(enumerate(written))
    assert following.offset == len(written) - 1


async def test_a_record_whose_retry_is_held_fails_at_its_delivery_timeout(cluster: Cluster) -> None:
    """The first attempt times out after request.timeout.ms; the retry, held too, ends at delivery.timeout.ms."""
    await cluster.create_topic("t", partitions=1, replication_factor=3)
    leader = cluster.leader_for("t", 0)
    async with Producer(cluster, linger_ms=0, request_timeout_ms=5000, delivery_timeout_ms=6000,
                        retry_backoff_ms=100) as producer:
        await (await producer.send("t", b"warm", partition=0))
        holding = cluster.fail_requests("Produce", delay=60, times=None)
        started = trio.current_time()
        with pytest.raises(errors.RequestTimedOutError, match=(
                r"^REQUEST_TIMED_OUT: Expiring 1 record\(s\) for t-0: 6000 ms has passed since batch creation, after "
                r"2 attempt\(s\), the last unanswered so far \(it may yet be written\), the one before failing with "
                rf"REQUEST_TIMED_OUT: no response from {leader} within 5000 ms$")):
            await (await producer.send("t", b"x", partition=0))
        assert trio.current_time() - started == pytest.approx(6, abs=0.001)
        holding.remove()
        assert (await (await producer.send("t", b"y", partition=0))).offset == 1
    assert await values(cluster, "t") == [(0, b"warm"), (1, b"y")]


async def test_records_queued_behind_a_held_request_expire_on_time(cluster: Cluster) -> None:
    """While the producer waits for its requests in flight to come back before it takes a new producer id, records
    queued meanwhile still fail at their delivery.timeout.ms, not when the held request comes back."""
    await cluster.create_topic("t", partitions=1, replication_factor=3)
    async with Producer(cluster, linger_ms=0, request_timeout_ms=5000, delivery_timeout_ms=6000, retry_backoff_ms=100,
                        max_in_flight_requests_per_connection=1) as producer:
        await (await producer.send("t", b"warm", partition=0))
        holding = cluster.fail_requests("Produce", delay=60, times=None)
        started = trio.current_time()
        failed: list[tuple[bytes, float]] = []

        async def expect_expiry(value: bytes) -> None:
            handle = await producer.send("t", value, partition=0)
            with pytest.raises(errors.RequestTimedOutError, match="6000 ms has passed since batch creation"):
                await handle
            failed.append((value, trio.current_time() - started))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(expect_expiry, b"in flight")
            await trio.sleep(0.5)
            nursery.start_soon(expect_expiry, b"queued")
        assert [value for value, _ in failed] == [b"in flight", b"queued"]
        assert [at for _, at in failed] == [pytest.approx(6, abs=0.001), pytest.approx(6.5, abs=0.001)]
        holding.remove()
        assert (await (await producer.send("t", b"after", partition=0))).offset == 1


@pytest.mark.parametrize("error", [errors.CLUSTER_AUTHORIZATION_FAILED, errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                                   errors.UNKNOWN_SERVER_ERROR])
async def test_a_producer_id_refused_for_good_fails_every_record_with_the_refusal(
        cluster: Cluster, error: errors.ErrorCode) -> None:
    """As Kafka's InitProducerIdHandler: an error no retry cures (not authorized, or unexpected) is fatal, and the
    records pending and sent later fail with it at once, instead of as REQUEST_TIMED_OUT two minutes later."""
    await cluster.create_topic("t", partitions=1, replication_factor=3)
    refused = cluster.fail_requests("InitProducerId", error, times=None, message="no IdempotentWrite")
    async with Producer(cluster) as producer:
        started = trio.current_time()
        pending = await producer.send("t", b"pending", partition=0)
        with pytest.raises(error.exception, match="InitProducerId refused the producer an id: .*no IdempotentWrite"):
            await pending
        with pytest.raises(error.exception, match="InitProducerId refused"):
            await (await producer.send("t", b"later", partition=0))
        assert trio.current_time() - started < 0.1
    assert refused.hits == 1
    assert await values(cluster, "t") == []


async def test_a_retriable_init_producer_id_error_that_persists_is_named_when_records_expire(
        cluster: Cluster) -> None:
    await cluster.create_topic("t", partitions=1, replication_factor=3)
    loading = cluster.fail_requests("InitProducerId", errors.COORDINATOR_LOAD_IN_PROGRESS, times=None)
    async with Producer(cluster, request_timeout_ms=1000, delivery_timeout_ms=5000, retry_backoff_ms=100) as producer:
        started = trio.current_time()
        with pytest.raises(errors.CoordinatorLoadInProgressError, match=(
                r"^COORDINATOR_LOAD_IN_PROGRESS: Expiring 1 record\(s\) for t-0: 5000 ms has passed since batch "
                "creation, and the producer had no producer id to send them with, InitProducerId failing with "
                "COORDINATOR_LOAD_IN_PROGRESS")):
            await (await producer.send("t", b"x", partition=0))
        assert trio.current_time() - started == pytest.approx(5, abs=0.001)
        assert 45 <= loading.hits <= 51  # asked again every retry.backoff.ms, not in a loop
        loading.remove()
        assert (await (await producer.send("t", b"y", partition=0))).offset == 0


async def test_idempotence_asked_for_is_not_dropped_for_brokers_that_grant_no_producer_id(cluster: Cluster) -> None:
    """Kafka falls back to a producer without idempotence only when enable.idempotence was left to its default;
    set explicitly, UNSUPPORTED_VERSION is fatal, and a lost acknowledgement cannot write a record twice."""
    await cluster.create_topic("t", partitions=1, replication_factor=3)
    cluster.fail_requests("InitProducerId", errors.UNSUPPORTED_VERSION, times=None)
    cluster.fail_requests("Produce", drop="response")
    async with Producer(cluster, {"enable.idempotence": True, "acks": "all"}) as producer:
        with pytest.raises(errors.UnsupportedVersionError, match="enable.idempotence=true needs brokers that grant "
                                                                  "producer ids"):
            await (await producer.send("t", b"once", partition=0))
        with pytest.raises(errors.UnsupportedVersionError):
            await (await producer.send("t", b"later", partition=0))
    assert await values(cluster, "t") == []


async def test_send_after_close_says_the_producer_was_closed(cluster: Cluster) -> None:
    producer = Producer(cluster)
    with pytest.raises(RuntimeError, match=r"the producer is not open: use `async with Producer\(...\)`"):
        await producer.send("t", b"early")
    async with producer:
        pass
    with pytest.raises(RuntimeError, match="^Cannot perform operation after producer has been closed$"):
        await producer.send("t", b"late")
