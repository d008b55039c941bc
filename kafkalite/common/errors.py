"""Kafka's error codes, with Kafka's numbers, and one exception class per code.

The numbers are the wire contract: a client written for Apache Kafka decides whether to retry, refresh
metadata or give up by the number alone, so they must match Kafka's `Errors` enum exactly. The exception
classes exist so that code deep in the broker can raise and the request edge can turn the exception back
into a code plus a message without a lookup table of its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar


@dataclass(frozen=True, slots=True)
class ErrorCode:
    """One of Kafka's error codes: its number, its name and whether a client should retry."""

    code: int
    name: str
    retriable: bool
    description: str

    @property
    def exception(self) -> type[KafkaError]:
        return _EXCEPTIONS[self.code]

    def __str__(self) -> str:
        return self.name


class KafkaError(Exception):
    """Base of every error that maps onto a Kafka error code.

    Subclasses carry their `error` as a class attribute, so `except NotLeaderOrFollowerError` reads like
    the Java client's `catch (NotLeaderOrFollowerException e)`.
    """

    error: ClassVar[ErrorCode]

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message or self.error.description)
        self.message = message or self.error.description

    @property
    def code(self) -> int:
        return self.error.code

    @property
    def retriable(self) -> bool:
        return self.error.retriable

    def __str__(self) -> str:
        return f"{self.error.name}: {self.message}"


_BY_CODE: dict[int, ErrorCode] = {}
_EXCEPTIONS: dict[int, type[KafkaError]] = {}


def _define(code: int, name: str, retriable: bool, description: str) -> ErrorCode:
    error = ErrorCode(code, name, retriable, description)
    class_name = "".join(part.capitalize() for part in name.split("_"))
    if not class_name.endswith(("Error", "Exception")):
        class_name += "Error"
    exc = type(class_name, (KafkaError,), {"error": error, "__module__": __name__,
                                           "__doc__": description})
    _BY_CODE[code] = error
    _EXCEPTIONS[code] = exc
    return error


UNKNOWN_SERVER_ERROR = _define(-1, "UNKNOWN_SERVER_ERROR", False,
                               "The server experienced an unexpected error when processing the request.")
NONE = _define(0, "NONE", False, "No error.")
OFFSET_OUT_OF_RANGE = _define(1, "OFFSET_OUT_OF_RANGE", False,
                              "The requested offset is not within the range of offsets maintained by the server.")
CORRUPT_MESSAGE = _define(2, "CORRUPT_MESSAGE", True,
                          "This message has failed its CRC checksum, exceeds the valid size, has a null key for a "
                          "compacted topic, or is otherwise corrupt.")
UNKNOWN_TOPIC_OR_PARTITION = _define(3, "UNKNOWN_TOPIC_OR_PARTITION", True,
                                     "This server does not host this topic-partition.")
INVALID_FETCH_SIZE = _define(4, "INVALID_FETCH_SIZE", False, "The requested fetch size is invalid.")
LEADER_NOT_AVAILABLE = _define(5, "LEADER_NOT_AVAILABLE", True,
                               "There is no leader for this topic-partition as we are in the middle of a leadership "
                               "election.")
NOT_LEADER_OR_FOLLOWER = _define(6, "NOT_LEADER_OR_FOLLOWER", True,
                                 "For requests intended only for the leader, this error indicates that the broker is "
                                 "not the current leader. For requests intended for any replica, this error indicates "
                                 "that the broker is not a replica of the topic partition.")
REQUEST_TIMED_OUT = _define(7, "REQUEST_TIMED_OUT", True, "The request timed out.")
BROKER_NOT_AVAILABLE = _define(8, "BROKER_NOT_AVAILABLE", False, "The broker is not available.")
REPLICA_NOT_AVAILABLE = _define(9, "REPLICA_NOT_AVAILABLE", True,
                                "The replica is not available for the requested topic-partition.")
