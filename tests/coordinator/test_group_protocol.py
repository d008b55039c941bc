"""The group coordinator over raw requests: joins, syncs, heartbeats, commits, and bad input."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from kafkalite.cluster import Cluster
from kafkalite.common import errors
from kafkalite.common.consumer_protocol import Assignment, decode_assignment, encode_assignment
from kafkalite.common.types import TopicPartition
from kafkalite.network.requests import (
    HeartbeatRequest, LeaveGroupRequest, MemberIdentity, OffsetCommitPartition, OffsetCommitRequest,
    OffsetFetchRequest, SyncGroupAssignment, SyncGroupRequest,
)
from tests.coordinator.conftest import (
    GROUP_CONFIG, coordinator_of, group_on, join_request, kill_followers, send, stable_member, state,
)

pytestmark = pytest.mark.usefixtures("autojump_clock")


async def test_one_member_joins_syncs_commits_and_fetches(autojump_clock: Any, cluster: Cluster) -> None:
    coordinator = await coordinator_of(cluster, "g1")
    first = await send(cluster, coordinator, join_request("g1"))
    assert first.error_code == errors.MEMBER_ID_REQUIRED.code and first.member_id
    joined = await send(cluster, coordinator, join_request("g1", first.member_id))
    assert joined.error_code == 0, joined
    assert joined.leader == first.member_id and joined.generation_id == 1 and joined.protocol_name == "range"
    assignment = encode_assignment(Assignment((TopicPartition("events", 0),)))
    synced = await send(cluster, coordinator, SyncGroupRequest("g1", 1, first.member_id,
                                                               [SyncGroupAssignment(first.member_id, assignment)]))
    assert synced.error_code == 0 and synced.assignment == assignment
    beat = await send(cluster, coordinator, HeartbeatRequest("g1", 1, first.member_id))
    assert beat.error_code == 0
    committed = await send(cluster, coordinator, OffsetCommitRequest("g1", 1, first.member_id, [
        OffsetCommitPartition("events", 0, 42, committed_metadata="m")]))
    assert [p.error_code for p in committed.partitions] == [0]
    fetched = await send(cluster, coordinator, OffsetFetchRequest("g1", [("events", 0), ("events", 1)]))
    assert [(p.partition, p.committed_offset, p.metadata) for p in fetched.partitions] == [(0, 42, "m"), (1, -1, None)]


async def test_bad_commits_leave_the_group_as_it_was(autojump_clock: Any, cluster: Cluster) -> None:
    coordinator, member_id = await stable_member(cluster)
    before = state(cluster, coordinator)
    cases = [
        (OffsetCommitRequest("g", 0, member_id, [OffsetCommitPartition("events", 0, 5)]), errors.ILLEGAL_GENERATION),
        (OffsetCommitRequest("g", 1, "stranger", [OffsetCommitPartition("events", 0, 5)]), errors.UNKNOWN_MEMBER_ID),
        (OffsetCommitRequest("", 1, member_id, [OffsetCommitPartition("events", 0, 5)]), errors.INVALID_GROUP_ID),
        (OffsetCommitRequest("g", -1, "", [OffsetCommitPartition("events", 0, 5)]), errors.UNKNOWN_MEMBER_ID),
        (OffsetCommitRequest("g", 1, member_id, [OffsetCommitPartition("nowhere", 0, 5)]),
         errors.UNKNOWN_TOPIC_OR_PARTITION),
        (OffsetCommitRequest("g", 1, member_id, [OffsetCommitPartition("events", 0, 5, -1, "m" * 5000)]),
         errors.OFFSET_METADATA_TOO_LARGE),
    ]
    for request, expected in cases:
        response = await send(cluster, coordinator, request)
        assert [p.error_code for p in response.partitions] == [expected.code], (request, response)
        assert response.partitions[0].error_message
    assert state(cluster, coordinator) == before
    fetched = await send(cluster, coordinator, OffsetFetchRequest("g", [("events", 0)]))
    assert fetched.partitions[0].committed_offset == -1  # none of them was stored


async def test_a_commit_with_no_generation_is_taken_by_an_empty_group_whatever_member_it_names(
        autojump_clock: Any, cluster: Cluster) -> None:
    """Kafka's validateOffsetCommit since KAFKA-14201: generation -1 is a commit from outside group management, which
    a group that does not exist or is empty takes whatever member id or group.instance.id it names (a consumer with
    a group.instance.id that assign()s its partitions sends its instance id). A group with members checks the
    member, then the generation."""
    _, member_id = await stable_member(cluster)

    async def commit(request: OffsetCommitRequest) -> Any:
        return await send(cluster, await coordinator_of(cluster, request.group_id), request)

    cases = [
        (OffsetCommitRequest("fresh", -1, "stale-member", []), errors.NONE),
        (OffsetCommitRequest("fresh", -1, "stale-member", []), errors.NONE),  # the group is empty now: alike
        (OffsetCommitRequest("static", -1, "", [], "instance-1"), errors.NONE),
        (OffsetCommitRequest("static", -1, "", [], "instance-1"), errors.NONE),
        (OffsetCommitRequest("g", -1, member_id, []), errors.ILLEGAL_GENERATION),
        (OffsetCommitRequest("g", -1, "", [], "instance-1"), errors.UNKNOWN_MEMBER_ID),
    ]
    for offset, (request, expected) in enumerate(cases):
        request.partitions = [OffsetCommitPartition("events", 0, offset)]
        response = await commit(request)
        assert [p.error_code for p in response.partitions] == [expected.code], (request, response)
    for group_id, offset in (("fresh", 1), ("static", 3), ("g", -1)):
        fetched = await send(cluster, await coordinator_of(cluster, group_id),
                             OffsetFetchRequest(group_id, [("events", 0)]))
        assert fetched.partitions[0].committed_offset == offset, group_id


async def test_bad_joins_syncs_and_heartbeats_are_refused(autojump_clock: Any, cluster: Cluster) -> None:
    from kafkalite.network.requests import FindCoordinatorRequest, JoinGroupProtocol, JoinGroupRequest

    coordinator, member_id = await stable_member(cluster)
    before = state(cluster, coordinator)
    cases = [
        (FindCoordinatorRequest(""), errors.INVALID_GROUP_ID),
        (FindCoordinatorRequest("g", 1), errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),  # no transactions
        (FindCoordinatorRequest("g", 2), errors.INVALID_REQUEST),
        (join_request(""), errors.INVALID_GROUP_ID),
        (join_request("g", session_timeout_ms=10), errors.INVALID_SESSION_TIMEOUT),
        (join_request("g", session_timeout_ms=10**8), errors.INVALID_SESSION_TIMEOUT),
        (join_request("g", rebalance_timeout_ms=0), errors.INVALID_REQUEST),
        (join_request("g", "stranger"), errors.UNKNOWN_MEMBER_ID),
        (join_request("g", protocols=("roundrobin",)), errors.INCONSISTENT_GROUP_PROTOCOL),
        (join_request("g", protocols=("range", "range")), errors.INVALID_REQUEST),
        (join_request("g", instance_id=""), errors.INVALID_REQUEST),
        (JoinGroupRequest("g", 10000, 10000, "", "consumer", [JoinGroupProtocol("range", b"\x00")]),
         errors.INVALID_REQUEST),
        (JoinGroupRequest("g", 10000, 10000, "", "consumer", []), errors.INCONSISTENT_GROUP_PROTOCOL),
        (SyncGroupRequest("g", 0, member_id), errors.ILLEGAL_GENERATION),
        (SyncGroupRequest("g", 1, "stranger"), errors.UNKNOWN_MEMBER_ID),
        (SyncGroupRequest("", 1, member_id), errors.INVALID_GROUP_ID),
        (SyncGroupRequest("g", 1, member_id, [SyncGroupAssignment(member_id, b"\x00")]), errors.INVALID_REQUEST),
        (SyncGroupRequest("g", 1, member_id, protocol_name="roundrobin"), errors.INCONSISTENT_GROUP_PROTOCOL),
        (HeartbeatRequest("g", 0, member_id), errors.ILLEGAL_GENERATION),
        (HeartbeatRequest("g", 1, "stranger"), errors.UNKNOWN_MEMBER_ID),
        (HeartbeatRequest("", 1, member_id), errors.INVALID_GROUP_ID),
    ]
    for request, expected in cases:
        response = await send(cluster, coordinator, request)
        assert response.error_code == expected.code, (request, response)
        assert response.error_message, request
    assert state(cluster, coordinator) == before


async def test_a_stale_member_is_told_so_before_the_group_s_state_and_descriptions_wait_for_stable(
        autojump_clock: Any, cluster: Cluster) -> None:
    """Kafka's validateOffsetCommit comes before the group's state: while a rebalance completes, a commit with an
    old generation is ILLEGAL_GENERATION and one from a stranger UNKNOWN_MEMBER_ID (both tell the client to
    rejoin), and only a current member hears REBALANCE_IN_PROGRESS. A member commit to a group that does not
    exist is ILLEGAL_GENERATION. DescribeGroups shows the protocol and each member's subscription and assignment
    only once the group is Stable (GroupMetadata.summary)."""
    from kafkalite.network.requests import DescribeGroupsRequest

    coordinator, first = await stable_member(cluster)
    second = (await send(cluster, coordinator, join_request("g"))).member_id
    async with trio.open_nursery() as nursery:  # both rejoin: generation 2, CompletingRebalance until the sync
        for member_id in (first, second):
            nursery.start_soon(send, cluster, coordinator, join_request("g", member_id))
    assert state(cluster, coordinator) == ("CompletingRebalance", 2, sorted([first, second]))

    async def commit(group_id: str, generation: int, member_id: str) -> int:
        response = await send(cluster, coordinator, OffsetCommitRequest(group_id, generation, member_id,
                                                                        [OffsetCommitPartition("events", 0, 5)]))
        [partition] = response.partitions
        assert partition.error_message
        return partition.error_code  # type: ignore[no-any-return]

    assert await commit("g", 1, first) == errors.ILLEGAL_GENERATION.code
    assert await commit("g", 2, "stranger") == errors.UNKNOWN_MEMBER_ID.code
    assert await commit("g", 2, first) == errors.REBALANCE_IN_PROGRESS.code
    assert await commit(await group_on(cluster, coordinator), 5, first) == errors.ILLEGAL_GENERATION.code

    def described(group: Any) -> tuple[str, str, list[tuple[str, bool, bool]]]:
        return group.group_state, group.protocol_data, sorted(
            (m.member_id, bool(m.member_metadata), bool(m.member_assignment)) for m in group.members)

    completing = (await send(cluster, coordinator, DescribeGroupsRequest(["g"]))).groups[0]
    assert described(completing) == ("CompletingRebalance", "", sorted([(first, False, False), (second, False, False)]))
    assignment = encode_assignment(Assignment((TopicPartition("events", 0),)))
    synced = await send(cluster, coordinator, SyncGroupRequest("g", 2, first, [
        SyncGroupAssignment(first, assignment), SyncGroupAssignment(second, encode_assignment(Assignment(())))]))
    assert synced.error_code == 0
    stable = (await send(cluster, coordinator, DescribeGroupsRequest(["g"]))).groups[0]
    assert described(stable) == ("Stable", "range", sorted([(first, True, True), (second, True, True)]))


async def test_a_member_that_never_syncs_is_removed_after_the_rebalance_timeout(autojump_clock: Any,
                                                                                  cluster: Cluster) -> None:
    """Kafka 3's pending-sync expiration: a member of a new generation that heartbeats but sends no SyncGroup is
    removed once the rebalance timeout has passed since the generation began, and the group rebalances without
    it; the leader, which synced, stays. Before, the heartbeats kept it, and the group, as they were forever."""
    coordinator, leader = await stable_member(cluster)  # rebalance timeout 30 s
    silent = (await send(cluster, coordinator, join_request("g"))).member_id
    async with trio.open_nursery() as nursery:
        for member_id in (leader, silent):
            nursery.start_soon(send, cluster, coordinator, join_request("g", member_id))
    began = trio.current_time()
    assert state(cluster, coordinator) == ("CompletingRebalance", 2, sorted([leader, silent]))
    synced = await send(cluster, coordinator, SyncGroupRequest("g", 2, leader, [
        SyncGroupAssignment(leader, encode_assignment(Assignment((TopicPartition("events", 0),))))]))
    assert synced.error_code == 0 and state(cluster, coordinator)[0] == "Stable"
    heard: list[tuple[float, str, int]] = []
    while trio.current_time() < began + 33:
        for member_id in (leader, silent):
            beat = await send(cluster, coordinator, HeartbeatRequest("g", 2, member_id))
            heard.append((trio.current_time() - began, member_id, beat.error_code))
        await trio.sleep(3)
    assert {code for at, _, code in heard if at < 30} == {0}
    assert {(member_id, code) for at, member_id, code in heard if at > 30} == {
        (leader, errors.REBALANCE_IN_PROGRESS.code), (silent, errors.UNKNOWN_MEMBER_ID.code)}
    assert state(cluster, coordinator) == ("PreparingRebalance", 2, [leader])


async def test_an_assignment_is_stored_as_the_leader_made_it_whatever_the_partitions(
        autojump_clock: Any, cluster: Cluster) -> None:
    """Kafka stores the leader's assignment without looking up its partitions: the leader's metadata may be ahead
    of the coordinator's or behind it (a topic just deleted). The group becomes Stable and the member gets it."""
    coordinator = await coordinator_of(cluster, "g")
    member_id = (await send(cluster, coordinator, join_request("g"))).member_id
    joined = await send(cluster, coordinator, join_request("g", member_id))
    assignment = encode_assignment(Assignment((TopicPartition("events", 0), TopicPartition("deleted", 3))))
    synced = await send(cluster, coordinator, SyncGroupRequest("g", joined.generation_id, member_id, [
        SyncGroupAssignment(member_id, assignment)]))
    assert (synced.error_code, synced.assignment) == (0, assignment)
    assert state(cluster, coordinator) == ("Stable", 1, [member_id])


