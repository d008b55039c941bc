"""Deterministic chaos: one integer seed is one fault schedule against a real cluster, checked like Jepsen.

    python -m kafkalite.testing.chaos --seeds 10000 [--first 0] [--brokers 3] [--workers N]
    python -m kafkalite.testing.chaos --replay 1234          # one seed, its schedule and its first anomaly
    python -m kafkalite.testing.chaos --seeds 100 --faults lose-acks,fail-requests   # only those faults

A run (`run(seed, ChaosConfig(...))`) starts a cluster on Trio's MockClock, creates a replicated topic, and
lets idempotent acks=all producers write unique values while consumers poll and a client watches every
partition's high watermark. A nemesis draws faults from the seed's random stream: crashes and restarts,
controlled shutdowns, session expiries, pauses shorter and longer than the session timeout and the lag time,
network splits (the controller cut from the coordination service, clients cut from brokers, random splits),
a zombie controller, reassignments (some redirected or cancelled midway) and preferred elections in flight,
topics and partitions created while faulted, and request faults (`Cluster.fail_requests`): produce
acknowledgements lost after the append, clients' requests failed with retriable errors, dropped or held, and
followers' fetches held at a leader. At the end everything is healed, 30 virtual seconds pass, the
consumers catch up, and `check` looks for Jepsen's anomalies in what the clients saw and what the replicas hold.

Determinism, honestly: everything kafkalite and this harness choose comes from the seed (fault choice and
timing, split membership, producer pacing, replica assignment), and Trio's scheduler is seeded too
(`seed_trio_scheduler`, through a private Trio attribute). A run records a hash of its history. Two things
outside the seed also order events: sets of strings iterate by their hashes (PYTHONHASHSEED), and Trio orders
some wake-ups by its objects' addresses, so a run depends on the state of the heap it starts from. `sweep` and
`replay` therefore run every seed in a child forked from the same starting point, and the command line runs
itself with PYTHONHASHSEED=0: a seed the sweep reports replays with `--replay`, with the same history hash.
Not covered: a different Python or Trio version may order things differently. A liveness failure (virtual time stopping, a partition left without a leader
or a full ISR after healing) is reported with the seed like an anomaly, never as a hung run.
"""

from __future__ import annotations

import argparse
import dataclasses
import errno
import hashlib
import logging
import multiprocessing
import multiprocessing.connection
import os
import random
import statistics
import sys
import time
from collections import Counter, defaultdict, deque
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import trio
import trio.testing

from kafkalite.client import Admin, Consumer, Producer, TopicPartition
from kafkalite.cluster import COORDINATION, ClientNode, Cluster, CoordinationTimeoutError
from kafkalite.common.clock import pin_epoch
from kafkalite.common.errors import KafkaError
from kafkalite.testing.watchdog import VirtualTimeStalled, run_with_watchdog

TOPIC = "chaos"
EPOCH_S = 1_700_000_000.0  # every run's clock starts here, so record timestamps replay too

FAULTS = ("kill", "shutdown", "expire", "pause-short", "pause-long", "split", "cut-controller", "cut-client",
          "zombie", "reassign", "prefer", "create-topic", "add-partitions", "lose-acks", "fail-requests",
          "slow-replication")

_RETRIABLE = {
    "Produce": ("NOT_LEADER_OR_FOLLOWER", "LEADER_NOT_AVAILABLE", "REQUEST_TIMED_OUT", "NOT_ENOUGH_REPLICAS",
                "KAFKA_STORAGE_ERROR", "UNKNOWN_TOPIC_OR_PARTITION"),
    "Fetch": ("NOT_LEADER_OR_FOLLOWER", "UNKNOWN_TOPIC_OR_PARTITION", "KAFKA_STORAGE_ERROR", "FENCED_LEADER_EPOCH",
              "UNKNOWN_LEADER_EPOCH"),
    "ListOffsets": ("NOT_LEADER_OR_FOLLOWER", "LEADER_NOT_AVAILABLE", "UNKNOWN_TOPIC_OR_PARTITION",
                    "OFFSET_NOT_AVAILABLE", "FENCED_LEADER_EPOCH"),
    "Metadata": ("LEADER_NOT_AVAILABLE", "UNKNOWN_TOPIC_OR_PARTITION"),
    "InitProducerId": ("COORDINATOR_LOAD_IN_PROGRESS", "COORDINATOR_NOT_AVAILABLE", "NOT_COORDINATOR"),
}
"""The requests the workload's producers and consumers send, and errors a Kafka broker may answer each with that
a client must retry through: what a request fault answers with."""


