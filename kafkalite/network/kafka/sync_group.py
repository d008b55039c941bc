"""SyncGroup (key 14), versions 0-5: the leader hands in the assignment, every member gets its own share.

The coordinator answers once the leader's assignment has arrived (and been written to `__consumer_offsets`);
a consumer group's assignment must decode and name existing partitions, or nobody gets it. Errors as Kafka
returns them: REBALANCE_IN_PROGRESS when a new rebalance began meanwhile, ILLEGAL_GENERATION,
UNKNOWN_MEMBER_ID, NOT_COORDINATOR. Versions 3-5 are what the three clients send (aiokafka exactly 3); the
older ones, kafka-python's when its api_version is pinned to a Kafka 2.x release.
"""

from __future__ import annotations

from kafkalite.network import requests as native
from kafkalite.network.kafka.api import KafkaApi, Session
from kafkalite.network.kafka.protocol import Message, SyncGroupRequest, SyncGroupResponse


async def handle(request: Message, session: Session) -> Message:
    response: native.SyncGroupResponse = await session.send(native.SyncGroupRequest(
        request.group_id, request.generation_id, request.member_id,
        [native.SyncGroupAssignment(a.member_id, a.assignment) for a in request.assignments],
        request.group_instance_id, request.protocol_type, request.protocol_name))
    return SyncGroupResponse(throttle_time_ms=0, error_code=response.error_code,
                             protocol_type=response.protocol_type, protocol_name=response.protocol_name,
                             assignment=response.assignment)


API = KafkaApi(SyncGroupRequest, SyncGroupResponse, (0, 5), handle)
