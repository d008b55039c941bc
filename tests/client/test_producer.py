"""The producer against a real cluster: partitioning, ordering, acks, batching, failover and errors."""

from __future__ import annotations

import random
import re
import socket
from typing import Any

import pytest
import trio

from kafkalite.client import Producer, RecordMetadata
from kafkalite.client.partitioner import partition_for_key
from kafkalite.cluster import Cluster
from kafkalite.common.errors import MessageTooLargeError, NetworkExceptionError, NotEnoughReplicasError, \
    RequestTimedOutError, UnknownTopicOrPartitionError
from kafkalite.common.records import RecordBatch
from kafkalite.common.types import TopicPartition
from kafkalite.testing.checks import metadata_agrees

from tests.conftest import SchedulingRounds

from .conftest import consume

pytestmark = pytest.mark.usefixtures("autojump_clock")


async def test_keyed_records_land_on_the_java_clients_partitions(autojump_clock: Any, cluster: Cluster, bootstrap: Any) -> None:
    await cluster.create_topic("keyed", partitions=6, replication_factor=3)
    keys = [f"user-{i}".encode() for i in range(60)]
    async with Producer(bootstrap) as producer:
        handles = [await producer.send("keyed", b"v", key=key) for key in keys]
        sent = [await handle for handle in handles]
    assert [m.partition for m in sent] == [partition_for_key(key, 6) for key in keys]
    records = await consume(bootstrap, [TopicPartition("keyed", p) for p in range(6)], len(keys))
    assert sorted((r.key, r.partition) for r in records) == sorted(zip(keys, (m.partition for m in sent)))


async def test_one_partition_keeps_send_order_with_contiguous_offsets(autojump_clock: Any, cluster: Cluster, bootstrap: Any) -> None:
    await cluster.create_topic("ordered", partitions=1, replication_factor=3)
    async with Producer(bootstrap, {"batch.size": 500}) as producer:
        handles = [await producer.send("ordered", b"%d" % i) for i in range(300)]
        sent = [await handle for handle in handles]
    assert [m.offset for m in sent] == list(range(300))
    records = await consume(bootstrap, [TopicPartition("ordered", 0)], 300)
    assert [r.value for r in records] == [b"%d" % i for i in range(300)]
    assert [r.offset for r in records] == list(range(300))


@pytest.mark.parametrize("acks", ["0", "1", "all"])
async def test_every_acks_level_delivers(autojump_clock: Any, cluster: Cluster, bootstrap: Any, acks: str) -> None:
    await cluster.create_topic("acks", partitions=1, replication_factor=3)
    async with Producer(bootstrap, acks=acks) as producer:
        handles = [await producer.send("acks", b"%d" % i, partition=0) for i in range(20)]
        sent = [await handle for handle in handles]
    assert [m.offset for m in sent] == ([-1] * 20 if acks == "0" else list(range(20)))
    records = await consume(bootstrap, [TopicPartition("acks", 0)], 20)
    assert [r.value for r in records] == [b"%d" % i for i in range(20)]


async def test_records_linger_until_flushed(autojump_clock: Any, cluster: Cluster, bootstrap: Any) -> None:
    await cluster.create_topic("linger", partitions=1, replication_factor=1)
    async with Producer(bootstrap, linger_ms=3_600_000) as producer:
        handle = await producer.send("linger", b"waiting")
        await trio.sleep(60)
        assert not handle.done()
        started = trio.current_time()
        await producer.flush()
        assert handle.done() and trio.current_time() - started < 1
        assert (await handle).offset == 0


async def test_a_full_batch_goes_without_lingering(autojump_clock: Any, cluster: Cluster, bootstrap: Any) -> None:
    await cluster.create_topic("full", partitions=1, replication_factor=1)
    async with Producer(bootstrap, linger_ms=3_600_000, batch_size=1000) as producer:
        handles = [await producer.send("full", bytes(100)) for _ in range(20)]
        with trio.fail_after(10):
            await handles[0]
        await producer.flush()


