"""ReplicaManager: the partitions this broker hosts and the requests that touch their logs (seed 000).

It turns the controller's LeaderAndIsr into leaders and followers, appends producers' batches and waits for
replication, serves fetches to followers and consumers, deletes records below an offset (DeleteRecords), and
runs the leader's periodic duties: shrinking the ISR of lagging followers and telling the controller, through
ISR change notifications, what changed.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Mapping, Sequence

import trio

from kafkalite.common import errors
from kafkalite.common.clock import now_ms
from kafkalite.common.config import BrokerConfig, TopicConfig
from kafkalite.common.errors import KafkaError, NotLeaderOrFollowerError, OffsetNotAvailableError, \
    OffsetOutOfRangeError, UnknownTopicOrPartitionError
from kafkalite.common.timer import Timer
from kafkalite.common.types import TopicPartition
from kafkalite.coordination.errors import ConnectionLossError, SessionExpiredError
from kafkalite.coordination.kafka_zk import KafkaZkClient
from kafkalite.network.requests import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    UNDEFINED_EPOCH,
    UNDEFINED_EPOCH_OFFSET,
    DeleteRecordsPartition,
    DeleteRecordsPartitionResult,
    DescribeLogDirsRequest,
    DescribeLogDirsResponse,
    EpochEndOffset,
    FetchPartition,
    FetchPartitionResponse,
    FetchRequest,
    FetchResponse,
    Hurry,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    ListOffsetsPartitionResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    LiveBroker,
    LogDirReplica,
    OffsetsForLeaderEpochRequest,
    OffsetsForLeaderEpochResponse,
    PartitionError,
    ProducePartitionData,
    ProducePartitionResponse,
    StopReplicaRequest,
    StopReplicaResponse,
    UpdateMetadataRequest,
)
from kafkalite.network.transport import PauseGate, Transport
from kafkalite.server.delayed import await_fetch, await_produce
from kafkalite.server.fetch_session import (
    NEW_SESSION_ID,
    SESSIONLESS_EPOCH,
    FetchSession,
    FetchSessionCache,
    SessionPartition,
)
from kafkalite.server.fetcher import ReplicaFetcherManager
from kafkalite.server.log_manager import LogManager
from kafkalite.server.metadata_cache import MetadataCache
from kafkalite.server.partition import Partition

log = logging.getLogger(__name__)

ISR_CHANGE_PROPAGATION_INTERVAL_MS = 2500
"""Kafka's isrChangePropagationInterval: ISR changes within this window go out as one notification."""


def _offset_not_available(partition: Partition) -> OffsetNotAvailableError:
    return OffsetNotAvailableError(
        f"the leader of {partition.topic_partition} is catching its high watermark {partition.high_watermark} up "
        f"to the start of its epoch {partition.leader_epoch_start_offset}; retry")


def _error_of(exc: Exception, what: str) -> tuple[int, str]:
    """A per-partition failure as (code, message); an unexpected one is logged and is UNKNOWN_SERVER_ERROR."""
    if isinstance(exc, KafkaError):
        return exc.code, exc.message
    log.exception("%s failed", what)
    return errors.UNKNOWN_SERVER_ERROR.code, f"{type(exc).__name__}: {exc}"


_Asked = FetchPartition | SessionPartition
"""A partition a read is asked for: a consumer's or a sessionless fetch's, or a follower session's, which reads as
one."""


def _diverging_epoch(partition: Partition, fetch: _Asked) -> tuple[int, int] | None:
    """Kafka's validateFetchOffsetAndEpoch (KIP-595, truncation on fetch): where the follower's log leaves the
    leader's, as an OffsetsForLeaderEpoch answer for its last fetched epoch, or None if its log up to the fetch
    offset is the leader's. A follower checks so once per leader epoch, before it fetches on (ReplicaFetcher)."""
    log_ = partition.log
    epoch, end_offset = log_.leader_epoch_cache.end_offset_for(fetch.last_fetched_epoch, log_.log_end_offset)
    if epoch == UNDEFINED_EPOCH or end_offset == UNDEFINED_EPOCH_OFFSET:
        raise OffsetOutOfRangeError(f"the end of epoch {fetch.last_fetched_epoch} of {partition.topic_partition}, "
                                    f"the follower's last, is not known to its leader")
    if epoch < fetch.last_fetched_epoch or end_offset < fetch.fetch_offset:
        return epoch, end_offset
    return None


