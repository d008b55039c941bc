"""The connector as a sink: rows written once each, where their columns say, and failures that fail the job."""

from __future__ import annotations

import math
import re
import tempfile
import time
from datetime import datetime, timezone
from typing import Any

import pytest

from kafkalite.embedded import EmbeddedCluster

from .conftest import numbered, produce, reader

pytestmark = pytest.mark.spark


def read_back(cluster: EmbeddedCluster, topic: str, count: int) -> list[Any]:
    """Every record of `topic`, through a consumer of its own (not the connector under test)."""
    consumer = cluster.consumer(**{"auto.offset.reset": "earliest"})
    partitions = len(cluster.describe_topic(topic))
    consumer.assign([(topic, p) for p in range(partitions)])
    records: list[Any] = []
    while len(records) < count:
        polled = consumer.poll(10)
        assert polled, f"only {len(records)} of {count} records arrived"
        records += polled
    consumer.close()
    return records


def test_batch_write_round_trip(spark: Any, cluster: EmbeddedCluster) -> None:
    cluster.create_topic("sink-a", 3, 3)
    cluster.create_topic("sink-b", 1, 3)
    rows = [(f"value-{i}", f"key-{i}".encode(), "sink-a" if i % 2 else "sink-b", i % 3 if i % 2 else 0,
             [("n", str(i).encode())]) for i in range(200)]
    frame = spark.createDataFrame(rows, "value string, key binary, topic string, partition int, "
                                        "headers array<struct<key: string, value: binary>>")
    frame.write.format("kafkalite").option("kafka.bootstrap.servers", cluster.bootstrap_servers) \
        .mode("append").save()
    written = read_back(cluster, "sink-a", 100) + read_back(cluster, "sink-b", 100)
    assert sorted((r.topic, r.partition, r.value, r.key, r.headers) for r in written) == sorted(
        (topic, partition, value.encode(), key, (("n", headers[0][1]),))
        for value, key, topic, partition, headers in rows)


def test_timestamp_column_sets_record_timestamps_and_the_topic_option_ignores_the_topic_column(
        spark: Any, cluster: EmbeddedCluster) -> None:
    """As Spark's Kafka sink (SPARK-50160): a timestamp column (a timestamp, or a double counting seconds) is each
    record's timestamp, a null one the producer's clock; it was ignored, every record stamped with the time of the
    write. With the topic option set, Spark takes the option and never looks at a topic column, which was refused
    here for not being a string."""
    cluster.create_topic("sink-stamped", 1, 3)
    servers = cluster.bootstrap_servers
    before = int(time.time() * 1000)
    frame = spark.createDataFrame([("a", 7, datetime(2001, 2, 3, 4, 5, 6, 789_999, timezone.utc)), ("b", 7, None)],
                                  "value string, topic int, timestamp timestamp")
    frame.write.format("kafkalite").option("kafka.bootstrap.servers", servers).option("topic", "sink-stamped") \
        .mode("append").save()
    doubles = spark.createDataFrame([("c", 981173106.5)], "value string, timestamp double")
    doubles.write.format("kafkalite").option("kafka.bootstrap.servers", servers).option("topic", "sink-stamped") \
        .mode("append").save()
    a, b, c = sorted(read_back(cluster, "sink-stamped", 3), key=lambda record: record.value)
    assert (a.value, a.timestamp) == (b"a", 981173106789) and (c.value, c.timestamp) == (b"c", 981173106500)
    assert b.value == b"b" and before <= b.timestamp <= time.time() * 1000
    strings = spark.createDataFrame([("d", "2001-02-03")], "value string, timestamp string")
    with pytest.raises(Exception, match="kafkalite sink: column timestamp is string; it must be timestamp or double"):
        strings.write.format("kafkalite").option("kafka.bootstrap.servers", servers).option("topic", "sink-stamped") \
            .mode("append").save()
    # Seconds whose microseconds overflow a long: Spark's cast fails (CAST_OVERFLOW). Written as they were, every
    # later read over the record failed with CORRUPT_MESSAGE.
    for seconds in (9.3e12, math.nan):
        huge = spark.createDataFrame([("e", seconds)], "value string, timestamp double")
        with pytest.raises(Exception, match=f"kafkalite sink: a row's timestamp is {seconds} seconds, beyond"):
            huge.write.format("kafkalite").option("kafka.bootstrap.servers", servers) \
                .option("topic", "sink-stamped").mode("append").save()
    consumer = cluster.consumer()
    assert consumer.end_offsets([("sink-stamped", 0)]) == {("sink-stamped", 0): 3}
    consumer.close()


def test_streaming_write_through_the_sink(spark: Any, cluster: EmbeddedCluster) -> None:
    cluster.create_topic("copy-from", 2, 3)
    produce(cluster, "copy-from", numbered(2, 500))
    frame = reader(spark, cluster.bootstrap_servers, subscribe="copy-from", startingOffsets="earliest").load()
    with tempfile.TemporaryDirectory() as checkpoint:
        query = frame.select("key", "value").writeStream.format("kafkalite") \
            .option("kafka.bootstrap.servers", cluster.bootstrap_servers).option("topic", "copy-to") \
            .option("checkpointLocation", checkpoint).trigger(availableNow=True).start()
        assert query.awaitTermination(120)
    copied = read_back(cluster, "copy-to", 500)
    assert sorted(r.value for r in copied) == sorted(value for _, _, value, _, _ in numbered(2, 500))
    assert all(r.key == r.value.split(b":")[1] for r in copied)


def test_a_write_below_min_insync_replicas_fails_the_job(spark: Any, cluster: EmbeddedCluster) -> None:
    cluster.create_topic("too-few-replicas", 1, 2, {"min.insync.replicas": 3})
    frame = spark.createDataFrame([("a",), ("b",)], "value string")
    writer = frame.write.format("kafkalite").option("kafka.bootstrap.servers", cluster.bootstrap_servers) \
        .option("topic", "too-few-replicas").option("kafka.request.timeout.ms", "1000") \
        .option("kafka.delivery.timeout.ms", "1500").mode("append")
    with pytest.raises(Exception, match="NOT_ENOUGH_REPLICAS"):
        writer.save()


def test_overwrite_is_refused_and_a_header_without_a_key_fails_the_job_naming_it(spark: Any,
                                                                                 cluster: EmbeddedCluster) -> None:
    """Overwrite appended, as if the topic had been replaced; Spark's Kafka sink refuses it. A null header key failed
    deep in the producer with a TypeError that named neither the sink nor the column."""
    cluster.create_topic("sink-modes", 1, 3)
    frame = spark.createDataFrame([("a",)], "value string")
    with pytest.raises(Exception, match="save mode Overwrite is not allowed for Kafka, as by Spark's Kafka sink; "
                                         + re.escape('write with mode("append"), the only other mode PySpark')):
        frame.write.format("kafkalite").option("kafka.bootstrap.servers", cluster.bootstrap_servers) \
            .option("topic", "sink-modes").mode("overwrite").save()
    headed = spark.createDataFrame([("a", [(None, b"v")])], "value string, headers array<struct<key: string, "
                                                             "value: binary>>")
    with pytest.raises(Exception, match="a row for topic sink-modes has a header with a null key"):
        headed.write.format("kafkalite").option("kafka.bootstrap.servers", cluster.bootstrap_servers) \
            .option("topic", "sink-modes").mode("append").save()
    assert cluster.high_watermark("sink-modes", 0) == 0  # nothing written either time
