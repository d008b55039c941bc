"""Topic creation: validation and Kafka's replica assignment (AdminUtils.assignReplicasToBrokers).

The assignment must match Kafka's so that a topic spreads over brokers, leaders included, the way operators
expect: round-robin from a random start, followers shifted so that no two partitions share the same follower
pattern, and with racks, each rack holding a replica before any holds two.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

from kafkalite.common.config import BrokerConfig, TopicConfig
from kafkalite.common.errors import (
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    TopicAlreadyExistsError,
)
from kafkalite.common.types import validate_topic_name
from kafkalite.network.requests import CreatableTopic


def _replica_index(first_replica_index: int, second_replica_shift: int, replica_index: int,
                   num_brokers: int) -> int:
    shift = 1 + (second_replica_shift + replica_index) % (num_brokers - 1)
    return (first_replica_index + shift) % num_brokers


def _rack_alternated_broker_list(racks: Mapping[int, str]) -> list[int]:
    """Brokers ordered rack by rack in turn, so consecutive picks land on different racks."""
    by_rack: dict[str, list[int]] = {}
    for broker, rack in sorted(racks.items()):
        by_rack.setdefault(rack, []).append(broker)
    ordered_racks = sorted(by_rack)
    result: list[int] = []
    index = 0
    while len(result) < len(racks):
        brokers = by_rack[ordered_racks[index % len(ordered_racks)]]
        if brokers:
            result.append(brokers.pop(0))
        index += 1
    return result


def assign_replicas_to_brokers(num_partitions: int, replication_factor: int, brokers: Sequence[int],
                               racks: Mapping[int, str | None] | None = None, *,
                               rng: random.Random | None = None, start_partition_id: int = 0
                               ) -> dict[int, list[int]]:
    """Kafka's assignment; rack-aware when every broker has a rack."""
    rng = rng or random.Random()
    if replication_factor < 1:
        raise InvalidReplicationFactorError("Replication factor must be larger than 0.")
    if replication_factor > len(brokers):
        raise InvalidReplicationFactorError(
            f"Replication factor: {replication_factor} larger than available brokers: {len(brokers)}.")
    if num_partitions < 1:
        raise InvalidPartitionsError("Number of partitions must be larger than 0.")
    rack_of = {b: r for b, r in (racks or {}).items() if r is not None}
    aware = len(rack_of) == len(brokers) and all(b in rack_of for b in brokers)
    arranged = _rack_alternated_broker_list({b: rack_of[b] for b in brokers}) if aware else sorted(brokers)
    num_brokers = len(arranged)
    num_racks = len(set(rack_of.values())) if aware else num_brokers
    start_index = rng.randrange(num_brokers)
    next_replica_shift = rng.randrange(num_brokers)
    assignment: dict[int, list[int]] = {}
    for partition in range(start_partition_id, start_partition_id + num_partitions):
        if partition > 0 and partition % num_brokers == 0:
            next_replica_shift += 1
        first = (partition + start_index) % num_brokers
        replicas = [arranged[first]]
        if not aware:
            replicas += [arranged[_replica_index(first, next_replica_shift, j, num_brokers)]
                         for j in range(replication_factor - 1)]
        else:
            used_racks, k = {rack_of[arranged[first]]}, 0
            while len(replicas) < replication_factor:
                broker = arranged[_replica_index(first, next_replica_shift * num_racks, k, num_brokers)]
                rack = rack_of[broker]
                if (rack not in used_racks or len(used_racks) == num_racks) and \
                        (broker not in replicas or len(replicas) == num_brokers):
                    replicas.append(broker)
                    used_racks.add(rack)
                k += 1
        assignment[partition] = replicas
    return assignment


def validate_assignment(assignment: Mapping[int, Sequence[int]], known_brokers: set[int]) -> None:
    if not assignment:
        raise InvalidReplicaAssignmentError("The replica assignment is empty.")
    if sorted(assignment) != list(range(len(assignment))):
        raise InvalidReplicaAssignmentError(
            f"Partitions must be numbered 0..{len(assignment) - 1}, got {sorted(assignment)}.")
    sizes = {len(replicas) for replicas in assignment.values()}
    if len(sizes) != 1 or 0 in sizes:
        raise InvalidReplicaAssignmentError("Every partition must have the same, non-zero number of replicas.")
    for partition, replicas in assignment.items():
        if len(set(replicas)) != len(replicas):
            raise InvalidReplicaAssignmentError(f"Partition {partition} lists a broker twice: {list(replicas)}.")
        unknown = set(replicas) - known_brokers
        if unknown:
            raise InvalidReplicaAssignmentError(
                f"Partition {partition} is assigned to unknown brokers {sorted(unknown)}.")


def plan_topic(topic: CreatableTopic, config: BrokerConfig, existing_topics: set[str],
               live_brokers: Mapping[int, str | None], rng: random.Random
               ) -> tuple[dict[int, list[int]], dict[str, object]]:
    """(assignment, config overrides) for a new topic, or the Kafka error that says why it cannot be made."""
    validate_topic_name(topic.name)
    if topic.name in existing_topics:
        raise TopicAlreadyExistsError(f"Topic '{topic.name}' already exists.")
    overrides = TopicConfig.for_broker(topic.configs, config).overrides
    if topic.assignments:
        assignment = {int(p): list(replicas) for p, replicas in topic.assignments.items()}
        validate_assignment(assignment, set(live_brokers))
        return assignment, overrides
    partitions = config["num.partitions"] if topic.num_partitions == -1 else topic.num_partitions
    replication = config["default.replication.factor"] if topic.replication_factor == -1 \
        else topic.replication_factor
    return assign_replicas_to_brokers(partitions, replication, sorted(live_brokers), live_brokers,
                                      rng=rng), overrides
