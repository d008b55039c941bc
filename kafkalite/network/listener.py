"""A broker's TCP listeners: frames in, handler calls, frames out.

Both wire protocols a broker speaks frame requests the same way (a 4-byte big-endian length, then the
payload), so one connection loop serves both and a `WireProtocol` turns each frame into its answer: the native
msgpack protocol here, Apache Kafka's in `kafkalite.network.kafka`. Their requests begin with different bytes, so
each port answers both (`ProtocolRouter`).

Requests on one connection are handled one at a time and answered in order, as Kafka mutes a channel while
its request is in flight: clients rely on responses arriving in request order, and a slow request (a
long-polling fetch) holds back only its own connection.

The cluster's own requests (LeaderAndIsr, UpdateMetadata, StopReplica, ControlledShutdown) travel the in-process
transport only; here they are refused with CLUSTER_AUTHORIZATION_FAILED and change nothing. Bad input never
takes the listener down and never reaches a handler: the peer gets Kafka's error code where
the request's response type can carry one, the connection is closed when the byte stream or the peer can no
longer be trusted, and each incident is one log line. Everyone else keeps being served.
"""

from __future__ import annotations

import logging
import math
from typing import NamedTuple, Protocol

import trio

from kafkalite.common.errors import CLUSTER_AUTHORIZATION_FAILED, UNKNOWN_SERVER_ERROR, KafkaError
from kafkalite.network.codec import (
    FrameDecoder, FrameTooLargeError, MalformedRequestError, RequestHeader, UnsupportedRequestVersionError,
    decode_request, encode_response,
)
from kafkalite.network.requests import CLUSTER_ACTIONS, REQUEST_TYPES, ApiKey, Request, RequestContext, Response
from kafkalite.network.responses import api_versions_response, error_response
from kafkalite.network.transport import ConnectionDropped, Handler

log = logging.getLogger(__name__)

DEFAULT_MAX_REQUEST_BYTES = 100 * 1024 * 1024  # Kafka's socket.request.max.bytes
DEFAULT_MAX_IDLE_MS = 600_000  # Kafka's connections.max.idle.ms
_RECEIVE_BYTES = 256 * 1024


class Answer(NamedTuple):
    """What a connection does with one frame: send `data` (None: nothing), then close unless `keep_open`."""

    data: bytes | bytearray | None
    keep_open: bool


class WireProtocol(Protocol):
    """One listener's protocol: the answer to each request frame, given the peer's `host:port`.

    Called one frame at a time per connection, in order. It must not raise for anything a peer can send: bad
    input is an `Answer` that closes the connection.
    """

    async def answer(self, frame: bytes, peer: str) -> Answer: ...


async def call_handler(handler: Handler, request: Request, context: RequestContext) -> Response | None:
    """The handler's response; a failure becomes the request's own response type carrying the error (None if
    that type cannot carry it), so a bug costs one request, never the listener. `ConnectionDropped` passes."""
    try:
        return await handler(request, context)
    except ConnectionDropped:
        raise
    except KafkaError as exc:
        log.warning("%s listener: %s from %s failed: %s", context.listener, type(request).__name__,
                    context.source, exc)
        return error_response(request, exc.code, exc.message)
    except Exception as exc:
        log.exception("%s listener: %s from %s failed", context.listener, type(request).__name__, context.source)
        return error_response(request, UNKNOWN_SERVER_ERROR.code, f"{type(exc).__name__}: {exc}")


async def serve_listener(handler: Handler, host: str, port: int, *,
                         max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES, listener_name: str = "NATIVE",
                         max_idle_ms: int = DEFAULT_MAX_IDLE_MS, wire: WireProtocol | None = None,
                         task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED) -> None:
    """Serve `handler` on host:port until cancelled; `task_status.started` reports the bound port.

    `wire` is the protocol spoken there; by default the native one, calling `handler` directly.

    Port 0 binds an ephemeral port, so tests and embedded clusters never collide; `host` should be a literal
    address, since a name resolving to several addresses would bind each on a different ephemeral port. A
    connection that sends nothing for `max_idle_ms` (Kafka's connections.max.idle.ms; -1: never) is closed,
    half a frame included, so a peer that went silent holds no task and no buffer forever.
    """
    listeners = await trio.open_tcp_listeners(port, host=host)
    bound_port: int = listeners[0].socket.getsockname()[1]
    log.info("%s listener on %s:%d", listener_name, host, bound_port)
    task_status.started(bound_port)
    connection = _ConnectionServer(wire or NativeWire(handler, listener_name), max_request_bytes, listener_name,
                                   math.inf if max_idle_ms < 0 else max_idle_ms / 1000)
    await trio.serve_listeners(connection.serve, listeners)


