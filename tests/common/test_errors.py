import pytest

from kafkalite.common import errors


@pytest.mark.parametrize(("error", "code", "retriable"), [
    (errors.NONE, 0, False),
    (errors.OFFSET_OUT_OF_RANGE, 1, False),
    (errors.CORRUPT_MESSAGE, 2, True),
    (errors.UNKNOWN_TOPIC_OR_PARTITION, 3, True),
    (errors.LEADER_NOT_AVAILABLE, 5, True),
    (errors.NOT_LEADER_OR_FOLLOWER, 6, True),
    (errors.REQUEST_TIMED_OUT, 7, True),
    (errors.BROKER_NOT_AVAILABLE, 8, False),
    (errors.REPLICA_NOT_AVAILABLE, 9, True),
    (errors.MESSAGE_TOO_LARGE, 10, False),
    (errors.STALE_CONTROLLER_EPOCH, 11, False),
    (errors.NETWORK_EXCEPTION, 13, True),
    (errors.COORDINATOR_NOT_AVAILABLE, 15, True),
    (errors.NOT_COORDINATOR, 16, True),
    (errors.INVALID_TOPIC_EXCEPTION, 17, False),
    (errors.NOT_ENOUGH_REPLICAS, 19, True),
    (errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND, 20, True),
    (errors.ILLEGAL_GENERATION, 22, False),
    (errors.UNKNOWN_MEMBER_ID, 25, False),
    (errors.REBALANCE_IN_PROGRESS, 27, False),
    (errors.UNSUPPORTED_VERSION, 35, False),
    (errors.TOPIC_ALREADY_EXISTS, 36, False),
    (errors.INVALID_PARTITIONS, 37, False),
    (errors.INVALID_REPLICATION_FACTOR, 38, False),
    (errors.INVALID_CONFIG, 40, False),
    (errors.NOT_CONTROLLER, 41, True),
    (errors.INVALID_REQUEST, 42, False),
    (errors.OUT_OF_ORDER_SEQUENCE_NUMBER, 45, False),
    (errors.TOPIC_DELETION_DISABLED, 73, False),
    (errors.FENCED_LEADER_EPOCH, 74, True),
    (errors.UNKNOWN_LEADER_EPOCH, 75, True),
    (errors.STALE_BROKER_EPOCH, 77, False),
])
def test_codes_match_kafka(error: errors.ErrorCode, code: int, retriable: bool) -> None:
    assert error.code == code
    assert error.retriable is retriable
    assert errors.for_code(code) is error


def test_exception_carries_code_and_message() -> None:
    with pytest.raises(errors.NotLeaderOrFollowerError) as info:
        errors.raise_for(6, "broker 2 does not lead orders-0")
    assert info.value.code == 6
    assert info.value.retriable
    assert "NOT_LEADER_OR_FOLLOWER" in str(info.value) and "orders-0" in str(info.value)
    assert isinstance(info.value, errors.KafkaError)


def test_unknown_code_maps_to_unknown_server_error() -> None:
    assert errors.for_code(9999) is errors.UNKNOWN_SERVER_ERROR
    errors.raise_for(0)  # NONE raises nothing


def test_codes_are_unique() -> None:
    codes = [e.code for e in errors.all_errors()]
    assert len(codes) == len(set(codes))
    names = [e.exception.__name__ for e in errors.all_errors()]
    assert len(names) == len(set(names))
