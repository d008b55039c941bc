"""The native TCP listener and client connection over real sockets on 127.0.0.1.

These tests run on Trio's real clock because the kernel moves the bytes; nothing in them sleeps, and the only
timeouts are safety nets against a hang. After every kind of bad input a fresh client must still be served.
"""

from __future__ import annotations

import logging
import struct
from functools import partial

import msgpack
import pytest
import trio
import trio.testing

from kafkalite.common import errors
from kafkalite.common.errors import (
    INVALID_REQUEST, NOT_LEADER_OR_FOLLOWER, UNKNOWN_SERVER_ERROR, UNSUPPORTED_VERSION, NetworkExceptionError,
    NotLeaderOrFollowerError,
)
from kafkalite.common.records import Record, RecordBatch
from kafkalite.network import requests as r
from kafkalite.network.codec import (
    FrameDecoder, RequestHeader, decode_response, encode_request, encode_response,
)
from kafkalite.network.connection import Connection
from kafkalite.network.listener import serve_listener
from kafkalite.network.responses import api_versions_response

MAX_REQUEST_BYTES = 4096
SAFETY_TIMEOUT = 10

METADATA = r.MetadataResponse([r.MetadataBroker(1, "127.0.0.1", 9092)], "test-cluster", 1, [
    r.MetadataTopic(0, "orders", [r.MetadataPartition(0, 0, 1, 0, [1], [1])])])


class FakeBroker:
    """Answers Metadata from a fixed table and appends Produce batches at increasing offsets.

    Topic names steer failures: "boom" raises a plain exception, "not-leader" a Kafka error, "unencodable"
    answers with something msgpack cannot carry, and "slow" blocks until `release` is set so a test can act
    while a request is being handled.
    """

    def __init__(self) -> None:
        self.contexts: list[r.RequestContext] = []
        self.next_offset: dict[tuple[str, int], int] = {}
        self.release = trio.Event()
        self.slow_started = trio.Event()
        self.slow_finished = trio.Event()

    async def __call__(self, request: r.Request, context: r.RequestContext) -> r.Response:
        self.contexts.append(context)
        if isinstance(request, r.MetadataRequest):
            if request.allow_auto_topic_creation:
                raise RuntimeError("auto creation is broken")
            if request.topics == ["unencodable"]:
                return r.MetadataResponse([], object(), 1, [])  # type: ignore[arg-type]
            return METADATA
        assert isinstance(request, r.ProduceRequest)
        partitions = []
        for data in request.partitions:
            if data.topic == "boom":
                raise RuntimeError("disk on fire")
            if data.topic == "not-leader":
                raise NotLeaderOrFollowerError("broker 1 is not the leader")
            key = (data.topic, data.partition)
            base = self.next_offset.get(key, 0)
            self.next_offset[key] = base + sum(batch.record_count for batch in data.batches)
            if data.topic == "slow":  # appended, then waiting, as a broker waits for replication
                self.slow_started.set()
                await self.release.wait()
                self.slow_finished.set()
            partitions.append(r.ProducePartitionResponse(data.topic, data.partition, 0, base))
        return r.ProduceResponse(partitions)


def produce(topic: str = "orders", partition: int = 0, records: int = 1) -> r.ProduceRequest:
    batch = RecordBatch.from_records([Record(None, b"value-%d" % i) for i in range(records)])
    return r.ProduceRequest(-1, 1000, [r.ProducePartitionData(topic, partition, [batch])])


@pytest.fixture
def broker() -> FakeBroker:
    return FakeBroker()


@pytest.fixture
async def port(nursery: trio.Nursery, broker: FakeBroker) -> int:
    return await nursery.start(partial(serve_listener, broker, "127.0.0.1", 0,
                                       max_request_bytes=MAX_REQUEST_BYTES))


async def assert_serves_normally(port: int) -> None:
    with trio.fail_after(SAFETY_TIMEOUT):
        async with await Connection.open("127.0.0.1", port, client_id="probe") as connection:
            assert await connection.send(r.MetadataRequest()) == METADATA
            response = await connection.send(produce("fresh", 0, 3))
            assert response == r.ProduceResponse([r.ProducePartitionResponse("fresh", 0, 0, 0)])
            response = await connection.send(produce("fresh", 0, 1))
            assert response.partitions[0].base_offset == 3


def framed(payload: bytes) -> bytes:
    return struct.pack(">I", len(payload)) + payload


