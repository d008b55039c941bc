"""Leaders, followers, acks=-1, the ISR and truncation by leader epoch, on real brokers."""

from __future__ import annotations

import logging
from collections.abc import Set as AbstractSet
from functools import partial
from typing import Any

import pytest
import trio
from trio.testing import MockClock

from kafkalite.common import errors
from kafkalite.common.clock import now_ms
from kafkalite.common.types import TopicPartition
from kafkalite.network.requests import FetchPartition, FetchPartitionResponse, FetchRequest, LeaderAndIsrRequest
from kafkalite.server.partition import Partition

from .conftest import Harness, batch

TP = TopicPartition("events", 0)
REPLICAS = [1, 2, 3]


async def test_become_leader_and_followers(harness: Harness, autojump_clock: MockClock) -> None:
    await harness.elect(TP, 1, REPLICAS, REPLICAS)
    leader = harness.partition(1, TP)
    assert leader.is_leader and leader.leader_epoch == 0 and leader.isr == {1, 2, 3}
    assert list(leader.assigned_replicas) == REPLICAS
    for follower_id in (2, 3):
        follower = harness.partition(follower_id, TP)
        assert not follower.is_leader and follower.leader_replica_id == 1 and follower.leader_epoch == 0
        assert harness.brokers[follower_id].replica_manager.replica_fetcher_manager.fetcher_source_ids() == [1]
    assert harness.brokers[1].replica_manager.replica_fetcher_manager.fetcher_source_ids() == []


async def test_acks_all_completes_only_when_followers_have_fetched(harness: Harness, autojump_clock: MockClock) -> None:
    await harness.elect(TP, 1, REPLICAS, REPLICAS)
    harness.gates[3].pause()
    done = trio.Event()
    results = []

    async def produce() -> None:
        results.append(await harness.produce(1, TP, batch("a", "b", "c"), batch("d")))
        done.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(produce)
        with trio.move_on_after(2):
            await done.wait()
        assert not done.is_set(), "acks=-1 answered before every ISR member had the records"
        leader = harness.partition(1, TP)
        assert leader.log.log_end_offset == 4 and leader.high_watermark == 0
        assert harness.partition(2, TP).log.log_end_offset == 4
        harness.gates[3].resume()
        await done.wait()
    assert results[0].error_code == 0 and results[0].base_offset == 0
    await harness.wait_replicated(TP, REPLICAS)
    for broker_id in REPLICAS:
        partition = harness.partition(broker_id, TP)
        assert (partition.log.log_end_offset, partition.high_watermark) == (4, 4)
        assert harness.batches(broker_id, TP) == harness.batches(1, TP)
    assert harness.partition(1, TP).follower_log_end_offsets() == {2: 4, 3: 4}
    assert await harness.consume(1, TP) == [b"a", b"b", b"c", b"d"]


async def test_not_enough_replicas_appends_nothing(harness: Harness, autojump_clock: MockClock) -> None:
    await harness.elect(TP, 1, [1], [1, 2], to=[1], config={"min.insync.replicas": "2"})
    result = await harness.produce(1, TP, batch("x"))
    assert result.error_code == errors.NOT_ENOUGH_REPLICAS.code
    assert harness.partition(1, TP).log.log_end_offset == 0
    acks_one = await harness.produce(1, TP, batch("y"), acks=1)
    assert acks_one.error_code == 0 and harness.partition(1, TP).log.log_end_offset == 1


