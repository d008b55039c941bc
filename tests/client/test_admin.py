"""The admin client: topics, cluster description, offsets, and Kafka's error codes for bad requests."""

from __future__ import annotations

from functools import partial
from typing import Any

import pytest
import trio

from kafkalite.client import Admin, NewTopic, Producer
from kafkalite.cluster import Cluster
from kafkalite.common import errors
from kafkalite.common.config import config_text
from kafkalite.common.records import Record
from kafkalite.common.types import TopicPartition
from kafkalite.network.requests import DEFAULT_CONFIG_SOURCE, STATIC_BROKER_CONFIG_SOURCE, TOPIC_CONFIG_SOURCE

pytestmark = pytest.mark.usefixtures("autojump_clock")


async def test_create_describe_and_delete_topics(autojump_clock: Any, cluster: Cluster, bootstrap: Any) -> None:
    async with Admin(bootstrap) as admin:
        await admin.create_topics([NewTopic("orders", 3, 2), NewTopic("audit", 1, 3, {"retention.ms": 60000})])
        await cluster.wait_until(lambda: all(cluster.leader_for("orders", p) >= 0 for p in range(3)))
        described = await admin.describe_topics(["orders", "audit"])
        orders = described["orders"]
        assert [p.partition for p in orders.partitions] == [0, 1, 2]
        for p in orders.partitions:
            assert len(p.replicas) == 2 and p.leader in p.replicas and set(p.isr) <= set(p.replicas)
        assert len(described["audit"].partitions[0].replicas) == 3
        assert orders.topic_id == cluster.topic_id("orders") != described["audit"].topic_id
        assert {"orders", "audit"} <= set(await admin.list_topics())
        with pytest.raises(errors.UnknownTopicOrPartitionError):
            await admin.describe_topics(["missing"])
        await admin.delete_topics(["audit"])


@pytest.mark.parametrize(("topic", "error"), [
    (NewTopic("bad/name", 1, 1), errors.InvalidTopicError),
    (NewTopic("zero", 0, 1), errors.InvalidPartitionsError),
    (NewTopic("wide", 1, 4), errors.InvalidReplicationFactorError),
    (NewTopic("conf", 1, 1, {"min.insync.replicas": "many"}), errors.InvalidConfigError),
    (NewTopic("typo", 1, 1, {"retention.msec": "1"}), errors.InvalidConfigError),
])
async def test_bad_topics_get_kafkas_error_codes(autojump_clock: Any, bootstrap: Any, topic: NewTopic, error: type) -> None:
    async with Admin(bootstrap) as admin:
        with pytest.raises(error) as raised:
            await admin.create_topics([topic])
        assert raised.value.message


async def test_creating_an_existing_topic_fails(autojump_clock: Any, bootstrap: Any) -> None:
    async with Admin(bootstrap) as admin:
        await admin.create_topics([NewTopic("twice", 1, 1)])
        with pytest.raises(errors.TopicAlreadyExistsError):
            await admin.create_topics([NewTopic("twice", 1, 1)])


async def test_validate_only_creates_nothing(autojump_clock: Any, bootstrap: Any) -> None:
    async with Admin(bootstrap) as admin:
        await admin.create_topics([NewTopic("dry", 1, 1)], validate_only=True)
        assert "dry" not in await admin.list_topics()


async def test_describe_cluster(autojump_clock: Any, cluster: Cluster, bootstrap: Any) -> None:
    async with Admin(bootstrap) as admin:
        description = await admin.describe_cluster()
    assert [b.node_id for b in description.brokers] == [1, 2, 3]
    assert description.controller_id == cluster.controller_id
    assert description.cluster_id


async def test_list_offsets(autojump_clock: Any, cluster: Cluster, bootstrap: Any) -> None:
    await cluster.create_topic("offsets", partitions=2, replication_factor=3)
    async with Producer(bootstrap) as producer:
        for i in range(5):
            await producer.send("offsets", b"x", partition=0, timestamp=1000 * (i + 1))
    tp0, tp1 = TopicPartition("offsets", 0), TopicPartition("offsets", 1)
    async with Admin(bootstrap) as admin:
        latest = await admin.list_offsets({tp0: "latest", tp1: "latest"})
        earliest = await admin.list_offsets({tp0: "earliest"})
        by_time = await admin.list_offsets({tp0: 3000})
    assert (latest[tp0].offset, latest[tp1].offset, earliest[tp0].offset) == (5, 0, 0)
    assert by_time[tp0].offset == 2


