"""Heartbeat (key 12), versions 1-4: a member says it is alive, and learns whether to rejoin.

REBALANCE_IN_PROGRESS tells a member to rejoin; ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID and
FENCED_INSTANCE_ID that it was dropped; NOT_COORDINATOR that the group moved with its offsets partition's
leader. Version 1 is aiokafka's.
"""

from __future__ import annotations

from kafkalite.network import requests as native
from kafkalite.network.kafka.api import KafkaApi, Session
from kafkalite.network.kafka.protocol import HeartbeatRequest, HeartbeatResponse, Message


async def handle(request: Message, session: Session) -> Message:
    response: native.HeartbeatResponse = await session.send(native.HeartbeatRequest(
        request.group_id, request.generation_id, request.member_id, request.group_instance_id))
    return HeartbeatResponse(throttle_time_ms=0, error_code=response.error_code)


API = KafkaApi(HeartbeatRequest, HeartbeatResponse, (1, 4), handle)
