"""FindCoordinator (key 10), versions 0-3: which broker coordinates a group.

The coordinator is the leader of the group's `__consumer_offsets` partition, advertised at its KAFKA endpoint;
the topic is created on the first request, and until its partition has a live leader the answer is
COORDINATOR_NOT_AVAILABLE, which clients retry after their backoff. Only group coordinators (key type 0) are
served: kafkalite has no transactions, so a transaction coordinator (type 1) is answered
TRANSACTIONAL_ID_AUTHORIZATION_FAILED, the one error every client takes as final here. Version 4 asks for several
keys at once (KIP-699), each answered on its own.
"""

from __future__ import annotations

from kafkalite.network import requests as native
from kafkalite.network.kafka.api import KafkaApi, Session
from kafkalite.network.kafka.protocol import FindCoordinatorRequest, FindCoordinatorResponse, Message, entry

BATCHED = 4


async def handle(request: Message, session: Session) -> Message:
    if session.version < BATCHED:
        response = await _find(session, request.key, request.key_type)
        return FindCoordinatorResponse(throttle_time_ms=0, error_code=response.error_code,
                                       error_message=response.error_message, node_id=response.node_id,
                                       host=response.host, port=response.port)
    coordinators = []
    for key in request.coordinator_keys:
        response = await _find(session, key, request.key_type)
        coordinators.append(entry(FindCoordinatorResponse, "Coordinator", key=key, node_id=response.node_id,
                                  host=response.host, port=response.port, error_code=response.error_code,
                                  error_message=response.error_message))
    return FindCoordinatorResponse(throttle_time_ms=0, coordinators=coordinators)


async def _find(session: Session, key: str, key_type: int) -> native.FindCoordinatorResponse:
    response: native.FindCoordinatorResponse = await session.send(native.FindCoordinatorRequest(key, key_type))
    return response


API = KafkaApi(FindCoordinatorRequest, FindCoordinatorResponse, (0, 4), handle)