@dataclass(frozen=True)
class ChaosConfig:
    """One family of runs; the seed picks everything else. `nemesis` weighs each fault (0: never)."""

    brokers: int = 3
    partitions: int = 6
    duration_s: float = 300.0
    producers: int = 2
    consumers: int = 2
    send_interval_s: float = 1.0  # between a producer's bursts of one to four records, on average
    fault_interval_s: float = 8.0  # between faults, on average
    session_timeout_ms: int = 6000
    lag_time_ms: int = 10000
    acks: str = "all"
    min_insync_replicas: int = 2
    unclean_leader_election: bool = False
    heal_s: float = 30.0
    nemesis: Mapping[str, float] = field(default_factory=lambda: dict.fromkeys(FAULTS, 1.0))

    def negative_control(self) -> ChaosConfig:
        """Settings under which Kafka loses acknowledged writes (acks=1, ISR of one, unclean election): the
        checker must see the loss."""
        return dataclasses.replace(self, acks="1", min_insync_replicas=1, unclean_leader_election=True)


@dataclass(frozen=True)
class Anomaly:
    kind: str
    detail: str


@dataclass
class ChaosResult:
    seed: int
    anomalies: list[Anomaly]
    liveness: list[str]
    schedule: list[str]
    history_hash: str
    virtual_s: float
    wall_s: float
    stats: dict[str, int]
    failed_faults: list[str] = field(default_factory=list)
    """Faults the nemesis drew but could not inject, the cluster refusing its call: the schedule lists them, yet
    the run did not test them, so a run with any is not ok."""

    @property
    def ok(self) -> bool:
        return not self.anomalies and not self.liveness and not self.failed_faults

    def report(self) -> str:
        """The seed, what went wrong first, and the fault schedule that led there."""
        lines = [f"seed {self.seed}: " + ("ok" if self.ok else f"{len(self.anomalies)} anomalies, "
                                           f"{len(self.liveness)} liveness failures, "
                                           f"{len(self.failed_faults)} faults not injected"),
                 "stats: " + ", ".join(f"{k} {v}" for k, v in sorted(self.stats.items()))]
        if self.failed_faults:
            lines.append(f"fault not injected: {self.failed_faults[0]}")
        if self.liveness:
            lines.append(f"liveness: {self.liveness[0]}")
        if self.anomalies:
            kinds = Counter(a.kind for a in self.anomalies)
            lines.append("anomalies: " + ", ".join(f"{k} {n}" for k, n in sorted(kinds.items())))
            lines.append(f"first: {self.anomalies[0].kind}: {self.anomalies[0].detail}")
        lines.append("schedule:")
        lines += [f"  {entry}" for entry in self.schedule]
        return "\n".join(lines)


# -- the history ---------------------------------------------------------------------------------------------------

@dataclass
class History:
    """What the clients saw, in the order they saw it; its hash identifies a run."""

    events: list[tuple[float, str, tuple[Any, ...]]] = field(default_factory=list)
    acked: dict[str, tuple[int, int]] = field(default_factory=dict)  # value -> (partition, offset)
    failed: set[str] = field(default_factory=set)
    polls: dict[str, list[tuple[int, int, str]]] = field(default_factory=lambda: defaultdict(list))
    high_watermarks: dict[int, list[tuple[float, int]]] = field(default_factory=lambda: defaultdict(list))
    schedule: list[str] = field(default_factory=list)

    def record(self, kind: str, *details: Any) -> None:
        self.events.append((round(trio.current_time(), 6), kind, details))

    def digest(self) -> str:
        return hashlib.sha256(repr(self.events).encode()).hexdigest()[:16]


@dataclass
class FinalState:
    """After healing: the committed log per partition, read from its leader, and every replica's batches."""

    logs: dict[int, list[tuple[int, str]]]
    high_watermarks: dict[int, int]
    replicas: dict[int, dict[int, tuple[list[tuple[int, int, str]], list[tuple[int, int]], int]]]
    # partition -> broker -> (batches (base offset, epoch, payload hash) up to the HW, epoch cache, LEO)


