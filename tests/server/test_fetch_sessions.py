"""Incremental fetch sessions (KIP-227) between followers and leaders, on the real cluster and the mock clock.

Each test watches the fetches a leader receives (a spy on its ReplicaManager.fetch_messages) and asserts what a
session promises: after the first, full fetch a follower names only what changed, the leader reads only the
partitions that changed and answers only those with news, a leadership change elsewhere leaves every other
partition's position and the session itself alone, and a session that is lost (the leader forgot it, the
follower restarted) is replaced by a full fetch without losing or repeating a record.
"""

from __future__ import annotations

from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Any

import pytest
import trio

from kafkalite.cluster import Cluster
from kafkalite.common.errors import UNKNOWN_LEADER_EPOCH
from kafkalite.client import Admin
from kafkalite.common.records import Record, RecordBatch
from kafkalite.common.types import TopicPartition
from kafkalite.network.requests import FetchRequest, FetchResponse
from kafkalite.server.partition import Partition
from kafkalite.server.replica_manager import ReplicaManager

CONFIG = {"zookeeper.session.timeout.ms": 6000, "replica.lag.time.max.ms": 10000,
          "auto.leader.rebalance.enable": False}
PARTITIONS = 12


@dataclass
class Fetch:
    replica_id: int
    session_id: int
    session_epoch: int
    named: list[TopicPartition]
    forgotten: list[TopicPartition]
    answered: list[TopicPartition] = field(default_factory=list)
    errors: dict[TopicPartition, int] = field(default_factory=dict)  # the answered partitions' error codes
    error_code: int = 0
    reads: int = 0
    returned: bool = False  # answered; False while parked, and for good if the follower abandoned it


class FetchSpy:
    """Every follower fetch a broker answered as leader: what it named, what the leader read and answered."""

    def __init__(self, cluster: Cluster, leader: int) -> None:
        self.fetches: list[Fetch] = []
        self.sent: list[Fetch] = []
        manager: ReplicaManager = cluster.broker(leader).replica_manager
        fetch_messages, read_partition = manager.fetch_messages, manager._read_partition
        current: list[Fetch] = []

        async def spy_fetch(request: FetchRequest, *args: Any) -> FetchResponse:
            fetch = Fetch(request.replica_id, request.session_id, request.session_epoch,
                          [TopicPartition(p.topic, p.partition) for p in request.partitions],
                          [TopicPartition(p.topic, p.partition) for p in request.forgotten])
            current.append(fetch)
            if request.replica_id >= 0:
                self.sent.append(fetch)
            try:
                response = await fetch_messages(request, *args)
            finally:
                current.remove(fetch)
            fetch.error_code = response.error_code
            fetch.answered = [TopicPartition(p.topic, p.partition) for p in response.partitions]
            fetch.errors = {TopicPartition(p.topic, p.partition): p.error_code for p in response.partitions}
            fetch.returned = True
            if request.replica_id >= 0:
                self.fetches.append(fetch)
            return response

        def spy_read(*args: Any, **kwargs: Any) -> Any:
            for fetch in current:
                fetch.reads += 1
            return read_partition(*args, **kwargs)

        manager.fetch_messages = spy_fetch  # type: ignore[method-assign]
        manager._read_partition = spy_read  # type: ignore[method-assign]

    def from_follower(self, replica_id: int) -> list[Fetch]:
        """The follower's fetches answered since the spy was set or cleared, in the order of their answers."""
        return [f for f in self.fetches if f.replica_id == replica_id]

    def sent_by(self, replica_id: int) -> list[Fetch]:
        """Every fetch the follower sent since then, answered or not (one parked now, or one it abandoned)."""
        return [f for f in self.sent if f.replica_id == replica_id]

    def clear(self) -> None:
        self.fetches.clear()
        self.sent.clear()