class _ConnectionServer:
    def __init__(self, wire: WireProtocol, max_request_bytes: int, listener_name: str, max_idle_s: float) -> None:
        self._wire = wire
        self._max_request_bytes = max_request_bytes
        self._listener_name = listener_name
        self._max_idle_s = max_idle_s

    async def serve(self, stream: trio.SocketStream) -> None:
        try:
            host, port = stream.socket.getpeername()[:2]
            peer = f"{host}:{port}"
        except OSError:  # already reset by the peer
            await stream.aclose()
            return
        async with stream:
            try:
                await self._serve_requests(stream, peer)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass  # the client went away: nobody is left to answer
            except Exception:  # a bug here must cost one connection, never the listener
                log.exception("%s listener: closing connection from %s after an unexpected error",
                              self._listener_name, peer)

    async def _serve_requests(self, stream: trio.SocketStream, peer: str) -> None:
        decoder = FrameDecoder(self._max_request_bytes)
        while True:
            try:
                frame = decoder.next_frame()
            except FrameTooLargeError as exc:
                log.warning("%s listener: closing connection from %s: %s", self._listener_name, peer, exc)
                return
            if frame is None:
                data = b""
                with trio.move_on_after(self._max_idle_s) as idle:
                    data = await stream.receive_some(_RECEIVE_BYTES)
                if idle.cancelled_caught:
                    log.info("%s listener: closing connection from %s, idle for %g s (connections.max.idle.ms)%s",
                             self._listener_name, peer, self._max_idle_s,
                             " with half a frame received" if decoder.buffered_bytes else "")
                    return
                if not data:
                    return
                decoder.feed(data)
                continue
            if not await self._serve_frame(stream, peer, frame, decoder):
                return

    async def _serve_frame(self, stream: trio.SocketStream, peer: str, frame: bytes, decoder: FrameDecoder) -> bool:
        """Answer one frame; False when the connection must be closed."""
        left, answer = await self._answer_while_connected(stream, decoder, frame, peer)
        if left:
            return False
        if answer.data:
            await stream.send_all(answer.data)
        return answer.keep_open

    async def _answer_while_connected(self, stream: trio.SocketStream, decoder: FrameDecoder, frame: bytes,
                                      peer: str) -> tuple[bool, Answer]:
        """(whether the peer left, the answer): a peer that closes its connection abandons its request, as a
        caller of the in-process transport does by cancelling it. What the handler did before its first wait (an
        append) stays done; what it waits for (replication, a long-polling fetch) is no longer awaited, so a
        client that leaves holds no task. Bytes the peer pipelines meanwhile are kept for the next frames, up to
        one request's worth (then TCP holds the rest back)."""
        left = False
        async with trio.open_nursery() as nursery:

            async def watch() -> None:
                nonlocal left
                while decoder.buffered_bytes <= self._max_request_bytes:
                    try:
                        data = await stream.receive_some(_RECEIVE_BYTES)
                    except trio.BrokenResourceError:
                        data = b""
                    if not data:
                        left = True
                        nursery.cancel_scope.cancel()
                        return
                    decoder.feed(data)
                await trio.sleep_forever()

            nursery.start_soon(watch)
            answer = await self._wire.answer(frame, peer)
            nursery.cancel_scope.cancel()
        return left, (Answer(None, False) if left else answer)


