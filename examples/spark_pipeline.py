"""A Spark pipeline against an embedded kafkalite cluster: orders in, per-customer totals per minute out.

    pip install -e '.[spark]'      # pyspark and pyarrow; Spark needs Java 17
    python examples/spark_pipeline.py

A producer writes orders (JSON, keyed by customer) to the `orders` topic; a streaming query reads them through the
`kafkalite` format, sums the amounts per customer in one-minute event-time windows, and writes each updated total to
the `order-totals` topic through the same format; a consumer prints them. Swap the format name for "kafka" and the
bootstrap servers for a real cluster's, and the query runs against Apache Kafka unchanged.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from typing import Any

from kafkalite.embedded import EmbeddedCluster
from kafkalite.spark import KafkaliteDataSource

START_MS = 1_700_000_000_000  # event times: three minutes from here
ORDERS = [(customer, amount, START_MS + 20_000 * i)
          for i, (customer, amount) in enumerate([("ada", 30), ("bob", 12), ("ada", 5), ("cy", 40), ("bob", 8),
                                                  ("ada", 10), ("cy", 1), ("bob", 100), ("ada", 2)])]


def produce_orders(cluster: EmbeddedCluster) -> None:
    with cluster.producer() as producer:
        for customer, amount, event_ms in ORDERS:
            producer.send("orders", json.dumps({"customer": customer, "amount": amount}).encode(), customer.encode(),
                          timestamp=event_ms)


def run(spark: Any, cluster: EmbeddedCluster) -> dict[tuple[str, str], int]:
    """Run the pipeline once over what `orders` holds; the totals it wrote, by (window start, customer)."""
    from pyspark.sql import functions as F

    spark.dataSource.register(KafkaliteDataSource)
    cluster.create_topic("orders", 3, 3)
    cluster.create_topic("order-totals", 1, 3)
    produce_orders(cluster)
    orders = (spark.readStream.format("kafkalite")
              .option("kafka.bootstrap.servers", cluster.bootstrap_servers)
              .option("subscribe", "orders").option("startingOffsets", "earliest").load()
              .select(F.col("timestamp"), F.from_json(F.col("value").cast("string"),
                                                      "customer string, amount long").alias("order")))
    totals = (orders.withWatermark("timestamp", "1 minute")
              .groupBy(F.window("timestamp", "1 minute"), F.col("order.customer").alias("customer"))
              .agg(F.sum("order.amount").alias("total"))
              .select(F.col("customer").cast("binary").alias("key"),
                      F.to_json(F.struct(F.col("window.start").cast("string").alias("window"), "customer", "total"))
                      .alias("value")))
    def write_totals(batch: Any, batch_id: int) -> None:
        """Each micro-batch's updated totals, through the sink (a Python streaming sink takes append mode only,
        and a running total is an update)."""
        batch.write.format("kafkalite").option("kafka.bootstrap.servers", cluster.bootstrap_servers) \
            .option("topic", "order-totals").mode("append").save()

    with tempfile.TemporaryDirectory() as checkpoint:
        query = (totals.writeStream.outputMode("update").foreachBatch(write_totals)
                 .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
        query.awaitTermination()
    return read_totals(cluster)


def read_totals(cluster: EmbeddedCluster) -> dict[tuple[str, str], int]:
    """The latest total per (window, customer) on `order-totals`, printed as they are read.

    Reads up to the end offset the topic had once the query finished, so every total the query wrote is read
    however slow a poll is: an empty poll says nothing arrived in time, not that nothing is left.
    """
    totals_partition = ("order-totals", 0)
    latest: dict[tuple[str, str], int] = {}
    with cluster.consumer(**{"auto.offset.reset": "earliest"}) as consumer:
        consumer.assign([totals_partition])
        consumer.seek_to_end([totals_partition])
        end = consumer.position(totals_partition)
        consumer.seek_to_beginning([totals_partition])
        while consumer.position(totals_partition) < end:
            for record in consumer.poll(1):
                total = json.loads(record.value)
                print(f"{total['window']}  {total['customer']:<4} {total['total']:>5}")
                latest[(total["window"], total["customer"])] = total["total"]
    return latest


def main() -> None:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[2]").appName("kafkalite-pipeline")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2").config("spark.sql.session.timeZone", "UTC").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    with EmbeddedCluster(brokers=3) as cluster:
        run(spark, cluster)
    spark.stop()


if __name__ == "__main__":
    main()
