"""CreateTopics (key 19), versions 0-7: topics with a partition count and replication factor, or an assignment.

The controller creates them (forwarded as the native request is) and the broker answers once its own metadata
shows the new leaders, so a client that creates a topic and then produces to it finds it. -1 for either count
takes the broker's default (num.partitions, default.replication.factor), as in Kafka 2.4+. Each topic's result
carries its own error: TOPIC_ALREADY_EXISTS, INVALID_PARTITIONS, INVALID_REPLICATION_FACTOR, INVALID_CONFIG (a null
config value among others), INVALID_REQUEST (a topic named twice, counts given with an assignment), ...

From version 5 a created (or, with validate_only, validated) topic's result carries its partition count,
replication factor and every config with its value and source, as DescribeConfigs would give them (null for a
topic that failed); from version 7 its id (KIP-516; Kafka's zero UUID when only validated). Version 6 changes
nothing but the quota behaviour, which kafkalite has no quotas for.
"""

from __future__ import annotations

from kafkalite.network import requests as native
from kafkalite.network.kafka.api import KafkaApi, Session, wire_uuid
from kafkalite.network.kafka.describe_configs import config_source
from kafkalite.network.kafka.protocol import CreateTopicsRequest, CreateTopicsResponse, Message, entry

WITH_CONFIGS = 5


async def handle(request: Message, session: Session) -> Message:
    response: native.CreateTopicsResponse = await session.send(native.CreateTopicsRequest(
        [native.CreatableTopic(topic.name, topic.num_partitions, topic.replication_factor,
                               {a.partition_index: list(a.broker_ids) for a in topic.assignments} or None,
                               {c.name: c.value for c in topic.configs})
         for topic in request.topics],
        request.timeout_ms, request.validate_only, session.version >= WITH_CONFIGS))
    return CreateTopicsResponse(throttle_time_ms=0, topics=[
        entry(CreateTopicsResponse, "CreatableTopicResult", name=t.name, topic_id=wire_uuid(t.topic_id),
              error_code=t.error_code, error_message=t.error_message, num_partitions=t.num_partitions,
              replication_factor=t.replication_factor, configs=None if t.configs is None else [
                  entry(CreateTopicsResponse, "CreatableTopicResult.CreatableTopicConfigs", name=c.name,
                        value=c.value, read_only=c.read_only, is_sensitive=False,
                        config_source=config_source(native.TOPIC_RESOURCE, c))
                  for c in t.configs])
        for t in response.topics])


API = KafkaApi(CreateTopicsRequest, CreateTopicsResponse, (0, 7), handle)
