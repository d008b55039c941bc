"""Fetch (key 1), versions 4-15: whole record batches, in the encoding Kafka clients read.

Batches produced over this listener go out byte for byte as they were produced (base offset and partition
leader epoch set by the leader); batches produced natively are converted to v2 once and the conversion is
cached on the stored batch. A partition's records are never null, an empty set is empty bytes, and the first
batch comes whole even past max_bytes, so an oversized batch cannot stall a consumer. The last stable offset is
the high watermark: there are no transactions, so read_committed (librdkafka's default) reads everything
committed. Fetch sessions (v7+) are not kept: every response has session id 0, which tells the client to send
full fetch requests, as a broker out of session slots does. No preferred read replica: always the leader.

From version 12 (KIP-595's truncation on fetch) a consumer names the leader epoch of the record before its fetch
offset (LastFetchedEpoch), and a leader whose log does not hold that epoch up to the offset answers where the
epoch ends in its log (DivergingEpoch) instead of records, as Kafka does for any fetch that names one. A client
that resumes past an unclean truncation learns it from the fetch itself: without it, one that takes the leader
epoch it fetches with from its latest metadata (kafka-python does) fetches past the truncation unchecked whenever
that metadata names the new leader before its next check of the position.

From version 13 topics are named by id (KIP-516), in the request and the response: an id the broker does not know
(the topic was deleted, or deleted and created again under the same name) is UNKNOWN_TOPIC_ID, after which a client
refreshes its metadata. Version 14 adds only an error of tiered storage, which kafkalite does not have; 15 moves a
follower's replica id into a tagged ReplicaState, which a consumer leaves out.
"""

from __future__ import annotations

from kafkalite.common import errors
from kafkalite.common.types import ZERO_UUID
from kafkalite.network import requests as native
from kafkalite.network.kafka.api import KafkaApi, Session, native_uuid, wire_uuid
from kafkalite.network.kafka.protocol import FetchRequest, FetchResponse, Message, entry

TOPIC_IDS = 13


async def handle(request: Message, session: Session) -> Message:
    by_id = session.version >= TOPIC_IDS
    asked = [(topic, native_uuid(topic.topic_id) if by_id else ZERO_UUID) for topic in request.topics]
    unnamed = [native.FetchPartitionResponse("", p.partition, errors.UNKNOWN_TOPIC_ID.code)
               for topic, topic_id in asked if by_id and topic_id == ZERO_UUID for p in topic.partitions]
    response: native.FetchResponse = await session.send(native.FetchRequest(
        native.CONSUMER_REPLICA_ID, request.max_wait_ms, request.min_bytes,
        [native.FetchPartition(topic.topic, p.partition, p.fetch_offset, p.partition_max_bytes,
                               p.current_leader_epoch, p.log_start_offset, p.last_fetched_epoch, topic_id)
         for topic, topic_id in asked if not (by_id and topic_id == ZERO_UUID) for p in topic.partitions],
        request.max_bytes, request.isolation_level))
    grouped: dict[str, list[native.FetchPartitionResponse]] = {  # topics in the order the request named them
        topic_id if by_id else topic.topic: [] for topic, topic_id in asked}
    for p in unnamed + response.partitions:
        grouped.setdefault(p.topic_id if by_id else p.topic, []).append(p)
    return FetchResponse(throttle_time_ms=0, error_code=response.error_code, session_id=0, responses=[
        entry(FetchResponse, "FetchableTopicResponse", topic="" if by_id else key,
              topic_id=wire_uuid(key) if by_id else None,
              partitions=[
                  entry(FetchResponse, "FetchableTopicResponse.PartitionData", partition_index=p.partition,
                        error_code=p.error_code, high_watermark=p.high_watermark,
                        last_stable_offset=p.last_stable_offset, log_start_offset=p.log_start_offset,
                        aborted_transactions=[], preferred_read_replica=-1, diverging_epoch=_diverging(p),
                        records=b"".join([piece for batch in p.batches for piece in batch.kafka_parts()]))
                  for p in partitions])
        for key, partitions in grouped.items() if partitions])


def _diverging(partition: native.FetchPartitionResponse) -> Message | None:
    """DivergingEpoch, a tagged field: left out (None) unless the log diverges, which clients read as -1 and -1."""
    if partition.diverging_epoch == native.UNDEFINED_EPOCH:
        return None
    return entry(FetchResponse, "FetchableTopicResponse.PartitionData.EpochEndOffset",
                 epoch=partition.diverging_epoch, end_offset=partition.diverging_end_offset)


API = KafkaApi(FetchRequest, FetchResponse, (4, 15), handle)
