"""Partition assignors: how a group's leader divides the subscribed partitions among the members.

Kafka's four, under Kafka's names, chosen by `partition.assignment.strategy`:
- `range`: per topic, consecutive partitions to the members subscribed to it, in member order; the first
  `partitions % members` members get one more.
- `roundrobin`: every subscribed partition, sorted, dealt to the members in turn (skipping those not subscribed).
- `sticky`: balanced like roundrobin, but each member keeps what it owned before wherever balance allows.
- `cooperative-sticky`: sticky, for the incremental (cooperative) protocol of KIP-429: a partition that must
  move to another member is left out of this round, so its owner revokes it while keeping all the others, and
  rejoins; the next round gives it to its new member. Nobody stops consuming what does not move.

An assignor is a pure function of the partition counts and the members' subscriptions (which, for the sticky
ones, carry what each member owned and in which generation), so it is tested without a cluster. Members are
taken in member id order.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from kafkalite.common.consumer_protocol import Subscription
from kafkalite.common.types import TopicPartition

Assignments = dict[str, list[TopicPartition]]
EAGER = "eager"
COOPERATIVE = "cooperative"


class PartitionAssignor:
    name: ClassVar[str]
    protocols: ClassVar[tuple[str, ...]] = (EAGER,)  # rebalance protocols it supports

    def assign(self, partition_counts: Mapping[str, int], subscriptions: Mapping[str, Subscription]) -> Assignments:
        raise NotImplementedError


class RangeAssignor(PartitionAssignor):
    name = "range"

    def assign(self, partition_counts: Mapping[str, int], subscriptions: Mapping[str, Subscription]) -> Assignments:
        order = sorted(subscriptions)
        assigned: Assignments = {member: [] for member in order}
        for topic in sorted({t for s in subscriptions.values() for t in s.topics}):
            members = [m for m in order if topic in subscriptions[m].topics]
            count = partition_counts.get(topic, 0)
            per_member, extra = divmod(count, len(members))
            for i, member in enumerate(members):
                start = i * per_member + min(i, extra)
                length = per_member + (1 if i < extra else 0)
                assigned[member] += [TopicPartition(topic, p) for p in range(start, start + length)]
        return assigned


class RoundRobinAssignor(PartitionAssignor):
    name = "roundrobin"

    def assign(self, partition_counts: Mapping[str, int], subscriptions: Mapping[str, Subscription]) -> Assignments:
        order = sorted(subscriptions)
        assigned: Assignments = {member: [] for member in order}
        turn = 0
        for tp in _all_partitions(partition_counts, subscriptions):
            for _ in range(len(order)):
                member = order[turn % len(order)]
                turn += 1
                if tp.topic in subscriptions[member].topics:
                    assigned[member].append(tp)
                    break
        return assigned


def _all_partitions(partition_counts: Mapping[str, int],
                    subscriptions: Mapping[str, Subscription]) -> list[TopicPartition]:
    topics = sorted({t for s in subscriptions.values() for t in s.topics})
    return [TopicPartition(t, p) for t in topics for p in range(partition_counts.get(t, 0))]


class StickyAssignor(PartitionAssignor):
    """Keep what members own, give out the rest to the least loaded, then move single partitions from the most
    to the least loaded member able to take them until no two such members differ by more than one."""

    name = "sticky"

    def assign(self, partition_counts: Mapping[str, int], subscriptions: Mapping[str, Subscription]) -> Assignments:
        return self.balance(partition_counts, subscriptions, self._previous_owners(partition_counts, subscriptions))

    @staticmethod
    def _previous_owners(partition_counts: Mapping[str, int],
                         subscriptions: Mapping[str, Subscription]) -> dict[TopicPartition, str]:
        """Each still-valid partition's previous owner; of two claims, the one from the newer generation."""
        owners: dict[TopicPartition, tuple[int, str]] = {}
        for member in sorted(subscriptions):
            subscription = subscriptions[member]
            for tp in subscription.owned_partitions:
                if tp.topic not in subscription.topics or not 0 <= tp.partition < partition_counts.get(tp.topic, 0):
                    continue
                claim = (subscription.generation_id, member)
                if tp not in owners or claim[0] > owners[tp][0]:
                    owners[tp] = claim
        return {tp: member for tp, (_, member) in owners.items()}

    @staticmethod
    def balance(partition_counts: Mapping[str, int], subscriptions: Mapping[str, Subscription],
                owners: Mapping[TopicPartition, str]) -> Assignments:
        order = sorted(subscriptions)
        assigned: dict[str, list[TopicPartition]] = {member: [] for member in order}
        partitions = _all_partitions(partition_counts, subscriptions)
        eligible = {tp: [m for m in order if tp.topic in subscriptions[m].topics] for tp in partitions}
        for tp in partitions:
            if tp in owners:
                assigned[owners[tp]].append(tp)
        for tp in partitions:
            if tp not in owners:
                assigned[min(eligible[tp], key=lambda m: (len(assigned[m]), m))].append(tp)
        moved = True
        while moved:  # each move narrows the spread between two members, so this ends
            moved = False
            for member in sorted(order, key=lambda m: (-len(assigned[m]), m)):
                for tp in sorted(assigned[member], reverse=True):
                    target = min(eligible[tp], key=lambda m: (len(assigned[m]), m))
                    if len(assigned[target]) + 1 < len(assigned[member]):
                        assigned[member].remove(tp)
                        assigned[target].append(tp)
                        moved = True
                        break
                if moved:
                    break
        return {member: sorted(tps) for member, tps in assigned.items()}


class CooperativeStickyAssignor(StickyAssignor):
    name = "cooperative-sticky"
    protocols = (COOPERATIVE, EAGER)

    def assign(self, partition_counts: Mapping[str, int], subscriptions: Mapping[str, Subscription]) -> Assignments:
        owners = self._previous_owners(partition_counts, subscriptions)
        target = self.balance(partition_counts, subscriptions, owners)
        # A partition moving away from a member that still owns it waits for the next round (KIP-429).
        return {member: [tp for tp in tps if owners.get(tp, member) == member] for member, tps in target.items()}


ASSIGNORS: dict[str, type[PartitionAssignor]] = {
    cls.name: cls for cls in (RangeAssignor, RoundRobinAssignor, StickyAssignor, CooperativeStickyAssignor)
}


def rebalance_protocol(names: list[str]) -> str:
    """Kafka's rule: cooperative only if every configured assignor supports it."""
    return COOPERATIVE if all(COOPERATIVE in ASSIGNORS[name].protocols for name in names) else EAGER
