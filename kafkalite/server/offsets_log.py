"""The group coordinator's view of this broker's `__consumer_offsets` replicas (its `OffsetsLog`).

The coordinator must not reach into the server, as the controller does not: the broker hands it this, which
appends through the replica manager with acks=all, exactly as a producer's acks=all produce goes, and reads
the leader's log for a load.
"""

from __future__ import annotations

from collections.abc import Sequence

from kafkalite.common import errors
from kafkalite.common.errors import ErrorCode, NotLeaderOrFollowerError
from kafkalite.common.records import Record, RecordBatch
from kafkalite.common.types import TopicPartition
from kafkalite.network.requests import ProducePartitionData
from kafkalite.server.partition import Partition
from kafkalite.server.replica_manager import ReplicaManager

ACKS_ALL = -1


class ReplicaOffsetsLog:
    def __init__(self, replica_manager: ReplicaManager) -> None:
        self._replica_manager = replica_manager

    async def append(self, tp: TopicPartition, records: Sequence[Record], timeout_ms: int) -> ErrorCode:
        batch = RecordBatch.from_records(records)
        (result,) = await self._replica_manager.append_records(
            timeout_ms, ACKS_ALL, [ProducePartitionData(tp.topic, tp.partition, [batch])])
        return errors.for_code(result.error_code)

    def _leader(self, tp: TopicPartition) -> Partition:
        partition = self._replica_manager.get_partition(tp)
        if partition is None or not partition.is_leader:
            raise NotLeaderOrFollowerError(f"broker {self._replica_manager.broker_id} does not lead {tp}")
        return partition

    def read(self, tp: TopicPartition, start_offset: int, max_bytes: int) -> list[RecordBatch]:
        partition_log = self._leader(tp).log
        return partition_log.read(start_offset, max_bytes, max_offset=partition_log.log_end_offset)

    def log_start_offset(self, tp: TopicPartition) -> int:
        return self._leader(tp).log.log_start_offset