def raw_request(api_key: int, body: object, *, version: int = 0, correlation_id: int = 5) -> bytes:
    return framed(msgpack.packb([api_key, version, correlation_id, "raw", body]))


async def exchange(port: int, data: bytes) -> list[bytes]:
    """Send raw bytes, then collect response frames until the listener closes the connection."""
    frames = []
    decoder = FrameDecoder()
    with trio.fail_after(SAFETY_TIMEOUT):
        async with await trio.open_tcp_stream("127.0.0.1", port) as stream:
            await stream.send_all(data)
            await stream.send_eof()  # a half frame is only ever completed by more bytes or ended by EOF
            try:
                while chunk := await stream.receive_some():
                    decoder.feed(chunk)
                    while (frame := decoder.next_frame()) is not None:
                        frames.append(frame)
            except trio.BrokenResourceError:  # closed with our bytes unread: a reset instead of an orderly close
                pass
    return frames


async def test_a_response_stays_whole_after_later_frames_reuse_the_receive_buffer(port: int) -> None:
    """The connection reads every frame into one buffer it keeps: what a response holds must be its own, not a
    view into bytes that the next frame, smaller or larger, overwrites."""
    async with await Connection.open("127.0.0.1", port) as connection:
        first = await connection.send(r.MetadataRequest(["orders"]))
        produced = await connection.send(produce("orders", 0, 1))  # a smaller frame over the start of the buffer
        second = await connection.send(r.MetadataRequest(["orders"]))
    assert first == second == METADATA
    assert produced == r.ProduceResponse([r.ProducePartitionResponse("orders", 0, 0, 0)])


async def test_requests_are_answered_with_the_handlers_responses(port: int, broker: FakeBroker) -> None:
    async with await Connection.open("127.0.0.1", port, client_id="app-1") as connection:
        assert await connection.send(r.MetadataRequest(["orders"])) == METADATA
        first = await connection.send(produce("orders", 0, 2))
        second = await connection.send(produce("orders", 0, 1))
    assert first == r.ProduceResponse([r.ProducePartitionResponse("orders", 0, 0, 0)])
    assert second.partitions[0].base_offset == 2
    assert [context.correlation_id for context in broker.contexts] == [0, 1, 2]
    for context in broker.contexts:
        assert context.client_id == "app-1"
        assert context.listener == "NATIVE"
        assert isinstance(context.source, str) and context.source.startswith("client:127.0.0.1:")


async def test_api_versions_is_answered_by_the_listener(port: int, broker: FakeBroker) -> None:
    async with await Connection.open("127.0.0.1", port) as connection:
        assert await connection.send(r.ApiVersionsRequest("tests", "1")) == api_versions_response()
    assert broker.contexts == []


async def test_pipelined_requests_are_matched_to_their_senders(port: int) -> None:
    results: dict[int, r.ProduceResponse] = {}
    async with await Connection.open("127.0.0.1", port) as connection:

        async def send(partition: int) -> None:
            results[partition] = await connection.send(produce("orders", partition, partition + 1))

        with trio.fail_after(SAFETY_TIMEOUT):
            async with trio.open_nursery() as nursery:
                for partition in range(50):
                    nursery.start_soon(send, partition)
    assert sorted(results) == list(range(50))
    for partition, response in results.items():
        assert response == r.ProduceResponse([r.ProducePartitionResponse("orders", partition, 0, 0)])


async def test_a_cancelled_send_leaves_the_connection_usable(port: int, broker: FakeBroker) -> None:
    async with await Connection.open("127.0.0.1", port) as connection:
        async with trio.open_nursery() as nursery:
            cancel_scope = trio.CancelScope()

            async def abandoned() -> None:
                with cancel_scope:
                    await connection.send(produce("slow"))
                    pytest.fail("the send should have been cancelled")

            nursery.start_soon(abandoned)
            await broker.slow_started.wait()
            cancel_scope.cancel()
        broker.release.set()
        assert await connection.send(r.MetadataRequest()) == METADATA
        assert broker.slow_finished.is_set()
        assert (await connection.send(produce("slow"))).partitions[0].base_offset == 1


