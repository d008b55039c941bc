"""Metadata (key 3), versions 0-9: brokers, controller and partition leaders, as this listener's clients reach them.

Every broker is advertised at its KAFKA endpoint (the broker's metadata cache keeps endpoints per listener
name, so a client never learns a port that speaks another protocol), with the real controller id. A partition
without a live leader is LEADER_NOT_AVAILABLE with leader -1, which clients answer by asking again. Version 0
asks for every topic with an empty list, later versions with a null one. Topics are created on first use when
the client allows it (v4+; always for older versions, as in Kafka) and the broker's auto.create.topics.enable
is on. Version 7 carries each partition's leader epoch (KIP-320): clients fence their fetches and offset lookups
with it, and a consumer that sees it rise checks its position with OffsetForLeaderEpoch. Java's client and
kafka-python trust the epoch only from version 9 on (older brokers could send a stale one, KAFKA-9212), so 9 is
served too. Authorized operations (versions 8 and 9), when asked for, are all a topic or the cluster supports:
nothing is refused, as on a Kafka broker without an authorizer.
"""

from __future__ import annotations

from kafkalite.network import requests as native
from kafkalite.network.kafka.acls import CLUSTER_OPERATIONS, TOPIC_OPERATIONS, authorized_operations
from kafkalite.network.kafka.api import KafkaApi, Session
from kafkalite.network.kafka.protocol import Message, MetadataRequest, MetadataResponse, entry


async def handle(request: Message, session: Session) -> Message:
    topics = None if request.topics is None or (session.version == 0 and not request.topics) \
        else [topic.name for topic in request.topics]
    response: native.MetadataResponse = await session.send(
        native.MetadataRequest(topics, request.allow_auto_topic_creation if session.version >= 4 else True))
    topic_operations = authorized_operations(request.include_topic_authorized_operations, TOPIC_OPERATIONS)
    return MetadataResponse(
        throttle_time_ms=0, cluster_id=response.cluster_id, controller_id=response.controller_id,
        authorized_operations=authorized_operations(request.include_cluster_authorized_operations,
                                                            CLUSTER_OPERATIONS),
        brokers=[entry(MetadataResponse, "MetadataResponseBroker", node_id=b.node_id, host=b.host, port=b.port,
                       rack=b.rack) for b in response.brokers],
        topics=[entry(MetadataResponse, "MetadataResponseTopic", error_code=t.error_code, name=t.name,
                      is_internal=t.is_internal, authorized_operations=topic_operations, partitions=[
                          entry(MetadataResponse, "MetadataResponseTopic.MetadataResponsePartition",
                                error_code=p.error_code, partition_index=p.partition, leader_id=p.leader,
                                leader_epoch=p.leader_epoch, replica_nodes=p.replicas, isr_nodes=p.isr,
                                offline_replicas=p.offline_replicas)
                          for p in t.partitions])
                for t in response.topics])


API = KafkaApi(MetadataRequest, MetadataResponse, (0, 9), handle)