def check(history: History, final: FinalState) -> tuple[list[Anomaly], dict[str, int]]:
    """Jepsen's Kafka anomalies, from the history and the final state. Unacknowledged values that appear are
    allowed and counted."""
    anomalies: list[Anomaly] = []
    at: dict[int, dict[int, str]] = {p: dict(log) for p, log in final.logs.items()}
    where: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for p, log in final.logs.items():
        for offset, value in log:
            where[value].append((p, offset))
    for value, places in sorted(where.items()):
        if len(places) > 1:
            anomalies.append(Anomaly("duplicate", f"{value!r} at {places}"))
    for value, (p, offset) in sorted(history.acked.items()):
        found = at.get(p, {}).get(offset)
        if offset < 0:  # acknowledged at an unknown offset (DUPLICATE_SEQUENCE_NUMBER): it must be there somewhere
            if value not in where:
                anomalies.append(Anomaly("lost-write", f"{value!r} acknowledged at {p} (offset unknown), never read"))
        elif offset >= final.high_watermarks.get(p, 0):
            anomalies.append(Anomaly("unseen", f"{value!r} acknowledged at {p}:{offset}, above the final high "
                                               f"watermark {final.high_watermarks.get(p)}"))
        elif value not in where:
            anomalies.append(Anomaly("lost-write", f"{value!r} acknowledged at {p}:{offset}, never read; "
                                                   f"{p}:{offset} holds {found!r}"))
        elif found != value:
            anomalies.append(Anomaly("inconsistent-offsets", f"{value!r} acknowledged at {p}:{offset}, which holds "
                                                             f"{found!r}; it is at {where[value]}"))
    for consumer, polls in sorted(history.polls.items()):
        last: dict[int, int] = {}
        for p, offset, value in polls:
            previous = last.get(p)
            if previous is not None and offset <= previous:
                anomalies.append(Anomaly("nonmonotonic-poll", f"{consumer} read {p}:{offset} after {p}:{previous}"))
            elif previous is not None and offset > previous + 1:
                skipped = [o for o in range(previous + 1, offset) if o in at.get(p, {})]
                if skipped:
                    anomalies.append(Anomaly("poll-skip", f"{consumer} read {p}:{offset} after {p}:{previous}, "
                                                          f"skipping {skipped[:5]}"))
            last[p] = offset
            final_value = at.get(p, {}).get(offset)
            if final_value != value:
                anomalies.append(Anomaly("read-changed", f"{consumer} read {value!r} at {p}:{offset}, which now "
                                                         f"holds {final_value!r}"))
    for p, seen in sorted(history.high_watermarks.items()):
        for (t0, hw0), (t1, hw1) in zip(seen, seen[1:]):
            if hw1 < hw0:
                anomalies.append(Anomaly("high-watermark-backwards", f"partition {p}: {hw0} at {t0:.3f} s, then "
                                                                     f"{hw1} at {t1:.3f} s"))
    for p, replicas in sorted(final.replicas.items()):
        if len({repr(view[:2]) for view in replicas.values()}) > 1:  # batches and epochs up to the HW
            anomalies.append(Anomaly("divergence", f"partition {p}: replicas differ: " + "; ".join(
                f"broker {b}: LEO {v[2]}, epochs {v[1]}, {len(v[0])} batches" for b, v in sorted(replicas.items()))))
    acked_values = set(history.acked)
    stats = {"acknowledged": len(history.acked), "failed": len(history.failed),
             "read": sum(len(p) for p in history.polls.values()),
             "unacknowledged-appeared": sum(1 for v in where if v not in acked_values),
             "taken-by-request-faults": sum(d[1] for _, kind, d in history.events if kind == "request-fault")}
    return anomalies, stats


# -- the run -------------------------------------------------------------------------------------------------------

def seed_trio_scheduler(seed: int) -> None:
    """Make a run replay its interleavings as well as its faults: Trio shuffles runnable tasks with a private
    `random.Random` (`trio._core._run._r`, which pytest-trio also seeds); should Trio move it, runs replay their
    faults only."""
    scheduler_rng = getattr(trio._core._run, "_r", None)
    if isinstance(scheduler_rng, random.Random):
        scheduler_rng.seed(seed)


