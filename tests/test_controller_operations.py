"""Controller operations where they meet each other and the world outside the request path.

The per-feature suites (test_topic_deletion, test_create_partitions, test_reassignment, test_leader_elections)
walk each operation's main road. Here: ISR changes reaching every broker, admin znodes written by a tool rather
than by a request, a deletion meeting a reassignment, a controller moving while a request waits on it, the
rebalance scheduler's lifetime, and bad input to every admin request. Each scenario ends by checking that no
acknowledged record was lost and that replicas agree.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio

from kafkalite.cluster import COORDINATION, Cluster
from kafkalite.common import errors
from kafkalite.common.config import ConfigOp
from kafkalite.common.errors import KafkaError
from kafkalite.common.records import Record
from kafkalite.common.types import TopicPartition
from kafkalite.controller.event_manager import (
    AutoPreferredReplicaLeaderElection,
    ControllerEvent,
)
from kafkalite.coordination.kafka_zk import (
    PREFERRED_REPLICA_ELECTION_PATH,
    REASSIGN_PARTITIONS_PATH,
    KafkaZkClient,
    decode_partition_reassignment,
)
from kafkalite.network.requests import (
    CONSUMER_REPLICA_ID,
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    PREFERRED_ELECTION,
    TOPIC_RESOURCE,
    UNCLEAN_ELECTION,
    AlterableConfig,
    AlterConfigsRequest,
    AlterConfigsResource,
    AlterPartitionReassignmentsRequest,
    ConfigResource,
    CreatableTopic,
    CreatePartitionsRequest,
    CreatePartitionsTopic,
    CreateTopicsRequest,
    DeleteTopicsRequest,
    DescribeConfigsRequest,
    ElectLeadersRequest,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResource,
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListPartitionReassignmentsRequest,
    ReassignablePartition,
)
from kafkalite.testing.checks import assert_replicas_agree, metadata_agrees

CONFIG = {"zookeeper.session.timeout.ms": 6000, "replica.lag.time.max.ms": 10000,
          "auto.leader.rebalance.enable": False}
TP = TopicPartition("t", 0)


def values(n: int, prefix: str = "v") -> list[Record]:
    return [Record(None, f"{prefix}{i}".encode()) for i in range(n)]


async def read_values(cluster: Cluster, topic: str, partition: int = 0) -> list[bytes]:
    return [record.value for _, record in await cluster.fetch_all(topic, partition)]


@asynccontextmanager
async def admin_tool(cluster: Cluster) -> AsyncIterator[KafkaZkClient]:
    """A coordination client of its own, as Kafka's command-line tools write the `/admin` znodes directly."""
    zk = KafkaZkClient(cluster.service, "admin-tool", 60_000)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(zk.run)
        try:
            yield zk
        finally:
            zk.close()
            nursery.cancel_scope.cancel()


def not_controller(cluster: Cluster, *also_not: int) -> int:
    return next(b for b in cluster.broker_ids if b != cluster.controller_id and b not in also_not)


# -- ISR change notifications ------------------------------------------------------------------------------------


async def test_isr_changes_reach_every_broker_metadata_cache(autojump_clock: Any) -> None:
    async with Cluster(brokers=3, config=CONFIG, seed=1) as cluster:
        await cluster.create_topic("t", partitions=1, replication_factor=3, config={"min.insync.replicas": 2})
        await cluster.produce("t", 0, values(5))
        leader = cluster.leader_for("t", 0)
        stalled = not_controller(cluster, leader)
        others = [b for b in cluster.broker_ids if b != stalled]
        cluster.pause_broker(stalled)  # it stops fetching: the leader shrinks the ISR and notifies

        def cached_isr(broker_id: int) -> list[int]:
            info = cluster.broker(broker_id).metadata_cache.get_partition_info(TP)
            return sorted(info.isr) if info is not None else []

        await cluster.wait_until(lambda: stalled not in cluster.partition_state("t", 0).isr, timeout=60)
        await cluster.wait_until(lambda: all(cached_isr(b) == sorted(others) for b in others), timeout=30)
        zk = cluster.controller().zk
        await cluster.wait_until(lambda: not zk.get_isr_change_notifications(), timeout=30)
        assert await cluster.produce("t", 0, values(3, "w")) == 5  # two in sync: acks=-1 still served

        cluster.resume_broker(stalled)  # it catches up: the ISR grows back and every broker hears of it
        await cluster.wait_until(lambda: sorted(cluster.partition_state("t", 0).isr) == [1, 2, 3], timeout=60)
        await cluster.wait_until(lambda: metadata_agrees(cluster, "t", 1), timeout=30)
        assert all(cached_isr(b) == [1, 2, 3] for b in cluster.broker_ids)
        await assert_replicas_agree(cluster, "t")
        assert await read_values(cluster, "t") == [f"v{i}".encode() for i in range(5)] + \
            [f"w{i}".encode() for i in range(3)]


