"""The command line against a real cluster's TCP listeners; errors are one line and a non-zero exit."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from kafkalite.cli import main
from kafkalite.embedded import EmbeddedCluster


@pytest.fixture(scope="module")
def cluster():
    with EmbeddedCluster(brokers=3) as running:
        yield running


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_version_and_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.startswith("kafkalite ")
    assert run(capsys)[0] == 0


def test_topics_produce_consume_describe(cluster: EmbeddedCluster, capsys: pytest.CaptureFixture[str],
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    server = ["--bootstrap-server", cluster.bootstrap_servers]
    code, out, _ = run(capsys, "topics", "create", "cli-orders", "--partitions", "2", "--replication-factor", "3",
                       *server)
    assert code == 0 and "created topic cli-orders" in out
    code, out, _ = run(capsys, "topics", "list", *server)
    assert "cli-orders" in out.split()
    monkeypatch.setattr(sys, "stdin", io.StringIO("a:one\nb:two\na:three\n"))
    code, _, err = run(capsys, "produce", "cli-orders", "--key-separator", ":", *server)
    assert code == 0 and "produced 3 records" in err
    code, out, _ = run(capsys, "consume", "cli-orders", "--from-beginning", "--max", "3", *server)
    assert code == 0 and sorted(out.split()) == ["one", "three", "two"]
    code, out, _ = run(capsys, "topics", "describe", "cli-orders", *server)
    assert code == 0 and "cli-orders" in out
    code, out, _ = run(capsys, "describe", "--json", *server)
    described = json.loads(out)
    assert described["controller"] in (1, 2, 3)
    assert sorted(b["node_id"] for b in described["brokers"]) == [1, 2, 3]
    partitions = described["topics"]["cli-orders"]
    assert sum(p["high_watermark"] for p in partitions) == 3
    assert all(sorted(p["isr"]) == [1, 2, 3] for p in partitions)
    code, out, _ = run(capsys, "describe", *server)
    assert code == 0 and "Brokers" in out


@pytest.mark.parametrize(("argv", "message"), [
    (["topics", "create", "bad name", "--partitions", "1"], "INVALID_TOPIC_EXCEPTION"),
    (["topics", "create", "zero", "--partitions", "0"], "INVALID_PARTITIONS"),
    (["topics", "describe", "missing"], "UNKNOWN_TOPIC_OR_PARTITION"),
    (["topics", "create"], "needs a topic name"),
])
def test_errors_are_one_line(cluster: EmbeddedCluster, capsys: pytest.CaptureFixture[str], argv: list[str],
                             message: str) -> None:
    code, _, err = run(capsys, *argv, "--bootstrap-server", cluster.bootstrap_servers)
    assert code == 1
    assert err.count("\n") == 1 and message in err and "Traceback" not in err


def test_missing_or_unreachable_bootstrap_server(capsys: pytest.CaptureFixture[str],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KAFKALITE_BOOTSTRAP_SERVER", raising=False)
    code, _, err = run(capsys, "topics", "list")
    assert code == 1 and "--bootstrap-server is required" in err
    code, _, err = run(capsys, "topics", "list", "--bootstrap-server", "127.0.0.1:1", "--api-timeout", "0.5")
    assert code == 1 and err.count("\n") == 1 and "Traceback" not in err


def test_serve_prints_bootstrap_servers_and_stops_on_ctrl_c() -> None:
    process = subprocess.Popen([sys.executable, "-m", "kafkalite", "serve", "--brokers", "1"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env={**os.environ, "COLUMNS": "120"})
    try:
        first = process.stdout.readline()
        assert first.startswith("bootstrap servers: 127.0.0.1:")
        deadline = time.monotonic() + 30
        while "Ctrl-C" not in process.stdout.readline():
            assert time.monotonic() < deadline
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=30) == 0
    finally:
        process.kill()
