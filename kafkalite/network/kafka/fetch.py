"""Fetch (key 1), versions 4-12: whole record batches, in the encoding Kafka clients read.

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
that metadata names the new leader before its next check of the position. Version 13 names topics by id, which
kafkalite has none of.
"""

from __future__ import annotations

from kafkalite.network import requests as native
from kafkalite.network.kafka.api import KafkaApi, Session, by_topic
from kafkalite.network.kafka.protocol import FetchRequest, FetchResponse, Message, entry


async def handle(request: Message, session: Session) -> Message:
    response: native.FetchResponse = await session.send(native.FetchRequest(
        native.CONSUMER_REPLICA_ID, request.max_wait_ms, request.min_bytes,
        [native.FetchPartition(topic.topic, p.partition, p.fetch_offset, p.partition_max_bytes,
                               p.current_leader_epoch, p.log_start_offset, p.last_fetched_epoch)
         for topic in request.topics for p in topic.partitions],
        request.max_bytes, request.isolation_level))
    return FetchResponse(throttle_time_ms=0, error_code=response.error_code, session_id=0, responses=[
        entry(FetchResponse, "FetchableTopicResponse", topic=name, partitions=[
            entry(FetchResponse, "FetchableTopicResponse.PartitionData", partition_index=p.partition,
                  error_code=p.error_code, high_watermark=p.high_watermark,
                  last_stable_offset=p.last_stable_offset, log_start_offset=p.log_start_offset,
                  aborted_transactions=[], preferred_read_replica=-1, diverging_epoch=_diverging(p),
                  records=b"".join([piece for batch in p.batches for piece in batch.kafka_parts()]))
            for p in partitions])
        for name, partitions in by_topic(response.partitions).items()])


def _diverging(partition: native.FetchPartitionResponse) -> Message | None:
    """DivergingEpoch, a tagged field: left out (None) unless the log diverges, which clients read as -1 and -1."""
    if partition.diverging_epoch == native.UNDEFINED_EPOCH:
        return None
    return entry(FetchResponse, "FetchableTopicResponse.PartitionData.EpochEndOffset",
                 epoch=partition.diverging_epoch, end_offset=partition.diverging_end_offset)


API = KafkaApi(FetchRequest, FetchResponse, (4, 12), handle)
