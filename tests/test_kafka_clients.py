"""Apache Kafka's own clients against the KAFKA listener of a 3-broker kafkalite, unchanged.

kafka-python, aiokafka and confluent-kafka (librdkafka) produce with every acks setting, with and without
idempotence, with keys, headers, timestamps and each compression codec; consume by assign and seek; run admin
operations; survive a leader killed mid-stream; and read what native clients wrote, and the other way round,
with identical offsets, keys, values, headers and timestamps.

These run on the real clock: the clients are real programs on real sockets, and the cluster runs in
`EmbeddedCluster`'s background thread. Every wait polls a condition against a deadline; nothing sleeps.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import trio

from kafkalite.common.records import Record
from kafkalite.common.types import TopicPartition as NativeTopicPartition, uuid_bytes
from kafkalite.embedded import EmbeddedCluster
from kafkalite.network.requests import EARLIEST_TIMESTAMP

aiokafka = pytest.importorskip("aiokafka")
confluent_kafka = pytest.importorskip("confluent_kafka")
kafka = pytest.importorskip("kafka")
import kafka.codec  # noqa: E402
import kafka.errors  # noqa: E402
from aiokafka.admin import AIOKafkaAdminClient, NewPartitions  # noqa: E402
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic  # noqa: E402
from kafka.admin import KafkaAdminClient  # noqa: E402

DEADLINE = 20.0
COUNT = 30
BASE_TIMESTAMP = 1_700_000_000_000
CLIENTS = ["kafka-python", "aiokafka", "confluent-kafka"]
Sent = tuple[bytes | None, bytes, list[tuple[str, bytes]], int]  # key, value, headers, timestamp


@pytest.fixture(scope="module")
def cluster() -> Iterator[EmbeddedCluster]:
    with EmbeddedCluster(3, {"zookeeper.session.timeout.ms": 1000, "replica.lag.time.max.ms": 1000}) as embedded:
        yield embedded


_topics = iter(range(1_000_000))


@pytest.fixture
def topic(cluster: EmbeddedCluster) -> str:
    name = f"wire-{next(_topics)}"
    cluster.create_topic(name, 1, 3)
    return name


def records(count: int = COUNT, tag: str = "") -> list[Sent]:
    return [(None if i % 7 == 0 else f"k{i}".encode(), f"{tag}value-{i}".encode() * 3,
             [("h", str(i).encode()), ("empty", b"")] if i % 2 else [], BASE_TIMESTAMP + i) for i in range(count)]


def wait_for(condition: Callable[[], Any], what: str, timeout: float = DEADLINE) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        result = condition()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


def native_read(cluster: EmbeddedCluster, topic: str, count: int) -> list[tuple[int, Record]]:
    """The partition as a native reader sees it, once `count` records are committed."""
    return wait_for(lambda: (found := cluster.fetch(topic, 0, 0)) and len(found) >= count and found,
                    f"{count} committed records in {topic}")


def as_sent(read: list[tuple[int, Record]]) -> list[tuple[int, Sent]]:
    return [(offset, (r.key, r.value, [(k, v) for k, v in r.headers], r.timestamp)) for offset, r in read]


# -- producing with each client ----------------------------------------------------------------------------------


def produce(client: str, bootstrap: str, topic: str, sent: list[Sent], **options: Any) -> None:
    """Produce `sent` to partition 0 and wait until the client reports every record delivered."""
    PRODUCERS[client](bootstrap, topic, sent, **options)


def _kafka_python_produce(bootstrap: str, topic: str, sent: list[Sent], *, acks: Any = "all",
                          idempotence: bool = False, compression: str | None = None,
                          api_version: tuple[int, int] | None = None) -> None:
    producer = kafka.KafkaProducer(bootstrap_servers=bootstrap, acks=acks, enable_idempotence=idempotence,
                                   compression_type=compression, linger_ms=5, api_version=api_version)
    try:
        futures = [producer.send(topic, value=value, key=key, headers=headers, partition=0, timestamp_ms=ts)
                   for key, value, headers, ts in sent]
        producer.flush(DEADLINE)
        for future in futures:
            future.get(DEADLINE)
    finally:
        producer.close(5)


def _aiokafka_produce(bootstrap: str, topic: str, sent: list[Sent], *, acks: Any = "all",
                      idempotence: bool = False, compression: str | None = None) -> None:
    async def run() -> None:
        producer = aiokafka.AIOKafkaProducer(bootstrap_servers=bootstrap, acks=acks, enable_idempotence=idempotence,
                                             compression_type=compression, linger_ms=5)
        await producer.start()
        try:
            futures = [await producer.send(topic, value=value, key=key, headers=headers, partition=0,
                                           timestamp_ms=ts) for key, value, headers, ts in sent]
            await asyncio.wait_for(asyncio.gather(*futures), DEADLINE)
        finally:
            await producer.stop()

    asyncio.run(run())


def _confluent_produce(bootstrap: str, topic: str, sent: list[Sent], *, acks: Any = "all",
                       idempotence: bool = False, compression: str | None = None) -> None:
    failures: list[Any] = []
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": str(acks),
                                         "enable.idempotence": idempotence, "linger.ms": 5,
                                         "compression.type": compression or "none"})
    for key, value, headers, ts in sent:
        producer.produce(topic, value=value, key=key, headers=headers, partition=0, timestamp=ts,
                         on_delivery=lambda err, _msg: err is not None and failures.append(err))
    assert producer.flush(DEADLINE) == 0
    assert not failures, failures


PRODUCERS: dict[str, Callable[..., None]] = {"kafka-python": _kafka_python_produce, "aiokafka": _aiokafka_produce,
                                             "confluent-kafka": _confluent_produce}


# -- consuming with each client: assign partition 0, seek, read `count` records ----------------------------------


def consume(client: str, bootstrap: str, topic: str, offset: int, count: int) -> list[tuple[int, Sent]]:
    return CONSUMERS[client](bootstrap, topic, offset, count)


def _kafka_python_consume(bootstrap: str, topic: str, offset: int, count: int,
                          api_version: tuple[int, int] | None = None) -> list[tuple[int, Sent]]:
    consumer = kafka.KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, api_version=api_version)
    tp = kafka.TopicPartition(topic, 0)
    got: list[tuple[int, Sent]] = []
    try:
        consumer.assign([tp])
        consumer.seek(tp, offset)
        deadline = time.monotonic() + DEADLINE
        while len(got) < count and time.monotonic() < deadline:
            for batch in consumer.poll(200).values():
                got += [(m.offset, (m.key, m.value, list(m.headers), m.timestamp)) for m in batch]
    finally:
        consumer.close()
    return got


def _aiokafka_consume(bootstrap: str, topic: str, offset: int, count: int) -> list[tuple[int, Sent]]:
    async def run() -> list[tuple[int, Sent]]:
        consumer = aiokafka.AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
        await consumer.start()
        tp = aiokafka.TopicPartition(topic, 0)
        got: list[tuple[int, Sent]] = []
        try:
            consumer.assign([tp])
            consumer.seek(tp, offset)
            deadline = time.monotonic() + DEADLINE
            while len(got) < count and time.monotonic() < deadline:
                for batch in (await consumer.getmany(timeout_ms=200)).values():
                    got += [(m.offset, (m.key, m.value, list(m.headers), m.timestamp)) for m in batch]
        finally:
            await consumer.stop()
        return got

    return asyncio.run(run())


def _confluent_consume(bootstrap: str, topic: str, offset: int, count: int) -> list[tuple[int, Sent]]:
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "unused",
                                         "enable.auto.commit": False})
    got: list[tuple[int, Sent]] = []
    try:
        consumer.assign([confluent_kafka.TopicPartition(topic, 0, offset)])
        deadline = time.monotonic() + DEADLINE
        while len(got) < count and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is None:
                continue
            assert message.error() is None, message.error()
            got.append((message.offset(), (message.key(), message.value(), list(message.headers() or []),
                                           message.timestamp()[1])))
    finally:
        consumer.close()
    return got


CONSUMERS: dict[str, Callable[..., list[tuple[int, Sent]]]] = {
    "kafka-python": _kafka_python_consume, "aiokafka": _aiokafka_consume, "confluent-kafka": _confluent_consume}


# -- tests -------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("client", "acks", "idempotence"), [
    (client, acks, idempotence) for client in CLIENTS for acks, idempotence in
    ((0, False), (1, False), ("all", False), ("all", True))])
def test_produce_every_acks_with_and_without_idempotence(cluster: EmbeddedCluster, topic: str, client: str,
                                                         acks: Any, idempotence: bool) -> None:
    sent = records()
    produce(client, cluster.kafka_bootstrap_servers, topic, sent, acks=acks, idempotence=idempotence)
    assert as_sent(native_read(cluster, topic, COUNT)) == list(enumerate(sent))
    assert consume(client, cluster.kafka_bootstrap_servers, topic, 0, COUNT) == list(enumerate(sent))


CODECS = ("gzip", "snappy", "lz4", "zstd")


def kafka_python_lacks(codec: str) -> bool:
    """kafka-python compresses and decompresses snappy, lz4 and zstd only with python-snappy, lz4 and zstandard
    installed (the test extra has them); gzip needs nothing."""
    return not getattr(kafka.codec, f"has_{codec}")()


@pytest.mark.parametrize(("client", "codec"), [(client, codec) for client in CLIENTS for codec in CODECS])
def test_compressed_batches_are_stored_as_sent_and_read_by_every_client(cluster: EmbeddedCluster, topic: str,
                                                                        client: str, codec: str) -> None:
    able = [c for c in CLIENTS if c != "kafka-python" or not kafka_python_lacks(codec)]
    if client not in able:
        pytest.skip(f"kafka-python cannot use {codec} here: install kafkalite[test]")
    sent = records()
    produce(client, cluster.kafka_bootstrap_servers, topic, sent, compression=codec)
    assert as_sent(native_read(cluster, topic, COUNT)) == list(enumerate(sent))
    for reader in able:
        assert consume(reader, cluster.kafka_bootstrap_servers, topic, 5, COUNT - 5) == list(enumerate(sent))[5:]


@pytest.mark.parametrize("client", CLIENTS)
def test_natively_produced_records_read_by_kafka_clients_with_seek(cluster: EmbeddedCluster, topic: str,
                                                                  client: str) -> None:
    sent = records()
    for start in range(0, COUNT, 10):  # three native batches, so a seek lands inside one
        cluster.produce(topic, 0, [Record(key, value, ts, tuple(headers)) for key, value, headers, ts in
                                   sent[start:start + 10]])
    assert consume(client, cluster.kafka_bootstrap_servers, topic, 13, COUNT - 13) == list(enumerate(sent))[13:]


@pytest.mark.parametrize("pinned", [(2, 3), (2, 5), (2, 8), (3, 0)])
def test_kafka_python_pinned_to_a_kafka_release(cluster: EmbeddedCluster, topic: str, pinned: tuple[int, int]) -> None:
    """kafka-python with api_version pinned to a release no newer than the one it takes kafkalite for (from what
    ApiVersions lists) sends that release's versions without checking them against the list: CreateTopics v5-7
    and DeleteTopics v4-6 from 2.4, CreatePartitions v2-3 from 2.5, Metadata v11 from 2.8, FindCoordinator v4 and
    OffsetFetch v8 from 3.0. Every one is served: produce, consume, a group's committed offsets, topics created,
    described, grown and deleted."""
    bootstrap = cluster.kafka_bootstrap_servers
    sent = records(10)
    _kafka_python_produce(bootstrap, topic, sent, api_version=pinned)
    assert _kafka_python_consume(bootstrap, topic, 3, 7, api_version=pinned) == list(enumerate(sent))[3:]
    group, tp = f"pinned-{pinned[0]}-{pinned[1]}", kafka.TopicPartition(topic, 0)
    consumer = kafka.KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                                   api_version=pinned)
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, api_version=pinned)
    try:
        consumer.assign([tp])
        consumer.commit({tp: kafka.structs.OffsetAndMetadata(7, "seven", -1)})
        [(committed_tp, committed)] = admin.list_group_offsets(group)[group].items()
        assert (committed_tp, committed.offset, committed.metadata) == (tp, 7, "seven")
        admin.create_topics([kafka.admin.NewTopic(group, 2, 3)])
        [described] = admin.describe_topics([group])
        assert [len(p["replica_nodes"]) for p in described["partitions"]] == [3, 3]
        if pinned >= (2, 8):  # Metadata v10+: the topic's id
            assert described["topic_id"] == str(uuid.UUID(bytes=uuid_bytes(cluster.topic_id(group))))
        admin.create_partitions({group: kafka.admin.NewPartitions(3)})
        assert [len(p.replicas) for p in cluster.describe_topic(group)] == [3, 3, 3]
        admin.delete_topics([group])
        wait_for(lambda: group not in cluster.topics(), f"{group} to be deleted")
    finally:
        admin.close()
        consumer.close()


@pytest.mark.parametrize("client", CLIENTS)
def test_kafka_produced_records_read_by_the_native_consumer(cluster: EmbeddedCluster, topic: str,
                                                           client: str) -> None:
    sent = records(tag=client)
    produce(client, cluster.kafka_bootstrap_servers, topic, sent)
    with cluster.consumer(auto_offset_reset="earliest") as consumer:
        from kafkalite.client import TopicPartition

        consumer.assign([TopicPartition(topic, 0)])
        got: list = []
        wait_for(lambda: got.extend(consumer.poll(0.1)) or len(got) >= COUNT, "the native consumer")
    assert [(r.offset, (r.key, r.value, list(r.headers), r.timestamp)) for r in got] == list(enumerate(sent))


@pytest.mark.parametrize("client", CLIENTS)
def test_a_client_handed_the_native_ports_is_served_and_sent_to_the_kafka_ports(cluster: EmbeddedCluster, topic: str,
                                                                              client: str) -> None:
    """`cluster.bootstrap_servers`, the list kafkalite's own clients take, is the one a stranger reaches for first.
    Its ports answer Kafka's protocol too, naming the KAFKA listener's ports in Metadata, where the client goes on."""
    sent = records(tag=client)
    produce(client, cluster.bootstrap_servers, topic, sent)
    assert consume(client, cluster.bootstrap_servers, topic, 0, COUNT) == list(enumerate(sent))
    if client == "kafka-python":
        producer = kafka.KafkaProducer(bootstrap_servers=cluster.bootstrap_servers)
        try:
            wait_for(lambda: producer.partitions_for(topic), "kafka-python's metadata")
            kafka_ports = {int(server.rpartition(":")[2]) for server in cluster.kafka_bootstrap_servers.split(",")}
            assert {broker.port for broker in producer._metadata.brokers()} == kafka_ports
        finally:
            producer.close(5)


def test_kafkalites_clients_handed_the_kafka_ports_are_served_and_sent_to_the_native_ports(cluster: EmbeddedCluster,
                                                                                           topic: str) -> None:
    """The other way round: the Spark connector's option for its bootstrap list is `kafka.bootstrap.servers`, and
    `kafkalite serve` prints "Kafka bootstrap servers" too."""
    from kafkalite.client import Consumer, Producer, TopicPartition

    bootstrap = cluster.kafka_bootstrap_servers
    native_ports = {int(server.rpartition(":")[2]) for server in cluster.bootstrap_servers.split(",")}

    async def run() -> tuple[list[int], list[bytes], set[int]]:
        async with Producer(bootstrap, {"acks": "all"}) as producer:
            offsets = [(await (await producer.send(topic, b"v%d" % i, partition=0))).offset for i in range(3)]
        async with Consumer(bootstrap, {"auto.offset.reset": "earliest"}) as consumer:
            consumer.assign([TopicPartition(topic, 0)])
            values = [record.value for record in await consumer.poll(10)]
            learned = {port for _, port in consumer._transport._addresses.values()}
        return offsets, values, learned

    offsets, values, learned = trio.run(run)
    assert (offsets, values) == ([0, 1, 2], [b"v0", b"v1", b"v2"])
    assert native_ports <= learned  # each broker's NATIVE port, beside the bootstrap addresses


# confluent-kafka deprecates its AlterConfigs (key 33) call in favour of IncrementalAlterConfigs (key 44); the
# listener serves both, and this test keeps the old one covered.
@pytest.mark.filterwarnings("ignore:alter_configs has been deprecated:DeprecationWarning")
def test_admin_with_confluent_kafka(cluster: EmbeddedCluster) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.kafka_bootstrap_servers})
    for future in admin.create_topics([NewTopic("admin-ck", 2, 3, config={"retention.ms": "60000"})],
                                      operation_timeout=10).values():
        future.result(DEADLINE)
    described = admin.describe_topics(
        confluent_kafka.TopicCollection(["admin-ck"]))["admin-ck"].result(DEADLINE)
    assert len(described.partitions) == 2 and all(len(p.replicas) == 3 for p in described.partitions)
    topic_id = described.topic_id  # compared by value: librdkafka prints it in base64's other alphabet ('+', '/')
    assert (topic_id.get_most_significant_bits() % 2**64) << 64 | topic_id.get_least_significant_bits() % 2**64 == \
        int.from_bytes(uuid_bytes(cluster.topic_id("admin-ck")))
    cluster_description = admin.describe_cluster().result(DEADLINE)
    assert cluster_description.controller.id == cluster.controller_id
    assert cluster_description.cluster_id == cluster.cluster_id
    assert {node.id for node in cluster_description.nodes} == {1, 2, 3}
    resource = ConfigResource(ConfigResource.Type.TOPIC, "admin-ck")
    configs = admin.describe_configs([resource])[resource].result(DEADLINE)
    assert configs["retention.ms"].value == "60000"
    admin.alter_configs([ConfigResource(ConfigResource.Type.TOPIC, "admin-ck",
                                        set_config={"retention.ms": "120000"})])[resource].result(DEADLINE)
    assert admin.describe_configs([resource])[resource].result(DEADLINE)["retention.ms"].value == "120000"
    for future in admin.create_partitions([confluent_kafka.admin.NewPartitions("admin-ck", 4)]).values():
        future.result(DEADLINE)
    assert len(cluster.describe_topic("admin-ck")) == 4
    for future in admin.delete_topics(["admin-ck"], operation_timeout=10).values():
        future.result(DEADLINE)
    wait_for(lambda: "admin-ck" not in cluster.topics(), "the topic to be deleted")


def test_confluent_kafka_gets_kafkas_answers_to_repeated_and_colliding_topics(cluster: EmbeddedCluster) -> None:
    """What the KAFKA listener answers where Kafka refuses a request's shape. A name colliding with an existing
    one is refused; a topic named twice is refused at each entry and not acted on, which librdkafka reports as a
    malformed response for the whole call (a shorter answer, as Kafka's KRaft controller gives, crashes it) while
    the other topics of the request go through. A null config value (which confluent-kafka sends as the text
    'None') is refused by kafka-python's admin below."""
    admin = AdminClient({"bootstrap.servers": cluster.kafka_bootstrap_servers})
    cluster.create_topic("shape.one", 1, 1)
    cluster.create_topic("shape-grows", 1, 1)

    def outcomes(futures: dict[str, Any]) -> dict[str, tuple[int, str] | None]:
        answers: dict[str, tuple[int, str] | None] = {}
        for name, future in futures.items():
            try:
                answers[name] = future.result(DEADLINE)
            except confluent_kafka.KafkaException as exc:
                answers[name] = (exc.args[0].code(), exc.args[0].str())
        return answers

    assert outcomes(admin.create_topics([NewTopic("shape_one", 1, 1)], operation_timeout=10)) == {
        "shape_one": (confluent_kafka.KafkaError.TOPIC_EXCEPTION,
                      "Topic 'shape_one' collides with existing topics: shape.one")}
    malformed = confluent_kafka.KafkaError._BAD_MSG
    answers = outcomes(admin.create_topics([NewTopic("shape-twice", 1, 1), NewTopic("shape-ok", 1, 1),
                                            NewTopic("shape-twice", 2, 1), NewTopic("shape-more", 1, 1)],
                                           operation_timeout=10))
    assert {code for code, _ in answers.values()} == {malformed}  # type: ignore[misc]
    answers = outcomes(admin.create_partitions([confluent_kafka.admin.NewPartitions(name, count) for name, count in
                                                [("shape.one", 2), ("shape-grows", 2), ("shape.one", 3)]]))
    assert {code for code, _ in answers.values()} == {malformed}  # type: ignore[misc]
    answers = outcomes(admin.delete_topics(["shape-more", "shape-ok", "shape-more"], operation_timeout=10))
    assert {code for code, _ in answers.values()} == {malformed}  # type: ignore[misc]
    wait_for(lambda: "shape-ok" not in cluster.topics(), "shape-ok to be deleted")
    assert {"shape.one", "shape-grows", "shape-more"} <= set(cluster.topics())
    assert not {"shape-twice", "shape_one"} & set(cluster.topics())
    assert (len(cluster.describe_topic("shape.one")), len(cluster.describe_topic("shape-grows"))) == (1, 2)
    kafka_admin = KafkaAdminClient(bootstrap_servers=cluster.kafka_bootstrap_servers)
    try:
        with pytest.raises(kafka.errors.InvalidConfigurationError, match="Null value not supported for topic configs"):
            kafka_admin.create_topics([kafka.admin.NewTopic("shape-null", 1, 1, topic_configs={"retention.ms": None})])
    finally:
        kafka_admin.close()
    assert "shape-null" not in cluster.topics()


def test_list_topics_with_confluent_kafka(cluster: EmbeddedCluster, topic: str) -> None:
    """`list_topics()` from confluent-kafka's admin client, producer and consumer: every topic, each partition's
    leader, replicas and ISR, the brokers and the controller; and one topic by name. Asking for every topic,
    librdkafka sends bytes after the request body, which Kafka ignores (tests/network/test_kafka_wire.py)."""
    bootstrap = cluster.kafka_bootstrap_servers
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "list-topics"})
    try:
        for client in (AdminClient({"bootstrap.servers": bootstrap}),
                       confluent_kafka.Producer({"bootstrap.servers": bootstrap}), consumer):
            listed = client.list_topics(timeout=DEADLINE)
            assert set(cluster.topics()) <= set(listed.topics)
            assert set(listed.brokers) == {1, 2, 3} and listed.controller_id == cluster.controller_id
            [partition] = listed.topics[topic].partitions.values()
            state = cluster.partition_state(topic, 0)
            assert (partition.leader, sorted(partition.replicas), sorted(partition.isrs)) == (
                state.leader, [1, 2, 3], sorted(state.isr))
            assert list(client.list_topics(topic, timeout=DEADLINE).topics) == [topic]
    finally:
        consumer.close()


