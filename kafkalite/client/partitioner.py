"""Kafka's default partitioner, bit for bit, so a key lands on the same partition number as with Apache Kafka.

Keyed records go to `toPositive(murmur2(key)) % partitions`, the Java client's formula: applications that
rely on co-partitioning (a join on key, a compacted changelog read by partition) keep working when they move
between kafkalite and Kafka. Records without a key stick to one partition until its batch is sent and then
move on (KIP-480): batches fill up instead of one record going to each partition.
"""

from __future__ import annotations

import random

_M = 0x5BD1E995
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """The Java client's `Utils.murmur2`: a signed 32-bit result, with its seed and its tail handling."""
    length = len(data)
    h = (0x9747B28C ^ length) & _MASK
    for i in range(0, length - length % 4, 4):
        k = data[i] | data[i + 1] << 8 | data[i + 2] << 16 | data[i + 3] << 24
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    tail = length & ~3
    remaining = length % 4
    if remaining == 3:
        h ^= data[tail + 2] << 16
    if remaining >= 2:
        h ^= data[tail + 1] << 8
    if remaining >= 1:
        h ^= data[tail]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def to_positive(number: int) -> int:
    return number & 0x7FFFFFFF


def partition_for_key(key: bytes, num_partitions: int) -> int:
    return to_positive(murmur2(key)) % num_partitions


class StickyPartitioner:
    """Picks the partition for records without a key: the same one until `on_batch_sent` moves it."""

    def __init__(self, rng: random.Random | None = None) -> None:
        self._rng = rng or random.Random()
        self._sticky: dict[str, int] = {}

    def partition(self, topic: str, num_partitions: int) -> int:
        current = self._sticky.get(topic)
        if current is None or current >= num_partitions:
            current = self._sticky[topic] = self._rng.randrange(num_partitions)
        return current

    def on_batch_sent(self, topic: str, partition: int, num_partitions: int) -> None:
        """Move on to another partition once the sticky one's batch leaves."""
        if self._sticky.get(topic) == partition and num_partitions > 1:
            choice = self._rng.randrange(num_partitions - 1)
            self._sticky[topic] = choice + (choice >= partition)

    def forget(self, topic: str) -> None:
        """A topic the producer no longer sends to: a send to it again picks a partition afresh."""
        self._sticky.pop(topic, None)