async def test_isr_shrinks_when_a_follower_stalls_and_expands_when_it_catches_up(harness: Harness, autojump_clock: MockClock) -> None:
    await harness.elect(TP, 1, REPLICAS, REPLICAS)
    assert (await harness.produce(1, TP, batch("committed"))).error_code == 0
    leader = harness.partition(1, TP)
    harness.gates[3].pause()
    await harness.wait_until(lambda: leader.isr == {1, 2}, timeout=30)
    state = harness.zk.get_partition_state(TP)
    assert state is not None and state.leader_and_isr.isr == (1, 2)
    assert state.leader_and_isr.zk_version == leader.zk_version
    await harness.wait_until(lambda: bool(harness.zk.get_isr_change_notifications()), timeout=10)
    notified = [tp for name in harness.zk.get_isr_change_notifications()
                for tp in harness.zk.read_isr_change_notification(name)]
    assert TP in notified
    # With the stalled follower out of the ISR, acks=-1 completes without it.
    assert (await harness.produce(1, TP, batch("while-paused"))).error_code == 0
    assert leader.high_watermark == 2

    harness.gates[3].resume()
    await harness.wait_until(lambda: leader.isr == {1, 2, 3}, timeout=30)
    state = harness.zk.get_partition_state(TP)
    assert state is not None and state.leader_and_isr.isr == (1, 2, 3)
    await harness.wait_replicated(TP, REPLICAS)
    assert harness.batches(3, TP) == harness.batches(1, TP)


async def test_an_idle_partition_still_shrinks_its_isr_at_the_lag_limit(harness: Harness, autojump_clock: MockClock) -> None:
    """After a minute without records the ISR tick no longer visits the partition (every follower is caught up
    in a live fetch session); a follower that stops fetching still leaves the ISR once it has been silent for
    replica.lag.time.max.ms (10 s here), at the first tick after that (ticks come every 5 s), not before."""
    await harness.elect(TP, 1, REPLICAS, REPLICAS)
    assert (await harness.produce(1, TP, batch("a"))).error_code == 0
    await harness.wait_replicated(TP, REPLICAS)
    await trio.sleep(60)
    leader = harness.partition(1, TP)
    assert leader.isr == {1, 2, 3} and not leader.needs_lag_check()
    harness.gates[3].pause()  # its parked fetch (replica.fetch.wait.max.ms 500) was its last
    paused_at = trio.current_time()
    await harness.wait_until(lambda: leader.isr == {1, 2}, timeout=30)
    assert 10 - 0.5 < trio.current_time() - paused_at <= 10 + 5 + 0.01
    state = harness.zk.get_partition_state(TP)
    assert state is not None and state.leader_and_isr.isr == (1, 2)
    harness.gates[3].resume()
    await harness.wait_until(lambda: leader.isr == {1, 2, 3}, timeout=30)


async def test_isr_write_with_stale_version_keeps_the_old_isr(harness: Harness, autojump_clock: MockClock) -> None:
    await harness.elect(TP, 1, REPLICAS, REPLICAS)
    leader = harness.partition(1, TP)
    harness.write_state(TP, 1, REPLICAS)  # the controller moved on; its LeaderAndIsr has not arrived yet
    harness.gates[3].pause()
    await trio.sleep(30)
    assert leader.isr == {1, 2, 3}
    state = harness.zk.get_partition_state(TP)
    assert state is not None and state.leader_and_isr.isr == (1, 2, 3)


async def test_follower_truncates_divergent_records_to_the_leaders_epoch_end(harness: Harness, autojump_clock: MockClock) -> None:
    replicas = [1, 2]
    await harness.elect(TP, 1, replicas, replicas)
    assert (await harness.produce(1, TP, batch("a"))).error_code == 0
    await harness.wait_replicated(TP, replicas)
    harness.transport.partition([1], [2])
    # Uncommitted records on the old leader only.
    assert (await harness.produce(1, TP, batch("b1", "b2"), batch("c"), acks=1)).error_code == 0
    new_leader = await harness.elect(TP, 2, [2], replicas, to=[2])
    assert (await harness.produce(2, TP, batch("d1", "d2", "d3"), acks=1)).error_code == 0
    await harness.tell(TP, new_leader, replicas, [1])  # broker 1 hears late, and cannot reach the new leader
    assert harness.partition(1, TP).log.log_end_offset == 4  # not yet: it cannot reach the leader
    harness.transport.heal()
    await harness.wait_replicated(TP, replicas)
    assert harness.batches(1, TP) == harness.batches(2, TP)
    assert await harness.consume(2, TP) == [b"a", b"d1", b"d2", b"d3"]


