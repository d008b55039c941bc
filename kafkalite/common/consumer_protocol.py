"""Kafka's consumer protocol: the subscription and assignment bytes that travel inside JoinGroup and SyncGroup.

The group coordinator treats a member's metadata and assignment as opaque bytes; only consumers read them. They
are kept in Kafka's own binary layout (ConsumerProtocolSubscription v0-v3, ConsumerProtocolAssignment v0-v3)
rather than msgpack, so that kafkalite's consumers and Apache Kafka's, reaching the brokers through the Kafka
listener, can share one group. Like Kafka's, the decoder accepts any version from 0 and ignores fields it does
not know; the encoder writes subscription v2 (with the member's owned partitions and generation, which the
sticky assignors need) and assignment v1.

Sans-IO and pure, so the coordinator can check an assignment against the topics it knows, and the assignors
can be tested without a cluster.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from kafkalite.common.errors import InvalidRequestError
from kafkalite.common.types import TopicPartition

CONSUMER_PROTOCOL_TYPE = "consumer"
SUBSCRIPTION_VERSION = 2
ASSIGNMENT_VERSION = 1

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")


@dataclass(frozen=True, slots=True)
class Subscription:
    """What a member asks for: its topics, and (v1+) what it owns now and (v2+) since which generation."""

    topics: tuple[str, ...]
    user_data: bytes | None = None
    owned_partitions: tuple[TopicPartition, ...] = ()
    generation_id: int = -1
    rack_id: str | None = None


@dataclass(frozen=True, slots=True)
class Assignment:
    """What the leader gives a member."""

    partitions: tuple[TopicPartition, ...] = field(default_factory=tuple)
    user_data: bytes | None = None


# -- encoding -------------------------------------------------------------------------------------------------------

def _string(text: str) -> bytes:
    data = text.encode()
    return _INT16.pack(len(data)) + data


def _bytes(data: bytes | None) -> bytes:
    return _INT32.pack(-1) if data is None else _INT32.pack(len(data)) + data


def _partitions(partitions: tuple[TopicPartition, ...]) -> bytes:
    by_topic: dict[str, list[int]] = {}
    for tp in partitions:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    out = [_INT32.pack(len(by_topic))]
    for topic, numbers in sorted(by_topic.items()):
        out += [_string(topic), _INT32.pack(len(numbers)), *(_INT32.pack(p) for p in sorted(numbers))]
    return b"".join(out)


def encode_subscription(subscription: Subscription) -> bytes:
    return b"".join([_INT16.pack(SUBSCRIPTION_VERSION), _INT32.pack(len(subscription.topics)),
                     *map(_string, subscription.topics), _bytes(subscription.user_data),
                     _partitions(subscription.owned_partitions), _INT32.pack(subscription.generation_id)])


def encode_assignment(assignment: Assignment) -> bytes:
    return _INT16.pack(ASSIGNMENT_VERSION) + _partitions(assignment.partitions) + _bytes(assignment.user_data)


# -- decoding -------------------------------------------------------------------------------------------------------

class _Reader:
    """Reads Kafka's big-endian fields, raising INVALID_REQUEST (naming `what`) on truncated or absurd input."""

    def __init__(self, data: bytes, what: str) -> None:
        self._data = data
        self._at = 0
        self._what = what

    def _take(self, size: int) -> bytes:
        if size < 0 or self._at + size > len(self._data):
            raise InvalidRequestError(f"{self._what} is truncated at byte {self._at}")
        chunk = self._data[self._at:self._at + size]
        self._at += size
        return chunk

    def int16(self) -> int:
        return int(_INT16.unpack(self._take(2))[0])

    def int32(self) -> int:
        return int(_INT32.unpack(self._take(4))[0])

    def count(self) -> int:
        """An array length; a length beyond the bytes left is refused before anything is allocated for it."""
        count = self.int32()
        if count > len(self._data) - self._at:
            raise InvalidRequestError(f"{self._what} claims {count} entries in {len(self._data)} bytes")
        return max(count, 0)

    def string(self) -> str:
        length = self.int16()
        try:
            return self._take(length).decode()
        except UnicodeDecodeError:
            raise InvalidRequestError(f"{self._what} holds a string that is not UTF-8") from None

    def nullable_bytes(self) -> bytes | None:
        length = self.int32()
        return None if length < 0 else self._take(length)

    def nullable_string(self) -> str | None:
        length = self.int16()
        return None if length < 0 else self._take(length).decode(errors="replace")

    def partitions(self) -> tuple[TopicPartition, ...]:
        found = []
        for _ in range(self.count()):
            topic = self.string()
            found += [TopicPartition(topic, self.int32()) for _ in range(self.count())]
        return tuple(found)

    @property
    def exhausted(self) -> bool:
        return self._at >= len(self._data)


def decode_subscription(data: bytes) -> Subscription:
    reader = _Reader(data, "a consumer subscription")
    version = reader.int16()
    if version < 0:
        raise InvalidRequestError(f"a consumer subscription has version {version}")
    topics = tuple(reader.string() for _ in range(reader.count()))
    user_data = reader.nullable_bytes()
    owned = reader.partitions() if version >= 1 and not reader.exhausted else ()
    generation = reader.int32() if version >= 2 and not reader.exhausted else -1
    rack = reader.nullable_string() if version >= 3 and not reader.exhausted else None
    return Subscription(topics, user_data, owned, generation, rack)


def decode_assignment(data: bytes) -> Assignment:
    reader = _Reader(data, "a consumer assignment")
    version = reader.int16()
    if version < 0:
        raise InvalidRequestError(f"a consumer assignment has version {version}")
    partitions = reader.partitions()
    return Assignment(partitions, reader.nullable_bytes() if not reader.exhausted else None)