async def topic_led_by_one_broker(cluster: Cluster) -> tuple[int, int]:
    """A topic whose partitions one broker leads, followed by one other broker: (leader, follower)."""
    await cluster.create_topic("t", PARTITIONS, 2)
    leader = cluster.leader_for("t", 0)
    follower = next(r for r in cluster.partition_state("t", 0).isr if r != leader)
    targets = {TopicPartition("t", p): [leader, follower] for p in range(PARTITIONS)}
    await cluster.reassign_partitions(targets)
    await cluster.elect_preferred_leaders([TopicPartition("t", p) for p in range(PARTITIONS)])
    await cluster.wait_until(lambda: all(cluster.leader_for("t", p) == leader and
                                         len(cluster.partition_state("t", p).isr) == 2 for p in range(PARTITIONS)))
    await trio.sleep(5)  # the moves settle: every partition's new position named, every high watermark answered
    return leader, follower


async def produce(cluster: Cluster, partition: int, value: bytes) -> int:
    return await cluster.produce("t", partition, [Record(None, value)])


async def test_after_the_first_fetch_a_follower_names_only_what_moved_and_the_leader_reads_only_that(
        autojump_clock: Any) -> None:
    async with Cluster(brokers=3, config=CONFIG, seed=1) as cluster:
        leader, follower = await topic_led_by_one_broker(cluster)
        spy = FetchSpy(cluster, leader)
        await trio.sleep(5)  # the moves settle
        spy.clear()
        await trio.sleep(5)  # quiet: parked fetches that come back empty
        quiet = spy.from_follower(follower)
        assert quiet and all(f.session_id > 0 and f.named == [] and f.answered == [] for f in quiet)
        assert all(f.reads == 0 for f in quiet)
        spy.clear()
        assert await produce(cluster, 3, b"x") == 0  # acks=all: the follower fetched it
        fetches = spy.from_follower(follower)
        tp = TopicPartition("t", 3)
        assert any(tp in f.answered for f in fetches)  # the record, then the high watermark that covers it
        assert all(f.named in ([], [tp]) and set(f.answered) <= {tp} for f in fetches)
        assert all(f.reads <= 2 for f in fetches)  # that partition only: read before parking and on waking
        await cluster.wait_until(lambda: cluster.broker(follower).replica_manager.get_partition(tp).high_watermark
                                 == 1)


async def test_a_leadership_change_elsewhere_leaves_the_session_and_every_other_position_alone(
        autojump_clock: Any) -> None:
    async with Cluster(brokers=3, config=CONFIG, seed=2) as cluster:
        leader, follower = await topic_led_by_one_broker(cluster)
        for p in range(PARTITIONS):
            await produce(cluster, p, b"a%d" % p)
        await trio.sleep(2)  # the follower's fetches name its new positions, and the leader answers the HWs
        fetcher_manager = cluster.broker(follower).replica_manager.replica_fetcher_manager
        states = {p: fetcher_manager.fetch_state(TopicPartition("t", p)) for p in range(PARTITIONS)}
        spy = FetchSpy(cluster, leader)
        moved = TopicPartition("t", 5)
        await cluster.reassign_partitions({moved: [follower, leader]})
        assert await cluster.elect_preferred_leaders([moved])
        assert await cluster.wait_for_leader("t", 5) == follower
        await trio.sleep(2)
        assert all(fetcher_manager.fetch_state(TopicPartition("t", p)) is states[p]
                   for p in range(PARTITIONS) if p != 5)  # the same fetch states: no position was reset
        fetches = spy.from_follower(follower)
        assert fetches and all(f.session_id > 0 and f.session_epoch > 0 for f in fetches)  # no full fetch again
        assert all(set(f.named) <= {moved} for f in fetches)
        assert any(moved in f.forgotten for f in fetches)
        assert moved not in cluster.broker(leader).replica_manager.fetch_sessions.get(
            follower, fetches[-1].session_id).partitions
        assert await produce(cluster, 0, b"b") == 1 and await produce(cluster, 5, b"b") == 1