async def test_a_fetch_from_a_diverged_log_is_answered_with_the_leaders_epoch_end_not_records(
        harness: Harness, autojump_clock: MockClock) -> None:
    """KIP-595's check on fetch, which replaced the follower's OffsetsForLeaderEpoch round: the leader answers a
    follower whose last fetched epoch it does not hold up to the fetch offset with where that epoch ends on it,
    sends no records and does not take the fetch offset as the follower's position."""
    replicas = [1, 2]
    await harness.elect(TP, 1, replicas, replicas)
    assert (await harness.produce(1, TP, batch("a"))).error_code == 0
    await harness.wait_replicated(TP, replicas)
    harness.transport.partition([1], [2])
    assert (await harness.produce(1, TP, batch("b1", "b2"), batch("c"), acks=1)).error_code == 0  # epoch 0, on 1 only
    await harness.elect(TP, 2, [2], replicas, to=[2])
    assert (await harness.produce(2, TP, batch("d1", "d2", "d3"), acks=1)).error_code == 0  # epoch 1, from offset 1

    async def fetch_as_broker_1(offset: int, last_fetched_epoch: int) -> FetchPartitionResponse:
        response = await harness.send(2, FetchRequest(1, 0, 0, [FetchPartition(
            TP.topic, TP.partition, offset, current_leader_epoch=1, last_fetched_epoch=last_fetched_epoch)]), "1")
        return response.partitions[0]

    diverged = await fetch_as_broker_1(4, 0)  # broker 1's log: epoch 0 up to offset 4
    assert (diverged.error_code, diverged.diverging_epoch, diverged.diverging_end_offset) == (0, 0, 1)
    assert diverged.batches == [] and harness.partition(2, TP).follower_log_end_offsets()[1] == -1
    accepted = await fetch_as_broker_1(1, 0)  # truncated to offset 1: epoch 0 ends there on the leader too
    assert accepted.diverging_epoch == -1 and [r.value for b in accepted.batches for r in b.records()] == \
        [b"d1", b"d2", b"d3"]
    assert harness.partition(2, TP).follower_log_end_offsets()[1] == 1


async def test_a_leader_that_stays_leader_in_a_new_epoch_keeps_what_its_followers_fetched(
        harness: Harness, autojump_clock: MockClock) -> None:
    """Kafka's makeLeader on a replica that leads already (an ISR change, as a follower's controlled shutdown
    makes): the followers' positions and log starts stay, only their catch-up clocks restart. The high
    watermark keeps moving with the followers that are left, and the follower out of the ISR rejoins only from
    a fetch of its own."""
    await harness.elect(TP, 1, REPLICAS, REPLICAS)
    assert (await harness.produce(1, TP, batch("a", "b"))).error_code == 0
    await harness.wait_replicated(TP, REPLICAS)
    harness.gates[3].pause()  # broker 3 fetches nothing more, nor hears of the new epoch
    await harness.elect(TP, 1, [1, 2], REPLICAS, to=[1, 2])
    leader = harness.partition(1, TP)
    assert (leader.leader_epoch, leader.isr, leader.high_watermark) == (1, {1, 2}, 2)
    assert leader.follower_log_end_offsets() == {2: 2, 3: 2}
    assert leader.follower_log_start_offsets() == {2: 0, 3: 0}
    assert leader.low_watermark(lambda broker: True) == 0
    leader.maybe_shrink_isr(now_ms(), 30_000)
    assert leader.isr == {1, 2}, "the follower out of the ISR rejoined from what it fetched before the new epoch"
    result = await harness.produce(1, TP, batch("c"))
    assert (result.error_code, result.base_offset, leader.high_watermark, leader.isr) == (0, 2, 3, {1, 2})
    assert leader.follower_log_end_offsets() == {2: 3, 3: 2}