@pytest.mark.parametrize("leaves", ["shutting down", "controlled shutdown", "killed after leaving every ISR"])
async def test_every_brokers_metadata_names_a_gone_brokers_replicas_offline(autojump_clock: Any, leaves: str) -> None:
    """Kafka's UpdateMetadata lists a replica as offline when its broker is not online, which a broker shutting down
    (its controlled shutdown done, the broker not stopped yet) is not; and a broker's failure announces every
    partition it has a replica of, those whose ISR it had already left too (doRemoveReplicasFromIsr returns them).
    Clients read offline replicas from Metadata."""
    async with Cluster(brokers=3, config={"replica.lag.time.max.ms": 1000}, seed=1) as cluster:
        await cluster.create_topic("t", partitions=3, replication_factor=3)
        gone = not_controller(cluster, -1)
        if leaves == "shutting down":
            assert await cluster.broker(gone).controlled_shutdown()
        elif leaves == "controlled shutdown":
            assert await cluster.shutdown_broker(gone)
        else:
            cluster.pause_broker(gone)  # its leaders drop it from their ISRs, then its session expires
            await cluster.wait_until(lambda: all(gone not in cluster.partition_state("t", p).isr for p in range(3)),
                                     timeout=60)
            await cluster.kill_broker(gone)
        left = [b for b in cluster.broker_ids if b != gone]

        def offline(broker_id: int) -> list[list[int]]:
            cache = cluster.broker(broker_id).metadata_cache
            return [list(cache.get_partition_info(TopicPartition("t", p)).offline_replicas)  # type: ignore[union-attr]
                    for p in range(3)]

        still_registered = leaves == "shutting down"
        await cluster.wait_until(lambda: all((gone in cluster.broker(b).metadata_cache.get_alive_broker_ids())
                                             == still_registered for b in left), timeout=60)
        await trio.sleep(1)
        assert {b: offline(b) for b in left} == {b: [[gone]] * 3 for b in left}
        response = await cluster.metadata(left[0], ["t"])
        assert [p.offline_replicas for p in response.topics[0].partitions] == [[gone]] * 3


async def test_a_new_controller_resends_every_state_which_brokers_fence_and_log_once(
        autojump_clock: Any, caplog: pytest.LogCaptureFixture) -> None:
    """A new controller sends every partition's state at the epoch the brokers already have: each broker fences
    them all, changes nothing, and says so in one line with the count and the first ten."""
    async with Cluster(brokers=3, config=CONFIG, seed=1) as cluster:
        await cluster.create_topic("t", partitions=12, replication_factor=3)
        await cluster.produce("t", 0, values(3))
        before = {p: cluster.partition_state("t", p) for p in range(12)}
        old = cluster.controller_id
        caplog.set_level(logging.INFO, logger="kafkalite.server.replica_manager")
        await cluster.expire_session(old)  # type: ignore[arg-type]
        await cluster.wait_until(lambda: cluster.controller_id not in (None, old), timeout=60)
        new = cluster.controller_id
        await cluster.wait_until(lambda: all(cluster.broker(b).metadata_cache.controller_id == new
                                             for b in cluster.live_broker_ids), timeout=60)
        fenced = [r.getMessage() for r in caplog.records if "ignoring LeaderAndIsr" in r.getMessage()]
        assert len(fenced) == len(cluster.live_broker_ids)  # one line per broker, not per partition
        for line in fenced:
            assert "for 12 partition(s)" in line and line.endswith(", ...") and line.count("(t-") == 10, line
        assert {p: cluster.partition_state("t", p) for p in range(12)} == before  # leaders, ISR, epochs unchanged
        assert await read_values(cluster, "t") == [f"v{i}".encode() for i in range(3)]


# -- topic deletion ----------------------------------------------------------------------------------------------


