"""Replica fetchers: one task per source (leader) broker, pulling all of its partitions in one FetchRequest.

A partition enters a fetcher with its log unchecked against the leader's. Its fetches carry the epoch of its
last record (`last_fetched_epoch`), and the leader answers with records only if its own log holds that epoch up
to the fetch offset; otherwise with a diverging epoch: the largest epoch it has up to the follower's, and where
that ends, which is what OffsetsForLeaderEpoch would have answered. The follower truncates by it (KIP-101 /
KIP-279) and fetches again, checked again, until the leader accepts or the truncation is final. This is
KIP-595's truncation on fetch, as Kafka's followers do it since 2.7: it happens on every leader-epoch change,
even when the leader stays the same (KAFKA-7164), because the replica may hold records of an earlier term that
the leader never had, but it costs no round of its own. A LeaderAndIsr over thousands of partitions only names
them in the next fetch of the session, and only those whose logs diverged truncate.

A request may be in flight while the controller moves the partition; each partition's fetch state takes a new
generation on every change, so a response is applied only if the generation that asked for it is still the
current one. The state object itself is kept and reset, not replaced: a LeaderAndIsr over thousands of partitions
re-adds each of them, and new objects for all would be carried into the cyclic GC's oldest generation.

Errors: FENCED_LEADER_EPOCH means our epoch is stale: the partition waits for the controller's next
LeaderAndIsr. NOT_LEADER_OR_FOLLOWER and UNKNOWN_LEADER_EPOCH mean the leader has not processed its own
LeaderAndIsr yet (the controller sends to all replicas at once): the partition backs off and retries, as
Kafka's fetcher does, since no further LeaderAndIsr would ever come to unblock it.
"""

from __future__ import annotations

import itertools
import logging
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import trio

from kafkalite.common import errors
from kafkalite.common.config import BrokerConfig
from kafkalite.common.errors import NetworkExceptionError, raise_for
from kafkalite.common.types import TopicPartition
from kafkalite.network.requests import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    UNDEFINED_EPOCH,
    UNDEFINED_EPOCH_OFFSET,
    EpochEndOffset,
    FetchPartition,
    FetchPartitionResponse,
    FetchRequest,
    FetchResponse,
    ForgottenPartition,
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsResponse,
    Request,
)
from kafkalite.network.transport import Channel, PauseGate, Transport
from kafkalite.server.fetch_session import NEW_SESSION_ID
from kafkalite.server.partition import Partition

log = logging.getLogger(__name__)

_RETRIABLE_LEADER_ERRORS = frozenset({errors.NOT_LEADER_OR_FOLLOWER.code, errors.UNKNOWN_LEADER_EPOCH.code,
                                      errors.UNKNOWN_TOPIC_OR_PARTITION.code})
_SESSION_ERRORS = frozenset({errors.FETCH_SESSION_ID_NOT_FOUND.code, errors.INVALID_FETCH_SESSION_EPOCH.code})


@dataclass(eq=False, slots=True)
class PartitionFetchState:
    partition: Partition
    fetch_offset: int
    generation: int  # new at every (re)start of the partition's fetch: what answers are checked against
    checking_epoch: bool = True  # fetches carry the last fetched epoch until the leader accepts the log
    known_to_leader: bool = False  # a fetch naming this generation was answered: answers are about it from then on
    failed: bool = False  # fenced: wait for the controller's next LeaderAndIsr
    delayed_until: float = -math.inf  # trio time before which the partition is not fetched
    named_log_start: int = -1  # the log start the leader last heard from us: named again once ours differs

    def restart(self, partition: Partition, fetch_offset: int, generation: int) -> None:
        """Start over from `fetch_offset`, as a new state would, under a new generation."""
        self.partition, self.fetch_offset, self.generation = partition, fetch_offset, generation
        self.checking_epoch, self.known_to_leader, self.failed, self.delayed_until = True, False, False, -math.inf