async def test_offsets_of_partitions_that_do_not_exist_are_not_deleted_but_named(autojump_clock: Any,
                                                                                 cluster: Cluster) -> None:
    """Kafka's OffsetDelete answers a partition it does not know UNKNOWN_TOPIC_OR_PARTITION, deletes the others'
    offsets, and answers the whole request with the group's own error."""
    from kafkalite.network.requests import OffsetDeleteRequest

    coordinator = await coordinator_of(cluster, "standalone")
    committed = await send(cluster, coordinator, OffsetCommitRequest("standalone", -1, "", [
        OffsetCommitPartition("events", 1, 3), OffsetCommitPartition("events", 2, 4)]))
    assert [p.error_code for p in committed.partitions] == [0, 0]
    deleted = await send(cluster, coordinator, OffsetDeleteRequest("standalone", [
        ("events", 1), ("nowhere", 0), ("events", 60)]))
    assert deleted.error_code == 0
    assert sorted((p.topic, p.partition, p.error_code) for p in deleted.partitions) == [
        ("events", 1, 0), ("events", 60, errors.UNKNOWN_TOPIC_OR_PARTITION.code),
        ("nowhere", 0, errors.UNKNOWN_TOPIC_OR_PARTITION.code)]
    fetched = await send(cluster, coordinator, OffsetFetchRequest("standalone", [("events", 1), ("events", 2)]))
    assert [p.committed_offset for p in fetched.partitions] == [-1, 4]
    never = await group_on(cluster, coordinator)
    gone = await send(cluster, coordinator, OffsetDeleteRequest(never, [("nowhere", 0)]))
    assert (gone.error_code, gone.partitions) == (errors.GROUP_ID_NOT_FOUND.code, [])


