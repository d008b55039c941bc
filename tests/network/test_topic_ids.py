"""Topic ids (KIP-516) on the KAFKA listener, and the batched versions of FindCoordinator and OffsetFetch: what
kafka-python sends when pinned to a Kafka release from 2.4 to 3.0, and what newer clients pick when they negotiate.

These run on the real clock, as the listener's other wire tests: the kernel moves the bytes. Nothing sleeps;
timeouts are safety nets.
"""

from __future__ import annotations

import uuid

import trio

from kafkalite.cluster import Cluster
from kafkalite.common import errors
from kafkalite.common.records import Record
from kafkalite.common.types import ZERO_UUID, TopicPartition, uuid_bytes
from kafkalite.coordination.kafka_zk import topic_path
from kafkalite.network.kafka.protocol import (
    CreatePartitionsRequest, CreateTopicsRequest, DeleteTopicsRequest, FetchRequest, Message, MetadataRequest,
    OffsetCommitRequest, OffsetFetchRequest, entry,
)
from tests.network.test_kafka_wire import SAFETY_TIMEOUT, call, kafka_port
from tests.test_controller_operations import admin_tool

CONFIG = {"zookeeper.session.timeout.ms": 2000}
DYNAMIC_TOPIC_CONFIG, DEFAULT_CONFIG = 1, 5  # DescribeConfigs' config sources, as CreateTopics v5+ gives them


def creatable(name: str, partitions: int = 2, replication: int = 2, **configs: str) -> Message:
    return entry(CreateTopicsRequest, "CreatableTopic", name=name, num_partitions=partitions,
                 replication_factor=replication, assignments=[], configs=[
                     entry(CreateTopicsRequest, "CreatableTopic.CreatableTopicConfig", name=key, value=value)
                     for key, value in configs.items()])


async def create(port: int, *topics: Message, validate_only: bool = False) -> list[Message]:
    answer = await call(port, 19, 7, topics=list(topics), timeout_ms=10000, validate_only=validate_only)
    return list(answer.topics)


async def metadata(port: int, version: int, *topics: tuple[str | None, uuid.UUID | None]) -> Message:
    return await call(port, 3, version, topics=[
        entry(MetadataRequest, "MetadataRequestTopic", name=name, topic_id=topic_id) for name, topic_id in topics],
        allow_auto_topic_creation=False, include_cluster_authorized_operations=False,
        include_topic_authorized_operations=False)


async def ids_on_every_broker(cluster: Cluster, *names: str) -> set[tuple[str, uuid.UUID | None]]:
    """(name, id) of each topic, as Metadata v10 answers on every live broker."""
    found = set()
    for broker in cluster.live_broker_ids:
        answer = await metadata(kafka_port(cluster, broker), 10, *((name, None) for name in names))
        assert all(t.error_code == 0 for t in answer.topics), answer
        found |= {(t.name, t.topic_id) for t in answer.topics}
    return found


async def delete(port: int, *topics: tuple[str | None, uuid.UUID | None]) -> list[tuple[str | None, object, int]]:
    answer = await call(port, 20, 6, timeout_ms=10000, topics=[
        entry(DeleteTopicsRequest, "DeleteTopicState", name=name, topic_id=topic_id) for name, topic_id in topics])
    return [(r.name, r.topic_id, r.error_code) for r in answer.responses]