async def test_describe_log_dirs_lists_each_broker_s_replicas_and_their_sizes(
        autojump_clock: Any, cluster: Cluster, bootstrap: Any) -> None:
    await cluster.create_topic("dirs", partitions=2, replication_factor=2)
    await cluster.produce("dirs", 0, [Record(None, b"x" * 100) for _ in range(10)])
    placement = {p.partition: p.replicas for p in await cluster.describe_topic("dirs")}
    async with Admin(bootstrap) as admin:
        described = await admin.describe_log_dirs()
        assert await admin.describe_log_dirs([2]) == {2: described[2]}
        with pytest.raises(errors.BrokerNotAvailableError, match=r"no live broker \[9\]; the live brokers are "
                                                                 r"\[1, 2, 3\]"):
            await admin.describe_log_dirs([2, 9])
    assert sorted(described) == [1, 2, 3]
    sizes: dict[int, set[int]] = {0: set(), 1: set()}
    for broker, dirs in described.items():
        [(log_dir, replicas)] = dirs.items()
        assert log_dir == f"memory:broker-{broker}"
        held = {tp.partition: size for tp, size in replicas.items() if tp.topic == "dirs"}
        assert set(held) == {p for p, replicas_of in placement.items() if broker in replicas_of}
        for partition, size in held.items():
            sizes[partition].add(size)
    assert len(sizes[0]) == 1 and sizes[0].pop() > 1000  # both replicas hold the same ten records
    assert sizes[1] == {0}


async def test_list_offsets_of_the_largest_timestamp(autojump_clock: Any, cluster: Cluster, bootstrap: Any) -> None:
    """KIP-734: the first record with the largest timestamp, wherever it is; an empty partition answers -1."""
    await cluster.create_topic("stamps", partitions=2, replication_factor=3)
    async with Producer(bootstrap) as producer:
        for stamp in (5000, 9000, 2000, 9000, 7000):
            await producer.send("stamps", b"x", partition=0, timestamp=stamp)
    tp0, tp1 = TopicPartition("stamps", 0), TopicPartition("stamps", 1)
    async with Admin(bootstrap) as admin:
        found = await admin.list_offsets({tp0: "max_timestamp", tp1: "max_timestamp"})
    assert (found[tp0].offset, found[tp0].timestamp) == (1, 9000)
    assert (found[tp1].offset, found[tp1].timestamp) == (-1, -1)


async def test_group_offsets_lag_is_the_end_minus_the_committed_offset_negative_past_the_end(
        autojump_clock: Any, cluster: Cluster, bootstrap: Any) -> None:
    """As kafka-consumer-groups reports it (ConsumerGroupCommand.getLag): an offset committed past the log end
    (the log was truncated under it, or it was set there) shows how far past, not a lag of 0."""
    await cluster.create_topic("lagging", partitions=2, replication_factor=3)
    await cluster.produce("lagging", 0, [Record(None, b"x") for _ in range(10)])
    await cluster.produce("lagging", 1, [Record(None, b"x") for _ in range(10)])
    tp0, tp1 = TopicPartition("lagging", 0), TopicPartition("lagging", 1)
    async with Admin(bootstrap) as admin:
        await admin.alter_group_offsets("lagging-g", {tp0: 4, tp1: 25})
        offsets = await admin.list_group_offsets("lagging-g")
    assert {tp: (o.committed, o.log_end_offset, o.lag) for tp, o in offsets.items()} == {
        tp0: (4, 10, 6), tp1: (25, 10, -15)}


async def test_partitions_reassignment_and_elections(autojump_clock: Any, cluster: Cluster, bootstrap: Any) -> None:
    async with Admin(bootstrap) as admin:
        await admin.create_topics([NewTopic("grow", 1, 2)])
        await admin.create_partitions({"grow": 3})
        assert len((await admin.describe_topics(["grow"]))["grow"].partitions) == 3
        with pytest.raises(errors.InvalidPartitionsError):
            await admin.create_partitions({"grow": 2})
        tp = TopicPartition("grow", 0)
        current = (await admin.describe_topics(["grow"]))["grow"].partitions[0].replicas
        target = [b for b in (1, 2, 3) if b not in current] + [current[0]]
        await admin.alter_partition_reassignments({tp: target})
        with trio.fail_after(60):
            while list((await admin.describe_topics(["grow"]))["grow"].partitions[0].replicas) != target:
                await trio.sleep(0.1)
        assert await admin.list_partition_reassignments() == {}
        with pytest.raises(errors.InvalidReplicaAssignmentError):
            await admin.alter_partition_reassignments({tp: []})
        results = await admin.elect_leaders("preferred", [tp])
        assert results[tp] in (errors.NONE.code, errors.ELECTION_NOT_NEEDED.code)
        await cluster.wait_until(lambda: cluster.leader_for("grow", 0) == target[0], timeout=60)