async def test_a_topic_being_deleted_takes_no_writes_and_leaves_no_partition_behind(autojump_clock: Any) -> None:
    async with Cluster(brokers=3, config=CONFIG, seed=2) as cluster:
        for topic, partitions in (("t", 2), ("keep", 1)):
            await cluster.create_topic(topic, partitions=partitions, replication_factor=3)
            for p in range(partitions):
                await cluster.produce(topic, p, values(2))
        down = not_controller(cluster)
        await cluster.kill_broker(down)
        with pytest.raises(errors.RequestTimedOutError):
            await cluster.delete_topic("t", timeout=10)  # waits for the dead broker's replicas
        for p in range(2):
            with pytest.raises(KafkaError):
                await cluster.produce("t", p, values(1, "late"))
        for broker_id in cluster.live_broker_ids:
            metadata = await cluster.metadata(broker_id, ["t"])
            assert metadata.topics[0].error_code == errors.UNKNOWN_TOPIC_OR_PARTITION.code
            assert all(cluster.broker(broker_id).replica_manager.get_partition(TopicPartition("t", p)) is None
                       for p in range(2))

        await cluster.restart_broker(down)  # it still holds the old logs until the controller deletes them
        await cluster.wait_until(lambda: "t" not in cluster.topics(), timeout=60)
        for broker_id in cluster.broker_ids:
            assert cluster.broker(broker_id).replica_manager.get_partition(TopicPartition("t", 0)) is None
            assert cluster.log_manager(broker_id).get_log(TopicPartition("t", 0)) is None
        await cluster.create_topic("t", partitions=1, replication_factor=3)
        assert await cluster.produce("t", 0, values(1, "new")) == 0
        await assert_replicas_agree(cluster, "t")
        assert await read_values(cluster, "t") == [b"new0"]
        await assert_replicas_agree(cluster, "keep")
        assert await read_values(cluster, "keep") == [b"v0", b"v1"]


async def test_delete_answers_not_controller_when_the_controller_moves_before_deletion_completes(
        autojump_clock: Any) -> None:
    async with Cluster(brokers=3, config=CONFIG, seed=3) as cluster:
        await cluster.create_topic("t", partitions=1, replication_factor=3)
        await cluster.produce("t", 0, values(3))
        down = not_controller(cluster)
        await cluster.kill_broker(down)  # deletion cannot complete while it is away
        await cluster.wait_until(lambda: down not in cluster.controller().context.live_brokers, timeout=30)
        old = cluster.controller_id
        answers = []

        async def delete() -> None:
            answers.append(await cluster.transport.send("client", old, DeleteTopicsRequest(["t"], 600_000)))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(delete)
            await cluster.wait_until(lambda: "t" in cluster.controller().context.topics_to_be_deleted)
            await cluster.expire_session(old)  # the controller resigns while the request waits on it
        (answer,) = answers
        assert answer.responses[0].error_code == errors.NOT_CONTROLLER.code
        assert "moved" in answer.responses[0].error_message
        await cluster.wait_until(lambda: cluster.controller_id is not None, timeout=60)
        await cluster.restart_broker(down)
        await cluster.wait_until(lambda: "t" not in cluster.topics(), timeout=60)
        assert all(cluster.log_manager(b).get_log(TP) is None for b in cluster.broker_ids)


async def test_a_topic_being_reassigned_is_deleted_once_the_move_completes(autojump_clock: Any) -> None:
    async with Cluster(brokers=3, config=CONFIG, seed=4) as cluster:
        await cluster.create_topic("t", partitions=1, replication_factor=1)
        await cluster.produce("t", 0, values(3), acks=1)
        owner = cluster.leader_for("t", 0)
        target = not_controller(cluster, owner)
        cluster.pause_broker(target)  # the reassignment waits in its first phase
        response = await cluster.transport.send("client", cluster.controller_id, AlterPartitionReassignmentsRequest(
            [ReassignablePartition("t", 0, [owner, target])]))
        assert response.responses[0].error_code == errors.NONE.code
        with pytest.raises(errors.RequestTimedOutError):
            await cluster.delete_topic("t", timeout=5)
        assert "t" in cluster.topics()  # ineligible for deletion while it moves
        cluster.resume_broker(target)
        await cluster.wait_until(lambda: "t" not in cluster.topics(), timeout=60)
        assert not cluster.controller().context.partitions_being_reassigned
        assert await cluster.list_partition_reassignments() == []
        assert all(cluster.log_manager(b).get_log(TP) is None for b in cluster.broker_ids)


# -- reassignment ------------------------------------------------------------------------------------------------