async def test_send_lets_the_cluster_run_when_it_made_a_batch_ready_not_for_every_batch_it_opens(
        autojump_clock: Any, cluster: Cluster, bootstrap: Any) -> None:
    """A send that fills a batch yields, so the brokers take it while records keep coming; one that opens a batch
    that will linger does not, once the sender's timer is set for it. A keyed producer over hundreds of partitions
    opens one per record after every drain: yielding for each let the brokers in so often that linger.ms ran out
    after a few records a batch (benchmarks/scale.py's keyed produce)."""
    await cluster.create_topic("full", partitions=1, replication_factor=1)
    await cluster.create_topic("spread", partitions=64, replication_factor=1)
    rounds = SchedulingRounds()
    async with Producer(bootstrap, linger_ms=3_600_000, batch_size=1000) as producer:
        for topic in ("full", "spread"):  # metadata first: a send waits for it, over TCP for many rounds
            await producer.metadata.wait_for_partition_count(topic, 10)
        async with trio.open_nursery() as nursery:  # a spinning task stops the clock: cancelled before any wait
            nursery.start_soon(rounds.run)
            await trio.lowlevel.checkpoint()
            full = [await producer.send("full", bytes(100), partition=0) for _ in range(200)]
            after_full = rounds.count
            spread = [await producer.send("spread", b"v", key=b"%d" % i) for i in range(640)]
            after_spread = rounds.count - after_full
            nursery.cancel_scope.cancel()
        assert after_full >= 20 and any(handle.done() for handle in full)  # a yield per full batch: some acked
        assert len({metadata.partition for metadata in [await handle for handle in full]}) == 1
        assert after_spread <= 2  # 64 batches opened; only the first one's timer needed the sender
        await producer.flush()
        assert {(await handle).partition for handle in spread} == set(range(64))


async def test_a_producer_sending_in_a_loop_keeps_a_turn_as_long_as_the_brokers_took(
        autojump_clock: Any, cluster: Cluster, bootstrap: Any) -> None:
    """A slow machine, modelled: every scheduling round of the other tasks (the brokers replicating what was sent)
    takes 8 ms, longer than linger.ms, and every send 50 us. A send that finds a batch lingered yields only once
    the producer's task has had as long a turn as the one it gave the others last time, so a keyed producer over
    64 partitions still fills its batches with several records each; yielding for every lingered batch handed the
    brokers most of the time and sent one or two records a batch (benchmarks/scale.py's keyed produce). Nothing
    is lost or reordered for it."""
    await cluster.create_topic("spread", partitions=64, replication_factor=3)

    async def brokers_take_8_ms_a_round() -> None:
        while True:
            autojump_clock.jump(0.008)
            await trio.lowlevel.checkpoint()

    keys = [b"key-%d" % i for i in range(500)]
    async with Producer(bootstrap, acks="all", linger_ms=5) as producer:
        await producer.metadata.wait_for_partition_count("spread", 10)
        async with trio.open_nursery() as nursery:  # ticks the clock on: cancelled before anything waits on it
            nursery.start_soon(brokers_take_8_ms_a_round)
            handles = []
            for i in range(4000):
                handles.append(await producer.send("spread", b"%06d" % i + bytes(94), key=keys[i % 500]))
                autojump_clock.jump(0.00005)
            await producer.flush()
            nursery.cancel_scope.cancel()
        sent = [await handle for handle in handles]
    by_partition: dict[int, list[int]] = {}
    for i, metadata in enumerate(sent):
        assert metadata.partition == partition_for_key(keys[i % 500], 64)
        by_partition.setdefault(metadata.partition, []).append(metadata.offset)
    assert all(offsets == list(range(len(offsets))) for offsets in by_partition.values())  # in send order
    batches = [batch for p in range(64) for batch in stored_batches(cluster, "spread", p)]
    assert sum(batch.record_count for batch in batches) == 4000
    assert len(batches) <= 500  # 8 records a batch at least; 1,746 batches when every lingered batch yielded
    records = await consume(bootstrap, [TopicPartition("spread", p) for p in range(64)], 4000)
    assert sorted(r.value[:6] for r in records) == [b"%06d" % i for i in range(4000)]


