"""Consumer groups end to end on a real cluster: assignors, rebalances, eviction, static members, commits."""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator
from typing import Any

import pytest
import trio

from kafkalite.client import Admin, Consumer, Producer
from kafkalite.cluster import ClientNode, Cluster
from kafkalite.common import errors
from kafkalite.common.records import Record
from kafkalite.common.types import TopicPartition

pytestmark = pytest.mark.usefixtures("autojump_clock")

GROUP_CLUSTER_CONFIG = {"offsets.topic.num.partitions": 5, "replica.lag.time.max.ms": 10000, "zookeeper.session.timeout.ms": 6000,
                        "group.min.session.timeout.ms": 1000}
ALL = {TopicPartition("events", p) for p in range(6)}


@pytest.fixture
async def cluster() -> AsyncIterator[Cluster]:
    async with Cluster(brokers=3, config=GROUP_CLUSTER_CONFIG, seed=5) as running:
        await running.create_topic("events", partitions=6, replication_factor=3)
        yield running


def member(cluster: Any, name: str, **config: Any) -> Consumer:
    return Consumer(cluster, {"group.id": "g", "client.id": name, "auto.offset.reset": "earliest",
                              "session.timeout.ms": 6000, "heartbeat.interval.ms": 1000, **config})


async def poll_until(consumers: list[Consumer], done: Any, timeout: float = 60) -> None:
    """Poll every consumer (as concurrently running applications would) until `done()` holds."""
    with trio.fail_after(timeout):
        while not done():
            async with trio.open_nursery() as nursery:
                for consumer in consumers:
                    nursery.start_soon(consumer.poll, 0.2)


def disjoint_and_covering(consumers: list[Consumer]) -> bool:
    assignments = [c.assignment() for c in consumers]
    return all(assignments) and sum(map(len, assignments)) == len(ALL) and set().union(*assignments) == ALL


async def rebalance_noting_failures(failing: Consumer, other: Consumer) -> list[Exception]:
    """Poll both until they split the partitions; the errors of `failing`'s polls (its callbacks') are kept and
    returned rather than raised."""
    failures: list[Exception] = []

    async def poll_noting_failures() -> None:
        try:
            await failing.poll(0.2)
        except RuntimeError as exc:
            failures.append(exc)

    with trio.fail_after(60):
        while not disjoint_and_covering([failing, other]):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(poll_noting_failures)
                nursery.start_soon(other.poll, 0.2)
    return failures


@pytest.mark.parametrize("strategy", ["range", "roundrobin", "sticky", "cooperative-sticky"])
async def test_three_consumers_split_six_partitions(autojump_clock: Any, cluster: Cluster, strategy: str) -> None:
    async with member(cluster, "a", partition_assignment_strategy=strategy) as a, \
            member(cluster, "b", partition_assignment_strategy=strategy) as b, \
            member(cluster, "c", partition_assignment_strategy=strategy) as c:
        for consumer in (a, b, c):
            consumer.subscribe(["events"])
        await poll_until([a, b, c], lambda: disjoint_and_covering([a, b, c]))
        assert sorted(len(x.assignment()) for x in (a, b, c)) == [2, 2, 2]



async def test_cooperative_sticky_keeps_unaffected_partitions(autojump_clock: Any, cluster: Cluster) -> None:
    revoked: dict[str, set[TopicPartition]] = {"a": set(), "b": set()}
    async with member(cluster, "a", partition_assignment_strategy="cooperative-sticky") as a, \
            member(cluster, "b", partition_assignment_strategy="cooperative-sticky") as b:
        a.subscribe(["events"], on_revoke=revoked["a"].update)
        b.subscribe(["events"], on_revoke=revoked["b"].update)
        async with member(cluster, "c", partition_assignment_strategy="cooperative-sticky") as c:
            c.subscribe(["events"])
            await poll_until([a, b, c], lambda: disjoint_and_covering([a, b, c]))
            kept_a, kept_b = a.assignment(), b.assignment()
            revoked["a"].clear()
            revoked["b"].clear()
        await poll_until([a, b], lambda: disjoint_and_covering([a, b]))
        assert kept_a <= a.assignment() and kept_b <= b.assignment()
        assert revoked == {"a": set(), "b": set()}  # nothing of theirs stopped while c's partitions moved
        assert sorted(len(x.assignment()) for x in (a, b)) == [3, 3]


async def crashed(consumer: Consumer, nursery: trio.Nursery) -> trio.CancelScope:
    """Run `consumer` polling in a task whose cancellation is a crash: no commit, no LeaveGroup."""
    scope = trio.CancelScope()

    async def run() -> None:
        with scope:
            async with consumer:
                consumer.subscribe(["events"])
                while True:
                    await consumer.poll(0.2)

    nursery.start_soon(run)
    return scope


async def test_a_crashed_consumer_is_evicted_after_its_session_timeout(autojump_clock: Any, cluster: Cluster) -> None:
    async with member(cluster, "a") as a, member(cluster, "b") as b, trio.open_nursery() as nursery:
        a.subscribe(["events"])
        b.subscribe(["events"])
        c = member(cluster, "c")
        scope = await crashed(c, nursery)
        await poll_until([a, b], lambda: len(a.assignment()) == len(b.assignment()) == 2)
        scope.cancel()
        crashed_at = trio.current_time()
        await poll_until([a, b], lambda: disjoint_and_covering([a, b]))
        assert trio.current_time() - crashed_at >= 5  # session.timeout.ms, from its last heartbeat


async def test_a_consumer_that_stops_polling_is_evicted_and_told(autojump_clock: Any, cluster: Cluster) -> None:
    from kafkalite.client import PollIntervalExceededError

    async with member(cluster, "a") as a, member(cluster, "b", max_poll_interval_ms=8000) as b:
        a.subscribe(["events"])
        b.subscribe(["events"])
        await poll_until([a, b], lambda: disjoint_and_covering([a, b]))
        stopped_at = trio.current_time()
        await poll_until([a], lambda: a.assignment() == ALL)  # b does not poll: it leaves, a takes everything
        assert trio.current_time() - stopped_at >= 8
        with pytest.raises(PollIntervalExceededError, match="max.poll.interval.ms"):
            await b.poll(0)
        await poll_until([a, b], lambda: disjoint_and_covering([a, b]))  # the poll after the error rejoins