async def test_describe_and_alter_topic_configs(autojump_clock: Any, cluster: Cluster, bootstrap: Any) -> None:
    async with Admin(bootstrap) as admin:
        await admin.create_topics([NewTopic("conf", 1, 3, {"retention.ms": 60000})])
        configs = await admin.describe_configs(["conf"], [1])
        topic = configs[("topic", "conf")]
        assert topic["retention.ms"].value == "60000" and not topic["retention.ms"].is_default
        assert topic["min.insync.replicas"].value == "1" and topic["min.insync.replicas"].is_default
        assert configs[("broker", "1")]["broker.id"].value == "1" and configs[("broker", "1")]["broker.id"].read_only
        assert topic["retention.ms"].synonyms == []  # not asked for
        asked = await admin.describe_configs(["conf"], [1], include_synonyms=True)
        assert [(s.name, s.value, s.source) for s in asked[("topic", "conf")]["retention.ms"].synonyms] == [
            ("retention.ms", "60000", TOPIC_CONFIG_SOURCE), ("log.retention.ms", "604800000", DEFAULT_CONFIG_SOURCE)]
        assert [(s.name, s.value, s.source) for s in asked[("broker", "1")]["replica.lag.time.max.ms"].synonyms] == [
            ("replica.lag.time.max.ms", "10000", STATIC_BROKER_CONFIG_SOURCE),
            ("replica.lag.time.max.ms", "30000", DEFAULT_CONFIG_SOURCE)]
        assert asked[("broker", "1")]["broker.rack"].synonyms == []  # no default: none listed, as in Kafka
        await admin.alter_topic_configs({"conf": {"min.insync.replicas": 4}})  # more than the 3 replicas

        def everywhere(value: int) -> bool:
            return all(cluster.broker(b).replica_manager.get_partition(TopicPartition("conf", 0)).min_insync_replicas
                       == value for b in cluster.live_broker_ids)

        await cluster.wait_until(lambda: everywhere(4), timeout=30)
        with pytest.raises(errors.NotEnoughReplicasError):
            await cluster.produce("conf", 0, [Record(None, b"x")])
        await admin.alter_topic_configs({"conf": {}})  # back to the defaults
        await cluster.wait_until(lambda: everywhere(1), timeout=30)
        assert (await admin.describe_configs(["conf"]))[("topic", "conf")]["retention.ms"].is_default
        for configs_, error in (({"conf": {"retention.msec": 1}}, errors.InvalidConfigError),
                                ({"missing": {}}, errors.UnknownTopicOrPartitionError)):
            with pytest.raises(error):
                await admin.alter_topic_configs(configs_)
        with pytest.raises(errors.UnknownTopicOrPartitionError):
            await admin.describe_configs(["missing"])