async def test_a_partition_added_mid_session_is_fetched_without_a_full_fetch(autojump_clock: Any) -> None:
    async with Cluster(brokers=3, config=CONFIG, seed=3) as cluster:
        leader, follower = await topic_led_by_one_broker(cluster)
        spy = FetchSpy(cluster, leader)
        await cluster.create_partitions("t", PARTITIONS + 1)
        added = TopicPartition("t", PARTITIONS)
        await cluster.reassign_partitions({added: [leader, follower]})
        await cluster.elect_preferred_leaders([added])
        assert await cluster.wait_for_leader("t", PARTITIONS) == leader
        await cluster.wait_until(lambda: len(cluster.partition_state("t", PARTITIONS).isr) == 2)
        assert await produce(cluster, PARTITIONS, b"new") == 0
        fetches = spy.from_follower(follower)
        assert any(added in f.named for f in fetches)
        assert all(f.session_id > 0 and len(f.named) <= 2 for f in fetches)  # the new one, and the one it moved


async def test_a_session_the_leader_forgot_is_replaced_by_a_full_fetch(autojump_clock: Any) -> None:
    async with Cluster(brokers=3, config=CONFIG, seed=4) as cluster:
        leader, follower = await topic_led_by_one_broker(cluster)
        for p in range(PARTITIONS):
            await produce(cluster, p, b"before")
        spy = FetchSpy(cluster, leader)
        sessions = cluster.broker(leader).replica_manager.fetch_sessions
        sessions.open(follower)  # as if the leader had evicted the follower's session: its id is unknown now
        for p in range(PARTITIONS):
            assert await produce(cluster, p, b"after") == 1  # acks=all: the follower fetches again
        fetches = spy.from_follower(follower)
        refused = [i for i, f in enumerate(fetches) if f.error_code != 0]
        assert refused, "the follower's next fetch names a session the leader no longer has"
        full = fetches[refused[0] + 1]
        assert full.session_id == 0 and len(full.named) == PARTITIONS
        follower_logs = cluster.broker(follower).replica_manager
        for p in range(PARTITIONS):
            log = follower_logs.get_partition(TopicPartition("t", p)).log
            assert [r.value for b in log.read(0, 1 << 20) for r in b.records()] == [b"before", b"after"]


async def test_a_response_lost_on_a_cut_link_is_sent_again_once_and_the_session_goes_quiet(
        autojump_clock: Any) -> None:
    """The leader counts the responses it built; a follower that lost one names an epoch one short, and the leader
    sends everything again. It then kept counting from its own number, so every later fetch looked one short
    too and was answered with every partition, read again, for as long as the link lived."""
    async with Cluster(brokers=3, config=CONFIG, seed=8) as cluster:
        leader, follower = await topic_led_by_one_broker(cluster)
        spy = FetchSpy(cluster, leader)
        await trio.sleep(5)
        assert spy.sent_by(follower) and not spy.sent_by(follower)[-1].returned  # a fetch parked at the leader
        cluster.partition_network([leader], [follower])
        await trio.sleep(1)  # the leader answers the parked fetch into the cut link
        assert spy.from_follower(follower)[-1].session_epoch > 0
        cluster.heal()
        await trio.sleep(5)
        assert any(len(f.answered) == PARTITIONS for f in spy.from_follower(follower))  # sent again
        spy.clear()
        await trio.sleep(5)
        quiet = spy.from_follower(follower)
        assert quiet and all(f.answered == [] and f.reads == 0 for f in quiet)


async def test_a_log_start_the_followers_own_retention_moved_reaches_the_leader(autojump_clock: Any) -> None:
    """A follower named a partition when a response moved its log start, not when its own retention pass did; a
    DeleteRecords up to below that log start then waited for a log start the leader never heard of."""
    async with Cluster(brokers=2, config=CONFIG, seed=9) as cluster:
        size = RecordBatch.from_records([Record(None, b"x")]).size_in_bytes
        await cluster.create_topic("r", 1, 2, {"segment.bytes": size, "retention.bytes": 0})  # a segment per batch
        tp = TopicPartition("r", 0)
        for _ in range(3):
            await cluster.produce("r", 0, [Record(None, b"x")], acks=-1)
        await trio.sleep(1)
        follower = next(b for b in cluster.live_broker_ids if b != cluster.leader_for("r", 0))
        follower_log = cluster.log_manager(follower).get_log(tp)
        assert follower_log.delete_old_segments(3) == 3  # its periodic pass, run before the leader's
        assert follower_log.log_start_offset == 3
        async with Admin(cluster) as admin:
            with trio.fail_after(5):
                assert await admin.delete_records({tp: 2}) == {tp: 2}