def stored_batches(cluster: Cluster, topic: str, partition: int = 0) -> list[RecordBatch]:
    log = cluster.log_manager(cluster.leader_for(topic, partition)).get_log(TopicPartition(topic, partition))
    assert log is not None
    return [batch for segment in log.segments for batch in segment.batches]


async def test_batches_fill_to_batch_size_by_exact_record_sizes(autojump_clock: Any, cluster: Cluster,
                                                                bootstrap: Any) -> None:
    """As in Kafka's producer, a record joins a batch while its encoded size still fits batch.size: a 16 KiB
    batch of 100-byte values holds 133 of them (92 bytes of headers, and at most 122 bytes each in the columnar
    payload: the value and its header, a nil key, four bounds, two null-mask bytes and a headers entry), and no
    batch of mixed keys, headers and timestamps goes past batch.size."""
    await cluster.create_topic("uniform", partitions=1, replication_factor=1)
    await cluster.create_topic("mixed", partitions=1, replication_factor=1)
    seed = 20261123
    rng = random.Random(seed)
    async with Producer(bootstrap, linger_ms=3_600_000, batch_size=16384) as producer:
        for _ in range(1000):
            await producer.send("uniform", bytes(100), partition=0)
        for i in range(1000):
            await producer.send("mixed", bytes(rng.choice([0, 100, 255, 256, 3000])), partition=0,
                                key=rng.choice([None, b"k", bytes(300)]),
                                headers=rng.choice([None, [("trace", b"x" * rng.randrange(300))], [("é" * 40, None)]]),
                                timestamp=rng.choice([None, 1_700_000_000_000 + i, 0]))
        await producer.flush()
    uniform = stored_batches(cluster, "uniform")
    assert [batch.record_count for batch in uniform] == [133] * 7 + [69]
    assert max(batch.size_in_bytes for batch in uniform) <= 16384
    mixed = stored_batches(cluster, "mixed")
    assert sum(batch.record_count for batch in mixed) == 1000
    assert max(batch.size_in_bytes for batch in mixed) <= 16384, f"seed {seed}"
    # the largest record (3 KB value, 300-byte key and header) may not fit what a batch has left
    assert min(batch.size_in_bytes for batch in mixed[:-1]) > 16384 - 4096, f"seed {seed}: batches left unfilled"


async def test_headers_keys_and_timestamps_round_trip(autojump_clock: Any, cluster: Cluster, bootstrap: Any) -> None:
    await cluster.create_topic("headers", partitions=1, replication_factor=3)
    headers = [("trace", b"abc"), ("empty", None), ("trace", b"twice")]
    async with Producer(bootstrap) as producer:
        given = await (await producer.send("headers", b"v", key=b"k", headers=headers, timestamp=1_600_000_000_000))
        stamped = await (await producer.send("headers", None, partition=0))
    assert given == RecordMetadata("headers", 0, 0, 1_600_000_000_000)
    assert stamped.timestamp > 1_600_000_000_000
    first, second = await consume(bootstrap, [TopicPartition("headers", 0)], 2)
    assert (first.key, first.value, list(first.headers), first.timestamp) == \
        (b"k", b"v", headers, 1_600_000_000_000)
    assert (second.key, second.value, second.headers, second.timestamp) == (None, None, (), stamped.timestamp)


async def test_records_without_key_fill_one_partition_per_batch(autojump_clock: Any, cluster: Cluster, bootstrap: Any) -> None:
    await cluster.create_topic("sticky", partitions=4, replication_factor=1)
    async with Producer(bootstrap, linger_ms=3_600_000) as producer:
        rounds = []
        for _ in range(8):
            handles = [await producer.send("sticky", b"x") for _ in range(10)]
            await producer.flush()
            rounds.append({(await handle).partition for handle in handles})
    assert all(len(partitions) == 1 for partitions in rounds)
    assert len(set().union(*rounds)) > 1


