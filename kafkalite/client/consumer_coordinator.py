"""The consumer's side of a group (Kafka's AbstractCoordinator and ConsumerCoordinator in one).

Theory of operation, as in Kafka's consumer:
- The application's `poll()` drives membership: each poll first finds the coordinator, (re)joins when needed
  (JoinGroup, then SyncGroup with the assignment the leader computed, in a background task that outlives a
  poll's timeout), calls the rebalance callbacks, and
  commits automatically every auto.commit.interval.ms. A consumer that does not poll does not rejoin: its
  rebalance timeout is max.poll.interval.ms.
- A background task heartbeats every heartbeat.interval.ms while the member is stable. It learns of rebalances
  (REBALANCE_IN_PROGRESS) and of having been dropped (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION), and it leaves the
  group if the application has not polled for max.poll.interval.ms; that consumer's next poll raises
  `PollIntervalExceededError` and the poll after it rejoins.
- Eager protocols (range, roundrobin, sticky) revoke everything before rejoining; the cooperative one
  (cooperative-sticky) revokes only what the new assignment takes away, and rejoins once more after revoking
  (KIP-429). Partitions taken away by the group behind the member's back (it was dropped) are "lost": the
  on_lost callback gets them, and no commit is tried for them.
- Everything the coordinator is asked goes over a second connection (`ClientTransport.sibling`), since a
  JoinGroup may be parked there for a whole rebalance.

A poll may be cancelled (its timeout) anywhere here; every step leaves the member in a state the next poll
continues from: a member id obtained is kept, a join interrupted is sent again, callbacks already run are not
run twice.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import math
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import trio

from kafkalite.client.arguments import checked_leader_epoch, non_negative_int
from kafkalite.client.assignors import ASSIGNORS, COOPERATIVE, rebalance_protocol
from kafkalite.client.in_flight import InFlight
from kafkalite.client.metadata import ClusterMetadata
from kafkalite.client.transport import ClientTransport
from kafkalite.common import errors
from kafkalite.common.consumer_protocol import (
    CONSUMER_PROTOCOL_TYPE, Assignment, Subscription, decode_assignment, decode_subscription, encode_assignment,
    encode_subscription,
)
from kafkalite.common.errors import ErrorCode, KafkaError, UnknownMemberIdError
from kafkalite.common.types import INTERNAL_TOPICS, TopicPartition
from kafkalite.network.requests import (
    NO_GENERATION, FindCoordinatorRequest, FindCoordinatorResponse, HeartbeatRequest, HeartbeatResponse,
    JoinGroupProtocol, JoinGroupRequest, JoinGroupResponse, LeaveGroupRequest, MemberIdentity, MetadataBroker,
    OffsetCommitPartition, OffsetCommitRequest, OffsetCommitResponse, OffsetFetchRequest, OffsetFetchResponse,
    MetadataResponse, Request, SyncGroupAssignment, SyncGroupRequest, SyncGroupResponse,
)

log = logging.getLogger(__name__)

JOIN_TIMEOUT_MARGIN_S = 5.0  # Kafka's join request timeout: the rebalance timeout plus this
Listener = Callable[[set[TopicPartition]], Any]


class PollIntervalExceededError(UnknownMemberIdError):
    """The consumer did not poll within max.poll.interval.ms, so it left its group; the next poll rejoins."""


@dataclass(frozen=True, slots=True)
class OffsetAndMetadata:
    """An offset to commit (the next one to read), with its metadata and the leader epoch of the record before it;
    checked here, so that a float offset is not committed (a group would then skip a record) and a string fails
    at the call, not inside the coordinator."""

    offset: int
    metadata: str | None = None
    leader_epoch: int = -1

    def __post_init__(self) -> None:
        non_negative_int(self.offset, "OffsetAndMetadata offset")
        if self.metadata is not None and not isinstance(self.metadata, str):
            raise TypeError(f"OffsetAndMetadata metadata must be a str or None, not {type(self.metadata).__name__}")
        checked_leader_epoch(self.leader_epoch, "OffsetAndMetadata leader_epoch")


# What a coordinator error means for the member: find the coordinator again, retry, or rejoin as who.
COORDINATOR_ERRORS = frozenset({errors.COORDINATOR_NOT_AVAILABLE, errors.NOT_COORDINATOR,
                                errors.NETWORK_EXCEPTION, errors.REQUEST_TIMED_OUT})
RETRY_ERRORS = frozenset({errors.COORDINATOR_LOAD_IN_PROGRESS, errors.REBALANCE_IN_PROGRESS})
RESET_GENERATION_ERRORS = frozenset({errors.ILLEGAL_GENERATION})
RESET_MEMBER_ERRORS = frozenset({errors.UNKNOWN_MEMBER_ID})


IMMEDIATE_REJOIN_ERRORS = frozenset({errors.MEMBER_ID_REQUIRED, errors.REBALANCE_IN_PROGRESS,
                                     errors.UNKNOWN_MEMBER_ID, errors.ILLEGAL_GENERATION})
_REJOINS_AT_ONCE = 2
"""Immediate rejoins in a row before one waits retry.backoff.ms."""


class GroupMember(Protocol):
    """What the coordinator needs of its consumer: the assignment and the positions it commits."""

    def _set_assignment(self, partitions: set[TopicPartition]) -> None: ...

    def assignment(self) -> set[TopicPartition]: ...

    def _consumed_positions(self) -> dict[TopicPartition, OffsetAndMetadata]: ...

    def _awaiting_committed(self, tp: TopicPartition) -> int | None: ...

    def _use_committed(self, tp: TopicPartition, committed: OffsetAndMetadata, generation: int) -> None: ...

    def _wake(self) -> None: ...


class _CommitOrder:
    """Commits go out one at a time, in the order they were made, as Kafka's consumer sends them in order on its
    one connection to the coordinator: a commit takes a ticket when it is made (`take`) and waits for its `turn`.
    Otherwise two commit_async() calls, or a commit and the retry of an earlier one, could reach the coordinator in
    either order, and the older offsets be the ones kept."""

    def __init__(self) -> None:
        self._issued = 0
        self._serving = 0
        self._abandoned: set[int] = set()  # tickets whose commits were cancelled before their turn
        self._moved = trio.Event()

    def take(self) -> int:
        self._issued += 1
        return self._issued - 1

    @contextlib.asynccontextmanager
    async def turn(self, ticket: int) -> AsyncIterator[None]:
        try:
            while self._serving != ticket:
                await self._moved.wait()  # woken only by a move, after which the loop looks again
        except BaseException:  # cancelled before its turn (a wake-up cannot be cancelled): the turn passes it by
            self._abandoned.add(ticket)
            raise
        try:
            yield
        finally:
            self._advance()

    def _advance(self) -> None:
        self._serving += 1
        while self._serving in self._abandoned:
            self._abandoned.discard(self._serving)
            self._serving += 1
        self._moved.set()
        self._moved = trio.Event()


class ConsumerCoordinator:
    def __init__(self, group_id: str, config: Mapping[str, Any], transport: ClientTransport,
                 metadata: ClusterMetadata, consumer: GroupMember) -> None:
        self.group_id = group_id
        self.instance_id: str | None = config["group.instance.id"]
        self._session_timeout_ms: int = config["session.timeout.ms"]
        self._rebalance_timeout_ms: int = config["max.poll.interval.ms"]
        self._heartbeat_interval_s = config["heartbeat.interval.ms"] / 1000
        self._auto_commit: bool = config["enable.auto.commit"]
        self._auto_commit_interval_s = config["auto.commit.interval.ms"] / 1000
        self._retry_backoff_s = config["retry.backoff.ms"] / 1000
        self._api_timeout_s = config["default.api.timeout.ms"] / 1000
        self._assignors = [ASSIGNORS[name]() for name in config["partition.assignment.strategy"]]
        self.protocol = rebalance_protocol([a.name for a in self._assignors])
        self.transport = transport
        self.metadata = metadata
        self._consumer = consumer
        self._commit_order = _CommitOrder()
        self.coordinator_id: int | None = None
        self.member_id = ""
        self.generation = NO_GENERATION
        self.stable = False  # joined and synced for `generation`
        self._rejoin_needed = False
        self._join_prepared = False
        self._owned_before_join: set[TopicPartition] = set()
        self._topics: set[str] = set()
        self._pattern: re.Pattern[str] | None = None
        self._pattern_listed_at = -math.inf  # when the pattern was last matched against every topic
        self._pattern_retry_at = -math.inf  # after a listing no broker answered: not before retry.backoff.ms
        self._listeners: dict[str, Listener | None] = {}
        self._assigned_counts: dict[str, int] = {}  # partition counts the last assignment was made for
        self._next_auto_commit: float | None = None  # from the first poll on
        self._auto_committing = False
        self._last_poll = 0.0
        self._polling = 0
        self._pending_error: Exception | None = None  # raised from the next poll
        self._lost_pending = False  # the group dropped this member; its partitions await on_lost
        # A poll's on_revoke under way: the task running it, and an event set when it returns (`_revoking`).
        self._revocation: tuple[trio.lowlevel.Task, trio.Event] | None = None
        self._heartbeat_wake = trio.Event()
        self._join = InFlight[set[TopicPartition]]("joining the group")
        self._commit_before_join = InFlight[None]("the commit before rebalancing")
        self._pattern_listing = InFlight[MetadataResponse]("listing the topics the pattern may match")
        self._membership = 0  # changes with each subscription and each loss of membership: what a join is for
        self._nursery: trio.Nursery | None = None

    # -- subscription ---------------------------------------------------------------------------------------

    @property
    def subscribed(self) -> bool:
        return bool(self._topics) or self._pattern is not None

    def subscribe(self, topics: Iterable[str] | None, pattern: re.Pattern[str] | None,
                  listeners: dict[str, Listener | None]) -> None:
        self._membership += 1
        self._topics = set(topics or ())
        self._pattern = pattern
        self._pattern_listed_at = -math.inf
        self._listeners = listeners
        # Metadata for the subscription only, replacing the last one's; for a pattern, every topic, which creates
        # none (Kafka's MetadataRequest.Builder.allTopics()), where asking for the topics it matched would create
        # them again once deleted.
        self.metadata.track("subscription", None if pattern is not None else self._topics)
        self._rejoin_needed = True

    async def unsubscribe(self) -> None:
        """Kafka's onLeavePrepare, then leave: the partitions the group gave are revoked first, so that an
        application committing in on_revoke (at-least-once) commits what it processed."""
        inside = await self._wait_for_revocation()
        owned = self._consumer.assignment()
        if self.subscribed and owned and not inside:  # dropped by the group already (not stable): lost
            await self._call("on_revoke" if self.stable else "on_lost", owned)
        await self.maybe_leave_group("the consumer unsubscribed")
        self._membership += 1
        self._topics, self._pattern = set(), None
        self.metadata.track("subscription", ())
        self.metadata.track("group", ())
        self._consumer._set_assignment(set())

    def subscription(self) -> set[str]:
        return set(self._topics)

    async def _refresh_pattern(self) -> None:
        """A pattern subscription follows the cluster's topics, listed again every metadata.max.age.ms.

        Its own clock, not the metadata cache's age: the client's background refresh renews the cache for the
        tracked topics as soon as it grows old, so waiting for an expired cache could wait forever, and a topic
        created later would never be seen. Also as soon as a matched topic has left the cache, which each refresh
        asking for every topic replaces (the one after a fetch failed for the topic's partitions, say): deleted,
        and its partitions, no longer in metadata, would fail poll() after default.api.timeout.ms (Kafka's
        consumer matches its pattern again at every metadata update)."""
        now = trio.current_time()
        if self._pattern is None or now < self._pattern_retry_at or self._topics \
                and now < self._pattern_listed_at + self.metadata.max_age_s \
                and all(topic in self.metadata.topics for topic in self._topics):
            return
        try:
            response = await self._pattern_listing.wait(self._nursery, lambda: self.metadata.fetch(None),
                                                        self._membership)
        except KafkaError as exc:
            if not exc.retriable:
                raise
            # No broker answered: as Kafka's poll(), which never raises a network error, poll on and list again
            # after retry.backoff.ms. Raised, it failed every poll at once, and a poll loop let no time pass.
            log.info("%s: listing topics for pattern %s failed: %s", self.transport.name, self._pattern.pattern, exc)
            self._pattern_retry_at = now + self._retry_backoff_s
            return
        self._pattern_listed_at = now
        matched = {t.name for t in response.topics if t.error_code == 0 and t.name not in INTERNAL_TOPICS
                   and self._pattern.fullmatch(t.name)}
        if matched != self._topics:
            log.info("%s: pattern %s now matches %s", self.transport.name, self._pattern.pattern, sorted(matched))
            self._topics = matched
            self._rejoin_needed = True

    # -- the poll loop's part ---------------------------------------------------------------------------------

    def poll_started(self) -> None:
        self._polling += 1
        self._last_poll = trio.current_time()

    def poll_ended(self) -> None:
        self._polling -= 1
        self._last_poll = trio.current_time()

    async def poll(self) -> None:
        """Membership work due in this poll: raise a pending eviction, rejoin if needed, commit if due."""
        if self._pending_error is not None:
            error, self._pending_error = self._pending_error, None
            raise error
        if self.subscribed:
            await self._refresh_pattern()
            self._check_partition_counts()
            if self._rejoin_needed or not self.stable:
                await self._ensure_active_group()
        now = trio.current_time()
        if self._next_auto_commit is None:
            self._next_auto_commit = now + self._auto_commit_interval_s
        elif self._auto_commit and now >= self._next_auto_commit and not self._auto_committing:
            self._next_auto_commit = now + self._auto_commit_interval_s
            self._auto_commit_in_background()

    def _auto_commit_in_background(self) -> None:
        """Commit the positions as they are now without holding up the poll that found the commit due, as Kafka's
        consumer auto-commits asynchronously: a coordinator slow to answer (failing over, loading) must not keep
        records from the application, nor a short poll timeout cancel every commit before it is answered. One
        auto-commit is in flight at a time."""
        self._auto_committing = True
        self.commit_in_background(None, self._auto_commit_done)

    def _auto_commit_done(self, error: KafkaError | None) -> None:
        self._auto_committing = False
        if error is not None:
            log.warning("%s: auto-commit of %s failed: %s", self.transport.name, self.group_id, error)

    def _check_partition_counts(self) -> None:
        """The leader asks for a new assignment when a subscribed topic gained partitions (or appeared)."""
        if not self.stable or not self._assigned_counts:
            return
        current = {t: self.metadata.partition_count(t) for t in self._assigned_counts}
        if any(count is not None and count != self._assigned_counts[t] for t, count in current.items()):
            self._rejoin_needed = True

    async def _ensure_coordinator(self) -> int:
        while self.coordinator_id is None:
            try:
                # Any broker answers, so the consumer's main connections serve: they follow the cluster's brokers.
                response: FindCoordinatorResponse = await self.metadata.transport.send_to_any(
                    FindCoordinatorRequest(self.group_id))
            except KafkaError as exc:
                error: ErrorCode = exc.error
            else:
                error = errors.for_code(response.error_code)
                if error is errors.NONE:
                    self.transport.add_node(MetadataBroker(response.node_id, response.host, response.port))
                    self.coordinator_id = response.node_id
                    self._heartbeat_wake.set()
                    break
                if not error.retriable:
                    raise error.exception(response.error_message)
            await trio.sleep(self._retry_backoff_s)
        return self.coordinator_id

    async def _send(self, request: Request, timeout_s: float | None = None) -> Any:
        """To the coordinator; a broker that cannot be reached makes the coordinator unknown (NETWORK_EXCEPTION)."""
        coordinator = await self._ensure_coordinator()
        try:
            return await self.transport.send(coordinator, request, timeout_s)
        except KafkaError:
            self.coordinator_dead()
            raise

    def coordinator_dead(self) -> None:
        self.coordinator_id = None

    def _handle_coordinator_error(self, error: ErrorCode) -> bool:
        """True if `error` is one a retry (after finding the coordinator again, or after a pause) may cure."""
        if error in COORDINATOR_ERRORS:
            self.coordinator_dead()
            return True
        return error in RETRY_ERRORS

    # -- joining --------------------------------------------------------------------------------------------

    async def _ensure_active_group(self) -> None:
        """Rejoin: callbacks run here, in poll(); the JoinGroup and SyncGroup run in flight (`InFlight`)."""
        await self._prepare_join()
        self._consumer._check_open("poll()")  # closed while a callback ran (from another task): no join
        if not self.subscribed:  # the callback unsubscribed
            return
        await self._on_join_complete(await self._join.wait(self._nursery, self._join_group, self._membership))

    async def _join_group(self) -> set[TopicPartition]:
        rejoined_at_once = 0
        while True:
            try:
                return await self._join_and_sync()
            except KafkaError as exc:
                if not self._handle_join_error(exc.error):
                    raise
                # As Kafka, these rejoin at once (the handshake's MEMBER_ID_REQUIRED, a rebalance begun meanwhile),
                # but not over and over: a coordinator answering them every time, at once, made a loop in which
                # no time passed.
                if exc.error in IMMEDIATE_REJOIN_ERRORS and rejoined_at_once < _REJOINS_AT_ONCE:
                    rejoined_at_once += 1
                else:
                    rejoined_at_once = 0
                    await trio.sleep(self._retry_backoff_s)

    async def _prepare_join(self) -> None:
        """Once per rebalance (Kafka's onJoinPrepare): commit what was consumed, and, eager, revoke it all. Both
        come before the member counts as rebalancing, as in Kafka, so that on_revoke may commit for the generation
        it consumed in."""
        if self._join_prepared:
            return
        owned = self._consumer.assignment()
        self._owned_before_join = owned if self.protocol == COOPERATIVE else set(owned)
        if self.stable and owned and self._auto_commit:
            await self._commit_before_join.wait(self._nursery,
                                                lambda: self._commit_quietly("commit before rebalancing"),
                                                self._membership)
        revoking = self.protocol != COOPERATIVE and bool(owned)
        try:
            if revoking:
                with self._revoking():
                    await self._call("on_revoke", owned)
        finally:
            # As Kafka's onJoinPrepare: a callback that raises has still given the partitions up, and is not called
            # again; its error reaches this poll, and the next poll goes on with the join.
            if revoking:
                self._consumer._set_assignment(set())
                self._lost_pending = False  # dropped by the group while on_revoke ran: nothing is left to lose
            self.stable = False
            self._join_prepared = True
            self.metadata.track("group", ())  # the leader of the next generation tracks them, as in Kafka
            self._rejoin_needed = True

    def _handle_join_error(self, error: ErrorCode) -> bool:
        if error is errors.MEMBER_ID_REQUIRED:
            return True
        if error in RESET_MEMBER_ERRORS:
            self.member_id, self.generation = "", NO_GENERATION
            return True
        if error in RESET_GENERATION_ERRORS:
            self.generation = NO_GENERATION
            return True
        return self._handle_coordinator_error(error)

    async def _join_and_sync(self) -> set[TopicPartition]:
        """One JoinGroup and SyncGroup; the assignment."""
        owned = self._consumer.assignment() if self.protocol == COOPERATIVE else self._owned_before_join
        subscription = encode_subscription(Subscription(tuple(sorted(self._topics)), None,
                                                        tuple(sorted(owned)), self.generation))
        response: JoinGroupResponse = await self._send(JoinGroupRequest(
            self.group_id, self._session_timeout_ms, self._rebalance_timeout_ms, self.member_id,
            CONSUMER_PROTOCOL_TYPE, [JoinGroupProtocol(a.name, subscription) for a in self._assignors],
            self.instance_id), self._rebalance_timeout_ms / 1000 + JOIN_TIMEOUT_MARGIN_S)
        if response.member_id:
            self.member_id = response.member_id
        errors.raise_for(response.error_code, response.error_message)
        self.generation = response.generation_id
        assignments: list[SyncGroupAssignment] = []
        if response.leader == self.member_id and response.members:
            assignments = await self._perform_assignment(response)
        synced: SyncGroupResponse = await self._send(SyncGroupRequest(
            self.group_id, self.generation, self.member_id, assignments, self.instance_id, CONSUMER_PROTOCOL_TYPE,
            response.protocol_name))
        errors.raise_for(synced.error_code, synced.error_message)
        return set(decode_assignment(synced.assignment).partitions) if synced.assignment else set()

    async def _perform_assignment(self, response: JoinGroupResponse) -> list[SyncGroupAssignment]:
        """The leader's work: every member's subscription, the partition counts, the chosen assignor."""
        subscriptions = {m.member_id: decode_subscription(m.metadata) for m in response.members}
        topics = sorted({t for s in subscriptions.values() for t in s.topics})
        # Tracked until the next rebalance: the leader watches every member's topics for added partitions.
        self.metadata.track("group", topics)
        if any(self.metadata.partition_count(t) is None for t in topics):  # known counts are kept up to date
            await self.metadata.refresh()  # by the metadata refresh, which triggers a rejoin on change
        counts = {t: self.metadata.partition_count(t) or 0 for t in topics}
        assignor = next(a for a in self._assignors if a.name == response.protocol_name)
        assigned = assignor.assign(counts, subscriptions)
        self._assigned_counts = counts
        log.info("%s: leader of %s generation %d assigns with %s: %s", self.transport.name, self.group_id,
                 response.generation_id, assignor.name, {m: [str(tp) for tp in tps] for m, tps in assigned.items()})
        return [SyncGroupAssignment(member, encode_assignment(Assignment(tuple(tps))))
                for member, tps in assigned.items()]

    async def _on_join_complete(self, assignment: set[TopicPartition]) -> None:
        owned = self._consumer.assignment()
        self._join_prepared = False
        self._rejoin_needed = False
        self.stable = True  # before the callbacks, as Kafka's onJoinComplete: on_revoke may commit in the generation
        failures: list[Exception] = []
        if self.protocol == COOPERATIVE:
            revoked = owned - assignment
            if revoked:  # KIP-429: give them up, then rejoin so that their new owner gets them
                self._rejoin_needed = True
                with self._revoking():
                    await self._call_collecting("on_revoke", revoked, failures)
            added = assignment - owned
        else:
            added = assignment
        self._consumer._set_assignment(assignment)
        self._heartbeat_wake.set()
        await self._call_collecting("on_assign", added, failures)
        if failures:
            raise failures[0]

    async def fetch_committed_positions(self) -> None:
        """Start each newly assigned partition at its committed offset; without one, auto.offset.reset decides.
        A consumer that assigns partitions by hand resumes from the group's commits too, as Kafka's does."""
        consumer = self._consumer
        needed = {tp: awaited for tp in consumer.assignment()
                  if (awaited := consumer._awaiting_committed(tp)) is not None}
        if not needed:
            return
        for tp, committed in (await self.committed(list(needed))).items():
            if committed is not None:
                consumer._use_committed(tp, committed, needed[tp])

    async def _call_collecting(self, name: str, partitions: set[TopicPartition], failures: list[Exception]) -> None:
        """`_call`, keeping its error for later, as Kafka's onJoinComplete: a callback that fails still leaves the
        generation's assignment in place and the next callback called; the first error is raised after."""
        try:
            await self._call(name, partitions)
        except Exception as exc:
            failures.append(exc)

    async def _call(self, name: str, partitions: set[TopicPartition]) -> None:
        listener = self._listeners.get(name)
        if listener is None or (not partitions and name != "on_assign"):
            return
        result = listener(set(partitions))
        if inspect.isawaitable(result):
            with trio.CancelScope(shield=True):  # as in Kafka, a callback runs to its end, whatever poll's timeout
                await result

    # -- heartbeats -----------------------------------------------------------------------------------------

    async def run(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """The member's background work, in the consumer's nursery: heartbeats, and joins started by poll()."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            task_status.started()
            await self._heartbeat_loop()

    async def _heartbeat_loop(self) -> None:
        """Heartbeat while stable; leave the group when the application stopped polling (max.poll.interval.ms)."""
        while True:
            with trio.move_on_after(self._heartbeat_interval_s):
                await self._heartbeat_wake.wait()
            self._heartbeat_wake = trio.Event()
            if not self.stable or self.member_id == "":
                continue
            if not self._polling and trio.current_time() - self._last_poll > self._rebalance_timeout_ms / 1000:
                await self._leave_for_poll_timeout()
                continue
            if not await self._heartbeat():
                # As Kafka's failHeartbeat: the next one after retry.backoff.ms. A coordinator whose broker died
                # is found again at once (until its session expires the cluster still names it), which wakes
                # this loop, and its heartbeat fails at once: without the wait, a loop that never let time pass.
                await trio.sleep(self._retry_backoff_s)

    async def _heartbeat(self) -> bool:
        """One heartbeat; True if the coordinator took it."""
        generation, member_id = self.generation, self.member_id
        try:
            response: HeartbeatResponse = await self._send(
                HeartbeatRequest(self.group_id, generation, member_id, self.instance_id))
            error = errors.for_code(response.error_code)
        except KafkaError as exc:
            error = exc.error
        if error is errors.NONE:
            return True
        if (generation, member_id) != (self.generation, self.member_id):
            return False
        log.info("%s: heartbeat of %s: %s", self.transport.name, self.group_id, error)
        if error is errors.REBALANCE_IN_PROGRESS:
            self._rejoin_needed = True
        elif error in RESET_GENERATION_ERRORS or error in RESET_MEMBER_ERRORS or error is errors.FENCED_INSTANCE_ID:
            self._lose_membership(reset_member=error is not errors.ILLEGAL_GENERATION)
            if error is errors.FENCED_INSTANCE_ID:
                self._pending_error = error.exception(f"group.instance.id {self.instance_id} is used by another "
                                                      "consumer of the group")
        else:
            self._handle_coordinator_error(error)
        self._consumer._wake()
        return False

    def _lose_membership(self, reset_member: bool) -> None:
        """The group went on without this member: its partitions are lost (on_lost at the next poll)."""
        if reset_member:
            self.member_id = ""
        self._membership += 1
        self.generation = NO_GENERATION
        self.stable = False
        self._rejoin_needed = True
        self._lost_pending = True

    async def _leave_for_poll_timeout(self) -> None:
        log.warning("%s: no poll() within max.poll.interval.ms=%d; leaving group %s", self.transport.name,
                    self._rebalance_timeout_ms, self.group_id)
        await self.maybe_leave_group("the consumer stopped polling")
        self._pending_error = PollIntervalExceededError(
            f"poll() was not called within max.poll.interval.ms ({self._rebalance_timeout_ms} ms), so the consumer "
            f"left group {self.group_id} and its partitions went to others; the next poll() rejoins")
        self._consumer._wake()

    async def handle_lost_partitions(self) -> None:
        """Called at the start of a poll: hand partitions the group took away to on_lost, and drop them."""
        if self._lost_pending:
            self._lost_pending = False
            lost = self._consumer.assignment()
            self._consumer._set_assignment(set())
            self._owned_before_join = set()
            self._join_prepared = False
            await self._call("on_lost", lost)

    async def maybe_leave_group(self, reason: str) -> None:
        """LeaveGroup for a dynamic member (a static one keeps its place for its session timeout, KIP-345)."""
        if self.member_id and self.instance_id is None and self.coordinator_id is not None:
            try:
                await self._send(LeaveGroupRequest(self.group_id, [MemberIdentity(self.member_id, None, reason)]))
            except KafkaError as exc:
                log.info("%s: leaving %s: %s", self.transport.name, self.group_id, exc)
        if self.member_id and self.instance_id is None:
            self._lose_membership(reset_member=True)

    async def close(self) -> None:
        """Commit (with enable.auto.commit), revoke and leave, as Kafka's consumer does on close."""
        inside = await self._wait_for_revocation()
        if self.stable and self._auto_commit and not inside:
            await self._commit_quietly("commit on close")
        if self.subscribed and self.stable and self.instance_id is None and not inside:
            await self._call("on_revoke", self._consumer.assignment())
        await self.maybe_leave_group("the consumer is closing")

    @contextlib.contextmanager
    def _revoking(self) -> Iterator[None]:
        """Around a poll's on_revoke. close() and unsubscribe() from another task wait for it to return rather
        than call it again, overlapping, or leave the group under it, which would refuse the commit it makes
        for the generation it consumed in."""
        done = trio.Event()
        self._revocation = (trio.lowlevel.current_task(), done)
        try:
            yield
        finally:
            self._revocation = None
            done.set()

    async def _wait_for_revocation(self) -> bool:
        """Wait for a poll's on_revoke under way in another task; True if this task is running it (the callback
        itself closing or unsubscribing), which must not call it again."""
        if self._revocation is None:
            return False
        task, done = self._revocation
        if task is trio.lowlevel.current_task():
            return True
        await done.wait()
        return False

    # -- offsets --------------------------------------------------------------------------------------------

    async def _commit_quietly(self, what: str) -> None:
        try:
            await self.commit(None)
        except KafkaError as exc:
            log.warning("%s: %s of %s failed: %s", self.transport.name, what, self.group_id, exc)

    def commit_in_background(self, offsets: Mapping[TopicPartition, OffsetAndMetadata] | None,
                             on_complete: Callable[[KafkaError | None], Any] | None) -> None:
        """Commit `offsets` (None: the positions as they are now) without waiting, in the place among commits
        that this call gives it; then `on_complete(None)` or `on_complete(error)`, or a failure is logged."""
        assert self._nursery is not None, "the consumer is not open"
        taken = self._consumer._consumed_positions() if offsets is None else offsets
        ticket = self._commit_order.take()

        async def commit() -> None:
            error: KafkaError | None = None
            try:
                await self.commit(taken, ticket)
            except KafkaError as exc:
                error = exc
                if on_complete is None:
                    log.warning("%s: asynchronous commit failed: %s", self.transport.name, exc)
            if on_complete is not None:
                try:
                    on_complete(error)
                except Exception as exc:  # the application's error, raised from its next poll, as Kafka's
                    self._pending_error = exc

        self._nursery.start_soon(commit)

    async def commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata] | None, ticket: int | None = None
                     ) -> None:
        """Commit `offsets` (None: every assigned partition's position, as they are now); retried until
        default.api.timeout.ms, after every commit made before it (`ticket`: its place, taken when it was made).

        Raises, without retrying, what a retry cannot cure: the group rebalanced or dropped this member
        (REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID), or a partition does not exist.
        """
        if offsets is None:
            offsets = self._consumer._consumed_positions()
        if ticket is None:
            ticket = self._commit_order.take()
        async with self._commit_order.turn(ticket):
            if not offsets:
                return
            partitions = [OffsetCommitPartition(tp.topic, tp.partition, o.offset, o.leader_epoch, o.metadata)
                          for tp, o in sorted(offsets.items())]
            await self._with_retries("commit", lambda: self._commit_once(partitions))

    async def _commit_once(self, partitions: list[OffsetCommitPartition]) -> KafkaError | None:
        managed = self.subscribed
        generation, member_id = (self.generation, self.member_id) if managed else (NO_GENERATION, "")
        if managed and not self.stable:
            raise errors.RebalanceInProgressError(f"group {self.group_id} is rebalancing; the commit would be "
                                                  "refused: poll() to rejoin first")
        response: OffsetCommitResponse = await self._send(OffsetCommitRequest(
            self.group_id, generation, member_id, partitions, self.instance_id if managed else None))
        for result in response.partitions:
            error = errors.for_code(result.error_code)
            if error is errors.NONE:
                continue
            failed = error.exception(f"commit of {result.topic}-{result.partition} to group {self.group_id} failed: "
                                     f"{result.error_message or error.description}")
            if self._handle_coordinator_error(error) and error is not errors.REBALANCE_IN_PROGRESS:
                return failed
            if error in (errors.REBALANCE_IN_PROGRESS, errors.ILLEGAL_GENERATION, errors.UNKNOWN_MEMBER_ID):
                self._rejoin_needed = True
            raise failed
        return None

    async def committed(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, OffsetAndMetadata | None]:
        wanted = sorted(set(partitions))
        found: dict[TopicPartition, OffsetAndMetadata | None] = {}

        async def attempt() -> KafkaError | None:
            response: OffsetFetchResponse = await self._send(OffsetFetchRequest(
                self.group_id, [(tp.topic, tp.partition) for tp in wanted]))
            error = errors.for_code(response.error_code)
            if error is not errors.NONE:
                failed = error.exception(response.error_message)
                if self._handle_coordinator_error(error):
                    return failed
                raise failed
            for p in response.partitions:
                found[TopicPartition(p.topic, p.partition)] = None if p.committed_offset < 0 else \
                    OffsetAndMetadata(p.committed_offset, p.metadata, p.committed_leader_epoch)
            return None

        await self._with_retries("committed offsets", attempt)
        return found

    async def _with_retries(self, what: str, attempt: Callable[[], Awaitable[KafkaError | None]]) -> None:
        """`attempt()` until it returns None (done), within default.api.timeout.ms; it returns the error it is to
        be retried for, or raises, and an error raised for a coordinator that moved or is loading is retried too.
        A timeout names the last such error."""
        last: KafkaError | None = None
        with trio.move_on_after(self._api_timeout_s):
            while True:
                try:
                    last = await attempt()
                    if last is None:
                        return
                except KafkaError as exc:
                    if not (exc.error in COORDINATOR_ERRORS or exc.error is errors.COORDINATOR_LOAD_IN_PROGRESS):
                        raise
                    last = exc
                await trio.sleep(self._retry_backoff_s)
        raise errors.RequestTimedOutError(f"{what} for group {self.group_id} timed out after "
                                          f"{self._api_timeout_s * 1000:.0f} ms" + (f"; last error: {last}" if last else ""))