def truncation_offset(partition: Partition, leader: EpochEndOffset) -> tuple[int, bool]:
    """Where to truncate given the leader's answer (a diverging epoch), and whether truncation is complete (KIP-279).

    When the leader's epoch is one the follower does not have, the follower truncates to the end of its own
    largest earlier epoch and asks again about the latest epoch it has left. The leader answers with an epoch
    no larger than the one asked about, so that end is where a later epoch of the follower starts, and the
    truncation removes that epoch from the cache even when it holds no records (Log.truncate_to): each round
    that is not final asks about a smaller epoch, so the same question never comes twice and the rounds end.
    """
    log_end_offset = partition.log.log_end_offset
    if leader.end_offset == UNDEFINED_EPOCH_OFFSET:
        return min(partition.high_watermark, log_end_offset), True
    if leader.leader_epoch == UNDEFINED_EPOCH:
        return min(leader.end_offset, log_end_offset), True
    follower_epoch, follower_end_offset = partition.log.leader_epoch_cache.end_offset_for(
        leader.leader_epoch, log_end_offset)
    if follower_epoch == UNDEFINED_EPOCH or follower_end_offset == UNDEFINED_EPOCH_OFFSET:
        return min(leader.end_offset, log_end_offset), True
    if follower_epoch != leader.leader_epoch:
        return min(follower_end_offset, log_end_offset), False
    return min(follower_end_offset, leader.end_offset, log_end_offset), True


def _latest_epoch(partition: Partition) -> int:
    epoch = partition.log.latest_epoch
    return UNDEFINED_EPOCH if epoch is None else epoch