async def test_a_static_member_restarting_within_its_session_keeps_its_partitions(autojump_clock: Any,
                                                                                   cluster: Cluster) -> None:
    async with member(cluster, "a", group_instance_id="a") as a, member(cluster, "b", group_instance_id="b") as b, \
            trio.open_nursery() as nursery:
        a.subscribe(["events"])
        b.subscribe(["events"])
        scope = await crashed(member(cluster, "c1", group_instance_id="c"), nursery)
        await poll_until([a, b], lambda: len(a.assignment()) == len(b.assignment()) == 2)
        generation, before = a._coordinator.generation, ALL - a.assignment() - b.assignment()  # type: ignore
        scope.cancel()
        await trio.sleep(2)  # well within the 6 s session
        async with member(cluster, "c2", group_instance_id="c") as c:
            c.subscribe(["events"])
            await poll_until([a, b, c], lambda: c.assignment() == before)
            await poll_until([a, b, c], lambda: trio.current_time() > 20)  # past the old session's end
            assert c.assignment() == before
            assert a._coordinator.generation == b._coordinator.generation == generation  # type: ignore


def coordinator_broker(cluster: Cluster, group_id: str) -> int:
    for broker_id in cluster.live_broker_ids:
        coordinator = cluster.broker(broker_id).group_coordinator
        if coordinator.group(group_id) is not None:
            return broker_id
    raise AssertionError(f"no broker coordinates {group_id}")


async def test_a_second_consumer_with_the_same_instance_id_fences_the_first(autojump_clock: Any,
                                                                          cluster: Cluster) -> None:
    """KIP-345: two consumers started with one group.instance.id (a copy-pasted config): the second takes the
    first's place and partitions without a rebalance; the first learns it at its next heartbeat, and its poll()
    raises FENCED_INSTANCE_ID naming the id, as Kafka's consumer raises FencedInstanceIdException."""
    async with member(cluster, "a", group_instance_id="i-1") as a:
        a.subscribe(["events"])
        await poll_until([a], lambda: a.assignment() == ALL)
        async with member(cluster, "b", group_instance_id="i-1") as b:
            b.subscribe(["events"])
            await poll_until([b], lambda: b.assignment() == ALL)
            with pytest.raises(errors.FencedInstanceIdError, match="group.instance.id i-1 is used by another"):
                with trio.fail_after(30):
                    while True:
                        await a.poll(0.5)
            assert a.assignment() == set() and b.assignment() == ALL
            async with Admin(cluster) as admin:
                described = (await admin.describe_groups(["g"]))["g"]
            assert described.state == "Stable" and [m.group_instance_id for m in described.members] == ["i-1"]
            await cluster.produce("events", 3, [Record(None, b"for b")])
            with trio.fail_after(30):
                while not (records := await b.poll(0.5)):
                    pass
            assert [(r.partition, r.value) for r in records] == [(3, b"for b")]


async def test_commits_survive_killing_the_coordinator_and_the_group_reforms(autojump_clock: Any,
                                                                             cluster: Cluster) -> None:
    async with member(cluster, "a", enable_auto_commit=False) as a, \
            member(cluster, "b", enable_auto_commit=False) as b:
        a.subscribe(["events"])
        b.subscribe(["events"])
        await poll_until([a, b], lambda: disjoint_and_covering([a, b]))
        offsets = {tp: 10 + tp.partition for tp in a.assignment()}
        await a.commit(offsets)
        await b.commit({tp: 20 + tp.partition for tp in b.assignment()})
        old = coordinator_broker(cluster, "g")
        await cluster.kill_broker(old)
        await poll_until([a, b], lambda: a._coordinator.coordinator_id not in (None, old)  # type: ignore
                         and disjoint_and_covering([a, b]) and a._coordinator.stable)  # type: ignore
        new = coordinator_broker(cluster, "g")
        assert new != old
        group = cluster.broker(new).group_coordinator.group("g")
        assert group is not None and group.state.value == "Stable" and len(group.members) == 2
        committed = await a.committed(ALL)
        assert {tp: o.offset for tp, o in committed.items() if o is not None} == {
            **offsets, **{tp: 20 + tp.partition for tp in ALL - set(offsets)}}
        await a.commit({tp: 100 for tp in a.assignment()})  # the new coordinator takes commits too
        assert {o.offset for o in (await b.committed(a.assignment())).values()} == {100}


@pytest.mark.usefixtures("kafkalite_watchdog")
async def test_a_member_waits_between_heartbeats_while_its_coordinator_is_dead() -> None:
    """Until the dead coordinator's session expires, the cluster still names it, so the member finds it again at
    once and its heartbeat fails at once; the heartbeat loop went round without waiting (virtual time stopped, a
    CPU spin on a real clock). As Kafka's failHeartbeat, the next heartbeat waits retry.backoff.ms."""
    async with Cluster(brokers=3, config={"replica.lag.time.max.ms": 10000}, seed=7) as cluster:
        await cluster.create_topic("t", partitions=1, replication_factor=3)
        async with Consumer(cluster, {"group.id": "g"}) as a:  # the defaults: a 45 s session, heartbeats every 3 s
            a.subscribe(["t"])
            with trio.move_on_after(10):
                while True:
                    await a.poll(1)
            old = coordinator_broker(cluster, "g")
            await cluster.kill_broker(old)
            with trio.fail_after(60):
                while not (a._coordinator.coordinator_id not in (None, old) and a._coordinator.stable  # type: ignore
                           and a.assignment() == {TopicPartition("t", 0)}):
                    await a.poll(1)
            await cluster.produce("t", 0, [Record(None, b"after")])
            with trio.fail_after(30):
                while not (records := await a.poll(0.5)):
                    pass
            assert [(r.partition, r.value) for r in records] == [(0, b"after")]


