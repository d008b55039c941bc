"""pytest fixtures for any project that installs kafkalite (registered through the `pytest11` entry point).

    def test_orders(kafkalite_cluster):                       # a fresh 3-broker cluster per test
        kafkalite_cluster.create_topic("orders", 6, 3)

    @pytest.mark.kafkalite(brokers=1, topics={"orders": 6})   # shape it
    def test_small(kafkalite_cluster): ...

`kafkalite_cluster_session` shares one cluster across the session (topics from the marker are created when
missing), and `kafkalite_cluster_async` is a Trio `Cluster` for pytest-trio tests.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from kafkalite.cluster import Cluster
from kafkalite.embedded import EmbeddedCluster

DEFAULT_BROKERS = 3


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "kafkalite(brokers=3, topics=None, config=None): shape the kafkalite cluster fixtures; "
                   "topics maps a name to its partition count")


def _shape(request: pytest.FixtureRequest) -> tuple[int, dict[str, int], dict[str, Any]]:
    marker = request.node.get_closest_marker("kafkalite")
    kwargs = dict(marker.kwargs) if marker is not None else {}
    return kwargs.get("brokers", DEFAULT_BROKERS), dict(kwargs.get("topics") or {}), dict(kwargs.get("config") or {})


def _create_missing(cluster: Any, brokers: int, topics: dict[str, int]) -> None:
    existing = set(cluster.topics())
    for name, partitions in topics.items():
        if name not in existing:
            cluster.create_topic(name, partitions, min(3, brokers))


@pytest.fixture
def kafkalite_cluster(request: pytest.FixtureRequest) -> Iterator[EmbeddedCluster]:
    brokers, topics, config = _shape(request)
    with EmbeddedCluster(brokers, config) as cluster:
        _create_missing(cluster, brokers, topics)
        yield cluster


@pytest.fixture(scope="session")
def _kafkalite_session_cluster() -> Iterator[EmbeddedCluster]:
    with EmbeddedCluster(DEFAULT_BROKERS) as cluster:
        yield cluster


@pytest.fixture
def kafkalite_cluster_session(request: pytest.FixtureRequest,
                              _kafkalite_session_cluster: EmbeddedCluster) -> EmbeddedCluster:
    _, topics, _ = _shape(request)
    _create_missing(_kafkalite_session_cluster, DEFAULT_BROKERS, topics)
    return _kafkalite_session_cluster


@pytest.fixture
async def kafkalite_cluster_async(request: pytest.FixtureRequest) -> AsyncIterator[Cluster]:
    brokers, topics, config = _shape(request)
    async with Cluster(brokers, config) as cluster:
        for name, partitions in topics.items():
            await cluster.create_topic(name, partitions, min(3, brokers))
        yield cluster
