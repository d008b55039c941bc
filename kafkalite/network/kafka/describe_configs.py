"""DescribeConfigs (key 32), versions 0-2: a topic's or a broker's configuration, Kafka's property names.

Topics (resource type 2) and brokers (type 4) are served; each entry says whether it is the default, as
`is_default` in v0 and as its source in v1+ (DEFAULT_CONFIG, or TOPIC_CONFIG / STATIC_BROKER_CONFIG for a value
set on the topic or broker; a topic's value inherited from a broker setting, as `log.retention.ms` sets
`retention.ms`, is STATIC_BROKER_CONFIG, as in Kafka). From v1 a request that asks for them (include_synonyms)
gets each config's synonyms: where else its value could come from, in order of precedence. Nothing is sensitive.
"""

from __future__ import annotations

from kafkalite.network import requests as native
from kafkalite.network.kafka.api import KafkaApi, Session
from kafkalite.network.kafka.protocol import DescribeConfigsRequest, DescribeConfigsResponse, Message, entry

def _source(resource_type: int, config: native.ConfigEntry) -> int:
    if config.is_default:
        return native.DEFAULT_CONFIG_SOURCE
    return native.TOPIC_CONFIG_SOURCE if resource_type == native.TOPIC_RESOURCE and not config.from_broker \
        else native.STATIC_BROKER_CONFIG_SOURCE


async def handle(request: Message, session: Session) -> Message:
    response: native.DescribeConfigsResponse = await session.send(native.DescribeConfigsRequest(
        [native.ConfigResource(r.resource_type, r.resource_name,
                               None if r.configuration_keys is None else list(r.configuration_keys))
         for r in request.resources], session.version >= 1 and bool(request.include_synonyms)))
    return DescribeConfigsResponse(throttle_time_ms=0, results=[
        entry(DescribeConfigsResponse, "DescribeConfigsResult", error_code=r.error_code,
              error_message=r.error_message, resource_type=r.resource_type, resource_name=r.name, configs=[
                  entry(DescribeConfigsResponse, "DescribeConfigsResult.DescribeConfigsResourceResult",
                        name=c.name, value=c.value, read_only=c.read_only, is_default=c.is_default,
                        config_source=_source(r.resource_type, c), is_sensitive=False, synonyms=[
                            entry(DescribeConfigsResponse,
                                  "DescribeConfigsResult.DescribeConfigsResourceResult.DescribeConfigsSynonym",
                                  name=synonym.name, value=synonym.value, source=synonym.source)
                            for synonym in c.synonyms])
                  for c in r.configs])
        for r in response.results])


API = KafkaApi(DescribeConfigsRequest, DescribeConfigsResponse, (0, 2), handle)