async def test_reassignment_waits_for_a_target_broker_that_died_and_completes_when_it_returns(
        autojump_clock: Any) -> None:
    async with Cluster(brokers=4, config=CONFIG, seed=5) as cluster:
        await cluster.create_topic("t", partitions=1, replication_factor=2)
        await cluster.produce("t", 0, values(6))
        d = (await cluster.describe_topic("t"))[0]
        target_broker = next(b for b in cluster.broker_ids if b not in d.replicas and b != cluster.controller_id)
        target = [d.replicas[1], target_broker]
        cluster.pause_broker(target_broker)
        response = await cluster.transport.send("client", cluster.controller_id, AlterPartitionReassignmentsRequest(
            [ReassignablePartition("t", 0, target)]))
        assert response.responses[0].error_code == errors.NONE.code
        await cluster.kill_broker(target_broker)
        await cluster.wait_until(lambda: target_broker not in cluster.controller().context.live_brokers, timeout=30)
        ongoing = await cluster.list_partition_reassignments()
        # While moving, the partition is assigned the target replicas followed by the original ones (Kafka's order)
        assert [(o.replicas, o.adding_replicas, o.removing_replicas) for o in ongoing] == \
            [(target + [d.replicas[0]], [target_broker], [d.replicas[0]])]
        assert await cluster.produce("t", 0, values(2, "meanwhile")) == 6  # the old replicas keep serving
        await cluster.restart_broker(target_broker)
        await cluster.wait_until(lambda: cluster.controller().context.partitions_being_reassigned == {}, timeout=60)
        await cluster.wait_for_leader("t", 0)
        assert (await cluster.describe_topic("t"))[0].replicas == tuple(target)
        await assert_replicas_agree(cluster, "t")
        assert await read_values(cluster, "t") == [f"v{i}".encode() for i in range(6)] + [b"meanwhile0", b"meanwhile1"]
        assert cluster.log_manager(d.replicas[0]).get_log(TP) is None


async def test_a_replica_moved_away_while_its_broker_was_down_leaves_no_trace_in_a_new_topic(
        autojump_clock: Any) -> None:
    async with Cluster(brokers=3, config=CONFIG, seed=10) as cluster:
        away = not_controller(cluster)
        stay, spare = [b for b in cluster.broker_ids if b != away]
        response = await cluster.transport.send("client", cluster.controller_id, CreateTopicsRequest(
            [CreatableTopic("t", assignments={0: [away, stay]})]))
        assert response.topics[0].error_code == errors.NONE.code
        await cluster.wait_for_leader("t", 0)
        await cluster.produce("t", 0, values(5))
        await cluster.kill_broker(away)  # its replica is moved off while it is down: no StopReplica reaches it
        await cluster.wait_until(lambda: away not in cluster.controller().context.live_brokers, timeout=30)
        await cluster.reassign_partitions({TP: [stay, spare]})
        await cluster.restart_broker(away)
        await cluster.delete_topic("t")
        response = await cluster.transport.send("client", cluster.controller_id, CreateTopicsRequest(
            [CreatableTopic("t", assignments={0: [away, stay, spare]})]))
        assert response.topics[0].error_code == errors.NONE.code
        assert await cluster.wait_for_leader("t", 0) == away
        assert await cluster.produce("t", 0, values(1, "new")) == 0
        await assert_replicas_agree(cluster, "t")
        assert await read_values(cluster, "t") == [b"new0"]