async def test_the_group_follows_its_coordinator_through_a_controlled_shutdown_and_back(autojump_clock: Any,
                                                                                     cluster: Cluster) -> None:
    """A rolling restart moves the group's offsets partition while its brokers stay up. The controlled shutdown
    hands leadership to another broker, which loads the group. The preferred election after the restart moves it
    back: the interim broker resigns while it keeps running, drops the group and answers NOT_COORDINATOR at once
    to a join parked in the rebalance it had started. The members follow each move, and no committed offset is
    lost or comes back from before a later commit."""
    async with member(cluster, "a", enable_auto_commit=False) as a, \
            member(cluster, "b", enable_auto_commit=False) as b, \
            member(cluster, "c", enable_auto_commit=False) as c:
        a.subscribe(["events"])
        b.subscribe(["events"])
        await poll_until([a, b], lambda: disjoint_and_covering([a, b]))
        await a.commit({tp: 10 + tp.partition for tp in a.assignment()})
        await b.commit({tp: 20 + tp.partition for tp in b.assignment()})
        expected = {tp: (10 if tp in a.assignment() else 20) + tp.partition for tp in ALL}
        first = coordinator_broker(cluster, "g")

        async def settled_on(broker_id: int, consumers: list[Consumer]) -> None:
            await poll_until(consumers, lambda: all(
                consumer._coordinator.coordinator_id == broker_id for consumer in consumers)  # type: ignore
                and disjoint_and_covering(consumers) and a._coordinator.stable)  # type: ignore
            loaded = cluster.broker(broker_id).group_coordinator.group("g")
            assert loaded is not None and len(loaded.members) == len(consumers)
            committed = await b.committed(ALL)
            assert {tp: o.offset for tp, o in committed.items() if o is not None} == expected

        assert await cluster.shutdown_broker(first)
        await cluster.wait_until(lambda: any(cluster.broker(n).group_coordinator.group("g") is not None
                                             for n in cluster.live_broker_ids), timeout=10)  # it loads the group
        interim = coordinator_broker(cluster, "g")
        assert interim != first
        await settled_on(interim, [a, b])
        expected |= {tp: 30 + tp.partition for tp in a.assignment()}
        await a.commit({tp: expected[tp] for tp in a.assignment()})  # the interim coordinator takes commits

        await cluster.restart_broker(first)
        await cluster.wait_until(lambda: all(first in cluster.partition_state("__consumer_offsets", p).isr
                                             for p in range(5)), timeout=60)
        group = cluster.broker(interim).group_coordinator.group("g")
        c.subscribe(["events"])
        async with trio.open_nursery() as nursery:
            nursery.start_soon(c.poll, 30)  # c's join parks: a and b have not rejoined, as they are not polling
            await cluster.wait_until(lambda: group is not None and group.state.value == "PreparingRebalance"
                                     and any(m.join_waiter is not None for m in group.members.values()))
            await cluster.elect_preferred_leaders()
            await cluster.wait_until(lambda: cluster.broker(interim).group_coordinator.group("g") is None)
            await settled_on(first, [a, b, c])


async def test_at_least_once_through_a_broker_kill_and_a_consumer_restart(autojump_clock: Any,
                                                                          cluster: Cluster) -> None:
    from kafkalite.client import Producer

    values = [b"%d" % i for i in range(600)]
    processed: list[bytes] = []

    async def consume_until(consumer: Consumer, stop: Any) -> None:
        consumer.subscribe(["events"])
        while not stop():
            records = await consumer.poll(0.5)
            processed.extend(r.value for r in records)  # type: ignore[misc]
            if records:
                await consumer.commit()  # after processing: nothing processed-but-uncommitted is lost

    async with Producer(cluster, linger_ms=0) as producer:
        for value in values[:300]:
            await producer.send("events", value, key=value)
        await producer.flush()
    cfg = {"enable.auto.commit": False, "max.poll.records": 50}
    async with member(cluster, "a", **cfg) as a, trio.open_nursery() as nursery:
        nursery.start_soon(consume_until, a, lambda: len(set(processed)) >= len(values))
        first = member(cluster, "b1", **cfg)
        scope = trio.CancelScope()

        async def run_first() -> None:
            with scope:
                async with first:
                    await consume_until(first, lambda: False)

        nursery.start_soon(run_first)
        await trio.sleep(1)
        scope.cancel()  # b1 crashes mid-stream, with records processed since its last commit or not
        await cluster.kill_broker(coordinator_broker(cluster, "g"))
        async with Producer(cluster, linger_ms=0) as producer:
            for value in values[300:]:
                await producer.send("events", value, key=value)
            await producer.flush()
        async with member(cluster, "b2", **cfg) as b2:
            with trio.fail_after(120):
                await consume_until(b2, lambda: len(set(processed)) >= len(values))
    assert set(processed) == set(values)


async def test_a_pattern_subscription_picks_up_a_topic_created_later(autojump_clock: Any, cluster: Cluster) -> None:
    async with member(cluster, "a", metadata_max_age_ms=2000) as a:
        a.subscribe(pattern=r"ev.*")
        await poll_until([a], lambda: a.assignment() == ALL)
        await cluster.create_topic("evolved", partitions=2, replication_factor=1)
        await cluster.create_topic("other", partitions=1, replication_factor=1)
        await poll_until([a], lambda: a.assignment() == ALL | {TopicPartition("evolved", 0),
                                                              TopicPartition("evolved", 1)})
        assert a.subscription() == {"events", "evolved"}


@pytest.mark.parametrize("auto_create", [True, False])
async def test_a_subscription_to_a_topic_that_does_not_exist_yet_reads_it_once_it_does(
        autojump_clock: Any, auto_create: bool) -> None:
    """The leader assigns what metadata shows when the group forms: nothing, for a topic not created yet or still
    being created by the consumer's own Metadata request (auto.create.topics.enable). Metadata that left the topic
    incomplete is asked again within a second, not after metadata.max.age.ms (5 minutes), so the group rebalances
    and reads the topic as soon as it exists, as with Kafka's consumer."""
    config = {**GROUP_CLUSTER_CONFIG, "auto.create.topics.enable": auto_create}
    async with Cluster(brokers=3, config=config, seed=5) as cluster, member(cluster, "a") as a:
        a.subscribe(["later"])
        assert await a.poll(2) == [] and a.assignment() == set()
        assert ("later" in cluster.topics()) == auto_create
        if not auto_create:
            await cluster.create_topic("later", partitions=1, replication_factor=3)  # as num.partitions makes it
        await cluster.wait_until(lambda: cluster.leader_for("later", 0) >= 0)
        await cluster.produce("later", 0, [Record(None, b"first")])
        created = trio.current_time()
        with trio.fail_after(30):
            while not (records := await a.poll(0.5)):
                pass
        assert [(r.partition, r.offset, r.value) for r in records] == [(0, 0, b"first")]
        assert trio.current_time() - created < 2.5  # a metadata refresh, a rebalance and a fetch
        assert a.assignment() == {TopicPartition("later", 0)}


async def test_a_metadata_answer_that_fails_the_topic_delays_the_assignment_only_briefly(autojump_clock: Any,
                                                                                          cluster: Cluster) -> None:
    """LEADER_NOT_AVAILABLE in the answer the leader assigns from gives an empty assignment; the topic is asked for
    again after retry.backoff.ms, and the group rebalances onto every partition."""
    await cluster.produce("events", 0, [Record(None, b"x")])
    fault = cluster.fail_requests("Metadata", errors.LEADER_NOT_AVAILABLE, topics=["events"], times=2)
    async with member(cluster, "a") as a:
        a.subscribe(["events"])
        with trio.fail_after(5):
            while not (records := await a.poll(0.5)):
                pass
        assert [(r.partition, r.value) for r in records] == [(0, b"x")] and a.assignment() == ALL
    assert fault.hits == 2


