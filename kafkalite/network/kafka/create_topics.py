"""CreateTopics (key 19), versions 0-4: topics with a partition count and replication factor, or an assignment.

The controller creates them (forwarded as the native request is) and the broker answers once its own metadata
shows the new leaders, so a client that creates a topic and then produces to it finds it. -1 for either count
takes the broker's default (num.partitions, default.replication.factor), as in Kafka 2.4+. Each topic's result
carries its own error: TOPIC_ALREADY_EXISTS, INVALID_PARTITIONS, INVALID_REPLICATION_FACTOR, INVALID_CONFIG (a null
config value among others), INVALID_REQUEST (a topic named twice, counts given with an assignment), ...
"""

from __future__ import annotations

from kafkalite.network import requests as native
from kafkalite.network.kafka.api import KafkaApi, Session
from kafkalite.network.kafka.protocol import CreateTopicsRequest, CreateTopicsResponse, Message, entry


async def handle(request: Message, session: Session) -> Message:
    response: native.CreateTopicsResponse = await session.send(native.CreateTopicsRequest(
        [native.CreatableTopic(topic.name, topic.num_partitions, topic.replication_factor,
                               {a.partition_index: list(a.broker_ids) for a in topic.assignments} or None,
                               {c.name: c.value for c in topic.configs})
         for topic in request.topics],
        request.timeout_ms, request.validate_only))
    return CreateTopicsResponse(throttle_time_ms=0, topics=[
        entry(CreateTopicsResponse, "CreatableTopicResult", name=t.name, error_code=t.error_code,
              error_message=t.error_message, num_partitions=t.num_partitions,
              replication_factor=t.replication_factor)
        for t in response.topics])


API = KafkaApi(CreateTopicsRequest, CreateTopicsResponse, (0, 4), handle)