def run(seed: int, config: ChaosConfig = ChaosConfig(), *, stall_after: float = 20.0) -> ChaosResult:
    """One seed, start to check, on a fresh MockClock: never hangs (virtual time that stops is a liveness
    failure)."""
    started = time.perf_counter()
    history = History()
    seed_trio_scheduler(seed)
    clock = trio.testing.MockClock(autojump_threshold=0)
    liveness: list[str] = []
    final: FinalState | None = None
    try:
        final, liveness = run_with_watchdog(_Run(seed, config, history).main, stall_after=stall_after, clock=clock)
    except VirtualTimeStalled as exc:
        liveness = [f"virtual time stopped: {str(exc).splitlines()[0]}"]
    anomalies, stats = check(history, final) if final is not None else ([], {})
    failed_faults = [f"{t:.3f} s {d[0]}: {d[1]}" for t, kind, d in history.events if kind == "fault-failed"]
    stats["faults-failed"] = len(failed_faults)
    stats["faults-refused"] = sum(1 for _, kind, _ in history.events if kind == "fault-refused")
    return ChaosResult(seed, anomalies, liveness, history.schedule, history.digest(), clock.current_time(),
                       time.perf_counter() - started, stats, failed_faults)


class _Run:
    def __init__(self, seed: int, config: ChaosConfig, history: History) -> None:
        self.seed = seed
        self.config = config
        self.history = history
        self.rng = random.Random(seed)
        self.cluster: Cluster
        self.stopping = trio.Event()
        self.paused: set[int] = set()
        self.down: set[int] = set()
        self.extra_topics = 0

    async def main(self) -> tuple[FinalState | None, list[str]]:
        pin_epoch(EPOCH_S)
        config = self.config
        broker_config = {"zookeeper.session.timeout.ms": config.session_timeout_ms,
                         "replica.lag.time.max.ms": config.lag_time_ms, "auto.leader.rebalance.enable": False,
                         "unclean.leader.election.enable": config.unclean_leader_election,
                         "auto.create.topics.enable": False,
                         # parked fetches wake on new data anyway; a longer wait only saves idle rounds
                         "replica.fetch.wait.max.ms": min(2000, config.lag_time_ms)}
        async with Cluster(brokers=config.brokers, config=broker_config, seed=self.seed) as cluster:
            self.cluster = cluster
            await cluster.create_topic(TOPIC, config.partitions, min(3, config.brokers),
                                       {"min.insync.replicas": config.min_insync_replicas})
            async with trio.open_nursery() as workload:
                for index in range(config.producers):
                    workload.start_soon(self.produce, index)
                for index in range(config.consumers):
                    workload.start_soon(self.consume, index)
                workload.start_soon(self.watch_high_watermarks)
                await self.nemesis(config.duration_s)
                await self.heal_everything()
                await trio.sleep(config.heal_s)
                self.stopping.set()
            liveness = await self.await_liveness()
            if liveness:
                return None, liveness
            return await self.final_state(), []

    # -- workload -----------------------------------------------------------------------------------------------

    async def produce(self, index: int) -> None:
        name = f"producer-{index}"
        rng = random.Random(f"{self.seed}-{name}")
        producer_config = {"acks": self.config.acks, "client.id": name, "delivery.timeout.ms": 30000,
                           "request.timeout.ms": 5000, "max.block.ms": 10000, "linger.ms": 5}
        async with Producer(self.cluster, producer_config) as producer, trio.open_nursery() as awaiting:
            sequence = 0
            while not self.stopping.is_set():
                await trio.sleep(rng.expovariate(1 / self.config.send_interval_s))
                partition = rng.randrange(self.config.partitions)
                for _ in range(rng.randint(1, 4)):
                    value = f"{name}-{sequence}"
                    sequence += 1
                    try:
                        handle = await producer.send(TOPIC, value.encode(), partition=partition)
                    except KafkaError as exc:
                        self.history.failed.add(value)
                        self.history.record("send-failed", value, exc.error.name)
                        continue
                    awaiting.start_soon(self.await_ack, value, handle)
            await producer.flush()

    async def await_ack(self, value: str, handle: Any) -> None:
        try:
            metadata = await handle
        except KafkaError as exc:
            self.history.failed.add(value)
            self.history.record("failed", value, exc.error.name)
            return
        self.history.acked[value] = (metadata.partition, metadata.offset)
        self.history.record("acked", value, metadata.partition, metadata.offset)

    async def consume(self, index: int) -> None:
        name = f"consumer-{index}"
        consumer_config = {"auto.offset.reset": "earliest", "client.id": name, "request.timeout.ms": 5000,
                           "default.api.timeout.ms": 10000, "fetch.max.wait.ms": 2000}
        polls = self.history.polls[name]
        async with Consumer(self.cluster, consumer_config) as consumer:
            consumer.assign([TopicPartition(TOPIC, p) for p in range(self.config.partitions)])
            while not self.stopping.is_set():
                await self.poll_into(consumer, name, polls)
            await self.catch_up(consumer, name, polls)

    async def poll_into(self, consumer: Consumer, name: str, polls: list[tuple[int, int, str]]) -> None:
        try:
            records = await consumer.poll(2)
        except KafkaError as exc:
            self.history.record("poll-failed", name, exc.error.name)
            await trio.sleep(0.5)
            return
        for record in records:
            polls.append((record.partition, record.offset, (record.value or b"").decode()))
        if records:
            self.history.record("polled", name, len(records), records[-1].partition, records[-1].offset)

    async def catch_up(self, consumer: Consumer, name: str, polls: list[tuple[int, int, str]]) -> None:
        """After healing, read until every partition's position reaches its high watermark."""
        with trio.move_on_after(60):
            while True:
                behind = False
                for p in range(self.config.partitions):
                    hw = self.cluster.high_watermark(TOPIC, p)
                    try:
                        position = await consumer.position(TopicPartition(TOPIC, p))
                    except KafkaError:
                        behind = True
                        continue
                    behind = behind or hw < 0 or position < hw
                if not behind:
                    return
                await self.poll_into(consumer, name, polls)

    async def watch_high_watermarks(self) -> None:
        """What a client sees of each partition's high watermark (ListOffsets LATEST from its leader)."""
        while not self.stopping.is_set():
            await trio.sleep(2)
            for p in range(self.config.partitions):
                try:
                    offset = await self.cluster.list_offset(TOPIC, p)
                except KafkaError:
                    continue
                self.history.high_watermarks[p].append((trio.current_time(), offset))

    # -- nemesis ------------------------------------------------------------------------------------------------

    async def nemesis(self, duration: float) -> None:
        weights = {fault: w for fault, w in self.config.nemesis.items() if w > 0}
        end = trio.current_time() + duration
        async with trio.open_nursery() as faults:
            while weights and trio.current_time() < end:
                await trio.sleep(min(self.rng.expovariate(1 / self.config.fault_interval_s),
                                     max(end - trio.current_time(), 0)))
                if trio.current_time() >= end:
                    break
                fault = self.rng.choices(sorted(weights), [weights[f] for f in sorted(weights)])[0]
                duration_s = self.rng.uniform(0.5, 20)
                self.schedule(f"{fault} ({duration_s:.1f} s)")
                faults.start_soon(self.inject, fault, duration_s)
            faults.cancel_scope.cancel()

    def schedule(self, what: str) -> None:
        entry = f"{trio.current_time():8.3f} s  {what}"
        self.history.schedule.append(entry)
        self.history.record("fault", what)

    def live(self) -> list[int]:
        return [b for b in self.cluster.live_broker_ids if b not in self.down]

    async def inject(self, fault: str, duration_s: float) -> None:
        """One fault, undone after `duration_s` unless the nemesis ends first (healing undoes the rest)."""
        cluster, rng = self.cluster, self.rng
        live = self.live()
        try:
            if fault in ("kill", "shutdown") and len(live) > 1:
                victim = rng.choice(live)
                self.down.add(victim)
                if fault == "kill":
                    await cluster.kill_broker(victim)
                else:
                    await cluster.shutdown_broker(victim)
                await trio.sleep(duration_s)
                await self.restart(victim, retry=True)
            elif fault == "expire" and live:
                target = cluster.controller_id if rng.random() < 0.5 and cluster.controller_id else rng.choice(live)
                if target in live:
                    await cluster.expire_session(target)
            elif fault in ("pause-short", "pause-long", "zombie") and live:
                victim = cluster.controller_id if fault == "zombie" and cluster.controller_id in live else \
                    rng.choice(live)
                if victim in self.paused or victim is None:
                    return
                pause_s = rng.uniform(0.2, self.config.session_timeout_ms / 2000) if fault == "pause-short" else \
                    rng.uniform(self.config.session_timeout_ms / 1000 + 1, self.config.lag_time_ms / 1000 + 10)
                self.paused.add(victim)
                cluster.pause_broker(victim)
                await trio.sleep(pause_s)
                self.resume(victim)
            elif fault == "split":
                nodes: list[int | str] = [*cluster.broker_ids, COORDINATION]
                rng.shuffle(nodes)
                cut = rng.randrange(1, len(nodes))
                cluster.partition_network(nodes[:cut], nodes[cut:])
                await trio.sleep(duration_s)
                cluster.heal()
            elif fault == "cut-controller" and cluster.controller_id is not None:
                cluster.partition_network({cluster.controller_id}, {COORDINATION})
                await trio.sleep(min(duration_s, self.config.session_timeout_ms / 1000 * rng.choice([0.5, 2])))
                cluster.heal()
            elif fault == "cut-client":  # by name, which a producer may not have sent under yet: mark it a client
                client = ClientNode(rng.choice([f"producer-{i}" for i in range(self.config.producers)] or ["none"]))
                brokers = rng.sample(cluster.broker_ids, rng.randrange(1, len(cluster.broker_ids) + 1))
                cluster.partition_network({client}, brokers)
                await trio.sleep(duration_s)
                cluster.heal()
            elif fault == "reassign" and len(live) >= 3:
                tp = TopicPartition(TOPIC, rng.randrange(self.config.partitions))
                # a move; half the time followed at once, while it most likely still runs, by a new target or a
                # cancel (back to where it was)
                moves: list[list[int] | None] = [rng.sample(live, 3)]
                if rng.random() < 0.5:
                    moves.append(None if rng.random() < 0.5 else rng.sample(live, 3))

                async def alter(admin: Admin) -> None:
                    for target in moves:
                        await admin.alter_partition_reassignments({tp: target})

                await self.to_controller(alter)
            elif fault == "prefer":
                await self.to_controller(lambda admin: admin.elect_leaders("preferred"))
            elif fault == "create-topic" and live:
                self.extra_topics += 1
                await self.cluster_call(cluster.create_topic(f"extra-{self.extra_topics}", 2, min(3, len(live)),
                                                             timeout=10))
            elif fault == "lose-acks":  # appended, then the connection closed: the producer retries
                await self.for_a_while(duration_s, "Produce", drop="response", brokers=self.some_brokers())
            elif fault == "fail-requests":
                api = rng.choice(sorted(_RETRIABLE))
                action = rng.choice(["error", "drop", "delay"])
                await self.for_a_while(duration_s, api, brokers=self.some_brokers(),
                                       error=rng.choice(_RETRIABLE[api]) if action == "error" else None,
                                       drop="request" if action == "drop" else None,
                                       delay=rng.uniform(0.1, 6) if action == "delay" else 0.0)
            elif fault == "slow-replication":  # one leader answers its followers late, up to past the lag time
                await self.for_a_while(duration_s, "Fetch", delay=rng.uniform(0.1, self.config.lag_time_ms / 500),
                                       brokers=self.some_brokers(1), cluster_traffic=True)
            elif fault == "add-partitions" and self.extra_topics:
                topic = f"extra-{rng.randrange(1, self.extra_topics + 1)}"
                try:
                    count = len(await cluster.describe_topic(topic))
                except KafkaError:
                    return
                await self.cluster_call(cluster.create_partitions(topic, count + 1, timeout=10))
        except KafkaError as exc:  # the cluster refused an admin call under faults, as a Kafka cluster may
            self.history.record("fault-refused", fault, exc.error.name)
        except ValueError as exc:  # the nemesis asked for something the cluster does not have: ChaosResult.ok fails
            self.history.record("fault-failed", fault, f"{type(exc).__name__}: {exc}")

    def some_brokers(self, count: int | None = None) -> list[int]:
        brokers = self.cluster.broker_ids
        return self.rng.sample(brokers, count or self.rng.randrange(1, len(brokers) + 1))

    async def for_a_while(self, duration_s: float, api: str, **fault: Any) -> None:
        """A request fault on every matching request for `duration_s` (healing ends any still on)."""
        taken = self.cluster.fail_requests(api, times=None, **fault)
        self.schedule(f"  {api} {', '.join(f'{k}={v}' for k, v in fault.items() if v)}")
        try:
            await trio.sleep(duration_s)
        finally:
            taken.remove()
            self.history.record("request-fault", api, taken.hits)

    async def cluster_call(self, call: Any) -> None:
        try:
            await call
        except KafkaError as exc:
            self.history.record("admin-failed", exc.error.name)

    async def to_controller(self, call: Callable[[Admin], Awaitable[Any]]) -> None:
        """An admin request as a client makes it: found the controller through metadata, retried, given up on
        after 10 s (when the controller is paused, say)."""
        with trio.move_on_after(10):
            async with Admin(self.cluster, {"client.id": "chaos-admin"}) as admin:
                await call(admin)

    async def restart(self, broker: int, *, retry: bool = False) -> None:
        """Start the broker if it is down. One cut off the coordination service gives up starting after the session
        timeout; with `retry` it is started again until it comes up, as a process supervisor would. One whose port
        something else took while it was down (another sweep worker's broker, any socket's local port: the sweep's
        processes all bind port 0) moves to free ports, or the seed would fail on the machine, not the cluster."""
        new_ports = False
        while broker not in self.cluster.live_broker_ids:
            try:
                await self.cluster.restart_broker(broker, new_ports=new_ports)
            except CoordinationTimeoutError:
                if not retry:
                    raise
                self.history.record("restart-gave-up", broker)
            except OSError as exc:
                if exc.errno != errno.EADDRINUSE or new_ports:
                    raise
                self.history.record("restart-on-new-ports", broker)
                new_ports = True
        self.down.discard(broker)

    def resume(self, broker: int) -> None:
        if broker in self.paused:
            self.paused.discard(broker)
            if broker in self.cluster.live_broker_ids:
                self.cluster.resume_broker(broker)

    async def heal_everything(self) -> None:
        self.schedule("heal everything")
        self.cluster.heal()
        self.cluster.clear_request_faults()
        for broker in sorted(self.paused):
            self.resume(broker)
        for broker in self.cluster.broker_ids:
            await self.restart(broker)

    # -- the end ------------------------------------------------------------------------------------------------

    async def await_liveness(self) -> list[str]:
        """Within twice the session timeout of healing: a leader everywhere, and every replica in the ISR."""
        cluster = self.cluster
        limit = 2 * self.config.session_timeout_ms / 1000 + self.config.lag_time_ms / 1000

        def problems() -> list[str]:
            found = []
            if cluster.controller_id is None:
                return ["no active controller"]
            for p in range(self.config.partitions):
                state = cluster.partition_state(TOPIC, p)
                assignment = cluster.controller().context.partition_replica_assignment(TopicPartition(TOPIC, p))
                if cluster.leader_for(TOPIC, p) < 0:
                    found.append(f"partition {p} has no leader (state {state})")
                elif set(state.isr) != set(assignment):
                    found.append(f"partition {p}: ISR {list(state.isr)} of replicas {assignment}")
            return found

        with trio.move_on_after(limit):
            while problems():
                await trio.sleep(0.5)
        return [f"{limit:.0f} s after healing: {problem}" for problem in problems()]

    async def final_state(self) -> FinalState:
        return await final_state(self.cluster, TOPIC, range(self.config.partitions))


