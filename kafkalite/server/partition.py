"""Partition: one broker's replica of a topic partition, as leader or follower (seeds 000 and 004).

As leader it appends producers' batches, tracks each follower's log end offset from its fetches, moves the
high watermark to the smallest LEO in the ISR, and shrinks or expands the ISR, writing every change to the
partition-state znode with a version check so that a stale leader's write fails instead of overwriting the
controller's. It also moves its log start offset for DeleteRecords and tracks the followers' log starts, which
they report in their fetches. As follower it only records what the controller told it and takes the leader's
HW and log start offset from fetch responses; its log is driven by the replica fetcher.

Everything here is synchronous: a method runs to completion between two Trio checkpoints, so the ISR, the HW
and the log never disagree while another task looks at them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence, Set as AbstractSet
from dataclasses import dataclass
from typing import TypeVar

from kafkalite.common import errors
from kafkalite.common.clock import now_ms
from kafkalite.common.config import TopicConfig
from kafkalite.common.errors import (
    FencedLeaderEpochError,
    InvalidRecordError,
    InvalidRequestError,
    InvalidTimestampError,
    InvalidTxnStateError,
    MessageTooLargeError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    OffsetOutOfRangeError,
    PolicyViolationError,
    UnknownLeaderEpochError,
    UnsupportedCompressionTypeError,
)
from kafkalite.common.kafka_records import COMPRESSION_NAMES
from kafkalite.common.records import LOG_APPEND_TIME, NO_TIMESTAMP, RecordBatch
from kafkalite.common.types import TopicPartition
from kafkalite.coordination.errors import ConnectionLossError, SessionExpiredError
from kafkalite.coordination.kafka_zk import KafkaZkClient, LeaderAndIsr, LeaderIsrAndControllerEpoch
from kafkalite.log import Log
from kafkalite.log.producer_state import ProducerStateEntry, ProducerStateManager
from kafkalite.network.requests import HIGH_WATERMARK, NO_LEADER, LeaderAndIsrPartitionState
from kafkalite.server.delayed import DelayedProduce, FetchWatchers, ProducePurgatory
from kafkalite.server.fetch_session import FetchSessionCache
from kafkalite.server.log_manager import LogManager, log_config_for

log = logging.getLogger(__name__)

_LOG_END, _HIGH_WATERMARK, _LOW_WATERMARK = range(3)  # what a parked request waits for to move
_ReplicaSet = TypeVar("_ReplicaSet", frozenset[int], tuple[int, ...])
_replica_sets: dict[frozenset[int] | tuple[int, ...], frozenset[int] | tuple[int, ...]] = {}


def _shared(replicas: _ReplicaSet) -> _ReplicaSet:
    """One object for every partition with an equal ISR or assignment. A cluster has few distinct ones (sets and
    sequences of up to replication-factor broker ids) and they are immutable, so tens of thousands of partitions
    need not hold one each."""
    return _replica_sets.setdefault(replicas, replicas)  # type: ignore[return-value]


def _check_sent_by_client(batch: RecordBatch) -> None:
    """Kafka's LogValidator checks of the header of a batch a client sent: what only a broker writes, and what
    kafkalite does not serve (transactions), is refused in Kafka's words, before any record is read. The group
    coordinator's own writes pass the same way and set none of these.

    So is a codec no reader could undo, since the leader stores a Kafka client's batch without reading its records:
    a number Kafka has no codec for (its CompressionType.forId refuses it; the broker's answer is then
    UNKNOWN_SERVER_ERROR, here the code Kafka has for it), and any codec on a native payload, which is never
    compressed but would be served to Kafka clients as compressed."""
    codec = batch.compression
    if codec not in COMPRESSION_NAMES:
        raise UnsupportedCompressionTypeError(f"Unknown compression type id: {codec} (Kafka's codecs are "
                                              f"{', '.join(f'{n} {name}' for n, name in COMPRESSION_NAMES.items())})")
    if codec and not batch.kafka_format:
        raise InvalidRecordError(f"a native record batch is never compressed, and this one's attributes name "
                                 f"{COMPRESSION_NAMES[codec]}")
    if batch.is_control:
        raise InvalidRecordError("Clients are not allowed to write control records")
    if batch.producer_id >= 0 and batch.base_sequence < 0:
        raise InvalidRecordError(f"Invalid sequence number {batch.base_sequence} in record batch with producerId "
                                 f"{batch.producer_id}")
    if batch.is_transactional:
        raise InvalidTxnStateError(f"a transactional batch of producer {batch.producer_id}: kafkalite has no "
                                   f"transactions, so no transaction may write to a partition")
    if batch.timestamp_type == LOG_APPEND_TIME:  # only a leader stamps a batch so
        raise InvalidTimestampError(f"Invalid timestamp type in message at offset {batch.base_offset}. Producer "
                                    f"should not set timestamp type to LogAppendTime.")


@dataclass(slots=True)
class FollowerState:
    """What the leader knows of one follower, from that follower's fetches."""

    log_end_offset: int = -1  # unknown until the follower fetches from this leader
    log_start_offset: int = -1  # likewise: the log start the follower reported in its last fetch
    last_caught_up_time_ms: int = 0
    last_fetch_leader_log_end_offset: int = -1
    last_fetch_time_ms: int = 0


