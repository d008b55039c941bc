"""DeleteRecords (key 21), versions 0-2: delete every record below an offset, partition by partition.

Version 1 is version 0 (throttling moved); version 2 is flexible, and the three clients send it. Sent to each
partition's leader, which moves its log start offset; the answer waits up to the request's timeout for the
in-sync replicas to move theirs, then carries the low watermark (the new log start offset). An offset of -1
means the high watermark. Per-partition errors as Kafka answers them: NOT_LEADER_OR_FOLLOWER,
UNKNOWN_TOPIC_OR_PARTITION, OFFSET_OUT_OF_RANGE (beyond the high watermark, or negative other than -1),
INVALID_TOPIC_EXCEPTION (an internal topic), REQUEST_TIMED_OUT (replicas too slow to follow). kafka-python's,
aiokafka's and confluent-kafka's admin clients send it.
"""

from __future__ import annotations

from kafkalite.network import requests as native
from kafkalite.network.kafka.api import KafkaApi, Session, by_topic
from kafkalite.network.kafka.protocol import DeleteRecordsRequest, DeleteRecordsResponse, Message, entry


async def handle(request: Message, session: Session) -> Message:
    response: native.DeleteRecordsResponse = await session.send(native.DeleteRecordsRequest(
        [native.DeleteRecordsPartition(topic.name, p.partition_index, p.offset)
         for topic in request.topics for p in topic.partitions],
        request.timeout_ms))
    return DeleteRecordsResponse(throttle_time_ms=0, topics=[
        entry(DeleteRecordsResponse, "DeleteRecordsTopicResult", name=name, partitions=[
            entry(DeleteRecordsResponse, "DeleteRecordsTopicResult.DeleteRecordsPartitionResult",
                  partition_index=p.partition, low_watermark=p.low_watermark, error_code=p.error_code)
            for p in partitions])
        for name, partitions in by_topic(response.partitions).items()])


API = KafkaApi(DeleteRecordsRequest, DeleteRecordsResponse, (0, 2), handle)
