"""ListOffsets to partition leaders, one round at a time: what the admin's `list_offsets` and the consumer's
`beginning_offsets`, `end_offsets` and `offsets_for_times` share. Each caller retries its own way (the admin
within its call's timeout, the consumer within default.api.timeout.ms), refreshing metadata between rounds.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import NamedTuple

from kafkalite.client.metadata import STALE_METADATA_ERRORS, ClusterMetadata
from kafkalite.client.transport import ClientTransport
from kafkalite.common import errors
from kafkalite.common.types import TopicPartition
from kafkalite.network.requests import (
    CONSUMER_REPLICA_ID, READ_UNCOMMITTED, ListOffsetsPartition, ListOffsetsRequest, ListOffsetsResponse,
)


class ListOffsetsResultInfo(NamedTuple):
    offset: int
    timestamp: int
    leader_epoch: int


async def list_offsets_once(transport: ClientTransport, metadata: ClusterMetadata,
                            timestamps: Mapping[TopicPartition, int], found: dict[TopicPartition, ListOffsetsResultInfo],
                            *, isolation: int = READ_UNCOMMITTED,
                            current_leader_epoch: Callable[[TopicPartition], int] = lambda tp: -1,
                            ) -> list[TopicPartition]:
    """Ask each known leader for its partitions not yet in `found`, adding the answers there; return the partitions
    still unanswered (no leader known, or the leader moved: a metadata refresh may help). Any other error a
    partition gets is raised, retriable ones too (OFFSET_NOT_AVAILABLE while a new leader catches up), for the
    caller's retries to name."""
    by_leader: dict[int, list[TopicPartition]] = {}
    for tp in timestamps:
        leader = metadata.leader_for(tp) if tp not in found else None
        if leader is not None:
            by_leader.setdefault(leader.leader, []).append(tp)
    for leader_id, tps in by_leader.items():
        response: ListOffsetsResponse = await transport.send(leader_id, ListOffsetsRequest(CONSUMER_REPLICA_ID, [
            ListOffsetsPartition(tp.topic, tp.partition, timestamps[tp], current_leader_epoch(tp)) for tp in tps],
            isolation))
        for result in response.partitions:
            tp = TopicPartition(result.topic, result.partition)
            if tp not in timestamps:
                continue  # not asked: nothing to answer
            if result.error_code == errors.NONE.code:
                found[tp] = ListOffsetsResultInfo(result.offset, result.timestamp, result.leader_epoch)
            elif result.error_code not in STALE_METADATA_ERRORS:
                errors.raise_for(result.error_code, result.error_message)
    return [tp for tp in timestamps if tp not in found]
