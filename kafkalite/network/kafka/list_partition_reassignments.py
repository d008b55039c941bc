"""ListPartitionReassignments (key 46), version 0 (flexible): the moves in progress (KIP-455).

A null topic list asks for every move; otherwise only the partitions named that are moving are listed, as in
Kafka. Each shows its full replica list (target and original together while it moves) and the replicas it adds
and removes. kafka-python's `list_partition_reassignments` sends it.
"""

from __future__ import annotations

from kafkalite.network import requests as native
from kafkalite.network.kafka.api import KafkaApi, Session, by_topic
from kafkalite.network.kafka.protocol import (
    ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse, Message, entry,
)


async def handle(request: Message, session: Session) -> Message:
    response: native.ListPartitionReassignmentsResponse = await session.send(
        native.ListPartitionReassignmentsRequest(
            None if request.topics is None else [
                (topic.name, index) for topic in request.topics for index in topic.partition_indexes],
            request.timeout_ms))
    return ListPartitionReassignmentsResponse(
        throttle_time_ms=0, error_code=response.error_code, error_message=response.error_message, topics=[
            entry(ListPartitionReassignmentsResponse, "OngoingTopicReassignment", name=name, partitions=[
                entry(ListPartitionReassignmentsResponse, "OngoingTopicReassignment.OngoingPartitionReassignment",
                      partition_index=r.partition, replicas=list(r.replicas), adding_replicas=list(r.adding_replicas),
                      removing_replicas=list(r.removing_replicas))
                for r in moves])
            for name, moves in by_topic(response.reassignments).items()])


API = KafkaApi(ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse, (0, 0), handle)
