"""The fixtures reach a project through the entry point alone: no conftest in the tested project."""

from __future__ import annotations

import pytest

PROJECT_TESTS = '''
import pytest
from kafkalite.common.records import Record


def test_fresh_cluster(kafkalite_cluster):
    kafkalite_cluster.create_topic("orders", 2, 3)
    assert len(kafkalite_cluster.describe_topic("orders")) == 2
    assert kafkalite_cluster.live_broker_ids == [1, 2, 3]


@pytest.mark.kafkalite(brokers=1, topics={"events": 4})
def test_shaped_cluster(kafkalite_cluster):
    assert kafkalite_cluster.live_broker_ids == [1]
    assert [d.partition for d in kafkalite_cluster.describe_topic("events")] == [0, 1, 2, 3]
    with kafkalite_cluster.producer() as producer:
        assert producer.send("events", b"x", partition=3).result(10).offset == 0


@pytest.mark.kafkalite(topics={"shared": 1})
def test_session_cluster_a(kafkalite_cluster_session):
    assert "shared" in kafkalite_cluster_session.topics()


@pytest.mark.kafkalite(topics={"shared": 1})
def test_session_cluster_b(kafkalite_cluster_session):
    assert "shared" in kafkalite_cluster_session.topics()


@pytest.mark.kafkalite(brokers=2, topics={"t": 1})
async def test_async_cluster(kafkalite_cluster_async):
    assert kafkalite_cluster_async.live_broker_ids == [1, 2]
    assert kafkalite_cluster_async.leader_for("t", 0) in (1, 2)
    assert await kafkalite_cluster_async.produce("t", 0, [Record(None, b"x")]) == 0
'''


def test_fixtures_work_without_a_conftest(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\ntrio_mode = true\n")
    pytester.makepyfile(test_project=PROJECT_TESTS)
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=5)