def test_a_compacted_topic_with_confluent_kafka(cluster: EmbeddedCluster) -> None:
    """Created as Kafka Connect and Schema Registry create their internal topics: the configs are kept and
    described; keyed records and tombstones are written and read back, all of them (kafkalite compacts nothing);
    a record without a key is refused with INVALID_RECORD, as Kafka's LogValidator refuses it."""
    bootstrap = cluster.kafka_bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bootstrap})
    configs = {"cleanup.policy": "compact", "min.compaction.lag.ms": "0", "delete.retention.ms": "100",
               "min.cleanable.dirty.ratio": "0.01", "compression.type": "producer"}
    admin.create_topics([NewTopic("connect-configs", 1, 3, config=configs)])["connect-configs"].result(DEADLINE)
    resource = ConfigResource(ConfigResource.Type.TOPIC, "connect-configs")
    described = admin.describe_configs([resource])[resource].result(DEADLINE)
    assert {name: described[name].value for name in configs} == configs
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                                         "compression.type": "lz4", "linger.ms": 0})
    reports: list[tuple[bytes | None, Any]] = []
    for key, value in [(b"k", b"v1"), (b"k", None), (None, b"no key"), (b"k", b"v2")]:
        producer.produce("connect-configs", value, key, partition=0,
                         on_delivery=lambda error, message: reports.append((message.key(), error)))
        producer.flush(DEADLINE)  # one record a batch: Kafka refuses the whole batch a keyless record is in
    assert [(key, error and error.code()) for key, error in reports] == [
        (b"k", None), (b"k", None), (None, confluent_kafka.KafkaError.INVALID_RECORD), (b"k", None)]  # Produce
    # v7 has no error message: kafkalite's own clients get "Compacted topic cannot accept message without key"
    assert [(r.key, r.value) for _, r in native_read(cluster, "connect-configs", 3)] == [
        (b"k", b"v1"), (b"k", None), (b"k", b"v2")]


