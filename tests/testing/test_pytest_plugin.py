"""The fixtures reach a project through the entry point alone: no conftest in the tested project."""

from __future__ import annotations

import subprocess
import sys

import pytest

PROJECT_TESTS = '''
import pytest
from kafkalite.common.records import Record


def test_fresh_cluster(kafkalite_cluster):
    kafkalite_cluster.create_topic("orders", 2, 3)
    assert len(kafkalite_cluster.describe_topic("orders")) == 2
    assert kafkalite_cluster.live_broker_ids == [1, 2, 3]


def test_each_test_gets_its_own_cluster(kafkalite_cluster):
    assert "orders" not in kafkalite_cluster.topics()


@pytest.mark.kafkalite(brokers=1, topics={"events": 4}, config={"num.partitions": 2}, seed=7)
def test_shaped_cluster(kafkalite_cluster):
    assert kafkalite_cluster.live_broker_ids == [1]
    assert kafkalite_cluster.seed == 7
    assert [d.partition for d in kafkalite_cluster.describe_topic("events")] == [0, 1, 2, 3]
    with kafkalite_cluster.producer() as producer:
        assert producer.send("events", b"x", partition=3).result(10).offset == 0


@pytest.mark.kafkalite(topics={"shared": 1})
def test_session_cluster_a(kafkalite_cluster_session):
    kafkalite_cluster_session.produce("shared", 0, [Record(None, b"a")])


@pytest.mark.kafkalite(topics={"shared": 1, "more": 2})
def test_session_cluster_b(kafkalite_cluster_session):
    assert [r.value for _, r in kafkalite_cluster_session.fetch_all("shared", 0)] == [b"a"]
    assert {"shared", "more"} <= set(kafkalite_cluster_session.topics())
    assert len(kafkalite_cluster_session.describe_topic("more")[0].replicas) == 3


def test_session_cluster_left_faulted(kafkalite_cluster_session):
    kafkalite_cluster_session.fail_requests("Produce", "NOT_LEADER_OR_FOLLOWER", times=None)
    kafkalite_cluster_session.partition_network({1}, {2, 3})
    kafkalite_cluster_session.pause_broker(2)
    kafkalite_cluster_session.kill_broker(3)


@pytest.mark.kafkalite(topics={"shared": 1})
def test_session_cluster_comes_whole_to_the_next_test(kafkalite_cluster_session):
    assert kafkalite_cluster_session.request_faults.faults == ()
    assert kafkalite_cluster_session.live_broker_ids == [1, 2, 3]
    with kafkalite_cluster_session.producer() as producer:
        assert producer.send("shared", b"b", partition=0).result(30).offset == 1


@pytest.mark.kafkalite(brokers=1)
def test_session_cluster_cannot_be_reshaped(kafkalite_cluster_session):
    pass


@pytest.mark.kafkalite(topics={"shared": 4})
def test_session_topic_made_with_other_partitions(kafkalite_cluster_session):
    pass


@pytest.mark.kafkalite(topics=["events"])
def test_topics_not_a_mapping(kafkalite_cluster):
    pass


@pytest.mark.kafkalite(brokers=2, topics={"t": 1})
async def test_async_cluster(kafkalite_cluster_async):
    assert kafkalite_cluster_async.live_broker_ids == [1, 2]
    assert len((await kafkalite_cluster_async.describe_topic("t"))[0].replicas) == 2
    assert await kafkalite_cluster_async.produce("t", 0, [Record(None, b"x")]) == 0
'''


def test_fixtures_work_without_a_conftest(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\ntrio_mode = true\n")
    pytester.makepyfile(test_project=PROJECT_TESTS)
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=8, errors=3)
    result.stdout.fnmatch_lines(["*kafkalite_cluster_session is shared by every test: only topics= can shape it*"])
    result.stdout.fnmatch_lines(["*asks for 4 partitions of 'shared', which the shared cluster already has with 1*"])
    result.stdout.fnmatch_lines(["*topics=...) maps each topic name to its partition count, as {'orders': 6}; "
                                 "got *'events'*"])


def test_the_marker_is_registered(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_inprocess("--markers")
    result.stdout.fnmatch_lines(["@pytest.mark.kafkalite(brokers=3, topics=None, config=None, seed=None)*"])


def test_loading_the_plugin_does_not_load_the_cluster() -> None:
    """Every pytest run of a project that installs kafkalite loads the plugin: it must cost next to nothing."""
    code = ("import sys, kafkalite.testing.pytest_plugin; "
            "print(sorted(m for m in ('trio', 'kafkalite.cluster') if m in sys.modules))")
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout == "[]\n"
