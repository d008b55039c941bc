"""The consumer: manual assignment or group subscription, seeks, commits, and polls served from a prefetch buffer.

With `group.id`, `subscribe()` makes the consumer a member of a consumer group whose coordinator assigns it
partitions (see kafkalite.client.consumer_coordinator): partitions start at the group's committed offsets,
and positions are committed with `commit()`, `commit_async()` or enable.auto.commit. `assign()` with a group.id
still commits, and starts partitions without a position at the group's committed offsets, as the group's only
user (as Kafka's consumer does; a seek first avoids asking the coordinator).

As in Kafka's Fetcher, fetching runs ahead of `poll()`: each poll sends one FetchRequest per leader for every
assigned partition that has nothing buffered and no fetch in flight, and those fetches complete in the
background into per-partition buffers of record batches, decoded only as `poll()` hands their records out. A
poll returns as soon as any buffer holds records, at most `max.poll.records` of them, so a long-polling fetch
on one leader never delays records another leader already returned, and records fetched but not yet returned
are kept for the next poll instead of being fetched again. `poll_batches()` hands out the fetched batches
themselves, undecoded, for readers that decode them column by column (the Spark connector).

A partition's position is the offset of the next record `poll()` will return. A fetch that comes back after
a seek is discarded (each seek starts a new "generation" of the partition), and records before the position
inside a returned batch are skipped, since brokers return whole batches.

A position also knows the leader epoch of the record before it (KIP-320), from the batch that record came in or
from a committed offset; commits carry it. When metadata shows a newer leader epoch than the position was last
fetched or checked under, the consumer asks the leader where that record's epoch ends (OffsetsForLeaderEpoch)
before fetching again, as Kafka's consumer does: an end below the position means an unclean election truncated
the log under it, and the consumer moves back to that end (auto.offset.reset earliest or latest) or raises
LogTruncationError (none) rather than skip, unseen, what the new leader wrote there. A plain `seek()` carries no
epoch and is not checked; one given the epoch (`leader_epoch=`) is.

An assigned partition that metadata does not list is looked up again (every retry.backoff.ms) for up to
default.api.timeout.ms, the bound Kafka's consumer puts on its blocking calls (`position()` among them): it may
be a partition just added. After that, `poll()` and `position()` raise UNKNOWN_TOPIC_OR_PARTITION naming it
(NETWORK_EXCEPTION if no broker answered), and `poll()` does so again after each further default.api.timeout.ms
while the partition stays unknown, serving the other partitions in between. Kafka's own consumer keeps
polling empty and only logs; a typo in an assignment should not look like a quiet topic.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import logging
import math
import re
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, NamedTuple, TypeVar

import trio

from kafkalite.client.arguments import (
    checked_leader_epoch, mapping, non_negative_int, topic_names, topic_partition, topic_partitions,
)
from kafkalite.client.config import consumer_config
from kafkalite.client.consumer_coordinator import ConsumerCoordinator, Listener, OffsetAndMetadata
from kafkalite.client.in_flight import InFlight
from kafkalite.client.metadata import STALE_METADATA_ERRORS, ClusterMetadata
from kafkalite.client.offsets import ListOffsetsResultInfo, list_offsets_once
from kafkalite.client.transport import ClientTransport, ClusterLike, OneBlock, open_transport
from kafkalite.common import errors
from kafkalite.common.errors import CorruptMessageError, KafkaError, OffsetOutOfRangeError, RequestTimedOutError
from kafkalite.common.nursery import leave_nursery
from kafkalite.common.records import CREATE_TIME, LOG_APPEND_TIME, Header, RecordBatch
from kafkalite.common.types import TopicPartition, validate_topic_name
from kafkalite.network.requests import (
    CONSUMER_REPLICA_ID, EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, READ_COMMITTED, READ_UNCOMMITTED, FetchPartition,
    FetchRequest, FetchResponse, ListOffsetsPartition, ListOffsetsRequest, ListOffsetsResponse,
    OffsetForLeaderPartition, OffsetsForLeaderEpochRequest, OffsetsForLeaderEpochResponse,
)

log = logging.getLogger(__name__)

_RESET_TIMESTAMPS = {"earliest": EARLIEST_TIMESTAMP, "latest": LATEST_TIMESTAMP}


class NoOffsetForPartitionError(OffsetOutOfRangeError):
    """No valid position and auto.offset.reset=none: the application must seek first."""


class LogTruncationError(OffsetOutOfRangeError):
    """The log was truncated below the position (an unclean leader election) and auto.offset.reset=none: the
    message names the offset where the leader's log diverges, to seek to."""


class ConsumerRecord(NamedTuple):
    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...]
    timestamp_type: int = CREATE_TIME
    """CREATE_TIME (0) or LOG_APPEND_TIME (1, the topic's message.timestamp.type), as Kafka's ConsumerRecord."""


class FetchedBatch(NamedTuple):
    """A fetched record batch as `poll_batches()` hands it out: its records from offset `start` on are new."""

    topic: str
    partition: int
    start: int
    batch: RecordBatch


_Drained = TypeVar("_Drained", ConsumerRecord, FetchedBatch)

_new_consumer_record = functools.partial(tuple.__new__, ConsumerRecord)
"""`ConsumerRecord` from one tuple, without the Python-level `__new__` a NamedTuple call runs."""