@pytest.mark.parametrize("client", CLIENTS)
def test_a_record_older_than_the_topic_allows_is_refused_to_every_client(cluster: EmbeddedCluster, client: str) -> None:
    """INVALID_TIMESTAMP, non-retriable: the client fails the send; the records before and after it are kept. The
    gzip batches are decompressed to read each record's timestamp."""
    topic = f"timestamps-{client}"
    hour = 3_600_000
    cluster.create_topic(topic, 1, 3, {"message.timestamp.before.max.ms": hour, "message.timestamp.after.max.ms": hour})
    now = int(time.time() * 1000)  # the cluster runs on the real clock here
    produce(client, cluster.kafka_bootstrap_servers, topic, [(b"k", b"before", [], now)], compression="gzip")
    with pytest.raises(Exception, match="INVALID_TIMESTAMP|InvalidTimestamp"):
        produce(client, cluster.kafka_bootstrap_servers, topic, [(b"k", b"stale", [], now - 2 * hour)],
                compression="gzip")
    produce(client, cluster.kafka_bootstrap_servers, topic, [(b"k", b"after", [], now + hour // 2)],
            compression="gzip")
    assert [(offset, r.value, r.timestamp) for offset, r in native_read(cluster, topic, 2)] == [
        (0, b"before", now), (1, b"after", now + hour // 2)]


def test_incremental_alter_configs_with_confluent_kafka(cluster: EmbeddedCluster) -> None:
    """SET, DELETE, APPEND and SUBTRACT; what is not named keeps its override; each bad resource gets its own error
    code and message while the good one in the same request is applied."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry

    def op(name: str, value: str | None, kind: Any) -> ConfigEntry:
        return ConfigEntry(name, value, incremental_operation=kind)

    def alter(topic: str, *ops: ConfigEntry, **others: list[ConfigEntry]) -> dict[str, Any]:
        """One request: `ops` for `topic`, and for each keyword topic its ops; the error of each, or None."""
        futures = admin.incremental_alter_configs([
            ConfigResource(ConfigResource.Type.TOPIC, name, incremental_configs=list(changes))
            for name, changes in {topic: ops, **others}.items()])
        return {resource.name: future.exception(DEADLINE) for resource, future in futures.items()}

    def overrides(topic: str) -> dict[str, str]:
        resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
        return {name: entry.value for name, entry in admin.describe_configs([resource])[resource].result(DEADLINE)
                .items() if not entry.is_default}

    admin = AdminClient({"bootstrap.servers": cluster.kafka_bootstrap_servers})
    cluster.create_topic("inc-ck", 1, 3, config={"retention.ms": 60000, "segment.ms": 90000})
    assert alter("inc-ck", op("retention.ms", "1000", AlterConfigOpType.SET),
                 op("segment.ms", None, AlterConfigOpType.DELETE),
                 op("cleanup.policy", "delete", AlterConfigOpType.APPEND)) == {"inc-ck": None}
    assert overrides("inc-ck") == {"retention.ms": "1000", "cleanup.policy": "delete"}
    wait_for(lambda: cluster.call(lambda: all(
        cluster.cluster.broker(b).replica_manager.get_partition(NativeTopicPartition("inc-ck", 0)).topic_config[
            "retention.ms"] == 1000 for b in cluster.cluster.live_broker_ids)), "the brokers to apply retention.ms")
    failed = {
        "APPEND to a list what Kafka does not have": op("cleanup.policy", "shred", AlterConfigOpType.APPEND),
        "SUBTRACT everything from a list": op("cleanup.policy", "delete", AlterConfigOpType.SUBTRACT),
        "APPEND to a property that is not a list": op("retention.ms", "5", AlterConfigOpType.APPEND),
        "an unknown property": op("retention.mss", "5", AlterConfigOpType.SET),
        "a value out of range": op("retention.ms", "-7", AlterConfigOpType.SET),
    }
    expected = [r"cleanup.policy: must be a list of one or more of delete, compact"] * 2 + [
        "append is not allowed for config key: retention.ms", "Unknown topic config name: retention.mss",
        "retention.ms: must be at least -1"]
    for (what, bad), message in zip(failed.items(), expected):
        error = alter("inc-ck", bad)["inc-ck"]
        assert error is not None and error.args[0].code() == confluent_kafka.KafkaError.INVALID_CONFIG, what
        assert message in error.args[0].str(), what
    assert overrides("inc-ck") == {"retention.ms": "1000", "cleanup.policy": "delete"}
    mixed = alter("inc-ck", op("retention.ms", "2000", AlterConfigOpType.SET),
                  **{"no-such-topic": [op("retention.ms", "5", AlterConfigOpType.SET)]})
    assert mixed["inc-ck"] is None
    assert mixed["no-such-topic"].args[0].code() == confluent_kafka.KafkaError.UNKNOWN_TOPIC_OR_PART
    assert overrides("inc-ck") == {"retention.ms": "2000", "cleanup.policy": "delete"}
    assert alter("inc-ck", op("cleanup.policy", "compact", AlterConfigOpType.APPEND)) == {"inc-ck": None}
    assert overrides("inc-ck")["cleanup.policy"] == "delete,compact"
    assert alter("inc-ck", op("cleanup.policy", "delete", AlterConfigOpType.SUBTRACT)) == {"inc-ck": None}
    assert overrides("inc-ck")["cleanup.policy"] == "compact"


def test_elect_leaders_with_confluent_kafka_and_kafka_python() -> None:
    """A controlled shutdown moves a partition's leadership off its preferred replica, and the broker's restart
    does not move it back (no auto rebalance): confluent-kafka's preferred election does, and answers each
    partition as Kafka does. An unclean election of every partition with live leaders lists none of them."""
    from confluent_kafka import ElectionType
    from confluent_kafka import TopicPartition as CkTopicPartition

    with EmbeddedCluster(3, {"auto.leader.rebalance.enable": False}) as own:
        own.create_topic("elect", 2, 3)
        preferred = {p: own.describe_topic("elect")[p].replicas[0] for p in (0, 1)}
        moved = preferred[0]
        own.shutdown_broker(moved)
        own.restart_broker(moved)
        own.wait_until(lambda: moved in own.partition_state("elect", 0).isr, timeout=DEADLINE)
        assert own.leader_for("elect", 0) != moved
        admin = AdminClient({"bootstrap.servers": own.kafka_bootstrap_servers})
        results = admin.elect_leaders(ElectionType.PREFERRED, [
            CkTopicPartition("elect", 0), CkTopicPartition("elect", 1), CkTopicPartition("no-such-topic", 0)
        ]).result(DEADLINE)
        codes = {(tp.topic, tp.partition): None if error is None else error.code() for tp, error in results.items()}
        kafka_error = confluent_kafka.KafkaError
        assert codes == {("elect", 0): None, ("elect", 1): kafka_error.ELECTION_NOT_NEEDED,
                         ("no-such-topic", 0): kafka_error.UNKNOWN_TOPIC_OR_PART}
        assert own.leader_for("elect", 0) == moved and own.leader_for("elect", 1) == preferred[1]
        assert admin.elect_leaders(ElectionType.UNCLEAN, None).result(DEADLINE) == {}

        kp_admin = KafkaAdminClient(bootstrap_servers=own.kafka_bootstrap_servers)
        try:
            answer = kp_admin.elect_leaders(election_type=0, topic_partitions={"elect": [0, 1]})
        finally:
            kp_admin.close()
        assert sorted((r.partition_id, r.error_code) for topic in answer.replica_election_results
                      for r in topic.partition_result) == [(0, kafka_error.ELECTION_NOT_NEEDED),
                                                           (1, kafka_error.ELECTION_NOT_NEEDED)]


def _read_after_seek(bootstrap: str, topic: str, seek_to: int, epoch: int, count: int, **config: Any) -> list[Any]:
    """What a confluent-kafka consumer reads, or the error it is told, after it seeks to `seek_to` with the leader
    `epoch` of the record before it, as a consumer resuming from a position does (KIP-320)."""
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "unused",
                                         "enable.auto.commit": False, **config})
    got: list[Any] = []
    try:
        consumer.assign([confluent_kafka.TopicPartition(topic, 0, confluent_kafka.OFFSET_BEGINNING)])
        first = wait_for(lambda: consumer.poll(0.2), "the first record")
        assert (first.error(), first.offset()) == (None, 0)
        consumer.seek(confluent_kafka.TopicPartition(topic, 0, seek_to, leader_epoch=epoch))
        deadline = time.monotonic() + DEADLINE
        while len(got) < count and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None:
                error = message.error()
                got.append((error.code(), error.str()) if error else (message.offset(), message.value()))
    finally:
        consumer.close()
    return got


def _kafka_python_poll(consumer: Any, tp: Any, count: int) -> list[Any]:
    got: list[Any] = []
    deadline = time.monotonic() + DEADLINE
    while len(got) < count and time.monotonic() < deadline:
        got += consumer.poll(200).get(tp, [])
    return got


def test_a_consumer_resuming_past_an_unclean_truncation_reads_what_the_new_leader_wrote_there() -> None:
    """KIP-320 with confluent-kafka. Five records reach both replicas; with the follower dead, five more reach only
    the leader, and a consumer reads all ten. The leader dies; the follower, back, is elected uncleanly, has
    only the first five, and takes ten new records at offsets 5 to 14. A consumer resuming at offset 10 with
    the leader epoch of the record it read last asks the new leader where that epoch ends (OffsetForLeaderEpoch,
    once Metadata named the new epoch), learns 5, and reads the new records from there rather than silently
    skipping five of them; with auto.offset.reset=error it is told of the truncation instead (librdkafka reports
    it as _AUTO_OFFSET_RESET, the truncation in its message). A kafka-python consumer that read the ten and stays
    assigned through the failover checks its position itself when Metadata shows the new epoch, or learns of the
    truncation from its fetch (v12's diverging epoch) when Metadata named the new leader after its last check, and
    reads on from 5 too."""
    with EmbeddedCluster(3, {"zookeeper.session.timeout.ms": 1000, "replica.lag.time.max.ms": 1000}) as own:
        own.create_topic("trunc", 1, 2, {"unclean.leader.election.enable": True})  # the third broker stays up
        leader, follower = own.describe_topic("trunc")[0].replicas
        own.wait_for_leader("trunc", 0)
        assert own.produce("trunc", 0, [Record(None, b"old-%d" % i) for i in range(5)]) == 0
        own.kill_broker(follower)
        wait_for(lambda: list(own.partition_state("trunc", 0).isr) == [leader], "the follower to leave the ISR")
        assert own.produce("trunc", 0, [Record(None, b"old-%d" % i) for i in range(5, 10)]) == 5
        read = _confluent_consume(own.kafka_bootstrap_servers, "trunc", 0, 10)
        assert [value for _, (_, value, _, _) in read] == [b"old-%d" % i for i in range(10)]
        consumer = confluent_kafka.Consumer({"bootstrap.servers": own.kafka_bootstrap_servers, "group.id": "e"})
        try:
            consumer.assign([confluent_kafka.TopicPartition("trunc", 0, 9)])
            last = wait_for(lambda: consumer.poll(0.2), "offset 9")
            epoch = last.leader_epoch()
        finally:
            consumer.close()
        assert epoch is not None and epoch >= 0
        live = kafka.KafkaConsumer(bootstrap_servers=own.kafka_bootstrap_servers, auto_offset_reset="earliest")
        live_tp = kafka.TopicPartition("trunc", 0)
        live.assign([live_tp])
        live.seek_to_beginning(live_tp)
        assert [r.value for r in _kafka_python_poll(live, live_tp, 10)] == [b"old-%d" % i for i in range(10)]

        own.kill_broker(leader)
        own.restart_broker(follower)
        assert own.wait_for_leader("trunc", 0, not_on=[leader], timeout=DEADLINE) == follower
        assert own.produce("trunc", 0, [Record(None, b"new-%d" % i) for i in range(10)]) == 5
        assert _read_after_seek(own.kafka_bootstrap_servers, "trunc", 10, epoch, 10) == [
            (5 + i, b"new-%d" % i) for i in range(10)]
        try:
            assert [(r.offset, r.value) for r in _kafka_python_poll(live, live_tp, 10)] == [
                (5 + i, b"new-%d" % i) for i in range(10)]
        finally:
            live.close()
        [(code, message)] = _read_after_seek(own.kafka_bootstrap_servers, "trunc", 10, epoch, 1,
                                             **{"auto.offset.reset": "error"})
        assert code == confluent_kafka.KafkaError._AUTO_OFFSET_RESET
        assert "truncation detected" in message and "broker end offset is 5" in message


def test_reassignments_with_kafka_python() -> None:
    """kafka-python moves a partition onto a broker cut off from its replicas, lists the move, cancels it (the
    added replica is deleted), and moves it again to completion; a cancel with nothing to cancel, a broker named
    twice and a partition that does not exist each get Kafka's error code."""
    from kafka import TopicPartition as KpTopicPartition
    from kafka.errors import (
        InvalidReplicationAssignmentError, NoReassignmentInProgressError, UnknownTopicOrPartitionError,
    )

    with EmbeddedCluster(4, {"auto.leader.rebalance.enable": False}) as own:
        own.create_topic("moving", 1, 2)
        original = list(own.describe_topic("moving")[0].replicas)
        slow, other = [b for b in own.broker_ids if b not in original]
        tp, native_tp = KpTopicPartition("moving", 0), NativeTopicPartition("moving", 0)
        admin = KafkaAdminClient(bootstrap_servers=own.kafka_bootstrap_servers)
        try:
            own.partition_network({slow}, original)  # it cannot fetch: the move waits in its first phase
            assert admin.alter_partition_reassignments({tp: [original[0], slow]}) == {tp: None}
            assert admin.list_partition_reassignments() == {
                tp: {"replicas": [original[0], slow, original[1]], "adding_replicas": [slow],
                     "removing_replicas": [original[1]]}}
            assert admin.alter_partition_reassignments({tp: None}) == {tp: None}
            assert admin.list_partition_reassignments() == {}
            assert admin.alter_partition_reassignments({tp: None}) == {tp: NoReassignmentInProgressError}
            missing = KpTopicPartition("moving", 9)
            assert admin.alter_partition_reassignments({tp: [slow, slow], missing: [other]}) == {
                tp: InvalidReplicationAssignmentError, missing: UnknownTopicOrPartitionError}
            own.heal()
            wait_for(lambda: own.call(lambda: own.cluster.log_manager(slow).get_log(native_tp)) is None,
                     "the cancelled replica to be deleted")
            assert list(own.describe_topic("moving")[0].replicas) == original
            assert admin.alter_partition_reassignments({tp: [other, original[0]]}) == {tp: None}
            wait_for(lambda: not admin.list_partition_reassignments()
                     and list(own.describe_topic("moving")[0].replicas) == [other, original[0]], "the move")
        finally:
            admin.close()


def test_committed_offsets_keep_the_leader_epoch_each_client_commits(cluster: EmbeddedCluster, topic: str) -> None:
    """OffsetCommit and OffsetFetch carry the leader epoch of the record before the committed offset (KIP-320), so
    a group resumed by another client can check its position: kafkalite's consumer commits the epoch of what it
    read, and confluent-kafka and kafka-python read it back and commit their own."""
    from kafka.structs import OffsetAndMetadata as KpOffsetAndMetadata

    cluster.produce(topic, 0, [Record(None, b"v%d" % i) for i in range(3)])
    epoch = cluster.partition_state(topic, 0).leader_epoch
    group = f"{topic}-epochs"
    with cluster.consumer(group_id=group, auto_offset_reset="earliest", enable_auto_commit=False) as native:
        native.assign([NativeTopicPartition(topic, 0)])
        assert [r.value for r in native.poll(DEADLINE)] == [b"v0", b"v1", b"v2"]
        native.commit()
    consumer = confluent_kafka.Consumer({"bootstrap.servers": cluster.kafka_bootstrap_servers, "group.id": group})
    try:
        [committed] = consumer.committed([confluent_kafka.TopicPartition(topic, 0)], DEADLINE)
        assert (committed.offset, committed.leader_epoch) == (3, epoch)
        consumer.commit(offsets=[confluent_kafka.TopicPartition(topic, 0, 2, leader_epoch=epoch)], asynchronous=False)
    finally:
        consumer.close()
    kp_consumer = kafka.KafkaConsumer(bootstrap_servers=cluster.kafka_bootstrap_servers, group_id=group)
    try:
        tp = kafka.TopicPartition(topic, 0)
        found = kp_consumer.committed(tp, metadata=True)
        assert (found.offset, found.leader_epoch) == (2, epoch)
        kp_consumer.assign([tp])
        kp_consumer.commit({tp: KpOffsetAndMetadata(1, "", epoch)})
    finally:
        kp_consumer.close()
    with cluster.consumer(group_id=group) as native:
        again = native.committed([NativeTopicPartition(topic, 0)])[NativeTopicPartition(topic, 0)]
    assert again is not None and (again.offset, again.leader_epoch) == (1, epoch)


def test_list_offsets_with_confluent_kafka_finds_the_largest_timestamp(cluster: EmbeddedCluster, topic: str) -> None:
    """ListOffsets version 7 (KIP-734): confluent-kafka's OffsetSpec.max_timestamp() gets the first record with the
    largest timestamp; earliest, latest and a timestamp as before, at the version librdkafka picks."""
    from confluent_kafka.admin import OffsetSpec

    cluster.produce(topic, 0, [Record(None, b"v", stamp) for stamp in (5000, 9000, 2000, 9000, 7000)])
    admin = AdminClient({"bootstrap.servers": cluster.kafka_bootstrap_servers})
    tp = confluent_kafka.TopicPartition(topic, 0)
    found = {name: list(admin.list_offsets({tp: spec}).values())[0].result(DEADLINE)
             for name, spec in [("max", OffsetSpec.max_timestamp()), ("earliest", OffsetSpec.earliest()),
                                ("latest", OffsetSpec.latest()), ("at 6000", OffsetSpec.for_timestamp(6000))]}
    assert {name: (info.offset, info.timestamp) for name, info in found.items()} == {
        "max": (1, 9000), "earliest": (0, -1), "latest": (5, -1), "at 6000": (1, 9000)}
    assert found["max"].leader_epoch == cluster.partition_state(topic, 0).leader_epoch


def test_describe_log_dirs_with_kafka_python(cluster: EmbeddedCluster, topic: str) -> None:
    """DescribeLogDirs goes to every broker: each reports its one in-memory log directory and the replicas in it,
    the produced partition with the same size on all three, and only the partitions asked for when asked."""
    cluster.produce(topic, 0, [Record(None, b"v" * 100) for _ in range(5)])
    kp_admin = KafkaAdminClient(bootstrap_servers=cluster.kafka_bootstrap_servers)
    try:
        everything = kp_admin.describe_log_dirs()
        asked = kp_admin.describe_log_dirs(topic_partitions={topic: [0]}, brokers=[2])
    finally:
        kp_admin.close()

    def sizes(answer: dict[str, Any]) -> dict[str, dict[tuple[str, int], int]]:
        return {result["log_dir"]: {(t["name"], p["partition_index"]): p["partition_size"]
                                    for t in result["topics"] for p in t["partitions"]} for result in answer["log_dirs"]}

    by_broker = {answer["broker"]: sizes(answer) for answer in everything}
    assert sorted(by_broker) == [1, 2, 3]
    held = {broker: dirs[f"memory:broker-{broker}"][(topic, 0)] for broker, dirs in by_broker.items()}
    assert len(set(held.values())) == 1 and held[1] > 500
    [only] = asked
    assert (only["broker"], sizes(only)) == (2, {"memory:broker-2": {(topic, 0): held[2]}})


def test_acl_calls_are_refused_as_by_a_broker_without_an_authorizer(cluster: EmbeddedCluster) -> None:
    """kafkalite authorizes nothing, like a Kafka broker without authorizer.class.name: creating, describing and
    deleting ACLs are answered SECURITY_DISABLED with the broker's message, for each binding or filter named, as
    confluent-kafka and kafka-python report it; and the broker keeps serving."""
    from confluent_kafka.admin import (
        AclBinding, AclBindingFilter, AclOperation, AclPermissionType, ResourcePatternType, ResourceType,
    )
    from kafka.admin import ACL, ACLFilter, ACLOperation, ACLPermissionType, ResourcePattern, ResourcePatternFilter
    from kafka.admin import ACLResourcePatternType, ResourceType as KpResourceType

    admin = AdminClient({"bootstrap.servers": cluster.kafka_bootstrap_servers})
    bindings = [AclBinding(ResourceType.TOPIC, name, ResourcePatternType.LITERAL, "User:alice", "*",
                           AclOperation.READ, AclPermissionType.ALLOW) for name in ("a", "b")]
    everything = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                                  AclPermissionType.ANY)
    refusals = [future.exception(DEADLINE) for future in admin.create_acls(bindings).values()]
    refusals += [future.exception(DEADLINE) for future in admin.delete_acls([everything]).values()]
    assert [e.args[0].code() for e in refusals] == [confluent_kafka.KafkaError.SECURITY_DISABLED] * 3
    assert all("No Authorizer is configured on the broker" in e.args[0].str() for e in refusals)
    # librdkafka drops DescribeAcls' error code and lists nothing, against Kafka's brokers too
    assert admin.describe_acls(everything).result(DEADLINE) == []

    kp_admin = KafkaAdminClient(bootstrap_servers=cluster.kafka_bootstrap_servers)
    try:
        acl = ACL("User:bob", "*", ACLOperation.WRITE, ACLPermissionType.ALLOW,
                  ResourcePattern(KpResourceType.TOPIC, "c", ACLResourcePatternType.LITERAL))
        created = kp_admin.create_acls([acl])
        assert created == {"succeeded": [], "failed": [kafka.errors.SecurityDisabledError]}
        with pytest.raises(kafka.errors.SecurityDisabledError):
            kp_admin.describe_acls(ACLFilter(None, None, ACLOperation.ANY, ACLPermissionType.ANY,
                                             ResourcePatternFilter(KpResourceType.ANY, None,
                                                                   ACLResourcePatternType.ANY)))
    finally:
        kp_admin.close()
    assert "wire-acl" not in cluster.topics()
    cluster.create_topic("wire-acl", 1, 3)
    assert "wire-acl" in cluster.topics()


def test_a_transactional_producer_is_refused_at_once_by_every_client(cluster: EmbeddedCluster, topic: str) -> None:
    """No transactions: each client's transactional producer fails at its first step with a final error naming
    why, TRANSACTIONAL_ID_AUTHORIZATION_FAILED. librdkafka retried the INVALID_REQUEST it was told before for
    ever, so init_transactions() only ever timed out; an idempotent producer still works."""
    producer = confluent_kafka.Producer({"bootstrap.servers": cluster.kafka_bootstrap_servers,
                                         "transactional.id": "tx-ck"})
    started = time.monotonic()
    with pytest.raises(confluent_kafka.KafkaException) as refused:
        producer.init_transactions(DEADLINE)
    error = refused.value.args[0]
    assert (error.code(), error.fatal()) == (confluent_kafka.KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, True)
    assert "kafkalite has no transactions" in error.str() and time.monotonic() - started < DEADLINE / 2

    with pytest.raises(kafka.errors.TransactionalIdAuthorizationFailedError):
        kafka.KafkaProducer(bootstrap_servers=cluster.kafka_bootstrap_servers, transactional_id="tx-kp",
                            max_block_ms=int(DEADLINE * 1000)).init_transactions()

    async def aiokafka_start() -> None:
        transactional = aiokafka.AIOKafkaProducer(bootstrap_servers=cluster.kafka_bootstrap_servers,
                                                  transactional_id="tx-aio")
        try:
            with pytest.raises(aiokafka.errors.TransactionalIdAuthorizationFailed):
                await asyncio.wait_for(transactional.start(), DEADLINE)
        finally:
            await transactional.stop()

    asyncio.run(aiokafka_start())
    produce("confluent-kafka", cluster.kafka_bootstrap_servers, topic, records(3), idempotence=True)
    assert len(native_read(cluster, topic, 3)) == 3


def test_authorized_operations_are_everything_a_resource_supports(cluster: EmbeddedCluster, topic: str) -> None:
    """Asked for them (Metadata v8+, DescribeCluster, DescribeGroups v3+), a broker without an authorizer lists
    every operation a topic, the cluster or a group supports, as Kafka's does; not asked, none (None)."""
    from confluent_kafka import TopicCollection
    from confluent_kafka.admin import AclOperation as Op

    consumer = confluent_kafka.Consumer({"bootstrap.servers": cluster.kafka_bootstrap_servers, "group.id": "ops"})
    try:
        consumer.commit(offsets=[confluent_kafka.TopicPartition(topic, 0, 0)], asynchronous=False)
    finally:
        consumer.close()
    admin = AdminClient({"bootstrap.servers": cluster.kafka_bootstrap_servers})

    def topic_operations(asked: bool) -> Any:
        described = admin.describe_topics(TopicCollection([topic]), include_authorized_operations=asked)
        return described[topic].result(DEADLINE).authorized_operations

    assert set(topic_operations(True)) == {Op.READ, Op.WRITE, Op.CREATE, Op.DESCRIBE, Op.DELETE, Op.ALTER,
                                           Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS}
    assert set(admin.describe_cluster(include_authorized_operations=True).result(DEADLINE).authorized_operations) == {
        Op.CREATE, Op.CLUSTER_ACTION, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS, Op.IDEMPOTENT_WRITE, Op.ALTER,
        Op.DESCRIBE}
    [group] = admin.describe_consumer_groups(["ops"], include_authorized_operations=True).values()
    assert set(group.result(DEADLINE).authorized_operations) == {Op.READ, Op.DESCRIBE, Op.DELETE}
    assert topic_operations(False) is None
    assert admin.describe_cluster().result(DEADLINE).authorized_operations is None


def test_admin_with_kafka_python(cluster: EmbeddedCluster) -> None:
    from kafka.admin import ConfigResource as KpConfigResource, ConfigResourceType, NewPartitions as KpNewPartitions, \
        NewTopic as KpNewTopic

    admin = KafkaAdminClient(bootstrap_servers=cluster.kafka_bootstrap_servers)
    try:
        admin.create_topics([KpNewTopic("admin-kp", 2, 3)])
        assert "admin-kp" in admin.list_topics()
        [described] = admin.describe_topics(["admin-kp"])
        assert len(described["partitions"]) == 2
        admin.alter_configs([KpConfigResource(ConfigResourceType.TOPIC, "admin-kp",  # IncrementalAlterConfigs
                                              configs={"retention.ms": "90000", "segment.ms": "80000"})])
        admin.alter_configs([KpConfigResource(ConfigResourceType.TOPIC, "admin-kp",
                                              configs={"segment.ms": ("DELETE", None)})])
        result = repr(admin.describe_configs([KpConfigResource(ConfigResourceType.TOPIC, "admin-kp")]))
        assert "90000" in result and "80000" not in result

        def synonyms(kind: Any, name: str, config: str) -> list[tuple[str, str, str]]:
            [entry] = admin.describe_configs([KpConfigResource(kind, name, configs=[config])], include_synonyms=True,
                                             config_filter="all")[kind.name.lower()][name].values()
            return [(synonym["name"], synonym["value"], synonym["source"]) for synonym in entry["synonyms"]]

        assert synonyms(ConfigResourceType.TOPIC, "admin-kp", "retention.ms") == [
            ("retention.ms", "90000", "DYNAMIC_TOPIC_CONFIG"), ("log.retention.ms", "604800000", "DEFAULT_CONFIG")]
        assert synonyms(ConfigResourceType.BROKER, "1", "replica.lag.time.max.ms") == [
            ("replica.lag.time.max.ms", "1000", "STATIC_BROKER_CONFIG"),
            ("replica.lag.time.max.ms", "30000", "DEFAULT_CONFIG")]
        # asked by Kafka's name, an alias of kafkalite's coordination.session.timeout.ms: answered under it
        assert synonyms(ConfigResourceType.BROKER, "1", "zookeeper.session.timeout.ms") == [
            ("coordination.session.timeout.ms", "1000", "STATIC_BROKER_CONFIG"),
            ("coordination.session.timeout.ms", "18000", "DEFAULT_CONFIG")]
        admin.create_partitions({"admin-kp": KpNewPartitions(3)})
        assert len(cluster.describe_topic("admin-kp")) == 3
        admin.delete_topics(["admin-kp"])
        wait_for(lambda: "admin-kp" not in cluster.topics(), "the topic to be deleted")
    finally:
        admin.close()


def test_admin_with_aiokafka(cluster: EmbeddedCluster) -> None:
    from aiokafka.admin import NewTopic as AioNewTopic

    async def run() -> None:
        admin = AIOKafkaAdminClient(bootstrap_servers=cluster.kafka_bootstrap_servers)
        await admin.start()
        try:
            await admin.create_topics([AioNewTopic("admin-aio", 1, 3)])
            assert "admin-aio" in await admin.list_topics()
            await admin.create_partitions({"admin-aio": NewPartitions(2)})
            await admin.delete_topics(["admin-aio"])
        finally:
            await admin.close()

    asyncio.run(run())
    assert cluster.call(lambda: True)
    wait_for(lambda: "admin-aio" not in cluster.topics(), "the topic to be deleted")


def test_a_leader_killed_mid_stream_loses_no_acknowledged_record(cluster: EmbeddedCluster, topic: str) -> None:
    """confluent-kafka, acks=all and idempotent, keeps producing while the partition's leader is killed and
    brought back: every record it was told is delivered is read back, in order, exactly once."""
    acknowledged: list[bytes] = []
    stop = threading.Event()

    def run() -> None:
        producer = confluent_kafka.Producer({"bootstrap.servers": cluster.kafka_bootstrap_servers, "acks": "all",
                                             "enable.idempotence": True, "linger.ms": 2,
                                             "message.timeout.ms": 30000})
        i = 0
        while not stop.is_set():
            producer.produce(topic, value=b"r%d" % i, partition=0,
                             on_delivery=lambda err, msg: err is None and acknowledged.append(msg.value()))
            producer.poll(0)
            i += 1
            if i % 50 == 0:
                producer.flush(0.05)
        assert producer.flush(30) == 0

    thread = threading.Thread(target=run)
    thread.start()
    try:
        wait_for(lambda: len(acknowledged) >= 200, "records acknowledged before the kill")
        leader = cluster.leader_for(topic, 0)
        cluster.kill_broker(leader)
        cluster.wait_for_leader(topic, 0, not_on=[leader], timeout=DEADLINE)
        before = len(acknowledged)
        wait_for(lambda: len(acknowledged) >= before + 200, "records acknowledged by the new leader")
        cluster.restart_broker(leader)
    finally:
        stop.set()
        thread.join(60)
    values = [record.value for _, record in native_read(cluster, topic, len(acknowledged))]
    assert set(acknowledged) <= set(values)
    assert len(values) == len(set(values)), "a record was appended twice"
    assert values == sorted(values, key=lambda v: int(v[1:])), "records are out of order"


# -- consumer groups: each client subscribes, commits and resumes; mixed clients share a group -------------------

# Members notice a rebalance from their next heartbeat, so a short interval keeps rebalances short on the real clock.
GROUP_TIMING = {"session_timeout_ms": 6000, "heartbeat_interval_ms": 100}
Read = tuple[int, int, bytes]  # partition, offset, value


def group_read(client: str, bootstrap: str, topic: str, group: str, count: int) -> list[Read]:
    """Subscribe to `topic` in `group` (earliest when nothing is committed), read `count` records, commit the
    positions synchronously and leave the group."""
    return GROUP_READERS[client](bootstrap, topic, group, count)


def _kafka_python_group_consumer(bootstrap: str, topic: str, group: str) -> Any:
    """A kafka-python consumer subscribed to `topic` in `group`, knowing the topic's partitions before it joins.

    kafka-python 3.0 loses a rebalance when a poll() times out between its JoinGroup and SyncGroup responses and
    the rebalance was started by a metadata change (its join_group_async picks a join in flight up only while
    need_rejoin() holds, which the assignment itself ends): it never applies the assignment, stays rebalancing
    and refuses every commit. The first join starts such a rebalance whenever it completes before the client
    has the topic's partitions in the record its assignment compares with (kafkalite's
    group.initial.rebalance.delay.ms is 0, Kafka's is 3 s). kafka-python fills that record only from metadata
    fetched once it is subscribed, so it subscribes first and then waits for the metadata."""
    consumer = kafka.KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
                                   enable_auto_commit=False, **GROUP_TIMING)
    consumer.subscribe([topic])
    wait_for(lambda: consumer.partitions_for_topic(topic), f"kafka-python's metadata of {topic}")
    return consumer


def _kafka_python_group_read(bootstrap: str, topic: str, group: str, count: int) -> list[Read]:
    """Commits once `count` records are read. A commit kafka-python refuses because the group is rebalancing is
    made again after polling on, as its RebalanceInProgressError advises."""
    consumer = _kafka_python_group_consumer(bootstrap, topic, group)
    got: list[Read] = []
    try:
        deadline = time.monotonic() + DEADLINE
        while time.monotonic() < deadline:
            for batch in consumer.poll(200).values():
                got += [(m.partition, m.offset, m.value) for m in batch]
            if len(got) >= count:
                try:
                    consumer.commit()
                    break
                except kafka.errors.RebalanceInProgressError:
                    continue
    finally:
        consumer.close()
    return got


def _aiokafka_group_read(bootstrap: str, topic: str, group: str, count: int) -> list[Read]:
    async def run() -> list[Read]:
        consumer = aiokafka.AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                                             auto_offset_reset="earliest", enable_auto_commit=False, **GROUP_TIMING)
        await consumer.start()
        got: list[Read] = []
        try:
            deadline = time.monotonic() + DEADLINE
            while len(got) < count and time.monotonic() < deadline:
                for batch in (await consumer.getmany(timeout_ms=200)).values():
                    got += [(m.partition, m.offset, m.value) for m in batch]
            await consumer.commit()
        finally:
            await consumer.stop()
        return got

    return asyncio.run(run())


def _confluent_group_consumer(bootstrap: str, group: str) -> Any:
    return confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                                     "enable.auto.commit": False, "session.timeout.ms": 6000,
                                     "heartbeat.interval.ms": 100})