async def test_a_restarted_follower_opens_a_new_session_and_catches_up(autojump_clock: Any) -> None:
    async with Cluster(brokers=3, config=CONFIG, seed=5) as cluster:
        leader, follower = await topic_led_by_one_broker(cluster)
        await cluster.kill_broker(follower)
        await cluster.wait_until(lambda: all(len(cluster.partition_state("t", p).isr) == 1
                                             for p in range(PARTITIONS)), timeout=60)
        for p in range(PARTITIONS):
            await produce(cluster, p, b"while-down")
        spy = FetchSpy(cluster, leader)
        await cluster.restart_broker(follower)
        await cluster.wait_until(lambda: all(len(cluster.partition_state("t", p).isr) == 2
                                             for p in range(PARTITIONS)), timeout=60)
        for p in range(PARTITIONS):
            assert await produce(cluster, p, b"back") == 1
        fetches = spy.from_follower(follower)
        assert fetches[0].session_id == 0  # a new incarnation starts with a full fetch, then goes incremental
        opened = next(i for i, f in enumerate(fetches) if f.session_id > 0)
        assert all(f.session_id == fetches[opened].session_id for f in fetches[opened:])


async def test_a_caught_up_follower_rejoins_the_isr_after_a_failed_isr_write_with_no_new_records(
        autojump_clock: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Chaos seed 297: the leader's one attempt to readmit an idle, caught-up follower failed (its ISR write met a
    newer partition state), and as the follower's fetches named nothing, nothing tried again."""
    async with Cluster(brokers=3, config=CONFIG, seed=6) as cluster:
        leader, follower = await topic_led_by_one_broker(cluster)
        tp = TopicPartition("t", 0)
        await produce(cluster, 0, b"before")
        cluster.pause_broker(follower)
        await cluster.wait_until(lambda: follower not in cluster.partition_state("t", 0).isr, timeout=60)
        partition = cluster.broker(leader).replica_manager.get_partition(tp)
        update_isr = Partition._update_isr
        refused: list[AbstractSet[int]] = []

        def refuse_the_first_expansion(self: Partition, new_isr: AbstractSet[int]) -> bool:
            if self is partition and follower in new_isr and not refused:
                refused.append(new_isr)
                return False  # as when the partition state changed since the leader last read it
            return update_isr(self, new_isr)

        monkeypatch.setattr(Partition, "_update_isr", refuse_the_first_expansion)
        cluster.resume_broker(follower)
        await cluster.wait_until(lambda: follower in cluster.partition_state("t", 0).isr, timeout=30)
        assert refused and partition.log.log_end_offset == 1  # readmitted without a record written since


async def test_topics_created_back_to_back_keep_one_session_per_follower_link(autojump_clock: Any) -> None:
    """Each new partition makes its followers fetch it while their fetch is parked at the leader: answered at once,
    that fetch keeps the session going, and the next names only the new partition. Abandoned, it lost the session's
    id while opening (a full session again at every topic) and, later, every partition named since the last
    response (each fetch naming more)."""
    async with Cluster(brokers=3, config=CONFIG, seed=7) as cluster:
        spies = {broker: FetchSpy(cluster, broker) for broker in cluster.live_broker_ids}
        topics = [f"t{i}" for i in range(30)]
        for topic in topics:
            await cluster.create_topic(topic, 1, 3)
        while_creating = [f for spy in spies.values() for f in spy.sent if f.returned]
        assert while_creating and all(f.answered == [] for f in while_creating), \
            "a new, empty partition has nothing to tell its followers: the fetch that names it parks"
        for topic in topics:
            assert await cluster.produce(topic, 0, [Record(None, topic.encode())]) == 0  # acks=all: both followers
        for leader, spy in spies.items():
            led = {TopicPartition(topic, 0) for topic in topics if cluster.leader_for(topic, 0) == leader}
            for follower in cluster.live_broker_ids:
                if follower == leader:
                    continue
                fetches = spy.sent_by(follower)
                assert all(f.returned and f.error_code == 0 for f in fetches[:-1])  # the last one is parked now
                assert sum(f.session_id == 0 for f in fetches) == 1, "one session opened, and kept"
                session_ids = {f.session_id for f in fetches if f.session_id > 0}
                assert len(session_ids) == 1
                assert all(len(f.named) <= 2 for f in fetches[1:])  # what was just added or moved on, never a backlog
                session = cluster.broker(leader).replica_manager.fetch_sessions.get(follower, session_ids.pop())
                assert session is not None and set(session.partitions) == led