async def test_a_new_static_member_fences_the_old_one_out_of_every_request(autojump_clock: Any,
                                                                          cluster: Cluster) -> None:
    """KIP-345: a join naming a group.instance.id the group holds, with no member id, is the same instance
    restarted. It takes the old member's place (and its assignment, with no rebalance); the old member id is
    then FENCED_INSTANCE_ID in every request that names the instance, and the group is as the new one left it."""
    coordinator = await coordinator_of(cluster, "g")
    first = await send(cluster, coordinator, join_request("g", instance_id="i-1"))
    assert first.error_code == 0 and first.generation_id == 1  # a static member needs no member id round trip
    old = first.member_id
    assignment = encode_assignment(Assignment((TopicPartition("events", 0),)))
    synced = await send(cluster, coordinator, SyncGroupRequest("g", 1, old, [SyncGroupAssignment(old, assignment)],
                                                               group_instance_id="i-1"))
    assert synced.error_code == 0

    restarted = await send(cluster, coordinator, join_request("g", instance_id="i-1"))
    assert restarted.error_code == 0 and restarted.member_id != old
    # as Kafka: the leader id from before and no members, so that the restarted leader works out no assignment
    assert (restarted.leader, restarted.members) == (old, [])
    new, generation = restarted.member_id, restarted.generation_id
    assert generation == 1 and state(cluster, coordinator) == ("Stable", 1, [new])
    kept = await send(cluster, coordinator, SyncGroupRequest("g", 1, new, group_instance_id="i-1"))
    assert (kept.error_code, kept.assignment) == (0, assignment)
    cases = [
        join_request("g", old, instance_id="i-1"),
        SyncGroupRequest("g", generation, old, group_instance_id="i-1"),
        HeartbeatRequest("g", generation, old, group_instance_id="i-1"),
    ]
    for request in cases:
        response = await send(cluster, coordinator, request)
        assert response.error_code == errors.FENCED_INSTANCE_ID.code, (request, response)
        assert f"group.instance.id i-1 of group g belongs to member {new}, which joined with it later, not to {old}" \
            == response.error_message, request
    # what librdkafka sends once its own session timer ran out and it dropped its member id
    nameless = await send(cluster, coordinator, HeartbeatRequest("g", generation, "", group_instance_id="i-1"))
    assert (nameless.error_code, nameless.error_message.endswith("not to a request naming no member id")) \
        == (errors.FENCED_INSTANCE_ID.code, True)
    committed = await send(cluster, coordinator, OffsetCommitRequest(
        "g", generation, old, [OffsetCommitPartition("events", 0, 5)], group_instance_id="i-1"))
    assert [p.error_code for p in committed.partitions] == [errors.FENCED_INSTANCE_ID.code]
    assert state(cluster, coordinator) == ("Stable", generation, [new])
    beat = await send(cluster, coordinator, HeartbeatRequest("g", generation, new, group_instance_id="i-1"))
    assert beat.error_code == 0


async def test_bad_group_admin_requests_are_refused(autojump_clock: Any, cluster: Cluster) -> None:
    from kafkalite.network.requests import (
        DeleteGroupsRequest, DescribeGroupsRequest, LeaveGroupRequest, ListGroupsRequest, MemberIdentity,
        OffsetDeleteRequest,
    )

    coordinator, member_id = await stable_member(cluster)
    before = state(cluster, coordinator)
    left = await send(cluster, coordinator, LeaveGroupRequest("g", [MemberIdentity("stranger"),
                                                                     MemberIdentity("", "no-such-instance")]))
    assert [m.error_code for m in left.members] == [errors.UNKNOWN_MEMBER_ID.code] * 2
    assert (await send(cluster, coordinator, LeaveGroupRequest("", []))).error_code == errors.INVALID_GROUP_ID.code
    described = await send(cluster, coordinator, DescribeGroupsRequest(["", "g"]))
    assert [g.error_code for g in described.groups] == [errors.INVALID_GROUP_ID.code, 0]
    assert described.groups[1].group_state == "Stable" and described.groups[1].members[0].member_id == member_id
    # Kafka matches states whatever their case, and a name that is no state matches nothing
    listed = await send(cluster, coordinator, ListGroupsRequest(["Sleeping"]))
    assert (listed.error_code, listed.groups) == (0, [])
    listed = await send(cluster, coordinator, ListGroupsRequest(["sleeping", "STABLE"]))
    assert (listed.error_code, [(g.group_id, g.group_state) for g in listed.groups]) == (0, [("g", "Stable")])
    never = await group_on(cluster, coordinator)
    deleted = await send(cluster, coordinator, DeleteGroupsRequest(["g", never, ""]))
    assert [r.error_code for r in deleted.results] == [errors.NON_EMPTY_GROUP.code,
                                                       errors.GROUP_ID_NOT_FOUND.code, errors.INVALID_GROUP_ID.code]
    offsets = await send(cluster, coordinator, OffsetDeleteRequest("g", [("events", 0)]))
    assert [p.error_code for p in offsets.partitions] == [errors.GROUP_SUBSCRIBED_TO_TOPIC.code]
    gone = await send(cluster, coordinator, OffsetDeleteRequest(never, [("events", 0)]))
    assert gone.error_code == errors.GROUP_ID_NOT_FOUND.code
    fetched = await send(cluster, coordinator, OffsetFetchRequest(""))
    assert fetched.error_code == errors.INVALID_GROUP_ID.code
    assert state(cluster, coordinator) == before


