"""Metadata (key 3), versions 0-12: brokers, controller and partition leaders, as this listener's clients reach them.

Every broker is advertised at its KAFKA endpoint (the broker's metadata cache keeps endpoints per listener
name, so a client never learns a port that speaks another protocol), with the real controller id. A partition
without a live leader is LEADER_NOT_AVAILABLE with leader -1, which clients answer by asking again. Version 0
asks for every topic with an empty list, later versions with a null one. Topics are created on first use when
the client allows it (v4+; always for older versions, as in Kafka) and the broker's auto.create.topics.enable
is on. Version 7 carries each partition's leader epoch (KIP-320): clients fence their fetches and offset lookups
with it, and a consumer that sees it rise checks its position with OffsetForLeaderEpoch. Java's client and
kafka-python trust the epoch only from version 9 on (older brokers could send a stale one, KAFKA-9212), so 9 is
served too. Authorized operations (versions 8 and 9, and the topics' in later ones), when asked for, are all a
topic or the cluster supports: nothing is refused, as on a Kafka broker without an authorizer.

Version 10 carries each topic's id (KIP-516); 11 drops the cluster's authorized operations (DescribeCluster has
them); 12 may ask for topics by id alone, with a null name. As in Kafka: a null name or a topic id before version 12
fails the whole request with INVALID_REQUEST; an id no topic has is UNKNOWN_TOPIC_ID with a null name; once one
topic is asked for by id, the names in the same request are not looked at.
"""

from __future__ import annotations

import logging

from kafkalite.common import errors
from kafkalite.network import requests as native
from kafkalite.network.kafka.acls import CLUSTER_OPERATIONS, TOPIC_OPERATIONS, authorized_operations
from kafkalite.network.kafka.api import KafkaApi, Session, native_uuid, wire_uuid
from kafkalite.network.kafka.protocol import Message, MetadataRequest, MetadataResponse, entry

BY_TOPIC_ID = 12

log = logging.getLogger(__name__)


async def handle(request: Message, session: Session) -> Message:
    version = session.version
    if request.topics is not None and version < BY_TOPIC_ID:
        for topic in request.topics:
            if topic.name is None:
                return _refused(request, f"Topic name can not be null for version {version}")
            if topic.topic_id is not None:
                return _refused(request, f"Topic IDs are not supported in requests for version {version}")
    ids = [] if request.topics is None else list(dict.fromkeys(
        native_uuid(topic.topic_id) for topic in request.topics if topic.topic_id is not None))
    topic_operations = authorized_operations(request.include_topic_authorized_operations, TOPIC_OPERATIONS)
    if ids:
        response: native.MetadataResponse = await session.send(native.MetadataRequest(None, False))
        found = {t.topic_id: t for t in response.topics}
        topics = [entry(MetadataResponse, "MetadataResponseTopic", error_code=errors.UNKNOWN_TOPIC_ID.code,
                        name=None, topic_id=wire_uuid(topic_id), is_internal=False, partitions=[])
                  for topic_id in ids if topic_id not in found]
        topics += [_topic(found[topic_id], topic_operations) for topic_id in ids if topic_id in found]
    else:
        names = None if request.topics is None or (version == 0 and not request.topics) \
            else [topic.name for topic in request.topics]
        response = await session.send(native.MetadataRequest(names, request.allow_auto_topic_creation
                                                              if version >= 4 else True))
        topics = [_topic(t, topic_operations) for t in response.topics]
    return MetadataResponse(
        throttle_time_ms=0, cluster_id=response.cluster_id, controller_id=response.controller_id,
        authorized_operations=authorized_operations(request.include_cluster_authorized_operations,
                                                    CLUSTER_OPERATIONS),
        brokers=[entry(MetadataResponse, "MetadataResponseBroker", node_id=b.node_id, host=b.host, port=b.port,
                       rack=b.rack) for b in response.brokers],
        topics=topics)


def _topic(topic: native.MetadataTopic, operations: set[int] | None) -> Message:
    return entry(MetadataResponse, "MetadataResponseTopic", error_code=topic.error_code, name=topic.name,
                 topic_id=wire_uuid(topic.topic_id), is_internal=topic.is_internal, authorized_operations=operations,
                 partitions=[entry(MetadataResponse, "MetadataResponseTopic.MetadataResponsePartition",
                                   error_code=p.error_code, partition_index=p.partition, leader_id=p.leader,
                                   leader_epoch=p.leader_epoch, replica_nodes=p.replicas, isr_nodes=p.isr,
                                   offline_replicas=p.offline_replicas)
                             for p in topic.partitions])


def _refused(request: Message, message: str) -> Message:
    """Kafka's error response to a Metadata request refused whole: each topic asked for, with the error, and
    nothing else (no brokers, no controller). The response has no field for `message`: logged, as Kafka does."""
    log.info("KAFKA listener: Metadata request refused: %s", message)
    return MetadataResponse(throttle_time_ms=0, cluster_id=None, controller_id=-1, brokers=[], topics=[
        entry(MetadataResponse, "MetadataResponseTopic", error_code=errors.INVALID_REQUEST.code,
              name=topic.name or "", topic_id=topic.topic_id, is_internal=False, partitions=[])
        for topic in request.topics])


API = KafkaApi(MetadataRequest, MetadataResponse, (0, 12), handle)
