"""FindCoordinator (key 10), versions 0-3: which broker coordinates a group.

The coordinator is the leader of the group's `__consumer_offsets` partition, advertised at its KAFKA endpoint;
the topic is created on the first request, and until its partition has a live leader the answer is
COORDINATOR_NOT_AVAILABLE, which clients retry after their backoff. Only group coordinators (key type 0) are
served: kafkalite has no transactions, so a transaction coordinator (type 1) is answered
TRANSACTIONAL_ID_AUTHORIZATION_FAILED, the one error every client takes as final here. Version 4
(several keys per request, KIP-699) is not served; every client falls back to one key per request.
"""

from __future__ import annotations

from kafkalite.network import requests as native
from kafkalite.network.kafka.api import KafkaApi, Session
from kafkalite.network.kafka.protocol import FindCoordinatorRequest, FindCoordinatorResponse, Message


async def handle(request: Message, session: Session) -> Message:
    response: native.FindCoordinatorResponse = await session.send(
        native.FindCoordinatorRequest(request.key, request.key_type))
    return FindCoordinatorResponse(throttle_time_ms=0, error_code=response.error_code,
                                   error_message=response.error_message, node_id=response.node_id,
                                   host=response.host, port=response.port)


API = KafkaApi(FindCoordinatorRequest, FindCoordinatorResponse, (0, 3), handle)