MESSAGE_TOO_LARGE = _define(10, "MESSAGE_TOO_LARGE", False,
                            "The request included a message larger than the max message size the server will accept.")
STALE_CONTROLLER_EPOCH = _define(11, "STALE_CONTROLLER_EPOCH", False, "The controller moved to another broker.")
OFFSET_METADATA_TOO_LARGE = _define(12, "OFFSET_METADATA_TOO_LARGE", False,
                                    "The metadata field of the offset request was too large.")
NETWORK_EXCEPTION = _define(13, "NETWORK_EXCEPTION", True,
                            "The server disconnected before a response was received.")
COORDINATOR_LOAD_IN_PROGRESS = _define(14, "COORDINATOR_LOAD_IN_PROGRESS", True,
                                       "The coordinator is loading and hence can't process requests.")
COORDINATOR_NOT_AVAILABLE = _define(15, "COORDINATOR_NOT_AVAILABLE", True, "The coordinator is not available.")
NOT_COORDINATOR = _define(16, "NOT_COORDINATOR", True, "This is not the correct coordinator.")
INVALID_TOPIC_EXCEPTION = _define(17, "INVALID_TOPIC_EXCEPTION", False,
                                  "The request attempted to perform an operation on an invalid topic.")
RECORD_LIST_TOO_LARGE = _define(18, "RECORD_LIST_TOO_LARGE", False,
                                "The request included message batch larger than the configured segment size on the "
                                "server.")
NOT_ENOUGH_REPLICAS = _define(19, "NOT_ENOUGH_REPLICAS", True,
                              "Messages are rejected since there are fewer in-sync replicas than required.")
NOT_ENOUGH_REPLICAS_AFTER_APPEND = _define(20, "NOT_ENOUGH_REPLICAS_AFTER_APPEND", True,
                                           "Messages are written to the log, but to fewer in-sync replicas than "
                                           "required.")
INVALID_REQUIRED_ACKS = _define(21, "INVALID_REQUIRED_ACKS", False,
                                "Produce request specified an invalid value for required acks.")
ILLEGAL_GENERATION = _define(22, "ILLEGAL_GENERATION", False, "Specified group generation id is not valid.")
INCONSISTENT_GROUP_PROTOCOL = _define(23, "INCONSISTENT_GROUP_PROTOCOL", False,
                                      "The group member's supported protocols are incompatible with those of "
                                      "existing members.")
INVALID_GROUP_ID = _define(24, "INVALID_GROUP_ID", False, "The configured groupId is invalid.")
UNKNOWN_MEMBER_ID = _define(25, "UNKNOWN_MEMBER_ID", False, "The coordinator is not aware of this member.")
INVALID_SESSION_TIMEOUT = _define(26, "INVALID_SESSION_TIMEOUT", False,
                                  "The session timeout is not within the range allowed by the broker.")
REBALANCE_IN_PROGRESS = _define(27, "REBALANCE_IN_PROGRESS", False,
                                "The group is rebalancing, so a rejoin is needed.")
INVALID_COMMIT_OFFSET_SIZE = _define(28, "INVALID_COMMIT_OFFSET_SIZE", False,
                                     "The committing offset data size is not valid.")
INVALID_TIMESTAMP = _define(32, "INVALID_TIMESTAMP", False,
                            "The timestamp of the message is out of acceptable range.")
CLUSTER_AUTHORIZATION_FAILED = _define(31, "CLUSTER_AUTHORIZATION_FAILED", False,
                                       "Cluster authorization failed.")
UNSUPPORTED_VERSION = _define(35, "UNSUPPORTED_VERSION", False, "The version of API is not supported.")
TOPIC_ALREADY_EXISTS = _define(36, "TOPIC_ALREADY_EXISTS", False, "Topic with this name already exists.")
INVALID_PARTITIONS = _define(37, "INVALID_PARTITIONS", False, "Number of partitions is below 1.")
INVALID_REPLICATION_FACTOR = _define(38, "INVALID_REPLICATION_FACTOR", False,
                                     "Replication factor is below 1 or larger than the number of available brokers.")
