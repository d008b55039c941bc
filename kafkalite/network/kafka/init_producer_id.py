"""InitProducerId (key 22), versions 0-1: a producer id and epoch for an idempotent producer.

Only a null transactional id is served (no transactions: INVALID_REQUEST otherwise, with a message). The
broker's producer-id blocks are the native ones, so Kafka and native producers never share an id.
"""

from __future__ import annotations

from kafkalite.network import requests as native
from kafkalite.network.kafka.api import KafkaApi, Session
from kafkalite.network.kafka.protocol import InitProducerIdRequest, InitProducerIdResponse, Message


async def handle(request: Message, session: Session) -> Message:
    response: native.InitProducerIdResponse = await session.send(
        native.InitProducerIdRequest(request.transactional_id, request.transaction_timeout_ms))
    return InitProducerIdResponse(throttle_time_ms=0, error_code=response.error_code,
                                  producer_id=response.producer_id, producer_epoch=response.producer_epoch)


API = KafkaApi(InitProducerIdRequest, InitProducerIdResponse, (0, 1), handle)
