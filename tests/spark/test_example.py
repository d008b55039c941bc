"""examples/spark_pipeline.py runs, on the shared SparkSession, and writes every total right."""

from __future__ import annotations

import importlib.util
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from kafkalite.embedded import EmbeddedCluster

pytestmark = pytest.mark.spark

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "spark_pipeline.py"


def test_spark_pipeline_example(spark: Any, capsys: pytest.CaptureFixture[str]) -> None:
    spec = importlib.util.spec_from_file_location("spark_pipeline", EXAMPLE)
    assert spec is not None and spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    with EmbeddedCluster(brokers=3) as cluster:
        totals = example.run(spark, cluster)
    zone = ZoneInfo(spark.conf.get("spark.sql.session.timeZone"))  # the zone Spark writes the window starts in
    expected: Counter[tuple[str, str]] = Counter()
    for customer, amount, event_ms in example.ORDERS:
        window = datetime.fromtimestamp(event_ms // 60_000 * 60, zone).strftime("%Y-%m-%d %H:%M:%S")
        expected[(window, customer)] += amount
    assert len(expected) == 9
    assert totals == dict(expected)
    printed = set(capsys.readouterr().out.splitlines())
    assert {f"{window}  {customer:<4} {total:>5}" for (window, customer), total in expected.items()} <= printed