def _confluent_group_read(bootstrap: str, topic: str, group: str, count: int) -> list[Read]:
    consumer = _confluent_group_consumer(bootstrap, group)
    got: list[Read] = []
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + DEADLINE
        while len(got) < count and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None:
                assert message.error() is None, message.error()
                got.append((message.partition(), message.offset(), message.value()))
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    return got


GROUP_READERS: dict[str, Callable[..., list[Read]]] = {
    "kafka-python": _kafka_python_group_read, "aiokafka": _aiokafka_group_read, "confluent-kafka": _confluent_group_read}


def produce_natively(cluster: EmbeddedCluster, topic: str, partitions: int, per_partition: int, tag: str) -> set[bytes]:
    values: set[bytes] = set()
    for partition in range(partitions):
        batch = [f"{tag}-{partition}-{i}".encode() for i in range(per_partition)]
        cluster.produce(topic, partition, [Record(None, value, BASE_TIMESTAMP) for value in batch])
        values.update(batch)
    return values


@pytest.mark.parametrize("client", CLIENTS)
def test_a_group_member_commits_and_a_restarted_one_resumes_from_the_committed_offsets(
        cluster: EmbeddedCluster, client: str) -> None:
    topic, group = f"group-resume-{client}", f"resume-{client}"
    cluster.create_topic(topic, 3, 3)
    first = produce_natively(cluster, topic, 3, 10, "first")
    assert {value for _, _, value in group_read(client, cluster.kafka_bootstrap_servers, topic, group, 30)} == first
    with cluster.admin() as admin:
        committed = admin.list_group_offsets(group)
    assert {tp.partition: o.committed for tp, o in committed.items()} == {0: 10, 1: 10, 2: 10}

    second = produce_natively(cluster, topic, 3, 10, "second")
    resumed = group_read(client, cluster.kafka_bootstrap_servers, topic, group, 30)
    assert sorted((p, o) for p, o, _ in resumed) == [(p, o) for p in range(3) for o in range(10, 20)]
    assert {value for _, _, value in resumed} == second