async def test_a_handler_exception_is_answered_and_the_connection_kept(port: int,
                                                                       caplog: pytest.LogCaptureFixture) -> None:
    async with await Connection.open("127.0.0.1", port) as connection:
        failed = await connection.send(produce("boom", 3))
        assert failed.partitions == [r.ProducePartitionResponse(
            "boom", 3, UNKNOWN_SERVER_ERROR.code, error_message="RuntimeError: disk on fire")]
        refused = await connection.send(produce("not-leader", 1))
        assert refused.partitions[0].error_code == NOT_LEADER_OR_FOLLOWER.code
        assert refused.partitions[0].error_message == "broker 1 is not the leader"
        assert await connection.send(r.MetadataRequest()) == METADATA
    assert any("disk on fire" in (record.exc_text or "") for record in caplog.records)


async def test_a_response_that_cannot_be_encoded_is_replaced_by_an_error(port: int) -> None:
    async with await Connection.open("127.0.0.1", port) as connection:
        response = await connection.send(r.MetadataRequest(["unencodable"]))
        assert response.topics == [r.MetadataTopic(UNKNOWN_SERVER_ERROR.code, "unencodable",
                                                   error_message="the response could not be encoded")]
        assert await connection.send(r.MetadataRequest()) == METADATA


async def test_a_handler_failure_its_response_cannot_carry_closes_the_connection(port: int) -> None:
    async with await Connection.open("127.0.0.1", port) as connection:
        with pytest.raises(NetworkExceptionError, match="closed the connection"):
            await connection.send(r.MetadataRequest(topics=None, allow_auto_topic_creation=True))
        with pytest.raises(NetworkExceptionError):
            await connection.send(r.MetadataRequest())
    await assert_serves_normally(port)


UNANSWERED = [
    pytest.param(struct.pack(">I", MAX_REQUEST_BYTES + 1) + b"\x00" * 16, id="oversized-frame"),
    pytest.param(framed(b"\xc1 not msgpack at all"), id="garbage"),
    pytest.param(framed(msgpack.packb({"api_key": 3})), id="not-a-header"),
    pytest.param(framed(b""), id="empty-frame"),
    pytest.param(raw_request(99, []), id="unknown-api-key"),
    pytest.param(raw_request(r.ApiKey.PRODUCE, [-1, 1000, []], version=7), id="unsupported-version-no-error-code"),
    pytest.param(raw_request(r.ApiKey.PRODUCE, [-1, 1000]), id="missing-field-per-partition-response"),
    pytest.param(raw_request(r.ApiKey.METADATA, ["orders"]), id="mistyped-field-per-topic-response"),
    pytest.param(framed(b"\x00" * 3)[:-1], id="half-a-frame-then-disconnect"),
    pytest.param(struct.pack(">I", 100)[:2], id="half-a-length-then-disconnect"),
]


@pytest.mark.parametrize("data", UNANSWERED)
async def test_bad_input_that_cannot_be_answered_closes_only_that_connection(port: int, broker: FakeBroker,
                                                                             data: bytes) -> None:
    async with await Connection.open("127.0.0.1", port) as bystander:
        assert await exchange(port, data) == []
        assert await bystander.send(r.MetadataRequest()) == METADATA
    assert len(broker.contexts) == 1
    await assert_serves_normally(port)


@pytest.mark.parametrize(("data", "code"), [
    pytest.param(raw_request(r.ApiKey.FETCH, [-1, 0, 1, []], version=1), UNSUPPORTED_VERSION.code,
                 id="unsupported-version"),
    pytest.param(raw_request(r.ApiKey.FETCH, [-1, 0]), INVALID_REQUEST.code, id="missing-field"),
    pytest.param(raw_request(r.ApiKey.FETCH, [-1, 0, "1", []]), INVALID_REQUEST.code, id="mistyped-field"),
    pytest.param(raw_request(r.ApiKey.CONTROLLED_SHUTDOWN, [1, True]), INVALID_REQUEST.code, id="bool-for-int"),
])
async def test_bad_input_is_answered_with_kafkas_error_code_then_closed(
        port: int, broker: FakeBroker, data: bytes, code: int, caplog: pytest.LogCaptureFixture) -> None:
    frames = await exchange(port, data + raw_request(r.ApiKey.METADATA, [], correlation_id=6))
    assert len(frames) == 1  # the request after the bad one is never read
    correlation_id, response = decode_response(frames[0], r.RESPONSE_TYPES[_api_key_of(data)])
    assert correlation_id == 5
    assert response.error_code == code
    assert broker.contexts == []
    assert [record.levelno for record in caplog.records if "closing connection" in record.message] == [
        logging.WARNING]
    await assert_serves_normally(port)


