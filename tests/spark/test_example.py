"""examples/spark_pipeline.py runs, on the shared SparkSession, and writes the right totals."""

from __future__ import annotations

import importlib.util
from collections import Counter
from pathlib import Path
from typing import Any

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
    expected: Counter[tuple[int, str]] = Counter()
    for customer, amount, event_ms in example.ORDERS:
        expected[(event_ms // 60_000, customer)] += amount
    assert sorted(totals.values()) == sorted(expected.values()) and len(totals) == len(expected)
    assert {customer for _, customer in totals} == {"ada", "bob", "cy"}
    assert "ada" in capsys.readouterr().out
