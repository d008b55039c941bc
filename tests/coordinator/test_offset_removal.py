"""Committed offsets leaving a group: a deleted topic, DeleteGroups, OffsetDelete and the retention, each as Kafka's
GroupCoordinator does it, and never so that the coordinator's memory and its log disagree (an acknowledged commit
lost, or one that comes back after the coordinator moves)."""

from __future__ import annotations

from typing import Any

import trio

from kafkalite.cluster import Cluster
from kafkalite.common import errors
from kafkalite.common.types import TopicPartition
from kafkalite.coordinator.group_metadata import OffsetAndMetadata
from kafkalite.network.requests import (
    DeleteGroupsRequest, DescribeGroupsRequest, HeartbeatRequest, JoinGroupProtocol, JoinGroupRequest, ListGroupsRequest,
    OffsetCommitPartition, OffsetCommitRequest, OffsetDeleteRequest, OffsetFetchRequest, SyncGroupRequest,
)
from tests.coordinator.conftest import (
    GROUP_CONFIG, coordinator_of, join_request, kill_followers, send, stable_member,
)


async def commit(cluster: Cluster, coordinator: int, group_id: str, offsets: dict[tuple[str, int], int],
                 generation: int = -1, member_id: str = "", client: str = "raw-client") -> list[int]:
    response = await send(cluster, coordinator, OffsetCommitRequest(group_id, generation, member_id, [
        OffsetCommitPartition(topic, partition, offset) for (topic, partition), offset in offsets.items()]),
        client=client)
    return [p.error_code for p in response.partitions]


async def committed(cluster: Cluster, broker_id: int, group_id: str) -> dict[tuple[str, int], int]:
    """Every offset the group has (OffsetFetch of all partitions), asked until the broker has loaded it."""
    with trio.fail_after(60):
        while (response := await send(cluster, broker_id, OffsetFetchRequest(group_id))).error_code:
            await trio.sleep(0.1)
    return {(p.topic, p.partition): p.committed_offset for p in response.partitions}


async def described(cluster: Cluster, coordinator: int, group_id: str) -> str:
    return (await send(cluster, coordinator, DescribeGroupsRequest([group_id]))).groups[0].group_state


async def after_failover(cluster: Cluster, coordinator: int, group_id: str) -> dict[tuple[str, int], int]:
    """Kill the coordinator; the group's offsets as its next coordinator loads them from the log."""
    await cluster.kill_broker(coordinator)
    with trio.fail_after(60):
        while (new := await coordinator_of(cluster, group_id)) == coordinator:
            await trio.sleep(0.5)
    return await committed(cluster, new, group_id)


async def test_a_deleted_topics_offsets_go_from_every_group(autojump_clock: Any, cluster: Cluster) -> None:
    """Kafka's onPartitionsDeleted: a topic created again under the name of a deleted one must not start its groups
    at the old topic's positions (records would be skipped). A group left empty with no offsets goes too."""
    await cluster.create_topic("gone", partitions=2, replication_factor=3)
    coordinator, member_id = await stable_member(cluster)
    assert await commit(cluster, coordinator, "g", {("events", 0): 3, ("gone", 0): 7},
                        generation=1, member_id=member_id) == [0, 0]
    only_gone = "standalone"
    standalone = await coordinator_of(cluster, only_gone)
    assert await commit(cluster, standalone, only_gone, {("gone", 0): 4}) == [0]
    held = cluster.fail_requests("Fetch", delay=2.0, topics=["__consumer_offsets"], cluster_traffic=True, times=None)
    in_flight: list[list[int]] = []  # a first commit of gone-1, written as the topic goes: a tombstone follows it

    async def recommit() -> None:
        in_flight.append(await commit(cluster, coordinator, "g", {("gone", 1): 11}, generation=1,
                                      member_id=member_id, client="late"))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(recommit)
        await trio.sleep(0.5)
        assert not in_flight
        await cluster.delete_topic("gone")
        held.remove()
    assert in_flight == [[0]]
    await cluster.wait_until(lambda: cluster.broker(standalone).group_coordinator.group(only_gone) is None)
    assert await committed(cluster, coordinator, "g") == {("events", 0): 3}
    assert await described(cluster, standalone, only_gone) == "Dead"
    await cluster.create_topic("gone", partitions=2, replication_factor=3)
    assert await committed(cluster, coordinator, "g") == {("events", 0): 3}
    assert await after_failover(cluster, coordinator, "g") == {("events", 0): 3}  # the tombstones are in the log