INVALID_REPLICA_ASSIGNMENT = _define(39, "INVALID_REPLICA_ASSIGNMENT", False, "Replica assignment is invalid.")
INVALID_CONFIG = _define(40, "INVALID_CONFIG", False, "Configuration is invalid.")
NOT_CONTROLLER = _define(41, "NOT_CONTROLLER", True, "This is not the correct controller for this cluster.")
INVALID_REQUEST = _define(42, "INVALID_REQUEST", False,
                          "This most likely occurs because of a request being malformed by the client library or "
                          "the message was sent to an incompatible broker.")
UNSUPPORTED_FOR_MESSAGE_FORMAT = _define(43, "UNSUPPORTED_FOR_MESSAGE_FORMAT", False,
                                         "The message format version on the broker does not support the request.")
POLICY_VIOLATION = _define(44, "POLICY_VIOLATION", False, "Request parameters do not satisfy the configured policy.")
OUT_OF_ORDER_SEQUENCE_NUMBER = _define(45, "OUT_OF_ORDER_SEQUENCE_NUMBER", False,
                                       "The broker received an out of order sequence number.")
DUPLICATE_SEQUENCE_NUMBER = _define(46, "DUPLICATE_SEQUENCE_NUMBER", False,
                                    "The broker received a duplicate sequence number.")
INVALID_PRODUCER_EPOCH = _define(47, "INVALID_PRODUCER_EPOCH", False,
                                 "Producer attempted to produce with an old epoch.")
INVALID_TXN_STATE = _define(48, "INVALID_TXN_STATE", False,
                            "The producer attempted a transactional operation in an invalid state.")
TRANSACTIONAL_ID_AUTHORIZATION_FAILED = _define(53, "TRANSACTIONAL_ID_AUTHORIZATION_FAILED", False,
                                                "Transactional Id authorization failed.")
SECURITY_DISABLED = _define(54, "SECURITY_DISABLED", False, "Security features are disabled.")
KAFKA_STORAGE_ERROR = _define(56, "KAFKA_STORAGE_ERROR", True, "Disk error when trying to access log file on disk.")
UNKNOWN_PRODUCER_ID = _define(59, "UNKNOWN_PRODUCER_ID", False,
                              "This exception is raised by the broker if it could not locate the producer metadata "
                              "associated with the producerId in question.")
REASSIGNMENT_IN_PROGRESS = _define(60, "REASSIGNMENT_IN_PROGRESS", False,
                                   "A partition reassignment is in progress.")
NON_EMPTY_GROUP = _define(68, "NON_EMPTY_GROUP", False, "The group is not empty.")
GROUP_ID_NOT_FOUND = _define(69, "GROUP_ID_NOT_FOUND", False, "The group id does not exist.")
FETCH_SESSION_ID_NOT_FOUND = _define(70, "FETCH_SESSION_ID_NOT_FOUND", True,
                                     "The fetch session ID was not found.")
INVALID_FETCH_SESSION_EPOCH = _define(71, "INVALID_FETCH_SESSION_EPOCH", True,
                                      "The fetch session epoch is invalid.")
LISTENER_NOT_FOUND = _define(72, "LISTENER_NOT_FOUND", True,
                             "There is no listener on the leader broker that matches the listener on which metadata "
                             "request was processed.")
TOPIC_DELETION_DISABLED = _define(73, "TOPIC_DELETION_DISABLED", False, "Topic deletion is disabled.")
FENCED_LEADER_EPOCH = _define(74, "FENCED_LEADER_EPOCH", True,
                              "The leader epoch in the request is older than the epoch on the broker.")
UNKNOWN_LEADER_EPOCH = _define(75, "UNKNOWN_LEADER_EPOCH", True,
                               "The leader epoch in the request is newer than the epoch on the broker.")
UNSUPPORTED_COMPRESSION_TYPE = _define(76, "UNSUPPORTED_COMPRESSION_TYPE", False,
                                       "The requesting client does not support the compression type of given "
                                       "partition.")
