"""DeleteTopics (key 20), versions 0-6: delete topics by name, or (v6) by id.

Forwarded to the controller, which runs Kafka's topic deletion (replicas stopped and deleted, then the topic's
znodes); each topic gets its own error (UNKNOWN_TOPIC_OR_PARTITION, TOPIC_DELETION_DISABLED, ...), from version 5
with a message. Version 6 names each topic by name or by id (KIP-516), as Kafka: an id no topic has is
UNKNOWN_TOPIC_ID, a topic given both a name and an id fails the whole request with INVALID_REQUEST, and each result
carries the id it was asked by (Kafka's zero UUID for a topic asked by name).
"""

from __future__ import annotations

from typing import Any

from kafkalite.common import errors
from kafkalite.network import requests as native
from kafkalite.network.kafka.api import KafkaApi, Session, native_uuid
from kafkalite.network.kafka.protocol import DeleteTopicsRequest, DeleteTopicsResponse, Message, entry

BY_TOPIC_ID = 6


async def handle(request: Message, session: Session) -> Message:
    if session.version < BY_TOPIC_ID:
        response: native.DeleteTopicsResponse = await session.send(
            native.DeleteTopicsRequest(list(request.topic_names), request.timeout_ms))
        return _response([(r.name, None, r.error_code, r.error_message) for r in response.responses])
    if any(topic.name is not None and topic.topic_id is not None for topic in request.topics):
        return _response([(topic.name, topic.topic_id, errors.INVALID_REQUEST.code,
                           "Topic name and topic ID can not both be specified.") for topic in request.topics])
    names: dict[str, str] = {}
    if any(topic.topic_id is not None for topic in request.topics):
        described: native.MetadataResponse = await session.send(native.MetadataRequest(None, False))
        names = {t.topic_id: t.name for t in described.topics}
    asked = [(topic.name if topic.topic_id is None else names.get(native_uuid(topic.topic_id)), topic.topic_id)
             for topic in request.topics]
    wanted = [name for name, _ in asked if name is not None]
    results: dict[str, native.DeletableTopicResult] = {}
    if wanted:
        deleted: native.DeleteTopicsResponse = await session.send(native.DeleteTopicsRequest(wanted,
                                                                                             request.timeout_ms))
        results = {r.name: r for r in deleted.responses}
    return _response([
        (name, topic_id, results[name].error_code, results[name].error_message) if name is not None
        else (None, topic_id, errors.UNKNOWN_TOPIC_ID.code, f"No topic has the id {native_uuid(topic_id)}.")
        for name, topic_id in asked])


def _response(results: list[tuple[str | None, Any, int, str | None]]) -> Message:
    """Each topic's (name, id as the request gave it, error code, error message)."""
    return DeleteTopicsResponse(throttle_time_ms=0, responses=[
        entry(DeleteTopicsResponse, "DeletableTopicResult", name=name, topic_id=topic_id, error_code=code,
              error_message=message)
        for name, topic_id, code, message in results])


API = KafkaApi(DeleteTopicsRequest, DeleteTopicsResponse, (0, 6), handle)