async def test_acknowledged_records_survive_a_leader_crash_exactly_once(autojump_clock: Any, cluster: Cluster, bootstrap: Any) -> None:
    await cluster.create_topic("failover", partitions=1, replication_factor=3, config={"min.insync.replicas": 2})
    leader = cluster.leader_for("failover", 0)
    handles: list[Any] = []
    async with Producer(bootstrap, linger_ms=1, batch_size=200) as producer:
        async def produce() -> None:
            for i in range(400):
                handles.append(await producer.send("failover", b"%d" % i))
                if i % 50 == 49:
                    await trio.sleep(0.05)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(produce)
            await trio.sleep(0.1)
            await cluster.kill_broker(leader)
        offsets = [(await handle).offset for handle in handles]
    assert offsets == list(range(400))
    assert cluster.leader_for("failover", 0) not in (leader, -1)
    records = await consume(bootstrap, [TopicPartition("failover", 0)], 400)
    assert [r.value for r in records] == [b"%d" % i for i in range(400)]


async def test_a_paused_leader_times_requests_out_and_the_producer_recovers(
        autojump_clock: Any, cluster: Cluster, bootstrap: Any) -> None:
    """request.timeout.ms bounds each attempt at a broker that does not answer and delivery.timeout.ms the record;
    after the broker resumes, the producer delivers again and the timed-out record is there at most once."""
    await cluster.create_topic("stuck", partitions=1, replication_factor=3)
    leader = cluster.leader_for("stuck", 0)
    async with Producer(bootstrap, request_timeout_ms=1000, delivery_timeout_ms=3000, retry_backoff_ms=100) as producer:
        assert (await (await producer.send("stuck", b"before"))).offset == 0
        cluster.pause_broker(leader)
        started = trio.current_time()
        handle = await producer.send("stuck", b"timed out")
        with trio.fail_after(10), pytest.raises(RequestTimedOutError) as timed_out:
            await handle
        assert "within 1000 ms" in str(timed_out.value)  # request.timeout.ms, named in its own unit
        assert 3 <= trio.current_time() - started < 4.5
        cluster.resume_broker(leader)
        after = await (await producer.send("stuck", b"after"))
    records = await consume(bootstrap, [TopicPartition("stuck", 0)], after.offset + 1)
    values = [r.value for r in records]
    assert values[0] == b"before" and values[-1] == b"after" and set(values[1:-1]) <= {b"timed out"}
    assert len(values) <= 3


async def test_a_record_given_up_on_says_which_broker_error_it_was_retried_after(
        autojump_clock: Any, cluster: Cluster, bootstrap: Any) -> None:
    """NOT_ENOUGH_REPLICAS is retriable, so the producer retries until delivery.timeout.ms; the error it then
    fails with is a NotEnoughReplicasError whose message says both, not a bare REQUEST_TIMED_OUT."""
    await cluster.create_topic("guarded", partitions=1, replication_factor=2, config={"min.insync.replicas": 2})
    leader = cluster.leader_for("guarded", 0)
    follower = next(b for b in cluster.partition_state("guarded", 0).isr if b != leader)
    await cluster.kill_broker(follower)
    await cluster.wait_until(lambda: cluster.partition_state("guarded", 0).isr == (leader,), timeout=60)
    async with Producer(bootstrap, request_timeout_ms=1000, delivery_timeout_ms=5000) as producer:
        started = trio.current_time()
        with pytest.raises(NotEnoughReplicasError) as raised:
            await (await producer.send("guarded", b"x"))
        assert 5 <= trio.current_time() - started < 6
    assert re.fullmatch(
        r"NOT_ENOUGH_REPLICAS: Expiring 1 record\(s\) for guarded-0: 5000 ms has passed since batch creation, "
        rf"after \d+ attempt\(s\), the last failing with NOT_ENOUGH_REPLICAS: the ISR of guarded-0 is \[{leader}\], "
        r"below min.insync.replicas 2", str(raised.value))
    assert isinstance(raised.value.__cause__, NotEnoughReplicasError)


