"""DeleteGroups (key 42), versions 0-2: delete empty groups with their committed offsets.

Each group gets its own error: NON_EMPTY_GROUP while it has members, GROUP_ID_NOT_FOUND if there is no such
group, NOT_COORDINATOR if another broker coordinates it.
"""

from __future__ import annotations

from kafkalite.network import requests as native
from kafkalite.network.kafka.api import KafkaApi, Session
from kafkalite.network.kafka.protocol import DeleteGroupsRequest, DeleteGroupsResponse, Message, entry


async def handle(request: Message, session: Session) -> Message:
    response: native.DeleteGroupsResponse = await session.send(native.DeleteGroupsRequest(list(request.groups_names)))
    return DeleteGroupsResponse(throttle_time_ms=0, results=[
        entry(DeleteGroupsResponse, "DeletableGroupResult", group_id=r.group_id, error_code=r.error_code)
        for r in response.results])


API = KafkaApi(DeleteGroupsRequest, DeleteGroupsResponse, (0, 2), handle)
