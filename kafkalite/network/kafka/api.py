"""What every Kafka API module declares (`KafkaApi`) and what its handler is given (`Session`).

A handler translates one decoded Kafka request into the native requests the broker serves, sends them through
`Session.send` to the same `KafkaApis` the native listener reaches, and translates the answers back into the
Kafka response, or None when Kafka sends no response (a produce with acks=0).
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from kafkalite.common.errors import UnknownServerError
from kafkalite.common.types import ZERO_UUID, uuid_bytes, uuid_text
from kafkalite.network.kafka.protocol import Message, entry
from kafkalite.network.listener import call_handler
from kafkalite.network.requests import Request, RequestContext
from kafkalite.network.transport import Handler

_T = TypeVar("_T")


def by_topic(entries: list[_T]) -> dict[str, list[_T]]:
    """Native per-partition entries (each with a `topic`) grouped by topic, topics and partitions in the order
    given: Kafka's responses nest partitions under topics, and clients match them up in request order."""
    grouped: dict[str, list[_T]] = {}
    for item in entries:
        grouped.setdefault(item.topic, []).append(item)  # type: ignore[attr-defined]
    return grouped


def wire_uuid(topic_id: str) -> uuid.UUID | None:
    """A topic id as kafka-python's codec takes it: a UUID, or None for Kafka's zero UUID."""
    return None if topic_id == ZERO_UUID else uuid.UUID(bytes=uuid_bytes(topic_id))


def native_uuid(value: uuid.UUID | None) -> str:
    """`wire_uuid` undone: the codec decodes Kafka's zero UUID as None."""
    return ZERO_UUID if value is None else uuid_text(value.bytes)


def partition_errors(message_type: Any, topic_type: str, partition_type: str, entries: list[Any], *,
                     with_message: bool = False) -> list[Message]:
    """Native per-partition error codes (each entry with `topic`, `partition`, `error_code`) as the topics of a
    Kafka response whose partitions carry only an index and an error code (OffsetCommit, OffsetDelete), and with
    `with_message` an error message too (AlterPartitionReassignments)."""
    return [entry(message_type, topic_type, name=name, partitions=[
        entry(message_type, f"{topic_type}.{partition_type}", partition_index=p.partition, error_code=p.error_code,
              **({"error_message": p.error_message} if with_message else {}))
        for p in partitions]) for name, partitions in by_topic(entries).items()]


@dataclass(frozen=True, slots=True)
class Session:
    """One request's view of the broker: its context (listener KAFKA, client id, correlation id), its version,
    and the APIs the listener serves (ApiVersions lists them)."""

    handler: Handler
    context: RequestContext
    version: int
    apis: Mapping[int, KafkaApi]

    async def send(self, request: Request) -> Any:
        """The broker's response to a native request; a failure comes back as that response type's error.

        Raises only if the failure cannot be carried by the response type, and then the connection is closed.
        """
        response = await call_handler(self.handler, request, self.context)
        if response is None:
            raise UnknownServerError(f"{type(request).__name__} failed and its response cannot carry the error")
        return response


@dataclass(frozen=True, slots=True)
class KafkaApi:
    """One API key as the listener serves it: kafka-python's request and response classes, the versions
    accepted (advertised in ApiVersions), and the handler."""

    request: Any
    response: Any
    versions: tuple[int, int]
    handle: Callable[[Message, Session], Awaitable[Message | None]]

    @property
    def key(self) -> int:
        return int(self.request.API_KEY)

    def supports(self, version: int) -> bool:
        return self.versions[0] <= version <= self.versions[1]
