"""Request faults (`Cluster.fail_requests`) on a real three-broker cluster, with kafkalite's own clients: what the
client sees, what the broker did, which requests a fault takes and which it leaves, and careless arguments."""

from __future__ import annotations

import logging
import math
from collections.abc import AsyncIterator

import pytest
import trio

from kafkalite.client import Admin, Consumer, NewTopic, Producer, TopicPartition
from kafkalite.cluster import Cluster
from kafkalite.common import errors
from kafkalite.common.records import Record
from kafkalite.network.requests import ApiKey

pytestmark = pytest.mark.usefixtures("autojump_clock")

TOPIC, OTHER = "orders", "audit"
TP = TopicPartition(TOPIC, 0)


@pytest.fixture
async def cluster() -> AsyncIterator[Cluster]:
    async with Cluster(brokers=3, config={"replica.lag.time.max.ms": 10000}, seed=7) as running:
        await running.create_topic(TOPIC, partitions=1, replication_factor=3)
        await running.create_topic(OTHER, partitions=1, replication_factor=3)
        yield running


async def values(cluster: Cluster, topic: str = TOPIC) -> list[tuple[int, bytes | None]]:
    """What the partition holds, read by the harness (which faults leave alone unless asked)."""
    return [(offset, record.value) for offset, record in await cluster.fetch_all(topic, 0)]


async def send(producer: Producer, value: bytes, topic: str = TOPIC) -> int:
    return (await (await producer.send(topic, value, partition=0))).offset


async def test_a_retriable_error_is_retried_and_the_record_written_once(cluster: Cluster) -> None:
    fault = cluster.fail_requests("Produce", errors.NOT_LEADER_OR_FOLLOWER, times=2)
    async with Producer(cluster) as producer:
        assert await send(producer, b"a") == 0
    assert (fault.hits, fault.active) == (2, False)
    assert await values(cluster) == [(0, b"a")]


async def test_a_fatal_error_reaches_the_application_with_its_message(cluster: Cluster) -> None:
    fault = cluster.fail_requests("Produce", "INVALID_REQUIRED_ACKS", message="acks refused by the test")
    async with Producer(cluster) as producer:
        with pytest.raises(errors.InvalidRequiredAcksError, match="acks refused by the test"):
            await send(producer, b"a")
        assert fault.hits == 1
        assert await send(producer, b"b") == 0  # the fault is spent: the broker serves as before
    assert await values(cluster) == [(0, b"b")]


async def test_an_error_kafkalites_clients_do_not_know_is_named_in_the_message_they_report(cluster: Cluster) -> None:
    """Its name was lost: the producer reported UNKNOWN_SERVER_ERROR "a fault the test injected" and nothing more."""
    cluster.fail_requests("Produce", "TOPIC_AUTHORIZATION_FAILED")
    async with Producer(cluster) as producer:
        with pytest.raises(errors.UnknownServerError, match=r"TOPIC_AUTHORIZATION_FAILED \(error code 29\), a fault "
                                                            r"the test injected \(Cluster.fail_requests\)"):
            await send(producer, b"a")


@pytest.mark.parametrize("drop", ["request", "response"])
async def test_a_dropped_connection_is_retried_and_an_idempotent_producer_writes_once(cluster: Cluster,
                                                                                      drop: str) -> None:
    """"response" is the lost acknowledgement: the broker appended, the producer never heard, and sent again."""
    fault = cluster.fail_requests("Produce", drop=drop)  # type: ignore[arg-type]
    async with Producer(cluster) as producer:
        assert await send(producer, b"a") == 0
        assert await send(producer, b"b") == 1
    assert fault.hits == 1
    assert await values(cluster) == [(0, b"a"), (1, b"b")]