async def test_admin_znodes_written_by_a_tool_are_carried_out_and_bad_entries_dropped(autojump_clock: Any) -> None:
    async with Cluster(brokers=3, config=CONFIG, seed=6) as cluster, admin_tool(cluster) as tool:
        await cluster.create_topic("t", partitions=2, replication_factor=2)
        for p in range(2):
            await cluster.produce("t", p, values(3))
        d = (await cluster.describe_topic("t"))[0]
        outsider = next(b for b in cluster.broker_ids if b not in d.replicas)
        target = [outsider, d.replicas[0]]
        tool.create_persistent(REASSIGN_PARTITIONS_PATH, {"version": 1, "partitions": [
            {"topic": "t", "partition": 0, "replicas": target},
            {"topic": "t", "partition": 7, "replicas": [1]},  # no such partition
            {"topic": "t", "partition": 1, "replicas": []},  # nowhere
            {"topic": "t", "partition": 1, "replicas": [1, 1]},  # twice the same broker
        ]})
        await cluster.wait_until(lambda: not tool.exists(REASSIGN_PARTITIONS_PATH), timeout=60)
        assert (await cluster.describe_topic("t"))[0].replicas == tuple(target)
        assert len((await cluster.describe_topic("t"))[1].replicas) == 2

        moved = cluster.leader_for("t", 1)
        await cluster.shutdown_broker(moved)  # leadership of partition 1 moves off its preferred replica
        await cluster.restart_broker(moved)
        await cluster.wait_until(lambda: moved in cluster.partition_state("t", 1).isr, timeout=60)
        tool.create_persistent(PREFERRED_REPLICA_ELECTION_PATH, {"partitions": [{"topic": "t", "partition": 1}]})
        await cluster.wait_until(lambda: not tool.exists(PREFERRED_REPLICA_ELECTION_PATH), timeout=60)
        assert cluster.leader_for("t", 1) == (await cluster.describe_topic("t"))[1].replicas[0]

        tool.create_persistent(PREFERRED_REPLICA_ELECTION_PATH, ["not", "a", "request"])
        tool.create_persistent(REASSIGN_PARTITIONS_PATH, 42)
        await cluster.wait_until(lambda: not tool.exists(PREFERRED_REPLICA_ELECTION_PATH)
                                 and not tool.exists(REASSIGN_PARTITIONS_PATH), timeout=60)
        for p in range(2):
            await cluster.wait_for_leader("t", p)
            assert await cluster.produce("t", p, values(1, "after")) == 3
            await assert_replicas_agree(cluster, "t", p)
            assert await read_values(cluster, "t", p) == [b"v0", b"v1", b"v2", b"after0"]


async def test_the_admin_znode_lists_a_tools_moves_alone_and_a_request_takes_a_listed_partition_over(
        autojump_clock: Any) -> None:
    """As in Kafka since KIP-455: a move a request starts is not written to `/admin/reassign_partitions`, which
    lists what a tool wrote there; a request for a partition it lists takes the partition off it (the latest
    reassignment wins), and the tool's other moves stay listed until they complete."""
    async with Cluster(brokers=4, config=CONFIG, seed=9) as cluster, admin_tool(cluster) as tool:
        slow = not_controller(cluster)
        others = [b for b in cluster.broker_ids if b != slow]
        response = await cluster.transport.send("client", cluster.controller_id, CreateTopicsRequest(
            [CreatableTopic("t", assignments={p: others[:2] for p in range(3)})]))
        assert response.topics[0].error_code == errors.NONE.code
        for p in range(3):
            await cluster.wait_for_leader("t", p)
        cluster.pause_broker(slow)  # every move to it waits in its first phase

        def listed() -> dict[TopicPartition, list[int]] | None:
            found = tool.get_data(REASSIGN_PARTITIONS_PATH)
            return None if found is None else decode_partition_reassignment(found[0])[0]

        response = await cluster.transport.send("client", cluster.controller_id, AlterPartitionReassignmentsRequest(
            [ReassignablePartition("t", 2, [slow, others[0]])]))
        assert response.responses[0].error_code == errors.NONE.code
        assert listed() is None
        tool.create_persistent(REASSIGN_PARTITIONS_PATH, {"version": 1, "partitions": [
            {"topic": "t", "partition": p, "replicas": [slow, others[0]]} for p in (0, 1)]})
        await cluster.wait_until(lambda: len(cluster.controller().context.partitions_being_reassigned) == 3)
        assert listed() == {TopicPartition("t", 0): [slow, others[0]], TopicPartition("t", 1): [slow, others[0]]}
        response = await cluster.transport.send("client", cluster.controller_id, AlterPartitionReassignmentsRequest(
            [ReassignablePartition("t", 0, None)]))  # cancelled: back to where it was
        assert response.responses[0].error_code == errors.NONE.code
        assert listed() == {TopicPartition("t", 1): [slow, others[0]]}
        assert sorted(o.partition for o in await cluster.list_partition_reassignments()) == [1, 2]

        cluster.resume_broker(slow)
        await cluster.wait_until(lambda: not cluster.controller().context.partitions_being_reassigned, timeout=60)
        assert listed() is None and not tool.exists(REASSIGN_PARTITIONS_PATH)
        assert [list(d.replicas) for d in await cluster.describe_topic("t")] == [
            others[:2], [slow, others[0]], [slow, others[0]]]


# -- leader elections --------------------------------------------------------------------------------------------