async def test_a_new_epoch_that_reaches_the_leader_first_leaves_the_followers_partition_in_its_session(
        harness: Harness, autojump_clock: MockClock) -> None:
    """The controller sends every replica the same LeaderAndIsr; when the leader takes it first, the follower's
    session still names the old epoch. The leader's session read leaves the partition for the follower's own
    LeaderAndIsr to re-name instead of answering FENCED_LEADER_EPOCH, which would fail it in the follower's
    fetcher and move it out of the session and back. Nothing is lost either way."""
    replicas = [1, 2]
    await harness.elect(TP, 1, replicas, replicas)
    assert (await harness.produce(1, TP, batch("a"))).error_code == 0
    await harness.wait_replicated(TP, replicas)
    await trio.sleep(1)  # the follower's fetch is parked at the leader
    leader = harness.brokers[1].replica_manager
    read_partition, answered = leader._read_partition, []

    def read_recording(*args: Any) -> FetchPartitionResponse:
        result = read_partition(*args)
        answered.append(result.error_code)
        return result

    leader._read_partition = read_recording  # type: ignore[method-assign]
    fetcher = harness.brokers[2].replica_manager.replica_fetcher_manager
    state = fetcher.fetch_state(TP)
    new_epoch = harness.write_state(TP, 1, replicas)  # same leader, same ISR: a new leader epoch all the same
    await harness.tell(TP, new_epoch, replicas, [1])
    await trio.sleep(1)  # the leader woke the follower's parked fetch with the partition's news
    assert errors.FENCED_LEADER_EPOCH.code not in answered and state is not None and not state.failed
    await harness.tell(TP, new_epoch, replicas, [2])
    assert (await harness.produce(1, TP, batch("b"))).error_code == 0
    await harness.wait_replicated(TP, replicas)
    assert harness.batches(2, TP) == harness.batches(1, TP) and await harness.consume(1, TP) == [b"a", b"b"]
    assert errors.FENCED_LEADER_EPOCH.code not in answered


async def test_follower_truncates_on_epoch_change_even_when_the_leader_is_unchanged(harness: Harness, autojump_clock: MockClock) -> None:
    """KAFKA-7164: broker 3 follows broker 1 in epochs 0 and 2 and never hears of epoch 1, in which broker 1
    itself was a follower and dropped records broker 3 had already copied."""
    await harness.elect(TP, 1, REPLICAS, REPLICAS)
    assert (await harness.produce(1, TP, batch("a"))).error_code == 0
    await harness.wait_replicated(TP, REPLICAS)

    harness.transport.partition([2], [1, 3])
    assert (await harness.produce(1, TP, batch("b"), acks=1)).error_code == 0
    await harness.wait_until(lambda: harness.partition(3, TP).log.log_end_offset == 2)
    epoch_one = await harness.elect(TP, 2, [2], REPLICAS, to=[2])
    assert (await harness.produce(2, TP, batch("c1", "c2"), acks=1)).error_code == 0
    await harness.tell(TP, epoch_one, REPLICAS, [1])
    harness.transport.partition([3], [1, 2])
    await harness.wait_until(lambda: harness.batches(1, TP) == harness.batches(2, TP))

    await harness.elect(TP, 1, [1, 2], REPLICAS)
    harness.transport.heal()
    assert (await harness.produce(1, TP, batch("d"))).error_code == 0
    await harness.wait_replicated(TP, REPLICAS)
    assert harness.batches(3, TP) == harness.batches(1, TP) == harness.batches(2, TP)
    assert await harness.consume(1, TP) == [b"a", b"c1", b"c2", b"d"]
    await harness.wait_until(lambda: harness.partition(1, TP).isr == {1, 2, 3})


@pytest.mark.parametrize("acks", [0, 1])
async def test_acks_zero_and_one_answer_after_the_local_append(harness: Harness, acks: int, autojump_clock: MockClock) -> None:
    await harness.elect(TP, 1, REPLICAS, REPLICAS)
    harness.gates[2].pause()
    result = await harness.produce(1, TP, batch("x"), acks=acks)
    assert result.error_code == 0 and result.base_offset == 0
    assert harness.partition(1, TP).high_watermark == 0


async def test_acks_all_times_out_but_keeps_the_records(harness: Harness, autojump_clock: MockClock) -> None:
    await harness.elect(TP, 1, REPLICAS, REPLICAS)
    harness.gates[2].pause()
    result = await harness.produce(1, TP, batch("x"), timeout_ms=500)
    assert result.error_code == errors.REQUEST_TIMED_OUT.code
    assert harness.partition(1, TP).log.log_end_offset == 1
    harness.gates[2].resume()
    await harness.wait_replicated(TP, REPLICAS)
    assert await harness.consume(1, TP) == [b"x"]