async def test_a_producer_retries_init_producer_id_and_without_one_produces_without_idempotence(
        cluster: Cluster, caplog: pytest.LogCaptureFixture) -> None:
    """InitProducerId answered with an error a retry may cure is asked again; answered UNSUPPORTED_VERSION, as by a
    broker that grants no producer ids, the producer says so and goes on without idempotence rather than not at
    all: its batches carry no producer id."""
    loading = cluster.fail_requests("InitProducerId", errors.COORDINATOR_LOAD_IN_PROGRESS, times=2)
    async with Producer(cluster) as producer:
        assert await send(producer, b"a") == 0
        assert producer.idempotent and producer.producer_id >= 0
        granted = producer.producer_id
    assert loading.hits == 2
    refused = cluster.fail_requests("InitProducerId", errors.UNSUPPORTED_VERSION, message="not here")
    with caplog.at_level(logging.WARNING, logger="kafkalite.client.producer"):
        async with Producer(cluster) as producer:
            assert await send(producer, b"b") == 1
            assert not producer.idempotent and producer.producer_id == -1
    assert refused.hits == 1
    assert "do not grant producer ids (UNSUPPORTED_VERSION: not here); producing without idempotence" in caplog.text
    log = cluster.log_manager(cluster.leader_for(TOPIC, 0)).get_log(TP)  # type: ignore[union-attr]
    assert [(b.base_offset, b.producer_id) for b in log.read(0, 1 << 20)] == [(0, granted), (1, -1)]


async def test_a_lost_acknowledgement_duplicates_a_record_without_idempotence(cluster: Cluster) -> None:
    cluster.fail_requests("Produce", drop="response")
    async with Producer(cluster, {"enable.idempotence": False, "acks": "all"}) as producer:
        assert await send(producer, b"a") == 1  # the retry's offset: the first append stands too
    assert await values(cluster) == [(0, b"a"), (1, b"a")]


async def test_a_delay_holds_requests_on_trios_clock_until_the_fault_is_removed(cluster: Cluster) -> None:
    await cluster.produce(TOPIC, 0, [Record(None, b"a")])
    fault = cluster.fail_requests("Fetch", delay=2.5, times=None)
    async with Consumer(cluster, {"auto.offset.reset": "earliest", "fetch.max.wait.ms": 100}) as consumer:
        consumer.assign([TP])
        started = trio.current_time()
        records = await consumer.poll(10)
        assert [r.value for r in records] == [b"a"]
        assert trio.current_time() - started >= 2.5
        assert fault.hits >= 1 and fault.active
        fault.remove()
        assert not fault.active
        hits = fault.hits
        await cluster.produce(TOPIC, 0, [Record(None, b"b")])
        started = trio.current_time()
        assert [r.value for r in await consumer.poll(10)] == [b"b"]
        assert trio.current_time() - started < 1 and fault.hits == hits


async def test_a_request_held_past_the_clients_timeout_is_abandoned_and_retried(cluster: Cluster) -> None:
    """The producer gives up on its request after request.timeout.ms and sends it again; the held one, abandoned
    with its connection, is never served, and the record is written once."""
    held = cluster.fail_requests("Produce", delay=60)
    async with Producer(cluster, {"request.timeout.ms": 5000}) as producer:
        started = trio.current_time()
        assert await send(producer, b"a") == 0
        assert 5 <= trio.current_time() - started < 60
    assert held.hits == 1
    await trio.sleep(60)
    assert await values(cluster) == [(0, b"a")]


async def test_a_fault_on_a_broker_outlives_its_restart(cluster: Cluster) -> None:
    """Faults are the cluster's, not a broker incarnation's: a restarted broker consults the same table."""
    leader = cluster.leader_for(TOPIC, 0)
    fault = cluster.fail_requests("ListOffsets", errors.NOT_LEADER_OR_FOLLOWER, brokers=[leader], times=None)
    await cluster.kill_broker(leader)
    await cluster.restart_broker(leader)
    await cluster.wait_until(lambda: set(cluster.partition_state(TOPIC, 0).isr) == {1, 2, 3}, timeout=60)
    await cluster.elect_preferred_leaders()
    assert cluster.leader_for(TOPIC, 0) == leader
    async with Consumer(cluster, {"auto.offset.reset": "latest"}) as consumer:
        consumer.assign([TP])
        with trio.move_on_after(3):
            await consumer.position(TP)
        assert fault.hits > 0  # the reset kept meeting the fault on the restarted leader
        fault.remove()
        assert await consumer.position(TP) == 0


