"""The APIs the KAFKA listener serves, one line per API key (the dispatch table; each module says how)."""

from __future__ import annotations

from kafkalite.network.kafka import (
    acls, alter_configs, alter_partition_reassignments, api_versions, create_partitions, create_topics, delete_groups,
    delete_records, delete_topics, describe_cluster, describe_configs, describe_groups, describe_log_dirs,
    elect_leaders, fetch, find_coordinator, heartbeat, incremental_alter_configs, init_producer_id, join_group,
    leave_group, list_groups, list_offsets, list_partition_reassignments, metadata, offset_commit, offset_delete,
    offset_fetch, offset_for_leader_epoch, produce, sync_group,
)
from kafkalite.network.kafka.api import KafkaApi

APIS: dict[int, KafkaApi] = {api.key: api for api in (
    produce.API,  # 0
    fetch.API,  # 1
    list_offsets.API,  # 2
    metadata.API,  # 3
    offset_commit.API,  # 8
    offset_fetch.API,  # 9
    find_coordinator.API,  # 10
    join_group.API,  # 11
    heartbeat.API,  # 12
    leave_group.API,  # 13
    sync_group.API,  # 14
    describe_groups.API,  # 15
    list_groups.API,  # 16
    api_versions.API,  # 18
    create_topics.API,  # 19
    delete_topics.API,  # 20
    delete_records.API,  # 21
    init_producer_id.API,  # 22
    offset_for_leader_epoch.API,  # 23
    acls.DESCRIBE_API,  # 29
    acls.CREATE_API,  # 30
    acls.DELETE_API,  # 31
    describe_configs.API,  # 32
    alter_configs.API,  # 33
    describe_log_dirs.API,  # 35
    create_partitions.API,  # 37
    delete_groups.API,  # 42
    elect_leaders.API,  # 43
    incremental_alter_configs.API,  # 44
    alter_partition_reassignments.API,  # 45
    list_partition_reassignments.API,  # 46
    offset_delete.API,  # 47
    describe_cluster.API,  # 60
)}
