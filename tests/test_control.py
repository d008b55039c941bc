"""The HTTP control endpoint (kafkalite.control) of a served cluster: each path does what `Cluster` does, Kafka's
own clients meet the faults it sets, and bad input gets its status and a JSON message while the endpoint and the
cluster keep serving.

Real clock and real sockets, as a test in another language would use it: the cluster runs in `EmbeddedCluster`'s
thread, and every wait polls a condition against a deadline.
"""

from __future__ import annotations

import http.client
import json
import socket
import struct
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from kafkalite.common.records import Record
from kafkalite.control import MAX_BODY_BYTES
from kafkalite.embedded import EmbeddedCluster

confluent_kafka = pytest.importorskip("confluent_kafka")

DEADLINE = 30.0


@pytest.fixture(scope="module")
def cluster() -> Iterator[EmbeddedCluster]:
    with EmbeddedCluster(3, {"zookeeper.session.timeout.ms": 1000, "replica.lag.time.max.ms": 1000}) as embedded:
        embedded.create_topic("orders", 1, 3)
        yield embedded


@pytest.fixture(scope="module")
def port(cluster: EmbeddedCluster) -> int:
    url = cluster.serve_control()
    assert url.startswith("http://127.0.0.1:")
    return int(url.rsplit(":", 1)[1])


@pytest.fixture
def call(port: int, cluster: EmbeddedCluster) -> Iterator[Callable[..., tuple[int, Any]]]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=DEADLINE)

    def request(method: str, path: str, body: Any = None, raw: bytes | None = None) -> tuple[int, Any]:
        data = raw if raw is not None else None if body is None else json.dumps(body).encode()
        connection.request(method, path, body=data, headers={"Content-Type": "application/json"})
        response = connection.getresponse()
        assert response.getheader("Content-Type") == "application/json"
        return response.status, json.loads(response.read())

    yield request
    connection.close()
    cluster.end_faults()


def wait_for(condition: Callable[[], Any], what: str) -> Any:
    deadline = time.monotonic() + DEADLINE
    while not (result := condition()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)
    return result


def test_the_cluster_is_described(call: Callable[..., tuple[int, Any]], cluster: EmbeddedCluster) -> None:
    status, described = call("GET", "/cluster")
    assert status == 200
    assert described["brokers"] == described["live_brokers"] == [1, 2, 3]
    assert described["cluster_id"] == cluster.cluster_id and len(described["cluster_id"]) == 22
    assert described["controller"] == cluster.controller_id
    assert described["kafka_bootstrap_servers"] == cluster.kafka_bootstrap_servers
    assert described["request_faults"] == []


def test_a_request_fault_set_over_http_reaches_a_kafka_client(call: Callable[..., tuple[int, Any]],
                                                              cluster: EmbeddedCluster) -> None:
    status, fault = call("POST", "/faults", {"api": "Produce", "error": 29, "topics": ["orders"],
                                             "message": "set over HTTP"})
    assert status == 201
    assert fault | {"id": 0} == {"id": 0, "api": "Produce", "error": "TOPIC_AUTHORIZATION_FAILED", "error_code": 29,
                                 "drop": None, "delay": 0.0, "brokers": None, "topics": ["orders"], "client_id": None, "times": 1,
                                 "cluster_traffic": False, "hits": 0, "active": True}
    producer = confluent_kafka.Producer({"bootstrap.servers": cluster.kafka_bootstrap_servers})
    reports: list[Any] = []
    producer.produce("orders", b"refused", partition=0, on_delivery=lambda error, message: reports.append(error))
    assert producer.flush(DEADLINE) == 0
    assert reports[0].code() == confluent_kafka.KafkaError.TOPIC_AUTHORIZATION_FAILED
    status, faults = call("GET", "/faults")
    assert (status, faults) == (200, [])  # spent
    assert call("DELETE", f"/faults/{fault['id']}") == (404, {"error": f"no active request fault {fault['id']}"})


def test_faults_are_listed_removed_and_cleared(call: Callable[..., tuple[int, Any]]) -> None:
    first = call("POST", "/faults", {"api": "Fetch", "delay": 0.5, "times": None})[1]
    second = call("POST", "/faults", {"api": "JoinGroup", "drop": "request", "brokers": [2]})[1]
    assert [f["id"] for f in call("GET", "/faults")[1]] == [first["id"], second["id"]]
    status, removed = call("DELETE", f"/faults/{first['id']}")
    assert status == 200 and removed["active"] is False
    assert [f["id"] for f in call("GET", "/faults")[1]] == [second["id"]]
    assert call("DELETE", "/faults") == (200, [])
    assert call("GET", "/faults") == (200, [])