async def test_end_faults_leaves_a_whole_cluster_with_what_was_written(cluster: Cluster) -> None:
    await cluster.produce(TOPIC, 0, [Record(None, b"a")])
    cluster.fail_requests("Produce", errors.NOT_LEADER_OR_FOLLOWER, times=None)
    cluster.partition_network({1}, {2, 3})
    cluster.pause_broker(2)
    await cluster.kill_broker(3)
    await cluster.end_faults()
    assert cluster.request_faults.faults == () and cluster.live_broker_ids == [1, 2, 3]
    await cluster.wait_until(lambda: set(cluster.partition_state(TOPIC, 0).isr) == {1, 2, 3}, timeout=60)
    async with Producer(cluster) as producer:
        assert await send(producer, b"b") == 1
    assert await values(cluster) == [(0, b"a"), (1, b"b")]


async def test_faults_take_only_the_topics_brokers_and_client_named(cluster: Cluster) -> None:
    leader = cluster.leader_for(TOPIC, 0)
    follower = next(b for b in cluster.live_broker_ids if b != leader)
    elsewhere = cluster.fail_requests("Produce", errors.NOT_LEADER_OR_FOLLOWER, brokers=[follower], times=None)
    other_topic = cluster.fail_requests("Produce", errors.NOT_LEADER_OR_FOLLOWER, topics=[OTHER], times=None)
    other_client = cluster.fail_requests("Produce", errors.NOT_LEADER_OR_FOLLOWER, client_id="someone-else",
                                         times=None)
    async with Producer(cluster, {"client.id": "me"}) as producer:
        assert await send(producer, b"a") == 0
    assert elsewhere.hits == other_topic.hits == other_client.hits == 0
    mine = cluster.fail_requests("Produce", errors.NOT_LEADER_OR_FOLLOWER, client_id="me", topics=[TOPIC],
                                 brokers=[leader])
    async with Producer(cluster, {"client.id": "me"}) as producer:
        assert await send(producer, b"b") == 1
    assert mine.hits == 1 and elsewhere.hits == other_topic.hits == other_client.hits == 0
    cluster.clear_request_faults()
    assert not any(f.active for f in (elsewhere, other_topic, other_client))


async def test_the_clusters_own_traffic_is_left_alone_unless_asked_for(cluster: Cluster) -> None:
    """A fault on every Fetch fails the consumer's fetches only; the followers keep the ISR whole and the high
    watermark moving. With cluster_traffic=True the followers' fetches fail too, and they drop out of the ISR
    after replica.lag.time.max.ms; once the fault is gone they catch up and return."""
    consumers_only = cluster.fail_requests("Fetch", errors.NOT_LEADER_OR_FOLLOWER, times=None)
    await cluster.produce(TOPIC, 0, [Record(None, b"a")])
    await trio.sleep(15)
    assert set(cluster.partition_state(TOPIC, 0).isr) == {1, 2, 3}
    assert cluster.high_watermark(TOPIC, 0) == 1
    assert await values(cluster) == [(0, b"a")]  # the harness reads through the fault
    assert consumers_only.hits == 0
    consumers_only.remove()
    leader = cluster.leader_for(TOPIC, 0)
    followers = cluster.fail_requests("Fetch", errors.NOT_LEADER_OR_FOLLOWER, brokers=[leader], times=None,
                                      cluster_traffic=True)
    await cluster.wait_until(lambda: cluster.partition_state(TOPIC, 0).isr == (leader,), timeout=60)
    assert followers.hits > 0
    followers.remove()
    await cluster.wait_until(lambda: set(cluster.partition_state(TOPIC, 0).isr) == {1, 2, 3}, timeout=60)


async def test_a_metadata_error_keeps_the_brokers_and_is_retried(cluster: Cluster) -> None:
    fault = cluster.fail_requests("Metadata", errors.LEADER_NOT_AVAILABLE, topics=[TOPIC], times=3)
    response = await cluster.metadata(1, [TOPIC, OTHER])
    assert {t.name: t.error_code for t in response.topics} == {TOPIC: 0, OTHER: 0}  # the harness is not taken
    async with Producer(cluster) as producer:
        assert await send(producer, b"a") == 0
    assert fault.hits == 3