async def test_rebalance_scheduler_stops_when_the_controller_resigns(autojump_clock: Any) -> None:
    config = {**CONFIG, "auto.leader.rebalance.enable": True, "leader.imbalance.check.interval.seconds": 5}
    async with Cluster(brokers=3, config=config, seed=7) as cluster:
        await cluster.create_topic("t", partitions=3, replication_factor=3)
        old = cluster.controller_id
        assert old is not None
        ticks: dict[int, list[bool]] = {b: [] for b in cluster.broker_ids}
        for broker_id in cluster.broker_ids:
            controller = cluster.controller(broker_id)
            put = controller.event_manager.put

            def recording_put(event: ControllerEvent, put: Any = put, controller: Any = controller,
                              broker_id: int = broker_id) -> None:
                if isinstance(event, AutoPreferredReplicaLeaderElection):
                    ticks[broker_id].append(controller.is_active)
                put(event)

            controller.event_manager.put = recording_put  # type: ignore[method-assign]
        await trio.sleep(12)
        assert len(ticks[old]) >= 2 and all(ticks[old])
        cluster.partition_network({old}, {*cluster.broker_ids, COORDINATION} - {old})
        await cluster.wait_until(lambda: cluster.controller_id not in (None, old), timeout=60)
        cluster.heal()
        await cluster.wait_until(lambda: not cluster.controller(old).is_active, timeout=60)
        ticks[old].clear()
        new = cluster.controller_id
        ticks[new].clear()
        await trio.sleep(30)
        assert ticks[old] == []
        assert len(ticks[new]) >= 5 and all(ticks[new])


# -- bad input ---------------------------------------------------------------------------------------------------


async def test_bad_admin_requests_get_error_codes_and_messages_and_change_nothing(autojump_clock: Any) -> None:
    async with Cluster(brokers=3, config=CONFIG, seed=8) as cluster:
        await cluster.create_topic("t", partitions=2, replication_factor=2)
        await cluster.produce("t", 0, values(2))
        follower = not_controller(cluster)

        async def send(request: Any, broker_id: int | None = None) -> Any:
            return await cluster.transport.send("client", broker_id or follower, request)

        # ElectLeaders: every partition answered on its own
        response = await send(ElectLeadersRequest(PREFERRED_ELECTION, [("t", 0), ("t", 9), ("nope", 0)]))
        codes = {(r.topic, r.partition): (r.error_code, r.error_message) for r in response.results}
        assert codes[("t", 0)][0] == errors.ELECTION_NOT_NEEDED.code
        assert codes[("t", 9)] == (errors.UNKNOWN_TOPIC_OR_PARTITION.code, "t-9 does not exist")
        assert codes[("nope", 0)][0] == errors.UNKNOWN_TOPIC_OR_PARTITION.code
        response = await send(ElectLeadersRequest(UNCLEAN_ELECTION, [("t", 1)]))
        assert response.results[0].error_code == errors.ELECTION_NOT_NEEDED.code
        response = await send(ElectLeadersRequest(3))
        assert response.error_code == errors.INVALID_REQUEST.code and "election type" in response.error_message

        # CreatePartitions: shrinking, too few or too many assignments, unknown topic, validate_only
        for asked, error in [(CreatePartitionsTopic("t", 1), errors.INVALID_PARTITIONS),
                             (CreatePartitionsTopic("t", 4, [[1, 2]]), errors.INVALID_REPLICA_ASSIGNMENT),
                             (CreatePartitionsTopic("nope", 3), errors.UNKNOWN_TOPIC_OR_PARTITION),
                             (CreatePartitionsTopic("t", 3, [[1, 9]]), errors.INVALID_REPLICA_ASSIGNMENT)]:
            response = await send(CreatePartitionsRequest([asked]))
            assert [(r.error_code, bool(r.error_message)) for r in response.results] == [(error.code, True)]
        response = await send(CreatePartitionsRequest([CreatePartitionsTopic("t", 5)], validate_only=True))
        assert response.results[0].error_code == errors.NONE.code
        assert len(await cluster.describe_topic("t")) == 2

        # AlterPartitionReassignments and ListPartitionReassignments
        response = await send(AlterPartitionReassignmentsRequest([
            ReassignablePartition("t", 0, []), ReassignablePartition("nope", 0, [1]),
            ReassignablePartition("t", 1, [1, 2, 2])]))
        assert [r.error_code for r in response.responses] == [
            errors.INVALID_REPLICA_ASSIGNMENT.code, errors.UNKNOWN_TOPIC_OR_PARTITION.code,
            errors.INVALID_REPLICA_ASSIGNMENT.code]
        assert all(r.error_message for r in response.responses)
        response = await send(ListPartitionReassignmentsRequest([("t", 0), ("nope", 3)]))
        assert response.error_code == errors.NONE.code and response.reassignments == []

        # DeleteTopics: unknown topic, and a bad name
        response = await send(DeleteTopicsRequest(["nope", "bad/name"]))
        assert [r.error_code for r in response.responses] == [errors.UNKNOWN_TOPIC_OR_PARTITION.code] * 2

        for broker_id in cluster.broker_ids:
            response = await send(ElectLeadersRequest(PREFERRED_ELECTION, [("t", 0)]), broker_id)
            assert response.error_code == errors.NONE.code  # every broker forwards to the controller
        assert await cluster.produce("t", 0, values(1, "after")) == 2
        await assert_replicas_agree(cluster, "t")
        assert await read_values(cluster, "t") == [b"v0", b"v1", b"after0"]
        assert sorted(cluster.topics()) == ["t"]