STALE_BROKER_EPOCH = _define(77, "STALE_BROKER_EPOCH", False, "Broker epoch has changed.")
OFFSET_NOT_AVAILABLE = _define(78, "OFFSET_NOT_AVAILABLE", True,
                               "The leader high watermark has not caught up from a recent leader election so the "
                               "offsets cannot be guaranteed to be monotonically increasing.")
MEMBER_ID_REQUIRED = _define(79, "MEMBER_ID_REQUIRED", False,
                              "The group member needs to have a valid member id before actually entering a "
                              "consumer group.")
PREFERRED_LEADER_NOT_AVAILABLE = _define(80, "PREFERRED_LEADER_NOT_AVAILABLE", True,
                                         "The preferred leader was not available.")
GROUP_MAX_SIZE_REACHED = _define(81, "GROUP_MAX_SIZE_REACHED", False,
                                  "The consumer group has reached its max size.")
FENCED_INSTANCE_ID = _define(82, "FENCED_INSTANCE_ID", False,
                              "The broker rejected this static consumer since another consumer with the same "
                              "group.instance.id has registered with a different member.id.")
ELIGIBLE_LEADERS_NOT_AVAILABLE = _define(83, "ELIGIBLE_LEADERS_NOT_AVAILABLE", True,
                                         "Eligible topic partition leaders are not available.")
ELECTION_NOT_NEEDED = _define(84, "ELECTION_NOT_NEEDED", False, "Leader election not needed for topic partition.")
NO_REASSIGNMENT_IN_PROGRESS = _define(85, "NO_REASSIGNMENT_IN_PROGRESS", False,
                                      "No partition reassignment is in progress.")
GROUP_SUBSCRIBED_TO_TOPIC = _define(86, "GROUP_SUBSCRIBED_TO_TOPIC", False,
                                    "The consumer group is actively subscribed to the topic.")
INVALID_RECORD = _define(87, "INVALID_RECORD", False,
                         "This record has failed the validation on broker and hence will be rejected.")
UNKNOWN_TOPIC_ID = _define(100, "UNKNOWN_TOPIC_ID", True, "This server does not host this topic ID.")

