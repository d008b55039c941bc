"""The small value types every room shares: topic partitions, topic-name rules and Kafka's UUIDs."""

from __future__ import annotations

import base64
import random
import re
import uuid
from typing import NamedTuple

from kafkalite.common.errors import InvalidTopicError

MAX_TOPIC_NAME_LENGTH = 249
GROUP_METADATA_TOPIC_NAME = "__consumer_offsets"
"""Where group coordinators keep groups and committed offsets (Kafka's name, so tools recognise it)."""
INTERNAL_TOPICS: frozenset[str] = frozenset({GROUP_METADATA_TOPIC_NAME})
_LEGAL_TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]+")
ZERO_UUID = "AAAAAAAAAAAAAAAAAAAAAA"
"""Kafka's Uuid.ZERO_UUID as it prints: "no id" wherever the protocol carries a topic id."""
_RESERVED_UUIDS = frozenset({ZERO_UUID, "AAAAAAAAAAAAAAAAAAAAAQ"})  # and Kafka's METADATA_TOPIC_ID, 1


def random_uuid(rng: random.Random) -> str:
    """Kafka's Uuid.randomUuid as Uuid.toString prints it: a version-4 UUID in URL-safe base64 without padding, 22
    characters, never one of the ids Kafka reserves, never starting with '-' (a command line would take it for an
    option). Drawn from `rng`, so a seeded cluster names its topics and itself the same way every run."""
    while True:
        text = uuid_text(uuid.UUID(int=rng.getrandbits(128), version=4).bytes)
        if text not in _RESERVED_UUIDS and not text.startswith("-"):
            return text


def uuid_bytes(text: str) -> bytes:
    """The 16 bytes of a UUID that `random_uuid` printed (ValueError for text that is not one)."""
    raw = base64.urlsafe_b64decode(text + "==") if len(text) == 22 else b""
    if len(raw) != 16:
        raise ValueError(f"not a Kafka UUID: {text!r}")
    return raw


def uuid_text(raw: bytes) -> str:
    """`uuid_bytes` undone: 16 bytes as Uuid.toString prints them."""
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


class TopicPartition(NamedTuple):
    """A partition of a topic. A tuple, so it hashes fast and sorts by topic then partition."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


def validate_topic_name(name: object) -> str:
    """Kafka's rules for topic names, so a name kafkalite accepts is one Apache Kafka accepts too.

    The 249-character limit leaves room for the partition suffix in a log directory name on a 255-byte
    file system, which matters once a topic moves to a real cluster.
    """
    if not isinstance(name, str):
        raise InvalidTopicError(f"Topic name must be a string, not {type(name).__name__} ({name!r:.40})")
    if not name:
        raise InvalidTopicError("Topic name is illegal, it can't be empty")
    if name in (".", ".."):
        raise InvalidTopicError(f"Topic name cannot be {name!r}")
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        raise InvalidTopicError(
            f"Topic name is illegal, it can't be longer than {MAX_TOPIC_NAME_LENGTH} characters, "
            f"topic name: {name[:40]}...")
    if not _LEGAL_TOPIC_NAME.fullmatch(name):
        raise InvalidTopicError(
            f"Topic name {name!r} is illegal, it contains a character other than ASCII alphanumerics, '.', '_' "
            "and '-'")
    return name
