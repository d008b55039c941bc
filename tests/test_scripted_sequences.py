"""Scripted failure sequences from Kafka's history of replication bugs, each under 40 seeds of timing jitter.

Each test drives the real `Cluster` on the mock clock through one known-bad order of events (KIP-101's two
cases, KIP-279's fast failovers with unclean elections, Jepsen's 2013 Kafka analysis and KAFKA-14704's high
watermark over records about to be truncated), records what the clients were acknowledged in a `History`,
heals, reads back a `FinalState` and hands both to the chaos checker. The seed draws the jitter between steps
(and seeds the cluster): the order of the steps is fixed, the timing around them is not.

KAFKA-7164 (truncation on an epoch change with the same leader) and KAFKA-7128 (ISR expansion only from the
start of the leader's epoch) are scripted here too: a follower cut off from the controller until a new one
has taken over, and a spy on the leader's ISR update that cuts the joining follower off at that moment. Both
fail with their rule removed (checked by hand: 7164 stalls the follower, 7128 admits it at offset 0); they
also have broker-harness versions, with the test in the controller's seat, in tests/server/test_replication.py.

The negative control: `kafkalite.follower.truncation=high-watermark` makes a new follower truncate to its own
high watermark, as the seeds' pre-KIP-101 code does. Under it the KIP-101 sequences must fail the checker for
at least one seed, which shows both that the sequences reach the bad state and that the checker sees it.

Which replica plays which part is decided at run time (replica assignment depends on the seed); the scripts
pick a partition whose replicas do not include the controller, so that killing or cutting off a replica never
moves the controller as well.
"""

from __future__ import annotations

import random
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Any

import pytest
import trio

from kafkalite.cluster import Cluster, ElectionOutcome
from kafkalite.common import errors
from kafkalite.common.records import Record
from kafkalite.common.types import TopicPartition
from kafkalite.network.requests import UNCLEAN_ELECTION
from kafkalite.server.partition import Partition
from kafkalite.testing.chaos import Anomaly, History, check, final_state

SEEDS = range(40)
TOPIC = "t"
LEADER_EPOCH = {"kafkalite.follower.truncation": "leader-epoch"}
HIGH_WATERMARK = {"kafkalite.follower.truncation": "high-watermark"}
BASE_CONFIG = {
    "zookeeper.session.timeout.ms": 6000,
    # long enough that no follower leaves the ISR by lag unless a script means it to
    "replica.lag.time.max.ms": 30000,
    "auto.leader.rebalance.enable": False,
    "auto.create.topics.enable": False,
    # a follower's fetch parked at the leader returns only with new data or after this long, so a follower
    # learns the high watermark one fetch late: the window KIP-101 is about
    "replica.fetch.wait.max.ms": 5000,
}


