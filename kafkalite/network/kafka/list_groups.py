"""ListGroups (key 16), versions 0-4: the groups this broker coordinates, optionally only some states (v4).

As in Kafka, each broker lists only its own groups; admin clients ask every broker and merge. Version 5's
group types (KIP-848) are not served: every group is a classic one.
"""

from __future__ import annotations

from kafkalite.network import requests as native
from kafkalite.network.kafka.api import KafkaApi, Session
from kafkalite.network.kafka.protocol import ListGroupsRequest, ListGroupsResponse, Message, entry


async def handle(request: Message, session: Session) -> Message:
    response: native.ListGroupsResponse = await session.send(native.ListGroupsRequest(list(request.states_filter)))
    return ListGroupsResponse(throttle_time_ms=0, error_code=response.error_code, groups=[
        entry(ListGroupsResponse, "ListedGroup", group_id=g.group_id, protocol_type=g.protocol_type,
              group_state=g.group_state)
        for g in response.groups])


API = KafkaApi(ListGroupsRequest, ListGroupsResponse, (0, 4), handle)
