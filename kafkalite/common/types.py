"""The small value types every room shares: topic partitions and topic-name rules."""

from __future__ import annotations

import re
from typing import NamedTuple

from kafkalite.common.errors import InvalidTopicError

MAX_TOPIC_NAME_LENGTH = 249
GROUP_METADATA_TOPIC_NAME = "__consumer_offsets"
"""Where group coordinators keep groups and committed offsets (Kafka's name, so tools recognise it)."""
INTERNAL_TOPICS: frozenset[str] = frozenset({GROUP_METADATA_TOPIC_NAME})
_LEGAL_TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]+")


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