@dataclass
class Script:
    """One scripted run: the cluster, the partition under test, its replicas' roles and the history."""

    cluster: Cluster
    seed: int
    partition: int = -1
    history: History = field(default_factory=History)

    def __post_init__(self) -> None:
        self.rng = random.Random(f"scripted-{self.seed}")

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(TOPIC, self.partition)

    async def jitter(self, most: float = 0.3) -> None:
        """A small random pause between two steps: less than a parked fetch's wait, so no step's window closes."""
        await trio.sleep(self.rng.uniform(0, most))

    async def create(self, partitions: int, replication_factor: int, min_insync: int = 1) -> list[int]:
        """Create the topic and pick a partition the controller does not replicate; its replicas, leader first."""
        cluster = self.cluster
        await cluster.create_topic(TOPIC, partitions, replication_factor, {"min.insync.replicas": min_insync})
        controller = cluster.controller_id
        for d in await cluster.describe_topic(TOPIC):
            if controller not in d.replicas:
                self.partition = d.partition
                await cluster.wait_until(lambda: sorted(cluster.partition_state(TOPIC, d.partition).isr)
                                         == sorted(d.replicas), timeout=30)
                return [d.leader, *[r for r in d.replicas if r != d.leader]]
        raise AssertionError("every partition has the controller among its replicas")

    async def write(self, value: str, *, acks: int = -1) -> int:
        """Produce one record; with acks=all (-1) it enters the history as acknowledged at its offset.

        A write with acks=1 is recorded as an event only: the leader alone had it when it was acknowledged,
        and an election of another replica may lose it without breaking any promise Kafka makes."""
        offset = await self.cluster.produce(TOPIC, self.partition, [Record(None, value.encode())], acks=acks)
        self.history.record("ack", value, acks, offset)
        if acks == -1:
            self.history.acked[value] = (self.partition, offset)
        return offset

    def state(self) -> Any:
        return self.cluster.partition_state(TOPIC, self.partition)

    def local(self, broker: int) -> Any:
        """The broker's own Partition object for the partition under test."""
        partition = self.cluster.broker(broker).replica_manager.get_partition(self.tp)
        assert partition is not None
        return partition

    async def wait_for(self, condition: Any, what: str, timeout: float = 60) -> None:
        await self.cluster.wait_until(condition, timeout=timeout, what=what)

    async def knows_controller_lost(self, broker: int) -> None:
        await self.wait_for(lambda: self.cluster.controller_id is not None and broker not in
                            self.cluster.controller().context.live_brokers, f"the controller to see {broker} die")

    async def leader_is(self, broker: int, timeout: float = 60) -> None:
        assert await self.cluster.wait_for_leader(TOPIC, self.partition, timeout=timeout) == broker

    def values(self, broker: int, below: int) -> list[tuple[int, bytes | None]]:
        """The broker's records of the partition under test below offset `below`, as (offset, value)."""
        log = self.local(broker).log
        return [(o, r.value) for b in log.read(log.log_start_offset, 1 << 30)
                for o, r in b.offsets_and_records() if o < below]

    async def heal_and_check(self) -> list[Anomaly]:
        """Heal, restart every broker, wait for a full ISR, write one last acks=all value, and check."""
        cluster = self.cluster
        cluster.heal()
        for broker in cluster.broker_ids:
            if broker not in cluster.live_broker_ids:
                await cluster.restart_broker(broker)
        await cluster.wait_for_leader(TOPIC, self.partition)
        replicas = cluster.controller().context.partition_replica_assignment(self.tp)
        await self.wait_for(lambda: sorted(self.state().isr) == sorted(replicas), "a full ISR after healing", 120)
        await self.write("final")
        await self.wait_for(lambda: all(cluster.log_manager(b).get_log(self.tp).log_end_offset
                                        == cluster.high_watermark(TOPIC, self.partition) for b in replicas),
                            "every replica at the high watermark")
        final = await final_state(cluster, TOPIC, [self.partition])
        anomalies, _ = check(self.history, final)
        return anomalies


def kinds(anomalies: list[Anomaly]) -> set[str]:
    return {a.kind for a in anomalies}


async def first_seed_showing(kind: str, script: Any, brokers: int = 3) -> int:
    """The negative control: the first seed under which the script, with high-watermark truncation, shows `kind`."""
    for seed in SEEDS:
        if kind in kinds(await run_script(script, seed, HIGH_WATERMARK, brokers=brokers)):
            return seed
    raise AssertionError(f"no seed of {len(SEEDS)} shows {kind} with high-watermark truncation")


async def run_script(script: Any, seed: int, config: dict[str, Any], brokers: int = 3) -> list[Anomaly]:
    with trio.fail_after(900):  # virtual seconds: a script that cannot progress fails instead of hanging
        async with Cluster(brokers=brokers, config={**BASE_CONFIG, **config}, seed=seed) as cluster:
            return await script(Script(cluster, seed))


# -- KIP-101 case 1: truncation to a stale high watermark, then the truncated replica leads ------------------------

async def kip101_case1(s: Script) -> list[Anomaly]:
    """KIP-101, scenario 1 ("high watermark truncation followed by immediate leader election").

    Replicas A (leader), B and C, all in the ISR, min ISR 1. `m` is written with acks=all: B has it, but B
    learns the high watermark that covers it only on its next fetch response, which stays parked at A. B is cut
    off from A. C dies; the controller shrinks the ISR to {A, B} with a new leader epoch, so B becomes a follower
    again and truncates. Before B can fetch, A dies; B, in the ISR, is elected cleanly. The old leader and C come
    back as followers.

    With leader-epoch truncation B cannot reach A to ask where its epoch ends, so it truncates nothing and leads
    with `m`. Truncating to its own stale high watermark (the pre-KIP-101 code) drops `m`, an acknowledged
    write, and B then leads without it: the checker reports it lost. In KIP-101 the trigger is B restarting; here
    it is the ISR change, because a broker that restarts is taken out of the ISR by the controller and could then
    only become leader by an unclean election.
    """
    cluster = s.cluster
    a, b, c = await s.create(partitions=4, replication_factor=3)
    for i in range(3):
        await s.write(f"v{i}")
        await s.jitter()
    await s.write("m")
    await s.jitter()
    cluster.partition_network({b}, {a})
    await cluster.kill_broker(c)
    epoch = s.state().leader_epoch
    await s.wait_for(lambda: s.state().leader_epoch > epoch and s.local(b).leader_epoch == s.state().leader_epoch,
                     "B to follow the new leader epoch")
    await s.jitter()
    await cluster.kill_broker(a)
    await s.leader_is(b)
    await s.jitter()
    return await s.heal_and_check()


