"""Committed offsets as Apache Kafka's clients write and read them on a broker's KAFKA listener.

Real clock: the kernel moves the bytes. Nothing sleeps; the timeout is a safety net.
"""

from __future__ import annotations

import pytest
import trio

from kafkalite.cluster import Cluster
from kafkalite.client import Admin, Consumer
from kafkalite.common.types import TopicPartition
from kafkalite.network.codec import FrameDecoder
from kafkalite.network.kafka.apis import APIS
from kafkalite.network.kafka.protocol import Message, OffsetCommitRequest, entry

SAFETY_TIMEOUT = 20
TOPIC = "orders"
GROUP = "wire-offsets"


async def call(port: int, api_key: int, version: int, **fields: object) -> Message:
    """One request on a fresh connection to the broker at `port`, and its response past the response header (the
    correlation id, and for a flexible version an empty set of tagged fields)."""
    request = APIS[api_key].request(version=version, **fields)
    request.with_header(correlation_id=7, client_id="wire-offsets")
    decoder = FrameDecoder()
    async with await trio.open_tcp_stream("127.0.0.1", port) as stream:
        await stream.send_all(bytes(request.encode(header=True, framed=True)))
        while (answer := decoder.next_frame()) is None:
            chunk = await stream.receive_some(65536)
            assert chunk, "the broker closed the connection without answering"
            decoder.feed(chunk)
    header = 5 if APIS[api_key].request.flexible_version_q(version) else 4
    return APIS[api_key].response.decode(answer[header:], version=version)


def kafka_port(cluster: Cluster, broker_id: int) -> int:
    return next(ep.port for ep in cluster.broker(broker_id).endpoints if ep.listener == "KAFKA")


async def test_a_negative_committed_offset_is_stored_unchecked_and_reads_back_as_no_offset() -> None:
    """Kafka's broker stores whatever offset a commit carries (its consumers refuse negative ones client-side,
    KAFKA-4081), so kafka-python committing {p0: 3, p1: -1} commits both partitions, not neither: p0 reads back
    3, and p1 -1, OffsetFetch's "no committed offset", as every client reads it. kafkalite's own consumer still
    refuses to send a negative offset, as Kafka's does."""
    with trio.fail_after(SAFETY_TIMEOUT):
        async with Cluster(brokers=3, seed=3) as cluster:
            await cluster.create_topic(TOPIC, partitions=2, replication_factor=3)
            port = (await call(kafka_port(cluster, 1), 10, 2, key=GROUP, key_type=0)).port
            committed = await call(port, 8, 8, group_id=GROUP, generation_id_or_member_epoch=-1, member_id="", topics=[
                entry(OffsetCommitRequest, "OffsetCommitRequestTopic", name=TOPIC, partitions=[
                    entry(OffsetCommitRequest, "OffsetCommitRequestTopic.OffsetCommitRequestPartition",
                          partition_index=p, committed_offset=offset, committed_metadata="")
                    for p, offset in ((0, 3), (1, -1))])])
            assert [(t.name, p.partition_index, p.error_code) for t in committed.topics for p in t.partitions] == [
                (TOPIC, 0, 0), (TOPIC, 1, 0)]
            fetched = await call(port, 9, 7, group_id=GROUP, topics=None)  # every partition the group has stored
            assert fetched.error_code == 0
            assert [(t.name, p.partition_index, p.committed_offset, p.error_code)
                    for t in fetched.topics for p in t.partitions] == [(TOPIC, 0, 3, 0), (TOPIC, 1, -1, 0)]

            first, second = TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)
            async with Admin(cluster) as admin:
                assert {tp: o.committed for tp, o in (await admin.list_group_offsets(GROUP)).items()} == {first: 3}
            async with Consumer(cluster, {"group.id": GROUP}) as consumer:
                found = await consumer.committed([first, second])
                assert found[first] is not None and found[first].offset == 3 and found[second] is None
                with pytest.raises(ValueError, match="offset must not be negative, got -1"):
                    await consumer.commit({second: -1})