@dataclass(slots=True)
class _PartitionState:
    position: int | None = None
    reset: str | None = None  # a pending seek_to_beginning/end ("earliest"/"latest"), done lazily as in Kafka
    generation: int = 0
    # Fetched batches not yet handed out; the position lies in (or at the start of) the first. `buffer` holds the
    # records of the first batch that poll() decoded and has yet to return, or, after a batch that cannot be
    # decoded, the records before the bad one (and then `batches` is empty).
    batches: deque[RecordBatch] = field(default_factory=deque)
    buffer: deque[ConsumerRecord] = field(default_factory=deque)
    fetching: bool = False
    backoff_until: float = 0.0
    high_watermark: int = -1
    missing_since: float | None = None  # when the partition was first found absent from metadata
    paused: bool = False  # pause(): not fetched, and what was fetched already waits for resume()
    epoch: int = -1  # the leader epoch of the record before the position; -1: unknown (after a seek or a reset)
    checked_epoch: int = -1  # the newest leader epoch the position was fetched at or checked against


class _Asked(NamedTuple):
    """What a request in flight asked for a partition: its answer counts only if the partition was not sought
    in between (same position, same generation)."""

    position: int
    generation: int
    leader_epoch: int  # the current leader epoch the request named, which the leader fenced it with
    epoch: int  # the epoch of the record before the position

    def still(self, state: _PartitionState) -> bool:
        return state.position == self.position and state.generation == self.generation


def _compiled(pattern: object) -> re.Pattern[str]:
    """A subscription pattern, or the reason it is not one, raised before the consumer joins anything."""
    if isinstance(pattern, re.Pattern):
        return pattern
    if not isinstance(pattern, str):
        raise TypeError(f"subscribe(pattern=) takes a regular expression (str or re.Pattern), not "
                        f"{type(pattern).__name__} {pattern!r}")
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"subscribe(pattern={pattern!r}) is not a regular expression: {exc}") from None