async def test_a_heartbeat_told_of_a_rebalance_makes_the_member_rejoin_and_read_on(cluster: Cluster) -> None:
    for i in range(5):
        await cluster.produce(TOPIC, 0, [Record(None, f"v{i}".encode())])
    joins = cluster.fail_requests("JoinGroup", delay=0.001, times=None)  # a delay alone: a counter of requests
    async with Consumer(cluster, {"group.id": "g", "auto.offset.reset": "earliest",
                                  "heartbeat.interval.ms": 500}) as consumer:
        consumer.subscribe([TOPIC])
        read = []
        while len(read) < 3:
            read += [r.offset for r in await consumer.poll(1)]
        await consumer.commit()
        first_joins = joins.hits
        heartbeat = cluster.fail_requests("Heartbeat", errors.REBALANCE_IN_PROGRESS)
        while len(read) < 5 or not heartbeat.hits or joins.hits == first_joins:
            read += [r.offset for r in await consumer.poll(1)]
    assert read == [0, 1, 2, 3, 4]
    assert joins.hits > first_joins


async def test_the_broker_serves_every_request_type_again_after_its_fault(cluster: Cluster) -> None:
    """A dropped connection on the first request of every type clients send: a producer, a group consumer and
    an admin get through each, and nothing written before is lost."""
    await cluster.produce(TOPIC, 0, [Record(None, b"before")])
    faults = [cluster.fail_requests(api, drop="request") for api in ApiKey
              if api is not ApiKey.API_VERSIONS and api not in (ApiKey.LEADER_AND_ISR, ApiKey.STOP_REPLICA,
                                                               ApiKey.UPDATE_METADATA, ApiKey.CONTROLLED_SHUTDOWN)]
    async with Producer(cluster) as producer:
        assert await send(producer, b"after") == 1
    async with Consumer(cluster, {"group.id": "g", "auto.offset.reset": "earliest",
                                  "session.timeout.ms": 10000}) as consumer:
        consumer.subscribe([TOPIC])
        read: list[bytes | None] = []
        with trio.fail_after(60):
            while len(read) < 2:
                read += [r.value for r in await consumer.poll(1)]
        await consumer.commit()
    async with Admin(cluster) as admin:
        await admin.create_topics([NewTopic("new", 2, 3)])
        await admin.create_partitions({"new": 3})
        # The consumer's LeaveGroup was dropped: as from Kafka, it stays a member until its session times out.
        assert (await admin.describe_groups(["g"]))["g"].state == "Stable"
        await trio.sleep(10.5)
        assert (await admin.describe_groups(["g"]))["g"].state == "Empty"
        assert [g.group_id for g in await admin.list_groups()] == ["g"]
        assert (await admin.list_group_offsets("g"))[TP].committed == 2
        await admin.alter_group_offsets("g", {TP: 1})
        assert (await admin.describe_configs(topics=[TOPIC]))[("topic", TOPIC)]["cleanup.policy"].value == "delete"
        await admin.alter_topic_configs({TOPIC: {"retention.ms": 60000}})
        assert (await admin.list_offsets({TP: "latest"}))[TP].offset == 2
        assert await admin.delete_records({TP: 1}) == {TP: 1}
        assert set(await admin.describe_log_dirs([1])) == {1}
        await admin.delete_topics(["new"])
    assert read == [b"before", b"after"]
    assert [(o, r.value) for o, r in await cluster.fetch(TOPIC, 0, 1)] == [(1, b"after")]
    met = {f.api for f in faults if f.hits}
    assert met >= {ApiKey.METADATA, ApiKey.INIT_PRODUCER_ID, ApiKey.PRODUCE, ApiKey.FIND_COORDINATOR,
                   ApiKey.JOIN_GROUP, ApiKey.SYNC_GROUP, ApiKey.OFFSET_FETCH, ApiKey.FETCH, ApiKey.OFFSET_COMMIT,
                   ApiKey.LEAVE_GROUP, ApiKey.CREATE_TOPICS, ApiKey.CREATE_PARTITIONS, ApiKey.DESCRIBE_GROUPS,
                   ApiKey.LIST_GROUPS, ApiKey.DESCRIBE_CONFIGS, ApiKey.ALTER_CONFIGS,
                   ApiKey.LIST_OFFSETS, ApiKey.DELETE_RECORDS, ApiKey.DESCRIBE_LOG_DIRS, ApiKey.DELETE_TOPICS}, met


