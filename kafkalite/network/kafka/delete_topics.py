"""DeleteTopics (key 20), versions 0-3: delete topics by name.

Forwarded to the controller, which runs Kafka's topic deletion (replicas stopped and deleted, then the topic's
znodes); each name gets its own error (UNKNOWN_TOPIC_OR_PARTITION, TOPIC_DELETION_DISABLED, ...).
"""

from __future__ import annotations

from kafkalite.network import requests as native
from kafkalite.network.kafka.api import KafkaApi, Session
from kafkalite.network.kafka.protocol import DeleteTopicsRequest, DeleteTopicsResponse, Message, entry


async def handle(request: Message, session: Session) -> Message:
    response: native.DeleteTopicsResponse = await session.send(
        native.DeleteTopicsRequest(list(request.topic_names), request.timeout_ms))
    return DeleteTopicsResponse(throttle_time_ms=0, responses=[
        entry(DeleteTopicsResponse, "DeletableTopicResult", name=r.name, error_code=r.error_code,
              error_message=r.error_message)
        for r in response.responses])


API = KafkaApi(DeleteTopicsRequest, DeleteTopicsResponse, (0, 3), handle)