def _api_key_of(data: bytes) -> r.ApiKey:
    return r.ApiKey(msgpack.unpackb(data[4:])[0])


async def test_the_error_names_the_field_that_broke(port: int) -> None:
    frames = await exchange(port, raw_request(r.ApiKey.CONTROLLED_SHUTDOWN, [1, "epoch"]))
    _, response = decode_response(frames[0], r.ControlledShutdownResponse)
    assert response.error_message == "ControlledShutdownRequest.broker_epoch: expected int, got str"


async def test_an_unsupported_api_versions_version_is_answered_and_the_connection_kept(port: int) -> None:
    data = raw_request(r.ApiKey.API_VERSIONS, ["a body from the future"], version=9)
    with trio.fail_after(SAFETY_TIMEOUT):
        async with await trio.open_tcp_stream("127.0.0.1", port) as stream:
            await stream.send_all(data)
            await stream.send_all(encode_request(RequestHeader(r.ApiKey.METADATA, 0, 6, "raw"), r.MetadataRequest()))
            decoder = FrameDecoder()
            frames: list[bytes] = []
            while len(frames) < 2:
                decoder.feed(await stream.receive_some())
                while (frame := decoder.next_frame()) is not None:
                    frames.append(frame)
    assert decode_response(frames[0], r.ApiVersionsResponse) == (5, api_versions_response(UNSUPPORTED_VERSION.code))
    assert decode_response(frames[1], r.MetadataResponse) == (6, METADATA)


async def test_a_client_leaving_mid_request_abandons_its_wait_but_not_what_was_done(
        port: int, broker: FakeBroker, caplog: pytest.LogCaptureFixture) -> None:
    """As with the in-process transport: the append stays, the wait for replication is not awaited, and no task
    is left waiting for a client that is gone (a hostile one could otherwise park a task per connection)."""
    with trio.fail_after(SAFETY_TIMEOUT):
        async with await trio.open_tcp_stream("127.0.0.1", port) as stream:
            await stream.send_all(encode_request(RequestHeader(r.ApiKey.PRODUCE, 0, 1, "leaver"), produce("slow")))
            await broker.slow_started.wait()
        await assert_serves_normally(port)
        broker.release.set()
        await trio.testing.wait_all_tasks_blocked()  # a handler still waiting would run to its end now
    assert broker.next_offset[("slow", 0)] == 1
    assert not broker.slow_finished.is_set()
    assert [record for record in caplog.records if record.levelno >= logging.WARNING] == []


async def test_a_connection_breaks_when_the_listener_goes_away(nursery: trio.Nursery, broker: FakeBroker) -> None:
    scope = trio.CancelScope()

    async def listener(task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED) -> None:
        with scope:
            await serve_listener(broker, "127.0.0.1", 0, task_status=task_status)

    port = await nursery.start(listener)
    connection = await Connection.open("127.0.0.1", port)
    assert await connection.send(r.MetadataRequest()) == METADATA
    scope.cancel()
    with trio.fail_after(SAFETY_TIMEOUT), pytest.raises(NetworkExceptionError):
        await connection.send(r.MetadataRequest())
    assert connection.closed
    await connection.aclose()
    with pytest.raises(NetworkExceptionError, match="cannot connect"):
        await Connection.open("127.0.0.1", port)


async def test_sends_on_a_closed_connection_fail_fast(port: int) -> None:
    connection = await Connection.open("127.0.0.1", port)
    await connection.aclose()
    with pytest.raises(NetworkExceptionError, match="was closed"):
        await connection.send(r.MetadataRequest())


METADATA_FRAME = encode_response(0, METADATA)  # the answer to a connection's first request