async def test_acks_all_fails_when_leadership_moves_and_waits_again_once_it_comes_back(
        harness: Harness, autojump_clock: MockClock) -> None:
    """A waiting acks=-1 produce fails NOT_LEADER_OR_FOLLOWER when leadership moves. A leader keeps no waiting
    produces until one parks: after leadership came back, acks=-1 produces park and complete again, in the order
    of their offsets."""
    await harness.elect(TP, 1, REPLICAS, REPLICAS)
    harness.gates[2].pause()
    async with trio.open_nursery() as nursery:
        failed = []

        async def produce_failing() -> None:
            failed.append(await harness.produce(1, TP, batch("x")))

        nursery.start_soon(produce_failing)
        await trio.sleep(0.1)
        await harness.elect(TP, 3, [3], REPLICAS, to=[1, 3])
    assert failed[0].error_code == errors.NOT_LEADER_OR_FOLLOWER.code
    await harness.elect(TP, 1, [1, 3], REPLICAS, to=[1, 3])
    async with trio.open_nursery() as nursery:
        done: list[tuple[str, int, int]] = []

        async def produce(value: str) -> None:
            response = await harness.produce(1, TP, batch(value))
            done.append((value, response.error_code, response.base_offset))

        nursery.start_soon(produce, "a")
        await trio.sleep(0)
        nursery.start_soon(produce, "b")
    assert sorted(done, key=lambda d: d[2]) == [("a", errors.NONE.code, 1), ("b", errors.NONE.code, 2)]
    assert harness.partition(1, TP).high_watermark == 3


async def test_a_follower_told_of_a_dead_leader_follows_it_once_the_same_epoch_names_it_alive(
        harness: Harness, autojump_clock: MockClock) -> None:
    """Seed 000's makeFollowers leaves a partition untouched while its new leader is not alive. Recording the epoch
    anyway (and starting no fetcher) made the controller's next LeaderAndIsr for it, the same epoch once the
    leader was back, look stale: the follower never fetched again and acks=all failed for good."""
    await harness.elect(TP, 1, REPLICAS, REPLICAS)
    assert (await harness.produce(1, TP, batch("a"))).error_code == errors.NONE.code
    lai = harness.write_state(TP, 1, REPLICAS)
    state = harness.partition_state(TP, lai, REPLICAS)
    response = await harness.send(3, LeaderAndIsrRequest(-1, harness.controller_epoch, -1, [state], []))
    assert response.error_code == errors.NONE.code
    assert harness.partition(3, TP).leader_epoch == 0  # left as it was: the leader it names is not alive
    await harness.tell(TP, lai, REPLICAS, REPLICAS)  # the same epoch, now with the leader alive
    follower = harness.partition(3, TP)
    assert follower.leader_epoch == lai.leader_epoch and follower.leader_replica_id == 1
    produced = await harness.produce(1, TP, batch("b"))
    assert (produced.error_code, produced.base_offset) == (errors.NONE.code, 1)
    await harness.wait_replicated(TP, REPLICAS)
    assert [b.payload for b in harness.batches(3, TP)] == [b.payload for b in harness.batches(1, TP)]