async def test_other_brokers_answer_not_coordinator_and_clients_cannot_write_offsets(autojump_clock: Any,
                                                                                    cluster: Cluster) -> None:
    from kafkalite.common.records import Record, RecordBatch
    from kafkalite.network.requests import ProducePartitionData, ProduceRequest

    coordinator, member_id = await stable_member(cluster)
    other = next(b for b in cluster.live_broker_ids if b != coordinator)
    beat = await send(cluster, other, HeartbeatRequest("g", 1, member_id))
    assert beat.error_code == errors.NOT_COORDINATOR.code
    produced = await send(cluster, coordinator, ProduceRequest(-1, 1000, [ProducePartitionData(
        "__consumer_offsets", 0, [RecordBatch.from_records([Record(b"k", b"v")])])]))
    assert produced.partitions[0].error_code == errors.INVALID_TOPIC_EXCEPTION.code


async def test_groups_and_offsets_are_deleted_with_tombstones(autojump_clock: Any, cluster: Cluster) -> None:
    from kafkalite.network.requests import DeleteGroupsRequest, LeaveGroupRequest, MemberIdentity

    coordinator, member_id = await stable_member(cluster)
    await send(cluster, coordinator, OffsetCommitRequest("g", 1, member_id, [OffsetCommitPartition("events", 0, 9)]))
    await send(cluster, coordinator, LeaveGroupRequest("g", [MemberIdentity(member_id)]))
    assert state(cluster, coordinator)[0] == "Empty"
    deleted = await send(cluster, coordinator, DeleteGroupsRequest(["g"]))
    assert deleted.results[0].error_code == 0
    assert cluster.broker(coordinator).group_coordinator.group("g") is None
    await cluster.kill_broker(coordinator)  # the next coordinator replays the tombstones: nothing comes back
    with trio.fail_after(60):  # the coordinator moves and loads the group, or the test fails
        while (new := await coordinator_of(cluster, "g")) == coordinator:
            await trio.sleep(0.5)
        while (await send(cluster, new, OffsetFetchRequest("g", [("events", 0)]))).error_code:
            await trio.sleep(0.1)
    fetched = await send(cluster, new, OffsetFetchRequest("g", [("events", 0)]))
    assert fetched.partitions[0].committed_offset == -1


async def test_an_empty_groups_offsets_expire_after_the_retention(autojump_clock: Any, cluster: Cluster) -> None:
    coordinator = await coordinator_of(cluster, "standalone")
    committed = await send(cluster, coordinator, OffsetCommitRequest("standalone", -1, "", [
        OffsetCommitPartition("events", 1, 3)]))
    assert committed.partitions[0].error_code == 0
    group_coordinator = cluster.broker(coordinator).group_coordinator
    await trio.sleep(group_coordinator.config["offsets.retention.minutes"] * 60 - 60)
    await group_coordinator.cleanup_group_metadata()
    assert group_coordinator.group("standalone") is not None
    await trio.sleep(120)
    await group_coordinator.cleanup_group_metadata()
    assert group_coordinator.group("standalone") is None


async def test_a_group_that_emptied_loses_its_offsets_a_retention_after_even_those_committed_since(
        autojump_clock: Any, cluster: Cluster) -> None:
    """Kafka's removeExpiredOffsets for an Empty group that had members: every offset expires a retention period
    after the group emptied, an offset an admin committed meanwhile too, and the group goes with them."""
    coordinator, member_id = await stable_member(cluster)
    consumed = await send(cluster, coordinator, OffsetCommitRequest("g", 1, member_id, [
        OffsetCommitPartition("events", 0, 5)]))
    assert consumed.partitions[0].error_code == 0
    left = await send(cluster, coordinator, LeaveGroupRequest("g", [MemberIdentity(member_id)]))
    assert left.members[0].error_code == 0 and state(cluster, coordinator)[0] == "Empty"
    group_coordinator = cluster.broker(coordinator).group_coordinator
    retention_s = group_coordinator.config["offsets.retention.minutes"] * 60
    await trio.sleep(retention_s / 2)
    admin = await send(cluster, coordinator, OffsetCommitRequest("g", -1, "", [OffsetCommitPartition("events", 1, 3)]))
    assert admin.partitions[0].error_code == 0 and state(cluster, coordinator)[:2] == ("Empty", 2)
    await trio.sleep(retention_s / 2 - 60)
    await group_coordinator.cleanup_group_metadata()
    assert group_coordinator.group("g") is not None
    await trio.sleep(120)
    await group_coordinator.cleanup_group_metadata()
    assert group_coordinator.group("g") is None
    fetched = await send(cluster, coordinator, OffsetFetchRequest("g", [("events", 0), ("events", 1)]))
    assert [p.committed_offset for p in fetched.partitions] == [-1, -1]


