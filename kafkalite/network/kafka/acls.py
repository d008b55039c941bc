"""DescribeAcls, CreateAcls and DeleteAcls (keys 29, 30, 31), versions 1-3: answered as a Kafka broker with no
authorizer configured answers them, SECURITY_DISABLED with its message, for the request and for each creation
or filter named.

kafkalite authorizes nothing: every client may do everything, as on a Kafka broker without `authorizer.class.name`
(the default). The ACL admin calls of confluent-kafka and kafka-python then fail with the error and message a
real broker gives, rather than with an API the broker does not serve. The three share this module, as they share
that one answer; no request reaches the broker.
"""

from __future__ import annotations

from kafkalite.common import errors
from kafkalite.network.kafka.api import KafkaApi, Session
from kafkalite.network.kafka.protocol import (
    CreateAclsRequest, CreateAclsResponse, DeleteAclsRequest, DeleteAclsResponse, DescribeAclsRequest,
    DescribeAclsResponse, Message, entry,
)

NO_AUTHORIZER = "No Authorizer is configured on the broker"
DISABLED = errors.SECURITY_DISABLED.code


async def describe(request: Message, session: Session) -> Message:
    return DescribeAclsResponse(throttle_time_ms=0, error_code=DISABLED, error_message=NO_AUTHORIZER, resources=[])


async def create(request: Message, session: Session) -> Message:
    return CreateAclsResponse(throttle_time_ms=0, results=[
        entry(CreateAclsResponse, "AclCreationResult", error_code=DISABLED, error_message=NO_AUTHORIZER)
        for _ in request.creations])


async def delete(request: Message, session: Session) -> Message:
    return DeleteAclsResponse(throttle_time_ms=0, filter_results=[
        entry(DeleteAclsResponse, "DeleteAclsFilterResult", error_code=DISABLED, error_message=NO_AUTHORIZER,
              matching_acls=[])
        for _ in request.filters])


DESCRIBE_API = KafkaApi(DescribeAclsRequest, DescribeAclsResponse, (1, 3), describe)
CREATE_API = KafkaApi(CreateAclsRequest, CreateAclsResponse, (1, 3), create)
DELETE_API = KafkaApi(DeleteAclsRequest, DeleteAclsResponse, (1, 3), delete)