async def test_every_topic_config_of_kafkas_that_kafkalite_keeps_round_trips(autojump_clock: Any, cluster: Cluster,
                                                                               bootstrap: Any) -> None:
    """A topic created with configs copied from a production topic: the ones about files on disk, compression
    levels, the message format, reassignment throttles and tiered storage, which kafkalite has no use for, are
    validated with Kafka's ranges and rules, kept and described like the others."""
    copied = {"segment.index.bytes": "2097152", "index.interval.bytes": "8192", "segment.jitter.ms": "60000",
              "file.delete.delay.ms": "1000", "flush.messages": "10000", "flush.ms": "1000", "preallocate": "true",
              "compression.type": "zstd", "retention.ms": "600000", "compression.zstd.level": "-5",
              "compression.gzip.level": "9", "compression.lz4.level": "17", "message.downconversion.enable": "false",
              "leader.replication.throttled.replicas": "0:1,0:2", "follower.replication.throttled.replicas": "*",
              "remote.storage.enable": "false", "local.retention.ms": "-1", "local.retention.bytes": "1000",
              "remote.log.copy.disable": "true", "remote.log.delete.on.disable": "true",
              "message.format.version": "2.8-IV1"}
    async with Admin(bootstrap) as admin:
        await admin.create_topics([NewTopic("copied", 1, 3, copied)])
        described = (await admin.describe_configs(["copied"]))[("topic", "copied")]
        assert {name: entry.value for name, entry in described.items() if not entry.is_default} == copied
        assert (described["flush.ms"].value, described["preallocate"].value) == ("1000", "true")
        assert (described["flush.messages"].is_default, described["segment.index.bytes"].is_default) == (False, False)
        for name, bad, message in [("segment.index.bytes", "3", "must be at least 4"),
                                   ("flush.messages", "0", "must be at least 1"),
                                   ("preallocate", "yes", "expected true or false"),
                                   ("compression.type", "brotli", "must be one of uncompressed, zstd, lz4"),
                                   ("compression.gzip.level", "0", "must be -1 .the codec's default. or from 1 to 9"),
                                   ("compression.zstd.level", "23", "must be at most 22"),
                                   ("leader.replication.throttled.replicas", "0:1,broker-2",
                                    "must be the literal '\\*' or a list of replicas in the following format"),
                                   ("remote.storage.enable", "true",
                                    "Tiered Storage functionality is disabled in the broker"),
                                   ("local.retention.bytes", "-3", "must be at least -2"),
                                   ("message.format.version", "latest", "must be a Kafka version")]:
            with pytest.raises(errors.InvalidConfigError, match=f"configuration {name}: {message}"):
                await admin.create_topics([NewTopic("refused", 1, 3, {name: bad})])
        assert "refused" not in await admin.list_topics()
        await cluster.produce("copied", 0, [Record(None, b"x")])  # a topic like any other
        assert [r.value for _, r in await cluster.fetch("copied", 0, 0)] == [b"x"]


async def test_incremental_alter_changes_only_the_named_configs(autojump_clock: Any, cluster: Cluster,
                                                                 bootstrap: Any) -> None:
    """IncrementalAlterConfigs: the other overrides stay, None deletes one, and alters of different properties
    sent at once all land (AlterConfigs would keep only the last one's set)."""
    async with Admin(bootstrap) as admin:
        await admin.create_topics([NewTopic("inc", 1, 3, {"retention.ms": 60000, "segment.ms": 90000,
                                                          "retention.bytes": 10**9})])
        await admin.alter_topic_configs({"inc": {"retention.ms": 1000, "segment.ms": None, "min.insync.replicas": 2}},
                                        incremental=True)
        kept = {"retention.ms": "1000", "min.insync.replicas": "2", "retention.bytes": "1000000000"}

        async def overrides() -> dict[str, str]:
            described = (await admin.describe_configs(["inc"]))[("topic", "inc")]
            return {name: entry.value for name, entry in described.items() if not entry.is_default}

        assert await overrides() == kept

        def applied(name: str, value: object) -> bool:
            return all(cluster.broker(b).replica_manager.get_partition(TopicPartition("inc", 0)).topic_config[name]
                       == value for b in cluster.live_broker_ids)

        await cluster.wait_until(lambda: applied("retention.ms", 1000) and applied("segment.ms", 7 * 24 * 3600_000)
                                 and applied("min.insync.replicas", 2), timeout=30)
        await admin.alter_topic_configs({"inc": {"retention.ms": 5}}, incremental=True, validate_only=True)
        for configs, error in (({"inc": {"retention.mss": 1}}, errors.InvalidConfigError),
                               ({"inc": {"retention.ms": -5, "segment.ms": 100}}, errors.InvalidConfigError),
                               ({"missing": {"retention.ms": 1}}, errors.UnknownTopicOrPartitionError)):
            with pytest.raises(error):
                await admin.alter_topic_configs(configs, incremental=True)
        assert await overrides() == kept

        changes = {"segment.ms": 100000, "segment.bytes": 10**8, "max.message.bytes": 2000000,
                   "message.timestamp.type": "LogAppendTime", "unclean.leader.election.enable": True}
        async with trio.open_nursery() as nursery:
            for name, value in changes.items():
                nursery.start_soon(partial(admin.alter_topic_configs, {"inc": {name: value}}, incremental=True))
        assert await overrides() == {**kept, **{name: config_text(value) for name, value in changes.items()}}


