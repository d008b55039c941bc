"""pytest fixtures for any project that installs kafkalite (registered through the `pytest11` entry point).

    def test_orders(kafkalite_cluster):                       # a fresh 3-broker cluster per test
        kafkalite_cluster.create_topic("orders", 6, 3)

    @pytest.mark.kafkalite(brokers=1, topics={"orders": 6})   # shape it
    def test_small(kafkalite_cluster): ...

Every broker has a NATIVE and a KAFKA listener: `kafkalite_cluster.bootstrap_servers` is for kafkalite's
clients, `kafkalite_cluster.kafka_bootstrap_servers` for Kafka's own (kafka-python, aiokafka, confluent-kafka).

`kafkalite_cluster_session` shares one 3-broker cluster across the session (topics from the marker are created
when missing), and `kafkalite_cluster_async` is a Trio `Cluster` for pytest-trio tests. The cluster modules are
imported by the fixtures, not here: every pytest run of every project that installs kafkalite loads this
plugin, and most of those runs never ask for a cluster.

`kafkalite_watchdog` fails a pytest-trio test whose virtual time stops moving instead of letting it hang
(see `kafkalite.testing.watchdog`); `@pytest.mark.kafkalite_watchdog(stall_after=5)` tunes it. Ask for it by
name: pytest-trio never runs an autouse async fixture. To cover every test on a clock, pass
`functools.partial(run_with_watchdog, **watchdog_options(item))` as the `run` of a `trio` marker instead.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

import pytest

if TYPE_CHECKING:
    from kafkalite.cluster import Cluster
    from kafkalite.embedded import EmbeddedCluster

DEFAULT_BROKERS = 3


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "kafkalite(brokers=3, topics=None, config=None, seed=None): shape the kafkalite cluster "
                   "fixtures; topics maps a name to its partition count (replication factor min(3, brokers))")
    config.addinivalue_line(
        "markers", "kafkalite_watchdog(stall_after=20.0): wall seconds of frozen virtual time after which the "
                   "virtual-time watchdog fails the test")


class _Shape(NamedTuple):
    brokers: int
    topics: Mapping[str, int]
    config: Mapping[str, Any]
    seed: int | None

    @property
    def replication_factor(self) -> int:
        return min(3, self.brokers)


def _shape(request: pytest.FixtureRequest) -> _Shape:
    marker = request.node.get_closest_marker("kafkalite")
    kwargs = dict(marker.kwargs) if marker is not None else {}
    unknown = set(kwargs) - set(_Shape._fields)
    if marker is not None and (marker.args or unknown):
        pytest.fail(f"@pytest.mark.kafkalite takes only keywords {', '.join(_Shape._fields)}", pytrace=False)
    topics, config = kwargs.get("topics") or {}, kwargs.get("config") or {}
    if not isinstance(topics, Mapping) or not all(isinstance(name, str) and type(count) is int
                                                  for name, count in topics.items()):
        pytest.fail(f"@pytest.mark.kafkalite(topics=...) maps each topic name to its partition count, as "
                    f"{{'orders': 6}}; got {topics!r}", pytrace=False)
    if not isinstance(config, Mapping):
        pytest.fail(f"@pytest.mark.kafkalite(config=...) maps broker config names to values; got {config!r}",
                    pytrace=False)
    return _Shape(kwargs.get("brokers", DEFAULT_BROKERS), topics, config, kwargs.get("seed"))


def watchdog_options(node: pytest.Item) -> dict[str, Any]:
    """The `virtual_time_watchdog` keywords a test asks for with `@pytest.mark.kafkalite_watchdog`."""
    marker = node.get_closest_marker("kafkalite_watchdog")
    if marker is None:
        return {}
    if marker.args or set(marker.kwargs) - {"stall_after"}:
        pytest.fail("@pytest.mark.kafkalite_watchdog takes only the keyword stall_after", pytrace=False)
    return dict(marker.kwargs)


def _create_missing(cluster: EmbeddedCluster, shape: _Shape) -> None:
    """The marker's topics; one the shared cluster has already must have the partitions the marker asks for."""
    existing = set(cluster.topics())
    for name, partitions in shape.topics.items():
        if name not in existing:
            cluster.create_topic(name, partitions, shape.replication_factor)
        elif (found := len(cluster.describe_topic(name))) != partitions:
            pytest.fail(f"@pytest.mark.kafkalite(topics=...) asks for {partitions} partitions of {name!r}, which "
                        f"the shared cluster already has with {found}: another test made it; give this one "
                        "another name", pytrace=False)


@pytest.fixture
def kafkalite_cluster(request: pytest.FixtureRequest) -> Iterator[EmbeddedCluster]:
    from kafkalite.embedded import EmbeddedCluster

    shape = _shape(request)
    with EmbeddedCluster(shape.brokers, shape.config, seed=shape.seed) as cluster:
        _create_missing(cluster, shape)
        yield cluster


@pytest.fixture(scope="session")
def _kafkalite_session_cluster() -> Iterator[EmbeddedCluster]:
    from kafkalite.embedded import EmbeddedCluster

    with EmbeddedCluster(DEFAULT_BROKERS) as cluster:
        yield cluster


@pytest.fixture
def kafkalite_cluster_session(request: pytest.FixtureRequest,
                              _kafkalite_session_cluster: EmbeddedCluster) -> Iterator[EmbeddedCluster]:
    """The shared cluster; after each test its faults end (`Cluster.end_faults`), so that a request fault or a
    stopped broker one test left behind does not fail the next. Topics and records stay."""
    shape = _shape(request)
    if (shape.brokers, shape.config, shape.seed) != (DEFAULT_BROKERS, {}, None):
        pytest.fail("kafkalite_cluster_session is shared by every test: only topics= can shape it; "
                    "use kafkalite_cluster for brokers=, config= or seed=", pytrace=False)
    _create_missing(_kafkalite_session_cluster, shape)
    yield _kafkalite_session_cluster
    _kafkalite_session_cluster.end_faults()


@pytest.fixture
async def kafkalite_cluster_async(request: pytest.FixtureRequest) -> AsyncIterator[Cluster]:
    from kafkalite.cluster import Cluster

    shape = _shape(request)
    async with Cluster(shape.brokers, shape.config, seed=shape.seed) as cluster:
        for name, partitions in shape.topics.items():
            await cluster.create_topic(name, partitions, shape.replication_factor)
        yield cluster


@pytest.fixture
async def kafkalite_watchdog(request: pytest.FixtureRequest) -> AsyncIterator[None]:
    """The test fails with `VirtualTimeStalled` when its virtual time freezes (a livelock, a deadlock, a
    synchronous loop), instead of hanging the run."""
    from kafkalite.testing.watchdog import virtual_time_watchdog

    async with virtual_time_watchdog(**watchdog_options(request.node)):
        yield
