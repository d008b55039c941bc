"""ListOffsets (key 2), versions 1-3: the earliest, the latest (high watermark) or the first offset at a time.

Version 0, with its list of old-style offsets, is not served: every client that speaks RecordBatch v2 asks for
version 1 or later. A consumer sees offsets up to the high watermark; right after a leader change the broker
may answer OFFSET_NOT_AVAILABLE until the new leader's high watermark has caught up (KIP-207), which clients
retry.
"""

from __future__ import annotations

from kafkalite.network import requests as native
from kafkalite.network.kafka.api import KafkaApi, Session, by_topic
from kafkalite.network.kafka.protocol import ListOffsetsRequest, ListOffsetsResponse, Message, entry


async def handle(request: Message, session: Session) -> Message:
    response: native.ListOffsetsResponse = await session.send(native.ListOffsetsRequest(
        native.CONSUMER_REPLICA_ID,
        [native.ListOffsetsPartition(topic.name, p.partition_index, p.timestamp, p.current_leader_epoch)
         for topic in request.topics for p in topic.partitions],
        request.isolation_level))
    return ListOffsetsResponse(throttle_time_ms=0, topics=[
        entry(ListOffsetsResponse, "ListOffsetsTopicResponse", name=name, partitions=[
            entry(ListOffsetsResponse, "ListOffsetsTopicResponse.ListOffsetsPartitionResponse",
                  partition_index=p.partition, error_code=p.error_code, timestamp=p.timestamp, offset=p.offset,
                  leader_epoch=p.leader_epoch)
            for p in partitions])
        for name, partitions in by_topic(response.partitions).items()])


API = KafkaApi(ListOffsetsRequest, ListOffsetsResponse, (1, 3), handle)