async def test_a_group_being_deleted_turns_away_commits_and_joins(autojump_clock: Any, cluster: Cluster) -> None:
    """DeleteGroups makes the group Dead before its tombstones are written, as Kafka does: a commit or a join
    meanwhile is told COORDINATOR_NOT_AVAILABLE (retry) instead of being acknowledged and then lost with the group,
    and after the deletion nothing of it is left, in memory or in the log."""
    coordinator = await coordinator_of(cluster, "g")
    assert await commit(cluster, coordinator, "g", {("events", 0): 5}) == [0]
    held = cluster.fail_requests("Fetch", delay=2.0, brokers=[coordinator], topics=["__consumer_offsets"],
                                 cluster_traffic=True, times=None)  # writes wait for the followers
    deletion: list[int] = []
    earlier: list[list[int]] = []  # a commit still being written when the deletion comes: it goes too

    async def delete() -> None:
        response = await send(cluster, coordinator, DeleteGroupsRequest(["g"]), client="admin")
        deletion.append(response.results[0].error_code)

    async def commit_first() -> None:
        earlier.append(await commit(cluster, coordinator, "g", {("events", 1): 6}, client="first"))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(commit_first)
        await trio.sleep(0.1)
        nursery.start_soon(delete)
        await trio.sleep(0.5)
        assert not deletion and await described(cluster, coordinator, "g") == "Dead"
        assert await commit(cluster, coordinator, "g", {("events", 0): 42}) == [errors.COORDINATOR_NOT_AVAILABLE.code]
        joined = await send(cluster, coordinator, join_request("g"))
        assert joined.error_code == errors.COORDINATOR_NOT_AVAILABLE.code
        held.remove()
    assert deletion == [0] and earlier == [[0]]
    assert cluster.broker(coordinator).group_coordinator.group("g") is None
    assert await committed(cluster, coordinator, "g") == {}
    assert await after_failover(cluster, coordinator, "g") == {}


async def test_a_deletion_the_log_never_took_leaves_the_group_as_it_was(autojump_clock: Any) -> None:
    """Tombstones refused before they were appended (too few in-sync replicas) undo the removal: the caller is
    told to retry, and the group, its offsets and its state are as before, as its log says."""
    async with Cluster(brokers=3, config={**GROUP_CONFIG, "min.insync.replicas": 2}, seed=11) as cluster:
        await cluster.create_topic("events", partitions=1, replication_factor=3)
        coordinator = await coordinator_of(cluster, "g")
        assert await commit(cluster, coordinator, "g", {("events", 0): 5}) == [0]
        followers = await kill_followers(cluster, coordinator)
        partition = cluster.broker(coordinator).group_coordinator.partition_for("g")

        refused = await send(cluster, coordinator, DeleteGroupsRequest(["g"]))
        assert refused.results[0].error_code == errors.COORDINATOR_NOT_AVAILABLE.code
        assert await described(cluster, coordinator, "g") == "Empty"
        assert await committed(cluster, coordinator, "g") == {("events", 0): 5}
        deleted = await send(cluster, coordinator, OffsetDeleteRequest("g", [("events", 0)]))
        assert deleted.error_code == errors.COORDINATOR_NOT_AVAILABLE.code
        assert await committed(cluster, coordinator, "g") == {("events", 0): 5}

        for broker_id in followers:
            await cluster.restart_broker(broker_id)
        await cluster.wait_until(lambda: len(cluster.partition_state("__consumer_offsets", partition).isr) == 3,
                                 timeout=60)
        assert (await send(cluster, coordinator, DeleteGroupsRequest(["g"]))).results[0].error_code == 0
        assert await after_failover(cluster, coordinator, "g") == {}


async def test_an_expiry_leaves_an_offset_whose_commit_is_being_written(autojump_clock: Any, cluster: Cluster) -> None:
    """Kafka's pendingOffsetCommits: the retention check passes over an offset while a new commit of it is being
    written. Expired, it would take the group with it (its last offset) and the commit, acknowledged, after."""
    coordinator = await coordinator_of(cluster, "g")
    assert await commit(cluster, coordinator, "g", {("events", 0): 5}) == [0]
    group_coordinator = cluster.broker(coordinator).group_coordinator
    await trio.sleep(group_coordinator.config["offsets.retention.minutes"] * 60 + 60)  # events-0 due to expire
    held = cluster.fail_requests("Fetch", delay=2.0, brokers=[coordinator], topics=["__consumer_offsets"],
                                 cluster_traffic=True, times=None)
    results: list[list[int]] = []

    async def recommit() -> None:
        results.append(await commit(cluster, coordinator, "g", {("events", 0): 42}))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(recommit)
        await trio.sleep(0.5)
        assert not results
        await group_coordinator.cleanup_group_metadata()
        held.remove()
    assert results == [[0]]
    assert await committed(cluster, coordinator, "g") == {("events", 0): 42}
    assert await after_failover(cluster, coordinator, "g") == {("events", 0): 42}