class Partition:
    # Slots: a broker holds one of these per replica it hosts, tens of thousands in a large cluster.
    __slots__ = ("topic_partition", "_fetch_sessions", "_on_lag_possible", "local_broker_id", "topic_config",
                 "_log_manager", "_zk", "_on_isr_change", "log", "_producers", "leader_replica_id",
                 "leader_epoch", "leader_epoch_start_offset", "zk_version", "controller_epoch", "assigned_replicas",
                 "isr", "_followers", "_high_watermark", "_delayed_produces", "_watchers")

    def __init__(self, tp: TopicPartition, local_broker_id: int, log_manager: LogManager,
                 topic_config: TopicConfig, zk: KafkaZkClient,
                 on_isr_change: Callable[[TopicPartition], None],
                 fetch_sessions: FetchSessionCache | None = None,
                 on_lag_possible: Callable[[Partition], None] | None = None, created_ms: int | None = None) -> None:
        self.topic_partition = tp
        self._fetch_sessions = fetch_sessions
        self._on_lag_possible = on_lag_possible
        self.local_broker_id = local_broker_id
        self.topic_config = topic_config
        self._log_manager = log_manager
        self._zk = zk
        self._on_isr_change = on_isr_change
        self.log: Log = log_manager.get_or_create_log(tp, topic_config, created_ms)
        # Idempotent producers' state is derived from the log, so a replica that becomes leader, or a broker
        # restarting on its old log, recognises retried batches exactly as the previous leader would have.
        self._producers: dict[int, ProducerStateEntry] = {}
        if self.log.size_in_bytes:  # a new partition's empty log has nothing to replay
            self.producer_state.truncate_and_reload(self.log)
        self.leader_replica_id: int = NO_LEADER
        self.leader_epoch: int = -1
        self.leader_epoch_start_offset: int = 0
        self.zk_version: int = 0
        self.controller_epoch: int = 0
        self.assigned_replicas: tuple[int, ...] = ()
        self.isr: frozenset[int] = _shared(frozenset())  # replaced whole on every change, never edited
        self._followers: dict[int, FollowerState] = {}
        self._high_watermark = min(log_manager.checkpointed_high_watermark(tp), self.log.log_end_offset)
        # acks=-1 produces waiting for the HW: made by the first, as most of a large cluster's partitions never
        # see one (a follower replica never does), which leaves the cyclic GC one object fewer per replica.
        self._delayed_produces: ProducePurgatory | None = None
        # What parked requests wait on, by kind (_LOG_END, ...): made when the first one parks, as most of a large
        # cluster's partitions never see one.
        self._watchers: tuple[FetchWatchers, FetchWatchers, FetchWatchers] | None = None

    def __repr__(self) -> str:
        return (f"Partition({self.topic_partition}, broker={self.local_broker_id}, leader={self.leader_replica_id}, "
                f"epoch={self.leader_epoch}, isr={sorted(self.isr)}, hw={self._high_watermark})")

    @property
    def log_end_offset_watchers(self) -> FetchWatchers:
        """Follower fetches parked until new data arrives."""
        return self._parked()[_LOG_END]

    @property
    def high_watermark_watchers(self) -> FetchWatchers:
        """Consumer fetches parked until committed data arrives."""
        return self._parked()[_HIGH_WATERMARK]

    @property
    def low_watermark_watchers(self) -> FetchWatchers:
        """DeleteRecords parked until the live replicas have moved their log starts."""
        return self._parked()[_LOW_WATERMARK]

    def _parked(self) -> tuple[FetchWatchers, FetchWatchers, FetchWatchers]:
        if self._watchers is None:
            self._watchers = (FetchWatchers(), FetchWatchers(), FetchWatchers())
        return self._watchers

    def _wake(self, *kinds: int) -> None:
        """Wake the requests parked here on these kinds of progress, if any ever parked."""
        if self._watchers is not None:
            for kind in kinds:
                self._watchers[kind].wake_all()

    def update_topic_config(self, topic_config: TopicConfig) -> None:
        """A dynamic topic config change: min.insync.replicas, retention and roll apply from now on."""
        self.topic_config = topic_config
        self.log.config = log_config_for(topic_config)

    def remove_expired_producers(self, now: int, expiration_ms: int) -> None:
        """Forget the idempotent producers whose last batch's timestamp is `expiration_ms` old (Kafka's
        isProducerExpired, which reads the same timestamp). A producer that sends again after that is taken at any
        sequence, as one the replica never knew (KIP-360)."""
        producers = self._producers
        if producers:
            expired = [producer_id for producer_id, entry in producers.items()
                       if not entry.batches or now - entry.batches[-1].max_timestamp >= expiration_ms]
            for producer_id in expired:
                del producers[producer_id]

    # -- views ----------------------------------------------------------------------------------------------------

    @property
    def producer_state(self) -> ProducerStateManager:
        return ProducerStateManager(self._producers)

    @property
    def is_leader(self) -> bool:
        return self.leader_replica_id == self.local_broker_id

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def min_insync_replicas(self) -> int:
        return self.topic_config["min.insync.replicas"]

    def follower_log_end_offsets(self) -> dict[int, int]:
        return {replica: state.log_end_offset for replica, state in self._followers.items()}

    def follower_log_start_offsets(self) -> dict[int, int]:
        return {replica: state.log_start_offset for replica, state in self._followers.items()}

    def low_watermark(self, alive: Callable[[int], bool]) -> int:
        """Kafka's lowWatermarkIfLeader: the smallest log start offset of the leader and of every assigned follower
        on a broker alive in the leader's metadata (`alive(broker_id)`), in the ISR or not (-1 for one that has not
        reported since this leader took over). Records below it are gone from every replica that could still
        become leader, an unclean election's choice included, so a DeleteRecords is done once this reaches its
        offset."""
        low = self.log.log_start_offset
        for replica in self.assigned_replicas:
            if replica != self.local_broker_id and alive(replica):
                state = self._followers.get(replica)
                low = min(low, state.log_start_offset if state is not None else -1)
        return low

    def check_leader_epoch(self, current_leader_epoch: int) -> None:
        """KIP-320: a request that names the leader epoch it expects is fenced when the epochs differ."""
        if current_leader_epoch < 0:
            return
        if current_leader_epoch < self.leader_epoch:
            raise FencedLeaderEpochError(
                f"{self.topic_partition}: leader epoch {current_leader_epoch} is older than {self.leader_epoch}")
        if current_leader_epoch > self.leader_epoch:
            raise UnknownLeaderEpochError(
                f"{self.topic_partition}: leader epoch {current_leader_epoch} is newer than {self.leader_epoch}")

    def ensure_leader(self) -> None:
        if not self.is_leader:
            raise NotLeaderOrFollowerError(
                f"broker {self.local_broker_id} is not the leader of {self.topic_partition} "
                f"(leader {self.leader_replica_id}, epoch {self.leader_epoch})")

    # -- role changes (LeaderAndIsr) ------------------------------------------------------------------------------

    def make_leader(self, state: LeaderAndIsrPartitionState, now: int) -> None:
        """Become leader at `now` (epoch ms, read once per LeaderAndIsr rather than per partition), or stay leader
        in a new leader epoch (the ISR or the replicas changed)."""
        was_leader = self.is_leader
        self._apply_partition_state(state)
        self.leader_replica_id = self.local_broker_id
        self.isr = _shared(frozenset(state.isr))
        log_end_offset = self.leader_epoch_start_offset = self.log.log_end_offset
        self.log.leader_epoch_cache.assign(state.leader_epoch, log_end_offset)
        # ISR members get a fresh lag allowance, so the ISR does not shrink on takeover. A new leader forgets the
        # followers' positions: from an earlier term, they say nothing of what the followers hold now (they may
        # truncate). A leader that stays keeps what the followers fetched from it, as Kafka's makeLeader does: a
        # controlled shutdown that takes one follower out of the ISR then leaves the others' states as they were
        # (new ones, for thousands of partitions, were carried into the GC's oldest generation).
        followers = self._followers if was_leader else {}
        kept = {}
        for replica in self.assigned_replicas:
            if replica == self.local_broker_id:
                continue
            caught_up = now if replica in self.isr else 0
            follower = followers.get(replica)
            if follower is None:
                follower = FollowerState(last_caught_up_time_ms=caught_up)
            else:
                follower.last_caught_up_time_ms = caught_up
                follower.last_fetch_leader_log_end_offset = log_end_offset
                follower.last_fetch_time_ms = now
            kept[replica] = follower
        self._followers = followers if kept == followers else kept
        self.maybe_increment_leader_hw()
        self._changed(appended=True)
        self._wake(_LOW_WATERMARK)  # a DeleteRecords waits on the new replica set now

    def make_follower(self, state: LeaderAndIsrPartitionState) -> None:
        was_leader = self.is_leader
        self._apply_partition_state(state)
        self.leader_replica_id = state.leader
        self.isr = _shared(frozenset())
        self._followers = {}
        if was_leader:
            self._fail_delayed_produces()
        self._wake_waiters()

    def _apply_partition_state(self, state: LeaderAndIsrPartitionState) -> None:
        self.controller_epoch = state.controller_epoch
        self.leader_epoch = state.leader_epoch
        self.zk_version = state.zk_version
        self.assigned_replicas = _shared(tuple(state.replicas))

    def delete(self) -> None:
        """The replica is going away (StopReplica with delete): release everything parked on it."""
        self.leader_replica_id = NO_LEADER
        self._fail_delayed_produces()
        self._wake_waiters()

    def _fail_delayed_produces(self) -> None:
        """Leadership went: acks=-1 produces waiting here answer NOT_LEADER_OR_FOLLOWER, and the client retries."""
        if self._delayed_produces is not None:
            self._delayed_produces.fail_all(errors.NOT_LEADER_OR_FOLLOWER)

    def _wake_waiters(self) -> None:
        """Parked fetches and DeleteRecords look again: they answer NOT_LEADER_OR_FOLLOWER if leadership went."""
        self._wake(_LOG_END, _HIGH_WATERMARK, _LOW_WATERMARK)
        self._changed(appended=True)

    def _changed(self, appended: bool) -> None:
        """Tell the followers' fetch sessions: they read this partition next, and an append wakes them. A change
        of log end, role or ISR may also leave a follower behind, so the ISR tick looks at this partition again."""
        if self._fetch_sessions is not None:
            self._fetch_sessions.on_partition_change(self.topic_partition, appended)
        if appended:
            self._lag_possible()

    def _lag_possible(self) -> None:
        if self._on_lag_possible is not None:
            self._on_lag_possible(self)

    # -- leader: produce ------------------------------------------------------------------------------------------

    def append_records_to_leader(self, batches: Sequence[RecordBatch], required_acks: int) -> tuple[int, int, int]:
        """Validate every batch, then append them all: (first base offset, offset after the last batch, log append
        time). With message.timestamp.type=LogAppendTime the batches are stamped with the leader's clock, which the
        produce response reports as the log append time (-1 otherwise), as in Kafka.

        A batch an idempotent producer already sent (a retry after a lost response) is not appended again: it
        answers with the offsets it got the first time, which is what makes retries exactly-once.
        """
        self.ensure_leader()
        if required_acks == -1 and len(self.isr) < self.min_insync_replicas:
            raise NotEnoughReplicasError(
                f"the ISR of {self.topic_partition} is {sorted(self.isr)}, below min.insync.replicas "
                f"{self.min_insync_replicas}")
        if not batches:
            raise InvalidRequestError(f"produce request for {self.topic_partition} carries no record batch")
        max_bytes = self.topic_config["max.message.bytes"]
        keyed_for = str(self.topic_partition) if self.topic_config.compact else None
        timestamps_within = self.topic_config.timestamp_bounds(now_ms)
        for batch in batches:
            if batch.size_in_bytes > max_bytes:
                raise MessageTooLargeError(
                    f"a batch of {batch.size_in_bytes} bytes exceeds max.message.bytes {max_bytes}")
            _check_sent_by_client(batch)
            batch.validate(deep=True, keyed_for=keyed_for, timestamps_within=timestamps_within)
        self._catch_up_idle_followers()
        offsets = []
        log_append_time = NO_TIMESTAMP
        if self.topic_config["message.timestamp.type"] == "LogAppendTime":
            log_append_time = now_ms()
            batches = [batch.with_log_append_time(log_append_time) for batch in batches]
        producer_state = self.producer_state
        for batch in batches:
            duplicate = producer_state.check(batch, self.log)
            if duplicate is not None:
                offsets.append((duplicate.first_offset, duplicate.last_offset + 1))
                if log_append_time != NO_TIMESTAMP:
                    log_append_time = duplicate.max_timestamp  # when it was appended, not now
                continue
            stored = self.log.append_as_leader(batch, self.leader_epoch)
            producer_state.update(stored)
            offsets.append((stored.base_offset, stored.next_offset))
        self._wake(_LOG_END)
        self._changed(appended=True)
        self.maybe_increment_leader_hw()
        return offsets[0][0], max(end for _, end in offsets), log_append_time

    def delay_produce(self, required_offset: int) -> DelayedProduce:
        """An acks=-1 wait for the HW to reach `required_offset`; already done if it has."""
        operation = DelayedProduce(required_offset)
        if self._high_watermark >= required_offset:
            operation.complete(self._replication_outcome())
        else:
            if self._delayed_produces is None:
                self._delayed_produces = ProducePurgatory()
            self._delayed_produces.watch(operation)
        return operation

    # -- leader: delete records ----------------------------------------------------------------------------------

    def delete_records_on_leader(self, offset: int) -> int:
        """Kafka's deleteRecordsOnLeader: move the log start to `offset` (HIGH_WATERMARK: to the high watermark)
        and return that offset; the caller waits for `low_watermark` to reach it.

        OFFSET_OUT_OF_RANGE for a negative offset or one beyond the high watermark: records a consumer cannot
        see yet may not be deleted, or the log start would pass uncommitted data a new leader might not have.
        An offset at or below the log start deletes nothing. Parked follower fetches are woken so that the
        followers learn the new log start from their next fetch response at once.
        """
        self.ensure_leader()
        if not self.topic_config.delete:
            raise PolicyViolationError(f"Records of partition {self.topic_partition} can not be deleted due to the "
                                       f"configured policy")
        target = self._high_watermark if offset == HIGH_WATERMARK else offset
        if target < 0:
            raise OffsetOutOfRangeError(f"the offset {offset} for partition {self.topic_partition} is not valid: "
                                        f"give an offset >= 0, or {HIGH_WATERMARK} for the high watermark")
        if target > self._high_watermark:
            raise OffsetOutOfRangeError(
                f"cannot delete records of {self.topic_partition} below offset {target}: it is beyond the high "
                f"watermark {self._high_watermark}")
        self.log.maybe_increment_log_start_offset(target)
        self._wake(_LOG_END)
        self._changed(appended=True)  # followers fetching in a session hear of the new log start at once
        return target

    def _replication_outcome(self) -> errors.ErrorCode:
        if len(self.isr) < self.min_insync_replicas:
            return errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        return errors.NONE

    # -- leader: follower tracking, high watermark, ISR ----------------------------------------------------------

    def update_follower_fetch_state(self, replica_id: int, fetch_offset: int, log_start_offset: int, now: int) -> None:
        """Record a follower's fetch at `now` (ms): its LEO is the offset it asks for, its log start the one it
        reports.

        A follower is caught up if it asked for the leader's LEO, or for at least the LEO the leader had at
        the follower's previous fetch (then it was caught up as of that fetch). The second rule keeps a
        follower in the ISR under continuous load, when it can never quite reach the moving LEO.
        """
        state = self._followers.get(replica_id)
        if state is None:
            raise NotLeaderOrFollowerError(
                f"broker {replica_id} is not an assigned replica of {self.topic_partition}")
        leader_end_offset = self.log.log_end_offset
        if fetch_offset >= leader_end_offset:
            state.last_caught_up_time_ms = now
        else:
            if fetch_offset >= state.last_fetch_leader_log_end_offset:
                state.last_caught_up_time_ms = max(state.last_caught_up_time_ms, state.last_fetch_time_ms)
            self._lag_possible()
        state.last_fetch_leader_log_end_offset = leader_end_offset
        state.last_fetch_time_ms = now
        state.log_end_offset = fetch_offset
        if log_start_offset != state.log_start_offset:
            state.log_start_offset = log_start_offset
            self._wake(_LOW_WATERMARK)
        self.maybe_expand_isr(replica_id)
        self.maybe_increment_leader_hw()

    def maybe_increment_leader_hw(self) -> bool:
        """HW = min LEO over the ISR (leader included). It never goes back; an advance releases waiters."""
        if not self.is_leader:
            return False
        new_hw = self.log.log_end_offset
        for replica in self.isr:
            if replica != self.local_broker_id:
                state = self._followers.get(replica)
                new_hw = min(new_hw, state.log_end_offset if state is not None else -1)
        if new_hw <= self._high_watermark:
            return False
        self._set_high_watermark(new_hw)
        if self._delayed_produces is not None:
            self._delayed_produces.complete_up_to(new_hw, self._replication_outcome())
        self._wake(_HIGH_WATERMARK)
        return True

    def _set_high_watermark(self, high_watermark: int) -> None:
        self._high_watermark = high_watermark
        self._log_manager.checkpoint_high_watermark(self.topic_partition, high_watermark)
        self._changed(appended=False)

    def _catch_up_idle_followers(self) -> None:
        """A follower fetching in a session names a partition only when its position there moves. One that held
        the whole log at its last named fetch, and still fetches with the partition in its session, was caught
        up as of its latest fetch: written down here before the log end moves, and before the lag check."""
        sessions = self._fetch_sessions
        if sessions is None:
            return
        log_end_offset = self.log.log_end_offset
        for replica, state in self._followers.items():
            if state.log_end_offset >= log_end_offset:
                fetched_ms = sessions.last_fetch_ms(replica, self.topic_partition)
                if fetched_ms is not None and fetched_ms > state.last_fetch_time_ms:
                    state.last_caught_up_time_ms = max(state.last_caught_up_time_ms, fetched_ms)
                    state.last_fetch_time_ms = fetched_ms
                    state.last_fetch_leader_log_end_offset = log_end_offset

    def needs_lag_check(self) -> bool:
        """Whether the ISR tick must look at this partition. It need not when this replica is no leader, or when
        every follower is in the ISR, holds the whole log and has the partition in its fetch session: then each
        follower was caught up as of its session's latest fetch, so only a session falling silent can shrink the
        ISR, and the tick finds those sessions itself (`FetchSessionCache.silent_since`). Whatever ends that
        state (an append, a follower behind, a role or ISR change, a partition leaving a session) puts the
        partition back in front of the tick."""
        if not self.is_leader:
            return False
        sessions = self._fetch_sessions
        if sessions is None or len(self.isr) != len(self._followers) + 1:
            return True
        log_end_offset = self.log.log_end_offset
        tp = self.topic_partition
        return any(replica not in self.isr or state.log_end_offset < log_end_offset
                   or sessions.last_fetch_ms(replica, tp) is None for replica, state in self._followers.items())

    def maybe_shrink_isr(self, now: int, max_lag_ms: int) -> None:
        """Drop followers that have not caught up within `max_lag_ms`; the leader itself never leaves.

        Also the other way: a follower out of the ISR that has caught up within `max_lag_ms` is offered to
        `maybe_expand_isr` again. In a fetch session a caught-up follower names nothing, so its fetches no longer
        retry an expansion that failed (the ISR write met a newer partition state, or the coordination service
        was out of reach); this tick does.
        """
        if not self.is_leader:
            return
        self._catch_up_idle_followers()
        for replica, state in self._followers.items():
            if replica not in self.isr and now - state.last_caught_up_time_ms <= max_lag_ms:
                self.maybe_expand_isr(replica)
        out_of_sync = {replica for replica in self.isr if replica != self.local_broker_id
                       and now - self._followers.get(replica, FollowerState()).last_caught_up_time_ms > max_lag_ms}
        if out_of_sync:
            log.info("%s: shrinking ISR %s, %s lag more than %d ms", self.topic_partition, sorted(self.isr),
                     sorted(out_of_sync), max_lag_ms)
            if self._update_isr(self.isr - out_of_sync):
                self.maybe_increment_leader_hw()

    def maybe_expand_isr(self, replica_id: int) -> None:
        """A follower rejoins once it holds the HW and everything of the current term before it (KAFKA-7128)."""
        if not self.is_leader or replica_id in self.isr or replica_id not in self.assigned_replicas:
            return
        end_offset = self._followers[replica_id].log_end_offset
        if end_offset >= self._high_watermark and end_offset >= self.leader_epoch_start_offset:
            log.info("%s: expanding ISR %s with %d", self.topic_partition, sorted(self.isr), replica_id)
            if not self._update_isr(self.isr | {replica_id}):
                self._changed(appended=False)  # read again at the follower's next fetch, and tried again

    def _update_isr(self, new_isr: AbstractSet[int]) -> bool:
        """Write the ISR if the state is at the version we last saw; on a version mismatch keep the old ISR.

        A mismatch means the controller changed the state since; its LeaderAndIsr is on the way and will
        tell us the truth, so retrying here would only fight it.
        """
        ordered = tuple(r for r in self.assigned_replicas if r in new_isr)
        state = LeaderIsrAndControllerEpoch(
            LeaderAndIsr(self.local_broker_id, self.leader_epoch, ordered, self.zk_version + 1),  # the version it gives
            self.controller_epoch)
        try:
            new_version = self._zk.conditional_update_partition_state(self.topic_partition, state)
        except (SessionExpiredError, ConnectionLossError) as exc:
            log.warning("%s: ISR update to %s failed: %s", self.topic_partition, list(ordered), exc)
            return False
        if new_version is None:
            log.info("%s: ISR update to %s skipped, the partition state changed since version %d",
                     self.topic_partition, list(ordered), self.zk_version)
            return False
        self.isr = _shared(frozenset(ordered))
        self.zk_version = new_version
        self._on_isr_change(self.topic_partition)
        self._lag_possible()
        self._changed(appended=False)  # a follower dropped from it gets the partition read, and may rejoin
        return True

    # -- follower -------------------------------------------------------------------------------------------------

    def append_records_to_follower(self, batches: Sequence[RecordBatch], leader_high_watermark: int,
                                   leader_log_start_offset: int) -> None:
        """Append what the leader sent and take its high watermark and log start offset (Kafka's
        processPartitionData), so that records a DeleteRecords removed on the leader go here too and stay gone
        when this replica becomes leader. The log start never passes this log's end: a follower that far
        behind is answered OFFSET_OUT_OF_RANGE and restarts at the leader's log start instead."""
        producer_state = self.producer_state
        for batch in batches:
            self.log.append_as_follower(batch)
            producer_state.update(batch)
        self._follow_high_watermark(leader_high_watermark)
        self.log.maybe_increment_log_start_offset(min(leader_log_start_offset, self.log.log_end_offset))

    def truncate_to(self, offset: int) -> None:
        self.log.truncate_to(offset)
        self.producer_state.truncate_and_reload(self.log)
        self._set_high_watermark(min(self._high_watermark, self.log.log_end_offset))

    def truncate_fully_and_start_at(self, offset: int) -> None:
        self.log.truncate_fully_and_start_at(offset)
        self.producer_state.truncate_and_reload(self.log)
        self._set_high_watermark(offset)

    def _follow_high_watermark(self, leader_high_watermark: int) -> None:
        high_watermark = min(leader_high_watermark, self.log.log_end_offset)
        if high_watermark != self._high_watermark:
            self._set_high_watermark(high_watermark)