class _Member(threading.Thread):
    """One member of a mixed group, polling in its own thread until told to stop: what it read and, after each
    poll, which partitions it holds."""

    def __init__(self, name: str, poll: Callable[[], list[Read]], assignment: Callable[[], set[int]],
                 close: Callable[[], None]) -> None:
        super().__init__(name=name, daemon=True)
        self.poll, self.current, self.close = poll, assignment, close
        self.read: list[Read] = []
        self.assigned: set[int] = set()
        self.stop = threading.Event()
        self.failure: BaseException | None = None

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                self.read += self.poll()
                self.assigned = self.current()
        except BaseException as exc:  # reported by the test, which owns the assertion
            self.failure = exc
        finally:
            self.close()


def _confluent_member(bootstrap: str, topic: str, group: str) -> _Member:
    consumer = _confluent_group_consumer(bootstrap, group)
    consumer.subscribe([topic])

    def poll() -> list[Read]:
        message = consumer.poll(0.05)
        if message is None:
            return []
        assert message.error() is None, message.error()
        return [(message.partition(), message.offset(), message.value())]

    return _Member("confluent-kafka", poll, lambda: {tp.partition for tp in consumer.assignment()}, consumer.close)


def _kafka_python_member(bootstrap: str, topic: str, group: str) -> _Member:
    consumer = _kafka_python_group_consumer(bootstrap, topic, group)
    return _Member("kafka-python",
                   lambda: [(m.partition, m.offset, m.value) for b in consumer.poll(50).values() for m in b],
                   lambda: {tp.partition for tp in consumer.assignment()}, consumer.close)