async def test_auto_commit_commits_every_interval_without_holding_up_poll(autojump_clock: Any,
                                                                          cluster: Cluster) -> None:
    """enable.auto.commit: poll() commits the positions every auto.commit.interval.ms, in the background as Kafka's
    consumer does. A coordinator slow to answer holds up neither the records nor poll()'s timeout; the commit lands
    when it answers, and the next one goes out after it."""
    first = TopicPartition("events", 0)

    async def committed() -> int | None:
        found = (await a.committed([first]))[first]
        return None if found is None else found.offset

    await cluster.produce("events", 0, [Record(None, b"a")])
    async with member(cluster, "a", auto_commit_interval_ms=1000) as a:
        a.subscribe(["events"])
        with trio.fail_after(30):
            while not await a.poll(0.5):
                pass
            while await committed() != 1:
                await a.poll(0.5)
        held = cluster.fail_requests("OffsetCommit", delay=4)  # within the session: heartbeats queue behind it
        await cluster.produce("events", 0, [Record(None, b"b")])
        await trio.sleep(1)  # an auto-commit is due at the next poll
        started = trio.current_time()
        records = await a.poll(0.5)
        assert [r.value for r in records] == [b"b"] and trio.current_time() - started < 0.1
        assert held.hits == 1  # the due commit went out, and waits for the coordinator
        with trio.fail_after(60):
            while await committed() != 2:
                await a.poll(0.5)
        assert trio.current_time() - started >= 4  # after the held one


async def test_a_closing_consumer_commits_its_positions(autojump_clock: Any, cluster: Cluster) -> None:
    for p in range(6):
        await cluster.produce("events", p, [Record(None, b"x")] * 3)
    async with member(cluster, "a") as a:
        a.subscribe(["events"])
        seen = 0
        with trio.fail_after(30):
            while seen < 18:
                seen += len(await a.poll(0.5))
    async with member(cluster, "b") as b:
        assert {o.offset for o in (await b.committed(ALL)).values() if o is not None} == {3}
        b.subscribe(["events"])
        assert await b.poll(2) == []  # starts at the committed offsets: nothing is read twice


async def test_commit_async_commits_the_positions_of_the_call_and_reports_each_outcome(
        autojump_clock: Any, cluster: Cluster, caplog: pytest.LogCaptureFixture) -> None:
    """commit_async() takes the positions when it is called, not when the commit goes out; `on_complete` gets None,
    or the error commit() would raise; without it a failure is logged, and the consumer reads on either way."""
    for p in range(6):
        await cluster.produce("events", p, [Record(None, b"x")] * 3)
    outcomes: list[errors.KafkaError | None] = []

    async def outcome(count: int) -> None:
        with trio.fail_after(30):
            while len(outcomes) < count:
                await trio.sleep(0.01)

    first, nowhere = TopicPartition("events", 0), TopicPartition("nowhere", 0)
    async with member(cluster, "a", enable_auto_commit=False) as a:
        a.subscribe(["events"])
        seen = 0
        with trio.fail_after(30):
            while seen < 18:
                seen += len(await a.poll(0.5))
        a.commit_async(on_complete=outcomes.append)
        a.seek(first, 1)  # after the call: not what it commits
        await outcome(1)
        assert outcomes == [None]
        assert {tp: o.offset for tp, o in (await a.committed(ALL)).items() if o is not None} == dict.fromkeys(ALL, 3)

        a.commit_async({first: 2}, on_complete=outcomes.append)
        a.commit_async({}, on_complete=outcomes.append)  # nothing, as commit({}) does
        await outcome(3)
        assert outcomes[1:] == [None, None]
        committed = await a.committed(ALL)
        assert {tp: o.offset for tp, o in committed.items() if o is not None} == {**dict.fromkeys(ALL, 3), first: 2}

        a.commit_async({nowhere: 1}, on_complete=outcomes.append)
        await outcome(4)
        assert isinstance(outcomes[3], errors.UnknownTopicOrPartitionError)
        with caplog.at_level(logging.WARNING, logger="kafkalite.client.consumer_coordinator"):
            a.commit_async({nowhere: 1})
            with trio.fail_after(30):
                while "asynchronous commit failed" not in caplog.text:
                    await trio.sleep(0.01)
        assert "UNKNOWN_TOPIC_OR_PARTITION" in caplog.text

        with pytest.raises(TypeError, match=r"commit_async\(\) takes a mapping"):
            a.commit_async([first])  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="offset"):
            a.commit_async({first: -1})
        with pytest.raises(TypeError, match=r"commit_async\(\) takes a TopicPartition"):
            a.commit_async({"events": 1})  # type: ignore[dict-item]
        assert len(outcomes) == 4  # none of them went out
        await cluster.produce("events", 1, [Record(None, b"after")])
        with trio.fail_after(30):
            while not (records := await a.poll(0.5)):
                pass
        assert [(r.partition, r.offset, r.value) for r in records] == [(1, 3, b"after")]
    async with Consumer(cluster, {"auto.offset.reset": "earliest"}) as groupless:
        with pytest.raises(errors.InvalidGroupIdError, match="commit_async"):
            groupless.commit_async({first: 1})


async def test_commits_reach_the_coordinator_in_the_order_they_were_made(autojump_clock: Any,
                                                                         cluster: Cluster) -> None:
    """As Kafka's commitAsync: commits go out in the order they were made and their callbacks run in that order, so
    the last made is the one kept, whichever task the scheduler runs first; a commit() waits for the earlier ones,
    and one cancelled while it waited holds up none of the later ones."""
    first = TopicPartition("events", 0)
    async with member(cluster, "a", enable_auto_commit=False) as a:
        a.assign([first])
        for round_ in range(10):
            done: list[int] = []
            for n in range(1, 4):
                a.commit_async({first: 10 * round_ + n}, on_complete=lambda _, n=n: done.append(n))  # type: ignore
            await a.commit({first: 10 * round_ + 4})
            assert done == [1, 2, 3], round_
            assert (await a.committed([first]))[first].offset == 10 * round_ + 4  # type: ignore[union-attr]

        held = cluster.fail_requests("OffsetCommit", delay=5, client_id="a")
        outcomes: list[tuple[int, errors.KafkaError | None]] = []
        a.commit_async({first: 101}, on_complete=lambda error: outcomes.append((101, error)))
        with trio.move_on_after(1) as waited:
            await a.commit({first: 102})  # behind the held one: cancelled before its turn, never sent
        assert waited.cancelled_caught
        a.commit_async({first: 103}, on_complete=lambda error: outcomes.append((103, error)))
        with trio.fail_after(30):
            while len(outcomes) < 2:
                await trio.sleep(0.1)
        assert outcomes == [(101, None), (103, None)] and held.hits == 1
        assert (await a.committed([first]))[first].offset == 103  # type: ignore[union-attr]