@pytest.mark.parametrize("seed", SEEDS)
async def test_kip101_case1_truncation_by_epoch_keeps_the_acknowledged_write(autojump_clock: Any, seed: int) -> None:
    anomalies = await run_script(kip101_case1, seed, LEADER_EPOCH, brokers=4)
    assert anomalies == []


async def test_kip101_case1_fails_the_checker_when_followers_truncate_to_the_high_watermark(autojump_clock: Any
                                                                                           ) -> None:
    assert await first_seed_showing("lost-write", kip101_case1, brokers=4) in SEEDS


# -- the switch itself -------------------------------------------------------------------------------------------

def test_the_truncation_switch_defaults_to_leader_epochs_and_refuses_other_values() -> None:
    from kafkalite.common.config import BROKER_CONFIG_KEYS, BrokerConfig
    from kafkalite.common.errors import InvalidConfigError

    key = BROKER_CONFIG_KEYS["kafkalite.follower.truncation"]
    assert key.default == "leader-epoch" and key.choices == ("leader-epoch", "high-watermark")
    assert "negative control" in key.doc
    assert BrokerConfig({})["kafkalite.follower.truncation"] == "leader-epoch"
    assert BrokerConfig(HIGH_WATERMARK)["kafkalite.follower.truncation"] == "high-watermark"
    with pytest.raises(InvalidConfigError, match="must be one of"):
        BrokerConfig({"kafkalite.follower.truncation": "none"})


# -- KIP-101 case 2: divergent logs after a double failure ------------------------------------------------------

async def kip101_case2(s: Script) -> list[Anomaly]:
    """KIP-101, scenario 2 ("replica divergence on restart after multiple hard failures").

    Replicas A (leader) and B, min ISR 1. `m2` is written with acks=1 and replicated: A's high watermark covers
    it. A dies; B leads. A power failure then takes B too, and B loses its unflushed tail, `m2` (kafkalite keeps
    every append, so the script truncates B's stored log while it is down, with its epoch cache, as a lost page
    cache would). B comes back first and leads again; `m3` is written at the offset `m2` had. A comes back as a
    follower.

    By leader epoch A asks B where its epoch 0 ends, truncates `m2` and fetches `m3`: the logs agree. Truncating
    to its own high watermark, which covers `m2`, A keeps `m2` and fetches on after it: the replicas diverge at
    that offset, the bug KIP-101 fixed. `m2` was acknowledged with acks=1 only, so losing it breaks no promise;
    the acks=all writes (before, `m3`, after) must all survive.
    """
    cluster = s.cluster
    a, b = await s.create(partitions=3, replication_factor=2)
    await s.write("m1")
    await s.jitter()
    offset = await s.write("m2", acks=1)
    await s.wait_for(lambda: s.local(a).high_watermark == offset + 1, "the high watermark to cover m2")
    await s.jitter()
    await cluster.kill_broker(a)
    await s.leader_is(b)
    await s.jitter()
    await cluster.kill_broker(b)
    cluster.log_manager(b).get_log(s.tp).truncate_to(offset)  # the power failure loses B's unflushed m2
    await s.knows_controller_lost(b)
    await cluster.restart_broker(b)
    await s.leader_is(b)
    await s.jitter()
    assert await s.write("m3") == offset
    await s.jitter()
    await cluster.restart_broker(a)
    return await s.heal_and_check()


@pytest.mark.parametrize("seed", SEEDS)
async def test_kip101_case2_truncation_by_epoch_avoids_divergence(autojump_clock: Any, seed: int) -> None:
    assert await run_script(kip101_case2, seed, LEADER_EPOCH) == []


async def test_kip101_case2_diverges_when_followers_truncate_to_the_high_watermark(autojump_clock: Any) -> None:
    assert await first_seed_showing("divergence", kip101_case2) in SEEDS