async def test_a_record_for_a_partition_without_leader_expires_saying_so(
        autojump_clock: Any, cluster: Cluster, bootstrap: Any) -> None:
    await cluster.create_topic("orphan", partitions=1, replication_factor=1)
    await cluster.kill_broker(cluster.leader_for("orphan", 0))
    await cluster.wait_until(lambda: cluster.partition_state("orphan", 0).leader == -1
                             and metadata_agrees(cluster, "orphan", 1), timeout=60)
    async with Producer(bootstrap, request_timeout_ms=1000, delivery_timeout_ms=5000) as producer:
        with pytest.raises(RequestTimedOutError, match=r"Expiring 1 record\(s\) for orphan-0: 5000 ms has passed "
                                                       "since batch creation, and no leader of orphan-0 was known"):
            await (await producer.send("orphan", b"x"))


async def test_queued_records_expire_at_the_delivery_timeout_oldest_first(
        autojump_clock: Any, cluster: Cluster, bootstrap: Any) -> None:
    """Records queued for partitions without a leader each fail delivery.timeout.ms after their batch was created,
    to the millisecond, in the order of those deadlines across partitions."""
    await cluster.create_topic("stranded", partitions=6, replication_factor=1)
    survivor = cluster.controller_id
    leaders = {p: cluster.leader_for("stranded", p) for p in range(6)}
    stranded = [p for p, leader in leaders.items() if leader != survivor]
    for broker in set(leaders.values()) - {survivor}:
        await cluster.kill_broker(broker)
    await cluster.wait_until(lambda: all(cluster.partition_state("stranded", p).leader == -1 for p in stranded)
                             and metadata_agrees(cluster, "stranded", 6), timeout=60)
    failed: list[tuple[int, float]] = []

    async def expect_expiry(partition: int, handle: Any, sent_at: float) -> None:
        with pytest.raises(RequestTimedOutError, match=f"for stranded-{partition}: 5000 ms has passed"):
            await handle
        failed.append((partition, trio.current_time() - sent_at))

    order = stranded[::-1]
    async with Producer(bootstrap, request_timeout_ms=1000, delivery_timeout_ms=5000) as producer:
        async with trio.open_nursery() as nursery:
            for partition in order:
                sent_at = trio.current_time()
                nursery.start_soon(expect_expiry, partition, await producer.send("stranded", b"x", partition=partition),
                                   sent_at)
                await trio.sleep(0.5)
    assert [partition for partition, _ in failed] == order
    assert all(5 <= waited < 5.01 for _, waited in failed), failed


@pytest.mark.parametrize("cluster_config", [{"auto.create.topics.enable": False}])
async def test_an_unknown_topic_fails_after_max_block(autojump_clock: Any, cluster: Cluster, bootstrap: Any) -> None:
    async with Producer(bootstrap, max_block_ms=5000) as producer:
        started = trio.current_time()
        with pytest.raises(UnknownTopicOrPartitionError, match="nowhere"):
            await producer.send("nowhere", b"x")
        assert 5 <= trio.current_time() - started < 6


async def test_a_bootstrap_server_nobody_listens_on_is_named(autojump_clock: Any) -> None:
    """Not "topic not present": nobody could tell, and the fix is in the client's bootstrap servers."""
    with socket.socket() as bound_but_not_listening:
        bound_but_not_listening.bind(("127.0.0.1", 0))
        port = bound_but_not_listening.getsockname()[1]
        async with Producer(f"127.0.0.1:{port}", max_block_ms=5000) as producer:
            with pytest.raises(NetworkExceptionError, match=f"no broker could be reached at 127.0.0.1:{port} .*"
                                                            "topic anywhere not known after 5000 ms"):
                await producer.send("anywhere", b"x")


