"""AlterConfigs (key 33), versions 0-2: replace a topic's configuration overrides (2: 1 in the flexible encoding).

As in Kafka, the request carries the resource's whole set of overrides: anything not listed goes back to its
default. Values are checked as at topic creation (INVALID_CONFIG names the property); a null value, or a resource
named twice, is INVALID_REQUEST, as in Kafka.
"""

from __future__ import annotations

from typing import Any

from kafkalite.network import requests as native
from kafkalite.network.kafka.api import KafkaApi, Session
from kafkalite.network.kafka.protocol import AlterConfigsRequest, AlterConfigsResponse, Message, entry


def response(response_type: Any, results: list[native.AlterConfigsResult]) -> Message:
    """The answer per resource, in the shape AlterConfigs and IncrementalAlterConfigs share."""
    return response_type(throttle_time_ms=0, responses=[
        entry(response_type, "AlterConfigsResourceResponse", error_code=r.error_code, error_message=r.error_message,
              resource_type=r.resource_type, resource_name=r.name)
        for r in results])


async def handle(request: Message, session: Session) -> Message:
    answer: native.AlterConfigsResponse = await session.send(native.AlterConfigsRequest(
        [native.AlterConfigsResource(r.resource_type, r.resource_name,
                                     {c.name: c.value for c in r.configs})
         for r in request.resources],
        request.validate_only))
    return response(AlterConfigsResponse, answer.results)


API = KafkaApi(AlterConfigsRequest, AlterConfigsResponse, (0, 2), handle)
