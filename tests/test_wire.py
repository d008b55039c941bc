"""Bad input on a real broker's TCP listener: answered or cut off, and the broker keeps serving with data intact.

These run on the real clock: the kernel moves the bytes. Nothing sleeps; timeouts are safety nets.
"""

from __future__ import annotations

import struct

import msgpack
import pytest
import trio

from kafkalite.client import Consumer, Producer, TopicPartition
from kafkalite.cluster import Cluster
from kafkalite.common import errors
from kafkalite.network.codec import FrameDecoder, decode_response
from kafkalite.network.requests import FetchResponse

SAFETY_TIMEOUT = 20
ANSWERED = {"unsupported version": errors.UNSUPPORTED_VERSION, "missing fields": errors.INVALID_REQUEST,
            "mistyped fields": errors.INVALID_REQUEST}
TP = TopicPartition("orders", 0)


def frame(payload: object) -> bytes:
    body = msgpack.packb(payload, use_bin_type=True)
    return struct.pack(">I", len(body)) + body


BAD_INPUTS = {
    "oversized frame": struct.pack(">I", 200 * 1024 * 1024),
    "not msgpack": struct.pack(">I", 6) + b"\xc1\xc1\xc1\xc1\xc1\xc1",
    "header of the wrong shape": frame({"api_key": 0}),
    "unknown api key": frame([9999, 0, 1, "x", []]),
    "unsupported version": frame([1, 7, 2, "x", [-1, 0, 0, []]]),
    "missing fields": frame([1, 0, 3, "x", [-1]]),
    "mistyped fields": frame([1, 0, 4, "x", ["me", 0, 0, []]]),
    "half a frame, then gone": struct.pack(">I", 1000) + b"\x00" * 10,
}


async def bootstrap_of(cluster: Cluster) -> str:
    metadata = await cluster.metadata(cluster.live_broker_ids[0])
    return ",".join(f"{b.host}:{b.port}" for b in metadata.brokers)


async def send_raw(port: int, data: bytes) -> list[bytes]:
    """Send bytes, then read frames until the broker closes the connection (or there is nothing more)."""
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    decoder = FrameDecoder()
    frames = []
    async with stream:
        await stream.send_all(data)
        if data.startswith(struct.pack(">I", 1000)):
            return frames  # the client leaves mid-request
        while chunk := await stream.receive_some(65536):
            decoder.feed(chunk)
            while (found := decoder.next_frame()) is not None:
                frames.append(found)
    return frames


@pytest.mark.parametrize("kind", sorted(BAD_INPUTS))
async def test_bad_input_leaves_the_broker_serving_and_data_intact(kind: str) -> None:
    with trio.fail_after(SAFETY_TIMEOUT):
        async with Cluster(brokers=3, seed=1) as cluster:
            await cluster.create_topic("orders", partitions=1, replication_factor=3)
            bootstrap = await bootstrap_of(cluster)
            async with Producer(bootstrap, acks="all") as producer:
                acked = [await (await producer.send("orders", b"before-%d" % i, partition=0)) for i in range(5)]
            leader = cluster.leader_for("orders", 0)
            port = next(ep.port for ep in cluster.broker(leader).endpoints)

            answers = await send_raw(port, BAD_INPUTS[kind])
            expected = ANSWERED.get(kind)
            if expected is None:
                assert answers == []  # nothing to answer: the connection is closed
            else:
                (answer,) = answers  # answered once, then closed
                _, response = decode_response(answer, FetchResponse)
                assert response.error_code == expected.code

            async with Producer(bootstrap, acks="all") as producer:
                after = await (await producer.send("orders", b"after", partition=0))
            assert [m.offset for m in acked] == [0, 1, 2, 3, 4] and after.offset == 5
            async with Consumer(bootstrap, auto_offset_reset="earliest") as consumer:
                consumer.assign([TP])
                records = []
                while len(records) < 6:
                    records += await consumer.poll(1)
            assert [r.value for r in records] == [b"before-%d" % i for i in range(5)] + [b"after"]
