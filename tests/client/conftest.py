"""A real three-broker cluster per test, reached by the clients in-process and over native TCP.

Every client test takes `bootstrap` and so runs both ways: the clients must behave the same whichever
transport they were given. The TCP variant connects to the NATIVE endpoints the brokers advertise in
Metadata; while brokers advertise none (port 0), it is an expected failure.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest
import trio

from kafkalite.client import Consumer, ConsumerRecord
from kafkalite.cluster import Cluster
from kafkalite.common.types import TopicPartition

CLUSTER_CONFIG = {"replica.lag.time.max.ms": 10000}


@pytest.fixture
def cluster_config() -> dict[str, Any]:
    """Broker settings beyond CLUSTER_CONFIG; a test overrides it with `@pytest.mark.parametrize("cluster_config", ...)`."""
    return {}


@pytest.fixture
async def cluster(cluster_config: dict[str, Any]) -> AsyncIterator[Cluster]:
    async with Cluster(brokers=3, config={**CLUSTER_CONFIG, **cluster_config}, seed=7) as running:
        yield running


@pytest.fixture(params=["in-process", "tcp"])
async def bootstrap(request: pytest.FixtureRequest, cluster: Cluster) -> Cluster | str:
    if request.param == "in-process":
        return cluster
    metadata = await cluster.metadata(cluster.live_broker_ids[0])
    servers = [f"{broker.host}:{broker.port}" for broker in metadata.brokers if broker.port > 0]
    if not servers:
        pytest.xfail("brokers have no TCP listener yet")
    return ",".join(servers)


async def consume(bootstrap: Cluster | str, partitions: Sequence[TopicPartition], count: int, *,
                  timeout: float = 60, **config: Any) -> list[ConsumerRecord]:
    """Exactly the first `count` records of `partitions` from the beginning (fails on fewer within `timeout`)."""
    records: list[ConsumerRecord] = []
    async with Consumer(bootstrap, {"auto.offset.reset": "earliest", **config}) as consumer:
        consumer.assign(partitions)
        with trio.fail_after(timeout):
            while len(records) < count:
                records.extend(await consumer.poll(1))
        records.extend(await consumer.poll(0.5))
    return records
