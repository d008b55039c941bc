"""DescribeCluster (key 60), versions 0-1: the cluster id, the controller and the live brokers.

Answered from a native Metadata request for no topics, so it shows exactly what Metadata shows: each broker at
its KAFKA endpoint, and the real controller id. Only broker endpoints are served (endpoint type 1); asking for
controller endpoints (type 2, KRaft) is UNSUPPORTED_VERSION. Asked for, the cluster's authorized operations are
all a cluster supports: nothing is refused, as on a Kafka broker without an authorizer.
"""

from __future__ import annotations

from kafkalite.common import errors
from kafkalite.network import requests as native
from kafkalite.network.kafka.acls import CLUSTER_OPERATIONS, authorized_operations
from kafkalite.network.kafka.api import KafkaApi, Session
from kafkalite.network.kafka.protocol import DescribeClusterRequest, DescribeClusterResponse, Message, entry

BROKER_ENDPOINTS = 1


async def handle(request: Message, session: Session) -> Message:
    if request.endpoint_type != BROKER_ENDPOINTS:
        return DescribeClusterResponse(throttle_time_ms=0, error_code=errors.UNSUPPORTED_VERSION.code,
                                       error_message="only broker endpoints (type 1) are served", cluster_id="",
                                       endpoint_type=request.endpoint_type, brokers=[])
    response: native.MetadataResponse = await session.send(native.MetadataRequest([]))
    return DescribeClusterResponse(
        throttle_time_ms=0, error_code=errors.NONE.code, error_message=None, cluster_id=response.cluster_id,
        controller_id=response.controller_id, endpoint_type=BROKER_ENDPOINTS,
        authorized_operations=authorized_operations(request.include_cluster_authorized_operations,
                                                            CLUSTER_OPERATIONS), brokers=[
            entry(DescribeClusterResponse, "DescribeClusterBroker", broker_id=b.node_id, host=b.host, port=b.port,
                  rack=b.rack)
            for b in response.brokers])


API = KafkaApi(DescribeClusterRequest, DescribeClusterResponse, (0, 1), handle)
