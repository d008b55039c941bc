"""PySpark connector: kafkalite as a Spark Structured Streaming source and sink, format name `kafkalite`.

    from kafkalite.spark import KafkaliteDataSource
    spark.dataSource.register(KafkaliteDataSource)
    df = (spark.readStream.format("kafkalite").option("kafka.bootstrap.servers", servers)
          .option("subscribe", "orders").load())

The options, columns and guarantees are those of Spark's Kafka source (spark-sql-kafka-0-10): a pipeline moves
between the two by changing the format name and the bootstrap servers. Needs the `spark` extra
(`pip install 'kafkalite[spark]'`: pyspark 4.2 or newer, pyarrow). This package talks to the cluster only
through kafkalite's client, over TCP, since Spark runs its readers and writers in processes of its own.
"""

from kafkalite.spark.options import OptionError
from kafkalite.spark.planning import DataLossError
from kafkalite.spark.source import KafkaliteDataSource

__all__ = ["DataLossError", "KafkaliteDataSource", "OptionError"]
