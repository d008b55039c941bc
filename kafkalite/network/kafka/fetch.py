"""Fetch (key 1), versions 4-11: whole record batches, in the encoding Kafka clients read.

Batches produced over this listener go out byte for byte as they were produced (base offset and partition
leader epoch set by the leader); batches produced natively are converted to v2 once and the conversion is
cached on the stored batch. A partition's records are never null, an empty set is empty bytes, and the first
batch comes whole even past max_bytes, so an oversized batch cannot stall a consumer. The last stable offset is
the high watermark: there are no transactions, so read_committed (librdkafka's default) reads everything
committed. Fetch sessions (v7+) are not kept: every response has session id 0, which tells the client to send
full fetch requests, as a broker out of session slots does. No preferred read replica: always the leader.
"""

from __future__ import annotations

from kafkalite.network import requests as native
from kafkalite.network.kafka.api import KafkaApi, Session, by_topic
from kafkalite.network.kafka.protocol import FetchRequest, FetchResponse, Message, entry


async def handle(request: Message, session: Session) -> Message:
    response: native.FetchResponse = await session.send(native.FetchRequest(
        native.CONSUMER_REPLICA_ID, request.max_wait_ms, request.min_bytes,
        [native.FetchPartition(topic.topic, p.partition, p.fetch_offset, p.partition_max_bytes,
                               p.current_leader_epoch, p.log_start_offset)
         for topic in request.topics for p in topic.partitions],
        request.max_bytes, request.isolation_level))
    return FetchResponse(throttle_time_ms=0, error_code=response.error_code, session_id=0, responses=[
        entry(FetchResponse, "FetchableTopicResponse", topic=name, partitions=[
            entry(FetchResponse, "FetchableTopicResponse.PartitionData", partition_index=p.partition,
                  error_code=p.error_code, high_watermark=p.high_watermark,
                  last_stable_offset=p.last_stable_offset, log_start_offset=p.log_start_offset,
                  aborted_transactions=[], preferred_read_replica=-1,
                  records=b"".join([piece for batch in p.batches for piece in batch.kafka_parts()]))
            for p in partitions])
        for name, partitions in by_topic(response.partitions).items()])


API = KafkaApi(FetchRequest, FetchResponse, (4, 11), handle)