@pytest.mark.parametrize(("pieces", "max_response_bytes", "failure"), [
    pytest.param([METADATA_FRAME[i:i + 1] for i in range(len(METADATA_FRAME))],
                 None, None, id="a-byte-at-a-time"),
    pytest.param([METADATA_FRAME[:2]], None, "closed the connection", id="half-a-length-then-gone"),
    pytest.param([METADATA_FRAME[:-1]], None, "closed the connection", id="half-a-frame-then-gone"),
    pytest.param([METADATA_FRAME], len(METADATA_FRAME) - 5, "exceeds the limit", id="a-frame-over-the-limit"),
])
async def test_a_response_is_read_whole_however_it_arrives_or_breaks_the_connection(
        nursery: trio.Nursery, pieces: list[bytes], max_response_bytes: int | None, failure: str | None) -> None:
    async def broker(stream: trio.SocketStream) -> None:
        async with stream:
            await stream.receive_some(65536)  # the request
            for piece in pieces:
                await stream.send_all(piece)

    listeners = await nursery.start(partial(trio.serve_tcp, broker, 0, host="127.0.0.1"))
    port = listeners[0].socket.getsockname()[1]
    async with await Connection.open("127.0.0.1", port, max_response_bytes=max_response_bytes) as connection:
        with trio.fail_after(SAFETY_TIMEOUT):
            if failure is None:
                assert await connection.send(r.MetadataRequest()) == METADATA
                return
            with pytest.raises(NetworkExceptionError, match=failure):
                await connection.send(r.MetadataRequest())
        assert connection.closed


async def test_a_send_cancelled_mid_response_leaves_the_stream_in_step(nursery: trio.Nursery) -> None:
    first, second = METADATA_FRAME, encode_response(1, METADATA)
    half_sent = trio.Event()

    async def broker(stream: trio.SocketStream) -> None:
        async with stream:
            await stream.receive_some(65536)  # the first request
            await stream.send_all(first[:len(first) // 2])
            half_sent.set()
            await stream.receive_some(65536)  # the second request
            await stream.send_all(first[len(first) // 2:] + second)
            await stream.receive_some(65536)  # until the client leaves

    listeners = await nursery.start(partial(trio.serve_tcp, broker, 0, host="127.0.0.1"))
    async with await Connection.open("127.0.0.1", listeners[0].socket.getsockname()[1]) as connection:
        with trio.fail_after(SAFETY_TIMEOUT):
            async with trio.open_nursery() as waiting:
                scope = trio.CancelScope()

                async def abandoned() -> None:
                    with scope:
                        await connection.send(r.MetadataRequest())

                waiting.start_soon(abandoned)
                await half_sent.wait()
                await trio.testing.wait_all_tasks_blocked()  # the client has read the half frame
                scope.cancel()
            assert await connection.send(r.MetadataRequest()) == METADATA
        assert not connection.closed


@pytest.mark.parametrize("request_", [
    r.StopReplicaRequest(7, 1000, -1, [r.StopReplicaPartition("orders", 0, True)]),
    r.StopReplicaRequest(7, (1 << 63) - 1, 5, []),
    r.UpdateMetadataRequest(7, 1000, -1, [], []),
    r.LeaderAndIsrRequest(7, 1000, -1, [], []),
    r.ControlledShutdownRequest(1, 5),
], ids=lambda request: type(request).__name__)
async def test_the_clusters_own_requests_are_refused_on_a_client_listener(
        port: int, broker: FakeBroker, request_: r.Request) -> None:
    """They travel the in-process transport; through a listener a forged one could fence the real controller
    (an epoch of 2^63-1), empty the metadata or sideline a live broker. The handler never sees them."""
    with trio.fail_after(SAFETY_TIMEOUT):
        async with await Connection.open("127.0.0.1", port, client_id="forger") as connection:
            response = await connection.send(request_)
    assert response.error_code == errors.CLUSTER_AUTHORIZATION_FAILED.code
    assert broker.contexts == []
    await assert_serves_normally(port)


async def test_a_connection_that_goes_silent_mid_frame_is_closed_after_the_idle_time(
        nursery: trio.Nursery, broker: FakeBroker) -> None:
    port = await nursery.start(partial(serve_listener, broker, "127.0.0.1", 0, max_idle_ms=200))
    with trio.fail_after(SAFETY_TIMEOUT):
        async with await trio.open_tcp_stream("127.0.0.1", port) as stream:
            await stream.send_all(raw_request(int(r.ApiKey.METADATA), [None, False])[:7])  # half a frame
            started = trio.current_time()
            try:
                assert await stream.receive_some() == b""  # closed by the listener, not by us
            except trio.BrokenResourceError:
                pass
            assert trio.current_time() - started >= 0.2
        async with await Connection.open("127.0.0.1", port) as connection:  # a busy one is served
            for _ in range(3):
                assert await connection.send(r.MetadataRequest()) == METADATA
    await assert_serves_normally(port)
