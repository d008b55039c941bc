"""The connector as a source, on a real cluster: what users of Spark's Kafka source rely on.

Every record once, in offset order per partition, with no micro-batch above maxOffsetsPerTrigger; restarts
from a checkpoint without repeats; broker failures, new topics and lost records handled as Spark's Kafka
source handles them. Queries write through `foreachBatch`, which runs in this (the driver) process, so a test
sees each micro-batch in order.
"""

from __future__ import annotations

import tempfile
import time
from collections import defaultdict
from typing import Any

import pytest

from kafkalite.client import TopicPartition
from kafkalite.embedded import EmbeddedCluster

from .conftest import numbered, produce, reader, wait_for

pytestmark = pytest.mark.spark


class Collected:
    """Rows of each micro-batch (foreachBatch, in the driver), kept by batch id as an exactly-once sink must be:
    a query stopped after a batch ran but before Spark committed it runs that batch again on restart."""

    def __init__(self) -> None:
        self.by_id: dict[int, list[Any]] = {}

    def __call__(self, frame: Any, batch_id: int) -> None:
        self.by_id[batch_id] = frame.select("topic", "partition", "offset", "key", "value").collect()

    @property
    def batches(self) -> list[list[Any]]:
        return [self.by_id[batch_id] for batch_id in sorted(self.by_id)]

    @property
    def rows(self) -> list[Any]:
        return [row for batch in self.batches for row in batch]

    def offsets_by_partition(self) -> dict[TopicPartition, list[int]]:
        found: dict[TopicPartition, list[int]] = defaultdict(list)
        for row in self.rows:
            found[TopicPartition(row.topic, row.partition)].append(row.offset)
        return dict(found)


def start(frame: Any, sink: Collected, checkpoint: str, **trigger: Any) -> Any:
    return frame.writeStream.foreachBatch(sink).option("checkpointLocation", checkpoint) \
        .trigger(**(trigger or {"processingTime": "100 milliseconds"})).start()


def assert_exactly_once(sink: Collected, expected: dict[TopicPartition, int]) -> None:
    """Each partition's offsets 0..n-1 arrived once each, in offset order."""
    assert sink.offsets_by_partition() == {tp: list(range(count)) for tp, count in expected.items()}