async def test_a_cluster_with_every_broker_down_is_named(autojump_clock: Any, cluster: Cluster) -> None:
    await cluster.create_topic("t", partitions=1, replication_factor=3)
    for broker_id in cluster.live_broker_ids:
        await cluster.kill_broker(broker_id)
    async with Producer(cluster, max_block_ms=5000) as producer:
        with pytest.raises(NetworkExceptionError, match="no broker could be reached at broker 1, broker 2, broker 3"):
            await producer.send("t", b"x")


async def test_a_linger_longer_than_the_default_delivery_timeout_delivers(
        autojump_clock: Any, cluster: Cluster, bootstrap: Any) -> None:
    """As in Kafka, the default delivery.timeout.ms yields to linger.ms + request.timeout.ms instead of expiring
    a batch that was still lingering as told."""
    await cluster.create_topic("patient", partitions=1, replication_factor=3)
    async with Producer(bootstrap, linger_ms=200_000) as producer:
        started = trio.current_time()
        metadata = await (await producer.send("patient", b"late but delivered"))
        assert trio.current_time() - started >= 200
    assert metadata.offset == 0


@pytest.mark.parametrize("cluster_config", [{"auto.create.topics.enable": False}])  # the test creates it
async def test_a_topic_created_while_sending_is_waited_for(autojump_clock: Any, cluster: Cluster, bootstrap: Any) -> None:
    async with Producer(bootstrap) as producer:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(cluster.create_topic, "late")
            metadata = await (await producer.send("late", b"x"))
    assert metadata.offset == 0


async def test_a_record_over_max_message_bytes_fails_alone(autojump_clock: Any, cluster: Cluster, bootstrap: Any) -> None:
    await cluster.create_topic("small", partitions=1, replication_factor=3, config={"max.message.bytes": 1000})
    async with Producer(bootstrap) as producer:
        before = await producer.send("small", b"before")
        too_big = await producer.send("small", bytes(2000))
        after = await producer.send("small", b"after")
        huge = await producer.send("small", bytes(2_000_000))
        assert (await before).offset == 0
        with pytest.raises(MessageTooLargeError):
            await too_big
        with pytest.raises(MessageTooLargeError, match="max.request.size"):
            await huge
        assert (await after).offset == 1
    records = await consume(bootstrap, [TopicPartition("small", 0)], 2)
    assert [r.value for r in records] == [b"before", b"after"]


async def test_a_batch_size_above_max_request_size_still_sends_whole_batches(
        autojump_clock: Any, cluster: Cluster, bootstrap: Any) -> None:
    """Batches close at max.request.size: bigger ones would be refused, split and sent one record a request."""
    await cluster.create_topic("capped", partitions=1, replication_factor=3)
    async with Producer(bootstrap, {"batch.size": 1 << 30, "max.request.size": 10_000}) as producer:
        handles = [await producer.send("capped", b"%03d" % i + bytes(97), partition=0) for i in range(1000)]
        sent = [await handle for handle in handles]
    assert [m.offset for m in sent] == list(range(1000))
    leader = cluster.leader_for("capped", 0)
    partition = cluster.broker(leader).replica_manager.get_partition(TopicPartition("capped", 0))
    assert partition is not None
    batches = partition.log.read(0, 1 << 30)
    assert all(batch.size_in_bytes <= 10_000 for batch in batches)
    assert len(batches) <= 15  # about 112 bytes a record: 12-13 full batches, not 1000 of one record
    assert [r.value[:3] for b in batches for r in b.records()] == [b"%03d" % i for i in range(1000)]