async def test_every_topic_has_an_id_that_create_metadata_and_delete_carry_and_that_outlives_failovers() -> None:
    """Kafka 2.8's topic ids: created with the topic, kept in its znode through restarts, controller failovers,
    added partitions and moves, answered by every broker; a topic is found and deleted by its id; a topic
    created again under the same name is another topic, with another id."""
    with trio.fail_after(SAFETY_TIMEOUT):
        async with Cluster(brokers=3, config=CONFIG, seed=31) as cluster:
            port = kafka_port(cluster, 1)
            [a, b] = await create(port, creatable("a", **{"retention.ms": "90000"}), creatable("b", 1, 3))
            assert (a.error_code, a.num_partitions, a.replication_factor) == (0, 2, 2)
            assert a.topic_id is not None and b.topic_id is not None and a.topic_id != b.topic_id
            configs = {c.name: (c.value, c.config_source, c.read_only) for c in a.configs}
            assert configs["retention.ms"] == ("90000", DYNAMIC_TOPIC_CONFIG, False)
            assert configs["cleanup.policy"] == ("delete", DEFAULT_CONFIG, False)
            [again, checked] = await create(port, creatable("a"), creatable("c", 4, 1), validate_only=True)
            assert (again.error_code, again.configs, again.topic_id) == (errors.TOPIC_ALREADY_EXISTS.code, None, None)
            assert (checked.error_code, checked.num_partitions, checked.topic_id) == (0, 4, None)
            assert {c.name for c in checked.configs} == set(configs) and "c" not in cluster.topics()
            assert await ids_on_every_broker(cluster, "a", "b") == {("a", a.topic_id), ("b", b.topic_id)}
            assert uuid_bytes(cluster.topic_id("a")) == a.topic_id.bytes

            # added partitions and a move rewrite the topic znode: the id stays
            grown = await call(port, 37, 3, timeout_ms=10000, validate_only=False, topics=[
                entry(CreatePartitionsRequest, "CreatePartitionsTopic", name="a", count=3, assignments=None)])
            assert [r.error_code for r in grown.results] == [0]
            await cluster.reassign_partitions({TopicPartition("a", 0): [3, 1]})
            for broker in (1, 2, 3):
                await cluster.shutdown_broker(broker)
                await cluster.restart_broker(broker)
            old_controller = cluster.controller_id
            await cluster.expire_session(old_controller)
            await cluster.wait_until(lambda: cluster.controller_id not in (None, old_controller), timeout=10,
                                     interval=0.01)
            await cluster.wait_until(lambda: all(cluster.broker(n).metadata_cache.topic_id("a") != ZERO_UUID
                                                 for n in cluster.live_broker_ids), timeout=10, interval=0.01)
            assert await ids_on_every_broker(cluster, "a", "b") == {("a", a.topic_id), ("b", b.topic_id)}

            # v12 finds topics by id: an unknown one first, with a null name, then the known ones
            unknown = uuid.uuid4()
            found = await metadata(port, 12, (None, unknown), (None, a.topic_id))
            assert [(t.error_code, t.name, t.topic_id, len(t.partitions)) for t in found.topics] == [
                (errors.UNKNOWN_TOPIC_ID.code, None, unknown, 0), (0, "a", a.topic_id, 3)]
            # before v12 an id, or a null name, refuses the whole request, as Kafka does
            for version, asked in ((11, [("a", a.topic_id), ("b", None)]), (10, [(None, None)])):
                refused = await metadata(port, version, *asked)
                assert [(t.error_code, t.name) for t in refused.topics] == [
                    (errors.INVALID_REQUEST.code, name or "") for name, _ in asked]
                assert refused.brokers == [] and refused.controller_id == -1

            # DeleteTopics v6: by id or by name, never both
            both = await delete(port, ("a", a.topic_id), ("b", None))
            assert both == [("a", a.topic_id, errors.INVALID_REQUEST.code), ("b", None, errors.INVALID_REQUEST.code)]
            assert {"a", "b"} <= set(cluster.topics())
            assert await delete(port, (None, a.topic_id), (None, unknown), ("b", None)) == [
                ("a", a.topic_id, 0), (None, unknown, errors.UNKNOWN_TOPIC_ID.code), ("b", None, 0)]
            await cluster.wait_until(lambda: not {"a", "b"} & set(cluster.topics()), timeout=10, interval=0.01)
            [recreated] = await create(port, creatable("a"))
            assert recreated.topic_id not in (None, a.topic_id)
            gone = await metadata(port, 12, (None, a.topic_id))
            assert [(t.error_code, t.name) for t in gone.topics] == [(errors.UNKNOWN_TOPIC_ID.code, None)]