async def final_state(cluster: Cluster, topic: str, partitions: Iterable[int], *, timeout: float = 30) -> FinalState:
    """What `check` compares the history with, once the cluster is healed: each partition's committed log read
    from its leader, its high watermark, and every assigned replica's batches up to that high watermark, with
    its leader-epoch cache and log end offset."""
    logs, high_watermarks, replicas = {}, {}, {}
    for p in partitions:
        await cluster.wait_for_leader(topic, p, timeout=timeout)
        logs[p] = [(offset, (record.value or b"").decode()) for offset, record in await cluster.fetch_all(topic, p)]
        high_watermarks[p] = cluster.high_watermark(topic, p)
        tp = TopicPartition(topic, p)
        views = {}
        for broker in cluster.controller().context.partition_replica_assignment(tp):
            log = cluster.log_manager(broker).get_log(tp)
            if log is None:
                continue
            batches = [(b.base_offset, b.partition_leader_epoch, hashlib.sha1(b.payload).hexdigest()[:12])
                       for b in log.read(log.log_start_offset, 1 << 40, max_offset=high_watermarks[p])
                       ] if high_watermarks[p] > log.log_start_offset else []
            epochs = [(epoch, start) for epoch, start in log.leader_epoch_cache.epoch_entries()
                      if start < high_watermarks[p]]  # an epoch begun at the log's end holds nothing yet
            views[broker] = (batches, epochs, log.log_end_offset)
        replicas[p] = views
    return FinalState(logs, high_watermarks, replicas)


