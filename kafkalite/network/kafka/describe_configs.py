"""DescribeConfigs (key 32), versions 0-4: a topic's or a broker's configuration, Kafka's property names.

Topics (resource type 2) and brokers (type 4) are served; each entry says whether it is the default, as
`is_default` in v0 and as its source in v1+ (DEFAULT_CONFIG, or TOPIC_CONFIG / STATIC_BROKER_CONFIG for a value
set on the topic or broker; a topic's value inherited from a broker setting, as `log.retention.ms` sets
`retention.ms`, is STATIC_BROKER_CONFIG, as in Kafka). From v1 a request that asks for them (include_synonyms)
gets each config's synonyms: where else its value could come from, in order of precedence. Nothing is sensitive.
From v3 each config carries its type, as Kafka's ConfigDef names it, so that a client (Java's `ConfigEntry.type()`,
a UI) can show or check a value as a number, a list or a flag, and its documentation when the request asks for it
(include_documentation), else null as in Kafka. v4 is v3 in the flexible encoding.
"""

from __future__ import annotations

from kafkalite.common.config import BrokerConfig, ConfigKey, TopicConfig
from kafkalite.network import requests as native
from kafkalite.network.kafka.api import KafkaApi, Session
from kafkalite.network.kafka.protocol import DescribeConfigsRequest, DescribeConfigsResponse, Message, entry

# DescribeConfigsResponse's ConfigType (v3+), Kafka's ConfigDef.Type, by the type names of kafkalite's definitions;
# 0, UNKNOWN, for a name kafkalite does not define.
_CONFIG_TYPES = {"boolean": 1, "string": 2, "nullable string": 2, "int": 3, "nullable int": 3, "long": 5,
                 "double": 6, "list": 7}


def _definition(resource_type: int, name: str) -> ConfigKey | None:
    return (TopicConfig if resource_type == native.TOPIC_RESOURCE else BrokerConfig).definition(name)


def config_source(resource_type: int, config: native.ConfigEntry) -> int:
    if config.is_default:
        return native.DEFAULT_CONFIG_SOURCE
    return native.TOPIC_CONFIG_SOURCE if resource_type == native.TOPIC_RESOURCE and not config.from_broker \
        else native.STATIC_BROKER_CONFIG_SOURCE


async def handle(request: Message, session: Session) -> Message:
    documented = session.version >= 3 and bool(request.include_documentation)
    response: native.DescribeConfigsResponse = await session.send(native.DescribeConfigsRequest(
        [native.ConfigResource(r.resource_type, r.resource_name,
                               None if r.configuration_keys is None else list(r.configuration_keys))
         for r in request.resources], session.version >= 1 and bool(request.include_synonyms)))
    return DescribeConfigsResponse(throttle_time_ms=0, results=[
        entry(DescribeConfigsResponse, "DescribeConfigsResult", error_code=r.error_code,
              error_message=r.error_message, resource_type=r.resource_type, resource_name=r.name,
              configs=[_described(r.resource_type, c, documented) for c in r.configs])
        for r in response.results])


def _described(resource_type: int, config: native.ConfigEntry, documented: bool) -> Message:
    definition = _definition(resource_type, config.name)
    return entry(DescribeConfigsResponse, "DescribeConfigsResult.DescribeConfigsResourceResult",
                 name=config.name, value=config.value, read_only=config.read_only, is_default=config.is_default,
                 config_source=config_source(resource_type, config), is_sensitive=False,
                 config_type=0 if definition is None else _CONFIG_TYPES[definition.type],
                 documentation=definition.doc if documented and definition is not None else None, synonyms=[
                     entry(DescribeConfigsResponse,
                           "DescribeConfigsResult.DescribeConfigsResourceResult.DescribeConfigsSynonym",
                           name=synonym.name, value=synonym.value, source=synonym.source)
                     for synonym in config.synonyms])


API = KafkaApi(DescribeConfigsRequest, DescribeConfigsResponse, (0, 4), handle)
