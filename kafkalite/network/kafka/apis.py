"""The APIs the KAFKA listener serves, one line per API key (the dispatch table; each module says how)."""

from __future__ import annotations

from kafkalite.network.kafka import (
    api_versions, fetch, init_producer_id, list_offsets, metadata, produce,
)
from kafkalite.network.kafka.api import KafkaApi

APIS: dict[int, KafkaApi] = {api.key: api for api in (
    produce.API,  # 0
    fetch.API,  # 1
    list_offsets.API,  # 2
    metadata.API,  # 3
    api_versions.API,  # 18
    init_producer_id.API,  # 22
)}
