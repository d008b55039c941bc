"""ElectLeaders (key 43), versions 0-2 (2 is flexible): elect the preferred replica, or any live one (unclean).

Version 0 has no election type and means preferred; from version 1 the type is named (0 preferred, 1 unclean,
anything else INVALID_REQUEST at the top). The controller answers each partition as Kafka's does: NONE once
elected, ELECTION_NOT_NEEDED (the preferred replica leads already; for unclean, a live leader exists),
PREFERRED_LEADER_NOT_AVAILABLE or ELIGIBLE_LEADERS_NOT_AVAILABLE, UNKNOWN_TOPIC_OR_PARTITION. A null partition
list elects every partition and, as Kafka's broker does, leaves out those that needed no election. An error for
the whole request (no controller known, an unknown election type) is also given to every partition named, as
Kafka's broker gives it, since version 0 has no top-level error code. confluent-kafka's and kafka-python's
`elect_leaders` send it.
"""

from __future__ import annotations

from kafkalite.common import errors
from kafkalite.network import requests as native
from kafkalite.network.kafka.api import KafkaApi, Session, by_topic
from kafkalite.network.kafka.protocol import ElectLeadersRequest, ElectLeadersResponse, Message, entry


async def handle(request: Message, session: Session) -> Message:
    asked = None if request.topic_partitions is None else [
        (topic.topic, partition) for topic in request.topic_partitions for partition in topic.partitions]
    election_type = native.PREFERRED_ELECTION if session.version == 0 else request.election_type
    response: native.ElectLeadersResponse = await session.send(
        native.ElectLeadersRequest(election_type, asked, request.timeout_ms))
    results = response.results
    if asked is None:
        results = [r for r in results if r.error_code != errors.ELECTION_NOT_NEEDED.code]
    elif response.error_code:
        results = [native.ElectionResult(topic, partition, response.error_code, response.error_message)
                   for topic, partition in asked]
    return ElectLeadersResponse(throttle_time_ms=0, error_code=response.error_code, replica_election_results=[
        entry(ElectLeadersResponse, "ReplicaElectionResult", topic=topic, partition_result=[
            entry(ElectLeadersResponse, "ReplicaElectionResult.PartitionResult", partition_id=r.partition,
                  error_code=r.error_code, error_message=r.error_message)
            for r in partitions])
        for topic, partitions in by_topic(results).items()])


API = KafkaApi(ElectLeadersRequest, ElectLeadersResponse, (0, 2), handle)