def test_streaming_read_with_max_offsets_per_trigger(spark: Any, cluster: EmbeddedCluster) -> None:
    cluster.create_topic("stream-100k", 6, 3)
    records = numbered(6, 100_000)
    produce(cluster, "stream-100k", records)
    sink = Collected()
    with tempfile.TemporaryDirectory() as checkpoint:
        query = start(reader(spark, cluster.bootstrap_servers, subscribe="stream-100k", startingOffsets="earliest",
                             maxOffsetsPerTrigger=15_000).load(), sink, checkpoint, availableNow=True)
        assert query.awaitTermination(240)
    assert_exactly_once(sink, {TopicPartition("stream-100k", p): 100_000 // 6 + (p < 100_000 % 6) for p in range(6)})
    sizes = [len(batch) for batch in sink.batches]
    assert max(sizes) <= 15_000 and sum(sizes) == 100_000 and len(sizes) >= 7
    assert sorted(bytes(row.value) for row in sink.rows) == sorted(value for _, _, value, _, _ in records)
    assert all(bytes(row.value).startswith(f"{row.partition}:".encode()) for row in sink.rows)


def test_processing_time_trigger_and_restart_from_checkpoint(spark: Any, cluster: EmbeddedCluster) -> None:
    cluster.create_topic("restart", 3, 3)
    produce(cluster, "restart", numbered(3, 300))
    tps = [TopicPartition("restart", p) for p in range(3)]
    with tempfile.TemporaryDirectory() as checkpoint:
        sink = Collected()
        frame = reader(spark, cluster.bootstrap_servers, subscribe="restart", startingOffsets="earliest").load()
        query = start(frame, sink, checkpoint)
        wait_for(lambda: len(sink.rows) == 300, "the first 300 records")
        produce(cluster, "restart", numbered(3, 150, prefix="live-"))  # read while the query runs
        wait_for(lambda: len(sink.rows) == 450, "the 150 records produced while the query ran")
        query.stop()
        last_before_stop = max(sink.by_id)
        produce(cluster, "restart", numbered(3, 300, prefix="after-"))
        query = start(frame, sink, checkpoint)
        wait_for(lambda: len(sink.rows) == 750, "the 300 records produced while the query was stopped")
        query.stop()
    assert_exactly_once(sink, dict.fromkeys(tps, 250))
    after_restart = [row for batch_id, rows in sink.by_id.items() if batch_id > last_before_stop for row in rows]
    assert len(after_restart) == 300 and all(bytes(row.value).startswith(b"after-") for row in after_restart)


def test_a_broker_killed_mid_query_loses_nothing(spark: Any) -> None:
    # A fast session timeout, for a failover in half a second; not a fast replica.lag.time.max.ms: on a busy
    # machine followers fell out of the ISR within 500 ms, the killed leader was its last member, and its
    # partition went offline, as Kafka's would (no clean leader left), failing the query's offset lookups.
    fast_faults = {"zookeeper.session.timeout.ms": 500}
    with EmbeddedCluster(brokers=3, config=fast_faults) as cluster, \
            tempfile.TemporaryDirectory() as checkpoint:
        cluster.create_topic("failover", 3, 3)
        produce(cluster, "failover", numbered(3, 30_000))
        wait_for(lambda: all(len(cluster.partition_state("failover", p).isr) == 3 for p in range(3)),
                 "every replica in the ISR")
        victim = cluster.leader_for("failover", 0)
        sink = Collected()
        query = start(reader(spark, cluster.bootstrap_servers, subscribe="failover", startingOffsets="earliest",
                             maxOffsetsPerTrigger=2_000).load(), sink, checkpoint)
        wait_for(lambda: len(sink.batches) >= 2, "two micro-batches before the kill")
        cluster.kill_broker(victim)
        wait_for(lambda: len(sink.rows) >= 30_000, "every record after the kill")
        query.stop()
        assert cluster.leader_for("failover", 0) != victim
    assert_exactly_once(sink, dict.fromkeys((TopicPartition("failover", p) for p in range(3)), 10_000))


def test_subscribe_pattern_picks_up_a_topic_created_later(spark: Any, cluster: EmbeddedCluster) -> None:
    """The pattern need only match somewhere in a topic's name, as in Spark's Kafka source (`findFirstIn`)."""
    cluster.create_topic("pattern-a", 2, 3)
    produce(cluster, "pattern-a", numbered(2, 20))
    sink = Collected()
    with tempfile.TemporaryDirectory() as checkpoint:
        query = start(reader(spark, cluster.bootstrap_servers, subscribePattern="attern-[a-z]",
                             startingOffsets="earliest").load(), sink, checkpoint)
        wait_for(lambda: len(sink.rows) == 20, "the first topic's records")
        cluster.create_topic("pattern-b", 3, 3)
        produce(cluster, "pattern-b", numbered(3, 30))
        wait_for(lambda: len(sink.rows) == 50, "the records of the topic created later")
        query.stop()
    assert_exactly_once(sink, {**{TopicPartition("pattern-a", p): 10 for p in range(2)},
                               **{TopicPartition("pattern-b", p): 10 for p in range(3)}})


def remove_start_by_retention(cluster: EmbeddedCluster, topic: str) -> int:
    """Let retention delete partition 0's old segments on every replica now; the leader's new log start offset."""
    def delete() -> int:
        tp = TopicPartition(topic, 0)
        for broker_id in cluster.cluster.broker_ids:
            log = cluster.cluster.log_manager(broker_id).get_log(tp)
            log.delete_old_segments(log.log_end_offset)  # every record was acknowledged by all: all committed
        return cluster.cluster.log_manager(cluster.cluster.leader_for(topic, 0)).get_log(tp).log_start_offset

    return cluster.call(delete)


@pytest.mark.parametrize("fail_on_data_loss", [True, False])
def test_fail_on_data_loss_after_retention_removed_the_start(spark: Any, cluster: EmbeddedCluster,
                                                             fail_on_data_loss: bool) -> None:
    topic = f"retention-{str(fail_on_data_loss).lower()}"
    cluster.create_topic(topic, 1, 3, {"segment.bytes": 3000, "retention.bytes": 6000})  # a segment per batch
    for _ in range(10):  # one batch per send, so that segments roll between them
        produce(cluster, topic, numbered(1, 20, prefix="x" * 100))
    log_start = remove_start_by_retention(cluster, topic)
    assert 0 < log_start < 200
    sink = Collected()
    frame = reader(spark, cluster.bootstrap_servers, subscribe=topic, startingOffsets=f'{{"{topic}": {{"0": 0}}}}',
                   failOnDataLoss=fail_on_data_loss).load()
    with tempfile.TemporaryDirectory() as checkpoint:
        query = start(frame, sink, checkpoint, availableNow=True)
        if fail_on_data_loss:
            with pytest.raises(Exception, match=f"Offsets 0 to {log_start - 1} of {topic}-0 are gone"):
                query.awaitTermination(120)
            assert sink.rows == []
        else:
            assert query.awaitTermination(120)
            assert sink.offsets_by_partition() == {TopicPartition(topic, 0): list(range(log_start, 200))}


def test_batch_read_with_ending_offsets_and_by_timestamp(spark: Any, cluster: EmbeddedCluster) -> None:
    cluster.create_topic("batch", 2, 3)
    base = 1_700_000_000_000
    produce(cluster, "batch", [(p, None if i % 5 == 0 else b"k%d" % i, None if i == 3 else b"v%d" % i,
                                base + 1000 * i, [("trace", b"t%d" % i)] if i % 2 else [])
                               for p in range(2) for i in range(20)])
    servers = cluster.bootstrap_servers
    by_offsets = reader(spark, servers, streaming=False, subscribe="batch",
                        startingOffsets='{"batch": {"0": 5, "1": -2}}', endingOffsets='{"batch": {"0": 10, "1": -1}}')
    rows = by_offsets.load().collect()
    assert sorted((row.partition, row.offset) for row in rows) == \
        [(0, offset) for offset in range(5, 10)] + [(1, offset) for offset in range(20)]
    by_time = reader(spark, servers, streaming=False, subscribe="batch", includeHeaders=True,
                     startingTimestamp=str(base + 2500),
                     endingOffsetsByTimestamp=f'{{"batch": {{"0": {base + 6000}, "1": {base + 99_000}}}}}')
    rows = by_time.load().orderBy("partition", "offset").collect()
    assert [(row.partition, row.offset) for row in rows] == \
        [(0, offset) for offset in range(3, 6)] + [(1, offset) for offset in range(3, 20)]
    for row in rows:
        i = row.offset
        assert int(row.timestamp.timestamp() * 1000) == base + 1000 * i and row.timestampType == 0
        assert row.key == (None if i % 5 == 0 else b"k%d" % i) and row.value == (None if i == 3 else b"v%d" % i)
        # a record without headers has null headers, as in Spark's Kafka source, not an empty array
        assert ([(h.key, bytes(h.value)) for h in row.headers] if i % 2 else row.headers) == \
            ([("trace", b"t%d" % i)] if i % 2 else None)


def test_a_batch_read_with_nothing_to_read_is_an_empty_frame(spark: Any, cluster: EmbeddedCluster) -> None:
    """Planning no range, Spark hands read() one stand-in partition, which failed an assertion: an empty topic, a
    pattern matching none yet, starting offsets at the end. Spark's Kafka source answers an empty frame."""
    cluster.create_topic("empty", 2, 3)
    cluster.create_topic("full", 1, 3)
    produce(cluster, "full", numbered(1, 5))
    servers = cluster.bootstrap_servers
    for options in ({"subscribe": "empty"}, {"subscribePattern": "nothing-.*"},
                    {"subscribe": "full", "startingOffsets": '{"full": {"0": 5}}'}):
        assert reader(spark, servers, streaming=False, **options).load().collect() == []


def test_the_kafka_bootstrap_servers_serve_the_connector_too(spark: Any, cluster: EmbeddedCluster) -> None:
    """`kafkalite serve` prints "Kafka bootstrap servers" and the option is `kafka.bootstrap.servers`, so a pipeline
    moving from Spark's Kafka source is likely handed the KAFKA listener's ports: they serve kafkalite's own
    protocol too. `load()` failed there: "the cluster cannot be reached (... closed the connection)"."""
    cluster.create_topic("kafka-ports", 2, 3)
    produce(cluster, "kafka-ports", numbered(2, 10))
    rows = reader(spark, cluster.kafka_bootstrap_servers, streaming=False, subscribe="kafka-ports").load().collect()
    assert sorted((row.partition, row.offset, row.value) for row in rows) == sorted(
        (i % 2, i // 2, f"{i % 2}:{i}".encode()) for i in range(10))


def test_timestamp_type_is_1_on_a_log_append_time_topic(spark: Any, cluster: EmbeddedCluster) -> None:
    """As Spark's Kafka source: timestampType 1 and the leader's append time on a LogAppendTime topic."""
    cluster.create_topic("appended", 1, 3, {"message.timestamp.type": "LogAppendTime"})
    before = time.time()
    produce(cluster, "appended", [(0, None, b"v%d" % i, 1_000, ()) for i in range(3)])
    rows = reader(spark, cluster.bootstrap_servers, streaming=False, subscribe="appended").load().collect()
    assert [row.timestampType for row in rows] == [1, 1, 1]
    assert all(before - 1 <= row.timestamp.timestamp() <= time.time() + 1 for row in rows)


def test_min_partitions_splits_ranges_without_gaps(spark: Any, cluster: EmbeddedCluster) -> None:
    cluster.create_topic("split", 2, 3)
    produce(cluster, "split", numbered(2, 1000))
    frame = reader(spark, cluster.bootstrap_servers, streaming=False, subscribe="split", minPartitions=7).load()
    assert frame.rdd.getNumPartitions() >= 7
    assert sorted((row.partition, row.offset) for row in frame.select("partition", "offset").collect()) == \
        [(p, offset) for p in range(2) for offset in range(500)]


def test_spark_kafka_source_options_without_a_meaning_here_are_accepted(spark: Any, cluster: EmbeddedCluster) -> None:
    """A pipeline moving from Spark's Kafka source keeps its group and retry options; maxRecordsPerPartition cuts
    each Kafka partition into Spark partitions of at most that many records."""
    cluster.create_topic("moved", 2, 3)
    produce(cluster, "moved", numbered(2, 1000))
    frame = reader(spark, cluster.bootstrap_servers, streaming=False, subscribe="moved", maxRecordsPerPartition=200,
                   groupIdPrefix="pipeline", **{"kafka.group.id": "pipeline-1", "fetchOffset.numRetries": "5",
                                                "fetchOffset.retryIntervalMs": "100",
                                                "kafkaConsumer.pollTimeoutMs": "30000"}).load()
    assert frame.rdd.getNumPartitions() == 6  # 500 records per Kafka partition: 167, 166 and 167
    assert sorted((row.partition, row.offset) for row in frame.select("partition", "offset").collect()) == \
        [(p, offset) for p in range(2) for offset in range(500)]