class ProtocolRouter:
    """A listener's `WireProtocol` that hands each frame in another of the broker's protocols to that protocol's wire.

    Each listener speaks one protocol, and their ports are easily mixed up: `kafkalite serve` prints a list of
    each, the connector's Spark option for kafkalite's own client is `kafka.bootstrap.servers`, and a Kafka
    client is naturally handed `cluster.bootstrap_servers`. Either client at the other's port had its connection
    closed at its first request, until it gave up. The two protocols' requests begin with different bytes
    (`codec.REQUEST_START`, `kafka.REQUEST_START`), so each frame is answered by the wire that speaks it, as on
    its own listener: its metadata names that listener's endpoints, and the client's next connections go there.
    A frame in a protocol the broker has no listener for is refused, saying so; any other frame goes to the
    port's own wire, which rejects what it cannot read as before.
    """

    def __init__(self, listener_name: str, own: WireProtocol, others: dict[int, tuple[str, WireProtocol | None]]
                 ) -> None:
        """`others`: by a request's first byte, the name of the listener speaking it and its wire (None: the
        broker has no such listener)."""
        self._listener_name = listener_name
        self._own = own
        self._others = others

    async def answer(self, frame: bytes, peer: str) -> Answer:
        other = self._others.get(frame[0]) if frame else None
        if other is None:
            return await self._own.answer(frame, peer)
        name, wire = other
        if wire is None:
            log.warning("%s listener: closing connection from %s: the request is in the %s listener's protocol, and "
                        "this broker has no %s listener", self._listener_name, peer, name, name)
            return Answer(None, False)
        return await wire.answer(frame, peer)


def client_host(peer: str) -> str:
    """A peer's "host:port" as Kafka shows a client's host in group descriptions: "/127.0.0.1"."""
    return "/" + peer.rpartition(":")[0].strip("[]")


class NativeWire:
    """The native protocol: msgpack frames decoded into the request dataclasses the handler serves as they are."""

    def __init__(self, handler: Handler, listener_name: str = "NATIVE") -> None:
        self._handler = handler
        self._listener_name = listener_name

    async def answer(self, frame: bytes, peer: str) -> Answer:
        try:
            header, request = decode_request(frame)
        except (MalformedRequestError, UnsupportedRequestVersionError) as exc:
            return self._reject(peer, exc)
        context = RequestContext(source=f"client:{peer}", listener=self._listener_name, client_host=client_host(peer),
                                 client_id=header.client_id, correlation_id=header.correlation_id)
        try:
            response = await self._handle(request, context)
        except ConnectionDropped as exc:
            log.info("%s listener: closing connection from %s: %s", self._listener_name, peer, exc)
            return Answer(None, False)
        if response is None:
            log.warning("%s listener: closing connection from %s: %s failed and its response type cannot "
                        "carry the error", self._listener_name, peer, type(request).__name__)
            return Answer(None, False)
        try:
            data = encode_response(header.correlation_id, response)
        except Exception:
            log.exception("%s listener: cannot encode %s for %s", self._listener_name, type(response).__name__,
                          peer)
            fallback = error_response(request, UNKNOWN_SERVER_ERROR.code, "the response could not be encoded")
            if fallback is None:
                return Answer(None, False)
            data = encode_response(header.correlation_id, fallback)
        return Answer(data, True)

    async def _handle(self, request: Request, context: RequestContext) -> Response | None:
        if request.api_key is ApiKey.API_VERSIONS:
            return api_versions_response()
        if request.api_key in CLUSTER_ACTIONS:
            log.warning("%s listener: refusing %s from %s: it is the cluster's own traffic", self._listener_name,
                        type(request).__name__, context.source)
            return error_response(request, CLUSTER_AUTHORIZATION_FAILED.code,
                                  f"{type(request).__name__} is sent only by the cluster itself, never through a "
                                  f"client listener")
        return await call_handler(self._handler, request, context)

    def _reject(self, peer: str, exc: MalformedRequestError | UnsupportedRequestVersionError) -> Answer:
        """Answer a request that failed to decode if its type allows, and close the connection.

        The connection is closed in every case except an ApiVersions request at a version we do not speak:
        answering that with our version table and staying open is how Kafka clients negotiate a version.
        """
        header: RequestHeader | None = exc.header
        data = None
        if header is not None and header.api_key in REQUEST_TYPES:
            request_type: type[Request] | None = REQUEST_TYPES[ApiKey(header.api_key)]
            response = error_response(request_type, exc.code, exc.message)
            if response is not None:
                data = encode_response(header.correlation_id, response)
        else:
            request_type = None
        negotiating = isinstance(exc, UnsupportedRequestVersionError) and request_type is not None \
            and request_type.api_key is ApiKey.API_VERSIONS
        if not negotiating:
            log.warning("%s listener: closing connection from %s: %s", self._listener_name, peer, exc)
        return Answer(data, negotiating)