UnknownServerError = UNKNOWN_SERVER_ERROR.exception
OffsetOutOfRangeError = OFFSET_OUT_OF_RANGE.exception
CorruptMessageError = CORRUPT_MESSAGE.exception
UnknownTopicOrPartitionError = UNKNOWN_TOPIC_OR_PARTITION.exception
LeaderNotAvailableError = LEADER_NOT_AVAILABLE.exception
NotLeaderOrFollowerError = NOT_LEADER_OR_FOLLOWER.exception
RequestTimedOutError = REQUEST_TIMED_OUT.exception
BrokerNotAvailableError = BROKER_NOT_AVAILABLE.exception
ReplicaNotAvailableError = REPLICA_NOT_AVAILABLE.exception
MessageTooLargeError = MESSAGE_TOO_LARGE.exception
StaleControllerEpochError = STALE_CONTROLLER_EPOCH.exception
NetworkExceptionError = NETWORK_EXCEPTION.exception
CoordinatorNotAvailableError = COORDINATOR_NOT_AVAILABLE.exception
NotCoordinatorError = NOT_COORDINATOR.exception
InvalidTopicError = INVALID_TOPIC_EXCEPTION.exception
RecordListTooLargeError = RECORD_LIST_TOO_LARGE.exception
NotEnoughReplicasError = NOT_ENOUGH_REPLICAS.exception
NotEnoughReplicasAfterAppendError = NOT_ENOUGH_REPLICAS_AFTER_APPEND.exception
InvalidRequiredAcksError = INVALID_REQUIRED_ACKS.exception
CoordinatorLoadInProgressError = COORDINATOR_LOAD_IN_PROGRESS.exception
IllegalGenerationError = ILLEGAL_GENERATION.exception
InconsistentGroupProtocolError = INCONSISTENT_GROUP_PROTOCOL.exception
InvalidGroupIdError = INVALID_GROUP_ID.exception
UnknownMemberIdError = UNKNOWN_MEMBER_ID.exception
InvalidSessionTimeoutError = INVALID_SESSION_TIMEOUT.exception
RebalanceInProgressError = REBALANCE_IN_PROGRESS.exception
OffsetMetadataTooLargeError = OFFSET_METADATA_TOO_LARGE.exception
NonEmptyGroupError = NON_EMPTY_GROUP.exception
GroupIdNotFoundError = GROUP_ID_NOT_FOUND.exception
MemberIdRequiredError = MEMBER_ID_REQUIRED.exception
FencedInstanceIdError = FENCED_INSTANCE_ID.exception
GroupSubscribedToTopicError = GROUP_SUBSCRIBED_TO_TOPIC.exception
InvalidTimestampError = INVALID_TIMESTAMP.exception
ClusterAuthorizationFailedError = CLUSTER_AUTHORIZATION_FAILED.exception
UnsupportedVersionError = UNSUPPORTED_VERSION.exception
TopicAlreadyExistsError = TOPIC_ALREADY_EXISTS.exception
InvalidPartitionsError = INVALID_PARTITIONS.exception
InvalidReplicationFactorError = INVALID_REPLICATION_FACTOR.exception
InvalidReplicaAssignmentError = INVALID_REPLICA_ASSIGNMENT.exception
InvalidConfigError = INVALID_CONFIG.exception
NotControllerError = NOT_CONTROLLER.exception
InvalidRequestError = INVALID_REQUEST.exception
OutOfOrderSequenceNumberError = OUT_OF_ORDER_SEQUENCE_NUMBER.exception
DuplicateSequenceNumberError = DUPLICATE_SEQUENCE_NUMBER.exception
InvalidProducerEpochError = INVALID_PRODUCER_EPOCH.exception
InvalidTxnStateError = INVALID_TXN_STATE.exception
UnknownProducerIdError = UNKNOWN_PRODUCER_ID.exception
ReassignmentInProgressError = REASSIGNMENT_IN_PROGRESS.exception
TopicDeletionDisabledError = TOPIC_DELETION_DISABLED.exception
FencedLeaderEpochError = FENCED_LEADER_EPOCH.exception
UnknownLeaderEpochError = UNKNOWN_LEADER_EPOCH.exception
StaleBrokerEpochError = STALE_BROKER_EPOCH.exception
OffsetNotAvailableError = OFFSET_NOT_AVAILABLE.exception
PreferredLeaderNotAvailableError = PREFERRED_LEADER_NOT_AVAILABLE.exception
EligibleLeadersNotAvailableError = ELIGIBLE_LEADERS_NOT_AVAILABLE.exception
ElectionNotNeededError = ELECTION_NOT_NEEDED.exception
NoReassignmentInProgressError = NO_REASSIGNMENT_IN_PROGRESS.exception
InvalidRecordError = INVALID_RECORD.exception
PolicyViolationError = POLICY_VIOLATION.exception
UnsupportedForMessageFormatError = UNSUPPORTED_FOR_MESSAGE_FORMAT.exception
UnsupportedCompressionTypeError = UNSUPPORTED_COMPRESSION_TYPE.exception


def for_code(code: int) -> ErrorCode:
    """The `ErrorCode` for a wire number; an unknown number is UNKNOWN_SERVER_ERROR, as in Kafka's clients."""
    return _BY_CODE.get(code, UNKNOWN_SERVER_ERROR)


def all_errors() -> list[ErrorCode]:
    return sorted(_BY_CODE.values(), key=lambda e: e.code)


def raise_for(code: int, message: str | None = None) -> None:
    """Raise the exception for `code` unless it is NONE; the one place a response code becomes an exception."""
    if code != 0:
        raise for_code(code).exception(message)
