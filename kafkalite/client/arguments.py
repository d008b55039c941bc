"""Checks of what the application passes to the consumer and admin client, each failing with what was expected.

An argument of the wrong type otherwise fails far from the call, in words about something else: a topic name
passed where a list was expected is iterated letter by letter (`delete_topics("orders")` would ask to delete
topics "o", "r", "d", ...), a string offset fails inside a comparison, a bare topic name given to `assign()`
becomes a partition of a one-letter topic. These run once per call, never per record.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, TypeGuard

from kafkalite.common.types import TopicPartition


def is_int(value: object) -> TypeGuard[int]:
    """An int that is not a bool: `True` is an int to Python, and never a partition or an offset."""
    return isinstance(value, int) and not isinstance(value, bool)


INT32_MAX = (1 << 31) - 1
INT64_MAX = (1 << 63) - 1
"""Kafka's int and long: partitions and leader epochs are the one, offsets and timestamps the other."""


def non_negative_int(value: Any, what: str, most: int = INT64_MAX) -> int:
    """`value` if it is an int from 0 to `most`: TypeError naming `what` for another type, ValueError for one out
    of range (past a Kafka long it would fail only when a request is encoded, far from the call)."""
    if not is_int(value):
        raise TypeError(f"{what} must be an int, not {type(value).__name__}")
    if value < 0:
        raise ValueError(f"{what} must not be negative, got {value}")
    if value > most:
        raise ValueError(f"{what} must be at most {most}, got {value}")
    return int(value)


def checked_leader_epoch(value: Any, what: str) -> int:
    """A leader epoch: an int from -1 (unknown) up."""
    if not is_int(value):
        raise TypeError(f"{what} must be an int, not {type(value).__name__}")
    if not -1 <= value <= INT32_MAX:
        raise ValueError(f"{what} must be -1 (unknown) or a leader epoch up to {INT32_MAX}, got {value}")
    return int(value)


def topic_partition(value: Any, where: str) -> TopicPartition:
    """A TopicPartition, or the (topic, partition) pair it is: anything else is a TypeError naming `where`."""
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], str) and is_int(value[1]):
        return TopicPartition(value[0], non_negative_int(value[1], f"the partition of {value[0]!r} in {where}",
                                                         INT32_MAX))
    raise TypeError(f"{where} takes a TopicPartition(topic, partition), not {value!r}")


def collection(values: Any, where: str, items: str) -> Iterable[Any]:
    """`values` if it is a collection of `items`; a single item where a collection belongs is a TypeError."""
    if isinstance(values, (str, bytes, TopicPartition)) or not isinstance(values, Iterable):
        raise TypeError(f"{where} takes a collection of {items}, not {type(values).__name__} {values!r}")
    return values


def topic_partitions(values: Any, where: str) -> list[TopicPartition]:
    return [topic_partition(value, where) for value in collection(values, where, "TopicPartition")]


def topic_names(values: Any, where: str, items: str = "topic names") -> list[str]:
    names = list(collection(values, where, items))
    for name in names:
        if not isinstance(name, str):
            raise TypeError(f"{where} takes {items} (str), not {type(name).__name__} {name!r}")
    return names


def broker_ids(values: Any, where: str) -> list[int]:
    return [non_negative_int(value, f"a broker id in {where}") for value in collection(values, where, "broker ids")]


def mapping(values: Any, where: str, items: str) -> Mapping[Any, Any]:
    if not isinstance(values, Mapping):
        raise TypeError(f"{where} takes a mapping of {items}, not {type(values).__name__}")
    return values