class _FewNamed:
    """The partitions a log line is about: how many, and the first few with two numbers each. A LeaderAndIsr
    over thousands of partitions gets one line naming ten of them, not a line each, and keeps no entry for the
    rest (one kept for each would live long enough to reach the cyclic GC's oldest generation)."""

    __slots__ = ("count", "_first")

    def __init__(self) -> None:
        self.count = 0
        self._first: list[tuple[TopicPartition, int, int]] = []

    def add(self, tp: TopicPartition, first: int, second: int) -> None:
        self.count += 1
        if self.count <= 10:
            self._first.append((tp, first, second))

    def __str__(self) -> str:
        return ", ".join(f"({tp}, {a}, {b})" for tp, a, b in self._first) + (", ..." if self.count > 10 else "")


def _answer_now(result: FetchPartitionResponse) -> bool:
    """A partition's result that completes a fetch whatever its size: an error, or a diverging epoch."""
    return result.error_code != errors.NONE.code or result.diverging_epoch != UNDEFINED_EPOCH


class ReplicaManager:
    def __init__(self, config: BrokerConfig, zk: KafkaZkClient, transport: Transport, log_manager: LogManager,
                 metadata_cache: MetadataCache, gate: PauseGate, broker_epoch: Callable[[], int]) -> None:
        self.config = config
        self.broker_id = config.broker_id
        self.zk = zk
        self.log_manager = log_manager
        self.metadata_cache = metadata_cache
        self.gate = gate
        self.all_partitions: dict[TopicPartition, Partition] = {}
        self.replica_fetcher_manager = ReplicaFetcherManager(self.broker_id, broker_epoch, config, transport, gate,
                                                             self.get_partition)
        self._lag_time_max_ms: int = config["replica.lag.time.max.ms"]
        self._isr_changes: set[TopicPartition] = set()
        self._isr_changed = trio.Event()
        self.delayed_timer = Timer()  # the deadlines of parked produces and fetches
        # the followers' incremental fetch sessions on this leader
        self.fetch_sessions = FetchSessionCache(on_leave=self._lag_possible_in, hosted=self._hosted_key)
        # The leader partitions the ISR tick must look at (Partition.needs_lag_check); a dict for a reproducible
        # order. A quiet cluster's tick then costs what lags, not what it hosts.
        self._lag_checks: dict[Partition, None] = {}
        # bound once: every hosted partition keeps both, and a bound method made per partition is 64 bytes each
        self._on_isr_change = self.record_isr_change
        self._on_lag_possible = self._lag_possible

    def startup(self, nursery: trio.Nursery) -> None:
        self.replica_fetcher_manager.startup(nursery)
        nursery.start_soon(self.delayed_timer.run)
        nursery.start_soon(self._isr_expiration_loop)
        nursery.start_soon(self._isr_change_propagation_loop)
        nursery.start_soon(self._producer_expiration_loop)

    # -- partitions -----------------------------------------------------------------------------------------------

    def update_topic_configs(self) -> None:
        """Re-read the config of every hosted topic (after a `/config/changes` notification)."""
        configs: dict[str, TopicConfig] = {}
        for tp, partition in self.all_partitions.items():
            if tp.topic not in configs:
                configs[tp.topic] = TopicConfig.for_broker(self.zk.get_topic_config(tp.topic), self.config)
            partition.update_topic_config(configs[tp.topic])

    def _hosted_key(self, tp: TopicPartition) -> TopicPartition:
        """The TopicPartition this broker's partition is keyed by, equal to `tp`; `tp` itself if it hosts none."""
        partition = self.all_partitions.get(tp)
        return tp if partition is None else partition.topic_partition

    def get_partition(self, tp: TopicPartition) -> Partition | None:
        return self.all_partitions.get(tp)

    async def read_new_topic_configs(self, request: LeaderAndIsrRequest) -> dict[str, TopicConfig]:
        """The config of each topic of which `request` names a partition this broker does not host yet, read once a
        topic, so its new partitions share one (read-only) copy. Read before anything changes and held while the
        broker is cut off from the service, as Kafka's ZooKeeper reads wait for the link: a short cut delays a
        LeaderAndIsr, where failing it would leave the partition unhosted, as no controller resends it."""
        def read() -> dict[str, TopicConfig]:
            hosted = self.all_partitions
            topics = {state.topic for state in request.partition_states if (state.topic, state.partition) not in hosted}
            return {topic: TopicConfig.for_broker(self.zk.get_topic_config(topic), self.config) for topic in topics}
        return await self.zk.when_reachable(read)

    def get_or_create_partition(self, tp: TopicPartition, topic_configs: Mapping[str, TopicConfig],
                                created_ms: int) -> Partition:
        """The hosted partition, created if new with its topic's config from `topic_configs` (and, if new to the
        broker's logs, a log created at `created_ms`)."""
        partition = self.all_partitions.get(tp)
        if partition is None:
            partition = Partition(tp, self.broker_id, self.log_manager, topic_configs[tp.topic], self.zk,
                                  self._on_isr_change, self.fetch_sessions, self._on_lag_possible, created_ms)
            self.all_partitions[tp] = partition
        return partition

    def _get_partition_or_error(self, tp: TopicPartition) -> Partition:
        partition = self.all_partitions.get(tp)
        if partition is not None:
            return partition
        if self.metadata_cache.contains_partition(tp):
            raise NotLeaderOrFollowerError(f"broker {self.broker_id} does not host {tp}")
        raise UnknownTopicOrPartitionError(f"unknown partition {tp}")

    def _leader_partition(self, tp: TopicPartition, current_leader_epoch: int = -1) -> Partition:
        partition = self._get_partition_or_error(tp)
        partition.check_leader_epoch(current_leader_epoch)
        partition.ensure_leader()
        return partition

    # -- controller requests --------------------------------------------------------------------------------------

    def become_leader_or_follower(self, correlation_id: int, request: LeaderAndIsrRequest,
                                  topic_configs: Mapping[str, TopicConfig]) -> LeaderAndIsrResponse:
        """Seed 000's becomeLeaderOrFollower, once KafkaApis has fenced the request's controller and broker epochs
        and read the configs of its new topics (`read_new_topic_configs`): each partition's leader epoch must be
        newer than ours, then leaders and followers are made."""
        results: list[tuple[str, int, int]] = []
        accepted: dict[Partition, LeaderAndIsrPartitionState] = {}
        fenced = _FewNamed()  # a new controller resends every partition's state, all at the epoch we have
        now = now_ms()  # the creation time of every log this request creates
        for state in request.partition_states:
            tp = TopicPartition(state.topic, state.partition)
            current = self.all_partitions.get(tp)
            if current is not None and state.leader_epoch <= current.leader_epoch:
                fenced.add(tp, state.leader_epoch, current.leader_epoch)
                error = errors.FENCED_LEADER_EPOCH
            elif self.broker_id not in state.replicas:
                error = errors.UNKNOWN_TOPIC_OR_PARTITION
            else:
                if state.is_new and current is None and self.log_manager.get_log(tp) is not None:
                    # The controller has just created this partition, so no replica of it can hold data yet:
                    # a log here belongs to an earlier topic of the same name, left behind when this broker was
                    # down as its replica was moved away or deleted. Kept, it would give the new topic old offsets.
                    log.warning("broker %d: deleting a stray log of %s before hosting the new partition",
                                self.broker_id, tp)
                    self.log_manager.delete_log(tp)
                accepted[self.get_or_create_partition(tp, topic_configs, now)] = state
                error = errors.NONE
            results.append((state.topic, state.partition, error.code))
        if fenced.count:
            log.info("broker %d: ignoring LeaderAndIsr for %d partition(s) whose leader epoch is not newer than ours "
                     "(partition, epoch sent, current): %s", self.broker_id, fenced.count, fenced)
        leaders = {p: s for p, s in accepted.items() if s.leader == self.broker_id}
        followers = {p: s for p, s in accepted.items() if s.leader != self.broker_id}
        if leaders:
            self.make_leaders(leaders)
        if followers:
            self.make_followers(followers, request.live_leaders)
        self.replica_fetcher_manager.shutdown_idle_fetchers()
        log.debug("broker %d: LeaderAndIsr %d applied: %d leaders, %d followers", self.broker_id, correlation_id,
                  len(leaders), len(followers))
        return LeaderAndIsrResponse(errors.NONE.code, results)

    def make_leaders(self, partition_states: dict[Partition, LeaderAndIsrPartitionState]) -> None:
        self.replica_fetcher_manager.remove_fetcher_for_partitions(p.topic_partition for p in partition_states)
        now = now_ms()
        for partition, state in partition_states.items():
            partition.make_leader(state, now)

    def make_followers(self, partition_states: dict[Partition, LeaderAndIsrPartitionState],
                       live_leaders: Sequence[LiveBroker]) -> None:
        """Every accepted state is a new leader epoch, so every follower truncates by epoch again (KAFKA-7164).

        The truncation itself is the fetcher's first step for a newly added partition. As seed 000's
        makeFollowers does, a partition whose new leader is not alive is left as it was, leader epoch included:
        recorded without a fetcher, the epoch would make the controller's next LeaderAndIsr for it (the same
        epoch, once that leader is back) look stale, and the follower would never fetch again.
        """
        live_ids = {broker.id for broker in live_leaders}
        following = {}
        # leader -1: partitions offline, their last in-sync replica dead, or for a moment on a controller failover,
        # which takes a dead broker's replicas out of the ISRs before it elects (Kafka's ReplicaStateMachine.startup)
        leaderless = _FewNamed()
        for partition, state in partition_states.items():
            if state.leader in live_ids:
                partition.make_follower(state)
                following[partition] = state
            else:
                leaderless.add(partition.topic_partition, state.leader, state.leader_epoch)
        if leaderless.count:
            log.warning("broker %d: not following the leader of %d partition(s), which is not alive (partition, "
                        "leader, epoch): %s", self.broker_id, leaderless.count, leaderless)
        self.replica_fetcher_manager.add_fetcher_for_partitions({  # moved from any fetcher they were in
            partition.topic_partition: (state.leader, partition.log.log_end_offset)
            for partition, state in following.items()})

    def maybe_update_metadata_cache(self, correlation_id: int, request: UpdateMetadataRequest) -> list[TopicPartition]:
        return self.metadata_cache.update_metadata(correlation_id, request)

    def stop_replicas(self, request: StopReplicaRequest) -> StopReplicaResponse:
        results = []
        stopping = []
        for stop in request.partitions:
            tp = TopicPartition(stop.topic, stop.partition)
            partition = self.all_partitions.get(tp)
            if partition is not None and 0 <= stop.leader_epoch < partition.leader_epoch:
                results.append(PartitionError(stop.topic, stop.partition, errors.FENCED_LEADER_EPOCH.code))
            else:
                stopping.append((tp, stop.delete_partition))
                results.append(PartitionError(stop.topic, stop.partition, errors.NONE.code))
        self.replica_fetcher_manager.remove_fetcher_for_partitions(tp for tp, _ in stopping)
        for tp, delete in stopping:
            if delete:
                self.delete_replica(tp)
        self.replica_fetcher_manager.shutdown_idle_fetchers()
        return StopReplicaResponse(errors.NONE.code, results)

    def delete_replica(self, tp: TopicPartition) -> None:
        partition = self.all_partitions.pop(tp, None)
        if partition is not None:
            partition.delete()
        self.log_manager.delete_log(tp)

    # -- produce --------------------------------------------------------------------------------------------------

    async def append_records(self, timeout_ms: int, required_acks: int,
                             entries: Sequence[ProducePartitionData]) -> list[ProducePartitionResponse]:
        """Append to each partition's leader log; with acks=-1, answer once the HW passes every batch."""
        if required_acks not in (-1, 0, 1):
            return [ProducePartitionResponse(e.topic, e.partition, errors.INVALID_REQUIRED_ACKS.code,
                                             error_message=f"acks must be -1, 0 or 1, not {required_acks}")
                    for e in entries]
        responses = []
        delayed = []
        for entry in entries:
            tp = TopicPartition(entry.topic, entry.partition)
            try:
                partition = self._get_partition_or_error(tp)
                base_offset, end_offset, log_append_time = partition.append_records_to_leader(entry.batches,
                                                                                               required_acks)
            except Exception as exc:
                code, message = _error_of(exc, f"append to {tp}")
                responses.append(ProducePartitionResponse(entry.topic, entry.partition, code, error_message=message))
                continue
            response = ProducePartitionResponse(entry.topic, entry.partition, errors.NONE.code,
                                                base_offset=base_offset, log_append_time=log_append_time,
                                                log_start_offset=partition.log.log_start_offset)
            responses.append(response)
            if required_acks == -1:
                delayed.append((response, partition.delay_produce(end_offset)))
        if delayed:
            await await_produce([operation for _, operation in delayed],
                                trio.current_time() + max(timeout_ms, 0) / 1000, self.delayed_timer)
            for response, operation in delayed:
                if operation.error is not errors.NONE:
                    response.error_code = operation.error.code
                    response.error_message = operation.error.description
        return responses

    # -- fetch ----------------------------------------------------------------------------------------------------

    async def fetch_messages(self, request: FetchRequest, hurry: Hurry | None = None) -> FetchResponse:
        """Read now; if there is less than min_bytes and no error, park until there is or max_wait passes.

        A follower in a session parks only until its sender hurries (`Hurry`): it has partitions to add."""
        from_follower = request.replica_id >= 0
        if from_follower and request.session_epoch != SESSIONLESS_EPOCH:
            return await self._fetch_in_session(request, hurry)
        results, readable, failed = self._read_from_local_log(request, from_follower, record_follower_fetch=True)
        if request.max_wait_ms <= 0 or self._fetch_complete(request.min_bytes, request.partitions, results, readable,
                                                            failed) \
                or not request.partitions:
            return FetchResponse(errors.NONE.code, results)
        watched = [self.all_partitions[TopicPartition(p.topic, p.partition)] for p in request.partitions]
        watchers = [p.log_end_offset_watchers if from_follower else p.high_watermark_watchers for p in watched]
        latest: list[list[FetchPartitionResponse]] = []

        def ready() -> bool:  # re-reads, as Kafka's DelayedFetch does, without counting the follower's fetch again
            results, readable, failed = self._read_from_local_log(request, from_follower)
            if self._fetch_complete(request.min_bytes, request.partitions, results, readable, failed):
                latest.append(results)
                return True
            return False

        await await_fetch(watchers, trio.current_time() + request.max_wait_ms / 1000, self.delayed_timer, ready)
        if not latest:
            latest.append(self._read_from_local_log(request, from_follower)[0])
        return FetchResponse(errors.NONE.code, latest[0])

    async def _fetch_in_session(self, request: FetchRequest, hurry: Hurry | None) -> FetchResponse:
        """A follower's fetch in its session (server/fetch_session.py): only the partitions that changed on
        either side are read, and only those with news are answered."""
        sessions = self.fetch_sessions
        if request.session_id == NEW_SESSION_ID:
            session = sessions.open(request.replica_id)
        else:
            found = sessions.get(request.replica_id, request.session_id)
            if found is None:
                return FetchResponse(errors.FETCH_SESSION_ID_NOT_FOUND.code)
            session = found
            if request.session_epoch > session.responses:
                return FetchResponse(errors.INVALID_FETCH_SESSION_EPOCH.code)
            if request.session_epoch < session.responses:
                session.resend_all(request.session_epoch)
        sessions.apply(session, request.partitions, request.forgotten)
        session.last_fetch_ms = now_ms()
        results, readable, failed = self._read_session(session, request.max_bytes, record_follower_fetch=True)
        asked = [session.partitions[TopicPartition(r.topic, r.partition)] for r in results]
        wake = trio.Event()
        if request.max_wait_ms > 0 and not self._fetch_complete(request.min_bytes, asked, results, readable, failed) \
                and (hurry is None or hurry.park(wake)):
            session.wake = wake
            entry = self.delayed_timer.schedule(trio.current_time() + request.max_wait_ms / 1000, wake)
            try:
                await wake.wait()
            finally:
                self.delayed_timer.cancel(entry)
                session.wake = None
                if hurry is not None:
                    hurry.unpark()
            results = self._read_session(session, request.max_bytes)[0]
        self._answered(session, results)
        return FetchResponse(errors.NONE.code, results, session_id=session.id)

    def _read_session(self, session: FetchSession, max_bytes: int, record_follower_fetch: bool = False
                      ) -> tuple[list[FetchPartitionResponse], int, bool]:
        """The dirty partitions with news for the follower: data, an error, a new high watermark or log start.

        Not a partition whose leader epoch moved past the one the follower last named: that follower's own
        LeaderAndIsr is on its way (the controller sends one to every replica) and makes it name the new epoch.
        Fenced now, it would drop the partition from its session only to add it back, so a LeaderAndIsr over
        thousands of partitions that reached the leader first would cost each of them twice.
        """
        results = []
        total = 0
        failed = False
        replica_id = session.replica_id
        recorded_at = session.last_fetch_ms if record_follower_fetch else None
        partitions = self.all_partitions
        for tp in session.dirty:
            cached = session.partitions[tp]
            partition = partitions.get(tp)
            if partition is not None and 0 <= cached.current_leader_epoch < partition.leader_epoch:
                continue
            result = self._read_partition(cached, replica_id, recorded_at, max_bytes - total, total == 0)
            if _answer_now(result):
                failed = True
            elif not result.batches and result.high_watermark == cached.sent_high_watermark \
                    and result.log_start_offset == cached.sent_log_start_offset:
                continue
            total += sum(batch.size_in_bytes for batch in result.batches)
            results.append(result)
        return results, total, failed

    def _answered(self, session: FetchSession, results: list[FetchPartitionResponse]) -> None:
        """The response is leaving: remember what it says, and keep dirty only what still has news.

        That is a partition with records the follower does not have yet (it names its new position in the next
        fetch, or was left out when the response was full) or an error the follower has still to act on.
        """
        session.responses += 1
        for result in results:
            cached = session.partitions[TopicPartition(result.topic, result.partition)]
            cached.sent_high_watermark = result.high_watermark
            cached.sent_log_start_offset = result.log_start_offset
        clean = []
        for tp in session.dirty:
            cached = session.partitions[tp]
            partition = self.all_partitions.get(tp)
            if partition is not None and partition.is_leader and cached.fetch_offset >= partition.log_end_offset \
                    and cached.sent_high_watermark == partition.high_watermark \
                    and cached.sent_log_start_offset == partition.log.log_start_offset:
                clean.append(tp)
        for tp in clean:
            del session.dirty[tp]

    @staticmethod
    def _fetch_complete(min_bytes: int, partitions: Sequence[_Asked], results: list[FetchPartitionResponse],
                        readable: int, failed: bool) -> bool:
        """Kafka's DelayedFetch completion (min_bytes read, an error or a diverging epoch: `failed`), and one more
        for followers: a leader log
        start beyond the one the follower reported. A DeleteRecords waits for the followers to move theirs, and
        they learn it from a fetch response; parked for replica.fetch.wait.max.ms, they would make it wait that
        long. Consumers report no log start (-1)."""
        return readable >= min_bytes or failed or any(
            0 <= asked.log_start_offset < result.log_start_offset for asked, result in zip(partitions, results))

    def _read_from_local_log(self, request: FetchRequest, from_follower: bool, record_follower_fetch: bool = False
                             ) -> tuple[list[FetchPartitionResponse], int, bool]:
        """(responses, bytes read, whether any partition failed); no record is touched, only whole batches.

        A follower reads up to the log end offset, a consumer up to the high watermark. Only the first read of a
        follower's fetch records where the follower is (`record_follower_fetch`), as in Kafka.
        """
        follower_id = request.replica_id if from_follower else None
        recorded_at = now_ms() if from_follower and record_follower_fetch else None
        results = []
        total = 0
        failed = False
        for fetch in request.partitions:
            budget = request.max_bytes - total
            result = self._read_partition(fetch, follower_id, recorded_at, budget, total == 0)
            total += sum(batch.size_in_bytes for batch in result.batches)
            failed = failed or _answer_now(result)
            results.append(result)
        return results, total, failed

    def _read_partition(self, fetch: _Asked, follower_id: int | None, recorded_at: int | None, budget: int,
                        min_one_batch: bool) -> FetchPartitionResponse:
        """One partition's read; `recorded_at`: the time of the follower's fetch, to record where it is."""
        tp = TopicPartition(fetch.topic, fetch.partition)
        try:
            partition = self._leader_partition(tp, fetch.current_leader_epoch)
            partition_log = partition.log
            if fetch.last_fetched_epoch >= 0:  # a negative epoch names none, as Kafka's FetchRequest reads it
                diverging = _diverging_epoch(partition, fetch)
                if diverging is not None:
                    return FetchPartitionResponse(fetch.topic, fetch.partition, errors.NONE.code,
                                                  high_watermark=partition.high_watermark,
                                                  last_stable_offset=partition.high_watermark,
                                                  log_start_offset=partition_log.log_start_offset,
                                                  diverging_epoch=diverging[0], diverging_end_offset=diverging[1])
            if not partition_log.log_start_offset <= fetch.fetch_offset <= partition_log.log_end_offset:
                raise OffsetOutOfRangeError(
                    f"fetch offset {fetch.fetch_offset} of {tp} is outside [{partition_log.log_start_offset}, "
                    f"{partition_log.log_end_offset}]")
            if recorded_at is not None:
                assert follower_id is not None
                partition.update_follower_fetch_state(follower_id, fetch.fetch_offset, fetch.log_start_offset,
                                                      recorded_at)
            bound = partition_log.log_end_offset if follower_id is not None else partition.high_watermark
            max_bytes = min(fetch.partition_max_bytes, budget)
            batches = [] if fetch.fetch_offset >= bound or (max_bytes <= 0 and not min_one_batch) else \
                partition_log.read(fetch.fetch_offset, max_bytes, max_offset=bound, min_one_batch=min_one_batch)
        except Exception as exc:
            code, message = _error_of(exc, f"fetch from {tp}")
            found = self.all_partitions.get(tp)
            return FetchPartitionResponse(fetch.topic, fetch.partition, code,
                                          high_watermark=found.high_watermark if found is not None else -1,
                                          log_start_offset=found.log.log_start_offset if found is not None else -1,
                                          error_message=message)
        return FetchPartitionResponse(fetch.topic, fetch.partition, errors.NONE.code,
                                      high_watermark=partition.high_watermark,
                                      last_stable_offset=partition.high_watermark,
                                      log_start_offset=partition_log.log_start_offset, batches=batches)

    # -- delete records -------------------------------------------------------------------------------------------

    async def delete_records(self, timeout_ms: int, entries: Sequence[DeleteRecordsPartition]
                             ) -> list[DeleteRecordsPartitionResult]:
        """Kafka's deleteRecords with its DelayedDeleteRecords: each partition's leader moves its log start
        offset, then the answer waits until every replica on a live broker, in the ISR or not, has moved its own
        as far (the low watermark), which the followers do from their next fetch response. Only then is the
        deletion safe from a leader change, an unclean one too. A partition still short of it after `timeout_ms`
        answers REQUEST_TIMED_OUT with the low watermark reached; the leader's log start has moved all the same,
        as in Kafka. A broker that leaves the metadata's live brokers stops holding the answer at once.
        """
        results = []
        pending: list[tuple[DeleteRecordsPartitionResult, Partition, int]] = []
        alive = self.metadata_cache.has_alive_broker
        for entry in entries:
            tp = TopicPartition(entry.topic, entry.partition)
            try:
                partition = self._leader_partition(tp)
                required = partition.delete_records_on_leader(entry.offset)
            except Exception as exc:
                code, message = _error_of(exc, f"delete records of {tp}")
                results.append(DeleteRecordsPartitionResult(entry.topic, entry.partition, code, error_message=message))
                continue
            result = DeleteRecordsPartitionResult(entry.topic, entry.partition, errors.NONE.code,
                                                  partition.low_watermark(alive))
            results.append(result)
            if result.low_watermark < required:
                pending.append((result, partition, required))

        def ready() -> bool:
            return all(not partition.is_leader or partition.low_watermark(alive) >= required
                       for _, partition, required in pending)

        if pending and timeout_ms > 0 and not ready():
            await await_fetch([self.metadata_cache.alive_brokers_watchers,
                               *(partition.low_watermark_watchers for _, partition, _ in pending)],
                              trio.current_time() + timeout_ms / 1000, self.delayed_timer, ready)
        for result, partition, required in pending:
            if not partition.is_leader:
                result.error_code = errors.NOT_LEADER_OR_FOLLOWER.code
                result.error_message = (f"broker {self.broker_id} stopped leading {partition.topic_partition} before "
                                        f"its replicas deleted the records below {required}")
                continue
            result.low_watermark = partition.low_watermark(alive)
            if result.low_watermark < required:
                log_starts = partition.follower_log_start_offsets()
                lagging = sorted(replica for replica in partition.assigned_replicas
                                 if replica != self.broker_id and alive(replica)
                                 and log_starts.get(replica, -1) < required)
                result.error_code = errors.REQUEST_TIMED_OUT.code
                result.error_message = (f"the log start of {partition.topic_partition} is {required} on the leader, "
                                        f"but the replicas on live brokers {lagging} had not moved theirs within "
                                        f"{timeout_ms} ms")
        return results

    # -- offsets --------------------------------------------------------------------------------------------------

    def fetch_offsets(self, request: ListOffsetsRequest) -> ListOffsetsResponse:
        """Earliest, latest or by timestamp. Consumers see only up to the HW; followers up to the LEO.

        A partition asked about twice is INVALID_REQUEST each time, as in Kafka: the two questions may differ, and
        the client could not tell the answers apart."""
        results = []
        counts = Counter((asked.topic, asked.partition) for asked in request.partitions)
        for asked in request.partitions:
            tp = TopicPartition(asked.topic, asked.partition)
            try:
                if counts[tp] > 1:
                    raise errors.InvalidRequestError(f"{tp} is named more than once in the request")
                partition = self._leader_partition(tp, asked.current_leader_epoch)
                partition_log = partition.log
                last_fetchable = partition_log.log_end_offset if request.replica_id >= 0 else partition.high_watermark
                # KIP-207: a new leader's HW may trail its predecessor's until its followers catch up; a client told
                # it would see the committed end move backwards.
                catching_up = request.replica_id < 0 and partition.high_watermark < partition.leader_epoch_start_offset
                timestamp = -1
                if asked.timestamp == EARLIEST_TIMESTAMP:
                    offset = partition_log.log_start_offset
                    epoch = partition_log.leader_epoch_cache.epoch_for_offset(offset)
                elif asked.timestamp == LATEST_TIMESTAMP:
                    if catching_up:
                        raise _offset_not_available(partition)
                    offset, epoch = last_fetchable, partition.leader_epoch
                else:  # as Kafka's fetchOffsetForTimestamp: a record found below what is readable stands
                    found = partition_log.offset_of_max_timestamp() if asked.timestamp == MAX_TIMESTAMP \
                        else partition_log.fetch_offset_by_timestamp(asked.timestamp)
                    if found is not None and found[0] < last_fetchable:
                        offset, timestamp = found
                        epoch = partition_log.leader_epoch_cache.epoch_for_offset(offset)
                    elif catching_up:
                        raise _offset_not_available(partition)
                    else:
                        offset, epoch = -1, -1
            except Exception as exc:
                code, message = _error_of(exc, f"list offsets of {tp}")
                results.append(ListOffsetsPartitionResponse(asked.topic, asked.partition, code, error_message=message))
                continue
            results.append(ListOffsetsPartitionResponse(asked.topic, asked.partition, errors.NONE.code, timestamp,
                                                        offset, epoch))
        return ListOffsetsResponse(results)

    def describe_log_dirs(self, request: DescribeLogDirsRequest) -> DescribeLogDirsResponse:
        """Kafka's describeLogDirs for the broker's one log directory, which is memory: each replica it holds (of
        those asked), with its size and its log end's lag behind the high watermark, which for a current replica
        is 0 (-1 for a log whose partition is not online here, as Kafka answers)."""
        wanted = request.topic_partitions
        asked = None if wanted is None else {TopicPartition(topic, partition) for topic, partition in wanted}
        replicas = [LogDirReplica(tp.topic, tp.partition, partition_log.size_in_bytes,
                                  0 if tp in self.all_partitions else -1)
                    for tp, partition_log in sorted(self.log_manager.logs.items())
                    if asked is None or tp in asked]
        return DescribeLogDirsResponse(errors.NONE.code, self.log_manager.log_dir, replicas)

    def last_offset_for_leader_epoch(self, request: OffsetsForLeaderEpochRequest) -> OffsetsForLeaderEpochResponse:
        results = []
        for asked in request.partitions:
            tp = TopicPartition(asked.topic, asked.partition)
            try:
                partition = self._leader_partition(tp, asked.current_leader_epoch)
                epoch, end_offset = partition.log.leader_epoch_cache.end_offset_for(
                    asked.leader_epoch, partition.log.log_end_offset)
            except Exception as exc:
                results.append(EpochEndOffset(asked.topic, asked.partition, _error_of(exc, f"epoch end of {tp}")[0]))
                continue
            results.append(EpochEndOffset(asked.topic, asked.partition, errors.NONE.code, epoch, end_offset))
        return OffsetsForLeaderEpochResponse(results)

    # -- ISR upkeep -----------------------------------------------------------------------------------------------

    def record_isr_change(self, tp: TopicPartition) -> None:
        self._isr_changes.add(tp)
        self._isr_changed.set()

    def _lag_possible(self, partition: Partition) -> None:
        self._lag_checks[partition] = None

    def _lag_possible_in(self, tp: TopicPartition) -> None:
        partition = self.all_partitions.get(tp)
        if partition is not None:
            self._lag_checks[partition] = None

    async def _isr_expiration_loop(self) -> None:
        while True:
            await trio.sleep(self._lag_time_max_ms / 2000)
            await self.gate.checkpoint()
            self.shrink_isrs(now_ms())

    def shrink_isrs(self, now: int) -> None:
        """Kafka's maybeShrinkIsr over every leader partition, but only the ones that can change are visited: a
        partition whose followers are all in sync in a live session (`Partition.needs_lag_check`) cannot shrink
        until a session falls silent for `replica.lag.time.max.ms`, so such sessions send their partitions back
        to be checked."""
        max_lag_ms = self._lag_time_max_ms
        for session in self.fetch_sessions.silent_since(now - max_lag_ms):
            for tp in session.partitions:
                self._lag_possible_in(tp)
        for partition in list(self._lag_checks):
            partition.maybe_shrink_isr(now, max_lag_ms)
            if not partition.needs_lag_check():
                del self._lag_checks[partition]

    async def _producer_expiration_loop(self) -> None:
        """Kafka's removeExpiredProducers, every producer.id.expiration.check.interval.ms: each replica forgets the
        idempotent producers whose last batch is producer.id.expiration.ms old. Without it, every producer a
        long-lived cluster ever saw stays in every replica it wrote to."""
        while True:
            await trio.sleep(self.config["producer.id.expiration.check.interval.ms"] / 1000)
            await self.gate.checkpoint()
            now, expiration_ms = now_ms(), self.config["producer.id.expiration.ms"]
            for partition in self.all_partitions.values():
                partition.remove_expired_producers(now, expiration_ms)

    async def _isr_change_propagation_loop(self) -> None:
        """Batch ISR changes into one notification per interval, so a burst does not flood the controller."""
        while True:
            await self._isr_changed.wait()
            await trio.sleep(ISR_CHANGE_PROPAGATION_INTERVAL_MS / 1000)
            await self.gate.checkpoint()
            changes, self._isr_changes = self._isr_changes, set()
            self._isr_changed = trio.Event()
            try:
                self.zk.create_isr_change_notification(sorted(changes))
            except (SessionExpiredError, ConnectionLossError) as exc:
                log.warning("broker %d: ISR change notification failed, will retry: %s", self.broker_id, exc)
                self._isr_changes |= changes
                self._isr_changed.set()
