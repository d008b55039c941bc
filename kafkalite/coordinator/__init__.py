"""The group coordinator: consumer groups and their committed offsets, kept in `__consumer_offsets`.

The server constructs a `GroupCoordinator`, hands it an `OffsetsLog` (append and read on its offsets-topic
replicas) and tells it which offsets partitions it leads; the coordinator imports nothing of the server.
"""

from kafkalite.coordinator.group_coordinator import GroupCoordinator, OffsetsLog
from kafkalite.coordinator.group_metadata import GroupMetadata, GroupState
from kafkalite.coordinator.group_metadata_manager import java_string_hash, partition_for

__all__ = ["GroupCoordinator", "GroupMetadata", "GroupState", "OffsetsLog", "java_string_hash", "partition_for"]
