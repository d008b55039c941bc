"""Leader selectors are pure functions of the controller context: every rule of Kafka's, checked directly."""

from __future__ import annotations

import pytest

from kafkalite.common.types import TopicPartition
from kafkalite.controller.context import ControllerContext
from kafkalite.controller.leader_selectors import (
    NoLeaderAvailable,
    controlled_shutdown_partition_leader_selector,
    no_op_partition_leader_selector,
    offline_partition_leader_selector,
    preferred_replica_partition_leader_selector,
)
from kafkalite.coordination.kafka_zk import BrokerInfo, LeaderAndIsr

TP = TopicPartition("t", 0)


def context(live: set[int], assignment: list[int], shutting_down: set[int] = frozenset()) -> ControllerContext:
    ctx = ControllerContext(epoch=3)
    ctx.live_brokers = {b: BrokerInfo(b, (), None, 100 + b) for b in live}
    ctx.shutting_down_broker_ids = set(shutting_down)
    ctx.partition_assignments = {"t": {0: assignment}}
    return ctx


def test_offline_selector_takes_first_live_isr_replica_in_assignment_order() -> None:
    ctx = context({2, 3}, [1, 3, 2])
    election = offline_partition_leader_selector(ctx, TP, LeaderAndIsr(1, 4, (1, 2, 3), 7), False)
    assert election.leader_and_isr == LeaderAndIsr(3, 5, (3, 2), 7)
    assert election.replicas_to_receive_request == [3, 2]


def test_offline_selector_without_live_isr_stays_offline_unless_unclean() -> None:
    ctx = context({2, 3}, [1, 2, 3])
    current = LeaderAndIsr(1, 4, (1,), 7)
    with pytest.raises(NoLeaderAvailable, match="unclean.leader.election.enable"):
        offline_partition_leader_selector(ctx, TP, current, False)
    election = offline_partition_leader_selector(ctx, TP, current, True)
    assert election.leader_and_isr == LeaderAndIsr(2, 5, (2,), 7)
    with pytest.raises(NoLeaderAvailable):
        offline_partition_leader_selector(context(set(), [1, 2, 3]), TP, current, True)


def test_offline_selector_skips_shutting_down_brokers() -> None:
    ctx = context({1, 2, 3}, [1, 2, 3], shutting_down={2})
    election = offline_partition_leader_selector(ctx, TP, LeaderAndIsr(9, 0, (2, 3), 0), False)
    assert election.leader_and_isr.leader == 3


def test_controlled_shutdown_selector_drops_shutting_down_brokers_from_isr() -> None:
    ctx = context({1, 2, 3}, [1, 2, 3], shutting_down={1})
    election = controlled_shutdown_partition_leader_selector(ctx, TP, LeaderAndIsr(1, 2, (1, 2, 3), 5), False)
    assert election.leader_and_isr == LeaderAndIsr(2, 3, (2, 3), 5)
    assert election.replicas_to_receive_request == [1, 2, 3]  # the stopping broker learns it is a follower
    with pytest.raises(NoLeaderAvailable):
        controlled_shutdown_partition_leader_selector(ctx, TP, LeaderAndIsr(1, 2, (1,), 5), False)


def test_preferred_selector_needs_the_first_replica_alive_and_in_sync() -> None:
    ctx = context({1, 2, 3}, [1, 2, 3])
    election = preferred_replica_partition_leader_selector(ctx, TP, LeaderAndIsr(2, 6, (2, 1), 1), False)
    assert election.leader_and_isr == LeaderAndIsr(1, 7, (2, 1), 1)
    with pytest.raises(NoLeaderAvailable, match="already leads"):
        preferred_replica_partition_leader_selector(ctx, TP, LeaderAndIsr(1, 6, (1, 2), 1), False)
    with pytest.raises(NoLeaderAvailable, match="not alive and in the ISR"):
        preferred_replica_partition_leader_selector(ctx, TP, LeaderAndIsr(2, 6, (2, 3), 1), False)


def test_no_op_selector_bumps_only_the_epoch() -> None:
    ctx = context({1, 2}, [1, 2])
    election = no_op_partition_leader_selector(ctx, TP, LeaderAndIsr(2, 6, (2, 1), 1), False)
    assert election.leader_and_isr == LeaderAndIsr(2, 7, (2, 1), 1)
