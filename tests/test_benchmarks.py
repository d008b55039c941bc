"""The benchmarks run end to end at a size that takes a second or two, and refuse careless arguments.

A benchmark runs by hand, now and then, and what it calls can change under it: `spark_read_path.py --profile`
stopped working when the Spark reader began to take a kept consumer, and nothing ran it until a session used it.
Here every benchmark's path runs as a user starts it (`python benchmarks/NAME.py ...`, in a process of its own),
except the two too long for a test run: `scale.py` (its real-clock figures sleep half a minute) and
`spark_source.py` (it starts a Spark session); their arguments are checked like the others'.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _run(script: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    return subprocess.run([sys.executable, str(ROOT / "benchmarks" / script), *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)


def _needs(module: str) -> pytest.MarkDecorator:
    return pytest.mark.skipif(importlib.util.find_spec(module) is None, reason=f"needs {module} (an extra)")


@pytest.mark.parametrize(("script", "args", "printed"), [
    ("startup.py", ["--runs", "2"], "-> 8-partition RF=3 topic online everywhere"),
    ("embedded.py", ["--runs", "2"], "start to ready"),
    ("log_append.py", ["--batches", "50"], "append rec/s"),
    ("replication.py", ["--seconds", "0.1"], "new leader accepting writes"),
    ("validation.py", ["--records", "500", "--rounds", "1"], "ratio"),
    ("topic_count.py", ["--topics", "40"], "create one topic: first topics"),
    ("failover_gc.py", ["--partitions", "50", "--failovers", "1", "--shutdowns", "1"], "preferred election"),
    ("groups.py", ["--records", "10001", "--rounds", "1", "--heartbeat-ms", "50"], "group / assign"),
    ("reassignment.py", ["--sizes", "4,12", "--rounds", "1"], "move 12 partitions: "),
    pytest.param("kafka_wire.py", ["--records", "1234", "--rounds", "1"], "KAFKA/NATIVE consume",
                 marks=_needs("confluent_kafka")),
    # mockafka-py, its peer, is in the bench extra: without it the benchmark says so and measures its own side
    ("clients.py", ["--records", "500", "--tcp-records", "500", "--rounds", "1"], "in-process"),
    pytest.param("spark_read_path.py", ["--rows", "600", "--rounds", "2", "--batch-size", "2048", "--profile",
                                        "{tmp}"], "median over 1 rounds, 600 rows", marks=pytest.mark.spark),
])
def test_a_benchmark_runs_at_a_small_size_and_prints_its_figures(script: str, args: list[str], printed: str,
                                                                   tmp_path: Path) -> None:
    done = _run(script, *(arg.format(tmp=tmp_path) for arg in args))
    assert done.returncode == 0, done.stderr[-3000:]
    assert printed in done.stdout
    if "--profile" in args:  # the last round's profiles: both readers' and the brokers'
        assert len(list(tmp_path.glob("reader-*.prof"))) == 2 and (tmp_path / "brokers.prof").is_file()


@pytest.mark.parametrize(("script", "args", "refusal"), [
    ("startup.py", ["--runs", "0"], "argument --runs: must be at least 1, got 0"),
    ("embedded.py", ["--runs", "many"], "argument --runs: not a whole number: 'many'"),
    ("log_append.py", ["--segment-bytes", "1000"], "argument --segment-bytes: must hold a batch of"),
    ("replication.py", ["--seconds", "-1"], "argument --seconds: must be a positive number of seconds, got -1"),
    ("validation.py", ["--rounds", "0"], "argument --rounds: must be at least 1, got 0"),
    ("topic_count.py", ["--topics", "39"], "argument --topics: must be at least 40, got 39"),
    ("failover_gc.py", ["--brokers", "2"], "argument --brokers: must be at least 3, got 2"),
    ("groups.py", ["--records", "600"], "argument --records: must be at least 10,001, got 600"),
    pytest.param("kafka_wire.py", ["--records", "0"], "argument --records: must be at least 1, got 0",
                 marks=_needs("confluent_kafka")),
    ("clients.py", ["--rounds", "0"], "argument --rounds: must be at least 1, got 0"),
    ("reassignment.py", ["--sizes", "many"], "argument --sizes: a comma-separated list of partition counts: not a "
                                             "whole number: 'many'"),
    ("scale.py", ["--sizes", "100,0"], "argument --sizes: a comma-separated list of partition counts: must be at "
                                       "least 1, got 0"),
    ("scale.py", ["--keyed-rounds", "-2"], "argument --keyed-rounds: must be at least 1, got -2"),
    pytest.param("spark_read_path.py", ["--rows", "5"], "argument --rows: must be at least 6, got 5",
                 marks=pytest.mark.spark),
    pytest.param("spark_source.py", ["--rows", "0"], "argument --rows: must be at least 6, got 0",
                 marks=pytest.mark.spark),
])
def test_a_benchmark_refuses_a_careless_argument_before_it_starts(script: str, args: list[str],
                                                                   refusal: str) -> None:
    done = _run(script, *args)
    assert done.returncode == 2, (done.stdout[-2000:], done.stderr[-2000:])
    assert f"{script}: error: {refusal}" in done.stderr
    assert done.stdout == ""
