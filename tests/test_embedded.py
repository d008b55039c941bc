"""EmbeddedCluster from plain synchronous code and from asyncio: the same real cluster, driven from outside Trio.

These run on the real clock (the cluster serves real sockets), so timed behaviour is made quick with small
session and lag timeouts, and every wait polls against a deadline.
"""

from __future__ import annotations

import asyncio
import copy
import itertools
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
import trio

from kafkalite.client import Consumer, NewTopic, TopicPartition
from kafkalite.cluster import COORDINATION
from kafkalite.common.config import InvalidConfigError
from kafkalite.common.errors import InvalidPartitionsError, InvalidTopicError, UnknownTopicOrPartitionError
from kafkalite.common.records import Record
from kafkalite.embedded import EmbeddedCluster, SyncConsumer

TP = TopicPartition("orders", 0)
FAST_FAULTS = {"zookeeper.session.timeout.ms": 300, "replica.lag.time.max.ms": 300, "replica.fetch.wait.max.ms": 300}


def read(consumer: SyncConsumer, count: int, timeout: float = 10) -> list:
    """Poll until `count` records arrived or the deadline passed."""
    records: list = []
    deadline = time.monotonic() + timeout
    while len(records) < count and time.monotonic() < deadline:
        records += consumer.poll(0.2)
    return records


def test_sync_clients_across_a_failover() -> None:
    with EmbeddedCluster(brokers=3, config=FAST_FAULTS) as cluster:
        cluster.create_topic("orders", partitions=1, replication_factor=3, config={"min.insync.replicas": 2})
        assert cluster.controller_id in (1, 2, 3)
        with cluster.producer(acks="all") as producer:
            futures = [producer.send("orders", b"v%d" % i, partition=0) for i in range(20)]
            producer.flush()
            assert all(f.done() for f in futures)
            assert [f.result(timeout=10).offset for f in futures] == list(range(20))
        leader = cluster.leader_for("orders", 0)
        cluster.kill_broker(leader)
        new_leader = cluster.wait_for_leader("orders", 0, not_on=[leader], timeout=10)
        assert new_leader != leader and cluster.wait_for_leaders("orders", timeout=10) == {0: new_leader}
        with cluster.consumer(auto_offset_reset="earliest") as consumer:
            consumer.assign([TP])
            assert [r.value for r in read(consumer, 20)] == [b"v%d" % i for i in range(20)]
            consumer.seek(TP, 18)
            assert consumer.position(TP) == 18
            assert [r.offset for r in read(consumer, 2)] == [18, 19]
            consumer.seek_to_beginning()
            assert next(iter(consumer)).offset == 0
            consumer.seek_to_end()
            assert consumer.position(TP) == 20


def test_a_poll_that_hands_out_records_has_sent_the_next_fetch_when_it_returns() -> None:
    """As Kafka's consumer transmits its prefetches before poll returns, the broker gets the next fetch while the
    application works on the records without yielding to Trio (as the Spark connector converts them to Arrow), not
    only at the application's next await. The application's work here: waiting, without yielding, for the broker
    to receive that fetch (on the cluster's own thread)."""
    with EmbeddedCluster(brokers=1) as cluster:
        cluster.create_topic("orders", partitions=1, replication_factor=1)
        with cluster.producer() as producer:
            for index in range(10):
                producer.send("orders", b"v%d" % index, partition=0)
        fetches = cluster.fail_requests("Fetch", delay=0.001, client_id="reader", times=None)  # counts them
        received, bootstrap = threading.Event(), cluster.bootstrap_servers

        def watch() -> None:
            cluster.wait_until(lambda: fetches.hits >= 2, timeout=10, what="the consumer's second fetch")
            received.set()

        async def read() -> list[bytes]:
            async with Consumer(bootstrap, {"client.id": "reader"}) as consumer:
                consumer.assign([TP])
                consumer.seek(TP, 0)
                records = await consumer.poll(10)
                watcher = threading.Thread(target=watch)
                watcher.start()
                assert received.wait(10), "the next fetch left only once the application yielded"
                watcher.join()
                return [record.value for record in records]

        assert trio.run(read) == [b"v%d" % index for index in range(10)]


def test_closing_a_producer_flushes_it() -> None:
    with EmbeddedCluster(brokers=1) as cluster:
        cluster.create_topic("orders", 1, 1)
        producer = cluster.producer(**{"linger.ms": 60_000})
        future = producer.send("orders", b"lingering", key=b"k", partition=0)
        producer.close()
        assert future.result(timeout=0).offset == 0
        assert [(r.key, r.value) for _, r in cluster.fetch_all("orders", 0)] == [(b"k", b"lingering")]