async def test_a_topic_or_resource_named_twice_in_one_request_is_refused_and_nothing_changes(
        autojump_clock: Any) -> None:
    """A topic twice in CreateTopics, CreatePartitions or DeleteTopics, a config resource twice in AlterConfigs or
    IncrementalAlterConfigs, a partition twice in ListOffsets: INVALID_REQUEST in Kafka's words at each place it is
    named, and none of its entries acts; the others in the request do."""
    async with Cluster(brokers=3, config=CONFIG, seed=8) as cluster:
        await cluster.create_topic("t", partitions=2, replication_factor=2, config={"retention.ms": 60000})
        await cluster.produce("t", 0, values(2))
        follower = not_controller(cluster)

        async def send(request: Any, broker_id: int | None = None) -> Any:
            return await cluster.transport.send("client", broker_id or follower, request)

        def answers(results: Any) -> list[tuple[str, int, str | None]]:
            return [(r.name, r.error_code, r.error_message) for r in results]

        response = await send(CreateTopicsRequest([CreatableTopic("new", 1, 1), CreatableTopic("ok", 1, 1),
                                                   CreatableTopic("new", 3, 2)]))
        twice = (errors.INVALID_REQUEST.code, "Found multiple entries for this topic.")
        assert answers(response.topics) == [("new", *twice), ("ok", 0, None), ("new", *twice)]
        response = await send(CreatePartitionsRequest([CreatePartitionsTopic("t", 3), CreatePartitionsTopic("ok", 2),
                                                       CreatePartitionsTopic("t", 4)]))
        twice = (errors.INVALID_REQUEST.code, "Duplicate topic in request.")
        assert answers(response.results) == [("t", *twice), ("ok", 0, None), ("t", *twice)]
        response = await send(DeleteTopicsRequest(["t", "ok", "t"]))
        twice = (errors.INVALID_REQUEST.code, "Duplicate topic name.")
        assert answers(response.responses) == [("t", *twice), ("ok", 0, None), ("t", *twice)]
        await cluster.wait_until(lambda: cluster.topics() == ["t"], timeout=60)
        assert len(await cluster.describe_topic("t")) == 2

        for request in (AlterConfigsRequest([AlterConfigsResource(TOPIC_RESOURCE, "t", {"retention.ms": "1000"}),
                                             AlterConfigsResource(TOPIC_RESOURCE, "t", {})]),
                        IncrementalAlterConfigsRequest([
                            IncrementalAlterConfigsResource(TOPIC_RESOURCE, "t", [
                                AlterableConfig("retention.ms", ConfigOp.SET, "1000")]),
                            IncrementalAlterConfigsResource(TOPIC_RESOURCE, "t", [
                                AlterableConfig("retention.ms", ConfigOp.DELETE, None)])])):
            response = await send(request)
            assert [(r.name, r.error_code, r.error_message) for r in response.results] == \
                [("t", errors.INVALID_REQUEST.code, "Each resource must appear at most once.")] * 2
        response = await send(DescribeConfigsRequest([ConfigResource(TOPIC_RESOURCE, "t", ["retention.ms"])]))
        assert [(c.name, c.value) for c in response.results[0].configs] == [("retention.ms", "60000")]

        leader = cluster.leader_for("t", 0)
        response = await send(ListOffsetsRequest(CONSUMER_REPLICA_ID, [
            ListOffsetsPartition("t", 0, LATEST_TIMESTAMP), ListOffsetsPartition("t", 1, LATEST_TIMESTAMP),
            ListOffsetsPartition("t", 0, EARLIEST_TIMESTAMP)]), leader)
        assert [(p.partition, p.error_code) for p in response.partitions if p.partition == 0] == \
            [(0, errors.INVALID_REQUEST.code)] * 2
        assert await read_values(cluster, "t") == [b"v0", b"v1"]


