"""InitProducerId (key 22), versions 0-4: a producer id and epoch for an idempotent producer.

From v3 a producer may name its id and epoch to have the epoch bumped instead (KIP-360), which librdkafka and
Kafka's producer do to go on after an unknown sequence rather than fail.

Only a null transactional id is served (no transactions: TRANSACTIONAL_ID_AUTHORIZATION_FAILED otherwise, with a
message, as at FindCoordinator). The
broker's producer-id blocks are the native ones, so Kafka and native producers never share an id.
"""

from __future__ import annotations

from kafkalite.network import requests as native
from kafkalite.network.kafka.api import KafkaApi, Session
from kafkalite.network.kafka.protocol import InitProducerIdRequest, InitProducerIdResponse, Message


async def handle(request: Message, session: Session) -> Message:
    response: native.InitProducerIdResponse = await session.send(
        native.InitProducerIdRequest(request.transactional_id, request.transaction_timeout_ms, request.producer_id,
                                     request.producer_epoch))
    return InitProducerIdResponse(throttle_time_ms=0, error_code=response.error_code,
                                  producer_id=response.producer_id, producer_epoch=response.producer_epoch)


API = KafkaApi(InitProducerIdRequest, InitProducerIdResponse, (0, 4), handle)
