"""GroupCoordinator: Kafka's classic group protocol and committed offsets, for the groups whose offsets partition
this broker leads.

Theory of operation.
- Ownership. A group belongs to partition `partition_for(group_id)` of `__consumer_offsets`; the broker leading
  that partition is its coordinator. The server calls `on_election` when LeaderAndIsr makes this broker leader of
  an offsets partition and `on_resignation` when it becomes follower or stops the replica. An elected partition
  is loaded (replayed from its log) in a task of its own; until then its groups answer
  COORDINATOR_LOAD_IN_PROGRESS. Groups of partitions this broker does not lead answer NOT_COORDINATOR, and a
  resignation answers every parked request NOT_COORDINATOR and forgets the partition's groups.
- Every timed step lives in the owning partition's nursery (a member's session expiry, a rebalance's timeout,
  an append to the log), so a resignation or the broker dying cancels them all at once. Requests are served in
  the sender's task, which a client may cancel at any await: anything that must finish once started (storing a
  group's assignment, a commit) runs in the partition's nursery and the request only waits for its outcome.
- Rebalance: JoinGroup parks each member until every known member has rejoined or the largest rebalance
  timeout passes (`_complete_join`), then answers all of them with the new generation, the leader with every
  member's subscription. The leader's SyncGroup carries the assignment, which is stored with acks=all before
  any member gets its part and the group becomes Stable.
- The group's state decides what Heartbeat, SyncGroup and OffsetCommit may do; those decisions are tables
  (`HEARTBEAT_ANSWERS`, `SYNC_ANSWERS`, `COMMIT_ANSWERS`) beside the handlers that apply them.
"""

from __future__ import annotations

import logging
import random
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

import trio

from kafkalite.common import errors
from kafkalite.common.clock import now_ms
from kafkalite.common.config import BrokerConfig
from kafkalite.common.consumer_protocol import CONSUMER_PROTOCOL_TYPE, decode_subscription
from kafkalite.common.errors import ErrorCode, KafkaError
from kafkalite.common.records import Record, RecordBatch
from kafkalite.common.types import GROUP_METADATA_TOPIC_NAME, TopicPartition
from kafkalite.coordinator.group_metadata import (
    STATES_BY_NAME, GroupMetadata, GroupState, MemberMetadata, OffsetAndMetadata, Waiter, pending_member_timer,
)
from kafkalite.coordinator.group_metadata_manager import (
    LoadedPartition, group_metadata_record, offset_commit_record, partition_for,
)
from kafkalite.network.requests import (
    NO_GENERATION, DeletableGroupResult, DeleteGroupsRequest, DeleteGroupsResponse, DescribedGroup,
    DescribedGroupMember, DescribeGroupsRequest, DescribeGroupsResponse, HeartbeatRequest, HeartbeatResponse,
    JoinGroupRequest, JoinGroupResponse, LeaveGroupMemberResponse, LeaveGroupRequest, LeaveGroupResponse,
    ListedGroup, ListGroupsRequest, ListGroupsResponse, OffsetCommitPartitionResponse, OffsetCommitRequest,
    OffsetCommitResponse, OffsetDeletePartitionResponse, OffsetDeleteRequest, OffsetDeleteResponse,
    OffsetFetchPartitionResponse, OffsetFetchRequest, OffsetFetchResponse, SyncGroupRequest, SyncGroupResponse,
)

log = logging.getLogger(__name__)

_T = TypeVar("_T")
LOAD_BATCH_BYTES = 1 << 20  # read per step while loading a partition, with a checkpoint between steps
DELETED_PARTITIONS_RETRY_S = 1.0  # between attempts to remove a deleted topic's offsets the log refused
_EMPTY = GroupState.EMPTY
_PREPARING = GroupState.PREPARING_REBALANCE
_COMPLETING = GroupState.COMPLETING_REBALANCE
_STABLE = GroupState.STABLE
_DEAD = GroupState.DEAD
_JOIN, _SYNC = "join", "sync"  # the group's timers (`_start_timer`)


class OffsetsLog(Protocol):
    """What the coordinator needs of the broker's replicas of `__consumer_offsets` (the server implements it)."""

    async def append(self, tp: TopicPartition, records: Sequence[Record], timeout_ms: int) -> ErrorCode:
        """Append as leader with acks=all; the produce error (NONE once every in-sync replica has it)."""

    def read(self, tp: TopicPartition, start_offset: int, max_bytes: int) -> list[RecordBatch]:
        """Batches from `start_offset` up to the log end, as leader; raises if this broker no longer leads `tp`."""

    def log_start_offset(self, tp: TopicPartition) -> int: ...


# A write to the offsets topic failed: what the member is told (Kafka's GroupMetadataManager mapping).
APPEND_ERRORS: dict[ErrorCode, ErrorCode] = {
    errors.UNKNOWN_TOPIC_OR_PARTITION: errors.COORDINATOR_NOT_AVAILABLE,
    errors.NOT_ENOUGH_REPLICAS: errors.COORDINATOR_NOT_AVAILABLE,
    errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND: errors.COORDINATOR_NOT_AVAILABLE,
    errors.REQUEST_TIMED_OUT: errors.COORDINATOR_NOT_AVAILABLE,
    errors.NOT_LEADER_OR_FOLLOWER: errors.NOT_COORDINATOR,
    errors.KAFKA_STORAGE_ERROR: errors.NOT_COORDINATOR,
    errors.MESSAGE_TOO_LARGE: errors.INVALID_COMMIT_OFFSET_SIZE,
    errors.RECORD_LIST_TOO_LARGE: errors.INVALID_COMMIT_OFFSET_SIZE,
    errors.INVALID_FETCH_SIZE: errors.INVALID_COMMIT_OFFSET_SIZE,
}

# A write that failed with these is in the leader's log all the same, and stays there while this broker leads the
# partition (and coordinates its groups): the records were appended, only not yet replicated in time.
APPENDED_ANYWAY = frozenset({errors.REQUEST_TIMED_OUT, errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND})


def _member_error(error: ErrorCode) -> ErrorCode:
    return error if error is errors.NONE else APPEND_ERRORS.get(error, errors.UNKNOWN_SERVER_ERROR)


# Heartbeat of a known member with the current generation, by group state: the answer (after the session is
# renewed). Empty and Dead are answered before the generation is checked.
HEARTBEAT_ANSWERS: dict[GroupState, ErrorCode] = {
    _PREPARING: errors.REBALANCE_IN_PROGRESS,  # the member must rejoin
    _COMPLETING: errors.NONE,  # it has its JoinGroup answer and is about to sync
    _STABLE: errors.NONE,
}

# SyncGroup of a known member with the current generation, by group state: an error, or None to serve it.
SYNC_ANSWERS: dict[GroupState, ErrorCode | None] = {
    _EMPTY: errors.UNKNOWN_MEMBER_ID,
    _PREPARING: errors.REBALANCE_IN_PROGRESS,
    _COMPLETING: None,  # wait for the leader's assignment
    _STABLE: None,  # a resent sync: the member's assignment again
    _DEAD: errors.COORDINATOR_NOT_AVAILABLE,
}

