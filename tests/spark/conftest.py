"""One SparkSession for the whole test run, and a shared cluster, for the connector's tests.

A SparkSession takes 6 to 12 s to start, so every Spark test shares one (`local[2]`, no UI, two shuffle
partitions). Spark's Python workers are separate processes: they must run this interpreter and import the
kafkalite this test run imports (a checkout, not whatever is installed), so PYTHONPATH is set before the JVM
starts, and Spark binds loopback only. Spark tests wait on the wall clock, by polling query progress against
a deadline.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

import kafkalite
from kafkalite.client import Producer
from kafkalite.embedded import EmbeddedCluster

pyspark_sql = pytest.importorskip("pyspark.sql", reason="the Spark tests need the spark extra: pip install -e '.[spark]'")

Record = tuple[int, bytes | None, bytes | None, int | None, Sequence[tuple[str, bytes | None]]]
"""(partition, key, value, timestamp or None, headers) for `produce`."""


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    package_root = str(Path(kafkalite.__file__).resolve().parents[1])
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")]))
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    os.environ["PYSPARK_PYTHON"] = os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from kafkalite.spark import KafkaliteDataSource

    session = (pyspark_sql.SparkSession.builder.master("local[2]").appName("kafkalite-tests")
               .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
               .config("spark.executorEnv.PYTHONPATH", os.environ["PYTHONPATH"]).getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    session.dataSource.register(KafkaliteDataSource)
    yield session
    session.stop()


@pytest.fixture(scope="session")
def cluster() -> Iterator[EmbeddedCluster]:
    """A 3-broker cluster shared by the tests that only read and write (each uses topics of its own)."""
    with EmbeddedCluster(brokers=3) as embedded:
        yield embedded


def produce(cluster: EmbeddedCluster, topic: str, records: Sequence[Record]) -> None:
    """Write `records` in order with an idempotent acks=all producer in the cluster's loop, and wait for them."""
    async def send_all() -> None:
        async with Producer(cluster.cluster, {"batch.size": 1 << 20}) as producer:
            handles = [await producer.send(topic, value, key, partition, headers, timestamp)
                       for partition, key, value, timestamp, headers in records]
        for handle in handles:
            handle.result()  # a record the cluster refused fails the test here, not as missing rows later

    cluster.call(send_all)


def numbered(partitions: int, count: int, prefix: str = "") -> list[Record]:
    """`count` records spread round-robin over `partitions`, whose values say where they were sent: b"p:i"."""
    return [(i % partitions, str(i).encode(), f"{prefix}{i % partitions}:{i}".encode(), None, ())
            for i in range(count)]


def wait_for(condition: Callable[[], bool], what: str, timeout: float = 120) -> None:
    """Poll `condition` until it holds; fail naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.05)


def reader(spark: Any, servers: str, *, streaming: bool = True, **options: Any) -> Any:
    """`spark.read[Stream].format("kafkalite")` with the bootstrap servers and `options` set."""
    return (spark.readStream if streaming else spark.read).format("kafkalite") \
        .option("kafka.bootstrap.servers", servers).options(**options)