def _native_member(cluster: EmbeddedCluster, topic: str, group: str) -> _Member:
    consumer = cluster.consumer(group_id=group, auto_offset_reset="earliest", enable_auto_commit=False,
                                **GROUP_TIMING)
    consumer.subscribe([topic])
    return _Member("kafkalite", lambda: [(r.partition, r.offset, r.value) for r in consumer.poll(0.05)],
                   lambda: {tp.partition for tp in consumer.assignment()}, consumer.close)


def test_a_group_of_mixed_clients_shares_a_topic_with_disjoint_covering_assignments(cluster: EmbeddedCluster) -> None:
    """confluent-kafka, kafka-python and kafkalite's own consumer join one group (all prefer the range assignor):
    once all three hold two of the six partitions, every record produced is read once, by its partition's
    holder."""
    topic, group = "group-mixed", "mixed"
    cluster.create_topic(topic, 6, 3)
    bootstrap = cluster.kafka_bootstrap_servers
    members = [_confluent_member(bootstrap, topic, group), _kafka_python_member(bootstrap, topic, group),
               _native_member(cluster, topic, group)]
    for member in members:
        member.start()
    try:
        def settled() -> bool:
            assert all(m.failure is None for m in members), [m.failure for m in members]
            held = [m.assigned for m in members]
            return all(len(h) == 2 for h in held) and set().union(*held) == set(range(6))

        wait_for(settled, "three members holding two partitions each")
        sent = produce_natively(cluster, topic, 6, 10, "mixed")
        wait_for(lambda: sum(len(m.read) for m in members) >= len(sent), "every record read")
        assert not any(m.failure for m in members)
        for member in members:
            assert {p for p, _, _ in member.read} == member.assigned, member.name
        read = [value for m in members for _, _, value in m.read]
        assert sorted(read) == sorted(sent)
    finally:
        for member in members:
            member.stop.set()
        for member in members:
            member.join(DEADLINE)