# OffsetCommit of a group member (generation >= 0) whose member id and generation are the group's, by group state:
# an error, or None to commit. During PreparingRebalance members may still commit for the generation they consumed
# in. (An Empty group has no member to pass the checks before.)
COMMIT_ANSWERS: dict[GroupState, ErrorCode | None] = {
    _EMPTY: errors.UNKNOWN_MEMBER_ID,
    _PREPARING: None,
    _COMPLETING: errors.REBALANCE_IN_PROGRESS,
    _STABLE: None,
    _DEAD: errors.COORDINATOR_NOT_AVAILABLE,
}


Removed = dict[TopicPartition, OffsetAndMetadata]
"""Offsets taken out of a group, whose tombstones are to be written."""


@dataclass(eq=False)
class _OwnedPartition:
    """An offsets partition this broker leads: its leader epoch, whether its groups are loaded, its tasks."""

    partition: int
    epoch: int
    scope: trio.CancelScope = field(default_factory=trio.CancelScope)
    nursery: trio.Nursery | None = None
    loaded: bool = False
    groups: set[str] = field(default_factory=set)


def _fail(error: ErrorCode, message: str | None = None) -> KafkaError:
    return error.exception(message)


def _fenced(group: GroupMetadata, instance_id: str | None, member_id: str) -> KafkaError:
    """FENCED_INSTANCE_ID naming both member ids: whether another process took the instance id or this one lost
    its own member id (a client resets it when its session runs out, and librdkafka then heartbeats without one)
    is plain from them."""
    return _fail(errors.FENCED_INSTANCE_ID, f"group.instance.id {instance_id} of group {group.group_id} belongs to "
                                            f"member {group.static_members.get(instance_id or '')}, which joined "
                                            f"with it later, not to {member_id or 'a request naming no member id'}")