async def test_a_stable_groups_offsets_of_topics_it_no_longer_consumes_expire(autojump_clock: Any,
                                                                               cluster: Cluster) -> None:
    """KIP-496: a Stable consumer group's offsets expire a retention period after their commit when no member
    subscribes to their topic; those of topics it consumes stay as long as the group lives."""
    await cluster.create_topic("other", partitions=1, replication_factor=3)
    coordinator, member_id = await stable_member(cluster)  # subscribed to events
    assert await commit(cluster, coordinator, "g", {("events", 0): 5, ("other", 0): 7}, generation=1,
                        member_id=member_id) == [0, 0]
    group_coordinator = cluster.broker(coordinator).group_coordinator
    retention_s = group_coordinator.config["offsets.retention.minutes"] * 60
    async with trio.open_nursery() as nursery:
        async def heartbeat() -> None:
            while True:
                await send(cluster, coordinator, HeartbeatRequest("g", 1, member_id))
                await trio.sleep(3)

        nursery.start_soon(heartbeat)
        await trio.sleep(retention_s - 60)
        await group_coordinator.cleanup_group_metadata()
        assert await committed(cluster, coordinator, "g") == {("events", 0): 5, ("other", 0): 7}
        await trio.sleep(120)
        await group_coordinator.cleanup_group_metadata()
        assert await committed(cluster, coordinator, "g") == {("events", 0): 5}
        assert await described(cluster, coordinator, "g") == "Stable"
        nursery.cancel_scope.cancel()


async def test_offset_delete_as_kafka(autojump_clock: Any, cluster: Cluster) -> None:
    """OffsetDelete of an empty group's last offset removes the group; a group of another protocol type with
    members has nothing deleted (NON_EMPTY_GROUP), as it says nothing of what it consumes."""
    coordinator = await coordinator_of(cluster, "g")
    assert await commit(cluster, coordinator, "g", {("events", 0): 5, ("events", 1): 6}) == [0, 0]
    first = await send(cluster, coordinator, OffsetDeleteRequest("g", [("events", 0)]))
    assert (first.error_code, [p.error_code for p in first.partitions]) == (0, [0])
    assert await described(cluster, coordinator, "g") == "Empty"
    last = await send(cluster, coordinator, OffsetDeleteRequest("g", [("events", 1)]))
    assert (last.error_code, [p.error_code for p in last.partitions]) == (0, [0])
    assert await described(cluster, coordinator, "g") == "Dead"
    assert [g.group_id for g in (await send(cluster, coordinator, ListGroupsRequest())).groups] == []
    gone = await send(cluster, coordinator, DeleteGroupsRequest(["g"]))
    assert gone.results[0].error_code == errors.GROUP_ID_NOT_FOUND.code

    connect = JoinGroupRequest("g", 10000, 30000, "", "connect", [JoinGroupProtocol("sessioned", b"\x00")],
                               group_instance_id="worker-1")
    joined = await send(cluster, coordinator, connect)
    assert joined.error_code == 0
    synced = await send(cluster, coordinator, SyncGroupRequest("g", 1, joined.member_id, group_instance_id="worker-1"))
    assert synced.error_code == 0
    assert await commit(cluster, coordinator, "g", {("events", 2): 8}, generation=1, member_id=joined.member_id) == [0]
    refused = await send(cluster, coordinator, OffsetDeleteRequest("g", [("events", 2)]))
    assert (refused.error_code, refused.partitions) == (errors.NON_EMPTY_GROUP.code, [])
    assert await committed(cluster, coordinator, "g") == {("events", 2): 8}


async def test_commit_metadata_is_measured_in_java_chars(autojump_clock: Any, cluster: Cluster) -> None:
    """offset.metadata.max.bytes counts UTF-16 code units, as Kafka's `metadata.length()`: 3,000 'é' (6,000 bytes
    of UTF-8) fit in 4,096, 2,049 emoji (4,098 code units) do not."""
    coordinator = await coordinator_of(cluster, "g")
    accented = await send(cluster, coordinator, OffsetCommitRequest("g", -1, "", [
        OffsetCommitPartition("events", 0, 5, committed_metadata="é" * 3000)]))
    assert [p.error_code for p in accented.partitions] == [0]
    emoji = await send(cluster, coordinator, OffsetCommitRequest("g", -1, "", [
        OffsetCommitPartition("events", 0, 6, committed_metadata="\U0001F600" * 2049)]))
    assert [p.error_code for p in emoji.partitions] == [errors.OFFSET_METADATA_TOO_LARGE.code]
    assert await committed(cluster, coordinator, "g") == {("events", 0): 5}


