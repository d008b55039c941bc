"""OffsetFetch (key 9), versions 1-7: a group's committed offsets, for the partitions asked or (v2+) all.

A partition with nothing committed answers offset -1, which clients read as "use auto.offset.reset". Errors
about the whole group (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, which clients retry) have a top-level
code from version 2; version 1 has none, so, as in Kafka, it is given on every partition asked for. There are
no transactions, so require_stable (v7) never has pending offsets to wait for. Version 8 (several groups per
request) is not served; clients then ask one group at a time. aiokafka's consumer sends version 1.
"""

from __future__ import annotations

from kafkalite.common import errors
from kafkalite.network import requests as native
from kafkalite.network.kafka.api import KafkaApi, Session, by_topic
from kafkalite.network.kafka.protocol import Message, OffsetFetchRequest, OffsetFetchResponse, entry

TOP_LEVEL_ERROR = 2


async def handle(request: Message, session: Session) -> Message:
    asked = None if request.topics is None else [(t.name, p) for t in request.topics for p in t.partition_indexes]
    response: native.OffsetFetchResponse = await session.send(native.OffsetFetchRequest(request.group_id, asked))
    partitions = response.partitions
    if session.version < TOP_LEVEL_ERROR and response.error_code != errors.NONE.code:
        partitions = [native.OffsetFetchPartitionResponse(topic, partition, -1, error_code=response.error_code)
                      for topic, partition in asked or ()]
    return OffsetFetchResponse(throttle_time_ms=0, error_code=response.error_code, topics=[
        entry(OffsetFetchResponse, "OffsetFetchResponseTopic", name=name, partitions=[
            entry(OffsetFetchResponse, "OffsetFetchResponseTopic.OffsetFetchResponsePartition",
                  partition_index=p.partition, committed_offset=p.committed_offset,
                  committed_leader_epoch=p.committed_leader_epoch, metadata=p.metadata, error_code=p.error_code)
            for p in partitions])
        for name, partitions in by_topic(partitions).items()])


API = KafkaApi(OffsetFetchRequest, OffsetFetchResponse, (1, 7), handle)
