"""AlterPartitionReassignments (key 45), versions 0-1 (flexible): move partitions to new replica lists (KIP-455).

Each partition names its target replicas, preferred leader first, or null to cancel its move in progress. The
controller starts a move, gives a move in progress its new target, or cancels it (back to the replicas it had),
and answers at once; ListPartitionReassignments shows the progress. Per-partition errors as Kafka answers them:
INVALID_REPLICA_ASSIGNMENT (empty, a broker twice, a broker not alive), UNKNOWN_TOPIC_OR_PARTITION,
NO_REASSIGNMENT_IN_PROGRESS (a cancel with nothing to cancel), and from version 1 (KIP-860), when the request
does not allow a change of replication factor, INVALID_REPLICATION_FACTOR for a target whose size differs from the
original replicas'. kafka-python's `alter_partition_reassignments` sends it.
"""

from __future__ import annotations

from kafkalite.network import requests as native
from kafkalite.network.kafka.api import KafkaApi, Session, partition_errors
from kafkalite.network.kafka.protocol import (
    AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse, Message,
)


async def handle(request: Message, session: Session) -> Message:
    response: native.AlterPartitionReassignmentsResponse = await session.send(
        native.AlterPartitionReassignmentsRequest(
            [native.ReassignablePartition(topic.name, p.partition_index,
                                          None if p.replicas is None else list(p.replicas))
             for topic in request.topics for p in topic.partitions],
            request.timeout_ms, request.allow_replication_factor_change))
    return AlterPartitionReassignmentsResponse(
        throttle_time_ms=0, error_code=response.error_code, error_message=response.error_message,
        responses=partition_errors(AlterPartitionReassignmentsResponse, "ReassignableTopicResponse",
                                   "ReassignablePartitionResponse", response.responses, with_message=True))


API = KafkaApi(AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse, (0, 1), handle)