class ReplicaFetcher:
    """Fetches every partition this broker follows on one source broker, in one fetch session (KIP-227).

    `_in_session` is what the leader's session holds: the partitions being fetched. A partition leaves it while
    it waits out a backoff, or is failed, and rejoins named with its new position; the next fetch
    names what joined or moved on since the last response (`_named`) and what left (`_forgotten`), so a round
    costs what changed, not what is followed.
    """

    def __init__(self, manager: ReplicaFetcherManager, source_broker_id: int) -> None:
        self._manager = manager
        self.source_broker_id = source_broker_id
        self.partitions: dict[TopicPartition, PartitionFetchState] = {}
        self.cancel_scope = trio.CancelScope()
        self._changed = trio.Event()
        self._channel: Channel | None = None  # the connection to the source broker while there is work
        self._delayed: dict[TopicPartition, PartitionFetchState] = {}
        self._in_session: dict[TopicPartition, None] = {}  # ordered, so that fetches are reproducible
        self._named: dict[TopicPartition, None] = {}
        self._forgotten: dict[TopicPartition, None] = {}
        self._session_id = NEW_SESSION_ID
        self._session_epoch = 0  # the responses of the session received so far

    def add_partitions(self, states: Mapping[TopicPartition, PartitionFetchState]) -> None:
        """Fetch these too, from the next request on; a fetch parked at the leader is answered now for it.

        The parked fetch lacks the new partitions and would hold them back for up to replica.fetch.wait.max.ms,
        so the first acks=all produce to a new partition on a quiet cluster would wait that long. Kafka's
        fetcher pays that wait; in one process the fetcher hurries its channel, and the leader answers the parked
        fetch at once with what it has. Abandoning the fetch instead would lose its response: a follower that
        never hears back keeps naming what it named, and never learns the id of a session it was opening, so
        topics created back to back would have it read its whole session again at every one.
        """
        for tp, state in states.items():
            self._drop(tp)
            self.partitions[tp] = state
            self._join(tp)
        if self._channel is not None:
            self._channel.hurry()
        self._signal_change()

    def remove_partitions(self, tps: Iterable[TopicPartition],
                          removed: dict[TopicPartition, PartitionFetchState] | None = None) -> None:
        """Stop fetching these; the states of those this fetcher had go into `removed`, if given."""
        for tp in tps:
            state = self.partitions.pop(tp, None)
            if state is not None:
                self._drop(tp)
                if removed is not None:
                    removed[tp] = state
        self._signal_change()

    def _drop(self, tp: TopicPartition) -> None:
        self._delayed.pop(tp, None)
        self._leave_session(tp)

    def _join(self, tp: TopicPartition) -> None:
        self._in_session[tp] = None
        self._named[tp] = None
        self._forgotten.pop(tp, None)

    def _leave_session(self, tp: TopicPartition) -> None:
        if tp in self._in_session:
            del self._in_session[tp]
            self._named.pop(tp, None)
            self._forgotten[tp] = None

    def _signal_change(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    def _is_current(self, tp: TopicPartition, state: PartitionFetchState, generation: int) -> bool:
        return self.partitions.get(tp) is state and state.generation == generation and not state.failed

    def _delay(self, tp: TopicPartition, state: PartitionFetchState) -> None:
        self._leave_session(tp)
        state.delayed_until = trio.current_time() + self._manager.backoff_s
        self._delayed[tp] = state

    def _fail(self, tp: TopicPartition, state: PartitionFetchState) -> None:
        """Fenced, or broken: the partition waits for the controller's next LeaderAndIsr."""
        self._leave_session(tp)
        state.failed = True

    def _release_delayed(self) -> None:
        """Partitions whose backoff is over go back to fetching."""
        if not self._delayed:
            return
        now = trio.current_time()
        for tp, state in [(tp, st) for tp, st in self._delayed.items() if st.delayed_until <= now]:
            del self._delayed[tp]
            self._join(tp)

    def _has_work(self) -> bool:
        self._release_delayed()
        return bool(self._in_session)

    async def run(self) -> None:
        with self.cancel_scope:
            while True:
                await self._manager.gate.checkpoint()
                if not self._has_work():
                    await self._idle()
                    continue
                try:
                    await self._work_connected()
                except NetworkExceptionError as exc:
                    log.debug("broker %d: fetch from %d failed: %s", self._manager.broker_id,
                              self.source_broker_id, exc)
                    await trio.sleep(self._manager.backoff_s)
                except Exception:
                    log.exception("broker %d: fetcher for broker %d failed", self._manager.broker_id,
                                  self.source_broker_id)
                    await trio.sleep(self._manager.backoff_s)

    async def _work_connected(self) -> None:
        """Fetch over one channel to the source broker, for as long as there is anything to fetch.

        Each round yields to the scheduler: an in-process request need not (a fetch the leader can answer at
        once), and the pause gate does not unless the broker is paused, so without it a busy or stuck fetcher
        would keep every other task of the process, and the clock, from running.
        """
        with self._manager.channel(self.source_broker_id) as channel:
            self._channel = channel
            try:
                while self._has_work():
                    await self._fetch()
                    await self._manager.gate.checkpoint()
                    await trio.lowlevel.checkpoint()
            finally:
                self._channel = None

    async def _send(self, request: Request) -> Any:
        assert self._channel is not None
        return await self._channel.send(request)

    async def _idle(self) -> None:
        """Sleep until a partition is added or removed, or a delayed partition becomes fetchable again."""
        changed = self._changed
        wake_at = min((st.delayed_until for st in self._delayed.values()), default=math.inf)
        with trio.move_on_at(wake_at):
            await changed.wait()

    # -- truncation ----------------------------------------------------------------------------------------------

    def _truncate_to_diverging(self, tp: TopicPartition, state: PartitionFetchState,
                               data: FetchPartitionResponse) -> None:
        """The leader's log leaves ours: truncate by its diverging epoch, and name the new position. A truncation
        that is not final leaves the epoch checked again at the next fetch, about a smaller epoch (KIP-279)."""
        partition = state.partition
        offset, complete = truncation_offset(partition, EpochEndOffset(
            tp.topic, tp.partition, errors.NONE.code, data.diverging_epoch, data.diverging_end_offset))
        if offset < partition.log.log_end_offset:
            log.info("broker %d: truncating %s from %d to %d (leader epoch %d)", self._manager.broker_id, tp,
                     partition.log.log_end_offset, offset, partition.leader_epoch)
        partition.truncate_to(offset)
        state.checking_epoch = not complete
        state.fetch_offset = partition.log.log_end_offset
        self._named[tp] = None  # with or without the epoch to check, the leader must hear of it

    # -- fetching -------------------------------------------------------------------------------------------------

    def _fetch_partition(self, tp: TopicPartition) -> FetchPartition:
        state = self.partitions[tp]
        partition = state.partition
        state.named_log_start = partition.log.log_start_offset
        return FetchPartition(tp.topic, tp.partition, state.fetch_offset, self._manager.fetch_max_bytes,
                              partition.leader_epoch, state.named_log_start,
                              _latest_epoch(partition) if state.checking_epoch else UNDEFINED_EPOCH)

    async def _fetch(self) -> None:
        """One fetch in the session: a full one to open it, then only what changed since the last response."""
        manager = self._manager
        full = self._session_id == NEW_SESSION_ID
        named = list(self._in_session if full else self._named)
        forgotten = [] if full else list(self._forgotten)
        request = FetchRequest(
            replica_id=manager.broker_id, max_wait_ms=manager.fetch_wait_max_ms, min_bytes=1,
            partitions=[self._fetch_partition(tp) for tp in named], broker_epoch=manager.broker_epoch(),
            session_id=self._session_id, session_epoch=self._session_epoch,
            forgotten=[ForgottenPartition(tp.topic, tp.partition) for tp in forgotten])
        # the generations named, beside `named` rather than paired with it in a tuple each: a fetch that names
        # thousands of partitions is out long enough for its list to reach the GC's oldest generation
        sent = [self.partitions[tp].generation for tp in named]
        response: FetchResponse = await self._send(request)
        if response.error_code in _SESSION_ERRORS:
            log.info("broker %d: fetch session %d with %d: %s; starting a new one", manager.broker_id,
                     self._session_id, self.source_broker_id, errors.for_code(response.error_code))
            self._session_id, self._session_epoch = NEW_SESSION_ID, 0
            return
        if response.error_code != errors.NONE.code:
            log.warning("broker %d: fetch from %d failed: %s", manager.broker_id, self.source_broker_id,
                        errors.for_code(response.error_code))
            await trio.sleep(manager.backoff_s)
            return
        if full:
            self._session_id, self._session_epoch = response.session_id, 1
            self._forgotten = {tp: None for tp in named if tp in self._forgotten}  # left while it was out
        else:
            self._session_epoch += 1
            for tp in forgotten:
                self._forgotten.pop(tp, None)
        for tp, generation in zip(named, sent):
            state = self.partitions.get(tp)
            if state is not None and state.generation == generation:  # one restarted meanwhile is still to be named
                state.known_to_leader = True
                self._named.pop(tp, None)
        out_of_range = []
        for data in response.partitions:
            tp = TopicPartition(data.topic, data.partition)
            state = self.partitions.get(tp)
            if state is None or tp not in self._in_session or not state.known_to_leader:
                if tp not in self._in_session:
                    self._forgotten[tp] = None  # the leader still has it in the session: tell it again
                continue  # an answer about a fetch state that is gone
            if data.error_code == errors.OFFSET_OUT_OF_RANGE.code:
                out_of_range.append((tp, state, state.generation))
            elif data.error_code != errors.NONE.code:
                self._on_partition_error(tp, state, data.error_code, "Fetch")
            elif data.diverging_epoch != UNDEFINED_EPOCH:
                self._truncate_to_diverging(tp, state, data)
            else:
                state.checking_epoch = False  # the leader holds our log: no need to check it again
                self._process_partition_data(tp, state, data)
        for tp, state, generation in out_of_range:
            await self._handle_offset_out_of_range(tp, state, generation)

    def _process_partition_data(self, tp: TopicPartition, state: PartitionFetchState,
                                data: FetchPartitionResponse) -> None:
        if data.batches and data.batches[0].base_offset != state.fetch_offset:
            self._named[tp] = None  # an answer for a position the leader no longer has from us: name ours again
            return
        try:
            state.partition.append_records_to_follower(data.batches, data.high_watermark, data.log_start_offset)
        except Exception:
            log.exception("broker %d: appending fetched data of %s failed; waiting for the controller",
                          self._manager.broker_id, tp)
            self._fail(tp, state)
            return
        if state.partition.log.log_start_offset != state.named_log_start:
            # moved by the leader's, or by this broker's own retention: the leader waits to hear it (a DeleteRecords
            # waits for every log start), and answers at once while it has one for us below its own
            self._named[tp] = None
        self._moved_to(tp, state, state.partition.log.log_end_offset)

    def _moved_to(self, tp: TopicPartition, state: PartitionFetchState, fetch_offset: int) -> None:
        if fetch_offset != state.fetch_offset:
            state.fetch_offset = fetch_offset
            self._named[tp] = None

    async def _handle_offset_out_of_range(self, tp: TopicPartition, state: PartitionFetchState,
                                          generation: int) -> None:
        """Kafka's rule: past the leader's end, truncate to it; before the leader's start, restart there. Each
        step first checks that the partition's fetch has not started over since the answer (`generation`)."""
        if not self._is_current(tp, state, generation):
            return
        leader_end_offset = await self._list_offset(tp, LATEST_TIMESTAMP)
        if not self._is_current(tp, state, generation):
            return
        partition = state.partition
        if leader_end_offset < partition.log.log_end_offset:
            partition.truncate_to(leader_end_offset)
            self._moved_to(tp, state, partition.log.log_end_offset)
            return
        leader_start_offset = await self._list_offset(tp, EARLIEST_TIMESTAMP)
        if not self._is_current(tp, state, generation):
            return
        if leader_start_offset > partition.log.log_end_offset:
            partition.truncate_fully_and_start_at(leader_start_offset)
        self._moved_to(tp, state, max(leader_start_offset, partition.log.log_end_offset))

    async def _list_offset(self, tp: TopicPartition, timestamp: int) -> int:
        request = ListOffsetsRequest(self._manager.broker_id, [ListOffsetsPartition(tp.topic, tp.partition,
                                                                                    timestamp)])
        response: ListOffsetsResponse = await self._send(request)
        answer = response.partitions[0]
        raise_for(answer.error_code, answer.error_message)
        return answer.offset

    def _on_partition_error(self, tp: TopicPartition, state: PartitionFetchState, code: int, api: str) -> None:
        error = errors.for_code(code)
        if code in _RETRIABLE_LEADER_ERRORS:
            log.info("broker %d: %s for %s from %d: %s; retrying after backoff", self._manager.broker_id, api, tp,
                     self.source_broker_id, error)
            self._delay(tp, state)
        else:
            # FENCED_LEADER_EPOCH is the usual one: the leader took a LeaderAndIsr this broker has not yet, as
            # after every epoch change that reaches the leader first (Kafka logs it at INFO too)
            level = logging.INFO if code == errors.FENCED_LEADER_EPOCH.code else logging.WARNING
            log.log(level, "broker %d: %s for %s from %d: %s; waiting for the controller", self._manager.broker_id,
                    api, tp, self.source_broker_id, error)
            self._fail(tp, state)


class ReplicaFetcherManager:
    """Kafka's AbstractFetcherManager: which fetcher serves which partition, and the fetcher tasks' lives."""

    def __init__(self, broker_id: int, broker_epoch: Callable[[], int], config: BrokerConfig,
                 transport: Transport, gate: PauseGate, get_partition: Callable[[TopicPartition], Partition | None]
                 ) -> None:
        self.broker_id = broker_id
        self.broker_epoch = broker_epoch
        self.gate = gate
        self.fetch_wait_max_ms: int = config["replica.fetch.wait.max.ms"]
        self.fetch_max_bytes: int = config["replica.fetch.max.bytes"]
        self.backoff_s: float = config["replica.fetch.backoff.ms"] / 1000
        # a negative control for tests: "high-watermark" truncates as the pre-KIP-101 code did
        self.truncate_to_high_watermark: bool = config["kafkalite.follower.truncation"] == "high-watermark"
        self._transport = transport
        self._get_partition = get_partition
        self._fetchers: dict[int, ReplicaFetcher] = {}
        self._nursery: trio.Nursery | None = None
        self._generations = itertools.count()

    def startup(self, nursery: trio.Nursery) -> None:
        self._nursery = nursery

    def channel(self, destination: int) -> Channel:
        return self._transport.channel(self.broker_id, destination)

    def add_fetcher_for_partitions(self, partitions: Mapping[TopicPartition, tuple[int, int]]) -> None:
        """Start fetching each partition from `(leader id, fetch offset)`, its log checked by epoch first; a
        partition already fetched starts over, in its old state object under a new generation."""
        removed: dict[TopicPartition, PartitionFetchState] = {}
        self.remove_fetcher_for_partitions(partitions, removed)
        by_leader: dict[int, dict[TopicPartition, PartitionFetchState]] = {}
        for tp, (leader_id, fetch_offset) in partitions.items():
            partition = self._get_partition(tp)
            if partition is None:
                continue
            state = removed.get(tp)
            if state is None:
                state = PartitionFetchState(partition, fetch_offset, next(self._generations))
            else:
                state.restart(partition, fetch_offset, next(self._generations))
            if self.truncate_to_high_watermark:
                # The negative control (kafkalite.follower.truncation=high-watermark): the seeds' makeFollowers,
                # which truncates to the follower's own high watermark at once and is known to lose or diverge
                # acknowledged data (KIP-101).
                partition.truncate_to(partition.high_watermark)
                state.fetch_offset, state.checking_epoch = partition.log.log_end_offset, False
            elif _latest_epoch(partition) == UNDEFINED_EPOCH:
                # No epochs (nothing ever appended with one): the high watermark is the only safe point.
                if partition.high_watermark < partition.log.log_end_offset:
                    partition.truncate_to(partition.high_watermark)
                state.fetch_offset, state.checking_epoch = partition.log.log_end_offset, False
            by_leader.setdefault(leader_id, {})[tp] = state
        for leader_id, states in by_leader.items():
            fetcher = self._fetchers.get(leader_id)
            if fetcher is None:
                fetcher = self._fetchers[leader_id] = ReplicaFetcher(self, leader_id)
                assert self._nursery is not None, "ReplicaFetcherManager.startup was not called"
                self._nursery.start_soon(fetcher.run)
            fetcher.add_partitions(states)

    def remove_fetcher_for_partitions(self, tps: Iterable[TopicPartition],
                                      removed: dict[TopicPartition, PartitionFetchState] | None = None) -> None:
        tps = list(tps)
        for fetcher in self._fetchers.values():
            fetcher.remove_partitions(tps, removed)

    def shutdown_idle_fetchers(self) -> None:
        for leader_id, fetcher in list(self._fetchers.items()):
            if not fetcher.partitions:
                fetcher.cancel_scope.cancel()
                del self._fetchers[leader_id]

    def fetch_state(self, tp: TopicPartition) -> PartitionFetchState | None:
        """Where the partition's fetch stands, if any fetcher serves it (for tests and describe)."""
        for fetcher in self._fetchers.values():
            state = fetcher.partitions.get(tp)
            if state is not None:
                return state
        return None

    def fetcher_source_ids(self) -> list[int]:
        return sorted(self._fetchers)