def test_result_times_out_while_the_leader_is_paused() -> None:
    with EmbeddedCluster(brokers=1) as cluster:
        cluster.create_topic("orders", 1, 1)
        with cluster.producer() as producer:
            assert producer.send("orders", b"on time", partition=0).result(timeout=10).offset == 0
            cluster.pause_broker(1)
            future = producer.send("orders", b"late", partition=0)
            with pytest.raises(TimeoutError):
                future.result(timeout=0.05)
            cluster.resume_broker(1)
            assert future.result(timeout=10).offset == 1
            with pytest.raises(TypeError, match="timeout must be int or float, not str '5'"):
                future.result("5")  # type: ignore[arg-type]
            with pytest.raises(ValueError, match="timeout must be a number of seconds >= 0, not -1"):
                future.result(-1)


def test_admin() -> None:
    with EmbeddedCluster(brokers=2) as cluster, cluster.admin() as admin:
        admin.create_topics([NewTopic("orders", 2, 2)])
        assert [p.partition for p in admin.describe_topics(["orders"])["orders"].partitions] == [0, 1]
        assert sorted(b.node_id for b in admin.describe_cluster().brokers) == [1, 2]
        cluster.produce("orders", 1, [Record(None, b"x"), Record(None, b"y")])
        assert admin.list_offsets({TopicPartition("orders", 1): "latest"})[TopicPartition("orders", 1)].offset == 2
        with pytest.raises(InvalidPartitionsError):
            admin.create_topics([NewTopic("empty", 0, 1)])
        admin.delete_topics(["orders"])
        assert "orders" not in admin.list_topics()


def test_fault_controls() -> None:
    with EmbeddedCluster(brokers=3, config=FAST_FAULTS, seed=3) as cluster:
        cluster.create_topic("orders", 1, 3)

        first = cluster.controller_id
        cluster.expire_session(first)
        cluster.wait_until(lambda: cluster.controller_id not in (None, first), timeout=10, what="a new controller")

        leader = cluster.leader_for("orders", 0)
        others = [b for b in cluster.broker_ids if b != leader]
        cluster.partition_network([leader], [*others, COORDINATION])
        cluster.wait_for_leader("orders", 0, not_on=[leader], timeout=10)
        cluster.heal()
        cluster.wait_until(lambda: set(cluster.partition_state("orders", 0).isr) == {1, 2, 3}, timeout=10,
                           what="the cut-off broker back in the ISR")

        leader = cluster.leader_for("orders", 0)
        cluster.pause_broker(leader)
        cluster.wait_for_leader("orders", 0, not_on=[leader], timeout=10)
        cluster.resume_broker(leader)

        leader = cluster.leader_for("orders", 0)
        assert cluster.shutdown_broker(leader) is True
        assert leader not in cluster.live_broker_ids
        cluster.restart_broker(leader)
        cluster.wait_until(lambda: set(cluster.partition_state("orders", 0).isr) == {1, 2, 3}, timeout=10,
                           what="the restarted broker back in the ISR")
        assert cluster.produce("orders", 0, [Record(None, b"still here")]) >= 0


def test_a_restart_cut_off_from_the_coordination_service_fails_and_an_empty_cut_is_refused() -> None:
    """The blocking restart never returned; partition_network([1]) was taken and cut nothing; interval=0 hung."""
    from kafkalite.cluster import CoordinationTimeoutError

    with EmbeddedCluster(brokers=3, config=FAST_FAULTS, seed=4) as cluster:
        cluster.partition_network([3], [1, 2, COORDINATION])
        cluster.kill_broker(3)
        with pytest.raises(CoordinationTimeoutError, match="broker 3 cannot reach the coordination service"):
            cluster.restart_broker(3)
        assert cluster.live_broker_ids == [1, 2] and len(cluster.bootstrap_servers.split(",")) == 2
        cluster.heal()
        cluster.restart_broker(3)
        assert cluster.live_broker_ids == [1, 2, 3]
        with pytest.raises(ValueError, match="which cuts nothing: to isolate a node give it and everyone else"):
            cluster.partition_network([1])
        with pytest.raises(ValueError, match="interval must be a number of seconds > 0"):
            cluster.wait_until(lambda: False, timeout=1, interval=0)


