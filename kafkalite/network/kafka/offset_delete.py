"""OffsetDelete (key 47), version 0: delete a group's committed offsets of some partitions.

Allowed for partitions the group is not consuming (GROUP_SUBSCRIBED_TO_TOPIC otherwise, per partition); errors
about the whole group (GROUP_ID_NOT_FOUND, NOT_COORDINATOR) are top-level. kafka-python's and confluent-kafka's
admin clients send it.
"""

from __future__ import annotations

from kafkalite.network import requests as native
from kafkalite.network.kafka.api import KafkaApi, Session, partition_errors
from kafkalite.network.kafka.protocol import Message, OffsetDeleteRequest, OffsetDeleteResponse


async def handle(request: Message, session: Session) -> Message:
    response: native.OffsetDeleteResponse = await session.send(native.OffsetDeleteRequest(
        request.group_id, [(topic.name, p.partition_index) for topic in request.topics for p in topic.partitions]))
    return OffsetDeleteResponse(throttle_time_ms=0, error_code=response.error_code, topics=partition_errors(
        OffsetDeleteResponse, "OffsetDeleteResponseTopic", "OffsetDeleteResponsePartition", response.partitions))


API = KafkaApi(OffsetDeleteRequest, OffsetDeleteResponse, (0, 0), handle)
