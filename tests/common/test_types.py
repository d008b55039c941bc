import pytest

from kafkalite.common.errors import InvalidTopicError
from kafkalite.common.types import TopicPartition, validate_topic_name


@pytest.mark.parametrize("name", ["orders", "a", "with.dots_and-dashes", "X" * 249, "__consumer_offsets"])
def test_legal_names(name: str) -> None:
    assert validate_topic_name(name) == name


@pytest.mark.parametrize("name", ["", ".", "..", "X" * 250, "has space", "slash/y", "ümlaut", None, 7])
def test_illegal_names(name: object) -> None:
    with pytest.raises(InvalidTopicError) as info:
        validate_topic_name(name)
    assert info.value.code == 17


def test_topic_partition_orders_and_prints() -> None:
    tps = [TopicPartition("b", 0), TopicPartition("a", 2), TopicPartition("a", 10)]
    assert sorted(tps) == [("a", 2), ("a", 10), ("b", 0)]
    assert str(TopicPartition("orders", 3)) == "orders-3"