async def test_commit_and_committed_retry_coordinator_errors_and_raise_the_others(autojump_clock: Any,
                                                                                   cluster: Cluster) -> None:
    """A coordinator that moved or is loading is looked up and asked again; an error no retry cures reaches the
    caller with the broker's message (a stale generation also makes the next poll rejoin); a coordinator that
    never answers ends in REQUEST_TIMED_OUT after default.api.timeout.ms, naming the last error."""
    for p in range(6):
        await cluster.produce("events", p, [Record(None, b"x")] * 2)
    first = TopicPartition("events", 0)
    async with member(cluster, "a", enable_auto_commit=False, default_api_timeout_ms=20000) as a:
        a.subscribe(["events"])
        seen = 0
        with trio.fail_after(30):
            while seen < 12:
                seen += len(await a.poll(0.5))
        moved = cluster.fail_requests("OffsetCommit", errors.NOT_COORDINATOR, times=2)
        await a.commit()
        assert moved.hits == 2
        loading = cluster.fail_requests("OffsetFetch", errors.COORDINATOR_LOAD_IN_PROGRESS, times=2)
        assert {tp: o.offset for tp, o in (await a.committed(ALL)).items() if o is not None} == dict.fromkeys(ALL, 2)
        assert loading.hits == 2
        cluster.fail_requests("OffsetFetch", errors.INVALID_GROUP_ID, message="no such group here")
        with pytest.raises(errors.InvalidGroupIdError, match="no such group here"):
            await a.committed([first])

        cluster.fail_requests("OffsetCommit", errors.ILLEGAL_GENERATION, message="generation 0 is over")
        with pytest.raises(errors.IllegalGenerationError, match="commit of events-0 .* generation 0 is over"):
            await a.commit({first: 1})
        with trio.fail_after(30):  # rejoins, and holds every partition again
            while not (a.assignment() == ALL and await a.poll(0.1) == []):
                pass
        await a.commit({first: 1})
        assert (await a.committed([first]))[first].offset == 1  # type: ignore[union-attr]

        gone = cluster.fail_requests("OffsetCommit", errors.COORDINATOR_NOT_AVAILABLE, times=None)
        started = trio.current_time()
        with pytest.raises(errors.RequestTimedOutError, match="after 20000 ms; last error: COORDINATOR_NOT_AVAILABLE"):
            await a.commit({first: 2})
        assert trio.current_time() - started == pytest.approx(20, abs=0.5) and gone.hits > 1
        gone.remove()
        await a.commit({first: 2})
        assert (await a.committed([first]))[first].offset == 2  # type: ignore[union-attr]


@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
async def test_a_commit_in_on_revoke_is_stored_and_the_next_owner_starts_there(autojump_clock: Any, cluster: Cluster,
                                                                              strategy: str) -> None:
    """Kafka's at-least-once pattern without auto-commit. on_revoke runs while the member still belongs to the
    generation it consumed in (Kafka's onJoinPrepare; for cooperative, onJoinComplete once the new generation is
    stable), so its commit is accepted and the partitions' new owner starts after what was processed."""
    async with Producer(cluster) as producer:
        for index in range(18):
            await producer.send("events", b"v%d" % index, partition=index % 6)
    async with member(cluster, "a", enable_auto_commit=False, partition_assignment_strategy=strategy) as a, \
            member(cluster, "b", enable_auto_commit=False, partition_assignment_strategy=strategy) as b:
        revoked: list[set[TopicPartition]] = []

        async def commit_then_give_up(partitions: set[TopicPartition]) -> None:
            await a.commit()
            revoked.append(partitions)

        a.subscribe(["events"], on_revoke=commit_then_give_up)
        read: list[Any] = []
        with trio.fail_after(30):
            while len(read) < 18:
                read += await a.poll(0.2)
        b.subscribe(["events"])
        await poll_until([a, b], lambda: disjoint_and_covering([a, b]))
        moved = b.assignment()
        assert moved <= set().union(*revoked)
        committed = await b.committed(moved)
        assert {tp: c.offset for tp, c in committed.items() if c is not None} == {tp: 3 for tp in moved}
        assert {tp: await b.position(tp) for tp in moved} == {tp: 3 for tp in moved}


@pytest.mark.parametrize("instance_id", [None, "a-static"])
async def test_a_member_dropped_while_its_on_revoke_ran_long_keeps_what_it_rejoins_with(
        autojump_clock: Any, cluster: Cluster, instance_id: str | None) -> None:
    """An eager on_revoke that outlasts the rebalance timeout: the group goes on without the member (a dynamic one
    is dropped, a static one left out of the sync), whose heartbeat learns it meanwhile. Its partitions were
    given up by on_revoke already, so when it rejoins, the partitions of its new generation are its own, not
    handed to on_lost, and none is left unread."""
    calls: list[tuple[str, set[TopicPartition]]] = []

    async def slow_revoke(partitions: set[TopicPartition]) -> None:
        calls.append(("revoke", partitions))
        if len(calls) == 1:
            await trio.sleep(10)  # past max.poll.interval.ms, the rebalance timeout; within the session

    config = {"max.poll.interval.ms": 5000, "session.timeout.ms": 30000}
    async with member(cluster, "a", **config, group_instance_id=instance_id) as a, member(cluster, "b", **config) as b:
        a.subscribe(["events"], on_revoke=slow_revoke, on_lost=lambda partitions: calls.append(("lost", partitions)),
                    on_assign=lambda partitions: calls.append(("assign", partitions)))
        await poll_until([a], lambda: a.assignment() == ALL)
        calls.clear()
        b.subscribe(["events"])
        async def poll_long() -> None:  # a poll whose timeout outlasts the callback and the join after it
            while True:
                await a.poll(30)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(poll_long)
            await poll_until([b], lambda: calls and calls[-1][0] == "assign" and disjoint_and_covering([a, b]))
            await trio.sleep(5)
            nursery.cancel_scope.cancel()
        assert [kind for kind, _ in calls if kind == "lost"] == []
        assert disjoint_and_covering([a, b])


