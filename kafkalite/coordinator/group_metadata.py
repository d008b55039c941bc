"""GroupMetadata: one consumer group as its coordinator holds it (Kafka's GroupMetadata and MemberMetadata).

Theory of operation. A group moves through five states; the table `VALID_PREVIOUS_STATES` says, for each target
state, which states may precede it, and `GroupMetadata.transition_to` raises on any other move:

    Empty               no members; committed offsets may live on. A join starts a rebalance.
    PreparingRebalance  waiting for every known member to (re)join, until the rebalance timeout; a member that
                        does not rejoin in time is dropped.
    CompletingRebalance every member has joined and has its JoinGroup answer (the leader with everyone's
                        subscriptions); waiting for the leader's SyncGroup with the assignment.
    Stable              the assignment is stored and handed out; members heartbeat.
    Dead                the group is gone (deleted, or its offsets partition moved away).

A generation is one pass through PreparingRebalance: `init_next_generation` increments it, so anything a member
sends with an older generation is recognisably stale (ILLEGAL_GENERATION). Static members (group.instance.id,
KIP-345) keep their place across restarts: the instance id maps to the member id that currently holds it.

Plain data and rules, no I/O and no clock of its own: the coordinator passes time in, so all of this is tested
without a cluster.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass, field

import trio

from kafkalite.common.consumer_protocol import CONSUMER_PROTOCOL_TYPE, decode_subscription
from kafkalite.common.errors import KafkaError
from kafkalite.common.types import TopicPartition
from kafkalite.network.requests import JoinGroupResponseMember, Response


class IllegalGroupStateTransition(Exception):
    """A move the state table does not allow: a bug in the coordinator, never a client's doing."""


class GroupState(enum.Enum):
    """Named as `GROUP_STATES` names them."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


VALID_PREVIOUS_STATES: dict[GroupState, frozenset[GroupState]] = {
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.PREPARING_REBALANCE: frozenset({GroupState.STABLE, GroupState.COMPLETING_REBALANCE,
                                               GroupState.EMPTY}),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.DEAD: frozenset(GroupState),
}

STATES_BY_NAME: dict[str, GroupState] = {state.value.lower(): state for state in GroupState}
"""Each state by its name in lower case: Kafka's ListGroups matches states whatever their case."""


class Waiter:
    """A request parked until the group answers it (a JoinGroup until the join completes, a SyncGroup until the
    leader's assignment is stored). Answering twice keeps the first answer."""

    __slots__ = ("event", "response")

    def __init__(self) -> None:
        self.event = trio.Event()
        self.response: Response | None = None

    def complete(self, response: Response) -> None:
        if not self.event.is_set():
            self.response = response
            self.event.set()

    async def wait(self) -> Response:
        await self.event.wait()
        assert self.response is not None
        return self.response


@dataclass(slots=True)
class OffsetAndMetadata:
    offset: int
    leader_epoch: int
    metadata: str | None
    commit_timestamp_ms: int


@dataclass(eq=False, slots=True)
class MemberMetadata:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    supported_protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    join_waiter: Waiter | None = None
    sync_waiter: Waiter | None = None
    heartbeat_deadline: float = 0.0  # Trio time after which the member has failed unless kept alive
    is_new: bool = True
    expiring: bool = False  # whether a task watches this member's deadline
    deadline_moved_up: trio.Event | None = None  # set to wake that task when the deadline comes earlier
    restart_being_stored: bool = False  # a restart's new member id is being written; another restart waits

    @property
    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.supported_protocols]

    def metadata(self, protocol: str) -> bytes:
        return next((data for name, data in self.supported_protocols if name == protocol), b"")

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        return protocols == self.supported_protocols

    def vote(self, candidates: set[str]) -> str:
        """This member's most preferred protocol among those every member supports."""
        return next(name for name in self.protocol_names if name in candidates)

    def should_keep_alive(self) -> bool:
        """A member waiting for its JoinGroup or SyncGroup answer cannot heartbeat, so it is not expired then."""
        return self.join_waiter is not None or self.sync_waiter is not None


def pending_member_timer(member_id: str) -> str:
    """The key of a pending member's expiry in `GroupMetadata.timers`."""
    return f"pending member {member_id}"