# -- KIP-279: fast failovers by unclean election, a follower with an epoch its leader never had ------------------

async def kip279(s: Script) -> list[Anomaly]:
    """KIP-279 (KAFKA-6361): log divergence after fast leader failovers.

    Replicas A (leader) and B, min ISR 1. `m1` is written at offset 1 with acks=1 while B is cut off from A. A
    dies; B (still in the ISR) leads epoch 1 and takes `m2`, acks=1, at the same offset 1. B dies before A
    returns; A comes back and is elected uncleanly (epoch 2): it leads with `m1` at offset 1, never having
    followed epoch 1, and takes `m3` with acks=all. B comes back as a follower whose latest epoch, 1, the leader
    never had.

    Under KIP-101 alone the leader answers with the start of its next epoch (2), past offset 1, and B keeps `m2`:
    divergent logs. With KIP-279 the leader answers with its largest epoch not above 1 (epoch 0) and where it
    ends; B truncates to its own end of epoch 0 and fetches `m1` and `m3`. The unclean election may lose `m2`
    (acknowledged with acks=1 only, and by a replica no longer in charge); every acks=all write survives.
    """
    cluster = s.cluster
    a, b = await s.create(partitions=3, replication_factor=2)
    await s.write("m0")
    await s.jitter()
    cluster.partition_network({b}, {a})
    assert await s.write("m1", acks=1) == 1
    await s.jitter()
    await cluster.kill_broker(a)
    await s.leader_is(b)
    assert await s.write("m2", acks=1) == 1
    await s.jitter()
    await cluster.kill_broker(b)
    cluster.heal()
    await s.knows_controller_lost(b)
    await cluster.restart_broker(a)
    await s.wait_for(lambda: a in s.cluster.controller().context.live_brokers, "the controller to see A back")
    assert await cluster.elect_leaders(UNCLEAN_ELECTION, [s.tp]) == {s.tp: ElectionOutcome(errors.NONE)}
    await s.leader_is(a)
    assert await s.write("m3") == 2
    await s.jitter()
    await cluster.restart_broker(b)
    return await s.heal_and_check()


@pytest.mark.parametrize("seed", SEEDS)
async def test_kip279_a_follower_with_an_epoch_the_leader_never_had_truncates(autojump_clock: Any, seed: int
                                                                               ) -> None:
    assert await run_script(kip279, seed, LEADER_EPOCH) == []


async def test_kip279_diverges_when_followers_truncate_to_the_high_watermark(autojump_clock: Any) -> None:
    assert await first_seed_showing("divergence", kip279) in SEEDS


# -- Jepsen 2013: an ISR of one, then an unclean election --------------------------------------------------------

async def jepsen_2013(s: Script) -> list[Anomaly]:
    """Jepsen's 2013 Kafka analysis: the ISR shrinks to the leader alone, which then acknowledges acks=all
    writes by itself (min ISR 1); the leader dies and an out-of-sync replica is elected uncleanly. The writes
    only the old leader had are lost, and no truncation rule can save them: the checker must say so."""
    cluster = s.cluster
    a, b, c = await s.create(partitions=4, replication_factor=3)
    await s.write("before")
    cluster.partition_network({a}, {b, c})
    await s.wait_for(lambda: s.state().isr == (a,), "the ISR to shrink to the leader alone", 120)
    for i in range(3):
        await s.write(f"alone-{i}")
        await s.jitter()
    await cluster.kill_broker(a)
    cluster.heal()
    await s.knows_controller_lost(a)
    assert await cluster.elect_leaders(UNCLEAN_ELECTION, [s.tp]) == {s.tp: ElectionOutcome(errors.NONE)}
    assert await cluster.wait_for_leader(TOPIC, s.partition) in (b, c)
    await s.write("after")
    return await s.heal_and_check()


@pytest.mark.parametrize("seed", SEEDS)
async def test_jepsen_2013_unclean_election_loses_writes_and_the_checker_says_so(autojump_clock: Any, seed: int
                                                                                  ) -> None:
    anomalies = await run_script(jepsen_2013, seed, LEADER_EPOCH, brokers=4)
    # a lost write whose offset is at or past the final high watermark is reported as "unseen": lost all the same
    assert "lost-write" in kinds(anomalies) and kinds(anomalies) <= {"lost-write", "unseen"}
    assert sorted(a.detail.split("'")[1] for a in anomalies) == ["alone-0", "alone-1", "alone-2"]