@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
async def test_closing_while_a_poll_is_in_on_revoke_waits_for_it(autojump_clock: Any, cluster: Cluster,
                                                                 strategy: str) -> None:
    """A consumer closed from another task while its poll runs on_revoke: close() waits for the callback, whose
    commit is for the generation the member consumed in, before leaving the group (which would refuse the
    commit), and does not run it again over the same partitions meanwhile."""
    async with Producer(cluster) as producer:
        for index in range(18):
            await producer.send("events", b"v%d" % index, partition=index % 6)
    calls: list[set[TopicPartition]] = []
    running, overlapped = [0], [False]
    in_revoke = trio.Event()
    config = {"enable_auto_commit": False, "partition_assignment_strategy": strategy}
    async with member(cluster, "b", **config) as b:
        polled: list[BaseException] = []

        async def poll_until_closed(consumer: Consumer) -> None:
            try:
                while True:
                    await consumer.poll(0.2)
            except RuntimeError as exc:
                polled.append(exc)

        async with trio.open_nursery() as nursery:
            async with member(cluster, "a", **config) as a:
                async def slow_revoke(partitions: set[TopicPartition]) -> None:
                    calls.append(partitions)
                    running[0] += 1
                    overlapped[0] = overlapped[0] or running[0] > 1
                    in_revoke.set()
                    await trio.sleep(5)  # processing the last records
                    await a.commit()
                    running[0] -= 1

                a.subscribe(["events"], on_revoke=slow_revoke)
                read: list[Any] = []
                with trio.fail_after(30):
                    while len(read) < 18:
                        read += await a.poll(0.2)
                b.subscribe(["events"])
                nursery.start_soon(poll_until_closed, a)
                nursery.start_soon(poll_until, [b], lambda: False, 3600)
                with trio.fail_after(60):
                    await in_revoke.wait()
                await trio.sleep(1)
            await trio.sleep(10)
            committed = await b.committed(ALL)
            nursery.cancel_scope.cancel()
    assert not overlapped[0]
    assert set().union(*calls) == ALL and sum(map(len, calls)) == len(ALL)  # each partition revoked once
    assert {tp: c.offset for tp, c in committed.items() if c is not None} == {tp: 3 for tp in ALL}
    assert len(polled) == 1  # the closed consumer's poll says so, whichever step of the rebalance it was in


async def test_unsubscribing_in_on_revoke_leaves_the_group(autojump_clock: Any, cluster: Cluster) -> None:
    """An application that unsubscribes from inside its on_revoke (its last partitions given up): the poll that
    ran the callback does not go on to join again with nothing subscribed, and the group goes on without it."""
    async with member(cluster, "a") as a, member(cluster, "b") as b:
        async def unsubscribe_on_revoke(partitions: set[TopicPartition]) -> None:
            await a.unsubscribe()

        a.subscribe(["events"], on_revoke=unsubscribe_on_revoke)
        await poll_until([a], lambda: a.assignment() == ALL)
        b.subscribe(["events"])
        await poll_until([a, b], lambda: b.assignment() == ALL)
        assert a.assignment() == set() and a.subscription() == set()
        async with Admin(cluster) as admin:
            assert [m.client_id for m in (await admin.describe_groups(["g"]))["g"].members] == ["b"]


async def test_a_cooperative_on_revoke_that_raises_still_gives_the_partitions_up(autojump_clock: Any,
                                                                                cluster: Cluster) -> None:
    """As Kafka's onJoinComplete: the error reaches the poll, after the generation's assignment is in place (the
    revoked partitions are no longer the member's) and the rejoin that hands them on is asked for."""
    revokes: list[set[TopicPartition]] = []

    async def failing_revoke(partitions: set[TopicPartition]) -> None:
        revokes.append(partitions)
        if len(revokes) == 1:
            raise RuntimeError("the application failed while giving partitions up")

    strategy = {"partition_assignment_strategy": "cooperative-sticky"}
    async with member(cluster, "a", **strategy) as a, member(cluster, "b", **strategy) as b:
        a.subscribe(["events"], on_revoke=failing_revoke)
        await poll_until([a], lambda: a.assignment() == ALL)
        b.subscribe(["events"])
        failures = await rebalance_noting_failures(a, b)
        assert [str(f) for f in failures] == ["the application failed while giving partitions up"]
        assert len(a.assignment()) == len(b.assignment()) == 3


async def test_an_eager_on_revoke_that_raises_is_raised_once_and_the_join_goes_on(autojump_clock: Any,
                                                                                   cluster: Cluster) -> None:
    """As Kafka's onJoinPrepare: the partitions are given up all the same, the error reaches that poll only, and
    the next poll rejoins, instead of calling the callback again at every poll while the group waits."""
    revokes: list[set[TopicPartition]] = []
    failing = [True]

    def failing_revoke(partitions: set[TopicPartition]) -> None:
        revokes.append(partitions)
        if failing[0]:
            raise RuntimeError("the application failed while giving partitions up")

    async with member(cluster, "a") as a, member(cluster, "b") as b:
        a.subscribe(["events"], on_revoke=failing_revoke)
        await poll_until([a], lambda: a.assignment() == ALL)
        b.subscribe(["events"])
        failures = await rebalance_noting_failures(a, b)
        assert revokes == [ALL] and len(failures) == 1
        failing[0] = False  # leaving the block revokes a's partitions once more


async def test_an_on_revoke_that_raises_as_the_consumer_closes_is_raised_once_it_closed(autojump_clock: Any,
                                                                                        cluster: Cluster) -> None:
    """As Kafka's close(): the consumer stops its tasks, then raises the callback's error, which used to escape
    before the consumer's nursery was left and corrupt Trio's task tree. As in Kafka, a failed onLeavePrepare
    sends no LeaveGroup: the group hands the partitions on when the member's session ends."""
    def failing_revoke(partitions: set[TopicPartition]) -> None:
        raise RuntimeError("the application failed while giving partitions up")

    with pytest.raises(RuntimeError, match="failed while giving partitions up"):
        async with member(cluster, "a") as a:
            a.subscribe(["events"], on_revoke=failing_revoke)
            await poll_until([a], lambda: a.assignment() == ALL)
    async with member(cluster, "b") as b:
        b.subscribe(["events"])
        await poll_until([b], lambda: b.assignment() == ALL, timeout=30)
        async with Admin(cluster) as admin:
            assert [m.client_id for m in (await admin.describe_groups(["g"]))["g"].members] == ["b"]


async def test_the_partitions_of_a_subscribed_topic_that_is_deleted_leave_the_assignment(autojump_clock: Any,
                                                                                         cluster: Cluster) -> None:
    """Once the cluster no longer knows a subscribed topic, the group assigns again without its partitions,
    instead of leaving them with members that can no longer read them. (With auto-creation allowed, as by
    default in Kafka too, the members' metadata requests create the topic again, with one partition.)"""
    await cluster.create_topic("gone", partitions=2, replication_factor=3)
    gone = {TopicPartition("gone", p) for p in range(2)}
    config = {"metadata.max.age.ms": 5000, "allow.auto.create.topics": False}  # else their metadata creates it again
    async with member(cluster, "a", **config) as a, member(cluster, "b", **config) as b:
        a.subscribe(["events", "gone"])
        b.subscribe(["events", "gone"])
        await poll_until([a, b], lambda: a.assignment() | b.assignment() == ALL | gone)
        await cluster.delete_topic("gone")
        await poll_until([a, b], lambda: a.assignment() | b.assignment() == ALL, timeout=60)
        assert disjoint_and_covering([a, b])


