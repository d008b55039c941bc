"""The partition leader selectors (seed 002): who leads next, with which ISR, and who must be told.

Each is a pure function of the controller's context, so each is tested on its own. A selector that finds
no acceptable leader raises `NoLeaderAvailable`; the partition then keeps its state and waits for a broker.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from kafkalite.common.types import TopicPartition
from kafkalite.controller.context import ControllerContext
from kafkalite.coordination.kafka_zk import LeaderAndIsr


class NoLeaderAvailable(Exception):
    """No replica may lead the partition now without breaking the selector's rule."""


@dataclass(frozen=True, slots=True)
class Election:
    leader_and_isr: LeaderAndIsr
    replicas_to_receive_request: list[int]


LeaderSelector = Callable[[ControllerContext, TopicPartition, LeaderAndIsr, bool], Election]
"""(context, partition, current leader and ISR, unclean election allowed) -> the election's result."""


def _live(context: ControllerContext, replicas: Sequence[int]) -> list[int]:
    return [r for r in replicas if context.is_replica_online(r)]


def offline_partition_leader_selector(context: ControllerContext, tp: TopicPartition, current: LeaderAndIsr,
                                      unclean: bool) -> Election:
    """The first live ISR replica in assignment order; else, if allowed, the first live replica at all."""
    assignment = context.partition_replica_assignment(tp)
    live_assigned = _live(context, assignment)
    live_isr = [r for r in current.isr if r in live_assigned]
    if live_isr:
        leader = next(r for r in assignment if r in live_isr)
        new_isr = [r for r in assignment if r in live_isr]
    elif unclean and live_assigned:
        leader = live_assigned[0]
        new_isr = [leader]
    else:
        raise NoLeaderAvailable(
            f"no live replica of {tp} is in its ISR {list(current.isr)}" +
            ("" if unclean else " and unclean.leader.election.enable is false") +
            f" (live replicas: {live_assigned})")
    return Election(current.new_leader_and_isr(leader, new_isr), live_assigned)


def reassigned_partition_leader_selector(context: ControllerContext, tp: TopicPartition, current: LeaderAndIsr,
                                         unclean: bool) -> Election:
    """The first target replica of a finishing reassignment that is alive and in the ISR."""
    target = context.partition_replica_assignment(tp)
    leader = next((r for r in target if context.is_replica_online(r) and r in current.isr), None)
    if leader is None:
        raise NoLeaderAvailable(f"none of the reassigned replicas {target} of {tp} is alive and in the ISR "
                                f"{list(current.isr)}")
    return Election(current.new_leader_and_isr(leader, current.isr), _live(context, target))


def unclean_partition_leader_selector(context: ControllerContext, tp: TopicPartition, current: LeaderAndIsr,
                                      unclean: bool) -> Election:
    """ElectLeaders with UNCLEAN: the offline selector with unclean election allowed whatever the config says."""
    return offline_partition_leader_selector(context, tp, current, True)


def controlled_shutdown_partition_leader_selector(context: ControllerContext, tp: TopicPartition,
                                                  current: LeaderAndIsr, unclean: bool) -> Election:
    """An ISR replica on a broker that is not shutting down; the new ISR leaves the shutting-down brokers out."""
    assignment = context.partition_replica_assignment(tp)
    new_isr = [r for r in assignment if r in current.isr and r not in context.shutting_down_broker_ids]
    leader = next((r for r in new_isr if context.is_replica_online(r)), None)
    if leader is None:
        raise NoLeaderAvailable(f"no replica of {tp} in ISR {list(current.isr)} is alive and staying up")
    return Election(current.new_leader_and_isr(leader, new_isr),
                    [r for r in assignment if context.is_replica_online(r, include_shutting_down=True)])


def preferred_replica_partition_leader_selector(context: ControllerContext, tp: TopicPartition,
                                                current: LeaderAndIsr, unclean: bool) -> Election:
    """The first assigned replica, if it is alive and in the ISR."""
    assignment = context.partition_replica_assignment(tp)
    preferred = assignment[0]
    if current.leader == preferred:
        raise NoLeaderAvailable(f"preferred replica {preferred} already leads {tp}")
    if not context.is_replica_online(preferred) or preferred not in current.isr:
        raise NoLeaderAvailable(f"preferred replica {preferred} of {tp} is not alive and in the ISR "
                                f"{list(current.isr)}")
    return Election(current.new_leader_and_isr(preferred, current.isr), _live(context, assignment))


def no_op_partition_leader_selector(context: ControllerContext, tp: TopicPartition, current: LeaderAndIsr,
                                    unclean: bool) -> Election:
    """Same leader, same ISR, new epoch: re-sends the partition's state to its replicas."""
    return Election(current.new_leader_and_isr(current.leader, current.isr),
                    _live(context, context.partition_replica_assignment(tp)))