# -- KAFKA-14704: a returning old leader applies the new leader's high watermark only after truncating ----------

async def kafka14704(s: Script) -> list[Anomaly]:
    """KAFKA-14704: a follower must truncate by epoch before it applies the leader's high watermark.

    Replicas A (leader), B and C, all in the ISR, min ISR 1. A is cut off from B and C and takes `x` with
    acks=1: only A has it, past its high watermark. A dies; B or C leads a new epoch from the offset `x` has on
    A and takes `y0`..`y2` with acks=all. A comes back as a follower with `x` where the leader has `y0`.

    Kafkalite's follower asks the leader where its epoch ends and truncates `x` before its first fetch, so the
    high watermark it takes from fetch responses only ever covers records the leader has. Applying the
    leader's high watermark first (min of it and A's own log end: past `x`) would, until the truncation,
    expose `x` below A's high watermark, a record about to vanish. A spy on `Partition._set_high_watermark`
    compares, at every high-watermark change of a follower, its records below the new high watermark with
    the leader's, and reports each mismatch as an "exposed-high-watermark" anomaly.
    """
    cluster = s.cluster
    a, b, c = await s.create(partitions=4, replication_factor=3)
    exposed: list[Anomaly] = []
    set_high_watermark = Partition._set_high_watermark

    def spy(partition: Partition, high_watermark: int) -> None:
        set_high_watermark(partition, high_watermark)
        leader = s.state().leader
        if partition.topic_partition != s.tp or partition.is_leader or leader not in cluster.live_broker_ids:
            return
        mine, leaders = s.values(partition.local_broker_id, high_watermark), s.values(leader, high_watermark)
        if mine != leaders:
            exposed.append(Anomaly("exposed-high-watermark", f"broker {partition.local_broker_id} at high "
                                   f"watermark {high_watermark} holds {mine}, leader {leader} {leaders}"))

    Partition._set_high_watermark = spy  # type: ignore[method-assign]
    try:
        for i in range(3):
            await s.write(f"v{i}")
            await s.jitter()
        cluster.partition_network({a}, {b, c})
        offset = await s.write("x", acks=1)
        await s.jitter()
        await cluster.kill_broker(a)
        cluster.heal()
        assert await cluster.wait_for_leader(TOPIC, s.partition) in (b, c)
        for i in range(3):
            assert await s.write(f"y{i}") == offset + i
            await s.jitter()
        await cluster.restart_broker(a)
        anomalies = await s.heal_and_check()
    finally:
        Partition._set_high_watermark = set_high_watermark  # type: ignore[method-assign]
    return exposed + anomalies


@pytest.mark.parametrize("seed", SEEDS)
async def test_kafka14704_a_follower_truncates_before_it_applies_the_high_watermark(autojump_clock: Any, seed: int
                                                                                     ) -> None:
    assert await run_script(kafka14704, seed, LEADER_EPOCH, brokers=4) == []


# -- KAFKA-7164: a follower told of a new epoch under the leader it already follows truncates all the same -------

async def kafka7164(s: Script) -> list[Anomaly]:
    """KAFKA-7164: a follower must truncate on every new leader epoch, also when the leader has not changed.

    Replicas A (leader), B and C in assignment order, the controller on a fourth broker, min ISR 1. B is frozen
    and `x` is written with acks=1: A and C have it. C is cut off from the controller, so it hears nothing of the
    next two epochs. A dies and B leads epoch 1, taking `y` at the offset `x` had; A comes back, follows B and
    truncates `x`; a preferred election makes A leader of epoch 2. The controller dies before it could reach C,
    and its successor tells C only of epoch 2: led by A, as epoch 0 was. C must ask A where epoch 0 ends and
    truncate `x`; skipping the truncation because the leader is unchanged (the bug) leaves C with `x` where A
    and B have `y`, and the replicas diverge.
    """
    cluster = s.cluster
    a, b, c = await s.create(partitions=4, replication_factor=3)
    controller = cluster.controller_id
    await s.write("v0")
    await s.jitter()
    cluster.pause_broker(b)
    offset = await s.write("x", acks=1)
    await s.wait_for(lambda: s.local(c).log.log_end_offset > offset, "C to copy x")
    cluster.partition_network({c}, {controller})
    await cluster.kill_broker(a)
    cluster.resume_broker(b)
    await s.leader_is(b)
    assert await s.write("y", acks=1) == offset
    await s.jitter()
    await cluster.restart_broker(a)
    await s.wait_for(lambda: a in s.state().isr, "A to follow B back into the ISR")
    assert await cluster.elect_preferred_leaders([s.tp]) == {s.tp: ElectionOutcome(errors.NONE)}
    await s.leader_is(a)
    assert s.state().leader_epoch == 2 and s.local(c).leader_epoch == 0  # C has heard of neither epoch
    await s.jitter()
    await cluster.kill_broker(controller)
    await s.wait_for(lambda: cluster.controller_id not in (None, controller), "a new controller")
    cluster.heal()
    await s.wait_for(lambda: s.local(c).leader_epoch == 2, "C to hear of epoch 2")
    assert s.local(c).leader_replica_id == a
    return await s.heal_and_check()