async def test_a_topic_znode_written_without_an_id_gets_one_from_the_controller() -> None:
    """As Kafka's controller gives an id to a topic that a tool created before 2.8, and writes it back: the
    znode keeps its assignment, and every broker answers the id the znode now holds."""
    with trio.fail_after(SAFETY_TIMEOUT):
        async with Cluster(brokers=2, config=CONFIG, seed=32) as cluster, admin_tool(cluster) as tool:
            tool.session.multi(tool.create_topic_ops("old", {0: [1, 2], 1: [2, 1]}, {}))
            await cluster.wait_until(lambda: all(cluster.broker(n).metadata_cache.partition_count("old") == 2
                                                 for n in cluster.live_broker_ids), timeout=10, interval=0.01)
            topic_id, assignment = tool.get_topic_id_and_assignment("old")
            assert topic_id is not None and assignment == {0: (1, 2), 1: (2, 1)}
            assert tool.get_data(topic_path("old"))[0]["version"] == 3
            [(name, answered)] = await ids_on_every_broker(cluster, "old")
            assert name == "old" and answered == uuid.UUID(bytes=uuid_bytes(topic_id))


async def test_find_coordinator_and_offset_fetch_answer_several_keys_and_groups_at_once() -> None:
    """FindCoordinator v4 (KIP-699) and OffsetFetch v8 (KIP-709), which Kafka 3.0 clients send: each key and each
    group answered on its own, with its own error."""
    with trio.fail_after(SAFETY_TIMEOUT):
        async with Cluster(brokers=3, config=CONFIG, seed=33) as cluster:
            port = kafka_port(cluster, 1)
            await create(port, creatable("t", 2, 2))

            async def coordinators(key_type: int) -> list[Message]:
                return list((await call(port, 10, 4, key_type=key_type, coordinator_keys=["g1", "g2"])).coordinators)

            # the first request creates __consumer_offsets, answered COORDINATOR_NOT_AVAILABLE until it has leaders
            assert {c.error_code for c in await coordinators(0)} <= {0, errors.COORDINATOR_NOT_AVAILABLE.code}
            cache = cluster.broker(1).metadata_cache

            def offsets_led() -> bool:
                count = cache.partition_count("__consumer_offsets") or 0
                return count > 0 and all(cache.get_partition_info(TopicPartition("__consumer_offsets", p)).leader >= 0
                                         for p in range(count))

            await cluster.wait_until(offsets_led, timeout=10, interval=0.01)
            found = await coordinators(0)
            assert [(c.key, c.error_code) for c in found] == [("g1", 0), ("g2", 0)]
            for c in found:
                assert c.port == kafka_port(cluster, c.node_id)
            assert [(c.key, c.error_code) for c in await coordinators(1)] == [
                ("g1", errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED.code),
                ("g2", errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED.code)]
            odd = await call(port, 10, 4, key_type=7, coordinator_keys=["g1"])
            assert [(c.error_code, "key type 7" in c.error_message) for c in odd.coordinators] == [
                (errors.INVALID_REQUEST.code, True)]
            g1 = next(c for c in found if c.key == "g1")
            committed = await call(kafka_port(cluster, g1.node_id), 8, 8, group_id="g1",
                                   generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
                                   retention_time_ms=-1, topics=[
                                       entry(OffsetCommitRequest, "OffsetCommitRequestTopic", name="t", partitions=[
                                           entry(OffsetCommitRequest,
                                                 "OffsetCommitRequestTopic.OffsetCommitRequestPartition",
                                                 partition_index=1, committed_offset=0, committed_leader_epoch=-1,
                                                 committed_metadata="m")])])
            assert [p.error_code for t in committed.topics for p in t.partitions] == [0]
            answer = await call(kafka_port(cluster, g1.node_id), 9, 8, require_stable=False, groups=[
                entry(OffsetFetchRequest, "OffsetFetchRequestGroup", group_id="g1", topics=[
                    entry(OffsetFetchRequest, "OffsetFetchRequestGroup.OffsetFetchRequestTopics", name="t",
                          partition_indexes=[0, 1])]),
                entry(OffsetFetchRequest, "OffsetFetchRequestGroup", group_id="g2", topics=None),
                entry(OffsetFetchRequest, "OffsetFetchRequestGroup", group_id="", topics=None)])
            by_group = {g.group_id: g for g in answer.groups}
            assert by_group[""].error_code == errors.INVALID_GROUP_ID.code  # beside groups that are answered
            g2_coordinator = next(c.node_id for c in found if c.key == "g2")
            assert by_group["g1"].error_code == 0
            assert [(p.partition_index, p.committed_offset, p.metadata) for t in by_group["g1"].topics
                    for p in t.partitions] == [(0, -1, ""), (1, 0, "m")]
            assert by_group["g2"].error_code == (0 if g2_coordinator == g1.node_id else errors.NOT_COORDINATOR.code)
            assert list(by_group["g2"].topics) == []