def test_brokers_are_killed_restarted_paused_and_shut_down_over_http(call: Callable[..., tuple[int, Any]],
                                                                    cluster: EmbeddedCluster) -> None:
    leader = cluster.leader_for("orders", 0)
    assert call("POST", f"/brokers/{leader}/kill") == (200, {"broker": leader, "live_brokers": [
        b for b in (1, 2, 3) if b != leader]})
    wait_for(lambda: cluster.leader_for("orders", 0) not in (leader, -1), "a new leader")
    assert call("POST", f"/brokers/{leader}/kill")[0] == 409
    assert call("POST", f"/brokers/{leader}/restart") == (200, {"broker": leader, "live_brokers": [1, 2, 3]})
    assert call("POST", f"/brokers/{leader}/restart") == (409, {
        "error": f"broker {leader} is running: kill or shut it down first"})
    wait_for(lambda: set(cluster.partition_state("orders", 0).isr) == {1, 2, 3}, "the ISR to fill again")
    other = cluster.leader_for("orders", 0)
    status, shut = call("POST", f"/brokers/{other}/shutdown")
    assert status == 200 and shut["clean"] is True
    assert cluster.leader_for("orders", 0) != other  # leadership moved before the answer came
    assert call("POST", f"/brokers/{other}/restart")[0] == 200
    assert call("POST", "/brokers/1/pause")[0] == 200
    assert call("POST", "/brokers/1/resume")[0] == 200
    assert call("POST", "/brokers/1/expire-session")[0] == 200


def test_a_restart_onto_a_taken_port_is_refused_and_the_cluster_serves_on(call: Callable[..., tuple[int, Any]],
                                                                         cluster: EmbeddedCluster) -> None:
    """Another process took a port of a killed broker: the restart is a 409 naming the port, where it was a 500
    saying "ExceptionGroup: Exceptions from Trio nursery" (and a traceback on stderr). The broker stays stopped,
    the others serve on, and once the port is free a restart works."""
    port = next(ep.port for ep in cluster.broker(3).endpoints if ep.listener == "KAFKA")
    assert call("POST", "/brokers/3/kill")[0] == 200
    with socket.socket() as taken:
        taken.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # past the connections the broker left behind
        taken.bind(("127.0.0.1", port))
        taken.listen()
        status, answer = call("POST", "/brokers/3/restart")
        assert status == 409 and f"127.0.0.1:{port}" in answer["error"], answer
        assert "Address already in use" in answer["error"], answer
        assert call("GET", "/cluster")[1]["live_brokers"] == [1, 2]
    assert call("POST", "/brokers/3/restart") == (200, {"broker": 3, "live_brokers": [1, 2, 3]})


def test_the_network_is_partitioned_and_healed(call: Callable[..., tuple[int, Any]], cluster: EmbeddedCluster) -> None:
    assert call("POST", "/network/partition", {"groups": [[1], [2, 3, "coordination"]]})[0] == 200
    assert not cluster.transport.link_up(1, 2)
    assert call("POST", "/network/heal") == (200, {})
    assert cluster.transport.link_up(1, 2)


def test_a_restart_cut_off_from_the_coordination_service_is_a_409_and_the_broker_is_not_listed_live(
        call: Callable[..., tuple[int, Any]], cluster: EmbeddedCluster) -> None:
    """The restart never answered, while /cluster listed the broker live with its old port."""
    address = next(ep.address for ep in cluster.broker(3).endpoints if ep.listener == "NATIVE")
    assert call("POST", "/network/partition", {"groups": [[3], [1, 2, "coordination"]]})[0] == 200
    assert call("POST", "/brokers/3/kill")[0] == 200
    status, answer = call("POST", "/brokers/3/restart")
    assert status == 409 and "broker 3 cannot reach the coordination service" in answer["error"], answer
    assert "POST /network/heal" in answer["error"], answer
    described = call("GET", "/cluster")[1]
    assert described["live_brokers"] == [1, 2] and address not in described["bootstrap_servers"]
    assert call("POST", "/network/heal")[0] == 200
    assert call("POST", "/brokers/3/restart") == (200, {"broker": 3, "live_brokers": [1, 2, 3]})


def test_end_faults_ends_every_fault(call: Callable[..., tuple[int, Any]], cluster: EmbeddedCluster) -> None:
    call("POST", "/faults", {"api": "Produce", "error": "NOT_LEADER_OR_FOLLOWER", "times": None})
    call("POST", "/brokers/3/kill")
    call("POST", "/network/partition", {"groups": [[1], [2]]})
    assert call("POST", "/end-faults") == (200, {"live_brokers": [1, 2, 3]})
    assert call("GET", "/faults") == (200, []) and cluster.transport.link_up(1, 2)
    wait_for(lambda: set(cluster.partition_state("orders", 0).isr) == {1, 2, 3}, "the ISR to fill again")
    assert cluster.produce("orders", 0, [Record(None, b"after")]) >= 0