@pytest.mark.parametrize(("call", "error", "message"), [
    (lambda a: a.delete_topics("orders"), TypeError, r"delete_topics\(\) takes a collection of topic names, not str"),
    (lambda a: a.describe_topics([b"orders"]), TypeError, r"describe_topics\(\) takes topic names \(str\), not bytes"),
    (lambda a: a.create_topics(NewTopic("t", 1, 1)), TypeError, r"create_topics\(\) takes a collection of NewTopic"),
    (lambda a: a.create_topics(["t"]), TypeError, r"create_topics\(\) takes NewTopic items, not 't'"),
    (lambda a: a.create_topics([NewTopic(7, 1, 1)]), TypeError,  # type: ignore[arg-type]
     "a NewTopic name must be a str, not int"),
    (lambda a: a.create_topics([NewTopic("t", "3", 1)]), TypeError,  # type: ignore[arg-type]
     "num_partitions must be an int"),
    (lambda a: a.create_partitions({"t": "3"}), TypeError, r"int partition counts, not '3' for 't'"),
    (lambda a: a.create_partitions([("t", 3)]), TypeError, r"create_partitions\(\) takes a mapping"),
    (lambda a: a.elect_leaders("fastest"), ValueError, "election_type must be 'preferred' or 'unclean'"),
    (lambda a: a.alter_partition_reassignments({("t", 0): 2}), TypeError, "a collection of broker ids, not int"),
    (lambda a: a.describe_configs(brokers=["1"]), TypeError, "a broker id in describe_configs\\(\\) must be an int"),
    (lambda a: a.alter_topic_configs({"t": [("retention.ms", 1)]}), TypeError, "mapping of config names"),
    (lambda a: a.list_offsets({TopicPartition("t", 0): "oldest"}), ValueError,
     "'earliest', 'latest', 'max_timestamp' or a timestamp"),
    (lambda a: a.list_offsets({"t": "latest"}), TypeError, r"list_offsets\(\) takes a TopicPartition"),
    (lambda a: a.describe_log_dirs(["1"]), TypeError, r"a broker id in describe_log_dirs\(\) must be an int"),
])
async def test_wrong_arguments_say_what_was_expected(autojump_clock: Any, call: Any, error: type, message: str) -> None:
    """Checked before anything is sent: `delete_topics("orders")` must not ask to delete topics o, r, d, e, s."""
    async with Admin("127.0.0.1:9") as admin:  # never connected
        with pytest.raises(error, match=message):
            await call(admin)


@pytest.mark.parametrize(("call", "error", "message"), [
    (lambda a: a.create_partitions({"missing": 3}), errors.UnknownTopicOrPartitionError,
     "Topic 'missing' does not exist"),
    (lambda a: a.list_offsets({TopicPartition("t", 9): "latest"}), errors.UnknownTopicOrPartitionError,
     "t-9 does not exist"),
    (lambda a: a.list_offsets({TopicPartition("missing", 0): "earliest"}), errors.UnknownTopicOrPartitionError,
     "missing-0 does not exist"),
    (lambda a: a.delete_records({TopicPartition("t", 9): 0}), errors.UnknownTopicOrPartitionError,
     "t-9 does not exist"),
    (lambda a: a.create_topics([NewTopic("n", 1, 1, {"retention.ms": None})]), errors.InvalidConfigError,
     "Null value not supported for topic configs: retention.ms"),
    (lambda a: a.alter_topic_configs({"t": {"retention.ms": None}}), errors.InvalidRequestError,
     "Null value not supported for : retention.ms"),
])
async def test_what_cannot_succeed_fails_at_once_with_kafkas_error(
        autojump_clock: Any, cluster: Cluster, bootstrap: Any, call: Any, error: type, message: str) -> None:
    """A partition or topic that does not exist, or a null config value (which Kafka's brokers refuse), fails the
    call at once, as in Kafka's admin client; retried, it would fail only after default.api.timeout.ms."""
    await cluster.create_topic("t", partitions=1, replication_factor=1, config={"retention.ms": 60000})
    async with Admin(bootstrap) as admin:
        started = trio.current_time()
        with pytest.raises(error, match=message):
            await call(admin)
        assert trio.current_time() - started < 1
        assert (await admin.describe_configs(["t"]))[("topic", "t")]["retention.ms"].value == "60000"


async def test_list_offsets_asks_leaders_no_older_than_metadata_max_age(
        autojump_clock: Any, cluster: Cluster, bootstrap: Any) -> None:
    """After metadata.max.age.ms the admin client looks leaders up again instead of trying one that has moved."""
    await cluster.create_topic("moving", partitions=1, replication_factor=3)
    tp = TopicPartition("moving", 0)
    async with Admin(bootstrap, metadata_max_age_ms=10_000) as admin:
        await admin.list_offsets({tp: "latest"})
        old_leader = cluster.leader_for("moving", 0)
        await cluster.shutdown_broker(old_leader)
        await trio.sleep(10)
        asked: list[Any] = []
        send = admin._transport.send

        async def recording_send(node: Any, request: Any) -> Any:
            asked.append((node, type(request).__name__))
            return await send(node, request)

        admin._transport.send = recording_send  # type: ignore[method-assign]
        assert (await admin.list_offsets({tp: "latest"}))[tp].offset == 0
    assert [node for node, kind in asked if kind == "ListOffsetsRequest"] == [cluster.leader_for("moving", 0)]