class GroupCoordinator:
    def __init__(self, broker_id: int, config: BrokerConfig, offsets_log: OffsetsLog,
                 offsets_topic_partitions: Callable[[], int | None], rng: random.Random | None = None) -> None:
        self.broker_id = broker_id
        self.config = config
        self._offsets_topic_size = offsets_topic_partitions  # its partition count, None while it does not exist
        self._offsets_log = offsets_log
        self._rng = rng or random.Random()
        self._groups: dict[str, GroupMetadata] = {}
        self._partitions: dict[int, _OwnedPartition] = {}
        self._nursery: trio.Nursery | None = None

    async def startup(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Run until cancelled (the broker stopping): the partitions' tasks and the offsets expiry loop."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            nursery.start_soon(self._expire_offsets_loop)
            task_status.started()

    def partition_for(self, group_id: str) -> int:
        """The group's partition of `__consumer_offsets`, hashed over the partitions the topic has.

        That is offsets.topic.num.partitions only for a topic the brokers create. One a user created first (a
        provisioning script that makes Kafka's internal topics) may have fewer, and a group hashed beyond them
        would find no coordinator, ever. Kafka's brokers read the topic's size once, at startup, so that there a
        topic created while they run takes effect at their restart, and brokers restarted at different times
        can disagree. Here each broker hashes over the size its metadata has now, which every broker's metadata
        comes to agree on; the configured count stands in only while the topic does not exist yet (it is then
        created with that count). Adding partitions to the topic moves groups, as a restart does in Kafka."""
        return partition_for(group_id, self._offsets_topic_size() or self.config["offsets.topic.num.partitions"])

    def group(self, group_id: str) -> GroupMetadata | None:
        """The group as this coordinator holds it (for tests and the cluster's views), None if it holds none."""
        return self._groups.get(group_id)

    # -- ownership ----------------------------------------------------------------------------------------------

    def on_election(self, partition: int, epoch: int) -> None:
        """This broker now leads offsets partition `partition`: load its groups (unless already held)."""
        owned = self._partitions.get(partition)
        if owned is not None:
            owned.epoch = max(owned.epoch, epoch)
            return
        assert self._nursery is not None, "the group coordinator is not started"
        owned = self._partitions[partition] = _OwnedPartition(partition, epoch)
        self._nursery.start_soon(self._run_partition, owned)

    def on_resignation(self, partition: int, epoch: int) -> None:
        """Another broker leads `partition` now (or nobody here does): drop its groups, answer parked requests."""
        owned = self._partitions.get(partition)
        if owned is None or (epoch >= 0 and epoch < owned.epoch):
            return
        del self._partitions[partition]
        owned.scope.cancel()
        for group_id in owned.groups:
            group = self._groups.pop(group_id, None)
            if group is not None:
                self._unload(group)
        log.info("broker %d: no longer coordinator of %s-%d (%d groups dropped)", self.broker_id,
                 GROUP_METADATA_TOPIC_NAME, partition, len(owned.groups))

    def _unload(self, group: GroupMetadata) -> None:
        group.state = _DEAD
        moved = errors.NOT_COORDINATOR
        for member in group.members.values():
            if member.join_waiter is not None:
                member.join_waiter.complete(JoinGroupResponse(moved.code, member_id=member.member_id))
            if member.sync_waiter is not None:
                member.sync_waiter.complete(SyncGroupResponse(moved.code))

    async def _run_partition(self, owned: _OwnedPartition) -> None:
        with owned.scope:
            async with trio.open_nursery() as nursery:
                owned.nursery = nursery
                await self._load(owned)
                await trio.sleep_forever()

    async def _load(self, owned: _OwnedPartition) -> None:
        """Replay the partition from its start (Kafka's loadGroupsAndOffsets), then serve its groups."""
        tp = TopicPartition(GROUP_METADATA_TOPIC_NAME, owned.partition)
        loaded = LoadedPartition()
        try:
            offset = self._offsets_log.log_start_offset(tp)
            while batches := self._offsets_log.read(tp, offset, LOAD_BATCH_BYTES):
                offset = loaded.replay(batches)
                await trio.lowlevel.checkpoint()
        except KafkaError as exc:  # leadership moved on meanwhile: the resignation is on its way
            log.info("broker %d: loading %s stopped: %s", self.broker_id, tp, exc)
            return
        now = now_ms()
        for group in loaded.build_groups(now):
            self._groups[group.group_id] = group
            owned.groups.add(group.group_id)
            for member in group.members.values():
                self._schedule_heartbeat_expiry(group, member)
        owned.loaded = True
        log.info("broker %d: coordinator of %s with %d groups", self.broker_id, tp, len(owned.groups))

    def _owner(self, group_id: str) -> _OwnedPartition:
        """The loaded partition that owns the group, or the error telling the client where it stands."""
        if not group_id:
            raise _fail(errors.INVALID_GROUP_ID, "the group id is empty")
        owned = self._partitions.get(self.partition_for(group_id))
        if owned is None:
            raise _fail(errors.NOT_COORDINATOR, f"broker {self.broker_id} is not the coordinator of group {group_id}")
        if not owned.loaded:
            raise _fail(errors.COORDINATOR_LOAD_IN_PROGRESS, f"broker {self.broker_id} is loading group {group_id}")
        return owned

    def _add_group(self, owned: _OwnedPartition, group_id: str) -> GroupMetadata:
        group = self._groups[group_id] = GroupMetadata(group_id, state_timestamp_ms=now_ms())
        owned.groups.add(group_id)
        return group

    def _forget_group(self, group: GroupMetadata) -> None:
        """Drop a Dead group whose tombstone is stored."""
        self._groups.pop(group.group_id, None)
        owned = self._partitions.get(self.partition_for(group.group_id))
        if owned is not None:
            owned.groups.discard(group.group_id)

    # -- background steps ---------------------------------------------------------------------------------------

    def _start(self, group: GroupMetadata, function: Callable[..., Awaitable[Any]], *args: Any) -> bool:
        """Start a timed step of the group's partition; False if the partition (or the broker) is going away."""
        owned = self._partitions.get(self.partition_for(group.group_id))
        if owned is None or owned.nursery is None:
            return False
        try:
            owned.nursery.start_soon(function, *args)
        except RuntimeError:  # the nursery is closing: the broker is stopping under a request still being served
            return False
        return True

    def _start_timer(self, group: GroupMetadata, key: str, function: Callable[..., Awaitable[Any]], *args: Any) -> None:
        """Start the group's `key` timer (its join, its syncs), cancelling the one before: as Kafka completes a
        DelayedJoin or DelayedSync once what it waits for happened, `_cancel_timer` ends it then, where a task
        would otherwise sleep out the rebalance timeout (max.poll.interval.ms, up to 24 days) holding the group."""
        self._cancel_timer(group, key)
        scope = group.timers[key] = trio.CancelScope()

        async def timer() -> None:
            with scope:
                await function(*args)
            if group.timers.get(key) is scope:
                del group.timers[key]

        self._start(group, timer)

    @staticmethod
    def _cancel_timer(group: GroupMetadata, key: str) -> None:
        scope = group.timers.pop(key, None)
        if scope is not None:
            scope.cancel()

    async def _finish(self, group: GroupMetadata, step: Callable[[], Awaitable[_T]]) -> _T:
        """Run `step` in the group's partition nursery and wait for it: it completes even if the requesting
        client goes away; if the partition is resigned meanwhile, the request gets NOT_COORDINATOR."""
        outcome: list[Any] = []
        done = trio.Event()

        async def run() -> None:
            try:
                outcome.append((True, await step()))
            except Exception as exc:  # handed to the request, whose edge reports it; the partition lives on
                outcome.append((False, exc))
            finally:
                done.set()

        if not self._start(group, run):
            raise _fail(errors.NOT_COORDINATOR, f"broker {self.broker_id} is no longer coordinator of {group.group_id}")
        await done.wait()
        if not outcome:
            raise _fail(errors.NOT_COORDINATOR, f"broker {self.broker_id} lost group {group.group_id} meanwhile")
        ok, value = outcome[0]
        if not ok:
            raise value
        return value  # type: ignore[no-any-return]

    async def _append(self, group_id: str, records: list[Record]) -> ErrorCode:
        """Append to the group's offsets partition with acks=all; the error a member is told."""
        return _member_error(await self._write(group_id, records))

    async def _write(self, group_id: str, records: list[Record]) -> ErrorCode:
        tp = TopicPartition(GROUP_METADATA_TOPIC_NAME, self.partition_for(group_id))
        error = await self._offsets_log.append(tp, records, self.config["offsets.commit.timeout.ms"])
        if error is not errors.NONE:
            log.info("broker %d: write for group %s to %s failed: %s", self.broker_id, group_id, tp, error)
        return error

    async def _store_group(self, group: GroupMetadata) -> ErrorCode:
        return await self._append(group.group_id, [group_metadata_record(group, group.group_id, now_ms())])

    # -- JoinGroup ----------------------------------------------------------------------------------------------

    async def handle_join_group(self, request: JoinGroupRequest, client_id: str,
                                client_host: str) -> JoinGroupResponse:
        owned = self._owner(request.group_id)
        self._check_join(request)
        group = self._groups.get(request.group_id)
        if group is None:
            if request.member_id:
                raise _fail(errors.UNKNOWN_MEMBER_ID, f"group {request.group_id} has no member {request.member_id}")
            group = self._add_group(owned, request.group_id)
        if group.is_(_DEAD):
            raise _fail(errors.COORDINATOR_NOT_AVAILABLE, f"group {request.group_id} is being removed; retry")
        if not self._accepts_joining_member(group, request.member_id):
            member = group.members.get(request.member_id)
            if member is not None:  # a member that had not rejoined: the others take the places
                self._remove_member_and_update_group(group, member)
            elif request.member_id in group.pending_members:  # as Kafka's remove: not waited for any longer
                group.discard_pending(request.member_id)
                self._try_complete_join(group)
            raise _fail(errors.GROUP_MAX_SIZE_REACHED, f"group {group.group_id} has reached group.max.size "
                                                       f"({self.config['group.max.size']} members)")
        protocols = [(p.name, p.metadata) for p in request.protocols]
        if not group.supports_protocols(request.protocol_type, [name for name, _ in protocols]):
            raise _fail(errors.INCONSISTENT_GROUP_PROTOCOL,
                        f"group {group.group_id} runs protocol type {group.protocol_type!r} with protocols "
                        f"{sorted(group.candidate_protocols())}; the member offers {request.protocol_type!r} "
                        f"{[name for name, _ in protocols]}")
        if not request.member_id:
            return await self._join_unknown_member(group, request, protocols, client_id, client_host)
        return await self._join_known_member(group, request, protocols, client_id, client_host)

    def _accepts_joining_member(self, group: GroupMetadata, member_id: str) -> bool:
        """Kafka's acceptJoiningMember: while a rebalance gathers members, a member already waiting, or any while
        fewer than group.max.size wait; otherwise a member, or any while the group has fewer."""
        limit = self.config["group.max.size"]
        if group.is_(_EMPTY):
            return True
        if group.is_(_PREPARING):
            member = group.members.get(member_id)
            waiting = sum(1 for m in group.members.values() if m.join_waiter is not None)
            return (member is not None and member.join_waiter is not None) or waiting < limit
        return member_id in group.members or len(group.members) < limit

    def _check_join(self, request: JoinGroupRequest) -> None:
        low, high = self.config["group.min.session.timeout.ms"], self.config["group.max.session.timeout.ms"]
        if not low <= request.session_timeout_ms <= high:
            raise _fail(errors.INVALID_SESSION_TIMEOUT,
                        f"session timeout {request.session_timeout_ms} ms is outside [{low}, {high}] ms "
                        "(group.min.session.timeout.ms, group.max.session.timeout.ms)")
        if request.rebalance_timeout_ms <= 0:
            raise _fail(errors.INVALID_REQUEST, f"rebalance timeout {request.rebalance_timeout_ms} ms is not positive")
        if not request.protocol_type or not request.protocols:
            raise _fail(errors.INCONSISTENT_GROUP_PROTOCOL, "a member must name a protocol type and protocols")
        names = [p.name for p in request.protocols]
        if len(set(names)) != len(names) or not all(names):
            raise _fail(errors.INVALID_REQUEST, f"protocol names must be distinct and non-empty: {names}")
        if request.group_instance_id == "":
            raise _fail(errors.INVALID_REQUEST, "group.instance.id must not be empty (null for a dynamic member)")

    def _new_member_id(self, client_id: str) -> str:
        return f"{client_id or 'member'}-{uuid.UUID(int=self._rng.getrandbits(128), version=4)}"

    async def _join_unknown_member(self, group: GroupMetadata, request: JoinGroupRequest,
                                   protocols: list[tuple[str, bytes]], client_id: str,
                                   client_host: str) -> JoinGroupResponse:
        member_id = self._new_member_id(client_id)
        instance_id = request.group_instance_id
        if instance_id is not None or not request.require_known_member_id:
            old_member_id = group.static_members.get(instance_id) if instance_id is not None else None
            if old_member_id is not None:
                return await self._replace_static_member(group, request, old_member_id, member_id, protocols)
            member = MemberMetadata(member_id, instance_id, client_id, client_host, request.rebalance_timeout_ms,
                                    request.session_timeout_ms, request.protocol_type, protocols)
            return await self._add_member_and_rebalance(group, member)
        # KIP-394: a dynamic member first gets its id, and joins with it; a client that never comes back is
        # forgotten after its session timeout instead of holding up the rebalance as a member.
        group.pending_members.add(member_id)
        self._start_timer(group, pending_member_timer(member_id), self._expire_pending_member, group, member_id,
                          trio.current_time() + request.session_timeout_ms / 1000)
        return JoinGroupResponse(errors.MEMBER_ID_REQUIRED.code, member_id=member_id,
                                 error_message="join again with this member id")

    async def _join_known_member(self, group: GroupMetadata, request: JoinGroupRequest,
                                 protocols: list[tuple[str, bytes]], client_id: str,
                                 client_host: str) -> JoinGroupResponse:
        member_id = request.member_id
        if member_id in group.pending_members:
            member = MemberMetadata(member_id, request.group_instance_id, client_id, client_host,
                                    request.rebalance_timeout_ms,
                                    request.session_timeout_ms, request.protocol_type, protocols)
            return await self._add_member_and_rebalance(group, member)
        if group.is_fenced_instance(request.group_instance_id, member_id):
            raise _fenced(group, request.group_instance_id, member_id)
        member = group.members.get(member_id)
        if member is None:
            raise _fail(errors.UNKNOWN_MEMBER_ID, f"group {group.group_id} has no member {member_id}")
        member.rebalance_timeout_ms = request.rebalance_timeout_ms
        member.session_timeout_ms = request.session_timeout_ms
        if group.is_(_PREPARING) or not member.matches(protocols) or \
                (group.is_(_STABLE) and group.is_leader(member_id)):
            # The leader rejoining a stable group asks for a new assignment (metadata changed, say a new topic).
            return await self._update_member_and_rebalance(group, member, protocols)
        if group.is_(_COMPLETING) or group.is_(_STABLE):  # a resent join: the answer it already had
            return self._join_answer(group, member)
        raise _fail(errors.UNKNOWN_MEMBER_ID, f"group {group.group_id} is {group.state.value}")

    async def _add_member_and_rebalance(self, group: GroupMetadata, member: MemberMetadata) -> JoinGroupResponse:
        group.add(member)  # no longer pending, if it was
        if group.in_initial_delay:
            group.new_member_added = True
        return await self._park_join(group, member, f"member {member.member_id} joined")

    async def _update_member_and_rebalance(self, group: GroupMetadata, member: MemberMetadata,
                                           protocols: list[tuple[str, bytes]]) -> JoinGroupResponse:
        member.supported_protocols = protocols
        return await self._park_join(group, member, f"member {member.member_id} rejoined")

    async def _park_join(self, group: GroupMetadata, member: MemberMetadata, reason: str) -> JoinGroupResponse:
        if member.join_waiter is not None:  # an earlier join the member gave up on: it is answered by this one
            member.join_waiter.complete(JoinGroupResponse(errors.REBALANCE_IN_PROGRESS.code,
                                                          member_id=member.member_id))
        waiter = member.join_waiter = Waiter()
        if group.is_(_PREPARING):
            self._try_complete_join(group)
        else:
            self._prepare_rebalance(group, reason)
        return await waiter.wait()  # type: ignore[return-value]

    async def _replace_static_member(self, group: GroupMetadata, request: JoinGroupRequest, old_member_id: str,
                                     new_member_id: str, protocols: list[tuple[str, bytes]]) -> JoinGroupResponse:
        """A static member restarting: it takes its old place with the timeouts it joins with now; a stable group
        keeps its assignment (KIP-345, Kafka's updateStaticMemberAndRebalance)."""
        assert request.group_instance_id is not None
        leader_before = group.leader_id
        current = group.members.get(old_member_id)
        if current is not None and current.restart_being_stored:
            # Its last restart's member id is still being written: undoing that after this one would leave an id
            # that no log holds (Kafka fails outright there). The restarted process asks again after its backoff.
            raise _fail(errors.COORDINATOR_NOT_AVAILABLE, f"static member {request.group_instance_id}'s previous "
                                                          "restart is still being stored; retry")
        member = group.replace_static_member(request.group_instance_id, old_member_id, new_member_id)
        fenced = errors.FENCED_INSTANCE_ID
        for waiter in (member.join_waiter, member.sync_waiter):
            if waiter is not None:
                waiter.complete(JoinGroupResponse(fenced.code, member_id=old_member_id)
                                if waiter is member.join_waiter else SyncGroupResponse(fenced.code))
        member.join_waiter = member.sync_waiter = None
        old = member.supported_protocols, member.rebalance_timeout_ms, member.session_timeout_ms
        member.supported_protocols = protocols
        member.rebalance_timeout_ms = request.rebalance_timeout_ms
        member.session_timeout_ms = request.session_timeout_ms
        if group.is_(_STABLE) and self._keeps_assignment(group, old[0], protocols):
            self._complete_and_schedule_next_heartbeat(group, member)
            member.restart_being_stored = True
            try:
                error = await self._finish(group, lambda: self._store_group(group))
            finally:
                member.restart_being_stored = False
            if error is not errors.NONE:
                # As Kafka: the replacement is undone, so the member id the log holds goes on being the member's,
                # with its timeouts, and the restarted one is told to retry (unless the member left meanwhile).
                if group.members.get(new_member_id) is member:
                    member.supported_protocols, member.rebalance_timeout_ms, member.session_timeout_ms = old
                    group.replace_static_member(request.group_instance_id, new_member_id, old_member_id)
                    self._complete_and_schedule_next_heartbeat(group, member)
                raise _fail(error, f"group {group.group_id} could not store static member "
                                   f"{request.group_instance_id}'s new member id; retry")
            # Kafka answers with the leader id from before the replacement and no members, so that a restarted
            # leader does not take itself for the leader and work out an assignment the Stable group would drop.
            return JoinGroupResponse(errors.NONE.code, group.generation_id, group.protocol_type,
                                     group.protocol_name, leader_before or "", member.member_id, [])
        return await self._update_member_and_rebalance(group, member, protocols)

    @staticmethod
    def _keeps_assignment(group: GroupMetadata, old: list[tuple[str, bytes]], new: list[tuple[str, bytes]]) -> bool:
        """Whether a Stable group's assignment still holds for a restarted static member's protocols. Kafka asks
        only that the group would select the protocol it runs; kafkalite also has a consumer subscribe to the same
        topics under it, as a member with new topics would otherwise never get them. The rest of a consumer's
        metadata says what it owned in which generation, which a fresh process cannot know. The old protocols of a
        group loaded after a coordinator failover hold the selected one only, which is all this reads."""
        name = group.protocol_name
        if name is None or group.select_protocol() != name:
            return False
        if group.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return True
        try:
            return decode_subscription(dict(new)[name]).topics == decode_subscription(dict(old)[name]).topics
        except (KafkaError, KeyError):
            return False

    def _join_answer(self, group: GroupMetadata, member: MemberMetadata) -> JoinGroupResponse:
        is_leader = group.is_leader(member.member_id)
        return JoinGroupResponse(errors.NONE.code, group.generation_id, group.protocol_type, group.protocol_name,
                                 group.leader_id or "", member.member_id,
                                 group.join_members() if is_leader else [])

    # -- rebalance ----------------------------------------------------------------------------------------------

    def _prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        if group.is_(_COMPLETING):
            self._reset_and_propagate_assignment_error(group, errors.REBALANCE_IN_PROGRESS)
        group.pending_sync.clear()
        initial = group.is_(_EMPTY)
        timeout_s = group.max_rebalance_timeout_ms() / 1000
        delay_s = min(self.config["group.initial.rebalance.delay.ms"] / 1000, timeout_s) if initial else timeout_s
        group.transition_to(_PREPARING, now_ms())
        group.rebalance_token += 1
        group.new_member_added = False
        group.in_initial_delay = initial and delay_s > 0
        log.info("broker %d: group %s rebalancing (generation %d): %s", self.broker_id, group.group_id,
                 group.generation_id, reason)
        if initial and delay_s > 0:
            self._start_timer(group, _JOIN, self._initial_delayed_join, group, group.rebalance_token, delay_s,
                              timeout_s - delay_s)
        else:
            self._start_timer(group, _JOIN, self._delayed_join, group, group.rebalance_token,
                              trio.current_time() + timeout_s)
        self._try_complete_join(group)  # the last member left: nobody to wait for

    async def _initial_delayed_join(self, group: GroupMetadata, token: int, delay_s: float,
                                    remaining_s: float) -> None:
        """group.initial.rebalance.delay.ms: hold a new group's first rebalance while members keep arriving,
        each arrival extending the wait by the delay, until the rebalance timeout is used up."""
        while True:
            await trio.sleep(delay_s)
            if group.rebalance_token != token or not group.is_(_PREPARING):
                return
            if not (group.new_member_added and remaining_s > 0):
                break
            group.new_member_added = False
            delay_s, remaining_s = min(delay_s, remaining_s), max(remaining_s - delay_s, 0)
        group.in_initial_delay = False
        self._complete_join(group)

    async def _delayed_join(self, group: GroupMetadata, token: int, deadline: float) -> None:
        await trio.sleep_until(deadline)
        if group.rebalance_token == token and group.is_(_PREPARING):
            self._complete_join(group)

    def _try_complete_join(self, group: GroupMetadata) -> None:
        if group.is_(_PREPARING) and group.has_all_members_joined() and not group.in_initial_delay:
            self._complete_join(group)

    def _complete_join(self, group: GroupMetadata) -> None:
        """Kafka's onCompleteJoin: drop members that did not rejoin, open the next generation, answer everyone."""
        group.rebalance_token += 1
        group.in_initial_delay = False
        self._cancel_timer(group, _JOIN)
        self._cancel_timer(group, _SYNC)
        for member in group.not_yet_rejoined_members():
            if member.group_instance_id is not None:  # KIP-345: a static member keeps its place (and partitions)
                continue
            log.info("broker %d: group %s drops member %s, which did not rejoin in time", self.broker_id,
                     group.group_id, member.member_id)
            group.remove(member.member_id)
        if group.members and not group.elect_joined_leader():
            # Only static members are left and none rejoined: wait another rebalance timeout, as Kafka does, for
            # one of them to come back or for session timeouts to remove them.
            log.info("broker %d: group %s waits on: none of its static members rejoined", self.broker_id,
                     group.group_id)
            self._start_timer(group, _JOIN, self._delayed_join, group, group.rebalance_token,
                              trio.current_time() + group.max_rebalance_timeout_ms() / 1000)
            return
        group.init_next_generation(now_ms())
        if group.is_(_EMPTY):
            self._start(group, self._store_group, group)
            return
        for member in group.members.values():
            waiter, member.join_waiter = member.join_waiter, None
            if waiter is not None:  # a static member that did not rejoin hears of the generation at its next call
                waiter.complete(self._join_answer(group, member))
            member.is_new = False
            self._complete_and_schedule_next_heartbeat(group, member)
        group.pending_sync = set(group.members)
        self._start_timer(group, _SYNC, self._expire_pending_sync, group, group.generation_id,
                          trio.current_time() + group.max_rebalance_timeout_ms() / 1000)
        log.info("broker %d: group %s generation %d with %d members, protocol %s", self.broker_id, group.group_id,
                 group.generation_id, len(group.members), group.protocol_name)

    async def _expire_pending_sync(self, group: GroupMetadata, generation: int, deadline: float) -> None:
        """Kafka 3's pending-sync expiration: the members of a generation that have sent no SyncGroup within the
        rebalance timeout are removed, and the group rebalances without them. Heartbeats alone would keep such a
        member, and with it a group that never gets its assignment, forever."""
        await trio.sleep_until(deadline)
        if group.generation_id != generation or not (group.is_(_COMPLETING) or group.is_(_STABLE)) \
                or not group.pending_sync:
            return
        missing = sorted(group.pending_sync)
        for member_id in missing:
            group.remove(member_id)
        self._prepare_rebalance(group, f"members {missing} sent no SyncGroup within the rebalance timeout")

    def _reset_and_propagate_assignment_error(self, group: GroupMetadata, error: ErrorCode) -> None:
        for member in group.members.values():
            member.assignment = b""
            if member.sync_waiter is not None:
                member.sync_waiter.complete(SyncGroupResponse(error.code))
                member.sync_waiter = None

    # -- sessions -----------------------------------------------------------------------------------------------

    def _complete_and_schedule_next_heartbeat(self, group: GroupMetadata, member: MemberMetadata) -> None:
        deadline = trio.current_time() + member.session_timeout_ms / 1000
        if deadline < member.heartbeat_deadline and member.deadline_moved_up is not None:
            member.deadline_moved_up.set()  # a shorter session than before (a restart, or its undoing)
        member.heartbeat_deadline = deadline
        self._schedule_heartbeat_expiry(group, member)

    def _schedule_heartbeat_expiry(self, group: GroupMetadata, member: MemberMetadata) -> None:
        if not member.expiring:
            member.expiring = True
            if member.heartbeat_deadline == 0.0:
                member.heartbeat_deadline = trio.current_time() + member.session_timeout_ms / 1000
            self._start(group, self._expire_member, group, member)

    async def _expire_member(self, group: GroupMetadata, member: MemberMetadata) -> None:
        """Kafka's DelayedHeartbeat: a member that neither heartbeats nor waits on the group is removed."""
        try:
            while group.members.get(member.member_id) is member:
                now = trio.current_time()
                if now >= member.heartbeat_deadline:
                    if not member.should_keep_alive():
                        log.info("broker %d: group %s: member %s's session expired", self.broker_id,
                                 group.group_id, member.member_id)
                        self._remove_member_and_update_group(group, member)
                        return
                    member.heartbeat_deadline = now + member.session_timeout_ms / 1000
                member.deadline_moved_up = trio.Event()
                with trio.move_on_at(member.heartbeat_deadline):
                    await member.deadline_moved_up.wait()
        finally:
            member.expiring = False
            member.deadline_moved_up = None

    async def _expire_pending_member(self, group: GroupMetadata, member_id: str, deadline: float) -> None:
        await trio.sleep_until(deadline)
        if member_id in group.pending_members:
            group.discard_pending(member_id)
            self._try_complete_join(group)

    def _remove_member_and_update_group(self, group: GroupMetadata, member: MemberMetadata) -> None:
        group.remove(member.member_id)
        for waiter in (member.join_waiter, member.sync_waiter):
            if waiter is not None:
                waiter.complete(JoinGroupResponse(errors.UNKNOWN_MEMBER_ID.code, member_id=member.member_id)
                                if waiter is member.join_waiter else SyncGroupResponse(errors.UNKNOWN_MEMBER_ID.code))
        member.join_waiter = member.sync_waiter = None
        if group.is_(_STABLE) or group.is_(_COMPLETING):
            self._prepare_rebalance(group, f"member {member.member_id} left")
        elif group.is_(_PREPARING):
            self._try_complete_join(group)

    # -- SyncGroup ----------------------------------------------------------------------------------------------

    def _member(self, group: GroupMetadata | None, member_id: str, instance_id: str | None) -> MemberMetadata:
        """The member a request names, or UNKNOWN_MEMBER_ID / FENCED_INSTANCE_ID."""
        if group is None or group.is_(_DEAD) and not group.members:
            raise _fail(errors.UNKNOWN_MEMBER_ID, f"no such group, or no member {member_id} in it")
        if group.is_fenced_instance(instance_id, member_id):
            raise _fenced(group, instance_id, member_id)
        member = group.members.get(member_id)
        if member is None:
            raise _fail(errors.UNKNOWN_MEMBER_ID, f"group {group.group_id} has no member {member_id}")
        return member

    async def handle_sync_group(self, request: SyncGroupRequest) -> SyncGroupResponse:
        self._owner(request.group_id)
        group = self._groups.get(request.group_id)
        member = self._member(group, request.member_id, request.group_instance_id)
        assert group is not None
        if request.generation_id != group.generation_id:
            raise _fail(errors.ILLEGAL_GENERATION, f"generation {request.generation_id} is not the group's "
                                                   f"{group.generation_id}")
        if (request.protocol_type is not None and request.protocol_type != group.protocol_type) or \
                (request.protocol_name is not None and request.protocol_name != group.protocol_name):
            raise _fail(errors.INCONSISTENT_GROUP_PROTOCOL, f"the group runs {group.protocol_type}/"
                                                            f"{group.protocol_name}")
        refusal = SYNC_ANSWERS[group.state]
        if refusal is not None:
            raise _fail(refusal, f"group {group.group_id} is {group.state.value}")
        group.pending_sync.discard(member.member_id)
        if not group.pending_sync:
            self._cancel_timer(group, _SYNC)
        self._complete_and_schedule_next_heartbeat(group, member)
        if group.is_(_STABLE):
            return self._sync_answer(group, member)
        waiter = member.sync_waiter = Waiter()
        if group.is_leader(member.member_id):
            assignments = {a.member_id: a.assignment for a in request.assignments}
            self._start(group, self._store_assignment, group, group.generation_id, assignments)
        return await waiter.wait()  # type: ignore[return-value]

    def _sync_answer(self, group: GroupMetadata, member: MemberMetadata) -> SyncGroupResponse:
        return SyncGroupResponse(errors.NONE.code, member.assignment, group.protocol_type, group.protocol_name)

    async def _store_assignment(self, group: GroupMetadata, generation: int, assignments: dict[str, bytes]) -> None:
        """The leader's assignment, stored before anyone gets it; members it leaves out get an empty one."""
        for member in group.members.values():
            member.assignment = assignments.get(member.member_id, b"")
        error = await self._store_group(group)
        if not (group.is_(_COMPLETING) and group.generation_id == generation):
            return  # a member left or joined meanwhile: that rebalance answers the waiters
        if error is not errors.NONE:
            self._reset_and_propagate_assignment_error(group, error)
            self._prepare_rebalance(group, f"storing the assignment failed: {error}")
            return
        group.transition_to(_STABLE, now_ms())
        for member in group.members.values():
            if member.sync_waiter is not None:
                member.sync_waiter.complete(self._sync_answer(group, member))
                member.sync_waiter = None

    # -- Heartbeat, LeaveGroup ----------------------------------------------------------------------------------

    async def handle_heartbeat(self, request: HeartbeatRequest) -> HeartbeatResponse:
        self._owner(request.group_id)
        group = self._groups.get(request.group_id)
        member = self._member(group, request.member_id, request.group_instance_id)
        assert group is not None
        if group.is_(_EMPTY):
            raise _fail(errors.UNKNOWN_MEMBER_ID, f"group {group.group_id} is empty")
        if request.generation_id != group.generation_id:
            raise _fail(errors.ILLEGAL_GENERATION, f"generation {request.generation_id} is not the group's "
                                                   f"{group.generation_id}")
        self._complete_and_schedule_next_heartbeat(group, member)
        return HeartbeatResponse(HEARTBEAT_ANSWERS[group.state].code)

    async def handle_leave_group(self, request: LeaveGroupRequest) -> LeaveGroupResponse:
        self._owner(request.group_id)
        group = self._groups.get(request.group_id)
        if group is not None and group.is_(_DEAD):
            raise _fail(errors.COORDINATOR_NOT_AVAILABLE, f"group {request.group_id} is being removed")
        results = []
        for identity in request.members:
            error = self._leave(group, identity.member_id, identity.group_instance_id)
            results.append(LeaveGroupMemberResponse(identity.member_id, identity.group_instance_id, error.code))
        return LeaveGroupResponse(errors.NONE.code, results)

    def _leave(self, group: GroupMetadata | None, member_id: str, instance_id: str | None) -> ErrorCode:
        if group is None:
            return errors.UNKNOWN_MEMBER_ID
        if instance_id is not None:
            holder = group.static_members.get(instance_id)
            if holder is None:
                return errors.UNKNOWN_MEMBER_ID
            if member_id and holder != member_id:
                return errors.FENCED_INSTANCE_ID
            member_id = holder
        elif member_id in group.pending_members:
            group.discard_pending(member_id)
            self._try_complete_join(group)
            return errors.NONE
        member = group.members.get(member_id)
        if member is None:
            return errors.UNKNOWN_MEMBER_ID
        log.info("broker %d: group %s: member %s left", self.broker_id, group.group_id, member_id)
        self._remove_member_and_update_group(group, member)
        return errors.NONE

    # -- offsets ------------------------------------------------------------------------------------------------

    async def handle_commit_offsets(self, request: OffsetCommitRequest) -> OffsetCommitResponse:
        """Commit for a member of the current generation, or (generation -1) for a group no member manages: one
        that does not exist or is empty takes it whatever member id or group.instance.id it names, as Kafka's
        validateOffsetCommit does since KAFKA-14201 (a consumer with a group.instance.id that assign()s its
        partitions commits with its instance id: kafka-python and librdkafka do)."""
        owned = self._owner(request.group_id)
        group = self._groups.get(request.group_id)
        if request.generation_id < 0 and (group is None or group.is_(_EMPTY)):
            group = group or self._add_group(owned, request.group_id)
        else:
            self._check_member_commit(group, request)
            assert group is not None
            self._complete_and_schedule_next_heartbeat(group, group.members[request.member_id])
        limit = self.config["offset.metadata.max.bytes"]
        timestamp = now_ms()
        accepted: dict[TopicPartition, OffsetAndMetadata] = {}
        results = []
        for p in request.partitions:
            # Kafka measures it in Java chars: UTF-16 code units
            if p.committed_metadata is not None and len(p.committed_metadata.encode("utf-16-le")) // 2 > limit:
                results.append(OffsetCommitPartitionResponse(
                    p.topic, p.partition, errors.OFFSET_METADATA_TOO_LARGE.code,
                    f"commit metadata is longer than {limit} characters (offset.metadata.max.bytes)"))
                continue
            accepted[TopicPartition(p.topic, p.partition)] = OffsetAndMetadata(
                p.committed_offset, p.committed_leader_epoch, p.committed_metadata, timestamp)
            results.append(OffsetCommitPartitionResponse(p.topic, p.partition, errors.NONE.code))
        if accepted:
            error = await self._finish(group, lambda: self._store_offsets(group, accepted))  # type: ignore[arg-type]
            if error is not errors.NONE:
                for result in results:
                    if result.error_code == errors.NONE.code:
                        result.error_code, result.error_message = error.code, f"the commit was not stored: {error}"
        return OffsetCommitResponse(results)

    def _check_member_commit(self, group: GroupMetadata | None, request: OffsetCommitRequest) -> None:
        """Kafka's validateOffsetCommit, then the state's answer: the member and its generation come first, so a
        stale member hears ILLEGAL_GENERATION or UNKNOWN_MEMBER_ID, which tell it to rejoin, whatever the group
        is doing meanwhile."""
        if group is None:
            raise _fail(errors.ILLEGAL_GENERATION, f"group {request.group_id} does not exist, so generation "
                                                   f"{request.generation_id} is not its own; commit with generation "
                                                   f"{NO_GENERATION} from outside group management")
        if group.is_(_DEAD):
            raise _fail(errors.COORDINATOR_NOT_AVAILABLE, f"group {group.group_id} is {group.state.value}")
        self._member(group, request.member_id, request.group_instance_id)
        if request.generation_id != group.generation_id:
            raise _fail(errors.ILLEGAL_GENERATION, f"generation {request.generation_id} is not the group's "
                                                   f"{group.generation_id}")
        refusal = COMMIT_ANSWERS[group.state]
        if refusal is not None:
            raise _fail(refusal, f"group {group.group_id} is {group.state.value}")

    async def _store_offsets(self, group: GroupMetadata, offsets: dict[TopicPartition, OffsetAndMetadata]
                             ) -> ErrorCode:
        if self._groups.get(group.group_id) is not group:  # the request was checked before this step ran
            return errors.NOT_COORDINATOR
        if group.is_(_DEAD):  # deleted meanwhile: written after its tombstone, the commit would outlive it
            return errors.COORDINATOR_NOT_AVAILABLE
        timestamp = now_ms()
        group.prepare_offset_commit(offsets)
        error = errors.UNKNOWN_SERVER_ERROR
        try:
            error = await self._append(group.group_id, [offset_commit_record(group.group_id, tp, offset, timestamp)
                                                        for tp, offset in offsets.items()])
        finally:
            group.on_offset_commit_done(offsets, stored=error is errors.NONE)
        return error

    async def handle_fetch_offsets(self, request: OffsetFetchRequest) -> OffsetFetchResponse:
        self._owner(request.group_id)
        group = self._groups.get(request.group_id)
        offsets = group.offsets if group is not None else {}
        wanted = sorted(offsets) if request.partitions is None else [TopicPartition(t, p) for t, p in request.partitions]
        results = []
        for tp in wanted:
            found = offsets.get(tp)
            results.append(OffsetFetchPartitionResponse(tp.topic, tp.partition, -1) if found is None else
                           OffsetFetchPartitionResponse(tp.topic, tp.partition, found.offset, found.leader_epoch,
                                                        found.metadata))
        return OffsetFetchResponse(errors.NONE.code, results)

    async def handle_delete_offsets(self, request: OffsetDeleteRequest) -> OffsetDeleteResponse:
        """Kafka's OffsetDelete: any offset of an empty group; of a group with members, only a consumer group's
        offsets of topics it does not consume now (GROUP_SUBSCRIBED_TO_TOPIC), never another kind's
        (NON_EMPTY_GROUP). An empty group left without offsets is removed."""
        self._owner(request.group_id)
        group = self._groups.get(request.group_id)
        if group is None:
            raise _fail(errors.GROUP_ID_NOT_FOUND, f"group {request.group_id} does not exist")
        if group.is_(_DEAD):  # Kafka's groupNotExists holds for a Dead group, as DeleteGroups answers it too
            raise _fail(errors.GROUP_ID_NOT_FOUND, f"group {request.group_id} is being removed")
        subscribed = group.subscribed_topics()
        if not group.is_(_EMPTY) and group.protocol_type != CONSUMER_PROTOCOL_TYPE:
            raise _fail(errors.NON_EMPTY_GROUP, f"group {group.group_id} of protocol type {group.protocol_type!r} "
                                                "has members; only an empty group's offsets can be deleted")
        results, deleted = [], []
        for topic, partition in request.partitions:
            if not group.is_(_EMPTY) and (subscribed is None or topic in subscribed):
                results.append(OffsetDeletePartitionResponse(topic, partition, errors.GROUP_SUBSCRIBED_TO_TOPIC.code,
                                                             f"group {group.group_id} consumes {topic}"))
            else:
                deleted.append(TopicPartition(topic, partition))
                results.append(OffsetDeletePartitionResponse(topic, partition, errors.NONE.code))
        if deleted:
            error = await self._finish(group, lambda: self._cleanup(group, lambda g: g.remove_offsets(deleted)))
            if error is not errors.NONE:
                raise _fail(error, "the deletion was not stored")
        return OffsetDeleteResponse(errors.NONE.code, results)

    async def _cleanup(self, group: GroupMetadata, select: Callable[[GroupMetadata], Removed], *,
                       deleting: tuple[GroupState, int] | None = None) -> ErrorCode:
        """Kafka's cleanupGroupMetadata for one group: `select` takes offsets out of it, an empty group left with
        none becomes Dead (one `deleting` already is: its state before), and their tombstones are appended
        before anything else runs, so that the log has them in the order memory changed. A Dead group turns
        away commits and joins (COORDINATOR_NOT_AVAILABLE: retry) until it is forgotten, once its tombstones
        are written. Tombstones that never reached the log put the group back as it was, so that it agrees with
        its log (and an expiry is tried again at the next check); tombstones appended but not replicated in time
        stand, as they will be."""
        if self._groups.get(group.group_id) is not group:
            return errors.NOT_COORDINATOR  # resigned since the request was accepted: nothing is written
        if deleting is None and group.is_(_DEAD):
            return errors.NONE  # another removal is taking it
        before = deleting or (group.state, group.state_timestamp_ms)
        removed = select(group)
        if group.is_(_EMPTY) and not group.has_offsets:
            group.transition_to(_DEAD, now_ms())
        dead = group.is_(_DEAD)
        timestamp = now_ms()
        records = [offset_commit_record(group.group_id, tp, None, timestamp) for tp in removed]
        if dead:
            records.append(group_metadata_record(None, group.group_id, timestamp))
        written = await self._write(group.group_id, records) if records else errors.NONE
        if self._groups.get(group.group_id) is not group:
            return _member_error(written)  # resigned meanwhile: the next coordinator loads what the log says
        if written is errors.NONE or written in APPENDED_ANYWAY:
            if dead:
                log.info("broker %d: group %s removed with its offsets", self.broker_id, group.group_id)
                self._forget_group(group)
        else:
            for tp, offset in removed.items():  # as the log has them, commits still being written included
                group.offsets.setdefault(tp, offset)  # a commit made meanwhile is newer
            if dead:  # nothing moves a Dead group on, so it is still as this removal left it
                group.state, group.state_timestamp_ms = before
        return _member_error(written)

    # -- groups -------------------------------------------------------------------------------------------------

    async def handle_describe_groups(self, request: DescribeGroupsRequest) -> DescribeGroupsResponse:
        return DescribeGroupsResponse([self._describe(group_id) for group_id in request.groups])

    def _describe(self, group_id: str) -> DescribedGroup:
        try:
            self._owner(group_id)
        except KafkaError as exc:
            return DescribedGroup(exc.code, group_id, error_message=exc.message)
        group = self._groups.get(group_id)
        if group is None:
            return DescribedGroup(errors.NONE.code, group_id, _DEAD.value)
        # Kafka's GroupMetadata.summary: the protocol and each member's subscription and assignment only once the
        # group is Stable; before that they are those of a generation still being formed.
        protocol = (group.protocol_name or "") if group.is_(_STABLE) else ""
        members = [DescribedGroupMember(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                                        m.metadata(protocol) if protocol else b"", m.assignment if protocol else b"")
                   for m in group.members.values()]
        return DescribedGroup(errors.NONE.code, group_id, group.state.value, group.protocol_type or "", protocol,
                              members)

    async def handle_list_groups(self, request: ListGroupsRequest) -> ListGroupsResponse:
        """The groups this broker coordinates, those of the states asked for (any case; a name that is no state
        matches nothing, as in Kafka); while a partition loads, those loaded so far, with
        COORDINATOR_LOAD_IN_PROGRESS."""
        wanted = {state for name in request.states_filter
                  if (state := STATES_BY_NAME.get(name.lower())) is not None}
        loading = any(not owned.loaded for owned in self._partitions.values())
        return ListGroupsResponse(errors.COORDINATOR_LOAD_IN_PROGRESS.code if loading else errors.NONE.code, [
            ListedGroup(group.group_id, group.protocol_type or "", group.state.value)
            for group in sorted(self._groups.values(), key=lambda g: g.group_id)
            if not request.states_filter or group.state in wanted])

    async def handle_delete_groups(self, request: DeleteGroupsRequest) -> DeleteGroupsResponse:
        results = []
        for group_id in request.groups_names:
            try:
                await self._delete_group(group_id)
                results.append(DeletableGroupResult(group_id, errors.NONE.code))
            except KafkaError as exc:
                results.append(DeletableGroupResult(group_id, exc.code, exc.message))
        return DeleteGroupsResponse(results)

    async def _delete_group(self, group_id: str) -> None:
        self._owner(group_id)
        group = self._groups.get(group_id)
        if group is None or group.is_(_DEAD):
            raise _fail(errors.GROUP_ID_NOT_FOUND, f"group {group_id} does not exist")
        if not group.is_(_EMPTY):
            raise _fail(errors.NON_EMPTY_GROUP, f"group {group_id} has {len(group.members)} members; only an "
                                                "empty group can be deleted")
        before = (group.state, group.state_timestamp_ms)
        group.transition_to(_DEAD, now_ms())  # at once: nothing may join or commit once the deletion is accepted
        error = await self._finish(group, lambda: self._cleanup(group, lambda g: g.remove_offsets(list(g.offsets)),
                                                                deleting=before))
        if error is not errors.NONE:
            raise _fail(error, "the deletion was not stored")

    # -- offsets retention --------------------------------------------------------------------------------------

    async def _expire_offsets_loop(self) -> None:
        while True:
            await trio.sleep(self.config["offsets.retention.check.interval.ms"] / 1000)
            await self.cleanup_group_metadata()

    async def cleanup_group_metadata(self) -> None:
        """offsets.retention.minutes (`GroupMetadata.remove_expired_offsets`); an empty group left with no
        offsets is removed, tombstone and all."""
        retention_ms = self.config["offsets.retention.minutes"] * 60_000
        now = now_ms()
        await self._cleanup_all(lambda group: group.remove_expired_offsets(now, retention_ms))

    def on_partitions_deleted(self, partitions: list[TopicPartition]) -> None:
        """Kafka's onPartitionsDeleted (UpdateMetadata names a deleted topic's partitions): their committed offsets
        go from every group this broker coordinates, so that a topic created again under the name starts with
        none, and an empty group left with no offsets goes too."""
        if self._nursery is not None:
            self._nursery.start_soon(self._remove_deleted_partitions, frozenset(partitions))

    async def _remove_deleted_partitions(self, deleted: frozenset[TopicPartition]) -> None:
        """Until no group this broker holds has offsets of `deleted`: a removal the log refused (too few in-sync
        replicas) is tried again, as nothing else would remove them."""
        def select(group: GroupMetadata) -> Removed:
            return group.remove_offsets([tp for tp in {*group.offsets, *group.pending_commits} if tp in deleted])

        while True:
            await self._cleanup_all(select)
            if not any(tp in deleted for group in self._groups.values() for tp in group.offsets):
                return
            await trio.sleep(DELETED_PARTITIONS_RETRY_S)

    async def _cleanup_all(self, select: Callable[[GroupMetadata], Removed]) -> None:
        async with trio.open_nursery() as nursery:
            for group in list(self._groups.values()):
                nursery.start_soon(self._cleanup, group, select)