def test_errors_in_the_loop_are_raised_in_the_caller() -> None:
    with EmbeddedCluster(brokers=1) as cluster:
        with pytest.raises(InvalidTopicError):
            cluster.create_topic("no spaces allowed")
        with pytest.raises(UnknownTopicOrPartitionError):
            cluster.describe_topic("missing")
        with pytest.raises(ValueError, match="no broker 9"):
            cluster.kill_broker(9)
        with pytest.raises(AttributeError):
            cluster.no_such_method  # noqa: B018


def test_a_loop_that_dies_fails_the_next_call_and_close() -> None:
    cluster = EmbeddedCluster(brokers=1).start()

    async def crash() -> None:
        raise OSError("disk on fire")

    cluster.call(lambda: cluster._nursery.start_soon(crash))  # a bug inside the loop, outside any call
    cluster._thread.join(timeout=10)
    with pytest.raises(RuntimeError, match="has stopped"):
        cluster.create_topic("orders")
    with pytest.raises(OSError, match="disk on fire"):
        cluster.close()
    cluster.close()  # reported once


def _waiting_for_nothing(cluster: EmbeddedCluster) -> tuple[Callable[[], Any], threading.Event]:
    inside = threading.Event()
    return (lambda: cluster.wait_until(lambda: inside.set(), timeout=3600)), inside


def _polling(cluster: EmbeddedCluster) -> tuple[Callable[[], Any], threading.Event]:
    cluster.create_topic("t")
    consumer = cluster.consumer(group_id="g")
    inside = threading.Event()  # once the poll has joined the group and waits for records
    consumer.subscribe(["t"], on_assign=lambda partitions: inside.set())
    return (lambda: consumer.poll(3600)), inside


@pytest.mark.parametrize("waiting_call", [_waiting_for_nothing, _polling])
def test_a_call_waiting_in_another_thread_when_the_cluster_closes_says_it_stopped(waiting_call: Any) -> None:
    """Not Trio's Cancelled, which means nothing in a plain thread, nor what the call met as its tasks went with
    the loop (a consumer's "Nursery is closed to new arrivals")."""
    cluster = EmbeddedCluster(brokers=1).start()
    call, inside = waiting_call(cluster)  # `inside` is set in the loop, once the call waits there
    failures: list[BaseException] = []

    def run() -> None:
        try:
            call()
        except BaseException as exc:  # what reaches this thread is the test's subject
            failures.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    assert inside.wait(timeout=30)
    cluster.close()
    thread.join(timeout=30)
    assert [(type(f), str(f)) for f in failures] == [
        (RuntimeError, "the embedded cluster has stopped while the call was running")]


def test_start_failures_and_use_before_start() -> None:
    with pytest.raises(ValueError, match="at least one broker"):
        EmbeddedCluster(brokers=0).start()
    with pytest.raises(InvalidConfigError, match="min.insync.replicas"):
        EmbeddedCluster(brokers=1, config={"min.insync.replicas": "many"}).start()
    idle = EmbeddedCluster(brokers=1)
    with pytest.raises(RuntimeError, match="not running"):
        idle.create_topic("orders")
    idle.close()  # never started: nothing to do
    with idle:
        with pytest.raises(RuntimeError, match="already started"):
            idle.start()


def test_close_joins_the_thread_and_closes_every_socket() -> None:
    others = {t for t in threading.enumerate() if t.name == "kafkalite-cluster"}  # clusters of other fixtures
    cluster = EmbeddedCluster(brokers=2).start()
    ports = [int(server.rsplit(":", 1)[1]) for server in cluster.bootstrap_servers.split(",")]
    assert len(ports) == 2
    for port in ports:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    cluster.close()
    assert not any(t.name == "kafkalite-cluster" and t.is_alive() and t not in others for t in threading.enumerate())
    for port in ports:
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
    cluster.close()  # twice is harmless


def test_usable_from_an_asyncio_program() -> None:
    async def program() -> list[bytes]:
        cluster = await asyncio.to_thread(EmbeddedCluster(brokers=1).start)
        try:
            await asyncio.to_thread(cluster.create_topic, "orders", 1, 1)
            producer = await asyncio.to_thread(cluster.producer)
            future = await asyncio.to_thread(producer.send, "orders", b"from asyncio", partition=0)
            assert (await asyncio.to_thread(future.result, 10)).offset == 0
            await asyncio.to_thread(producer.close)
            rows = await asyncio.to_thread(cluster.fetch_all, "orders", 0)
            return [record.value for _, record in rows]
        finally:
            await asyncio.to_thread(cluster.close)

    assert asyncio.run(program()) == [b"from asyncio"]


