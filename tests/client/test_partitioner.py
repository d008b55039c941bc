"""The default partitioner matches the Java client bit for bit; keyless records stick until a batch is sent."""

import random

import pytest

from kafkalite.client.partitioner import StickyPartitioner, murmur2, partition_for_key


@pytest.mark.parametrize(("data", "expected"), [
    (b"21", -973932308),
    (b"foobar", -790332482),
    (b"a-little-bit-long-string", -985981536),
    (b"a-little-bit-longer-string", -1486304829),
    (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
    (b"abc", 479470107),
])
def test_murmur2_matches_kafka_utils_test(data: bytes, expected: int) -> None:
    assert murmur2(data) == expected


def test_keys_map_to_the_positive_hash_modulo_partitions() -> None:
    assert partition_for_key(b"foobar", 7) == (-790332482 & 0x7FFFFFFF) % 7
    assert partition_for_key(b"", 3) == (murmur2(b"") & 0x7FFFFFFF) % 3


def test_sticky_partition_holds_until_its_batch_is_sent_then_moves() -> None:
    sticky = StickyPartitioner(random.Random(1))
    first = sticky.partition("t", 4)
    assert {sticky.partition("t", 4) for _ in range(50)} == {first}
    sticky.on_batch_sent("t", (first + 1) % 4, 4)  # another partition's batch does not move it
    assert sticky.partition("t", 4) == first
    sticky.on_batch_sent("t", first, 4)
    assert sticky.partition("t", 4) != first
    single = StickyPartitioner()
    single.on_batch_sent("s", single.partition("s", 1), 1)
    assert single.partition("s", 1) == 0