@pytest.mark.parametrize(("method", "path", "body", "status", "words"), [
    ("GET", "/nowhere", None, 404, "no such path /nowhere"),
    ("PUT", "/faults", None, 405, "/faults takes DELETE, GET, POST, not PUT"),
    ("POST", "/cluster", None, 405, "/cluster takes GET"),
    ("POST", "/brokers/9/kill", None, 404, "no broker 9"),
    ("POST", "/brokers/1/explode", None, 404, "no such path"),
    ("POST", "/faults", {"error": "NOT_LEADER_OR_FOLLOWER"}, 400, 'needs its "api"'),
    ("POST", "/faults", {"api": "Produc"}, 400, "no API 'Produc'"),
    ("POST", "/faults", {"api": "Produce", "error": "NOPE"}, 400, "no Kafka error 'NOPE'"),
    ("POST", "/faults", {"api": "Produce", "surprise": 1}, 400, "unknown field 'surprise'"),
    ("POST", "/faults", {"api": "Produce"}, 400, "does nothing"),
    ("POST", "/faults", {"api": "Produce", "delay": 1, "times": True}, 400, "times must be"),
    ("POST", "/faults", {"api": "Produce", "delay": 1, "cluster_traffic": "yes"}, 400, "must be True or False"),
    ("POST", "/faults", {"api": "Produce", "error": 6, "message": ["x"]}, 400, "message must be a str"),
    ("POST", "/faults", ["Produce"], 400, "expected a JSON object"),
    ("POST", "/faults", "Produce", 400, "expected a JSON object"),
    ("POST", "/network/partition", {"groups": [1, 2]}, 400, "lists of broker ids"),
    ("POST", "/network/partition", {"groups": [[1], [9]]}, 400, "no node 9"),
    ("POST", "/network/partition", {"groups": [[1]]}, 400, "which cuts nothing: to isolate a node"),
    ("POST", "/network/partition", {"groups": []}, 400, "which cuts nothing"),
    ("DELETE", "/faults/12345", None, 404, "no active request fault 12345"),
])
def test_bad_requests_get_their_status_and_a_message(call: Callable[..., tuple[int, Any]], method: str, path: str,
                                                     body: Any, status: int, words: str) -> None:
    got, answer = call(method, path, body)
    assert got == status and words in answer["error"], answer
    assert call("GET", "/cluster")[0] == 200  # the same connection goes on


def test_a_body_that_is_not_json_or_too_large_is_refused(call: Callable[..., tuple[int, Any]], port: int) -> None:
    status, answer = call("POST", "/faults", raw=b"{not json")
    assert status == 400 and "not JSON" in answer["error"]
    status, answer = call("POST", "/faults", raw=b"\xff\xfe")
    assert status == 400 and "not JSON" in answer["error"]
    status, answer = call("POST", "/faults", raw=b"[" * 30_000 + b"]" * 30_000)  # nested past the parser's stack
    assert status == 400 and "not JSON" in answer["error"]
    status, answer = call("POST", "/faults", raw=b'{"api": "Produce", "delay": NaN}')
    assert status == 400 and "delay must be" in answer["error"]
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=DEADLINE)
    connection.request("POST", "/faults", body=b"x" * (MAX_BODY_BYTES + 1))
    response = connection.getresponse()
    assert response.status == 413 and "over" in json.loads(response.read())["error"]
    connection.close()


@pytest.mark.parametrize("port", [-1, 65536, "8080", True])
def test_a_control_port_that_cannot_be_is_refused_at_once(cluster: EmbeddedCluster, port: Any) -> None:
    with pytest.raises(ValueError, match="port must be 0"):
        cluster.serve_control(port)


def test_clients_that_reset_their_connection_while_refused_cost_nothing_but_their_connection(
        port: int, call: Callable[..., tuple[int, Any]], cluster: EmbeddedCluster) -> None:
    """A port scanner or a TLS client: bytes that are not HTTP, then a reset (RST) before the 400 goes out. Writing
    the refusal fails; that failure once escaped the connection's handler and stopped the whole cluster."""
    for _ in range(50):
        with socket.create_connection(("127.0.0.1", port), timeout=DEADLINE) as raw:
            raw.sendall(b"\x16\x03\x01 not http\r\n\r\n")
            raw.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close with a reset
    assert call("GET", "/cluster")[0] == 200
    assert cluster.live_broker_ids == [1, 2, 3]
    assert cluster.produce("orders", 0, [Record(None, b"after the resets")]) >= 0


@pytest.mark.parametrize("garbage", [
    b"\x00\xff\x13\x37 not http at all\r\n\r\n",
    b"POST /faults HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
    b"GET /cluster HTTP/1.1\r\nno colon in this header\r\n\r\n",
    b"GET /cluster HTTP/1.1\r\nHost: x\r\nContent-Length: banana\r\n\r\n",
    b"GET /cluster HTTP/1.1\r\n" + b"X-Long: " + b"a" * 100_000 + b"\r\n\r\n",
    b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",  # a TLS ClientHello's first bytes
])
def test_hostile_bytes_get_a_400_and_a_closed_connection_and_the_endpoint_serves_on(
        garbage: bytes, port: int, call: Callable[..., tuple[int, Any]]) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=DEADLINE) as raw:
        try:
            raw.sendall(garbage)
            raw.shutdown(socket.SHUT_WR)
        except OSError:
            pass  # closed on us mid-send: refused all the same
        answer = b""
        try:
            while chunk := raw.recv(65536):
                answer += chunk
        except ConnectionResetError:  # closed with our unread bytes in its buffer: the answer may be lost
            pass
    assert answer == b"" or answer.startswith((b"HTTP/1.1 400 ", b"HTTP/1.1 431 ", b"HTTP/1.1 505 ")), answer[:200]
    assert call("GET", "/cluster")[0] == 200