async def _group_with_offsets(cluster: Cluster, bootstrap: Any) -> TopicPartition:
    """Group "g" with offset 1 committed on t-0, which holds two records."""
    await cluster.create_topic("t", partitions=1, replication_factor=3)
    tp = TopicPartition("t", 0)
    async with Producer(bootstrap) as producer:
        for value in (b"a", b"b"):
            await (await producer.send("t", value))
    async with Admin(bootstrap, {"default.api.timeout.ms": 1000}) as admin:
        await admin.alter_group_offsets("g", {tp: 1})
    return tp


async def test_the_steps_of_an_admin_call_share_one_timeout(autojump_clock: Any, cluster: Cluster,
                                                            bootstrap: Any) -> None:
    """default.api.timeout.ms bounds a call whose steps each take less, as Kafka's admin client gives each call
    one deadline: list_group_offsets asks the coordinator, then the leaders. It took the sum of its steps, each
    with a budget of its own (1.4 s here), and so did reset_group_offsets, of six steps."""
    tp = await _group_with_offsets(cluster, bootstrap)
    cluster.fail_requests("OffsetFetch", delay=0.7, times=None)
    cluster.fail_requests("ListOffsets", delay=0.7, times=None)
    async with Admin(bootstrap, {"default.api.timeout.ms": 1000}) as admin:
        for call in (partial(admin.list_group_offsets, "g"), partial(admin.reset_group_offsets, "g", [tp], "latest")):
            started = trio.current_time()
            with pytest.raises(errors.RequestTimedOutError, match="timed out after 1000 ms"):
                await call()
            assert trio.current_time() - started == pytest.approx(1.0)
        cluster.clear_request_faults()
        assert (await admin.list_group_offsets("g"))[tp].committed == 1  # the budget is each call's own


async def test_admin_calls_in_a_row_each_get_the_whole_timeout(autojump_clock: Any, cluster: Cluster,
                                                              bootstrap: Any) -> None:
    tp = await _group_with_offsets(cluster, bootstrap)
    cluster.fail_requests("OffsetFetch", delay=0.4, times=None)
    cluster.fail_requests("ListOffsets", delay=0.4, times=None)
    async with Admin(bootstrap, {"default.api.timeout.ms": 1000}) as admin:
        for _ in range(3):
            started = trio.current_time()
            offsets = await admin.list_group_offsets("g")
            assert offsets[tp].committed == 1 and offsets[tp].log_end_offset == 2 and offsets[tp].lag == 1
            assert trio.current_time() - started == pytest.approx(0.8)


@pytest.mark.parametrize("api, call", [("ListGroups", "list_groups"), ("DescribeLogDirs", "describe_log_dirs")])
async def test_calls_to_every_broker_ask_them_at_once(autojump_clock: Any, cluster: Cluster, bootstrap: Any,
                                                      api: str, call: str) -> None:
    """Three brokers each 0.7 s slow answer within a 1 s timeout, as Kafka's admin client asks them in parallel;
    one after another they needed 2.1 s, past the call's deadline. A broker that fails fails the call."""
    tp = await _group_with_offsets(cluster, bootstrap)
    fault = cluster.fail_requests(api, delay=0.7, times=None)
    async with Admin(bootstrap, {"default.api.timeout.ms": 1000}) as admin:
        started = trio.current_time()
        answer = await getattr(admin, call)()
        assert trio.current_time() - started == pytest.approx(0.7)
        if call == "list_groups":
            coordinator = (await admin.describe_groups(["g"]))["g"].coordinator
            assert [(g.group_id, g.state, g.coordinator) for g in answer] == [("g", "Empty", coordinator)]
        else:
            assert sorted(answer) == [1, 2, 3]
            assert sum(tp in replicas for dirs in answer.values() for replicas in dirs.values()) == 3
        fault.remove()
        cluster.fail_requests(api, "UNKNOWN_SERVER_ERROR", brokers=[2], times=None)
        with pytest.raises(errors.UnknownServerError):
            await getattr(admin, call)()
