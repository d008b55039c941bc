"""LeaveGroup (key 13), versions 1-5: members leave their group, which rebalances without them at once.

Versions 1-2 name one member and carry its error at the top; from version 3 a request names several (by member
id or group instance id) and each gets its own error, the top-level code being kept for errors about the whole
group (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS). Version 1 is aiokafka's and librdkafka's.
"""

from __future__ import annotations

from kafkalite.common import errors
from kafkalite.network import requests as native
from kafkalite.network.kafka.api import KafkaApi, Session
from kafkalite.network.kafka.protocol import LeaveGroupRequest, LeaveGroupResponse, Message, entry

MEMBERS_LIST = 3


async def handle(request: Message, session: Session) -> Message:
    batched = session.version >= MEMBERS_LIST
    members = [native.MemberIdentity(m.member_id, m.group_instance_id, m.reason) for m in request.members] \
        if batched else [native.MemberIdentity(request.member_id)]
    response: native.LeaveGroupResponse = await session.send(native.LeaveGroupRequest(request.group_id, members))
    error_code = response.error_code
    if not batched and error_code == errors.NONE.code and response.members:
        error_code = response.members[0].error_code
    return LeaveGroupResponse(throttle_time_ms=0, error_code=error_code, members=[
        entry(LeaveGroupResponse, "MemberResponse", member_id=m.member_id, group_instance_id=m.group_instance_id,
              error_code=m.error_code)
        for m in response.members])


API = KafkaApi(LeaveGroupRequest, LeaveGroupResponse, (1, 5), handle)
