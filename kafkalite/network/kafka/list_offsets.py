"""ListOffsets (key 2), versions 1-7: the earliest, the latest (high watermark), the first offset at a time, or
(version 7, KIP-734) the record with the largest timestamp.

Version 0, with its list of old-style offsets, is not served: every client that speaks RecordBatch v2 asks for
version 1 or later. A consumer sees offsets up to the high watermark. Version 4 adds the leader epoch both ways
(KIP-320): the request's current epoch fences it as it fences a fetch (FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH),
and the answer names the epoch of the leader that gave it. Right after a leader change the new leader's high
watermark may trail the start of its epoch until its followers catch up (KIP-207): version 5 and later are
answered OFFSET_NOT_AVAILABLE then, older ones LEADER_NOT_AVAILABLE, which is what Kafka tells clients that
predate the new code; both are retried. Version 6 is the first flexible version. A lookup by time, or for the
largest timestamp, that finds nothing a consumer can read answers offset -1 and timestamp -1, as Kafka does.
"""

from __future__ import annotations

from kafkalite.common import errors
from kafkalite.network import requests as native
from kafkalite.network.kafka.api import KafkaApi, Session, by_topic
from kafkalite.network.kafka.protocol import ListOffsetsRequest, ListOffsetsResponse, Message, entry


async def handle(request: Message, session: Session) -> Message:
    response: native.ListOffsetsResponse = await session.send(native.ListOffsetsRequest(
        native.CONSUMER_REPLICA_ID,
        [native.ListOffsetsPartition(topic.name, p.partition_index, p.timestamp, p.current_leader_epoch)
         for topic in request.topics for p in topic.partitions],
        request.isolation_level))
    catching_up = errors.OFFSET_NOT_AVAILABLE.code if session.version >= 5 else errors.LEADER_NOT_AVAILABLE.code
    return ListOffsetsResponse(throttle_time_ms=0, topics=[
        entry(ListOffsetsResponse, "ListOffsetsTopicResponse", name=name, partitions=[
            entry(ListOffsetsResponse, "ListOffsetsTopicResponse.ListOffsetsPartitionResponse",
                  partition_index=p.partition, timestamp=p.timestamp, offset=p.offset, leader_epoch=p.leader_epoch,
                  error_code=catching_up if p.error_code == errors.OFFSET_NOT_AVAILABLE.code else p.error_code)
            for p in partitions])
        for name, partitions in by_topic(response.partitions).items()])


API = KafkaApi(ListOffsetsRequest, ListOffsetsResponse, (1, 7), handle)
