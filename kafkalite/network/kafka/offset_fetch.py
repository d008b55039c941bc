"""OffsetFetch (key 9), versions 1-7: a group's committed offsets, for the partitions asked or (v2+) all.

A partition with nothing committed answers offset -1, which clients read as "use auto.offset.reset". Errors
about the whole group (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, which clients retry) have a top-level
code from version 2; version 1 has none, so, as in Kafka, it is given on every partition asked for. There are
no transactions, so require_stable (v7) never has pending offsets to wait for. Version 8 asks for several groups
at once, each answered with its own error. aiokafka's consumer sends version 1.
"""

from __future__ import annotations

from kafkalite.common import errors
from kafkalite.network import requests as native
from kafkalite.network.kafka.api import KafkaApi, Session, by_topic
from kafkalite.network.kafka.protocol import Message, OffsetFetchRequest, OffsetFetchResponse, entry

TOP_LEVEL_ERROR = 2
GROUPS = 8


async def handle(request: Message, session: Session) -> Message:
    if session.version < GROUPS:
        error_code, topics = await _group(session, request.group_id, request.topics, "OffsetFetchResponseTopic")
        return OffsetFetchResponse(throttle_time_ms=0, error_code=error_code, topics=topics)
    groups = []
    for group in request.groups:
        error_code, topics = await _group(session, group.group_id, group.topics,
                                          "OffsetFetchResponseGroup.OffsetFetchResponseTopics")
        groups.append(entry(OffsetFetchResponse, "OffsetFetchResponseGroup", group_id=group.group_id,
                            topics=topics, error_code=error_code))
    return OffsetFetchResponse(throttle_time_ms=0, groups=groups)


async def _group(session: Session, group_id: str, topics: list[Message] | None, topic_type: str
                 ) -> tuple[int, list[Message]]:
    """One group's error code and its topics' entries (of `topic_type`) in the response."""
    asked = None if topics is None else [(t.name, p) for t in topics for p in t.partition_indexes]
    response: native.OffsetFetchResponse = await session.send(native.OffsetFetchRequest(group_id, asked))
    partitions = response.partitions
    if session.version < TOP_LEVEL_ERROR and response.error_code != errors.NONE.code:
        partitions = [native.OffsetFetchPartitionResponse(topic, partition, -1, error_code=response.error_code)
                      for topic, partition in asked or ()]
    partition_type = topic_type + (".OffsetFetchResponsePartitions" if session.version >= GROUPS
                                   else ".OffsetFetchResponsePartition")
    return response.error_code, [
        entry(OffsetFetchResponse, topic_type, name=name, partitions=[
            entry(OffsetFetchResponse, partition_type, partition_index=p.partition,
                  committed_offset=p.committed_offset, committed_leader_epoch=p.committed_leader_epoch,
                  metadata=p.metadata or "", error_code=p.error_code)  # as Kafka: "" where nothing was committed
            for p in partitions])
        for name, partitions in by_topic(partitions).items()]


API = KafkaApi(OffsetFetchRequest, OffsetFetchResponse, (1, 8), handle)
