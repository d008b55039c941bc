"""IncrementalAlterConfigs (key 44), versions 0-1 (1 is flexible): change some of a topic's overrides (KIP-339).

Each config names an operation: SET (0), DELETE (1, back to the default), APPEND (2) or SUBTRACT (3), the last two
for list properties only (`cleanup.policy`); properties not named keep their overrides. confluent-kafka's
`incremental_alter_configs` and the Java admin's `incrementalAlterConfigs` send it. The result is checked whole, as
at topic creation: INVALID_CONFIG names the property, and a name given twice, an unknown operation or a null value
to set is INVALID_REQUEST, each for its resource alone.
"""

from __future__ import annotations

from kafkalite.network import requests as native
from kafkalite.network.kafka.alter_configs import response
from kafkalite.network.kafka.api import KafkaApi, Session
from kafkalite.network.kafka.protocol import IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse, Message


async def handle(request: Message, session: Session) -> Message:
    answer: native.IncrementalAlterConfigsResponse = await session.send(native.IncrementalAlterConfigsRequest(
        [native.IncrementalAlterConfigsResource(r.resource_type, r.resource_name, [
            native.AlterableConfig(c.name, c.config_operation, c.value) for c in r.configs])
         for r in request.resources],
        request.validate_only))
    return response(IncrementalAlterConfigsResponse, answer.results)


API = KafkaApi(IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse, (0, 1), handle)