async def fetch_by_id(port: int, version: int, *topics: uuid.UUID | None) -> list[tuple[object, int, int, int]]:
    """A consumer's Fetch from offset 0 of partition 0 of each topic named by id: per topic in the answer, (its id,
    error, high watermark, records' bytes)."""
    answer = await call(port, 1, version, replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20,
                        isolation_level=0, session_id=0, session_epoch=-1, forgotten_topics_data=[], rack_id="",
                        topics=[entry(FetchRequest, "FetchTopic", topic_id=topic_id, partitions=[
                            entry(FetchRequest, "FetchTopic.FetchPartition", partition=0, current_leader_epoch=-1,
                                  fetch_offset=0, last_fetched_epoch=-1, log_start_offset=-1,
                                  partition_max_bytes=1 << 20)]) for topic_id in topics])
    return [(t.topic_id, p.error_code, p.high_watermark, len(p.records or b"")) for t in answer.responses
            for p in t.partitions]


async def test_a_fetch_from_version_13_names_topics_by_id_and_an_id_gone_is_unknown() -> None:
    """Fetch v13-15 (KIP-516), which Java's client and librdkafka pick: records of the topic the id names; an id
    no topic has, the zero id, and the id of a topic deleted and created again under the same name get
    UNKNOWN_TOPIC_ID (Kafka's cue for a client to refresh its metadata) beside the partitions that are served."""
    with trio.fail_after(SAFETY_TIMEOUT):
        async with Cluster(brokers=1, config=CONFIG, seed=34) as cluster:
            port = kafka_port(cluster, 1)
            [a] = await create(port, creatable("a", 1, 1))
            await cluster.produce("a", 0, [Record(None, b"one", 1_700_000_000_000)])
            unknown = uuid.uuid4()
            for version in (13, 14, 15):
                answered = await fetch_by_id(port, version, unknown, a.topic_id, None)
                assert [(topic_id, error, hw) for topic_id, error, hw, _ in answered] == [
                    (unknown, errors.UNKNOWN_TOPIC_ID.code, -1), (a.topic_id, 0, 1),
                    (None, errors.UNKNOWN_TOPIC_ID.code, -1)]
                assert answered[1][3] > 0  # the record batch
            assert await delete(port, ("a", None)) == [("a", None, 0)]
            await cluster.wait_until(lambda: "a" not in cluster.topics(), timeout=10, interval=0.01)
            [again] = await create(port, creatable("a", 1, 1))
            assert [(topic_id, error) for topic_id, error, _, _ in await fetch_by_id(port, 13, a.topic_id)] == [
                (a.topic_id, errors.UNKNOWN_TOPIC_ID.code)]
            assert [(topic_id, error, hw) for topic_id, error, hw, _ in await fetch_by_id(port, 13, again.topic_id)] \
                == [(again.topic_id, 0, 0)]
