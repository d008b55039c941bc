"""CreatePartitions (key 37), versions 0-3: raise a topic's partition count, optionally placing the new ones.

`count` is the new total, as in Kafka; a count not above the current one is INVALID_PARTITIONS for that
topic. The broker answers once its metadata shows leaders for the new partitions. Version 2 is version 1 in the
flexible encoding; 3 changes only how Kafka's quotas throttle, and kafkalite has no quotas.
"""

from __future__ import annotations

from kafkalite.network import requests as native
from kafkalite.network.kafka.api import KafkaApi, Session
from kafkalite.network.kafka.protocol import CreatePartitionsRequest, CreatePartitionsResponse, Message, entry


async def handle(request: Message, session: Session) -> Message:
    response: native.CreatePartitionsResponse = await session.send(native.CreatePartitionsRequest(
        [native.CreatePartitionsTopic(topic.name, topic.count,
                                      None if topic.assignments is None
                                      else [list(a.broker_ids) for a in topic.assignments])
         for topic in request.topics],
        request.timeout_ms, request.validate_only))
    return CreatePartitionsResponse(throttle_time_ms=0, results=[
        entry(CreatePartitionsResponse, "CreatePartitionsTopicResult", name=r.name, error_code=r.error_code,
              error_message=r.error_message)
        for r in response.results])


API = KafkaApi(CreatePartitionsRequest, CreatePartitionsResponse, (0, 3), handle)