class Consumer:
    """`async with Consumer(cluster_or_bootstrap_servers, {"auto.offset.reset": "earliest"}) as consumer:`."""

    def __init__(self, bootstrap: ClusterLike | str | ClientTransport, config: Mapping[str, Any] | None = None,
                 **kwargs: Any) -> None:
        self.config = cfg = consumer_config({**(config or {}), **kwargs})
        self._transport = open_transport(bootstrap, "consumer", cfg)
        self._block = OneBlock()
        self.metadata = ClusterMetadata(self._transport, cfg["retry.backoff.ms"], cfg["metadata.max.age.ms"],
                                        allow_auto_topic_creation=cfg["allow.auto.create.topics"])
        self._retry_backoff_s = cfg["retry.backoff.ms"] / 1000
        self._api_timeout_s: float = cfg["default.api.timeout.ms"] / 1000
        self._max_poll_records: int = cfg["max.poll.records"]
        self._auto_offset_reset: str = cfg["auto.offset.reset"]
        self._isolation = READ_COMMITTED if cfg["isolation.level"] == "read_committed" else READ_UNCOMMITTED
        self._states: dict[TopicPartition, _PartitionState] = {}
        self._data_arrived = trio.Event()
        self._error: KafkaError | None = None
        self._iterated: deque[ConsumerRecord] = deque()
        self._nursery: trio.Nursery | None = None
        self._nursery_manager: Any = None
        self._closing = False  # from the start of __aexit__: calls under way end, saying why
        self._coordinator: ConsumerCoordinator | None = None
        self._positions = InFlight[None]("looking up positions")
        self._positions_wanted = 0  # changes with the assignment and each seek: what a lookup under way is for
        # Partition states' generations, unique across them: a lookup answered for a partition since assigned
        # anew finds another generation, as it does after a seek.
        self._generations = itertools.count(1)
        if cfg["group.id"] is not None:
            if not cfg["group.id"]:
                raise errors.InvalidGroupIdError("group.id must not be empty")
            self._coordinator = ConsumerCoordinator(cfg["group.id"], cfg, self._transport.sibling(), self.metadata,
                                                    self)

    async def __aenter__(self) -> Consumer:
        self._block.enter(self._transport.name)
        self._nursery_manager = trio.open_nursery()
        self._nursery = await self._nursery_manager.__aenter__()
        self._nursery.start_soon(self.metadata.refresh_when_old)
        if self._coordinator is not None:
            await self._nursery.start(self._coordinator.run)
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> bool | None:
        """Leaving the block closes the consumer: a group member commits (enable.auto.commit) and leaves. An error
        of its on_revoke callback there is raised once the consumer is closed, as Kafka's close() does."""
        assert self._nursery is not None
        self._closing = True
        callback_error: Exception | None = None
        if self._coordinator is not None and exc_type is None:
            with trio.move_on_after(self._api_timeout_s):
                try:
                    await self._coordinator.close()
                except Exception as error:  # the nursery must still be left, or Trio's task tree is corrupt
                    callback_error = error
        self._nursery.cancel_scope.cancel()
        try:
            suppress = await leave_nursery(self._nursery_manager, exc_type, exc, tb)
        finally:
            self._nursery = None  # poll() and commit_async() after this say the consumer is not open
            if self._coordinator is not None and self._coordinator.transport is not self._transport:
                await self._coordinator.transport.aclose()  # its own second connection
            if self._transport.owned:
                await self._transport.aclose()
        if callback_error is not None:
            raise callback_error
        return suppress

    # -- assignment and positions -------------------------------------------------------------------------------

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Replace the assignment; partitions kept keep their positions and buffers."""
        if self._coordinator is not None and self._coordinator.subscribed:
            raise ValueError("assign() on a subscribed consumer: the group assigns its partitions; unsubscribe() "
                             "first")
        self._set_assignment(set(topic_partitions(partitions, "assign()")))

    def assignment(self) -> set[TopicPartition]:
        return set(self._states)

    # -- groups -------------------------------------------------------------------------------------------------

    def subscribe(self, topics: Iterable[str] | None = None, *, pattern: str | re.Pattern[str] | None = None,
                  on_assign: Listener | None = None, on_revoke: Listener | None = None,
                  on_lost: Listener | None = None) -> None:
        """Join the group (at the next poll) for `topics`, or for every topic whose whole name matches `pattern`
        (followed as topics come and go, every metadata.max.age.ms).

        The callbacks, plain or async functions of a set of partitions, run inside poll(): `on_revoke` before
        partitions are given up (commit there for at-least-once without auto-commit), `on_assign` with the
        partitions added, `on_lost` with partitions the group took away after dropping this member (committing
        them would fail).
        """
        coordinator = self._group_coordinator("subscribe()")
        if (topics is None) == (pattern is None):
            raise ValueError("subscribe() takes topics or a pattern")
        if self._states and not coordinator.subscribed:
            raise ValueError("subscribe() on a consumer with partitions assign()ed by hand: the two are mutually "
                             "exclusive, as in Kafka's consumer; assign([]) first")
        names = None if topics is None else [validate_topic_name(name) for name in topic_names(topics, "subscribe()")]
        compiled = None if pattern is None else _compiled(pattern)
        coordinator.subscribe(names, compiled, {"on_assign": on_assign, "on_revoke": on_revoke, "on_lost": on_lost})

    async def unsubscribe(self) -> None:
        """Revoke the assignment (on_revoke), leave the group and drop it."""
        await self._group_coordinator("unsubscribe()").unsubscribe()

    def subscription(self) -> set[str]:
        return self._coordinator.subscription() if self._coordinator is not None else set()

    async def commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata | int] | None = None) -> None:
        """Commit `offsets` (the next offset to read, per partition), or every assigned partition's position.

        Returns once the commit is stored on every in-sync replica of the group's offsets partition; raises
        REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION or UNKNOWN_MEMBER_ID if the group moved on (poll() rejoins).
        """
        await self._group_coordinator("commit()").commit(_offsets(offsets, "commit()"))

    def commit_async(self, offsets: Mapping[TopicPartition, OffsetAndMetadata | int] | None = None,
                     on_complete: Callable[[KafkaError | None], Any] | None = None) -> None:
        """Commit in the background: `on_complete(None)` or `on_complete(error)` when done (errors are logged
        otherwise). The positions are taken now, not when the commit is sent; empty `offsets` commit nothing, as
        with commit(). Commits reach the coordinator in the order they were made, this one's among them, so the
        last made is the one kept, as with Kafka's commitAsync."""
        coordinator = self._group_coordinator("commit_async()")
        taken = _offsets(offsets, "commit_async()")
        if self._nursery is None:
            raise RuntimeError("the consumer is not open: use `async with Consumer(...)`")
        coordinator.commit_in_background(taken, on_complete)

    async def committed(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """The group's committed offset of each partition, None where nothing is committed."""
        return await self._group_coordinator("committed()").committed(topic_partitions(partitions, "committed()"))

    def _group_coordinator(self, where: str) -> ConsumerCoordinator:
        if self._coordinator is None:
            raise errors.InvalidGroupIdError(f"{where} needs a group.id")
        return self._coordinator

    # What the group coordinator uses (kafkalite.client.consumer_coordinator.GroupMember).

    def _set_assignment(self, partitions: set[TopicPartition]) -> None:
        self._positions_wanted += 1
        self._states = {tp: self._states.get(tp) or _PartitionState(generation=next(self._generations))
                        for tp in sorted(partitions)}
        self.metadata.track("assignment", {tp.topic for tp in partitions})
        self._iterated = deque(record for record in self._iterated
                               if TopicPartition(record.topic, record.partition) in self._states)

    def _consumed_positions(self) -> dict[TopicPartition, OffsetAndMetadata]:
        return {tp: OffsetAndMetadata(state.position, None, state.epoch) for tp, state in self._states.items()
                if state.position is not None}

    def _awaiting_committed(self, tp: TopicPartition) -> int | None:
        """The generation of a partition that starts at the group's committed offset (no position, no seek to
        either end), which `_use_committed` checks; None for the others."""
        state = self._states.get(tp)
        if state is None or state.position is not None or state.reset is not None:
            return None
        return state.generation

    def _use_committed(self, tp: TopicPartition, committed: OffsetAndMetadata, generation: int) -> None:
        """Start at `committed` unless the partition moved since it was looked up (a seek, a new assignment)."""
        state = self._states.get(tp)
        if state is not None and state.position is None and state.generation == generation:
            self._move(state, committed.offset, None, committed.leader_epoch)

    def _wake(self) -> None:
        self._data_arrived.set()

    def _state(self, tp: TopicPartition, where: str) -> _PartitionState:
        state = self._states.get(topic_partition(tp, where))
        if state is None:
            raise ValueError(f"{where}: {tp} is not assigned to this consumer")
        return state

    def _states_of(self, partitions: Iterable[TopicPartition] | None, where: str) -> list[_PartitionState]:
        if partitions is None:
            return list(self._states.values())
        return [self._state(tp, where) for tp in topic_partitions(partitions, where)]

    def pause(self, partitions: Iterable[TopicPartition]) -> None:
        """Stop fetching `partitions` and handing out their records until resume(), as Kafka's consumer: records
        fetched already wait, and positions, the assignment and the group membership stay (poll() goes on
        heartbeating). A rebalance that takes a partition away forgets that it was paused."""
        for state in self._states_of(partitions, "pause()"):
            state.paused = True

    def resume(self, partitions: Iterable[TopicPartition]) -> None:
        """Fetch and hand out `partitions` again, from where they were paused; a poll waiting meanwhile wakes."""
        for state in self._states_of(partitions, "resume()"):
            state.paused = False
        self._wake()

    def paused(self) -> set[TopicPartition]:
        return {tp for tp, state in self._states.items() if state.paused}

    def seek(self, tp: TopicPartition, offset: int, leader_epoch: int = -1) -> None:
        """Fetch from `offset` next. With the leader epoch of the record before it (as Kafka's seek with an
        OffsetAndMetadata carries it), the position is checked against the leader's log before the first fetch
        under a newer epoch, as a position the consumer read itself is (KIP-320); without, it is taken as given."""
        state = self._state(tp, "seek()")
        self._move(state, non_negative_int(offset, "seek offset"), None,
                   checked_leader_epoch(leader_epoch, "seek leader_epoch"))
        self._positions_wanted += 1

    def seek_to_beginning(self, partitions: Iterable[TopicPartition] | None = None) -> None:
        for state in self._states_of(partitions, "seek_to_beginning()"):
            self._move(state, None, "earliest")
        self._positions_wanted += 1

    def seek_to_end(self, partitions: Iterable[TopicPartition] | None = None) -> None:
        for state in self._states_of(partitions, "seek_to_end()"):
            self._move(state, None, "latest")
        self._positions_wanted += 1

    def _move(self, state: _PartitionState, position: int | None, reset: str | None, epoch: int = -1) -> None:
        state.position, state.reset, state.epoch = position, reset, epoch
        state.checked_epoch = -1  # a position given, not read: not yet checked under any leader epoch
        state.generation = next(self._generations)
        state.batches.clear()
        state.buffer.clear()
        # Only this partition's records that `async for` has yet to hand out go: the others' were consumed.
        self._iterated = deque(record for record in self._iterated
                               if self._states.get(TopicPartition(record.topic, record.partition)) is not state)

    async def position(self, tp: TopicPartition) -> int:
        """The offset of the next record poll() returns, looking it up first if a reset is pending.

        Bounded by default.api.timeout.ms: then UNKNOWN_TOPIC_OR_PARTITION if metadata never listed the
        partition, REQUEST_TIMED_OUT otherwise.
        """
        state = self._state(tp, "position()")
        if state.position is None:
            self._check_open()
        with trio.move_on_after(self._api_timeout_s):
            while state.position is None:
                self._check_open("position()")
                await self._update_fetch_positions()
            return state.position
        if not self.metadata.lists(tp):
            raise self.metadata.missing(f"partition {tp}", self._api_timeout_s)
        raise RequestTimedOutError(
            f"position of {tp} could not be determined within {self._api_timeout_s * 1000:.0f} ms")

    async def beginning_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """Each partition's first offset (its log start), as its leader answers now (Kafka's beginningOffsets)."""
        asked = topic_partitions(partitions, "beginning_offsets()")
        found = await self._offsets_at({tp: EARLIEST_TIMESTAMP for tp in asked}, "beginning_offsets()")
        return {tp: info.offset for tp, info in found.items()}

    async def end_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """Each partition's end for this consumer, the high watermark, as its leader answers now (Kafka's
        endOffsets): a consumer whose position reaches it has read everything committed so far."""
        asked = topic_partitions(partitions, "end_offsets()")
        found = await self._offsets_at({tp: LATEST_TIMESTAMP for tp in asked}, "end_offsets()")
        return {tp: info.offset for tp, info in found.items()}

    async def offsets_for_times(self, timestamps: Mapping[TopicPartition, int]
                                ) -> dict[TopicPartition, ListOffsetsResultInfo | None]:
        """For each partition, the first record at or after the timestamp (epoch ms): its offset and timestamp, and
        the leader's epoch; None where no record a consumer can read is that late (Kafka's offsetsForTimes)."""
        given = mapping(timestamps, "offsets_for_times()", "TopicPartition to timestamps")
        asked = {topic_partition(tp, "offsets_for_times()"): non_negative_int(timestamp, "a timestamp")
                 for tp, timestamp in given.items()}
        found = await self._offsets_at(asked, "offsets_for_times()")
        return {tp: info if info.offset >= 0 else None for tp, info in found.items()}

    async def _offsets_at(self, timestamps: dict[TopicPartition, int], where: str
                          ) -> dict[TopicPartition, ListOffsetsResultInfo]:
        """ListOffsets to the partitions' leaders until each has answered, refreshing metadata between rounds,
        within default.api.timeout.ms; then UNKNOWN_TOPIC_OR_PARTITION for a partition metadata never listed,
        else the last error (REQUEST_TIMED_OUT if there was none). The partitions' topics are looked up for this
        call only (Kafka's transient topics): a topic the consumer neither subscribes to nor is assigned is not
        asked for again, nor created again once deleted, by later refreshes."""
        found: dict[TopicPartition, ListOffsetsResultInfo] = {}
        last: KafkaError | None = None
        with self.metadata.transient(tp.topic for tp in timestamps):
            with trio.move_on_after(self._api_timeout_s):
                while True:
                    try:
                        if not await list_offsets_once(self._transport, self.metadata, timestamps, found,
                                                       isolation=self._isolation,
                                                       current_leader_epoch=self._leader_epoch):
                            return found
                    except KafkaError as exc:
                        if exc.code not in STALE_METADATA_ERRORS and not exc.retriable:
                            raise
                        last = exc
                    await self._refresh_metadata()
            unlisted = [tp for tp in timestamps if not self.metadata.lists(tp)]
        if unlisted:
            raise self.metadata.missing(f"partition {unlisted[0]}", self._api_timeout_s)
        raise last or RequestTimedOutError(f"{where} got no answer within {self._api_timeout_s * 1000:.0f} ms")

    def highwater(self, tp: TopicPartition) -> int | None:
        """The high watermark the last fetch of `tp` reported, or None before one returned."""
        hw = self._state(tp, "highwater()").high_watermark
        return hw if hw >= 0 else None

    async def _update_fetch_positions(self) -> None:
        """Kafka's updateFetchPositions: partitions without a position start at the group's committed offsets,
        the rest where auto.offset.reset (or a seek to either end) says; in flight, so that polls with a short
        timeout get there (`InFlight`)."""
        await self._positions.wait(self._nursery, self._fetch_positions, self._positions_wanted)

    async def _fetch_positions(self) -> None:
        wanted = self._positions_wanted
        if self._coordinator is not None:
            await self._coordinator.fetch_committed_positions()
        if self._positions_wanted == wanted:  # else stale: the lookup for the assignment now resets what it must
            await self._reset_positions()

    def _resettable(self) -> bool:
        """Whether a partition waits for a position that a ListOffsets to its known leader can give."""
        return any(state.position is None and self.metadata.leader_for(tp) is not None
                   for tp, state in self._states.items())

    async def _reset_positions(self) -> None:
        """Resolve every partition without a position with ListOffsets to its leader (one request per leader).

        Partitions whose leader is unknown wait for the metadata refresh this then makes; the others do not wait
        for them.
        """
        by_leader: dict[int, list[tuple[TopicPartition, int, int]]] = {}
        leaderless = False
        for tp, state in self._states.items():
            if state.position is not None:
                continue
            strategy = state.reset or self._auto_offset_reset
            if strategy == "none":
                raise NoOffsetForPartitionError(f"no position for {tp} and auto.offset.reset is none")
            leader = self.metadata.leader_for(tp)
            if leader is None:
                leaderless = True
                continue
            by_leader.setdefault(leader.leader, []).append((tp, _RESET_TIMESTAMPS[strategy], state.generation))
        failures: list[KafkaError] = []

        async def list_offsets(leader_id: int, partitions: list[tuple[TopicPartition, int, int]]) -> None:
            try:
                await self._list_offsets(leader_id, partitions)
            except KafkaError as exc:  # raised in the nursery, it would reach the application in an ExceptionGroup
                failures.append(exc)

        async with trio.open_nursery() as nursery:
            for leader_id, partitions in by_leader.items():
                nursery.start_soon(list_offsets, leader_id, partitions)
        if failures:
            raise failures[0]
        if leaderless:
            await self._refresh_metadata()

    async def _list_offsets(self, leader_id: int, partitions: list[tuple[TopicPartition, int, int]]) -> None:
        request = ListOffsetsRequest(CONSUMER_REPLICA_ID, [
            ListOffsetsPartition(tp.topic, tp.partition, timestamp, self._leader_epoch(tp))
            for tp, timestamp, _ in partitions], self._isolation)
        try:
            response: ListOffsetsResponse = await self._transport.send(leader_id, request)
        except KafkaError as exc:
            await self._refresh_metadata(exc)
            return
        generations = {tp: generation for tp, _, generation in partitions}
        for result in response.partitions:
            tp = TopicPartition(result.topic, result.partition)
            state = self._states.get(tp)
            if state is None or state.generation != generations.get(tp):
                continue
            if result.error_code == errors.NONE.code:
                state.position, state.reset = result.offset, None
            else:
                await self._refresh_metadata(errors.for_code(result.error_code).exception(result.error_message))

    def _leader_epoch(self, tp: TopicPartition) -> int:
        leader = self.metadata.leader_for(tp)
        return leader.leader_epoch if leader is not None else -1

    async def _refresh_metadata(self, cause: KafkaError | None = None) -> None:
        """Refresh after a stale-metadata error (with backoff); any other error is the application's."""
        if cause is not None and cause.code not in STALE_METADATA_ERRORS and not cause.retriable:
            raise cause
        try:
            await self.metadata.refresh()
        except KafkaError as exc:
            log.info("%s: metadata refresh failed: %s", self._transport.name, exc)

    # -- polling ------------------------------------------------------------------------------------------------

    async def poll(self, timeout: float = 0) -> list[ConsumerRecord]:
        """Up to max.poll.records records, waiting up to `timeout` seconds (math.inf: forever) for some to arrive."""
        return await self._poll_with(timeout, self._drain_buffers)

    async def poll_batches(self, timeout: float = 0) -> list[FetchedBatch]:
        """Every fetched record batch not yet handed out, undecoded, waiting up to `timeout` seconds for some.

        For readers that decode batches their own way (columns for Arrow, with no object per record); the
        positions move past the batches returned, as poll() moves them past its records, and max.poll.records
        does not apply (fetch.max.bytes and max.partition.fetch.bytes bound what one poll returns). A batch that
        poll() began is handed out whole with `start` at the position. Decoding is the caller's, so is
        CORRUPT_MESSAGE.
        """
        return await self._poll_with(timeout, self._drain_batches)

    def _check_open(self, under_way: str | None = None) -> None:
        """RuntimeError unless the consumer is open; `under_way`: the call in progress, which its closing ends."""
        if under_way is not None and self._closing:
            raise RuntimeError(f"{self._transport.name} closed while {under_way} was under way: its `async with` "
                               "block ended")
        if self._nursery is None or self._closing:
            raise RuntimeError("the consumer is not open: use `async with Consumer(...)`")

    async def _poll_with(self, timeout: float, drain: Callable[[], list[_Drained]]) -> list[_Drained]:
        self._check_open()
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
            raise TypeError(f"poll timeout must be a number of seconds, not {type(timeout).__name__}")
        if not timeout >= 0:  # NaN fails this too
            raise ValueError(f"poll timeout must not be negative, got {timeout}")
        coordinator = self._coordinator
        if coordinator is None:
            return await self._poll(timeout, drain)
        coordinator.poll_started()
        try:
            return await self._poll(timeout, drain)
        finally:
            coordinator.poll_ended()

    async def _poll(self, timeout: float, drain: Callable[[], list[_Drained]]) -> list[_Drained]:
        coordinator = self._coordinator
        with trio.move_on_after(timeout):
            while True:
                self._check_open("poll()")
                if coordinator is not None:
                    await coordinator.handle_lost_partitions()
                    await coordinator.poll()
                records = drain()  # what arrived before an error is the application's first
                if records:
                    await self._prefetch()
                    return records
                self._raise_pending_error()
                if self._resettable():
                    await self._update_fetch_positions()
                    continue
                self._data_arrived = trio.Event()
                wake_at = self._send_fetches()
                with trio.move_on_at(wake_at):
                    await self._data_arrived.wait()
        records = drain()
        if records:
            await self._prefetch()
        else:
            self._raise_pending_error()
        return records

    async def _prefetch(self) -> None:
        """Start the next fetches, and return once they are written, as Kafka's consumer transmits them before its
        poll returns: the broker then works on them while the application works on the records, even work that
        never yields to Trio (the Spark connector's conversion to Arrow), where fetches only started would wait
        for the application's next await to leave. The wait is shielded, as the positions have moved past the
        records being returned, which a cancellation now would lose; it waits for the writing alone, never for a
        broker (`ClientTransport.send`'s `sent`). In-process, nothing overlaps the application: no wait."""
        sending: list[trio.Event] | None = [] if self._transport.networked else None
        self._send_fetches(prefetch=True, sending=sending)
        with trio.CancelScope(shield=True):
            for sent in sending or ():
                await sent.wait()

    def _raise_pending_error(self) -> None:
        if self._error is not None:
            error, self._error = self._error, None
            raise error

    def _drain_buffers(self) -> list[ConsumerRecord]:
        """Up to max.poll.records records off the partitions' buffers, decoding fetched batches one at a time.

        In turn, as Kafka's consumer does (KIP-74): a partition whose fetched records are all handed out moves to
        the end of the assignment's order, which is also the order of the next fetch requests, so a partition
        fetched again waits behind the records the others have waiting and is asked for after them, and none
        starves when max.poll.records or the fetch sizes are below what there is to read."""
        records: list[ConsumerRecord] = []
        emptied: list[TopicPartition] = []
        for tp, state in self._states.items():
            if state.paused:
                continue
            buffer, before = state.buffer, len(records)
            while (room := self._max_poll_records - len(records)) > 0:
                if not buffer:
                    if not state.batches:
                        break
                    self._decode_first(tp, state)
                    continue
                # the buffer holds the first batch's records, or none's after a corrupt batch (epoch unknown)
                state.epoch = state.batches[0].partition_leader_epoch if state.batches else -1
                if len(buffer) <= room:
                    records.extend(buffer)
                    buffer.clear()
                    if state.batches:
                        state.batches.popleft()
                else:
                    records.extend(buffer.popleft() for _ in range(room))
                state.position = records[-1].offset + 1
            if len(records) > before and not (buffer or state.batches):
                emptied.append(tp)
            if room <= 0:
                break
        self._to_the_back(emptied)
        return records

    def _drain_batches(self) -> list[FetchedBatch]:
        """Every partition's fetched batches, the first from the position; decoded records pending are dropped, as
        their batch goes out whole (or, after a corrupt batch, is fetched again from the position)."""
        fetched: list[FetchedBatch] = []
        emptied: list[TopicPartition] = []
        for tp, state in self._states.items():
            if state.paused:
                continue
            if state.batches:
                assert state.position is not None
                fetched.append(FetchedBatch(tp.topic, tp.partition, state.position, state.batches.popleft()))
                fetched.extend(FetchedBatch(tp.topic, tp.partition, batch.base_offset, batch)
                               for batch in state.batches)
                state.position = fetched[-1].batch.next_offset
                state.epoch = fetched[-1].batch.partition_leader_epoch
                emptied.append(tp)
            state.batches.clear()
            state.buffer.clear()  # records of the first batch, handed out again whole; or of a bad batch, refetched
        self._to_the_back(emptied)
        return fetched

    def _to_the_back(self, partitions: list[TopicPartition]) -> None:
        """Kafka's movePartitionToEnd (KIP-74): partitions whose fetched records were all handed out go last, for
        handing out and in the next fetch requests, which brokers fill in their order."""
        for tp in partitions:
            self._states[tp] = self._states.pop(tp)

    def _send_fetches(self, *, prefetch: bool = False, sending: list[trio.Event] | None = None) -> float:
        """Start a fetch per leader for idle partitions; returns when a backed-off partition may fetch again. For
        each fetch started, `sending` gets an event set once it is written.

        A poll that hands out records prefetches, as Kafka's consumer does (`_prefetch`). A prefetch only starts
        fetches; a partition without a known leader waits for the next poll, which refreshes metadata and times the
        partition out.
        """
        now = trio.current_time()
        wake_at = math.inf
        by_leader: dict[int, list[tuple[TopicPartition, _PartitionState]]] = {}
        to_check: dict[int, list[tuple[TopicPartition, _PartitionState]]] = {}
        stale = False
        for tp, state in self._states.items():
            if state.fetching or state.batches or state.buffer or state.paused:
                continue
            if state.backoff_until > now:
                wake_at = min(wake_at, state.backoff_until)
                continue
            leader = self.metadata.leader_for(tp)
            if leader is None:
                if prefetch:
                    continue
                stale = True
                wake_at = min(wake_at, self._missing_deadline(tp, state, now))
                continue
            state.missing_since = None
            if state.position is None:  # poll() resets it first
                continue
            if 0 <= state.epoch and max(state.epoch, state.checked_epoch) < leader.leader_epoch:
                to_check.setdefault(leader.leader, []).append((tp, state))
            else:
                by_leader.setdefault(leader.leader, []).append((tp, state))
        assert self._nursery is not None
        if stale:
            self._nursery.start_soon(self._refresh_and_wake)
        for leader_id, partitions in to_check.items():
            self._nursery.start_soon(self._check_positions, leader_id, partitions, self._in_flight(partitions))
        cfg = self.config
        for leader_id, partitions in by_leader.items():
            asked = self._in_flight(partitions)
            request = FetchRequest(
                CONSUMER_REPLICA_ID, cfg["fetch.max.wait.ms"], cfg["fetch.min.bytes"],
                [FetchPartition(tp.topic, tp.partition, what.position, cfg["max.partition.fetch.bytes"],
                                what.leader_epoch) for tp, what in asked.items()],
                cfg["fetch.max.bytes"], self._isolation)
            sent = trio.Event()
            if sending is not None:
                sending.append(sent)
            self._nursery.start_soon(self._fetch, leader_id, partitions, asked, request, sent)
        return wake_at

    def _in_flight(self, partitions: list[tuple[TopicPartition, _PartitionState]]) -> dict[TopicPartition, _Asked]:
        """Mark the partitions as having a request in flight, and take what it asks now: a seek before the task
        runs (the application goes on after a prefetching poll) must not change a request already counted as sent."""
        asked = {}
        for tp, state in partitions:
            state.fetching = True
            assert state.position is not None
            asked[tp] = _Asked(state.position, state.generation, self._leader_epoch(tp), state.epoch)
        return asked

    def _missing_deadline(self, tp: TopicPartition, state: _PartitionState, now: float) -> float:
        """When a partition without leader must be listed by metadata; past it, UNKNOWN_TOPIC_OR_PARTITION.

        A partition listed without a leader is in an election, and is waited for as long as that takes; one not
        listed at all gets default.api.timeout.ms to appear. A topic error that retrying cannot fix (an illegal
        topic name) is raised at once.
        """
        if self.metadata.lists(tp):
            state.missing_since = None
            return math.inf
        error = self.metadata.topic_errors.get(tp.topic)
        if error is not None and not error.retriable:
            raise error
        if state.missing_since is None:
            state.missing_since = now
        deadline = state.missing_since + self._api_timeout_s
        if now >= deadline:
            state.missing_since = None  # the next wait starts over
            raise self.metadata.missing(f"partition {tp}", self._api_timeout_s)
        return deadline

    async def _refresh_and_wake(self) -> None:
        await self._refresh_metadata()
        self._data_arrived.set()

    @contextlib.contextmanager
    def _answering(self, partitions: list[tuple[TopicPartition, _PartitionState]]) -> Iterator[None]:
        """Around one request for `partitions` (a fetch, a position check): a failure of the whole request is each
        partition's error, and whatever the outcome they may be asked again and poll() looks."""
        try:
            yield
        except KafkaError as exc:
            for tp, state in partitions:
                self._on_partition_error(tp, state, exc)
        finally:
            for _, state in partitions:
                state.fetching = False
            self._data_arrived.set()

    async def _fetch(self, leader_id: int, partitions: list[tuple[TopicPartition, _PartitionState]],
                     asked: dict[TopicPartition, _Asked], request: FetchRequest, sent: trio.Event) -> None:
        try:
            with self._answering(partitions):
                response: FetchResponse = await self._transport.send(leader_id, request, sent=sent)
                errors.raise_for(response.error_code)
                for result in response.partitions:
                    tp = TopicPartition(result.topic, result.partition)
                    state, what = self._states.get(tp), asked.get(tp)
                    if state is None or what is None or not what.still(state):
                        continue  # unassigned or sought while the fetch was in flight
                    if result.error_code == errors.NONE.code:
                        state.high_watermark = result.high_watermark
                        state.checked_epoch = max(state.checked_epoch, what.leader_epoch)  # the leader fenced it
                        position = state.position
                        assert position is not None
                        state.batches.extend(batch for batch in result.batches if batch.next_offset > position)
                    else:
                        self._on_partition_error(tp, state, errors.for_code(result.error_code).exception(
                            result.error_message))
        finally:
            sent.set()  # whatever became of it: a poll waiting for it to be written must not wait longer

    async def _check_positions(self, leader_id: int, partitions: list[tuple[TopicPartition, _PartitionState]],
                               asked: dict[TopicPartition, _Asked]) -> None:
        """KIP-320: ask the leader where the epoch of each position's last record ends in its log. An end below
        the position means the log was truncated under it; a position at or below it is good for this leader
        epoch, and fetching resumes. A partition the answer leaves out is asked again after retry.backoff.ms."""
        request = OffsetsForLeaderEpochRequest(CONSUMER_REPLICA_ID, [
            OffsetForLeaderPartition(tp.topic, tp.partition, a.epoch, a.leader_epoch) for tp, a in asked.items()])
        unanswered = dict(partitions)
        with self._answering(partitions):
            response: OffsetsForLeaderEpochResponse = await self._transport.send(leader_id, request)
            for result in response.partitions:
                tp = TopicPartition(result.topic, result.partition)
                state, what = unanswered.pop(tp, None), asked.get(tp)
                if state is None or what is None or self._states.get(tp) is not state or not what.still(state):
                    continue
                if result.error_code != errors.NONE.code:
                    self._on_partition_error(tp, state, errors.for_code(result.error_code).exception(
                        f"checking the position of {tp} against leader {leader_id}"))
                elif 0 <= result.end_offset and what.position <= result.end_offset:
                    state.checked_epoch = what.leader_epoch
                else:
                    self._on_truncation(tp, state, what, result.leader_epoch, result.end_offset)
            for state in unanswered.values():
                state.backoff_until = trio.current_time() + self._retry_backoff_s

    def _on_truncation(self, tp: TopicPartition, state: _PartitionState, asked: _Asked, epoch: int,
                       end_offset: int) -> None:
        """The leader's log ends the position's epoch below the position, or knows no epoch at or before it
        (end -1): move back to that end, or reset when there is none, unless auto.offset.reset is none."""
        where = (f"{tp}: the log was truncated below position {asked.position} (leader epoch {asked.leader_epoch}); "
                 + (f"epoch {asked.epoch} now ends at {end_offset}" if end_offset >= 0
                    else f"the leader has no epoch at or before {asked.epoch}"))
        if self._auto_offset_reset == "none":
            self._error = LogTruncationError(
                where + (f"; seek to {end_offset} to read what the leader has there" if end_offset >= 0 else
                         "; seek to a position to read on"))
        elif end_offset >= 0:
            log.warning("%s: %s; reading on from %d", self._transport.name, where, end_offset)
            self._move(state, end_offset, None, epoch)
            state.checked_epoch = asked.leader_epoch
        else:
            log.warning("%s: %s; resetting to %s", self._transport.name, where, self._auto_offset_reset)
            self._move(state, None, self._auto_offset_reset)

    def _decode_first(self, tp: TopicPartition, state: _PartitionState) -> None:
        """Decode the first fetched batch into ConsumerRecords from the position on.

        A batch that cannot be decoded leaves CORRUPT_MESSAGE pending, naming the partition, the batch's offsets,
        the decoding error and the offset to seek to past it; its records before the bad one stay buffered, and
        the fetched batches are dropped, so the next fetch brings the bad one back. Refetching returns the same
        bytes, so the application decides, as with Kafka's consumer: this partition's alone, the others' records
        are fine.
        """
        position = state.position
        assert position is not None
        topic, partition = tp
        append = state.buffer.append
        batch = state.batches[0]
        timestamp_type = batch.timestamp_type
        log_append_time = timestamp_type == LOG_APPEND_TIME
        base_timestamp = batch.max_timestamp if log_append_time else batch.first_timestamp
        offset = batch.base_offset
        try:
            for delta, key, value, headers in batch.rows():  # the consumer's hottest loop: no Record between
                if offset >= position:
                    timestamp = base_timestamp if log_append_time else base_timestamp + delta
                    append(_new_consumer_record((topic, partition, offset, timestamp, key, value, headers,
                                                 timestamp_type)))
                offset += 1
        except (ValueError, TypeError, CorruptMessageError) as exc:
            state.batches.clear()
            cause = exc.__cause__ if isinstance(exc, CorruptMessageError) and exc.__cause__ is not None else exc
            detail = f"{type(cause).__name__}: {cause}" if str(cause) else type(cause).__name__
            self._error = CorruptMessageError(
                f"{tp}: the record batch at offsets {batch.base_offset} to {batch.last_offset} cannot be decoded "
                f"({detail}); seek to {batch.next_offset} to skip it")
            self._error.__cause__ = cause

    def _on_partition_error(self, tp: TopicPartition, state: _PartitionState, error: KafkaError) -> None:
        if isinstance(error, OffsetOutOfRangeError):
            if self._auto_offset_reset == "none":
                self._error = error
            else:
                log.info("%s: %s; resetting %s to %s", self._transport.name, error, tp, self._auto_offset_reset)
                self._move(state, None, self._auto_offset_reset)
                # Fetched again after retry.backoff.ms: a leader answering OFFSET_OUT_OF_RANGE whatever the offset
                # (a broker at fault, or a fault injected) made reset and fetch a loop in which no time passed.
                state.backoff_until = trio.current_time() + self._retry_backoff_s
            return
        if isinstance(error, CorruptMessageError):  # refetching returns the same bytes: the application decides
            self._error = CorruptMessageError(f"{error.message} ({tp}); seek past the record to continue")
            return
        if error.code in STALE_METADATA_ERRORS or error.retriable:
            state.backoff_until = trio.current_time() + self._retry_backoff_s
            assert self._nursery is not None
            self._nursery.start_soon(self._refresh_and_wake)
            return
        self._error = error

    # -- iteration ----------------------------------------------------------------------------------------------

    def __aiter__(self) -> Consumer:
        return self

    async def __anext__(self) -> ConsumerRecord:
        """Records one by one, forever; a record counts as consumed (position past it) once poll returned it."""
        while not self._iterated:
            self._iterated.extend(await self.poll(math.inf))
        return self._iterated.popleft()


def _offsets(offsets: Mapping[TopicPartition, OffsetAndMetadata | int] | None, where: str
             ) -> dict[TopicPartition, OffsetAndMetadata] | None:
    """Offsets to commit as given: an OffsetAndMetadata or a bare offset per partition."""
    if offsets is None:
        return None
    checked = {}
    for tp, value in mapping(offsets, where, "TopicPartition to offsets").items():
        offset = value if isinstance(value, OffsetAndMetadata) else OffsetAndMetadata(non_negative_int(value, "offset"))
        checked[topic_partition(tp, where)] = offset
    return checked