@pytest.mark.parametrize(("arguments", "error", "message"), [
    ({"topic": 123}, TypeError, "topic must be a str, not int"),
    ({"topic": ["strict"]}, TypeError, "topic must be a str, not list"),
    ({"value": "text"}, TypeError, "value must be bytes or None, not str"),
    ({"key": 7}, TypeError, "key must be bytes or None, not int"),
    ({"partition": "1"}, TypeError, "partition must be an int or None, not str"),
    ({"partition": 1.0}, TypeError, "partition must be an int or None, not float"),
    ({"partition": True}, TypeError, "partition must be an int or None, not bool"),
    ({"partition": -1}, ValueError, "Invalid partition: -1"),
    ({"headers": [("trace", "text")]}, TypeError, "header value must be bytes or None, not str"),
    ({"headers": [(b"trace", b"x")]}, TypeError, r"each header must be a \(str, bytes or None\) pair, not \(b'trace'"),
    ({"headers": {"trace": b"x"}}, TypeError, "headers must be a sequence of .* pairs, not dict"),
    ({"timestamp": "5"}, TypeError, "timestamp must be an int .* not str"),
    ({"timestamp": -5}, ValueError, "Invalid timestamp: -5"),
    ({"timestamp": 1 << 63}, ValueError, "timestamp 9223372036854775808 is past a Kafka long"),  # killed the sender
])
async def test_send_rejects_arguments_of_the_wrong_type_at_once(
        autojump_clock: Any, cluster: Cluster, arguments: dict[str, Any], error: type, message: str) -> None:
    """Each wrong argument is named with what was expected, before anything waits or is queued."""
    await cluster.create_topic("strict", partitions=2, replication_factor=1)
    async with Producer(cluster) as producer:
        await (await producer.send("strict", b"metadata known", partition=0))
        started = trio.current_time()
        with pytest.raises(error, match=message):
            await producer.send(**{"topic": "strict", "value": b"v", **arguments})
        assert trio.current_time() == started
        assert (await (await producer.send("strict", b"next", partition=0))).offset == 1  # nothing else was queued


async def test_a_partition_added_after_the_producer_started_is_waited_for(
        autojump_clock: Any, cluster: Cluster, bootstrap: Any) -> None:
    """As in Kafka, a partition beyond the count the producer knows makes it refresh metadata and wait for the
    partition (max.block.ms) instead of failing: it may have been added since."""
    await cluster.create_topic("growing", partitions=2, replication_factor=2)
    async with Producer(bootstrap) as producer:
        await (await producer.send("growing", b"before", partition=1))
        async with trio.open_nursery() as nursery:
            nursery.start_soon(cluster.create_partitions, "growing", 4)
            sent = await (await producer.send("growing", b"new partition", partition=3))
    assert (sent.partition, sent.offset) == (3, 0)
    assert [r.value for r in await consume(bootstrap, [TopicPartition("growing", 3)], 1)] == [b"new partition"]


async def test_a_partition_that_does_not_appear_fails_after_max_block(
        autojump_clock: Any, cluster: Cluster, bootstrap: Any) -> None:
    await cluster.create_topic("strict", partitions=2, replication_factor=1)
    async with Producer(bootstrap, max_block_ms=5000) as producer:
        started = trio.current_time()
        with pytest.raises(UnknownTopicOrPartitionError, match="Partition 2 of topic strict \\(which has 2\\) not "
                                                                "present in metadata after 5000 ms"):
            await producer.send("strict", b"x", partition=2)
        assert 5 <= trio.current_time() - started < 6


async def test_keyed_records_hash_over_added_partitions_once_metadata_is_max_age_old(
        autojump_clock: Any, cluster: Cluster, bootstrap: Any) -> None:
    """metadata.max.age.ms refreshes metadata with nothing going wrong: how a long-lived producer learns that its
    topic grew, and places keys as Kafka's producer would on the topic as it now is."""
    await cluster.create_topic("rekeyed", partitions=2, replication_factor=2)
    keys = [b"user-%d" % i for i in range(40)]
    async with Producer(bootstrap, metadata_max_age_ms=10_000) as producer:
        await (await producer.send("rekeyed", b"v", key=keys[0]))
        await cluster.create_partitions("rekeyed", 6)
        await trio.sleep(10)
        handles = [await producer.send("rekeyed", b"v", key=key) for key in keys]
        sent = [await handle for handle in handles]
    assert [m.partition for m in sent] == [partition_for_key(key, 6) for key in keys]
