"""A real three-broker cluster with a small `__consumer_offsets`, and raw group requests sent as a client would."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import trio

from kafkalite.cluster import Cluster
from kafkalite.common.consumer_protocol import CONSUMER_PROTOCOL_TYPE, Subscription, encode_subscription
from kafkalite.network.requests import (
    FindCoordinatorRequest, FindCoordinatorResponse, JoinGroupProtocol, JoinGroupRequest, Request, RequestContext,
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

