"""OffsetCommit (key 8), versions 2-8: a group's consumed positions, stored by its coordinator.

A member of the group commits with its generation and member id (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID or
REBALANCE_IN_PROGRESS if it is no longer one); a consumer outside group management (assign()) commits with
generation -1 and no member id, which is accepted while the group has no members. Each partition gets its own
error (UNKNOWN_TOPIC_OR_PARTITION for one that does not exist); errors about the whole group (NOT_COORDINATOR,
COORDINATOR_LOAD_IN_PROGRESS) are given on every partition, since the response has no top-level code. The
retention time of versions 2-4 is ignored, as Kafka has done since 2.1 for group members: offsets are kept
for offsets.retention.minutes after the group empties. Version 2 is the only one aiokafka sends.
"""

from __future__ import annotations

from kafkalite.network import requests as native
from kafkalite.network.kafka.api import KafkaApi, Session, partition_errors
from kafkalite.network.kafka.protocol import Message, OffsetCommitRequest, OffsetCommitResponse


async def handle(request: Message, session: Session) -> Message:
    response: native.OffsetCommitResponse = await session.send(native.OffsetCommitRequest(
        request.group_id, request.generation_id_or_member_epoch, request.member_id,
        [native.OffsetCommitPartition(topic.name, p.partition_index, p.committed_offset, p.committed_leader_epoch,
                                      p.committed_metadata)
         for topic in request.topics for p in topic.partitions],
        request.group_instance_id))
    return OffsetCommitResponse(throttle_time_ms=0, topics=partition_errors(
        OffsetCommitResponse, "OffsetCommitResponseTopic", "OffsetCommitResponsePartition", response.partitions))


API = KafkaApi(OffsetCommitRequest, OffsetCommitResponse, (2, 8), handle)