@pytest.mark.parametrize("seed", SEEDS)
async def test_kafka7164_a_follower_truncates_on_a_new_epoch_of_the_same_leader(autojump_clock: Any, seed: int
                                                                                ) -> None:
    assert await run_script(kafka7164, seed, LEADER_EPOCH, brokers=4) == []


# -- KAFKA-7128: a follower rejoins the ISR only once it holds the start of the leader's epoch ------------------

async def kafka7128(s: Script) -> list[Anomaly]:
    """KAFKA-7128: a new leader's high watermark can lag the start of its epoch, and a follower that has only
    reached that high watermark must not rejoin the ISR, or a clean election of it loses committed records.

    Replicas reordered to B, C, A (B preferred) while A leads; C dies and leaves the ISR. `b` and `c` are
    written with acks=all: A and B have them, but B learns the high watermark that covers them only on its next
    fetch response, parked at A, and A is cut off from B and C before it comes. C comes back; a preferred
    election makes B leader with a high watermark of 0 below its epoch's start, 2 (A cannot fetch to move it).
    C follows B, and the moment B adds C to the ISR the script cuts C off too. B dies; the controller elects
    the first live ISR member in assignment order, C. Admitted only at offset 2, C leads with `b` and `c`;
    admitted at the high watermark (the pre-KAFKA-7128 rule) it would lead without them: lost writes.
    """
    cluster = s.cluster
    a, b, c = await s.create(partitions=4, replication_factor=3)
    await cluster.reassign_partitions({s.tp: [b, c, a]})
    await cluster.kill_broker(c)
    await s.wait_for(lambda: c not in s.state().isr, "C to leave the ISR")
    await s.jitter()
    offset = await cluster.produce(TOPIC, s.partition, [Record(None, b"b"), Record(None, b"c")])
    s.history.acked.update({"b": (s.partition, offset), "c": (s.partition, offset + 1)})
    cluster.partition_network({a}, {b, c})
    assert (s.local(b).log.log_end_offset, s.local(b).high_watermark) == (2, 0)
    await cluster.restart_broker(c)
    await s.jitter()
    leader = s.local(b)
    joined_at: list[int] = []
    update_isr = Partition._update_isr

    def cut_off_c_when_it_joins(partition: Partition, new_isr: AbstractSet[int]) -> bool:
        if partition is leader and c in new_isr and c not in leader.isr:
            joined_at.append(leader.follower_log_end_offsets()[c])
            cluster.partition_network({a}, {b}, {c})
        return update_isr(partition, new_isr)

    Partition._update_isr = cut_off_c_when_it_joins  # type: ignore[method-assign]
    try:
        assert await cluster.elect_preferred_leaders([s.tp]) == {s.tp: ElectionOutcome(errors.NONE)}
        await s.leader_is(b)
        assert (leader.leader_epoch_start_offset, leader.high_watermark) == (2, 0)
        await s.wait_for(lambda: bool(joined_at), "C to join the ISR")
    finally:
        Partition._update_isr = update_isr  # type: ignore[method-assign]
    await cluster.kill_broker(b)
    await s.leader_is(c)
    assert joined_at == [2] and s.values(c, 2) == [(0, b"b"), (1, b"c")]
    return await s.heal_and_check()


@pytest.mark.parametrize("seed", SEEDS)
async def test_kafka7128_a_follower_rejoins_the_isr_only_past_the_start_of_the_leaders_epoch(
        autojump_clock: Any, seed: int) -> None:
    assert await run_script(kafka7128, seed, LEADER_EPOCH, brokers=4) == []
