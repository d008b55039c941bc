"""Leader selectors are pure functions of (replicas, current leader and ISR, brokers): Kafka's rules, checked directly."""

from __future__ import annotations

import pytest

from kafkalite.controller.leader_selectors import (
    Brokers,
    NoLeaderAvailable,
    controlled_shutdown_partition_leader_selector,
    no_op_partition_leader_selector,
    offline_partition_leader_selector,
    preferred_replica_partition_leader_selector,
    reassigned_partition_leader_selector,
)
from kafkalite.coordination.kafka_zk import LeaderAndIsr


def brokers(live: set[int], shutting_down: set[int] = frozenset()) -> Brokers:
    """As the controller's context hands them over: shutting-down brokers are up but may not lead."""
    return Brokers(frozenset(live - shutting_down), frozenset(shutting_down))


def test_offline_selector_takes_first_live_isr_replica_in_assignment_order() -> None:
    election = offline_partition_leader_selector([1, 3, 2], LeaderAndIsr(1, 4, (1, 2, 3), 7), brokers({2, 3}), False)
    assert election.leader_and_isr == LeaderAndIsr(3, 5, (3, 2), 8)
    assert election.replicas_to_receive_request == [3, 2]


def test_offline_selector_without_live_isr_stays_offline_unless_unclean() -> None:
    current = LeaderAndIsr(1, 4, (1,), 7)
    with pytest.raises(NoLeaderAvailable, match="unclean.leader.election.enable"):
        offline_partition_leader_selector([1, 2, 3], current, brokers({2, 3}), False)
    election = offline_partition_leader_selector([1, 2, 3], current, brokers({2, 3}), True)
    assert election.leader_and_isr == LeaderAndIsr(2, 5, (2,), 8)
    with pytest.raises(NoLeaderAvailable):
        offline_partition_leader_selector([1, 2, 3], current, brokers(set()), True)


def test_offline_selector_skips_shutting_down_brokers() -> None:
    election = offline_partition_leader_selector([1, 2, 3], LeaderAndIsr(9, 0, (2, 3), 0),
                                                 brokers({1, 2, 3}, shutting_down={2}), False)
    assert election.leader_and_isr.leader == 3


def test_controlled_shutdown_selector_drops_shutting_down_brokers_from_isr() -> None:
    up = brokers({1, 2, 3}, shutting_down={1})
    election = controlled_shutdown_partition_leader_selector([1, 2, 3], LeaderAndIsr(1, 2, (1, 2, 3), 5), up, False)
    assert election.leader_and_isr == LeaderAndIsr(2, 3, (2, 3), 6)
    assert election.replicas_to_receive_request == [1, 2, 3]  # the stopping broker learns it is a follower
    with pytest.raises(NoLeaderAvailable):
        controlled_shutdown_partition_leader_selector([1, 2, 3], LeaderAndIsr(1, 2, (1,), 5), up, False)


def test_preferred_selector_needs_the_first_replica_alive_and_in_sync() -> None:
    up = brokers({1, 2, 3})
    election = preferred_replica_partition_leader_selector([1, 2, 3], LeaderAndIsr(2, 6, (2, 1), 1), up, False)
    assert election.leader_and_isr == LeaderAndIsr(1, 7, (2, 1), 2)
    with pytest.raises(NoLeaderAvailable, match="already leads"):
        preferred_replica_partition_leader_selector([1, 2, 3], LeaderAndIsr(1, 6, (1, 2), 1), up, False)
    with pytest.raises(NoLeaderAvailable, match="not alive and in the ISR"):
        preferred_replica_partition_leader_selector([1, 2, 3], LeaderAndIsr(2, 6, (2, 3), 1), up, False)


def test_reassigned_selector_elects_from_the_target_replicas_it_is_given() -> None:
    """The target list is an argument: the removed replicas neither lead nor hear the outcome."""
    election = reassigned_partition_leader_selector([4, 2], LeaderAndIsr(1, 3, (1, 2, 4), 2), brokers({1, 2, 4}),
                                                    False)
    assert election.leader_and_isr == LeaderAndIsr(4, 4, (1, 2, 4), 3)
    assert election.replicas_to_receive_request == [4, 2]
    with pytest.raises(NoLeaderAvailable):
        reassigned_partition_leader_selector([4], LeaderAndIsr(1, 3, (1, 2), 2), brokers({1, 2, 4}), False)


def test_no_op_selector_bumps_only_the_epoch() -> None:
    election = no_op_partition_leader_selector([1, 2], LeaderAndIsr(2, 6, (2, 1), 1), brokers({1, 2}), False)
    assert election.leader_and_isr == LeaderAndIsr(2, 7, (2, 1), 2)
