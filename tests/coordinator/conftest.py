"""A real three-broker cluster with a small `__consumer_offsets`, and raw group requests sent as a client would."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import trio

from kafkalite.cluster import Cluster
from kafkalite.common.consumer_protocol import (
    CONSUMER_PROTOCOL_TYPE, Assignment, Subscription, encode_assignment, encode_subscription,
)
from kafkalite.common.types import TopicPartition
from kafkalite.network.requests import (
    FindCoordinatorRequest, FindCoordinatorResponse, JoinGroupProtocol, JoinGroupRequest, Request, RequestContext,
    SyncGroupAssignment, SyncGroupRequest,
)

GROUP_CONFIG = {"offsets.topic.num.partitions": 3, "replica.lag.time.max.ms": 10000, "zookeeper.session.timeout.ms": 6000,
                "offsets.retention.minutes": 60,
                "group.min.session.timeout.ms": 1000}


@pytest.fixture
async def cluster(autojump_clock: Any) -> AsyncIterator[Cluster]:
    """On the mock clock whichever test asks for it: the helpers below retry on virtual time."""
    async with Cluster(brokers=3, config=GROUP_CONFIG, seed=11) as running:
        await running.create_topic("events", partitions=6, replication_factor=3)
        yield running


async def send(cluster: Cluster, broker_id: int, request: Request, client: str = "raw-client") -> Any:
    return await cluster.transport.send(client, broker_id, request, RequestContext(source=client, client_id=client))


async def coordinator_of(cluster: Cluster, group_id: str) -> int:
    """Ask until the coordinator is known (the first ask creates `__consumer_offsets`); fail after 60 virtual
    seconds rather than ask forever."""
    with trio.fail_after(60):
        while True:
            response: FindCoordinatorResponse = await send(cluster, cluster.live_broker_ids[0],
                                                           FindCoordinatorRequest(group_id))
            if response.error_code == 0:
                return response.node_id
            await trio.sleep(0.1)


def join_request(group_id: str, member_id: str = "", topics: tuple[str, ...] = ("events",), *,
                 session_timeout_ms: int = 10000, rebalance_timeout_ms: int = 30000, instance_id: str | None = None,
                 protocols: tuple[str, ...] = ("range",)) -> JoinGroupRequest:
    metadata = encode_subscription(Subscription(topics))
    return JoinGroupRequest(group_id, session_timeout_ms, rebalance_timeout_ms, member_id, CONSUMER_PROTOCOL_TYPE,
                            [JoinGroupProtocol(name, metadata) for name in protocols], instance_id)


async def stable_member(cluster: Cluster, group_id: str = "g") -> tuple[int, str]:
    """A one-member group in generation 1 holding events-0; (coordinator, member id)."""
    coordinator = await coordinator_of(cluster, group_id)
    member_id = (await send(cluster, coordinator, join_request(group_id))).member_id
    joined = await send(cluster, coordinator, join_request(group_id, member_id))
    assert joined.error_code == 0
    synced = await send(cluster, coordinator, SyncGroupRequest(group_id, joined.generation_id, member_id, [
        SyncGroupAssignment(member_id, encode_assignment(Assignment((TopicPartition("events", 0),))))]))
    assert synced.error_code == 0
    return coordinator, member_id


async def group_on(cluster: Cluster, coordinator: int) -> str:
    """A group id that no one uses, coordinated by `coordinator`."""
    for n in range(100):
        if await coordinator_of(cluster, f"unused-{n}") == coordinator:
            return f"unused-{n}"
    raise AssertionError("no group id maps to the coordinator")


def state(cluster: Cluster, coordinator: int, group_id: str = "g") -> tuple[str, int, list[str]]:
    group = cluster.broker(coordinator).group_coordinator.group(group_id)
    assert group is not None
    return group.state.value, group.generation_id, sorted(group.members)


async def kill_followers(cluster: Cluster, coordinator: int, group_id: str = "g") -> list[int]:
    """Kill every broker but the coordinator, and wait until the group's offsets partition has the coordinator
    alone in its ISR: with min.insync.replicas 2, every write of the group's is then refused. The killed ids."""
    followers = [b for b in cluster.broker_ids if b != coordinator]
    for broker_id in followers:
        await cluster.kill_broker(broker_id)
    partition = cluster.broker(coordinator).group_coordinator.partition_for(group_id)
    await cluster.wait_until(lambda: cluster.partition_state("__consumer_offsets", partition).isr == (coordinator,),
                             timeout=60)
    return followers
