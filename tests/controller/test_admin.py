"""Replica assignment spreads partitions, leaders and racks the way Kafka's AdminUtils does."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalite.common.config import BrokerConfig
from kafkalite.common.errors import (
    InvalidConfigError,
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    InvalidTopicError,
    TopicAlreadyExistsError,
)
from kafkalite.controller.admin import assign_replicas_to_brokers, plan_topic
from kafkalite.network.requests import CreatableTopic


@settings(deadline=None, max_examples=200)
@given(brokers=st.integers(1, 9), partitions=st.integers(1, 40), data=st.data(), seed=st.integers(0, 2**32))
def test_assignment_never_doubles_a_broker_and_spreads_leaders(brokers: int, partitions: int, data, seed) -> None:
    rf = data.draw(st.integers(1, brokers))
    ids = list(range(1, brokers + 1))
    assignment = assign_replicas_to_brokers(partitions, rf, ids, rng=random.Random(seed))
    assert sorted(assignment) == list(range(partitions))
    for replicas in assignment.values():
        assert len(replicas) == rf and len(set(replicas)) == rf and set(replicas) <= set(ids)
    leaders = Counter(replicas[0] for replicas in assignment.values())
    assert max(leaders.values()) - min(leaders.get(b, 0) for b in ids) <= 1  # round-robin leaders
    load = Counter(r for replicas in assignment.values() for r in replicas)
    assert max(load.values()) - min(load.get(b, 0) for b in ids) <= rf


@settings(deadline=None, max_examples=100)
@given(racks=st.integers(2, 4), per_rack=st.integers(1, 3), partitions=st.integers(1, 24), seed=st.integers(0, 999))
def test_rack_aware_assignment_puts_replicas_on_distinct_racks(racks: int, per_rack: int, partitions: int,
                                                               seed: int) -> None:
    rack_of = {b: f"rack-{b % racks}" for b in range(1, racks * per_rack + 1)}
    rf = min(racks, 3)
    assignment = assign_replicas_to_brokers(partitions, rf, sorted(rack_of), rack_of, rng=random.Random(seed))
    for replicas in assignment.values():
        assert len({rack_of[r] for r in replicas}) == rf
        assert len(set(replicas)) == rf


def test_assignment_bad_counts() -> None:
    with pytest.raises(InvalidReplicationFactorError, match="larger than available brokers"):
        assign_replicas_to_brokers(1, 4, [1, 2, 3])
    with pytest.raises(InvalidPartitionsError):
        assign_replicas_to_brokers(0, 1, [1, 2, 3])


@pytest.mark.parametrize(("topic", "error"), [
    (CreatableTopic("a b"), InvalidTopicError),
    (CreatableTopic("exists"), TopicAlreadyExistsError),
    (CreatableTopic("t", 0, 1), InvalidPartitionsError),
    (CreatableTopic("t", 1, 4), InvalidReplicationFactorError),
    (CreatableTopic("t", 1, 1, configs={"retention.msec": "1"}), InvalidConfigError),
    (CreatableTopic("t", assignments={0: [1, 1]}), InvalidReplicaAssignmentError),
    (CreatableTopic("t", assignments={0: [1], 2: [2]}), InvalidReplicaAssignmentError),
    (CreatableTopic("t", assignments={0: [7]}), InvalidReplicaAssignmentError),
])
def test_plan_topic_rejects_bad_input_with_kafkas_errors(topic: CreatableTopic, error: type) -> None:
    with pytest.raises(error) as info:
        plan_topic(topic, BrokerConfig(), {"exists"}, {1: None, 2: None, 3: None}, random.Random(0))
    assert info.value.message


def test_plan_topic_defaults_come_from_the_broker() -> None:
    config = BrokerConfig({"num.partitions": 4, "default.replication.factor": 2})
    assignment, overrides = plan_topic(CreatableTopic("t", configs={"retention.ms": "1000"}), config, set(),
                                       {1: None, 2: None, 3: None}, random.Random(0))
    assert len(assignment) == 4 and all(len(r) == 2 for r in assignment.values())
    assert overrides == {"retention.ms": 1000}