async def test_a_member_that_does_not_rejoin_within_the_rebalance_timeout_is_dropped(autojump_clock: Any,
                                                                                     cluster: Cluster) -> None:
    """Kafka's onCompleteJoin: a rebalance waits for every member up to the longest rebalance timeout among them.
    A member that keeps its session with heartbeats but never rejoins (an application stuck between polls) is
    dropped then, and the members that did rejoin form the next generation without it."""
    coordinator, stuck = await stable_member(cluster)  # rebalance timeout 30 s, session 10 s
    newcomer = (await send(cluster, coordinator, join_request("g"))).member_id
    beats: list[tuple[float, int]] = []

    async def heartbeat_only(task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        while True:
            beat = await send(cluster, coordinator, HeartbeatRequest("g", 1, stuck))
            beats.append((trio.current_time(), beat.error_code))
            await trio.sleep(3)

    async with trio.open_nursery() as nursery:
        started = trio.current_time()
        await nursery.start(heartbeat_only)
        joined = await send(cluster, coordinator, join_request("g", newcomer))
        waited = trio.current_time() - started
        nursery.cancel_scope.cancel()
    assert 30 <= waited < 31
    assert (joined.error_code, joined.generation_id, joined.leader) == (0, 2, newcomer)
    assert [m.member_id for m in joined.members] == [newcomer]
    assert state(cluster, coordinator) == ("CompletingRebalance", 2, [newcomer])
    during = {code for at, code in beats if started < at < started + waited}  # the first beat came before the join
    assert during == {errors.REBALANCE_IN_PROGRESS.code}  # its session was alive all along
    after = await send(cluster, coordinator, HeartbeatRequest("g", 1, stuck))  # sent after the rebalance, not racing it
    assert after.error_code == errors.UNKNOWN_MEMBER_ID.code


async def static_stable(cluster: Cluster, instance_id: str, **join: Any) -> tuple[int, str]:
    """A group "g" whose only member, static, holds events-0 in generation 1; (coordinator, member id)."""
    coordinator = await coordinator_of(cluster, "g")
    joined = await send(cluster, coordinator, join_request("g", instance_id=instance_id, **join))
    member = joined.member_id
    synced = await send(cluster, coordinator, SyncGroupRequest("g", 1, member, [SyncGroupAssignment(
        member, encode_assignment(Assignment((TopicPartition("events", 0),))))], group_instance_id=instance_id))
    assert (joined.error_code, synced.error_code) == (0, 0)
    return coordinator, member


async def test_a_static_member_away_during_a_rebalance_keeps_its_place_until_its_sync_is_overdue(
        autojump_clock: Any, cluster: Cluster) -> None:
    """KIP-345, Kafka's onCompleteJoin: only dynamic members that did not rejoin are dropped when the rebalance
    timeout ends. A static member away (restarting) stays in the next generation, whose leader must be a member
    that rejoined, and gets its share of the assignment; only if it sends no SyncGroup within the rebalance
    timeout after that is it removed (Kafka 3's pending-sync expiration)."""
    coordinator, away = await static_stable(cluster, "i-away", rebalance_timeout_ms=5000, session_timeout_ms=60000)
    newcomer = (await send(cluster, coordinator, join_request("g", rebalance_timeout_ms=5000))).member_id
    started = trio.current_time()
    joined = await send(cluster, coordinator, join_request("g", newcomer, rebalance_timeout_ms=5000))
    assert 5 <= trio.current_time() - started < 5.5
    assert (joined.error_code, joined.generation_id, joined.leader) == (0, 2, newcomer)
    assert sorted(m.member_id for m in joined.members) == sorted([away, newcomer])
    assert [m.group_instance_id for m in joined.members if m.member_id == away] == ["i-away"]
    assert state(cluster, coordinator) == ("CompletingRebalance", 2, sorted([away, newcomer]))
    synced = await send(cluster, coordinator, SyncGroupRequest("g", 2, newcomer, [
        SyncGroupAssignment(newcomer, encode_assignment(Assignment((TopicPartition("events", 1),)))),
        SyncGroupAssignment(away, encode_assignment(Assignment((TopicPartition("events", 0),))))]))
    assert synced.error_code == 0 and state(cluster, coordinator) == ("Stable", 2, sorted([away, newcomer]))
    await trio.sleep(4.5)
    assert state(cluster, coordinator) == ("Stable", 2, sorted([away, newcomer]))
    await trio.sleep(1)  # its SyncGroup is overdue: removed, and the group rebalances without it
    assert state(cluster, coordinator) == ("PreparingRebalance", 2, [newcomer])


async def test_a_group_of_static_members_none_rejoining_waits_another_rebalance_timeout(autojump_clock: Any,
                                                                                       cluster: Cluster) -> None:
    """Kafka's onCompleteJoin: when no member rejoined and those left are static, the rebalance is held for
    another rebalance timeout instead of emptying the group, and the member that comes back completes it."""
    coordinator, away = await static_stable(cluster, "i-away", rebalance_timeout_ms=5000, session_timeout_ms=60000)
    dynamic = (await send(cluster, coordinator, join_request("g", rebalance_timeout_ms=5000))).member_id
    with trio.move_on_after(1):  # its join waits for the static member, and is abandoned
        await send(cluster, coordinator, join_request("g", dynamic, rebalance_timeout_ms=5000))
    left = await send(cluster, coordinator, LeaveGroupRequest("g", [MemberIdentity(dynamic)]))
    assert left.members[0].error_code == 0
    await trio.sleep(12)  # past two rebalance timeouts
    assert state(cluster, coordinator) == ("PreparingRebalance", 1, [away])
    back = await send(cluster, coordinator, join_request("g", away, instance_id="i-away", rebalance_timeout_ms=5000,
                                                         session_timeout_ms=60000))
    assert (back.error_code, back.generation_id, back.leader) == (0, 2, away)


async def test_a_static_member_is_removed_by_its_instance_id_and_a_leave_naming_its_old_member_id_is_fenced(
        autojump_clock: Any, cluster: Cluster) -> None:
    """KIP-345's removal of a static member: a LeaveGroup naming its group.instance.id and no member id removes
    whoever holds the instance id now (what Kafka's AdminClient.removeMembersFromConsumerGroup sends). One naming
    a member id the instance id has moved on from, a process that restarted meanwhile, is fenced and removes no
    one (Kafka's handleLeaveGroup)."""
    coordinator, first = await static_stable(cluster, "i-1", session_timeout_ms=60000)
    restarted = await send(cluster, coordinator, join_request("g", instance_id="i-1", session_timeout_ms=60000))
    current = restarted.member_id
    assert restarted.error_code == 0 and current != first
    assert state(cluster, coordinator) == ("Stable", 1, [current])
    left = await send(cluster, coordinator, LeaveGroupRequest("g", [MemberIdentity(first, "i-1")]))
    assert [(m.member_id, m.group_instance_id, m.error_code) for m in left.members] \
        == [(first, "i-1", errors.FENCED_INSTANCE_ID.code)]
    assert state(cluster, coordinator) == ("Stable", 1, [current])
    left = await send(cluster, coordinator, LeaveGroupRequest("g", [MemberIdentity("", "i-1")]))
    assert [(m.group_instance_id, m.error_code) for m in left.members] == [("i-1", errors.NONE.code)]
    assert state(cluster, coordinator)[0::2] == ("Empty", [])
    again = await send(cluster, coordinator, LeaveGroupRequest("g", [MemberIdentity("", "i-1")]))
    assert [m.error_code for m in again.members] == [errors.UNKNOWN_MEMBER_ID.code]


async def test_a_restarted_static_member_brings_its_own_timeouts(autojump_clock: Any, cluster: Cluster) -> None:
    """Kafka's updateStaticMemberAndRebalance updates the member with the timeouts it joins with now: a member
    restarted with a longer session keeps its partitions away from the others that much longer."""
    coordinator, first = await static_stable(cluster, "i-1", session_timeout_ms=3000)
    restarted = await send(cluster, coordinator, join_request("g", instance_id="i-1", session_timeout_ms=30000))
    assert (restarted.error_code, restarted.generation_id) == (0, 1)
    await trio.sleep(10)  # no heartbeat: past the old session, within the new one
    assert state(cluster, coordinator) == ("Stable", 1, [restarted.member_id])
    await trio.sleep(25)
    assert state(cluster, coordinator)[0] == "Empty"


async def test_a_static_member_restarting_after_a_coordinator_failover_is_not_rebalanced(autojump_clock: Any,
                                                                                       cluster: Cluster) -> None:
    """A group loaded by the next coordinator keeps each member's selected protocol only. A static member that
    restarts offering several (librdkafka's default is range and roundrobin) keeps its assignment, as Kafka
    decides on the protocol the group would select, not on the list offered."""
    coordinator, first = await static_stable(cluster, "i-1", protocols=("range", "roundrobin"),
                                             session_timeout_ms=30000)
    await cluster.kill_broker(coordinator)
    with trio.fail_after(60):  # until its session expires and the group's partition has a new leader
        while (successor := await coordinator_of(cluster, "g")) == coordinator:
            await trio.sleep(0.5)
    restarted = await send(cluster, successor, join_request("g", instance_id="i-1", protocols=("range", "roundrobin"),
                                                            session_timeout_ms=30000))
    assert (restarted.error_code, restarted.generation_id, restarted.members) == (0, 1, [])
    assert state(cluster, successor) == ("Stable", 1, [restarted.member_id])
    kept = await send(cluster, successor, SyncGroupRequest("g", 1, restarted.member_id, group_instance_id="i-1"))
    assert kept.error_code == 0
    assert decode_assignment(kept.assignment).partitions == (TopicPartition("events", 0),)


async def test_a_new_groups_first_rebalance_waits_the_initial_delay_for_more_members(autojump_clock: Any) -> None:
    """group.initial.rebalance.delay.ms (Kafka's default 3000, kafkalite's 0): a new group's first join waits the
    delay; a member arriving meanwhile extends the wait by another delay, never past the rebalance timeout. So
    consumers started together form generation 1 together instead of rebalancing once per arrival."""
    config = {**GROUP_CONFIG, "group.initial.rebalance.delay.ms": 3000}
    async with Cluster(brokers=3, config=config, seed=11) as cluster:
        await cluster.create_topic("events", partitions=6, replication_factor=3)
        for group_id, rebalance_timeout_ms, arrivals, formed_at in [
            ("alone", 30000, [0], 3),
            ("two", 30000, [0, 2], 6),  # the second arrival, in the first delay, extends it by a whole delay
            ("capped", 4000, [0, 2, 3.5], 4),  # extended by what is left of the 4 s rebalance timeout only
        ]:
            coordinator = await coordinator_of(cluster, group_id)
            members = [(await send(cluster, coordinator, join_request(group_id))).member_id for _ in arrivals]
            answers: dict[str, tuple[float, Any]] = {}
            started = trio.current_time()

            async def join(member_id: str, after: float) -> None:
                await trio.sleep(after)
                response = await send(cluster, coordinator, join_request(
                    group_id, member_id, rebalance_timeout_ms=rebalance_timeout_ms))
                answers[member_id] = (trio.current_time() - started, response)

            async with trio.open_nursery() as nursery:
                for member_id, after in zip(members, arrivals):
                    nursery.start_soon(join, member_id, after)
            assert {round(at, 3) for at, _ in answers.values()} == {formed_at}, (group_id, answers)
            assert {(r.error_code, r.generation_id) for _, r in answers.values()} == {(0, 1)}, group_id
            [leader_answer] = [r for _, r in answers.values() if r.members]
            assert sorted(m.member_id for m in leader_answer.members) == sorted(members), group_id


async def test_a_member_that_never_returns_with_its_member_id_holds_a_rebalance_only_for_its_session(
        autojump_clock: Any, cluster: Cluster) -> None:
    """KIP-394: a join without a member id gets one (MEMBER_ID_REQUIRED) and the member is pending until it joins
    with it. A rebalance waits for pending members too, but one that never comes back is forgotten when its session
    timeout runs out, and the rebalance completes then without it."""
    coordinator, first = await stable_member(cluster)
    asked_at = trio.current_time()
    vanished = await send(cluster, coordinator, join_request("g", session_timeout_ms=10000))
    assert vanished.error_code == errors.MEMBER_ID_REQUIRED.code
    await trio.sleep(1)
    second = (await send(cluster, coordinator, join_request("g"))).member_id
    answers: dict[str, Any] = {}

    async def join(member_id: str) -> None:
        answers[member_id] = (await send(cluster, coordinator, join_request("g", member_id)), trio.current_time())

    async with trio.open_nursery() as nursery:
        nursery.start_soon(join, second)
        await trio.sleep(0.5)
        nursery.start_soon(join, first)  # every member has rejoined now; only the pending one is missing
    for member_id, (answer, at) in answers.items():
        assert (answer.error_code, answer.generation_id) == (0, 2), member_id
        assert at - asked_at == pytest.approx(10, abs=0.01), member_id  # the pending member's session timeout
    assert sorted(m.member_id for m in answers[answers[first][0].leader][0].members) == sorted([first, second])
    assert state(cluster, coordinator) == ("CompletingRebalance", 2, sorted([first, second]))


async def test_group_max_size_turns_away_the_member_beyond_it(autojump_clock: Any) -> None:
    """group.max.size, as Kafka's acceptJoiningMember: a third member is refused with GROUP_MAX_SIZE_REACHED and
    the two-member group goes on as it was."""
    async with Cluster(brokers=3, config={**GROUP_CONFIG, "group.max.size": 2}, seed=11) as cluster:
        await cluster.create_topic("events", partitions=2, replication_factor=3)
        coordinator, first = await stable_member(cluster)
        second = (await send(cluster, coordinator, join_request("g"))).member_id
        async with trio.open_nursery() as nursery:  # the second joins; the first rejoins for generation 2
            nursery.start_soon(send, cluster, coordinator, join_request("g", second))
            await trio.sleep(0.1)
            assert (await send(cluster, coordinator, join_request("g", first))).generation_id == 2
        for member_id in (first, second):
            synced = await send(cluster, coordinator, SyncGroupRequest("g", 2, member_id))
            assert synced.error_code == 0
        before = state(cluster, coordinator)
        assert before == ("Stable", 2, sorted([first, second]))
        third = await send(cluster, coordinator, join_request("g"))
        assert third.error_code == errors.GROUP_MAX_SIZE_REACHED.code and "group.max.size" in third.error_message
        assert state(cluster, coordinator) == before

        # While a rebalance gathers members, the places go to those already waiting: a member of the old
        # generation rejoining after two newcomers is refused and dropped, and they form the next generation.
        coordinator, old = await stable_member(cluster, "h")
        newcomers = [(await send(cluster, coordinator, join_request("h"))).member_id for _ in range(2)]
        joins: list[Any] = []
        started = trio.current_time()

        async def join(member_id: str) -> None:
            joins.append(await send(cluster, coordinator, join_request("h", member_id)))

        async with trio.open_nursery() as nursery:
            for member_id in newcomers:
                nursery.start_soon(join, member_id)
                await trio.sleep(0.1)
            refused = await send(cluster, coordinator, join_request("h", old))
            assert refused.error_code == errors.GROUP_MAX_SIZE_REACHED.code
        assert sorted((j.error_code, j.generation_id, j.member_id) for j in joins) == sorted(
            (0, 2, member_id) for member_id in newcomers)
        assert state(cluster, coordinator, "h") == ("CompletingRebalance", 2, sorted(newcomers))
        assert trio.current_time() - started < 1  # at once, not after the rebalance timeout (30 s) drops it


def test_the_coordinators_states_are_the_ones_clients_are_told() -> None:
    from kafkalite.coordinator.group_metadata import GroupState
    from kafkalite.network.requests import GROUP_STATES

    assert [state.value for state in GroupState] == list(GROUP_STATES)


async def test_a_member_turned_away_by_group_max_size_is_not_waited_for(autojump_clock: Any) -> None:
    """Three members take ids (MEMBER_ID_REQUIRED) for a group of at most two: the third, refused when it joins,
    is no longer awaited, so the first two form the group at once rather than after its session timeout."""
    async with Cluster(brokers=3, config={**GROUP_CONFIG, "group.max.size": 2}, seed=11) as cluster:
        await cluster.create_topic("events", partitions=2, replication_factor=3)
        coordinator = await coordinator_of(cluster, "g")
        ids = [(await send(cluster, coordinator, join_request("g"))).member_id for _ in range(3)]
        answers: dict[str, Any] = {}
        started = trio.current_time()

        async def join(member_id: str) -> None:
            answers[member_id] = await send(cluster, coordinator, join_request("g", member_id))

        async with trio.open_nursery() as nursery:
            for member_id in ids:
                nursery.start_soon(join, member_id)
                await trio.sleep(0.1)
        assert [answers[m].error_code for m in ids] == [0, 0, errors.GROUP_MAX_SIZE_REACHED.code]
        assert trio.current_time() - started < 1  # not the refused member's session timeout (10 s)
        assert state(cluster, coordinator) == ("CompletingRebalance", 1, sorted(ids[:2]))


def group_timers() -> int:
    """The group coordinators' timer tasks running now, anywhere in this Trio run."""
    count, stack = 0, [trio.lowlevel.current_root_task()]
    while stack:
        task = stack.pop()
        count += task.name.endswith("_start_timer.<locals>.timer")
        for nursery in task.child_nurseries:
            stack.extend(nursery.child_tasks)
    return count


async def test_a_completed_rebalance_leaves_no_timer_sleeping_out_its_timeout(cluster: Cluster) -> None:
    """The join's and the syncs' timers slept out the rebalance timeout (max.poll.interval.ms, up to 24 days)
    after the rebalance completed, each holding its group: four tasks for every group that came and went. As
    Kafka completes DelayedJoin and DelayedSync, they end when what they wait for happens."""
    for n in range(5):
        await stable_member(cluster, f"g{n}")
    await trio.sleep(0)
    assert group_timers() == 0
    coordinator = await coordinator_of(cluster, "slow")
    member_id = (await send(cluster, coordinator, join_request("slow"))).member_id
    joined = await send(cluster, coordinator, join_request("slow", member_id, rebalance_timeout_ms=2_000_000))
    assert joined.error_code == 0
    await trio.sleep(5)
    assert group_timers() == 1  # its SyncGroup is awaited: the sync timer runs until it comes
    synced = await send(cluster, coordinator, SyncGroupRequest("slow", joined.generation_id, member_id, []))
    assert synced.error_code == 0
    await trio.sleep(0)
    assert group_timers() == 0


async def test_a_static_member_replacement_the_log_refused_is_undone(autojump_clock: Any) -> None:
    """Kafka's updateStaticMemberAndRebalance: when the group cannot store a restarted static member's new member
    id, it puts the old one back, with its timeouts, and tells the restarted one to retry. The log still names the
    old member id, so the group in memory must too: the running member goes on heartbeating, and a coordinator
    failover would not bring a member back that the group had dropped."""
    async with Cluster(brokers=3, config={**GROUP_CONFIG, "min.insync.replicas": 2}, seed=11) as cluster:
        await cluster.create_topic("events", partitions=1, replication_factor=3)
        coordinator, first = await static_stable(cluster, "i-1", session_timeout_ms=20000)
        await kill_followers(cluster, coordinator)
        beat = await send(cluster, coordinator, HeartbeatRequest("g", 1, first, group_instance_id="i-1"))
        assert beat.error_code == 0

        restarted = await send(cluster, coordinator, join_request("g", instance_id="i-1", session_timeout_ms=60000))
        assert restarted.error_code == errors.COORDINATOR_NOT_AVAILABLE.code
        assert state(cluster, coordinator) == ("Stable", 1, [first])
        beat = await send(cluster, coordinator, HeartbeatRequest("g", 1, first, group_instance_id="i-1"))
        assert beat.error_code == 0
        await trio.sleep(25)  # no heartbeat since: past the old session, which is the one that counts again
        assert state(cluster, coordinator)[2] == []


async def test_a_commit_the_log_refuses_is_answered_coordinator_not_available_and_the_last_offsets_stand(
        autojump_clock: Any) -> None:
    """Kafka's storeOffsets: a commit whose write to the offsets partition fails (its ISR below
    min.insync.replicas) answers each of its partitions with COORDINATOR_NOT_AVAILABLE, which clients retry, and
    the group's committed offsets stay those its log holds."""
    async with Cluster(brokers=3, config={**GROUP_CONFIG, "min.insync.replicas": 2}, seed=11) as cluster:
        await cluster.create_topic("events", partitions=2, replication_factor=3)
        coordinator, member = await static_stable(cluster, "i-1", session_timeout_ms=60000)
        stored = await send(cluster, coordinator, OffsetCommitRequest("g", 1, member, [
            OffsetCommitPartition("events", 0, 5)], group_instance_id="i-1"))
        assert [p.error_code for p in stored.partitions] == [errors.NONE.code]
        await kill_followers(cluster, coordinator)
        refused = await send(cluster, coordinator, OffsetCommitRequest("g", 1, member, [
            OffsetCommitPartition("events", 0, 9), OffsetCommitPartition("events", 1, 3)], group_instance_id="i-1"))
        assert [(p.partition, p.error_code) for p in refused.partitions] \
            == [(0, errors.COORDINATOR_NOT_AVAILABLE.code), (1, errors.COORDINATOR_NOT_AVAILABLE.code)]
        fetched = await send(cluster, coordinator, OffsetFetchRequest("g", [("events", 0), ("events", 1)]))
        assert [(p.partition, p.committed_offset) for p in fetched.partitions] == [(0, 5), (1, -1)]


async def test_an_assignment_the_log_refuses_fails_the_sync_and_the_group_rebalances_again(
        autojump_clock: Any) -> None:
    """Kafka's doSyncGroup: when the leader's assignment cannot be stored, every member's SyncGroup gets the
    error (COORDINATOR_NOT_AVAILABLE for an ISR below min.insync.replicas), no member keeps an assignment, and the
    group prepares another rebalance rather than run on one its log does not hold."""
    async with Cluster(brokers=3, config={**GROUP_CONFIG, "min.insync.replicas": 2}, seed=11) as cluster:
        await cluster.create_topic("events", partitions=2, replication_factor=3)
        coordinator = await coordinator_of(cluster, "g")
        await kill_followers(cluster, coordinator)
        member = (await send(cluster, coordinator, join_request("g"))).member_id
        joined = await send(cluster, coordinator, join_request("g", member))
        assert (joined.error_code, joined.generation_id, joined.leader) == (errors.NONE.code, 1, member)
        synced = await send(cluster, coordinator, SyncGroupRequest("g", 1, member, [SyncGroupAssignment(
            member, encode_assignment(Assignment((TopicPartition("events", 0), TopicPartition("events", 1)))))]))
        assert (synced.error_code, synced.assignment) == (errors.COORDINATOR_NOT_AVAILABLE.code, b"")
        assert state(cluster, coordinator) == ("PreparingRebalance", 1, [member])
        assert cluster.broker(coordinator).group_coordinator.group("g").members[member].assignment == b""


async def test_a_consumer_offsets_topic_a_user_created_first_coordinates_every_group(autojump_clock: Any) -> None:
    """A provisioning script that creates Kafka's internal topics may give `__consumer_offsets` fewer partitions
    than offsets.topic.num.partitions. Groups hashed over the configured count landed on partitions the topic does
    not have, and found no coordinator, ever; they are hashed over the partitions it has, on every broker,
    restarted ones too, and every broker over the same count."""
    async with Cluster(brokers=3, config=GROUP_CONFIG, seed=11) as cluster:
        await cluster.create_topic("events", partitions=1, replication_factor=3)
        await cluster.create_topic("__consumer_offsets", partitions=2, replication_factor=3,
                                   config={"cleanup.policy": "compact"})
        groups = [f"g{n}" for n in range(8)]
        for group_id in groups:
            coordinator = await coordinator_of(cluster, group_id)
            partition = cluster.broker(coordinator).group_coordinator.partition_for(group_id)
            assert partition in (0, 1) and coordinator == cluster.leader_for("__consumer_offsets", partition)
            committed = await send(cluster, coordinator, OffsetCommitRequest(group_id, -1, "", [
                OffsetCommitPartition("events", 0, 7)]))
            assert [p.error_code for p in committed.partitions] == [0]
        assert {cluster.broker(1).group_coordinator.partition_for(g) for g in groups} == {0, 1}
        for broker_id in cluster.broker_ids:  # each in turn, so that every group's coordinator is a restarted one
            await cluster.kill_broker(broker_id)
            await cluster.restart_broker(broker_id)
            await cluster.wait_until(lambda: all(len(cluster.partition_state("__consumer_offsets", p).isr) == 3
                                                 for p in range(2)), timeout=60)
        for group_id in groups:
            fetched = await send(cluster, await coordinator_of(cluster, group_id),
                                 OffsetFetchRequest(group_id, [("events", 0)]))
            assert [p.committed_offset for p in fetched.partitions] == [7]
        # Partitions added (which moves groups, as a restart does in Kafka): every broker hashes over the new count
        # once its metadata has it, so no two brokers send a group to different coordinators.
        await cluster.create_partitions("__consumer_offsets", 4)
        await cluster.wait_until(lambda: all(cluster.broker(b).metadata_cache.partition_count("__consumer_offsets") == 4
                                             for b in cluster.broker_ids), timeout=30)
        placed = [{cluster.broker(b).group_coordinator.partition_for(g) for b in cluster.broker_ids} for g in groups]
        assert all(len(partitions) == 1 for partitions in placed) and set().union(*placed) - {0, 1}


async def test_a_static_member_restart_whose_store_times_out_keeps_the_old_session(autojump_clock: Any,
                                                                                  cluster: Cluster) -> None:
    """The store of a restarted static member's new id waits for the followers and fails after
    offsets.commit.timeout.ms. The member then has its old session again, and it counts from the undoing: a
    member that does not heartbeat is removed then, not after the longer session the restart asked for (the
    watch on its deadline used to go on sleeping towards that one). A second restart of the same instance while
    the first is being stored is told to retry: undoing the first after it would leave an id no log holds."""
    coordinator, first = await static_stable(cluster, "i-1", session_timeout_ms=6000)
    held = cluster.fail_requests("Fetch", delay=30.0, brokers=[coordinator], topics=["__consumer_offsets"],
                                 cluster_traffic=True, times=None)  # the store waits for the followers, in vain
    answers: dict[str, Any] = {}

    async def restart(name: str) -> None:
        answers[name] = await send(cluster, coordinator, join_request("g", instance_id="i-1", session_timeout_ms=60000))

    await trio.sleep(4)  # so that the old session would end while the store is under way
    async with trio.open_nursery() as nursery:
        nursery.start_soon(restart, "first")
        await trio.sleep(1)
        nursery.start_soon(restart, "second")
    assert answers["second"].error_code == errors.COORDINATOR_NOT_AVAILABLE.code
    assert answers["first"].error_code == errors.COORDINATOR_NOT_AVAILABLE.code
    undone = trio.current_time()
    assert state(cluster, coordinator) == ("Stable", 1, [first])
    held.remove()
    await trio.sleep(5.5)
    assert state(cluster, coordinator)[2] == [first]
    await trio.sleep(1)  # the old session, 6 s from the undoing, is over
    assert state(cluster, coordinator)[2] == []
    assert trio.current_time() - undone < 10


def coordinator_timers() -> int:
    """The group coordinator's tasks alive in this Trio run that watch a member's session or a timed step."""
    def walk(task: Any) -> Any:
        yield task
        for nursery in task.child_nurseries:
            for child in nursery.child_tasks:
                yield from walk(child)

    return sum(task.coro.__name__ in ("_expire_member", "_expire_pending_member", "timer")
               for task in walk(trio.lowlevel.current_root_task()))


async def test_members_that_leave_leave_no_session_watch_behind(autojump_clock: Any, cluster: Cluster) -> None:
    """As Kafka completes a leaving member's DelayedHeartbeat (and a pending member's), the watch on a member that
    left, or on one told MEMBER_ID_REQUIRED that left or joined, ends at once instead of sleeping out the session
    timeout (up to group.max.session.timeout.ms, 30 minutes) with the member in memory."""
    coordinator = await coordinator_of(cluster, "g")
    before = coordinator_timers()
    for _ in range(5):
        pending = (await send(cluster, coordinator, join_request("g", session_timeout_ms=1_800_000))).member_id
        assert (await send(cluster, coordinator, LeaveGroupRequest("g", [MemberIdentity(pending)]))).error_code == 0
        member_id = (await send(cluster, coordinator, join_request("g", session_timeout_ms=1_800_000))).member_id
        joined = await send(cluster, coordinator, join_request("g", member_id, session_timeout_ms=1_800_000))
        assert joined.error_code == 0
        assert (await send(cluster, coordinator, LeaveGroupRequest("g", [MemberIdentity(member_id)]))).error_code == 0
    await trio.sleep(1)
    assert state(cluster, coordinator) == ("Empty", 10, [])
    assert coordinator_timers() == before
