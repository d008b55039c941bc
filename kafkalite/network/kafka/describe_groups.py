"""DescribeGroups (key 15), versions 0-5: each group's state, protocol and members.

Members come with their client id, host, subscription and (once the group is stable) assignment, in Kafka's
consumer protocol bytes, so admin tools decode them as they do Kafka's. A group this broker does not
coordinate is NOT_COORDINATOR for that group; an unknown one is Dead with no members, as in Kafka. Asked for
(version 3+), a group's authorized operations are all a group supports (READ, DESCRIBE, DELETE): nothing is
refused, as on a Kafka broker without an authorizer; not asked for, or for a group answered with an error, they
are Kafka's "not provided" (-2^31).
"""

from __future__ import annotations

from kafkalite.network import requests as native
from kafkalite.network.kafka.acls import GROUP_OPERATIONS, authorized_operations
from kafkalite.network.kafka.api import KafkaApi, Session
from kafkalite.network.kafka.protocol import DescribeGroupsRequest, DescribeGroupsResponse, Message, entry

async def handle(request: Message, session: Session) -> Message:
    response: native.DescribeGroupsResponse = await session.send(native.DescribeGroupsRequest(list(request.groups)))
    return DescribeGroupsResponse(throttle_time_ms=0, groups=[
        entry(DescribeGroupsResponse, "DescribedGroup", error_code=g.error_code, error_message=g.error_message,
              group_id=g.group_id, group_state=g.group_state, protocol_type=g.protocol_type,
              protocol_data=g.protocol_data,
              authorized_operations=authorized_operations(
                  request.include_authorized_operations and not g.error_code, GROUP_OPERATIONS), members=[
                  entry(DescribeGroupsResponse, "DescribedGroup.DescribedGroupMember", member_id=m.member_id,
                        group_instance_id=m.group_instance_id, client_id=m.client_id, client_host=m.client_host,
                        member_metadata=m.member_metadata, member_assignment=m.member_assignment)
                  for m in g.members])
        for g in response.groups])


API = KafkaApi(DescribeGroupsRequest, DescribeGroupsResponse, (0, 5), handle)
