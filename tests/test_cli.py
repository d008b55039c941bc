"""The command line against a real cluster's TCP listeners; errors are one line and a non-zero exit."""

from __future__ import annotations

import io
import json
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator

import msgpack
import pytest

from kafkalite.cli import main
from kafkalite.common.records import Record, RecordBatch, _checksum
from kafkalite.common.types import TopicPartition
from kafkalite.embedded import EmbeddedCluster

QUICK = ["--api-timeout", "0.5"]  # for commands expected to fail after retrying


@pytest.fixture(scope="module")
def cluster() -> Iterator[EmbeddedCluster]:
    with EmbeddedCluster(brokers=3) as running:
        yield running


@pytest.fixture
def server(cluster: EmbeddedCluster) -> list[str]:
    return ["--bootstrap-server", cluster.bootstrap_servers]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_version_and_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.startswith("kafkalite ")
    code, out, _ = run(capsys)
    assert code == 0 and "serve" in out and "consume" in out


def test_topics_produce_consume_describe(cluster: EmbeddedCluster, server: list[str],
                                         capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    code, out, _ = run(capsys, "topics", "create", "cli-orders", "--partitions", "2", "--replication-factor", "3",
                       "--config", "retention.ms=60000", *server)
    assert code == 0 and "created topic cli-orders" in out
    code, out, _ = run(capsys, "topics", "list", *server)
    assert "cli-orders" in out.split()
    monkeypatch.setattr(sys, "stdin", io.StringIO("a:one\nb:two\na:three\n"))
    code, _, err = run(capsys, "produce", "cli-orders", "--key-separator", ":", *server)
    assert code == 0 and "produced 3 records" in err
    code, out, _ = run(capsys, "consume", "cli-orders", "--from-beginning", "--max", "3", *server)
    assert code == 0 and sorted(out.split()) == ["one", "three", "two"]
    code, out, _ = run(capsys, "consume", "cli-orders", "--timeout", "0.2", *server)
    assert code == 0 and out == ""  # from the end: nothing new arrived before the idle timeout
    code, out, _ = run(capsys, "topics", "describe", "cli-orders", *server)
    assert code == 0 and "cli-orders" in out and "retention.ms=60000" in out
    assert f"topic id: {cluster.topic_id('cli-orders')}" in out
    code, out, _ = run(capsys, "describe", "--json", *server)
    described = json.loads(out)
    assert described["controller"] in (1, 2, 3)
    assert sorted(b["node_id"] for b in described["brokers"]) == [1, 2, 3]
    partitions = described["topics"]["cli-orders"]
    assert sum(p["high_watermark"] for p in partitions) == 3
    assert all(sorted(p["isr"]) == [1, 2, 3] for p in partitions)
    code, out, _ = run(capsys, "describe", *server)
    assert code == 0 and "Brokers" in out and "cli-orders" in out
    code, out, _ = run(capsys, "topics", "delete", "cli-orders", *server)
    assert code == 0 and "deleted topic cli-orders" in out
    assert "cli-orders" not in run(capsys, "topics", "list", *server)[1].split()


def test_bootstrap_server_from_the_environment(cluster: EmbeddedCluster, capsys: pytest.CaptureFixture[str],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAFKALITE_BOOTSTRAP_SERVER", cluster.bootstrap_servers)
    code, out, _ = run(capsys, "describe", "--json")
    assert code == 0 and json.loads(out)["controller"] in (1, 2, 3)


@pytest.mark.parametrize(("argv", "message"), [
    (["topics", "create", "bad name", "--partitions", "1"], "INVALID_TOPIC_EXCEPTION"),
    (["topics", "create", "zero", "--partitions", "0"], "INVALID_PARTITIONS"),
    (["topics", "create", "big", "--partitions", "1", "--replication-factor", "4"], "INVALID_REPLICATION_FACTOR"),
    (["topics", "create", "conf", "--config", "min.insync.replicas=abc"], "INVALID_CONFIG"),
    (["topics", "describe", "missing"], "UNKNOWN_TOPIC_OR_PARTITION"),
    (["topics", "create"], "needs a topic name"),
    (["consume", "missing", "--timeout", "0.1"], "UNKNOWN_TOPIC_OR_PARTITION"),
    (["consume", "orders", "--max", "-3"], "argument --max: expected a whole number of at least 1, got '-3'"),
    (["produce", "bad name", *QUICK], "INVALID_TOPIC_EXCEPTION"),  # a missing topic is created, as in Kafka
])
def test_errors_are_one_line(server: list[str], capsys: pytest.CaptureFixture[str],
                             monkeypatch: pytest.MonkeyPatch, argv: list[str], message: str) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO("a record\n"))
    code, _, err = run(capsys, *argv, *server)
    assert code == 1
    assert err.count("\n") == 1 and err.startswith("kafkalite: error: ") and message in err


def test_missing_or_unreachable_bootstrap_server(capsys: pytest.CaptureFixture[str],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KAFKALITE_BOOTSTRAP_SERVER", raising=False)
    code, _, err = run(capsys, "topics", "list")
    assert code == 1 and "--bootstrap-server is required" in err
    code, _, err = run(capsys, "topics", "list", "--bootstrap-server", "127.0.0.1:1", *QUICK)
    assert code == 1 and err.count("\n") == 1 and "cannot connect to 127.0.0.1:1" in err
    code, _, err = run(capsys, "describe", "--bootstrap-server", "no-port-here")
    assert code == 1 and err == "kafkalite: error: bootstrap server 'no-port-here' is not host:port\n"


@pytest.mark.parametrize(("argv", "message"), [
    (["topics", "rename", "x"], "argument action: invalid choice: 'rename'"),
    (["topics", "create", "x", "--partitions", "two"], "argument --partitions: invalid int value: 'two'"),
    (["serve", "--config", "no-equals-sign"], "expected key=value, got 'no-equals-sign'"),
    (["no-such-command"], "invalid choice: 'no-such-command'"),
    (["produce"], "the following arguments are required: topic"),
    (["demo", "--records", "-5"], "argument --records: expected a whole number of at least 1, got '-5'"),
])
def test_bad_arguments_are_one_line_and_status_1(capsys: pytest.CaptureFixture[str], argv: list[str],
                                                 message: str) -> None:
    """As the README promises for every error: the line that says what is wrong, not argparse's usage block."""
    code, out, err = run(capsys, *argv)
    assert code == 1 and out == ""
    assert err.count("\n") == 1 and err.startswith("kafkalite: error: ") and message in err
    assert f"(see kafkalite {argv[0]} --help)" in err or "(see kafkalite --help)" in err


def test_serve_refuses_a_bad_cluster_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    handler = signal.getsignal(signal.SIGINT)  # not always Python's own: a SparkSession in the run installs one
    code, _, err = run(capsys, "serve", "--brokers", "1", "--config", "min.insync.replicas=many")
    assert code == 1 and err.count("\n") == 1 and "min.insync.replicas" in err
    assert signal.getsignal(signal.SIGINT) is handler


class Served:
    """`kafkalite serve` in a subprocess, its output read by a thread so that every read has a deadline.

    `output="gone"`: its reader goes away before the first line (as `| head -0`, or a harness that closes the
    pipe); `output="closed"`: it starts without standard output at all (`>&-`). Either way nothing is read.
    """

    def __init__(self, *argv: str, output: str = "read") -> None:
        command = [sys.executable, "-m", "kafkalite", "serve", *argv]
        if output == "closed":
            command = ["/bin/sh", "-c", 'exec "$@" >&-', "sh", *command]
        self.process = subprocess.Popen(command, stdout=None if output == "closed" else subprocess.PIPE,
                                        stderr=subprocess.PIPE, text=True, env={**os.environ, "COLUMNS": "120"})
        self.lines: queue.Queue[str | None] = queue.Queue()  # None: the output ended
        if output == "read":
            threading.Thread(target=self._read, daemon=True).start()
        else:
            if self.process.stdout is not None:
                self.process.stdout.close()
            self.lines.put(None)

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def read_until(self, text: str, timeout: float = 30) -> list[str]:
        """Lines up to and including the first containing `text`; fails the test after `timeout`."""
        deadline = time.monotonic() + timeout
        seen: list[str] = []
        while not seen or text not in seen[-1]:
            try:
                line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                line = None
            if line is None:
                self.process.kill()
                assert self.process.stderr is not None
                pytest.fail(f"no {text!r} from kafkalite serve; output: {''.join(seen)}{self.process.stderr.read()}")
            seen.append(line)
        return seen

    def interrupt(self, sig: int = signal.SIGINT) -> int:
        self.process.send_signal(sig)
        return self.process.wait(timeout=30)

    def wait_until_listening(self, port: int, timeout: float = 30) -> None:
        """Returns once `port` takes connections; fails the test if serve exits first or `timeout` passes. For a
        serve whose output is not read: its port, chosen before, is the only sign that it is up."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=timeout).close()
                return
            except ConnectionRefusedError:
                try:
                    code = self.process.wait(timeout=0.05)
                except subprocess.TimeoutExpired:
                    if time.monotonic() > deadline:
                        pytest.fail(f"kafkalite serve did not listen on port {port} within {timeout} s")
                    continue
                assert self.process.stderr is not None
                pytest.fail(f"kafkalite serve exited with status {code} before listening on port {port}; "
                            f"stderr: {self.process.stderr.read()!r}")


@pytest.fixture
def serve() -> Iterator[Callable[..., Served]]:
    started: list[Served] = []

    def start(*argv: str, output: str = "read") -> Served:
        served = Served(*argv, output=output)
        started.append(served)
        return served

    yield start
    for served in started:
        served.process.kill()
        served.process.wait()


def test_serve_prints_bootstrap_servers_and_stops_on_ctrl_c(serve: Callable[..., Served],
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    served = serve("--brokers", "1")
    first, kafka = served.read_until("Kafka bootstrap servers")
    assert first.startswith("bootstrap servers: 127.0.0.1:") and kafka.startswith("Kafka bootstrap servers: 127.0.0.1:")
    bootstrap = first.split(": ", 1)[1].strip()
    [cluster_id] = served.read_until("cluster id")
    assert len(cluster_id.split(": ", 1)[1].strip()) == 22  # what Kafka clients see in Metadata and DescribeCluster
    table = "".join(served.read_until("Ctrl-C"))
    assert "NATIVE port" in table and "KAFKA port" in table  # which port is for which clients
    assert table_rows(table) == [["1", "127.0.0.1", bootstrap.rsplit(":", 1)[1], kafka.strip().rsplit(":", 1)[1],
                                  "", "yes"]]
    assert run(capsys, "topics", "create", "served", "--partitions", "1", "--bootstrap-server", bootstrap)[0] == 0
    assert served.interrupt() == 0
    served.read_until("stopped")


def test_serve_with_a_control_endpoint_takes_faults_over_http(serve: Callable[..., Served]) -> None:
    """`kafkalite serve --control-port 0` prints the endpoint's URL; a test in any language kills a broker and sets
    a request fault there, and Ctrl-C still stops everything."""
    import json
    import urllib.request

    served = serve("--brokers", "2", "--control-port", "0", "--config", "min.insync.replicas=1")
    url = served.read_until("control: ")[-1].split(": ", 1)[1].strip()
    assert url.startswith("http://127.0.0.1:")

    def post(path: str, body: object = None) -> object:
        data = None if body is None else json.dumps(body).encode()
        with urllib.request.urlopen(urllib.request.Request(url + path, data=data, method="POST"), timeout=30) as r:
            return json.loads(r.read())

    assert post("/brokers/2/kill") == {"broker": 2, "live_brokers": [1]}
    assert post("/faults", {"api": "Metadata", "delay": 0.1})["active"] is True
    with urllib.request.urlopen(url + "/cluster", timeout=30) as response:
        assert json.loads(response.read())["live_brokers"] == [1]
    served.read_until("Ctrl-C")
    assert served.interrupt() == 0


@pytest.mark.parametrize(("output", "stop"), [("gone", signal.SIGINT), ("closed", signal.SIGTERM)])
def test_serve_without_a_reader_of_its_output_serves_until_stopped(serve: Callable[..., Served], output: str,
                                                                   stop: int) -> None:
    """`kafkalite serve | grep -m1 "Kafka bootstrap"`, a harness that reads the bootstrap line and closes the pipe,
    `kafkalite serve >&-`: clients go on using the cluster. It used to stop at its next line of output (status 1,
    not a word on stderr) or, without standard output, end with "'NoneType' object has no attribute 'flush'".
    Here the reader is gone before the first line, so that every line serve prints meets a broken pipe."""
    import urllib.request

    port = free_port_pair()
    served = serve("--brokers", "2", "--control-port", str(port), "--config", "min.insync.replicas=1", output=output)
    served.wait_until_listening(port)
    kill = urllib.request.Request(f"http://127.0.0.1:{port}/brokers/2/kill", method="POST")
    with urllib.request.urlopen(kill, timeout=30) as response:
        assert json.loads(response.read()) == {"broker": 2, "live_brokers": [1]}
    code = served.interrupt(stop)
    assert served.process.stderr is not None
    assert (code, served.process.stderr.read()) == (0, "")


def test_serve_refuses_a_control_port_in_use_in_one_line(serve: Callable[..., Served]) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        served = serve("--brokers", "1", "--control-port", str(port))
        assert served.process.wait(timeout=30) == 1
    assert served.lines.get(timeout=30) is None  # nothing printed: no bootstrap servers of a cluster that stopped
    err = served.process.stderr.read()
    assert err.count("\n") == 1 and f"--control-port {port}: cannot listen there" in err


@pytest.mark.parametrize("option", ["--port", "--kafka-port"])
def test_serve_refuses_a_broker_port_in_use_in_one_line_naming_the_ports(serve: Callable[..., Served],
                                                                         option: str) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        served = serve("--brokers", "1", option, str(port))
        assert served.process.wait(timeout=30) == 1
    assert served.lines.get(timeout=30) is None
    err = served.process.stderr.read()
    assert err.count("\n") == 1 and f"cannot listen on the ports asked for ({option} {port} to {port})" in err


def free_port_pair() -> int:
    """A port P such that P and P+1 are both free right now."""
    for _ in range(50):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        if port >= 65535:
            continue
        with socket.socket() as first, socket.socket() as second:
            try:
                first.bind(("127.0.0.1", port))
                second.bind(("127.0.0.1", port + 1))
            except OSError:
                continue
        return port
    pytest.fail("no two consecutive free ports")


def test_serve_on_fixed_ports(serve: Callable[..., Served]) -> None:
    port = free_port_pair()
    served = serve("--brokers", "2", "--port", str(port), "--config", "min.insync.replicas=1")
    assert served.read_until("bootstrap servers")[0].strip() == \
        f"bootstrap servers: 127.0.0.1:{port},127.0.0.1:{port + 1}"
    served.read_until("Ctrl-C")
    assert served.interrupt() == 0


@pytest.mark.parametrize(("argv", "message"), [
    (["--port", "70000"], "argument --port: expected a port from 1 to 65535 (or 0 for free ports), got '70000'"),
    (["--port", "-1"], "expected a port from 1 to 65535"),
    (["--port", "65535", "--brokers", "3"], "--port 65535 with 3 brokers would need ports up to 65537; "
                                             "the highest is 65535"),
    (["--brokers", "0"], "argument --brokers: expected a whole number from 1 to 200, got '0'"),
    (["--brokers", "70000"], "argument --brokers: expected a whole number from 1 to 200, got '70000'"),
    (["--control-port", "http"], "argument --control-port: expected a port from 1 to 65535"),
    (["--config", "listeners=KAFKA://127.0.0.1:29092"], "--config listeners: serve sets each broker's listeners; "
                                                         "choose their ports with --port and --kafka-port"),
    (["--config", "broker.id=7"], "--config broker.id: serve numbers its brokers 1..N (N from --brokers)"),
    (["--config", "num.partitions=99999999999999"], "Invalid value '99999999999999' for configuration "
                                                    "num.partitions: Not a number of type INT"),
    (["--config", "message.max.bytes=99999999999"], "message.max.bytes: Not a number of type INT"),
    (["--config", "log.retention.ms=9223372036854775808"], "log.retention.ms: Not a number of type LONG"),
])
def test_serve_refuses_what_it_cannot_serve_in_one_line(serve: Callable[..., Served], argv: list[str],
                                                        message: str) -> None:
    """Each used to serve, in a process that would be serving still: --port 70000 on port 4464, and 65535 with three
    brokers wrapped around to ports 0 and 1, somewhere else than asked; listeners and broker.id, which serve sets
    itself, silently ignored; integers past Kafka's INT or LONG, after which every topic created with them failed.
    --brokers 70000 was said to need ports up to 69999, though without --port each broker takes a free one."""
    served = serve(*argv)
    assert served.process.wait(timeout=30) == 1
    assert served.lines.get(timeout=30) is None  # no output at all
    err = served.process.stderr.read()
    assert err.count("\n") == 1 and message in err


def test_output_cut_short_by_its_reader_ends_quietly(cluster: EmbeddedCluster) -> None:
    """`kafkalite demo | head -3`: the reader goes away, the command stops without a traceback or an error line.
    The reader here is gone before the first line, so every command meets the broken pipe on its first write."""
    cluster.create_topic("cut-short", 1, 1)
    cluster.produce("cut-short", 0, [Record(None, b"one"), Record(None, b"two")])
    server = ["--bootstrap-server", cluster.bootstrap_servers]
    for argv in (["demo", "--records", "30"], ["topics", "list", *server], ["describe", "--json", *server],
                 ["describe", *server], ["consume", "cut-short", "--from-beginning", "--max", "2", *server]):
        process = subprocess.Popen([sys.executable, "-m", "kafkalite", *argv], stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True)
        assert process.stdout is not None and process.stderr is not None
        process.stdout.close()
        assert process.wait(timeout=60) == 1, argv
        assert process.stderr.read() == "", argv


def table_rows(out: str) -> list[list[str]]:
    """The cells of each body row of the tables rich drew in `out`."""
    return [[cell.strip() for cell in line.strip("│ \n").split("│")] for line in out.splitlines()
            if line.startswith("│")]


def test_topics_describe_shows_each_high_watermark(server: list[str], cluster: EmbeddedCluster,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    cluster.create_topic("watermarks", 2, 3)
    cluster.produce("watermarks", 0, [Record(None, b"a"), Record(None, b"b"), Record(None, b"c")])
    code, out, _ = run(capsys, "topics", "describe", "watermarks", *server)
    assert code == 0
    assert [(row[0], row[-1]) for row in table_rows(out)] == [("0", "3"), ("1", "0")]


def test_describe_shows_a_partition_without_a_leader_as_offline(capsys: pytest.CaptureFixture[str]) -> None:
    """The moment someone runs `describe` is when something is wrong: one partition's trouble must not fail it.
    One leader crashed a moment ago (the controller has not noticed: its session has not expired), another broker
    shut down and left its only-replica partition without a leader; the third partition is fine."""
    with EmbeddedCluster(brokers=3, config={"zookeeper.session.timeout.ms": 60_000}) as cluster:
        cluster.create_topic("solo", 3, 1)
        leaders = {cluster.leader_for("solo", p): p for p in range(3)}
        crashed, stopped = [b for b in cluster.broker_ids if b != cluster.controller_id]
        healthy = cluster.controller_id
        cluster.produce("solo", leaders[healthy], [Record(None, b"a"), Record(None, b"b")])
        cluster.kill_broker(crashed)
        cluster.shutdown_broker(stopped)
        offline = TopicPartition("solo", leaders[stopped])
        cluster.wait_until(lambda: cluster.broker(healthy).metadata_cache.get_partition_info(offline).leader == -1,
                           timeout=10, what="the stopped broker's partition offline in the metadata")
        server = ["--bootstrap-server", cluster.bootstrap_servers, "--api-timeout", "0.5"]
        code, out, err = run(capsys, "describe", "--json", *server)
        assert (code, err) == (0, "")
        partitions = {p["partition"]: p for p in json.loads(out)["topics"]["solo"]}
        assert (partitions[leaders[stopped]]["offline"], partitions[leaders[stopped]]["high_watermark"]) == \
            (True, None)
        assert (partitions[leaders[crashed]]["offline"], partitions[leaders[crashed]]["high_watermark"]) == \
            (False, None)  # its leader did not answer
        assert (partitions[leaders[healthy]]["offline"], partitions[leaders[healthy]]["high_watermark"]) == (False, 2)
        code, out, _ = run(capsys, "describe", *server)
        assert code == 0
        cells = {row[0]: (row[1], row[-1]) for row in table_rows(out) if len(row) == 6}
        assert cells[str(leaders[stopped])] == ("none", "offline")
        assert cells[str(leaders[crashed])] == (str(crashed), "no answer")
        assert cells[str(leaders[healthy])] == (str(healthy), "2")


def test_consume_one_partition_from_an_offset_with_keys_and_offsets(server: list[str], cluster: EmbeddedCluster,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    cluster.create_topic("positions", 2, 3)
    cluster.produce("positions", 1, [Record(b"k0", b"v0"), Record(b"k1", b"v1"), Record(None, b"v2")])
    cluster.produce("positions", 0, [Record(b"other", b"elsewhere")])
    code, out, _ = run(capsys, "consume", "positions", "--partition", "1", "--offset", "1", "--print-key",
                       "--print-offset", "--max", "2", *server)
    assert code == 0 and out == "1:1\tk1\tv1\n1:2\t\tv2\n"  # a null key prints empty
    code, out, _ = run(capsys, "consume", "positions", "--partition", "0", "--from-beginning", "--print-key",
                       "--max", "1", *server)
    assert code == 0 and out == "other\telsewhere\n"
    for argv, message in [
        (["--partition", "2", "--timeout", "0.1"], "topic positions has no partition 2 (its partitions: 0-1)"),
        (["--offset", "1", "--timeout", "0.1"], "--offset needs --partition: topic positions has 2 partitions"),
        (["--skip-undecodable", "--timeout", "0.1"], "--skip-undecodable needs --partition"),
        (["--partition", "1", "--offset", "99", "--timeout", "5"], "OFFSET_OUT_OF_RANGE"),
        (["--offset", "1", "--from-beginning"], "argument --from-beginning: not allowed with argument --offset"),
        (["--offset", "-1"], "expected an offset (a whole number from 0), got '-1'"),
    ]:
        code, out, err = run(capsys, "consume", "positions", *argv, *server)
        assert code == 1 and out == "" and err.count("\n") == 1 and message in err, (argv, err)


def test_consume_goes_on_past_undecodable_records_when_asked(server: list[str], cluster: EmbeddedCluster,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    """A batch whose records cannot be decoded (the leader refuses one from a client: here it is damage in the
    leader's log) stops the consumer until it is sought past, which the command line could not do."""
    cluster.create_topic("damaged", 1, 1)
    cluster.produce("damaged", 0, [Record(None, b"before")])
    payload = msgpack.packb([[0, None], [0, None]])  # two record rows of two fields instead of four
    damaged = RecordBatch(0, -1, -1, -1, -1, 2, 0, 0, 0, _checksum(payload, 0, 2, 0, 0, -1, -1, -1), payload)

    def damage_leader_log() -> None:
        leader = cluster.cluster.broker(cluster.leader_for("damaged", 0)).replica_manager.get_partition(
            TopicPartition("damaged", 0))
        leader.log.append_as_leader(damaged, leader.leader_epoch)
        leader.maybe_increment_leader_hw()  # a leader without followers moves its HW on its own appends

    cluster.call(damage_leader_log)
    cluster.produce("damaged", 0, [Record(None, b"after")])
    code, out, err = run(capsys, "consume", "damaged", "--from-beginning", "--timeout", "5", *server)
    assert code == 1 and out == "before\n"
    assert err.count("\n") == 1 and "CORRUPT_MESSAGE: damaged-0" in err and "--skip-undecodable" in err
    code, out, err = run(capsys, "consume", "damaged", "--from-beginning", "--skip-undecodable", "--max", "2", *server)
    assert code == 0 and out == "before\nafter\n"
    assert err == ("kafkalite: skipped record 1 of damaged-0: it cannot be decoded\n"
                   "kafkalite: skipped record 2 of damaged-0: it cannot be decoded\n")


@pytest.mark.parametrize(("command", "explained"), [
    ("topics", ["default -1: the brokers' num.partitions", "default -1: the brokers' default.replication.factor"]),
    ("produce", ["all (or -1): wait until every in-sync replica has each record", "(default all)"]),
    ("consume", ["(default: at the end, printing only new records)", "(default: no limit)",
                 "(default: wait until Ctrl-C)"]),
    ("serve", ["(default 3)", "default 0: a free port each", "NATIVE listener, kafkalite's own protocol",
               "KAFKA listener, Apache Kafka's protocol", "not listeners or broker.id"]),
    ("demo", ["(default 1000)", "(default: random)"]),
])
def test_help_says_what_minus_one_and_the_defaults_mean(capsys: pytest.CaptureFixture[str], command: str,
                                                       explained: list[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main([command, "--help"])
    assert exit_info.value.code == 0
    text = " ".join(capsys.readouterr().out.split())  # argparse wraps lines
    assert all(phrase in text for phrase in explained), text


def test_groups_consume_describe_reset_and_delete(server: list[str], capsys: pytest.CaptureFixture[str],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    run(capsys, "topics", "create", "cli-grouped", "--partitions", "2", "--replication-factor", "3", *server)
    monkeypatch.setattr(sys, "stdin", io.StringIO("".join(f"{i}\n" for i in range(10))))
    run(capsys, "produce", "cli-grouped", *server)
    code, out, _ = run(capsys, "consume", "cli-grouped", "--group", "cli-g", "--from-beginning", "--max", "10",
                       *server)
    assert code == 0 and sorted(out.split(), key=int) == [str(i) for i in range(10)]
    code, out, _ = run(capsys, "consume", "cli-grouped", "--group", "cli-g", "--timeout", "0.5", *server)
    assert code == 0 and out == ""  # the group's committed offsets: nothing is read twice
    code, out, _ = run(capsys, "groups", "list", *server)
    assert code == 0 and "cli-g\tEmpty" in out
    code, out, _ = run(capsys, "groups", "describe", "cli-g", *server)
    assert code == 0 and "lag" in out and "Empty" in out
    code, out, _ = run(capsys, "groups", "reset-offsets", "cli-g", "--to-earliest", *server)
    assert code == 0 and "dry run" in out
    code, out, _ = run(capsys, "groups", "reset-offsets", "cli-g", "--to-earliest", "--execute", *server)
    assert code == 0 and "new offsets" in out
    code, out, _ = run(capsys, "consume", "cli-grouped", "--group", "cli-g", "--max", "10", *server)
    assert code == 0 and len(out.split()) == 10  # everything again, from the reset offsets
    code, _, err = run(capsys, "groups", "reset-offsets", "cli-g", *server)
    assert code == 1 and "--to-earliest" in err
    code, out, _ = run(capsys, "groups", "delete", "cli-g", *server)
    assert code == 0 and "deleted group cli-g" in out
    code, _, err = run(capsys, "groups", "delete", "cli-g", *server)
    assert code == 1 and "GROUP_ID_NOT_FOUND" in err


def test_groups_reset_offsets_to_an_offset_a_shift_a_datetime_or_the_end(
        server: list[str], cluster: EmbeddedCluster, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    run(capsys, "topics", "create", "cli-reset", "--partitions", "1", "--replication-factor", "3", *server)
    monkeypatch.setattr(sys, "stdin", io.StringIO("".join(f"{i}\n" for i in range(6))))
    run(capsys, "produce", "cli-reset", *server)

    def committed() -> int:
        with cluster.admin() as admin:
            [offset] = admin.list_group_offsets("cli-r").values()
        return int(offset.committed)

    reset = ("groups", "reset-offsets", "cli-r")
    code, _, err = run(capsys, *reset, "--to-earliest", *server)
    assert code == 1 and "group cli-r has no offsets; name the topics with --topic" in err
    for how, expected in [(["--to-offset", "4"], 4), (["--shift-by", "-3"], 1),
                          (["--to-datetime", "2000-01-01T00:00:00"], 0),  # naive: UTC; every record is later
                          (["--to-datetime", "2100-01-01T00:00:00+02:00"], 6),  # no record that late: the end
                          (["--shift-by", "-10"], 0),  # not below the log start
                          (["--to-latest"], 6)]:
        code, out, _ = run(capsys, *reset, "--topic", "cli-reset", *how, "--execute", *server)
        assert code == 0 and "new offsets" in out, how
        assert committed() == expected, how
    code, out, _ = run(capsys, *reset, "--topic", "cli-reset", "--to-offset", "2", *server)
    assert code == 0 and "dry run" in out and committed() == 6
    code, _, err = run(capsys, *reset, "--topic", "cli-reset", "--to-datetime", "yesterday", *server)
    assert code == 1 and "--to-datetime 'yesterday' is not an ISO date and time" in err



def test_groups_describe_shows_each_owned_partitions_end_and_the_lag_unclamped_as_kafka_does(
        server: list[str], cluster: EmbeddedCluster, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """kafka-consumer-groups --describe (ConsumerGroupCommand): a partition a member owns but the group has no
    offset for shows its log end offset, with current offset and lag "-"; the lag is the log end offset minus the
    committed offset, negative for a committed offset past the end."""
    monkeypatch.setenv("COLUMNS", "200")  # one line a row
    cluster.create_topic("cli-lag", 3, 3)
    with cluster.producer() as producer:
        for i in range(30):
            producer.send("cli-lag", b"%d" % i, partition=i % 3)
    with cluster.admin() as admin:
        admin.alter_group_offsets("cli-lag-g", {TopicPartition("cli-lag", 0): 4, TopicPartition("cli-lag", 1): 25})
    with cluster.consumer(group_id="cli-lag-g", enable_auto_commit=False) as consumer:
        consumer.subscribe(["cli-lag"])
        deadline = time.monotonic() + 20
        while len(consumer.assignment()) < 3 and time.monotonic() < deadline:
            consumer.poll(0.1)
        code, out, _ = run(capsys, "groups", "describe", "cli-lag-g", *server)
        # a live group is refused as such, as Kafka's tool refuses it, not for the offsets it has not committed yet
        with cluster.consumer(group_id="cli-live-g") as live:
            live.subscribe(["cli-lag"])
            while not live.assignment() and time.monotonic() < deadline:
                live.poll(0.1)
            refused, _, err = run(capsys, "groups", "reset-offsets", "cli-live-g", "--to-earliest", *server)
    assert refused == 1 and "NON_EMPTY_GROUP" in err and "stop its consumers first" in err, err
    rows = [[cell.strip() for cell in line.split("│")[1:-1]] for line in out.splitlines() if "│ cli-lag " in line]
    assert code == 0 and [row[:5] for row in rows] == [["cli-lag", "0", "4", "10", "6"],
                                                        ["cli-lag", "1", "25", "10", "-15"],
                                                        ["cli-lag", "2", "-", "10", "-"]], out
    assert all(row[5] != "-" for row in rows), out  # each owned by the one member