async def test_an_unsubscribed_consumer_leaves_the_group_and_its_partitions_move(autojump_clock: Any,
                                                                                cluster: Cluster) -> None:
    """As Kafka's: on_revoke first, with what a owned, so that an application committing there loses nothing."""
    async with member(cluster, "a") as a, member(cluster, "b") as b:
        revoked: list[set[TopicPartition]] = []
        a.subscribe(["events"], on_revoke=revoked.append)
        b.subscribe(["events"])
        await poll_until([a, b], lambda: disjoint_and_covering([a, b]))
        owned = a.assignment()
        revoked.clear()  # the rebalance when b joined revoked a's partitions once already
        await a.unsubscribe()
        assert revoked == [owned]
        assert a.assignment() == set() and a.subscription() == set()
        await poll_until([a, b], lambda: b.assignment() == ALL, timeout=3)  # a left: no wait for its session to end
        assert a.assignment() == set()  # polling did not make it rejoin
        async with Admin(cluster) as admin:
            described = (await admin.describe_groups(["g"]))["g"]
        assert described.state == "Stable" and [m.client_id for m in described.members] == ["b"]
        a.assign([TopicPartition("events", 0)])  # by hand now, as Kafka allows after unsubscribe()
        assert a.assignment() == {TopicPartition("events", 0)}


async def test_group_admin_calls_ride_out_a_coordinator_that_moved_or_is_loading(autojump_clock: Any,
                                                                                 cluster: Cluster) -> None:
    """As Kafka's admin client: NOT_COORDINATOR and COORDINATOR_LOAD_IN_PROGRESS, on the whole answer or on one group
    or partition of it, are asked again of the coordinator found afresh, however many come in a row (a group read
    just after its coordinator failed over), until default.api.timeout.ms; then REQUEST_TIMED_OUT names the last."""
    first = TopicPartition("events", 0)
    async with member(cluster, "a") as a:
        a.subscribe(["events"])
        await poll_until([a], lambda: a.assignment() == ALL)
    async with Admin(cluster, {"default.api.timeout.ms": 20000}) as admin:
        calls = [("DescribeGroups", lambda: admin.describe_groups(["g"])),  # per group
                 ("OffsetCommit", lambda: admin.alter_group_offsets("g", {first: 2})),  # per partition
                 ("OffsetFetch", lambda: admin.list_group_offsets("g"))]  # on the whole answer
        for api, call in calls:
            moved = cluster.fail_requests(api, errors.NOT_COORDINATOR, times=3)
            await call()
            assert moved.hits == 3, api
        loading = cluster.fail_requests("DescribeGroups", errors.COORDINATOR_LOAD_IN_PROGRESS, times=2)
        assert (await admin.describe_groups(["g"]))["g"].state == "Empty" and loading.hits == 2
        assert (await admin.list_group_offsets("g"))[first].committed == 2
        gone = cluster.fail_requests("DeleteGroups", errors.NOT_COORDINATOR, times=None)
        with pytest.raises(errors.RequestTimedOutError,
                           match="delete_groups timed out after 20000 ms; last error: NOT_COORDINATOR"):
            await admin.delete_groups(["g"])
        gone.remove()
        await admin.delete_groups(["g"])
        assert (await admin.describe_groups(["g"]))["g"].state == "Dead"


async def test_a_group_over_tcp(autojump_clock: Any, cluster: Cluster) -> None:
    servers = cluster.bootstrap_servers
    async with member(servers, "a") as a, member(servers, "b") as b:
        a.subscribe(["events"])
        b.subscribe(["events"])
        await poll_until([a, b], lambda: disjoint_and_covering([a, b]))
        await a.commit({tp: 1 for tp in a.assignment()})
        assert {o.offset for o in (await b.committed(a.assignment())).values()} == {1}


def open_sockets() -> int:
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            count += os.readlink(f"/proc/self/fd/{fd}").startswith("socket:")
        except FileNotFoundError:  # the listing's own descriptor, closed already
            pass
    return count


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts sockets through /proc")
async def test_a_group_member_over_tcp_closes_both_its_connections(autojump_clock: Any, cluster: Cluster) -> None:
    """Its fetches and its coordinator each have a connection; closing the consumer left the second one open (a
    ResourceWarning at collection), and the broker's end of it served nobody."""
    servers = cluster.bootstrap_servers
    before = open_sockets()
    async with member(servers, "a") as a:
        a.subscribe(["events"])
        await poll_until([a], lambda: a.assignment() == ALL)
        assert open_sockets() >= before + 4  # both ends of two connections, in this one process
    await trio.sleep(1)  # the broker sees each connection end
    assert open_sockets() == before


async def test_admin_lists_describes_resets_and_deletes_groups(autojump_clock: Any, cluster: Cluster) -> None:
    from kafkalite.client import Admin
    from kafkalite.common.errors import GroupIdNotFoundError, NonEmptyGroupError

    for p in range(6):
        await cluster.produce("events", p, [Record(None, b"x", 1000 + i) for i in range(10)])
    async with Admin(cluster) as admin, member(cluster, "a", enable_auto_commit=False) as a:
        a.subscribe(["events"])
        await poll_until([a], lambda: a.assignment() == ALL)
        await a.commit({tp: 4 for tp in ALL})
        described = (await admin.describe_groups(["g"]))["g"]
        assert described.state == "Stable" and described.protocol == "range"
        assert set(described.members[0].assignment) == ALL and described.members[0].client_id == "a"
        assert [(g.group_id, g.state) for g in await admin.list_groups()] == [("g", "Stable")]
        assert [g.group_id for g in await admin.list_groups(["stable"])] == ["g"]  # any case, as Kafka's
        assert await admin.list_groups(["Empty", "Dead"]) == []
        with pytest.raises(ValueError, match="'Stabel' is not a group state; the states are Empty, Prep"):
            await admin.list_groups(["Stabel"])
        offsets = await admin.list_group_offsets("g")
        assert {(o.committed, o.log_end_offset, o.lag) for o in offsets.values()} == {(4, 10, 6)}
        with pytest.raises(NonEmptyGroupError, match="Stable"):
            await admin.reset_group_offsets("g", sorted(ALL), "earliest")
        with pytest.raises(NonEmptyGroupError):
            await admin.delete_groups(["g"])
        assert (await admin.list_group_offsets("g"))[TopicPartition("events", 0)].committed == 4  # unchanged
    async with Admin(cluster) as admin:
        tp0 = TopicPartition("events", 0)
        assert await admin.reset_group_offsets("g", [tp0], "shift", -3) == {tp0: 1}
        assert await admin.reset_group_offsets("g", [tp0], "shift", -30) == {tp0: 0}  # clamped to the start
        assert await admin.reset_group_offsets("g", [tp0], "latest") == {tp0: 10}
        assert await admin.reset_group_offsets("g", [tp0], "offset", 7) == {tp0: 7}
        assert await admin.reset_group_offsets("g", [tp0], "earliest", dry_run=True) == {tp0: 0}
        assert await admin.reset_group_offsets("g", [tp0], "datetime", 1005) == {tp0: 5}
        assert await admin.reset_group_offsets("g", [tp0], "datetime", 0) == {tp0: 0}
        assert (await admin.list_group_offsets("g"))[tp0].committed == 0
        with pytest.raises(ValueError, match="reset spec"):
            await admin.reset_group_offsets("g", [tp0], "yesterday")
        with pytest.raises(TypeError, match="the shift must be an int, not str '2'"):
            await admin.reset_group_offsets("g", [tp0], "shift", "2")  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="the offset to reset to must not be negative"):
            await admin.reset_group_offsets("g", [tp0], "offset", -1)
        with pytest.raises(TypeError, match=r"describe_groups\(\) takes a collection of group ids, not str"):
            await admin.describe_groups("g")
        with pytest.raises(TypeError, match=r"list_group_offsets\(\) takes a group id \(str\), not int 5"):
            await admin.list_group_offsets(5)  # type: ignore[arg-type]
        await admin.delete_groups(["g"])
        assert await admin.list_group_offsets("g") == {}
        with pytest.raises(GroupIdNotFoundError):
            await admin.delete_groups(["g"])