async def test_create_topics_and_alter_configs_refuse_what_kafka_refuses_in_its_words(autojump_clock: Any) -> None:
    """A null config value, counts given beside an assignment, and a name that differs from an existing topic's
    only in '.' against '_' (Kafka's metrics would mix them up): refused as Kafka's ZkAdminManager and
    AdminZkClient refuse them, validate_only too, and nothing is created. A null value in AlterConfigs, which
    replaces every override, is refused rather than read as "back to the default"."""
    async with Cluster(brokers=3, config=CONFIG, seed=8) as cluster:
        await cluster.create_topic("a.b", partitions=1, replication_factor=1, config={"retention.ms": 60000})

        async def create(*topics: CreatableTopic, validate_only: bool = False) -> list[tuple[str, int, str | None]]:
            response = await cluster.transport.send("client", cluster.controller_id,
                                                    CreateTopicsRequest(list(topics), validate_only=validate_only))
            return [(r.name, r.error_code, r.error_message) for r in response.topics]

        for validate_only in (True, False):
            assert await create(CreatableTopic("n", 1, 1, configs={"retention.ms": None, "segment.ms": "1000",
                                                                   "flush.ms": None}),
                                CreatableTopic("both", 2, assignments={0: [1], 1: [2]}),
                                CreatableTopic("a_b", 1, 1), validate_only=validate_only) == [
                ("n", errors.INVALID_CONFIG.code, "Null value not supported for topic configs: retention.ms,flush.ms"),
                ("both", errors.INVALID_REQUEST.code, "Both numPartitions or replicationFactor and replicasAssignments "
                                                      "were set. Both cannot be used at the same time."),
                ("a_b", errors.INVALID_TOPIC_EXCEPTION.code, "Topic 'a_b' collides with existing topics: a.b")]
        assert await create(CreatableTopic("x_y", 1, 1), CreatableTopic("x.y", 1, 1)) == [
            ("x_y", 0, None),
            ("x.y", errors.INVALID_TOPIC_EXCEPTION.code, "Topic 'x.y' collides with existing topics: x_y")]
        assert await create(CreatableTopic("a.b", 1, 1)) == [
            ("a.b", errors.TOPIC_ALREADY_EXISTS.code, "Topic 'a.b' already exists.")]
        assert await create(CreatableTopic("both-1", assignments={0: [1], 1: [2]})) == [("both-1", 0, None)]
        await cluster.wait_until(lambda: cluster.topics() == ["a.b", "both-1", "x_y"], timeout=60)

        response = await cluster.transport.send("client", cluster.controller_id, AlterConfigsRequest(
            [AlterConfigsResource(TOPIC_RESOURCE, "a.b", {"retention.ms": None, "segment.ms": "1000"})]))
        assert [(r.error_code, r.error_message) for r in response.results] == [
            (errors.INVALID_REQUEST.code, "Null value not supported for : retention.ms")]
        response = await cluster.transport.send("client", cluster.controller_id, DescribeConfigsRequest(
            [ConfigResource(TOPIC_RESOURCE, "a.b", ["retention.ms", "segment.ms"])]))
        assert [(c.name, c.value, c.is_default) for c in response.results[0].configs] == [
            ("retention.ms", "60000", False), ("segment.ms", "604800000", True)]


async def test_elect_leaders_on_a_topic_being_deleted_is_invalid_topic(autojump_clock: Any) -> None:
    async with Cluster(brokers=2, config=CONFIG, seed=9) as cluster:
        await cluster.create_topic("t", partitions=1, replication_factor=2)
        await cluster.kill_broker(not_controller(cluster))
        with pytest.raises(errors.RequestTimedOutError):
            await cluster.delete_topic("t", timeout=5)
        for election_type in (PREFERRED_ELECTION, UNCLEAN_ELECTION):
            response = await cluster.transport.send("client", cluster.controller_id,
                                                    ElectLeadersRequest(election_type, [("t", 0)]))
            assert [(r.error_code, r.error_message) for r in response.results] == \
                [(errors.INVALID_TOPIC_EXCEPTION.code, "topic t is being deleted")]