# -- sweeps --------------------------------------------------------------------------------------------------------

def sweep(seeds: Iterable[int], config: ChaosConfig = ChaosConfig(), *, workers: int = 1,
          on_result: Callable[[ChaosResult], None] | None = None) -> list[ChaosResult]:
    """Run many seeds, each in a child forked from this process as it is now, `workers` at a time; results in
    seed order.

    A child per seed, forked from one starting point, is what makes a seed's outcome its own: runs in one
    process would share the heap, and Trio orders some wake-ups by the addresses of its objects. `replay`
    runs a seed the same way."""
    context = multiprocessing.get_context("fork")
    pending, running = deque(seeds), {}
    results: dict[int, ChaosResult] = {}
    while pending or running:
        while pending and len(running) < max(workers, 1):
            seed = pending.popleft()
            receiver, sender = context.Pipe(duplex=False)
            child = context.Process(target=_run_in_child, args=(seed, config, sender), daemon=True)
            child.start()
            sender.close()
            running[receiver] = (seed, child)
        for receiver in multiprocessing.connection.wait(list(running)):
            seed, child = running.pop(receiver)  # type: ignore[index]
            try:
                result: ChaosResult = receiver.recv()  # type: ignore[union-attr]
            except EOFError:
                result = ChaosResult(seed, [], [f"the run's process died (exit code {child.exitcode})"], [], "", 0,
                                     0, {})
            child.join()
            results[seed] = result
            if on_result is not None:
                on_result(result)
    return [results[seed] for seed in sorted(results)]