@dataclass(eq=False)
class GroupMetadata:
    group_id: str
    state: GroupState = GroupState.EMPTY
    state_timestamp_ms: int = 0  # when the group entered its state (offsets of an Empty group expire from here)
    generation_id: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, MemberMetadata] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # group.instance.id -> member id
    pending_members: set[str] = field(default_factory=set)  # told MEMBER_ID_REQUIRED, not joined yet
    pending_sync: set[str] = field(default_factory=set)  # of this generation, and no SyncGroup from them yet
    # The timers of the rebalance under way (its join, its syncs), cancelled once what they wait for happened
    timers: dict[str, trio.CancelScope] = field(default_factory=dict)
    offsets: dict[TopicPartition, OffsetAndMetadata] = field(default_factory=dict)
    pending_commits: dict[TopicPartition, OffsetAndMetadata] = field(default_factory=dict)  # being written
    rebalance_token: int = 0  # changes whenever a timed rebalance step is superseded
    in_initial_delay: bool = False  # a new group's first rebalance waits group.initial.rebalance.delay.ms
    new_member_added: bool = False  # a member arrived during that delay, which extends it

    def __repr__(self) -> str:
        return f"Group({self.group_id!r}, {self.state.value}, generation {self.generation_id}, {len(self.members)} members)"

    def is_(self, state: GroupState) -> bool:
        return self.state is state

    def transition_to(self, target: GroupState, now_ms: int) -> None:
        if self.state not in VALID_PREVIOUS_STATES[target]:
            raise IllegalGroupStateTransition(f"group {self.group_id}: no transition from {self.state.value} to {target.value}")
        self.state = target
        self.state_timestamp_ms = now_ms

    # -- members --------------------------------------------------------------------------------------------------

    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def add(self, member: MemberMetadata) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        if self.leader_id is None:
            self.leader_id = member.member_id
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        self.discard_pending(member.member_id)

    def discard_pending(self, member_id: str) -> None:
        """A member told MEMBER_ID_REQUIRED is no longer waited for (it joined, left, or was refused): its expiry
        timer ends now, as Kafka completes its pending-member DelayedHeartbeat, rather than sleeping out the
        session timeout."""
        self.pending_members.discard(member_id)
        scope = self.timers.pop(pending_member_timer(member_id), None)
        if scope is not None:
            scope.cancel()

    def remove(self, member_id: str) -> MemberMetadata | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        if member.deadline_moved_up is not None:  # the watch on its session ends now (Kafka completes it on leave)
            member.deadline_moved_up.set()
        if member.group_instance_id is not None and self.static_members.get(member.group_instance_id) == member_id:
            del self.static_members[member.group_instance_id]
        self.pending_sync.discard(member_id)
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return member

    def replace_static_member(self, instance_id: str, old_member_id: str, new_member_id: str) -> MemberMetadata:
        """A static member restarting takes its old place under a new member id, leadership included."""
        member = self.members.pop(old_member_id)
        member.member_id = new_member_id
        self.members[new_member_id] = member
        self.static_members[instance_id] = new_member_id
        if old_member_id in self.pending_sync:
            self.pending_sync.remove(old_member_id)
            self.pending_sync.add(new_member_id)
        if self.leader_id == old_member_id:
            self.leader_id = new_member_id
        return member

    def is_fenced_instance(self, instance_id: str | None, member_id: str) -> bool:
        """A static member whose instance id is now held by another member id (FENCED_INSTANCE_ID)."""
        if instance_id is None:
            return False
        holder = self.static_members.get(instance_id)
        return holder is not None and holder != member_id

    def has_all_members_joined(self) -> bool:
        return all(m.join_waiter is not None for m in self.members.values()) and not self.pending_members

    def not_yet_rejoined_members(self) -> list[MemberMetadata]:
        return [m for m in self.members.values() if m.join_waiter is None]

    def elect_joined_leader(self) -> bool:
        """Kafka's maybeElectNewJoinedLeader: a leader that did not rejoin (a static member away) hands leadership
        to a member that did, since only a member awaiting its JoinGroup answer can compute the assignment; False
        if no member rejoined."""
        leader = self.members.get(self.leader_id) if self.leader_id is not None else None
        if leader is not None and leader.join_waiter is not None:
            return True
        joined = next((m for m in self.members.values() if m.join_waiter is not None), None)
        if joined is None:
            return False
        self.leader_id = joined.member_id
        return True

    def max_rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    # -- protocols ------------------------------------------------------------------------------------------------

    def candidate_protocols(self) -> set[str]:
        names = [set(m.protocol_names) for m in self.members.values()]
        return set.intersection(*names) if names else set()

    def supports_protocols(self, protocol_type: str, names: list[str]) -> bool:
        """Kafka's rule: a first member may bring anything; a later one must share the type and one protocol."""
        if not self.members:
            return bool(protocol_type) and bool(names)
        return self.protocol_type == protocol_type and bool(self.candidate_protocols() & set(names))

    def select_protocol(self) -> str:
        """The protocol that most members prefer among those all support (ties: the first name, sorted)."""
        candidates = self.candidate_protocols()
        votes: dict[str, int] = {}
        for member in self.members.values():
            choice = member.vote(candidates)
            votes[choice] = votes.get(choice, 0) + 1
        return min(votes, key=lambda name: (-votes[name], name))

    def init_next_generation(self, now_ms: int) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.transition_to(GroupState.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.transition_to(GroupState.EMPTY, now_ms)

    def join_members(self) -> list[JoinGroupResponseMember]:
        """Every member's metadata for the chosen protocol, as the leader's JoinGroup answer lists them."""
        assert self.protocol_name is not None
        return [JoinGroupResponseMember(m.member_id, m.metadata(self.protocol_name), m.group_instance_id)
                for m in self.members.values()]

    def subscribed_topics(self) -> set[str] | None:
        """The topics the members of a consumer group subscribe to; None when unknown (another protocol type, no
        generation yet, metadata that does not decode), which Kafka treats as subscribed to everything."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE or self.protocol_name is None or not self.members:
            return None
        topics: set[str] = set()
        try:
            for member in self.members.values():
                topics.update(decode_subscription(member.metadata(self.protocol_name)).topics)
        except KafkaError:
            return None
        return topics

    # -- offsets (Kafka's pendingOffsetCommits) -------------------------------------------------------------------

    @property
    def has_offsets(self) -> bool:
        return bool(self.offsets or self.pending_commits)

    def prepare_offset_commit(self, offsets: dict[TopicPartition, OffsetAndMetadata]) -> None:
        """A commit is being written: its partitions are not expired meanwhile."""
        self.pending_commits.update(offsets)

    def on_offset_commit_done(self, offsets: dict[TopicPartition, OffsetAndMetadata], stored: bool) -> None:
        """A commit's write ended. A partition whose offset was removed while the commit was written (the
        group or the offset deleted, the topic deleted) does not get it back: its tombstone follows the commit
        in the log."""
        for tp, offset in offsets.items():
            if stored and tp in self.pending_commits:
                self.offsets[tp] = offset
            if self.pending_commits.get(tp) is offset:
                del self.pending_commits[tp]

    def remove_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, OffsetAndMetadata]:
        """Take the offsets of `partitions` out, with any commit of them still being written: its record is in
        the log already (it is pending only once appended), so it is the newest there and among those returned,
        whose tombstones must follow."""
        removed = {}
        for tp in partitions:
            offset = self.offsets.pop(tp, None)
            pending = self.pending_commits.pop(tp, None)
            newest = pending if pending is not None else offset
            if newest is not None:
                removed[tp] = newest
        return removed

    def remove_expired_offsets(self, now_ms: int, retention_ms: int) -> dict[TopicPartition, OffsetAndMetadata]:
        """offsets.retention.minutes, as Kafka's removeExpiredOffsets: an Empty group's offsets a retention period
        after it emptied, even those committed since (by an admin, say), which go with the group; a Stable
        consumer group's offsets of topics it no longer subscribes to, a period after their commit (KIP-496); a
        group that never had members, a period after each commit. Never an offset whose commit is being
        written."""
        since: int | None = None
        if self.is_(GroupState.EMPTY):
            if self.protocol_type is not None:
                since = self.state_timestamp_ms
            subscribed: set[str] = set()
        elif self.is_(GroupState.STABLE) and (topics := self.subscribed_topics()) is not None:
            subscribed = topics
        else:
            return {}
        return self.remove_offsets([tp for tp, offset in self.offsets.items()
                                    if tp.topic not in subscribed and tp not in self.pending_commits
                                    and now_ms - (offset.commit_timestamp_ms if since is None else since)
                                    >= retention_ms])
