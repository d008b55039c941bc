"""How groups and committed offsets live in `__consumer_offsets` (Kafka's GroupMetadataManager, its storage half).

Every change a coordinator must not forget is a record in the group's offsets partition, appended with acks=all:
a committed offset (key: group, topic, partition), and a group's membership and assignment (key: group) each
time a generation becomes Stable or the group empties. A record with a null value is a tombstone: the offset
or the group was deleted. A new coordinator rebuilds its groups by replaying the partition from its start;
the last record for each key wins.

Keys and values are msgpack, with Kafka's key versions (1 for an offset, 2 for a group) as their first field so
both kinds share one partition unambiguously. The offsets topic is compacted, as Kafka's; kafkalite's
cleaner never runs, so it keeps every record and a load replays all of them.

Which partition holds a group is Kafka's formula, `abs(groupId.hashCode) % partitions` with Java's String
hash, so any tool that knows Kafka finds the same coordinator.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import msgpack

from kafkalite.common.records import Record, RecordBatch
from kafkalite.common.types import TopicPartition
from kafkalite.coordinator.group_metadata import GroupMetadata, GroupState, MemberMetadata, OffsetAndMetadata

log = logging.getLogger(__name__)

OFFSET_KEY_VERSION = 1
GROUP_KEY_VERSION = 2
_INT32_MIN = -(1 << 31)


def java_string_hash(text: str) -> int:
    """Java's `String.hashCode`: 31 * h + c over UTF-16 code units, overflowing as a signed 32-bit int."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_for(group_id: str, partitions: int) -> int:
    """Kafka's `Utils.abs(groupId.hashCode) % partitions`; Utils.abs maps Integer.MIN_VALUE to 0."""
    h = java_string_hash(group_id)
    return (0 if h == _INT32_MIN else abs(h)) % partitions


# -- records --------------------------------------------------------------------------------------------------------

def offset_commit_record(group_id: str, tp: TopicPartition, offset: OffsetAndMetadata | None,
                         timestamp_ms: int) -> Record:
    """A committed offset, or (None) its tombstone."""
    key = msgpack.packb([OFFSET_KEY_VERSION, group_id, tp.topic, tp.partition])
    value = None if offset is None else msgpack.packb(
        [offset.offset, offset.leader_epoch, offset.metadata, offset.commit_timestamp_ms])
    return Record(key, value, timestamp_ms)


def group_metadata_record(group: GroupMetadata | None, group_id: str, timestamp_ms: int) -> Record:
    """The group's generation, protocol and members with their assignments, or (None) its tombstone."""
    key = msgpack.packb([GROUP_KEY_VERSION, group_id])
    if group is None:
        return Record(key, None, timestamp_ms)
    protocol = group.protocol_name
    members = [[m.member_id, m.group_instance_id, m.client_id, m.client_host, m.rebalance_timeout_ms,
                m.session_timeout_ms, protocol, m.metadata(protocol) if protocol else b"", m.assignment]
               for m in group.members.values()]
    value = msgpack.packb([group.protocol_type, group.generation_id, protocol, group.leader_id,
                           group.state_timestamp_ms, members])
    return Record(key, value, timestamp_ms)


@dataclass(slots=True)
class LoadedPartition:
    """What replaying one offsets partition found: each group's last metadata and its live offsets."""

    groups: dict[str, list[Any] | None] = field(default_factory=dict)  # None: deleted
    offsets: dict[str, dict[TopicPartition, OffsetAndMetadata]] = field(default_factory=dict)

    def replay(self, batches: Iterable[RecordBatch]) -> int:
        """Apply the batches in order; returns the offset after the last one."""
        next_offset = -1
        for batch in batches:
            for record in batch.records():
                try:
                    self._apply(record)
                except (ValueError, TypeError, msgpack.UnpackException) as exc:  # never written by a coordinator
                    log.warning("skipping an undecodable record in the offsets topic: %s", exc)
            next_offset = batch.next_offset
        return next_offset

    def _apply(self, record: Record) -> None:
        key = msgpack.unpackb(record.key or b"\xc0", raw=False)
        if not isinstance(key, list) or not key:
            return  # not ours: the partition is written by coordinators only, but a stray record must not stop a load
        value = None if record.value is None else msgpack.unpackb(record.value, raw=False)
        if key[0] == OFFSET_KEY_VERSION and len(key) == 4:
            offsets = self.offsets.setdefault(key[1], {})
            tp = TopicPartition(key[2], key[3])
            if value is None:
                offsets.pop(tp, None)
            else:
                offsets[tp] = OffsetAndMetadata(*value)
        elif key[0] == GROUP_KEY_VERSION and len(key) == 2:
            self.groups[key[1]] = value
            if value is None:  # a deleted group takes its offsets along
                self.offsets.pop(key[1], None)

    def build_groups(self, now_ms: int) -> list[GroupMetadata]:
        """The groups as of the end of the partition: Stable with their members, or Empty (offsets only)."""
        built = []
        for group_id in sorted(set(self.groups) | set(self.offsets)):
            value = self.groups.get(group_id)
            offsets = self.offsets.get(group_id, {})
            if value is None and not offsets:
                continue
            group = GroupMetadata(group_id, state_timestamp_ms=now_ms, offsets=dict(offsets))
            if value is not None:
                protocol_type, generation, protocol, leader, state_timestamp, members = value
                group.protocol_type, group.generation_id = protocol_type, generation
                group.state_timestamp_ms = state_timestamp
                for member_id, instance_id, client_id, host, rebalance_ms, session_ms, _, metadata, assignment \
                        in members:
                    group.add(MemberMetadata(member_id, instance_id, client_id, host, rebalance_ms, session_ms,
                                             protocol_type, [(protocol, metadata)], assignment, is_new=False))
                if group.members:
                    group.protocol_name, group.leader_id = protocol, leader
                    group.state = GroupState.STABLE
            built.append(group)
        return built
