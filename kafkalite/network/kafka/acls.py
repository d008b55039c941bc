"""DescribeAcls, CreateAcls and DeleteAcls (keys 29, 30, 31), versions 1-3: answered as a Kafka broker with no
authorizer configured answers them, SECURITY_DISABLED with its message, for the request and for each creation
or filter named. Also the authorized operations that Metadata, DescribeCluster and DescribeGroups list when asked.

kafkalite authorizes nothing: every client may do everything, as on a Kafka broker without `authorizer.class.name`
(the default). The ACL admin calls of confluent-kafka and kafka-python then fail with the error and message a
real broker gives, rather than with an API the broker does not serve. The three share this module, as they share
that one answer; no request reaches the broker. Asked for its authorized operations on a resource, such a broker
lists every operation the resource type supports (Kafka's AclEntry.supportedOperations), as a bitfield.
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

# Kafka's AclOperation codes, and what each resource type supports
READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE = (
    3, 4, 5, 6, 7, 8, 9, 10, 11, 12)
TOPIC_OPERATIONS = (READ, WRITE, CREATE, DESCRIBE, DELETE, ALTER, DESCRIBE_CONFIGS, ALTER_CONFIGS)
GROUP_OPERATIONS = (READ, DESCRIBE, DELETE)
CLUSTER_OPERATIONS = (CREATE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE, ALTER, DESCRIBE)


def authorized_operations(asked: bool, operations: tuple[int, ...]) -> set[int] | None:
    """The authorized operations a response carries, as the codec takes a bitfield (the set of the bits): all the
    resource supports if they were asked for (nothing is refused); None, Kafka's "not provided", otherwise."""
    return set(operations) if asked else None


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