@pytest.mark.parametrize(("call", "error", "words"), [
    (lambda c: c.fail_requests("Produc", errors.NOT_LEADER_OR_FOLLOWER), ValueError, "no API 'Produc'"),
    (lambda c: c.fail_requests(18, errors.NOT_LEADER_OR_FOLLOWER), TypeError, "Kafka API name"),
    (lambda c: c.fail_requests("ApiVersions", errors.NOT_LEADER_OR_FOLLOWER), ValueError, "answered by the listener"),
    (lambda c: c.fail_requests("LeaderAndIsr", errors.NOT_CONTROLLER), ValueError, "cluster_traffic=True"),
    (lambda c: c.fail_requests("Produce", errors.NONE), ValueError, "NONE is not an error"),
    (lambda c: c.fail_requests("Produce", "NOT_AN_ERROR"), ValueError, "no Kafka error 'NOT_AN_ERROR'"),
    (lambda c: c.fail_requests("Produce", 40000), ValueError, "none of Kafka's"),
    (lambda c: c.fail_requests("Produce", -5), ValueError, "none of Kafka's"),
    (lambda c: c.fail_requests("Produce", 1.5), TypeError, "ErrorCode"),
    (lambda c: c.fail_requests("Produce", errors.NOT_LEADER_OR_FOLLOWER, drop="request"), ValueError, "not both"),
    (lambda c: c.fail_requests("Produce", drop="both"), ValueError, "drop must be"),
    (lambda c: c.fail_requests("Produce"), ValueError, "does nothing"),
    (lambda c: c.fail_requests("Produce", delay=-1), ValueError, "delay must be"),
    (lambda c: c.fail_requests("Produce", delay=math.nan), ValueError, "delay must be"),
    (lambda c: c.fail_requests("Produce", delay=math.inf), ValueError, "delay must be"),
    (lambda c: c.fail_requests("Produce", delay=True), ValueError, "delay must be"),
    (lambda c: c.fail_requests("Produce", delay=1, times=0), ValueError, "times must be"),
    (lambda c: c.fail_requests("Produce", delay=1, times=True), ValueError, "times must be"),
    (lambda c: c.fail_requests("Produce", delay=1, topics=TOPIC), TypeError, "collection of topic names"),
    (lambda c: c.fail_requests("JoinGroup", delay=1, topics=[TOPIC]), ValueError, "JoinGroup requests name no"),
    (lambda c: c.fail_requests("Produce", delay=1, brokers=[9]), ValueError, "no broker 9"),
    (lambda c: c.fail_requests("Produce", delay=1, brokers=2), TypeError, "collection of broker ids"),
    (lambda c: c.fail_requests("Produce", delay=1, client_id=7), TypeError, "client_id must be a str"),
])
async def test_careless_arguments_are_refused_naming_what_is_wrong(cluster: Cluster, call: object,
                                                                   error: type[Exception], words: str) -> None:
    with pytest.raises(error, match=words):
        call(cluster)  # type: ignore[operator]
    assert cluster.request_faults.faults == ()


async def test_apis_are_named_as_kafka_names_them_in_any_case(cluster: Cluster) -> None:
    for name, key in [("OffsetForLeaderEpoch", ApiKey.OFFSET_FOR_LEADER_EPOCH), ("initproducerid",
                                                                                 ApiKey.INIT_PRODUCER_ID),
                      ("LIST_OFFSETS", ApiKey.LIST_OFFSETS), (ApiKey.FETCH, ApiKey.FETCH)]:
        assert cluster.fail_requests(name, delay=1).api is key
    assert cluster.fail_requests("Produce", errors.NotLeaderOrFollowerError).error is errors.NOT_LEADER_OR_FOLLOWER
    for error in (29, "TOPIC_AUTHORIZATION_FAILED", "topic_authorization_failed"):  # Kafka's clients know it
        assert (cluster.fail_requests("Produce", error).error.name, cluster.request_faults.faults[-1].error.code) == (
            "TOPIC_AUTHORIZATION_FAILED", 29)
    with pytest.raises(ValueError, match="no Kafka error 'NO_SUCH_ERROR'"):
        cluster.fail_requests("Produce", "NO_SUCH_ERROR")