async def test_partitions_whose_leader_is_not_alive_are_left_as_they_were_with_one_warning_per_request(
        harness: Harness, autojump_clock: MockClock, caplog: pytest.LogCaptureFixture) -> None:
    """The last in-sync replica dying takes all its partitions offline at once (leader -1): the warning used to be
    a line per partition, which Python printed to the stderr of a test that configures no logging."""
    partitions = [TopicPartition("events", p) for p in range(12)]
    harness.zk.session.multi(harness.zk.create_topic_ops("events", {tp.partition: REPLICAS for tp in partitions}, {}))
    first = [harness.partition_state(tp, await harness.elect(tp, 1, REPLICAS, REPLICAS), REPLICAS)
             for tp in partitions]
    states = [harness.partition_state(tp, harness.write_state(tp, -1, [1]), REPLICAS) for tp in partitions]
    caplog.set_level(logging.INFO, logger="kafkalite.server.replica_manager")
    response = await harness.send(3, LeaderAndIsrRequest(-1, harness.controller_epoch, -1, states, []))
    assert response.error_code == errors.NONE.code
    assert [(p.leader_replica_id, p.leader_epoch) for p in map(partial(harness.partition, 3), partitions)] \
        == [(1, 0)] * 12  # left as they were
    [warning] = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert warning.startswith("broker 3: not following the leader of 12 partition(s), which is not alive")
    assert "(events-0, -1, 1), " in warning and "(events-9, -1, 1), ..." in warning and "events-10" not in warning
    caplog.clear()  # the first states again, stale now: fenced, in one line too
    await harness.send(3, harness.leader_and_isr(first))
    [fenced] = [r.getMessage() for r in caplog.records if "ignoring" in r.getMessage()]
    assert fenced.startswith("broker 3: ignoring LeaderAndIsr for 12 partition(s) whose leader epoch is not newer")
    assert fenced.endswith("(events-9, 0, 0), ...")


@pytest.mark.parametrize("broker_config", [{"replica.fetch.wait.max.ms": 5000}])
async def test_a_follower_rejoins_the_isr_only_once_it_holds_the_start_of_the_leaders_epoch(
        harness: Harness, autojump_clock: MockClock, monkeypatch: pytest.MonkeyPatch) -> None:
    """KAFKA-7128: a new leader's high watermark can lag the start of its epoch; a follower that has only
    reached that high watermark must not rejoin the ISR, or a clean election of it loses committed records.

    Replicas in preference order [2, 3, 1]; broker 1 leads with ISR {1, 2}, broker 3 has no copy. "b" and "c"
    are committed (acks=all) on 1 and 2, but 2 learns that high watermark only on its next fetch response,
    parked at 1, and 1 is cut off from 2 and 3 before it comes. A preferred election makes 2 leader (ISR
    {1, 2}, epoch start 2, high watermark 0: 1 cannot fetch to move it). Broker 3 follows 2. The moment 2 adds
    3 to the ISR the test cuts 3 off (its fetch response is lost); then 2 dies, and the controller elects
    the first live ISR member in preference order, 3. Kafkalite admits 3 only at offset 2, so 3 holds "b"
    and "c". Admitting it at the high watermark (offset 0, the pre-KAFKA-7128 rule) would make 3 a clean
    leader without them.
    """
    replicas = [2, 3, 1]
    await harness.elect(TP, 1, [1, 2], replicas, to=[1, 2])
    assert (await harness.produce(1, TP, batch("b"), batch("c"))).error_code == 0
    harness.transport.partition([1], [2, 3])
    follower = harness.partition(2, TP)
    assert (follower.log.log_end_offset, follower.high_watermark) == (2, 0)

    await harness.elect(TP, 2, [1, 2], replicas, to=[2, 3])
    leader = harness.partition(2, TP)
    assert (leader.leader_epoch_start_offset, leader.high_watermark) == (2, 0)
    joined_at: list[int] = []
    update_isr = Partition._update_isr

    def cut_off_3_when_it_joins(partition: Partition, new_isr: AbstractSet[int]) -> bool:
        if partition is leader and 3 in new_isr and 3 not in leader.isr:
            joined_at.append(leader.follower_log_end_offsets()[3])
            harness.transport.partition([1], [2], [3])
        return update_isr(partition, new_isr)

    monkeypatch.setattr(Partition, "_update_isr", cut_off_3_when_it_joins)
    await harness.wait_until(lambda: bool(joined_at), timeout=30, what="3 to join the ISR")

    state = harness.zk.get_partition_state(TP)
    assert state is not None and 3 in state.leader_and_isr.isr
    await harness.elect(TP, 3, [r for r in state.leader_and_isr.isr if r != 2], replicas, to=[3])
    assert [r.value for b in harness.batches(3, TP) for r in b.records()] == [b"b", b"c"]
    assert joined_at == [2]
