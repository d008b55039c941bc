"""The APIs the KAFKA listener serves, one line per API key (the dispatch table; each module says how)."""

from __future__ import annotations

from kafkalite.network.kafka import (
    alter_configs, api_versions, create_partitions, create_topics, delete_topics, describe_cluster, describe_configs,
    fetch, init_producer_id, list_offsets, metadata, produce,
)
from kafkalite.network.kafka.api import KafkaApi

APIS: dict[int, KafkaApi] = {api.key: api for api in (
    produce.API,  # 0
    fetch.API,  # 1
    list_offsets.API,  # 2
    metadata.API,  # 3
    api_versions.API,  # 18
    create_topics.API,  # 19
    delete_topics.API,  # 20
    init_producer_id.API,  # 22
    describe_configs.API,  # 32
    alter_configs.API,  # 33
    create_partitions.API,  # 37
    describe_cluster.API,  # 60
)}