def test_calls_from_inside_the_loop_do_not_deadlock() -> None:
    with EmbeddedCluster(brokers=1) as cluster:
        assert cluster.call(lambda: cluster.live_broker_ids) == [1]
        with pytest.raises(RuntimeError, match="is async"):
            cluster.call(lambda: cluster.create_topic("orders"))
        assert cluster.call(trio.current_time) > 0


def test_import_kafkalite_stays_light() -> None:
    """`import kafkalite` (and `kafkalite --version`) must not pay for Trio and the brokers."""
    code = "import sys, kafkalite; print(sorted(m for m in ('trio', 'kafkalite.cluster') if m in sys.modules))"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout == "[]\n"
    assert subprocess.run([sys.executable, "-c", "import kafkalite; print(kafkalite.EmbeddedCluster.__name__)"],
                          capture_output=True, text=True, check=True).stdout == "EmbeddedCluster\n"


_WATCH_THE_CODEC = """
import socket, struct, sys, threading, urllib.request, json
import kafkalite.server.request_faults as faults
class Watch:  # which thread imports the KAFKA listener's codec
    def find_spec(self, name, path=None, target=None):
        if name == "kafkalite.network.kafka.wire":
            print("codec loaded in", threading.current_thread().name)
sys.meta_path.insert(0, Watch())
looked_up = faults._kafkas
def _kafkas(error):
    print("Kafka's error table read in", threading.current_thread().name)
    return looked_up(error)
faults._kafkas = _kafkas
from kafkalite.embedded import EmbeddedCluster
"""

_KAFKA_PYTHON_WHEN_ASKED = _WATCH_THE_CODEC + """
with EmbeddedCluster(brokers=1) as cluster:
    cluster.create_topic("orders")
    with cluster.producer() as producer:
        print(producer.send("orders", b"v").result(10).offset, "kafka" in sys.modules)
    print(cluster.fail_requests("Fetch", 29).error.name)  # one of Kafka's errors kafkalite never answers itself
    cluster.clear_request_faults()
    host, port = cluster.kafka_bootstrap_servers.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as conn:
        body = struct.pack(">hhih", 18, 0, 7, 1) + b"t"  # ApiVersions v0, correlation id 7, client id "t"
        conn.sendall(struct.pack(">i", len(body)) + body)
        print(struct.unpack(">iih", conn.makefile("rb").read(10))[1:])  # (correlation id, error code)
"""

_KAFKA_PYTHON_FOR_THE_CONTROL_ENDPOINT = _WATCH_THE_CODEC + """
with EmbeddedCluster(brokers=1) as cluster:
    url = cluster.serve_control()
    with urllib.request.urlopen(url + "/cluster", timeout=10) as answer:
        print(json.load(answer)["kafka_bootstrap_servers"] == cluster.kafka_bootstrap_servers)
"""

_KAFKA_PYTHON_FOR_THE_KAFKA_LISTENER = _WATCH_THE_CODEC + """
with EmbeddedCluster(brokers=1) as cluster:
    print(cluster.listener_bootstrap_servers("NATIVE") == cluster.bootstrap_servers, "kafka" in sys.modules)
    print(cluster.listener_bootstrap_servers("KAFKA") == cluster.kafka_bootstrap_servers)
"""

_KAFKA_PYTHON_FOR_A_FIXED_PORT = """
import socket, sys
from kafkalite.embedded import EmbeddedCluster
with socket.socket() as free:
    free.bind(("127.0.0.1", 0))
    port = free.getsockname()[1]
with EmbeddedCluster(brokers=1, config={"listeners": f"NATIVE://127.0.0.1:0,KAFKA://127.0.0.1:{port}"}):
    print("kafka.protocol" in sys.modules)
"""


_KAFKA_PYTHON_IN_PROCESS = """
import sys, trio
from kafkalite.cluster import Cluster
async def main():
    async with Cluster(brokers=1) as cluster:
        print("kafka.protocol" in sys.modules, bool(cluster.kafka_bootstrap_servers), "kafka.protocol" in sys.modules)
trio.run(main)
"""


