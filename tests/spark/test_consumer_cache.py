"""The consumers a process's reads keep open between them: each read still gets exactly its range."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kafkalite.embedded import EmbeddedCluster
from kafkalite.spark import KafkaliteDataSource
from kafkalite.spark import records as spark_records
from kafkalite.spark.planning import OffsetRange
from kafkalite.spark.records import CONSUMERS

from .conftest import numbered, produce

pytestmark = pytest.mark.spark


@pytest.fixture(autouse=True)
def no_kept_consumers() -> Iterator[None]:
    CONSUMERS.clear()
    yield
    CONSUMERS.clear()


def _read(cluster: EmbeddedCluster, topic: str, partition: int, start: int, end: int, **options: str) -> list[bytes]:
    source = KafkaliteDataSource({"kafka.bootstrap.servers": cluster.bootstrap_servers, "subscribe": topic, **options})
    ranged = OffsetRange(topic, partition, start, end)
    return [row["value"] for batch in source.streamReader(None).read(ranged) for row in batch.to_pylist()]


def _values(start: int, end: int) -> list[bytes]:
    return [b"0:%d" % i for i in range(start, end)]


def test_consecutive_reads_of_a_partition_share_a_consumer_that_asks_for_metadata_once(
        cluster: EmbeddedCluster) -> None:
    """A micro-batch's task connected and asked a broker for metadata before its first fetch, every time. The
    ranges here lie in one record batch, which each read fetches whole and cuts at its range's end. A read from
    anywhere else than where the last one stopped (a retried task, a restarted query) asks again: its consumer's
    view of the topic may be of one since deleted."""
    cluster.create_topic("kept", 1, 3)
    produce(cluster, "kept", numbered(1, 30))
    asked = cluster.fail_requests("Metadata", delay=0.001, times=None, topics=["kept"])
    try:
        assert _read(cluster, "kept", 0, 0, 10) == _values(0, 10)
        first = asked.hits
        assert first >= 1
        assert _read(cluster, "kept", 0, 10, 20) == _values(10, 20)
        assert _read(cluster, "kept", 0, 20, 30) == _values(20, 30)
        assert asked.hits == first
        assert _read(cluster, "kept", 0, 5, 25) == _values(5, 25)
        assert asked.hits > first
    finally:
        asked.remove()


def test_a_read_from_where_the_last_one_stopped_gets_the_records_its_prefetch_brought_and_no_others(
        cluster: EmbeddedCluster) -> None:
    """The last poll of a read left a fetch from the range's end parked at the leader; the next micro-batch's
    records answer it, and the next read of the partition takes them from there."""
    cluster.create_topic("prefetched", 1, 3)
    records = numbered(1, 40)
    produce(cluster, "prefetched", records[:10])
    assert _read(cluster, "prefetched", 0, 0, 10) == _values(0, 10)
    produce(cluster, "prefetched", records[10:25])
    assert _read(cluster, "prefetched", 0, 10, 20) == _values(10, 20)  # planned before the last five came
    produce(cluster, "prefetched", records[25:])
    assert _read(cluster, "prefetched", 0, 20, 40) == _values(20, 40)


def test_a_read_stopped_early_closes_its_consumer_and_the_next_reads_its_whole_range(
        cluster: EmbeddedCluster) -> None:
    cluster.create_topic("stopped", 1, 3)
    produce(cluster, "stopped", numbered(1, 30))
    source = KafkaliteDataSource({"kafka.bootstrap.servers": cluster.bootstrap_servers, "subscribe": "stopped",
                                  "kafka.max.partition.fetch.bytes": "64"})  # a batch a poll
    batches = source.streamReader(None).read(OffsetRange("stopped", 0, 0, 30))
    assert next(batches).num_rows > 0
    batches.close()  # Spark's limit(), or a cancelled task
    assert _read(cluster, "stopped", 0, 0, 30) == _values(0, 30)


@pytest.mark.parametrize("fault", ["shutdown_broker", "kill_broker"])
def test_a_consumer_kept_follows_a_leader_that_moved_between_reads(fault: str) -> None:
    """The next micro-batch's read starts where the kept consumer stands, so it does not seek and forget the
    topic's metadata: its own error handling must find the new leader, whether the old one moved its leadership
    away (a controlled shutdown) or died with the fetch the consumer left parked there (a kill, failed over once
    its 500 ms session expires). Then a read from elsewhere, which seeks."""
    with EmbeddedCluster(brokers=3, config={"zookeeper.session.timeout.ms": 500}) as cluster:
        cluster.create_topic("moving", 1, 3, {"min.insync.replicas": 2})
        records = numbered(1, 20)
        produce(cluster, "moving", records[:10])
        assert _read(cluster, "moving", 0, 0, 10) == _values(0, 10)
        leader = cluster.leader_for("moving", 0)
        getattr(cluster, fault)(leader)
        produce(cluster, "moving", records[10:])
        assert cluster.leader_for("moving", 0) not in (leader, -1)
        assert _read(cluster, "moving", 0, 10, 20) == _values(10, 20)
        assert _read(cluster, "moving", 0, 0, 20) == _values(0, 20)


def test_a_consumer_unused_past_the_idle_timeout_or_past_the_capacity_is_closed_and_another_opened(
        cluster: EmbeddedCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    cluster.create_topic("evicted", 2, 3)
    produce(cluster, "evicted", numbered(2, 20))
    asked = cluster.fail_requests("Metadata", delay=0.001, times=None, topics=["evicted"])
    try:
        assert _read(cluster, "evicted", 0, 0, 5) == [b"0:%d" % i for i in range(0, 10, 2)]
        opened = asked.hits
        monkeypatch.setattr(spark_records, "_IDLE_TIMEOUT_S", 0.0)
        assert _read(cluster, "evicted", 0, 5, 10) == [b"0:%d" % i for i in range(10, 20, 2)]
        assert asked.hits > opened  # the kept one had timed out: a new consumer asked again
        monkeypatch.undo()
        monkeypatch.setattr(spark_records, "_CAPACITY", 1)
        opened = asked.hits
        assert _read(cluster, "evicted", 1, 0, 10) == [b"1:%d" % i for i in range(1, 20, 2)]
        assert asked.hits > opened  # partition 1's own consumer, which pushed partition 0's out
        opened = asked.hits
        assert _read(cluster, "evicted", 0, 0, 5) == [b"0:%d" % i for i in range(0, 10, 2)]
        assert asked.hits > opened
        opened = asked.hits
        assert _read(cluster, "evicted", 0, 5, 10) == [b"0:%d" % i for i in range(10, 20, 2)]
        assert asked.hits == opened  # kept: the capacity is one
    finally:
        asked.remove()


def test_a_topic_deleted_and_created_again_is_read_by_a_consumer_kept_from_before() -> None:
    """Without topic ids a consumer cannot tell the new topic from the old: one kept from before the old topic was
    deleted held its leader epochs, newer than the new topic's, and its fetches were refused as from the future
    until the read timed out. (fetch.max.wait.ms 0: no fetch of its is left parked to hear of the deletion.)"""
    options = {"kafka.fetch.max.wait.ms": "0", "kafkaconsumer.polltimeoutms": "5000"}
    with EmbeddedCluster(brokers=3) as cluster:
        cluster.create_topic("again", 1, 3)
        produce(cluster, "again", numbered(1, 10))
        for _ in range(2):  # leader epochs the new topic will not have
            leader = cluster.leader_for("again", 0)
            assert cluster.shutdown_broker(leader)
            cluster.restart_broker(leader)
        assert _read(cluster, "again", 0, 0, 10, **options) == _values(0, 10)
        cluster.delete_topic("again")
        cluster.create_topic("again", 1, 3)
        produce(cluster, "again", numbered(1, 5, prefix="new "))
        assert _read(cluster, "again", 0, 0, 5, **options) == [b"new 0:%d" % i for i in range(5)]
