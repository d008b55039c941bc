"""JoinGroup (key 11), versions 2-7: join a group, or rejoin it for a rebalance, and learn the generation.

The group coordinator holds the request until every member has rejoined or the rebalance timeout passes (the
listener serves a connection's requests in order, as Kafka does, so clients send heartbeats elsewhere). From v4
a member joining without an id gets MEMBER_ID_REQUIRED with its new id and joins again with it (KIP-394); below,
whose clients do not know that error, it joins at once under the id the answer gives it, as in Kafka. Versions
0 and 1 are not served (Kafka 4 dropped them too). The leader's response carries every
member's subscription; the others get none. Static members (group_instance_id, v5+) keep their partitions
across a restart within the session timeout. Before v7 the protocol name is not nullable, so an error answers
it empty, as Kafka does.
"""

from __future__ import annotations

from kafkalite.network import requests as native
from kafkalite.network.kafka.api import KafkaApi, Session
from kafkalite.network.kafka.protocol import JoinGroupRequest, JoinGroupResponse, Message, entry

NULLABLE_PROTOCOL_NAME = 7
KNOWN_MEMBER_ID_REQUIRED = 4


async def handle(request: Message, session: Session) -> Message:
    response: native.JoinGroupResponse = await session.send(native.JoinGroupRequest(
        request.group_id, request.session_timeout_ms, request.rebalance_timeout_ms, request.member_id,
        request.protocol_type, [native.JoinGroupProtocol(p.name, p.metadata) for p in request.protocols],
        request.group_instance_id, require_known_member_id=session.version >= KNOWN_MEMBER_ID_REQUIRED))
    protocol_name = response.protocol_name
    if protocol_name is None and session.version < NULLABLE_PROTOCOL_NAME:
        protocol_name = ""
    return JoinGroupResponse(
        throttle_time_ms=0, error_code=response.error_code, generation_id=response.generation_id,
        protocol_type=response.protocol_type, protocol_name=protocol_name, leader=response.leader,
        member_id=response.member_id, members=[
            entry(JoinGroupResponse, "JoinGroupResponseMember", member_id=m.member_id,
                  group_instance_id=m.group_instance_id, metadata=m.metadata)
            for m in response.members])


API = KafkaApi(JoinGroupRequest, JoinGroupResponse, (2, 7), handle)