def test_group_admin_with_each_client(cluster: EmbeddedCluster) -> None:
    """List, describe, read the offsets of and delete groups that Kafka clients committed in, with each admin."""
    topic = "group-admin"
    cluster.create_topic(topic, 2, 3)
    produce_natively(cluster, topic, 2, 5, "admin")
    bootstrap = cluster.kafka_bootstrap_servers
    for group, client in (("admin-ck", "confluent-kafka"), ("admin-kp", "kafka-python")):
        assert len(group_read(client, bootstrap, topic, group, 10)) == 10
    committed = {(topic, 0): 5, (topic, 1): 5}

    async def with_aiokafka() -> None:
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
        await admin.start()
        try:
            assert {"admin-ck", "admin-kp"} <= {group for group, _ in await admin.list_consumer_groups()}
            [described] = await admin.describe_consumer_groups(["admin-kp"])
            assert described.groups[0][2] == "Empty"  # error_code, group_id, group_state, ...
            offsets = await admin.list_consumer_group_offsets("admin-kp")
            assert {(tp.topic, tp.partition): o.offset for tp, o in offsets.items()} == committed
        finally:
            await admin.close()

    asyncio.run(with_aiokafka())

    kp_admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        assert {"admin-ck", "admin-kp"} <= {g["group_id"] for g in kp_admin.list_groups()}
        assert kp_admin.describe_groups(["admin-kp"])["admin-kp"]["group_state"] == "Empty"
        offsets = kp_admin.list_group_offsets({"admin-kp": None})["admin-kp"]
        assert {(tp.topic, tp.partition): o.offset for tp, o in offsets.items()} == committed
        assert set(kp_admin.delete_group_offsets("admin-kp", [kafka.TopicPartition(topic, 0)]).values()) == {
            kafka.errors.NoError}
        kp_admin.delete_groups(["admin-kp"])
    finally:
        kp_admin.close()

    ck_admin = AdminClient({"bootstrap.servers": bootstrap})
    listed = ck_admin.list_consumer_groups().result(DEADLINE)
    assert "admin-ck" in {g.group_id for g in listed.valid}
    described = ck_admin.describe_consumer_groups(["admin-ck"])["admin-ck"].result(DEADLINE)
    assert described.state == confluent_kafka.ConsumerGroupState.EMPTY
    [offsets_future] = ck_admin.list_consumer_group_offsets(
        [confluent_kafka.ConsumerGroupTopicPartitions("admin-ck")]).values()
    assert {(tp.topic, tp.partition): tp.offset for tp in offsets_future.result(DEADLINE).topic_partitions} == committed
    ck_admin.delete_consumer_groups(["admin-ck"])["admin-ck"].result(DEADLINE)

    with cluster.admin() as admin:
        assert not {"admin-ck", "admin-kp"} & {g.group_id for g in admin.list_groups()}


# -- deleting records ----------------------------------------------------------------------------------------------


def _kafka_python_delete_records(bootstrap: str, topic: str, offset: int) -> int:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        tp = kafka.TopicPartition(topic, 0)
        return int(admin.delete_records({tp: offset}, timeout_ms=int(DEADLINE * 1000))[tp]["low_watermark"])
    finally:
        admin.close()


def _aiokafka_delete_records(bootstrap: str, topic: str, offset: int) -> int:
    from aiokafka.admin import RecordsToDelete

    async def run() -> int:
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
        await admin.start()
        try:
            tp = aiokafka.TopicPartition(topic, 0)
            return (await admin.delete_records({tp: RecordsToDelete(offset)}, int(DEADLINE * 1000)))[tp]
        finally:
            await admin.close()

    return asyncio.run(run())


def _confluent_delete_records(bootstrap: str, topic: str, offset: int) -> int:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    [future] = admin.delete_records([confluent_kafka.TopicPartition(topic, 0, offset)],
                                    operation_timeout=DEADLINE).values()
    return int(future.result(DEADLINE).low_watermark)


DELETERS: dict[str, Callable[[str, str, int], int]] = {
    "kafka-python": _kafka_python_delete_records, "aiokafka": _aiokafka_delete_records,
    "confluent-kafka": _confluent_delete_records}


@pytest.mark.parametrize("client", CLIENTS)
def test_delete_records_with_each_admin(cluster: EmbeddedCluster, topic: str, client: str) -> None:
    """DeleteRecords as each client's admin sends it (all three send the flexible v2): the low watermark comes
    back, the client's consumer reads from there, -1 deletes up to the high watermark, an offset beyond it is
    refused with OFFSET_OUT_OF_RANGE; the native sync admin does the same."""
    sent = records()
    produce(client, cluster.kafka_bootstrap_servers, topic, sent)
    native_read(cluster, topic, COUNT)
    assert DELETERS[client](cluster.kafka_bootstrap_servers, topic, 12) == 12
    assert cluster.list_offset(topic, 0, EARLIEST_TIMESTAMP) == 12
    assert consume(client, cluster.kafka_bootstrap_servers, topic, 12, COUNT - 12) == list(enumerate(sent))[12:]
    with pytest.raises(Exception) as raised:
        DELETERS[client](cluster.kafka_bootstrap_servers, topic, COUNT + 5)
    assert "OffsetOutOfRange" in type(raised.value).__name__ or "OFFSET_OUT_OF_RANGE" in str(raised.value)
    with cluster.admin() as admin:
        assert admin.delete_records({NativeTopicPartition(topic, 0): 20}) == {NativeTopicPartition(topic, 0): 20}
    assert DELETERS[client](cluster.kafka_bootstrap_servers, topic, -1) == COUNT
    [described] = cluster.describe_topic(topic)
    assert described.log_start_offsets == {1: COUNT, 2: COUNT, 3: COUNT}


