"""The partition leader selectors (seed 002): who leads next, with which ISR, and who must be told.

Each is a pure function of the replica list it elects from, the partition's current leader and ISR, and which
brokers are up, as Kafka's PartitionLeaderElectionAlgorithms are. The caller passes the replica list: the
assignment for most elections, the target replicas for a finishing reassignment. A selector that finds no
acceptable leader raises `NoLeaderAvailable`; the partition then keeps its state and waits for a broker.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from kafkalite.coordination.kafka_zk import LeaderAndIsr


class NoLeaderAvailable(Exception):
    """No replica may lead the partition now without breaking the selector's rule."""


@dataclass(frozen=True, slots=True)
class Brokers:
    """Which brokers an election may use: `live` may lead; `shutting_down` are up but leaving."""

    live: frozenset[int]
    shutting_down: frozenset[int] = frozenset()

    def up(self, replicas: Sequence[int]) -> list[int]:
        """The replicas on brokers that are up, leaving or not: the ones that must hear the outcome."""
        return [r for r in replicas if r in self.live or r in self.shutting_down]


@dataclass(frozen=True, slots=True)
class Election:
    leader_and_isr: LeaderAndIsr
    replicas_to_receive_request: list[int]


LeaderSelector = Callable[[Sequence[int], LeaderAndIsr, Brokers, bool], Election]
"""(replicas to elect from, current leader and ISR, brokers, unclean election allowed) -> the election."""


def offline_partition_leader_selector(replicas: Sequence[int], current: LeaderAndIsr, brokers: Brokers,
                                      unclean: bool) -> Election:
    """The first live ISR replica in assignment order; else, if allowed, the first live replica at all."""
    live_assigned = [r for r in replicas if r in brokers.live]
    live_isr = [r for r in live_assigned if r in current.isr]
    if live_isr:
        leader, new_isr = live_isr[0], live_isr
    elif unclean and live_assigned:
        leader, new_isr = live_assigned[0], [live_assigned[0]]
    else:
        raise NoLeaderAvailable(
            f"no live replica is in the ISR {list(current.isr)}" +
            ("" if unclean else " and unclean.leader.election.enable is false") +
            f" (live replicas: {live_assigned})")
    return Election(current.new_leader_and_isr(leader, new_isr), live_assigned)


def unclean_partition_leader_selector(replicas: Sequence[int], current: LeaderAndIsr, brokers: Brokers,
                                      unclean: bool) -> Election:
    """ElectLeaders with UNCLEAN: the offline selector with unclean election allowed whatever the config says."""
    return offline_partition_leader_selector(replicas, current, brokers, True)


def reassigned_partition_leader_selector(target: Sequence[int], current: LeaderAndIsr, brokers: Brokers,
                                         unclean: bool) -> Election:
    """The first target replica of a finishing reassignment that is alive and in the ISR."""
    leader = next((r for r in target if r in brokers.live and r in current.isr), None)
    if leader is None:
        raise NoLeaderAvailable(f"none of the target replicas {list(target)} is alive and in the ISR "
                                f"{list(current.isr)}")
    return Election(current.new_leader_and_isr(leader, current.isr), [r for r in target if r in brokers.live])


def controlled_shutdown_partition_leader_selector(replicas: Sequence[int], current: LeaderAndIsr, brokers: Brokers,
                                                  unclean: bool) -> Election:
    """An ISR replica on a broker that is not shutting down; the new ISR leaves the shutting-down brokers out.

    The stopping broker hears the outcome too: it must stop acting as leader and follow."""
    new_isr = [r for r in replicas if r in current.isr and r not in brokers.shutting_down]
    leader = next((r for r in new_isr if r in brokers.live), None)
    if leader is None:
        raise NoLeaderAvailable(f"no replica in the ISR {list(current.isr)} is alive and staying up")
    return Election(current.new_leader_and_isr(leader, new_isr), brokers.up(replicas))


def preferred_replica_partition_leader_selector(replicas: Sequence[int], current: LeaderAndIsr, brokers: Brokers,
                                                unclean: bool) -> Election:
    """The first assigned replica, if it is alive and in the ISR."""
    preferred = replicas[0]
    if current.leader == preferred:
        raise NoLeaderAvailable(f"preferred replica {preferred} already leads")
    if preferred not in brokers.live or preferred not in current.isr:
        raise NoLeaderAvailable(f"preferred replica {preferred} is not alive and in the ISR {list(current.isr)}")
    return Election(current.new_leader_and_isr(preferred, current.isr), [r for r in replicas if r in brokers.live])


def no_op_partition_leader_selector(replicas: Sequence[int], current: LeaderAndIsr, brokers: Brokers,
                                    unclean: bool) -> Election:
    """Same leader, same ISR, new epoch: re-sends the partition's state to its replicas."""
    return Election(current.new_leader_and_isr(current.leader, current.isr),
                    [r for r in replicas if r in brokers.live])