async def test_a_deleted_topics_offsets_the_log_refused_are_removed_once_it_takes_them(autojump_clock: Any) -> None:
    """Tombstones refused for too few in-sync replicas put the offsets back, and are tried again until written:
    nothing else would remove them."""
    async with Cluster(brokers=3, config={**GROUP_CONFIG, "min.insync.replicas": 3}, seed=11) as cluster:
        await cluster.create_topic("gone", partitions=1, replication_factor=1)
        owner = cluster.partition_state("gone", 0).leader
        group_id, coordinator, victim = "", 0, 0
        for n in range(50):  # a group whose coordinator, the controller and gone's replica leave a broker to stop
            group_id = f"group-{n}"
            coordinator = await coordinator_of(cluster, group_id)
            spare = set(cluster.broker_ids) - {coordinator, cluster.controller_id, owner}
            if spare:
                victim = min(spare)
                break
        assert await commit(cluster, coordinator, group_id, {("gone", 0): 7}) == [0]
        partition = cluster.broker(coordinator).group_coordinator.partition_for(group_id)
        await cluster.kill_broker(victim)
        await cluster.wait_until(lambda: len(cluster.partition_state("__consumer_offsets", partition).isr) == 2,
                                 timeout=60)
        await cluster.delete_topic("gone")
        await trio.sleep(5)
        assert await committed(cluster, coordinator, group_id) == {("gone", 0): 7}  # refused, so kept as the log has it
        await cluster.restart_broker(victim)
        await cluster.wait_until(lambda: len(cluster.partition_state("__consumer_offsets", partition).isr) == 3,
                                 timeout=60)
        await trio.sleep(5)
        assert await committed(cluster, coordinator, group_id) == {}
        await cluster.create_topic("gone", partitions=1, replication_factor=3)
        assert await after_failover(cluster, coordinator, group_id) == {}


async def test_a_commit_accepted_before_its_group_was_deleted_is_not_written_after_it(autojump_clock: Any,
                                                                                    cluster: Cluster) -> None:
    """A commit is checked when it arrives and written in a step of its own, which may run after a DeleteGroups
    made the group Dead: written then, after the group's tombstone, it would bring the deleted group back."""
    coordinator = await coordinator_of(cluster, "g")
    assert await commit(cluster, coordinator, "g", {("events", 0): 5}) == [0]
    group_coordinator = cluster.broker(coordinator).group_coordinator
    group = group_coordinator.group("g")
    assert group is not None
    cluster.fail_requests("Fetch", delay=2.0, brokers=[coordinator], topics=["__consumer_offsets"],
                          cluster_traffic=True)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(send, cluster, coordinator, DeleteGroupsRequest(["g"]))
        await trio.sleep(0.5)
        late = OffsetAndMetadata(9, -1, None, 0)
        assert await group_coordinator._store_offsets(group, {TopicPartition("events", 1): late}) \
            is errors.COORDINATOR_NOT_AVAILABLE
    assert await after_failover(cluster, coordinator, "g") == {}



async def test_offset_delete_while_the_group_is_being_deleted_finds_no_group(autojump_clock: Any,
                                                                             cluster: Cluster) -> None:
    """Kafka's handleDeleteOffsets answers a group that is Dead here GROUP_ID_NOT_FOUND, as DeleteGroups does: its
    deletion is under way (the tombstones wait for a paused follower), and nothing is left to delete offsets of."""
    coordinator = await coordinator_of(cluster, "standalone")
    assert await commit(cluster, coordinator, "standalone", {("events", 0): 3}) == [0]
    group_coordinator = cluster.broker(coordinator).group_coordinator
    partition = group_coordinator.partition_for("standalone")
    follower = next(b for b in cluster.partition_state("__consumer_offsets", partition).isr if b != coordinator)
    cluster.pause_broker(follower)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(send, cluster, coordinator, DeleteGroupsRequest(["standalone"]))
        await cluster.wait_until(lambda: (group := group_coordinator.group("standalone")) is None
                                 or group.state.value == "Dead")
        assert group_coordinator.group("standalone") is not None, "the deletion did not wait for the follower"
        refused = await send(cluster, coordinator, OffsetDeleteRequest("standalone", [("events", 0)]))
        assert refused.error_code == errors.GROUP_ID_NOT_FOUND.code, refused
        cluster.resume_broker(follower)
    assert await committed(cluster, coordinator, "standalone") == {}