def replay(seed: int, config: ChaosConfig = ChaosConfig()) -> ChaosResult:
    """One seed exactly as `sweep` runs it."""
    return sweep([seed], config)[0]


def _run_in_child(seed: int, config: ChaosConfig, sender: Any) -> None:
    logging.disable(logging.CRITICAL)
    sender.send(run(seed, config))
    sender.close()


def summary(results: Sequence[ChaosResult]) -> str:
    """Anomalies by kind, failing seeds, virtual and wall time: the table the offline sweep prints."""
    kinds: Counter[str] = Counter()
    seeds_by_kind: dict[str, list[int]] = defaultdict(list)
    for result in results:
        for kind in sorted({a.kind for a in result.anomalies} | ({"liveness"} if result.liveness else set())
                           | ({"fault-not-injected"} if result.failed_faults else set())):
            kinds[kind] += 1
            seeds_by_kind[kind].append(result.seed)
    walls = [r.wall_s for r in results] or [0.0]
    lines = [f"{len(results)} seeds, {sum(not r.ok for r in results)} failing",
             f"virtual time per seed {statistics.median([r.virtual_s for r in results] or [0]):.0f} s (median), "
             f"{min([r.virtual_s for r in results] or [0]):.0f} s (min); "
             f"wall time per seed median {statistics.median(walls):.2f} s, max {max(walls):.2f} s, "
             f"total {sum(walls):.0f} s",
             f"{'kind':<28}{'seeds':>8}  first seeds"]
    for kind, count in sorted(kinds.items()):
        lines.append(f"{kind:<28}{count:>8}  {seeds_by_kind[kind][:8]}")
    if not kinds:
        lines.append(f"{'(none)':<28}{0:>8}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kafkalite.testing.chaos", description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=100, help="how many seeds to run (default 100)")
    parser.add_argument("--first", type=int, default=0, help="the first seed (default 0)")
    parser.add_argument("--brokers", type=int, default=3, choices=(3, 5))
    parser.add_argument("--workers", type=int, default=0, help="processes (default: one per core)")
    parser.add_argument("--replay", type=int, help="run one seed and print its schedule and first anomaly")
    parser.add_argument("--negative-control", action="store_true",
                        help="acks=1, min ISR 1, unclean election: writes must be seen lost")
    parser.add_argument("--faults", help=f"the faults to draw, comma-separated (default all: {','.join(FAULTS)})")
    args = parser.parse_args(argv)
    chosen = FAULTS if args.faults is None else tuple(filter(None, args.faults.split(",")))
    unknown = sorted(set(chosen) - set(FAULTS))
    if unknown or not chosen:
        parser.error(f"--faults names {', '.join(unknown) or 'nothing'}; the faults are {', '.join(FAULTS)}")
    if "PYTHONHASHSEED" not in os.environ:  # runs replay only under the same string hashes: fix them
        os.execve(sys.executable, [sys.executable, "-m", "kafkalite.testing.chaos", *(argv or sys.argv[1:])],
                  {**os.environ, "PYTHONHASHSEED": "0"})
    config = ChaosConfig(brokers=args.brokers, nemesis=dict.fromkeys(chosen, 1.0))
    if args.negative_control:
        config = config.negative_control()
    logging.disable(logging.CRITICAL)
    if args.replay is not None:
        result = replay(args.replay, config)
        print(result.report())
        return 0 if result.ok else 1
    workers = args.workers or os.cpu_count() or 1
    results = sweep(range(args.first, args.first + args.seeds), config, workers=workers)
    print(summary(results))
    return 0 if all(r.ok for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
