"""The group coordinator over raw requests: joins, syncs, heartbeats, commits, and bad input."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from kafkalite.cluster import Cluster
from kafkalite.common import errors
from kafkalite.common.consumer_protocol import Assignment, encode_assignment
from kafkalite.common.types import TopicPartition
from kafkalite.network.requests import (
    HeartbeatRequest, OffsetCommitPartition, OffsetCommitRequest, OffsetFetchRequest, SyncGroupAssignment,
    SyncGroupRequest,
)
from tests.coordinator.conftest import coordinator_of, join_request, send

pytestmark = pytest.mark.usefixtures("autojump_clock")


async def test_one_member_joins_syncs_commits_and_fetches(autojump_clock: Any, cluster: Cluster) -> None:
    coordinator = await coordinator_of(cluster, "g1")
    first = await send(cluster, coordinator, join_request("g1"))
    assert first.error_code == errors.MEMBER_ID_REQUIRED.code and first.member_id
    joined = await send(cluster, coordinator, join_request("g1", first.member_id))
    assert joined.error_code == 0, joined
    assert joined.leader == first.member_id and joined.generation_id == 1 and joined.protocol_name == "range"
    assignment = encode_assignment(Assignment((TopicPartition("events", 0),)))
    synced = await send(cluster, coordinator, SyncGroupRequest("g1", 1, first.member_id,
                                                               [SyncGroupAssignment(first.member_id, assignment)]))
    assert synced.error_code == 0 and synced.assignment == assignment
    beat = await send(cluster, coordinator, HeartbeatRequest("g1", 1, first.member_id))
    assert beat.error_code == 0
    committed = await send(cluster, coordinator, OffsetCommitRequest("g1", 1, first.member_id, [
        OffsetCommitPartition("events", 0, 42, committed_metadata="m")]))
    assert [p.error_code for p in committed.partitions] == [0]
    fetched = await send(cluster, coordinator, OffsetFetchRequest("g1", [("events", 0), ("events", 1)]))
    assert [(p.partition, p.committed_offset, p.metadata) for p in fetched.partitions] == [(0, 42, "m"), (1, -1, None)]