async def test_an_isr_change_under_the_same_leader_truncates_nothing_and_costs_one_named_fetch(
        autojump_clock: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A third replica's controlled shutdown bumps every partition's leader epoch, the leader unchanged. Each
    follower names each partition once with its new epoch and the epoch of its last record, which the leader
    checks and accepts: no truncation, no round of OffsetsForLeaderEpoch, no position reset, and no data lost."""
    async with Cluster(brokers=3, config=CONFIG, seed=8) as cluster:
        await cluster.create_topic("t", PARTITIONS, 3)
        leader, follower, third = cluster.live_broker_ids
        tps = [TopicPartition("t", p) for p in range(PARTITIONS)]
        await cluster.reassign_partitions({tp: [leader, follower, third] for tp in tps})
        await cluster.elect_preferred_leaders(tps)
        await cluster.wait_until(lambda: all(cluster.leader_for("t", p) == leader and
                                             len(cluster.partition_state("t", p).isr) == 3 for p in range(PARTITIONS)))
        await trio.sleep(5)  # the moves settle on every broker
        for p in range(PARTITIONS):
            await produce(cluster, p, b"a%d" % p)
        await trio.sleep(2)  # the follower's positions named, the high watermarks answered
        replicas = cluster.broker(follower).replica_manager
        epochs = {tp: replicas.get_partition(tp).leader_epoch for tp in tps}
        truncated: list[TopicPartition] = []
        truncate_to = Partition.truncate_to
        followed = {id(replicas.get_partition(tp)) for tp in tps}

        def spy_truncate(partition: Partition, offset: int) -> None:
            if id(partition) in followed:
                truncated.append(partition.topic_partition)
            truncate_to(partition, offset)

        monkeypatch.setattr(Partition, "truncate_to", spy_truncate)
        spy = FetchSpy(cluster, leader)
        await cluster.shutdown_broker(third)
        await cluster.wait_until(lambda: all(replicas.get_partition(tp).leader_epoch > epochs[tp] for tp in tps))
        for p in range(PARTITIONS):
            assert await produce(cluster, p, b"b%d" % p) == 1  # acks=all: the follower fetched it at once
        assert truncated == []
        fetches = spy.sent_by(follower)  # the last one parked now
        assert all(f.session_id > 0 for f in fetches)  # the same session, no full fetch
        assert not any(f.forgotten for f in fetches)  # none left the session, even in passing
        # The controller sends LeaderAndIsr to both brokers at once: a follower that hears of the new epoch before
        # the leader is answered UNKNOWN_LEADER_EPOCH and names the partition again, as Kafka's follower does
        early = [tp for f in fetches for tp in f.named if f.errors.get(tp) == UNKNOWN_LEADER_EPOCH.code]
        accepted = [tp for f in fetches for tp in f.named if f.errors.get(tp) != UNKNOWN_LEADER_EPOCH.code]
        assert sorted(accepted) == sorted(tps * 2), \
            "each partition accepted twice: with its new epoch, then at its position after the new record"
        assert len(set(early)) == len(early), "a follower ahead of its leader names the partition again once"
        for tp in tps:
            log = replicas.get_partition(tp).log
            assert [r.value for b in log.read(0, 1 << 20) for r in b.records()] == [b"a%d" % tp.partition,
                                                                                    b"b%d" % tp.partition]
