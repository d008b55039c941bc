"""OffsetForLeaderEpoch (key 23), versions 2-4: where a leader epoch ends in the leader's log (KIP-320).

A consumer asks it after the partition's leader epoch changed, or after a seek to a position that carries an
epoch: it names the epoch of the last record it read, and the leader answers the largest epoch at or below it
that its log holds and the offset where that epoch ends. An end below the consumer's position means the log was
truncated under it (an unclean election), and the consumer seeks back to the end instead of silently skipping
what the new leader wrote there; librdkafka does so since 2.1. Answered by the partition's leader only, whatever
replica id a version 3+ request names: this listener serves clients, and followers replicate natively. The
current leader epoch fences the request as it fences a fetch (FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH).
"""

from __future__ import annotations

from kafkalite.network import requests as native
from kafkalite.network.kafka.api import KafkaApi, Session, by_topic
from kafkalite.network.kafka.protocol import (
    Message, OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse, entry,
)


async def handle(request: Message, session: Session) -> Message:
    response: native.OffsetsForLeaderEpochResponse = await session.send(native.OffsetsForLeaderEpochRequest(
        native.CONSUMER_REPLICA_ID,
        [native.OffsetForLeaderPartition(topic.topic, p.partition, p.leader_epoch, p.current_leader_epoch)
         for topic in request.topics for p in topic.partitions]))
    return OffsetForLeaderEpochResponse(throttle_time_ms=0, topics=[
        entry(OffsetForLeaderEpochResponse, "OffsetForLeaderTopicResult", topic=name, partitions=[
            entry(OffsetForLeaderEpochResponse, "OffsetForLeaderTopicResult.EpochEndOffset",
                  error_code=p.error_code, partition=p.partition, leader_epoch=p.leader_epoch,
                  end_offset=p.end_offset)
            for p in partitions])
        for name, partitions in by_topic(response.partitions).items()])


API = KafkaApi(OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse, (2, 4), handle)