def test_request_faults_reach_confluent_kafka_as_from_a_kafka_broker(cluster: EmbeddedCluster, topic: str) -> None:
    """`fail_requests` on the KAFKA listener. A lost produce acknowledgement (drop="response": appended, then the
    connection closed): the idempotent producer's retry is recognised and the record stored once; without
    idempotence it is stored twice, as against Kafka. An error kafkalite never answers itself
    (29, TOPIC_AUTHORIZATION_FAILED) reaches the delivery report with librdkafka's own name for it."""

    def deliver(value: bytes, **config: Any) -> tuple[Any, int | None]:
        producer = confluent_kafka.Producer({"bootstrap.servers": cluster.kafka_bootstrap_servers, **config})
        reports: list[tuple[Any, int | None]] = []
        producer.produce(topic, value=value, partition=0,
                         on_delivery=lambda error, message: reports.append((error, message.offset())))
        assert producer.flush(DEADLINE) == 0
        return reports[0]

    try:
        lost = cluster.fail_requests("Produce", drop="response", topics=[topic])
        assert deliver(b"idempotent", **{"enable.idempotence": True}) == (None, 0)
        assert lost.hits == 1
        cluster.fail_requests("Produce", drop="response", topics=[topic])
        assert deliver(b"plain", **{"enable.idempotence": False, "acks": "all"}) == (None, 2)
        refused = cluster.fail_requests("Produce", 29, topics=[topic], message="not for you")
        error, _ = deliver(b"refused", **{"enable.idempotence": False})
        assert error.code() == confluent_kafka.KafkaError.TOPIC_AUTHORIZATION_FAILED and refused.hits == 1
    finally:
        cluster.clear_request_faults()
    assert [r.value for _, r in native_read(cluster, topic, 3)] == [b"idempotent", b"plain", b"plain"]


def test_kafka_python_and_the_native_tcp_consumer_read_through_failed_and_dropped_fetches(
        cluster: EmbeddedCluster, topic: str) -> None:
    """Fetches answered NOT_LEADER_OR_FOLLOWER (kafka-python over the KAFKA listener) or cut off with no answer
    (kafkalite's consumer over the NATIVE listener): each client recovers and reads every record once, in order."""
    import trio

    from kafkalite.client import Consumer, TopicPartition

    cluster.produce(topic, 0, [Record(None, f"v{i}".encode()) for i in range(COUNT)])
    try:
        failed = cluster.fail_requests("Fetch", "NOT_LEADER_OR_FOLLOWER", topics=[topic], times=3)
        consumer = kafka.KafkaConsumer(bootstrap_servers=cluster.kafka_bootstrap_servers, enable_auto_commit=False,
                                       auto_offset_reset="earliest")
        try:
            consumer.assign([kafka.TopicPartition(topic, 0)])
            got: list[Any] = []
            wait_for(lambda: got.extend(m for ms in consumer.poll(100).values() for m in ms) or len(got) >= COUNT,
                     "kafka-python to read through the failed fetches")
        finally:
            consumer.close()
        assert [(m.offset, m.value) for m in got] == [(i, f"v{i}".encode()) for i in range(COUNT)]
        assert failed.hits == 3

        dropped = cluster.fail_requests("Fetch", drop="request", topics=[topic], times=2)
        bootstrap = cluster.bootstrap_servers  # asked here: inside trio.run below, the cluster's loop is not ours

        async def read_natively() -> list[tuple[int, bytes | None]]:
            async with Consumer(bootstrap, {"auto.offset.reset": "earliest"}) as native:
                native.assign([TopicPartition(topic, 0)])
                read: list[tuple[int, bytes | None]] = []
                with trio.fail_after(DEADLINE):
                    while len(read) < COUNT:
                        read += [(r.offset, r.value) for r in await native.poll(1)]
                return read

        assert trio.run(read_natively) == [(i, f"v{i}".encode()) for i in range(COUNT)]
        assert dropped.hits == 2
    finally:
        cluster.clear_request_faults()


def _group_member(cluster: EmbeddedCluster, group: str, name: str, events: list[tuple[str, str, list[int]]],
                  topic: str, **config: Any) -> Any:
    consumer = confluent_kafka.Consumer({"bootstrap.servers": cluster.kafka_bootstrap_servers, "group.id": group,
                                         "auto.offset.reset": "earliest", "client.id": name, **config})
    def note(kind: str) -> Callable[[Any, list[Any]], None]:
        return lambda _, partitions: events.append((name, kind, sorted(p.partition for p in partitions)))

    consumer.subscribe([topic], on_assign=note("assign"), on_revoke=note("revoke"))
    return consumer


def _poll_until(consumers: list[Any], condition: Callable[[], bool], what: str) -> None:
    wait_for(lambda: [c.poll(0.05) for c in consumers] and condition(), what)


def _owned(consumer: Any) -> set[int]:
    return {p.partition for p in consumer.assignment()}


def test_cooperative_sticky_members_of_confluent_kafka_rebalance_incrementally(cluster: EmbeddedCluster) -> None:
    """KIP-429: when a second member joins, the first gives up only the partitions that move and keeps reading
    the others; the two end with disjoint assignments that cover the topic."""
    topic = "cooperative"
    cluster.create_topic(topic, 6, 3)
    events: list[tuple[str, str, list[int]]] = []
    sticky = {"partition.assignment.strategy": "cooperative-sticky"}
    first = _group_member(cluster, "cooperative", "first", events, topic, **sticky)
    second = None
    try:
        _poll_until([first], lambda: _owned(first) == set(range(6)), "the first member to own every partition")
        second = _group_member(cluster, "cooperative", "second", events, topic, **sticky)
        _poll_until([first, second], lambda: len(_owned(first)) == len(_owned(second)) == 3,
                    "three partitions each")
        assert _owned(first) | _owned(second) == set(range(6))
        revoked = [partitions for name, kind, partitions in events if name == "first" and kind == "revoke"]
        assert revoked and all(len(partitions) == 3 for partitions in revoked if partitions), events
        admin = AdminClient({"bootstrap.servers": cluster.kafka_bootstrap_servers})
        described = admin.describe_consumer_groups(["cooperative"])["cooperative"].result(DEADLINE)
        assert (described.state, described.partition_assignor) == (confluent_kafka.ConsumerGroupState.STABLE,
                                                                   "cooperative-sticky")
        assert sorted((m.client_id, m.host) for m in described.members) == [  # Kafka's form: the address
            ("first", "/127.0.0.1"), ("second", "/127.0.0.1")]
    finally:
        for consumer in (first, second):
            if consumer is not None:
                consumer.close()


def test_a_static_member_of_confluent_kafka_comes_back_to_its_partitions_without_a_rebalance(
        cluster: EmbeddedCluster) -> None:
    """KIP-345: a member with a group.instance.id that closes without leaving and comes back within its session
    timeout gets its partitions again, and the other member is never asked to give any up."""
    topic = "static"
    cluster.create_topic(topic, 4, 3)
    events: list[tuple[str, str, list[int]]] = []
    static = {"session.timeout.ms": 10000}
    stays = _group_member(cluster, "static", "stays", events, topic, **{"group.instance.id": "stays"}, **static)
    leaves = _group_member(cluster, "static", "leaves", events, topic, **{"group.instance.id": "back"}, **static)
    returns = None
    try:
        _poll_until([stays, leaves], lambda: len(_owned(stays)) == len(_owned(leaves)) == 2, "two partitions each")
        kept, held = _owned(stays), _owned(leaves)
        leaves.close()  # a static member's close sends no LeaveGroup
        settled = len(events)
        returns = _group_member(cluster, "static", "returns", events, topic, **{"group.instance.id": "back"},
                                **static)
        _poll_until([stays, returns], lambda: _owned(returns) == held, "the returning member's partitions")
        assert _owned(stays) == kept
        assert [e for e in events[settled:] if e[0] == "stays"] == [], events[settled:]
    finally:
        for consumer in (stays, returns):
            if consumer is not None:
                consumer.close()


@pytest.mark.parametrize("client", ["kafka-python", "confluent-kafka"])
def test_a_consumer_with_a_group_instance_id_that_assigns_its_partitions_commits(cluster: EmbeddedCluster,
                                                                                 topic: str, client: str) -> None:
    """Outside group management, kafka-python and librdkafka still send their group.instance.id with generation -1;
    Kafka takes the commit into an empty group since KAFKA-14201, and so does kafkalite."""
    group = f"static-assign-{client}"
    if client == "kafka-python":
        from kafka import KafkaConsumer, OffsetAndMetadata, TopicPartition as KpTopicPartition

        consumer = KafkaConsumer(bootstrap_servers=cluster.kafka_bootstrap_servers, group_id=group,
                                 group_instance_id="instance-1", enable_auto_commit=False)
        try:
            consumer.assign([KpTopicPartition(topic, 0)])
            consumer.commit({KpTopicPartition(topic, 0): OffsetAndMetadata(3, "", -1)})
        finally:
            consumer.close()
    else:
        from confluent_kafka import Consumer, TopicPartition as CkTopicPartition

        consumer = Consumer({"bootstrap.servers": cluster.kafka_bootstrap_servers, "group.id": group,
                             "group.instance.id": "instance-1", "enable.auto.commit": False})
        try:
            consumer.assign([CkTopicPartition(topic, 0, 0)])
            [committed] = consumer.commit(offsets=[CkTopicPartition(topic, 0, 3)], asynchronous=False)
            assert committed.error is None
        finally:
            consumer.close()
    with cluster.admin() as admin:
        offsets = admin.list_group_offsets(group)
    assert {tp: o.committed for tp, o in offsets.items()} == {NativeTopicPartition(topic, 0): 3}