def test_the_embedded_cluster_serves_groups_synchronously() -> None:
    from kafkalite.embedded import EmbeddedCluster

    with EmbeddedCluster(brokers=1, config={"offsets.topic.num.partitions": 2}) as cluster:
        cluster.create_topic("sync-events", partitions=2)
        with cluster.producer(linger_ms=0) as producer:
            for i in range(4):
                producer.send("sync-events", b"%d" % i, partition=i % 2).result(10)
        with cluster.consumer(group_id="sync", auto_offset_reset="earliest") as consumer:
            consumer.subscribe(["sync-events"])
            seen: list[bytes] = []
            for record in consumer:
                seen.append(record.value)
                if len(seen) == 4:
                    break
            consumer.commit()
        with cluster.admin() as admin:
            assert {o.committed for o in admin.list_group_offsets("sync").values()} == {2}
            assert admin.describe_groups(["sync"])["sync"].state == "Empty"


async def test_a_bad_subscription_is_refused_before_the_consumer_joins(autojump_clock: Any, cluster: Cluster) -> None:
    async with member(cluster, "a") as consumer:
        with pytest.raises(errors.InvalidTopicError, match="illegal"):
            consumer.subscribe(["orders", "no spaces allowed"])
        with pytest.raises(errors.InvalidTopicError, match="empty"):
            consumer.subscribe([""])
        with pytest.raises(ValueError, match="is not a regular expression"):
            consumer.subscribe(pattern="(")
        with pytest.raises(TypeError, match="regular expression"):
            consumer.subscribe(pattern=42)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="topics or a pattern"):
            consumer.subscribe(["orders"], pattern="orders")
        assert consumer.subscription() == set() and consumer.assignment() == set()
        consumer.assign([TopicPartition("orders", 0)])  # Kafka's consumer refuses to mix the two, either way
        with pytest.raises(ValueError, match="mutually exclusive"):
            consumer.subscribe(["orders"])
        assert consumer.subscription() == set() and consumer.assignment() == {TopicPartition("orders", 0)}
        consumer.assign([])
        consumer.subscribe(["orders"])  # the consumer is still usable
        assert consumer.subscription() == {"orders"}
        with pytest.raises(ValueError, match="subscribed consumer"):
            consumer.assign([TopicPartition("orders", 1)])


async def test_a_client_closes_a_broken_connection_before_opening_the_next(autojump_clock: Any,
                                                                           cluster: Cluster) -> None:
    """A broken connection was replaced without being closed: its socket stayed open until a cyclic GC pass found
    it (a ResourceWarning then), one more for each broker bounce a long-lived client saw."""
    async with Producer(cluster.bootstrap_servers, {"acks": "all"}) as producer:
        await (await producer.send("events", b"before", partition=0))
        leader = cluster.leader_for("events", 0)
        broken = producer._transport._connections[leader]
        await cluster.kill_broker(leader)
        await cluster.restart_broker(leader)
        await cluster.wait_until(lambda: all(leader in cluster.partition_state("events", p).isr for p in range(6)),
                                 what="the restarted broker back in every ISR")
        await cluster.elect_preferred_leaders()
        await cluster.wait_for_leader("events", 0)
        assert cluster.leader_for("events", 0) == leader  # the restarted broker leads its preferred partitions again
        for partition in range(6):
            await (await producer.send("events", b"after", partition=partition))
        assert producer._transport._connections[leader] is not broken
        assert broken.closed and broken._stream.socket.fileno() == -1


@pytest.mark.usefixtures("kafkalite_watchdog")
@pytest.mark.parametrize("api, error", [("JoinGroup", "REBALANCE_IN_PROGRESS"), ("JoinGroup", "UNKNOWN_MEMBER_ID"),
                                        ("JoinGroup", "ILLEGAL_GENERATION"), ("JoinGroup", "MEMBER_ID_REQUIRED"),
                                        ("SyncGroup", "REBALANCE_IN_PROGRESS"), ("SyncGroup", "ILLEGAL_GENERATION")])
async def test_a_coordinator_that_keeps_asking_for_a_rejoin_is_asked_again_after_backoffs(
        cluster: Cluster, api: str, error: str) -> None:
    """As Kafka, these errors rejoin at once; answered every time, the rejoins made a loop without a checkpoint:
    in-process, the whole run froze and no poll timeout could end it. Now a few at once, then retry.backoff.ms."""
    refusing = cluster.fail_requests(api, error, times=None)
    async with member(cluster, "a", retry_backoff_ms=100) as a:
        a.subscribe(["events"])
        started = trio.current_time()
        with trio.move_on_after(5):
            while True:
                await a.poll(1)
        assert trio.current_time() - started == pytest.approx(5, abs=0.1)
        assert 50 <= refusing.hits <= 200 and a.assignment() == set()
        refusing.remove()
        await poll_until([a], lambda: a.assignment() == ALL)


@pytest.mark.usefixtures("kafkalite_watchdog")
async def test_a_pattern_consumer_cut_off_from_every_broker_polls_out_its_timeout(cluster: Cluster) -> None:
    """Listing the topics for the pattern failed with NETWORK_EXCEPTION out of poll() at once, every poll, so a
    loop polling again let no time pass. As Kafka's poll(), which raises no network error, it waits out its
    timeout and lists again after retry.backoff.ms, and the group forms once the network heals."""
    async with member(cluster, "a") as a:
        a.subscribe(pattern="ev.*")
        cluster.partition_network({ClientNode("a")}, set(cluster.live_broker_ids))
        started = trio.current_time()
        for _ in range(5):
            assert await a.poll(1) == []
        assert trio.current_time() - started == pytest.approx(5, abs=0.1)
        cluster.heal()
        await poll_until([a], lambda: a.assignment() == ALL)