def run_strictly(script: str) -> list[str]:
    """`script`'s output lines, run with DeprecationWarnings as errors, as pytest's `filterwarnings = error` does."""
    done = subprocess.run([sys.executable, "-W", "error::DeprecationWarning", "-c", script], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def test_kafka_python_is_imported_when_a_kafka_client_may_come() -> None:
    """Importing kafka-python imports all of it, a third of what importing kafkalite cost: a cluster serving its
    own clients never pays it. Handing out the KAFKA address loads it before any Kafka client speaks, in the
    caller's thread, not the brokers' loop; so do a fault naming an error only Kafka defines, the control endpoint
    (which hands out the address and takes such faults), and a KAFKA port fixed in advance."""
    assert run_strictly(_KAFKA_PYTHON_WHEN_ASKED) == [
        "0 False", "Kafka's error table read in MainThread", "TOPIC_AUTHORIZATION_FAILED",
        "codec loaded in MainThread", "(7, 0)"]
    assert run_strictly(_KAFKA_PYTHON_FOR_THE_CONTROL_ENDPOINT) == ["codec loaded in MainThread", "True"]
    assert run_strictly(_KAFKA_PYTHON_FOR_THE_KAFKA_LISTENER) == ["True False", "codec loaded in MainThread", "True"]
    assert run_strictly(_KAFKA_PYTHON_FOR_A_FIXED_PORT) == ["True"]
    assert run_strictly(_KAFKA_PYTHON_IN_PROCESS) == ["False True True"]


def test_arguments_of_the_wrong_type_are_refused_where_they_are_given() -> None:
    with pytest.raises(TypeError, match="brokers must be int, not str '3'"):
        EmbeddedCluster(brokers="3")
    with pytest.raises(ValueError, match="broker_configs names broker 4"):
        EmbeddedCluster(brokers=3, broker_configs={4: {"broker.rack": "r4"}})
    with EmbeddedCluster(brokers=1) as cluster:
        with pytest.raises(TypeError, match="broker id must be int, not str '1'"):
            cluster.kill_broker("1")
        with pytest.raises(TypeError, match="topic name must be str, not int 123"):
            cluster.create_topic(123)
        assert cluster.live_broker_ids == [1]


def test_a_sync_consumer_may_commit_in_its_own_rebalance_callbacks() -> None:
    """Kafka's at-least-once pattern (commitSync in onPartitionsRevoked) on the blocking consumer: its callbacks run
    off the cluster's loop, so they may call the consumer they belong to."""
    with EmbeddedCluster(brokers=1, config={"group.initial.rebalance.delay.ms": 0}) as cluster:
        cluster.create_topic("orders", 2, 1)
        with cluster.producer() as producer:
            for index in range(6):
                producer.send("orders", b"v%d" % index, partition=index % 2)
        group = {"group_id": "billing", "auto_offset_reset": "earliest", "enable_auto_commit": False,
                 "session_timeout_ms": 6000, "heartbeat_interval_ms": 500}
        with cluster.consumer(**group) as ada, cluster.consumer(**group) as bob:
            positions_at_assign: list[dict[TopicPartition, int]] = []
            revoked: list[set[TopicPartition]] = []

            def on_revoke(partitions: set[TopicPartition]) -> None:
                ada.commit()
                revoked.append(partitions)

            ada.subscribe(["orders"], on_revoke=on_revoke,
                          on_assign=lambda partitions: positions_at_assign.append(
                              {tp: ada.position(tp) for tp in partitions}))
            assert len(read(ada, 6)) == 6
            bob.subscribe(["orders"])
            deadline = time.monotonic() + 20
            while not (ada.assignment() and bob.assignment()) and time.monotonic() < deadline:
                ada.poll(0.1)
                bob.poll(0.1)
            moved = bob.assignment()
            assert len(moved) == 1 and revoked and moved <= revoked[0]
            assert positions_at_assign[0] == {TopicPartition("orders", p): 0 for p in (0, 1)}
            assert {tp: bob.position(tp) for tp in moved} == {tp: 3 for tp in moved}
        with cluster.admin() as admin:
            assert {tp: o.committed for tp, o in admin.list_group_offsets("billing").items()} == {
                TopicPartition("orders", 0): 3, TopicPartition("orders", 1): 3}


async def test_trio_code_is_told_to_use_the_async_cluster_and_can_close_it() -> None:
    """A Trio test given the blocking cluster (the sync fixture): a blocking call there would stall the test's own
    loop, and Trio refuses it anyway; the error says what to use, a worker thread may call, and close() works."""
    cluster = EmbeddedCluster(brokers=1).start()
    try:
        with pytest.raises(RuntimeError, match="runs a Trio loop: in Trio code use the async `Cluster`"):
            cluster.create_topic("orders", 1, 1)
        with pytest.raises(RuntimeError, match="runs a Trio loop"):
            cluster.bootstrap_servers  # noqa: B018 (a property: the read is the call)
        await trio.to_thread.run_sync(lambda: cluster.create_topic("orders", 1, 1))
        assert await trio.to_thread.run_sync(lambda: cluster.leader_for("orders", 0)) == 1
    finally:
        cluster.close()
    assert not any(t.name == "kafkalite-cluster" and t.is_alive() and t is cluster._thread
                   for t in threading.enumerate())


def test_ctrl_c_while_starting_stops_the_cluster_it_started() -> None:
    """`with EmbeddedCluster()` never gets an object start() was interrupted in, so start() closes it itself."""

    class InterruptedWait(threading.Event):
        def __init__(self) -> None:
            super().__init__()
            self.interrupted = False

        def wait(self, timeout: float | None = None) -> bool:
            if not self.interrupted:  # Ctrl-C lands in the first wait, as the brokers start
                self.interrupted = True
                raise KeyboardInterrupt
            return super().wait(timeout)

    cluster = EmbeddedCluster(brokers=3)
    cluster._ready = InterruptedWait()
    with pytest.raises(KeyboardInterrupt):
        cluster.start()
    assert cluster._thread is not None and not cluster._thread.is_alive()
    with pytest.raises(RuntimeError, match="has stopped"):
        cluster.create_topic("orders")


def test_copies_are_refused() -> None:
    with EmbeddedCluster(brokers=1) as cluster, cluster.producer() as producer:
        with pytest.raises(TypeError, match="cannot be copied"):
            copy.copy(cluster)
        with pytest.raises(TypeError, match="SyncProducer cannot be copied"):
            copy.copy(producer)
    assert not hasattr(EmbeddedCluster.__new__(EmbeddedCluster), "anything")  # not a RecursionError


def test_a_sync_consumer_awaits_callbacks_that_return_awaitables() -> None:
    """Not only `async def` functions are async callbacks: a lambda returning a coroutine, or an object with an
    async `__call__`, has its result awaited in the loop, as the async consumer awaits any awaitable result."""
    seen: list[str] = []

    async def record(kind: str) -> None:
        seen.append(kind)

    class OnRevoke:
        async def __call__(self, partitions: set[TopicPartition]) -> None:
            seen.append("revoke")

    with EmbeddedCluster(brokers=1) as cluster:
        cluster.create_topic("orders", 2, 1)
        consumer = cluster.consumer(group_id="g")
        consumer.subscribe(["orders"], on_assign=lambda partitions: record("assign"), on_revoke=OnRevoke())
        deadline = time.monotonic() + 20
        while not consumer.assignment() and time.monotonic() < deadline:
            consumer.poll(0.1)
        consumer.close()
    assert seen == ["assign", "revoke"]


def test_a_seek_inside_the_sync_consumer_s_loop_goes_on_from_there() -> None:
    """The loop hands out one poll's records: a seek through the consumer drops the records of the partition it
    moves that the loop has yet to give, so the loop goes on from the new position (kafka-python's iterator does
    the same), and keeps the other partitions' records."""
    with EmbeddedCluster(brokers=1) as cluster:
        cluster.create_topic("orders", 2, 1)
        with cluster.producer() as producer:
            for index in range(20):
                producer.send("orders", b"v%d" % index, partition=index % 2)
        first, second = TopicPartition("orders", 0), TopicPartition("orders", 1)
        with cluster.consumer(auto_offset_reset="earliest", max_poll_records=100) as consumer:
            consumer.assign([first, second])
            seen: dict[int, list[int]] = {0: [], 1: []}
            for record in consumer:
                seen[record.partition].append(record.offset)
                if (record.partition, record.offset) == (0, 2) and len(seen[0]) == 3:
                    consumer.seek(first, 8)
                if len(seen[0]) + len(seen[1]) == 15:
                    break
            assert seen == {0: [0, 1, 2, 8, 9], 1: list(range(10))}
            consumer.seek_to_beginning()
            records = iter(consumer)
            head = next(records)  # one poll brings both partitions' records; which comes first is the consumer's
            this, other = (first, second) if head.partition == 0 else (second, first)
            assert head.offset == 0
            consumer.seek_to_beginning(tp for tp in [this])  # a generator, read once
            assert [(r.partition, r.offset) for r in itertools.islice(records, 11)] == [
                (other.partition, offset) for offset in range(10)] + [(this.partition, 0)]

