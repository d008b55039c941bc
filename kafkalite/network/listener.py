"""A broker's native TCP listener: frames in, handler calls, frames out.

Requests on one connection are handled one at a time and answered in order, as Kafka mutes a channel while
its request is in flight: clients rely on responses arriving in request order, and a slow request (a
long-polling fetch) holds back only its own connection.

Bad input never takes the listener down and never reaches a handler: the peer gets Kafka's error code where
the request's response type can carry one, the connection is closed when the byte stream or the peer can no
longer be trusted, and each incident is one log line. Everyone else keeps being served.
"""

from __future__ import annotations

import logging

import trio

from kafkalite.common.errors import UNKNOWN_SERVER_ERROR, KafkaError
from kafkalite.network.codec import (
    FrameDecoder, FrameTooLargeError, MalformedRequestError, RequestHeader, UnsupportedRequestVersionError,
    decode_request, encode_response,
)
from kafkalite.network.requests import REQUEST_TYPES, ApiKey, Request, RequestContext, Response
from kafkalite.network.responses import api_versions_response, error_response
from kafkalite.network.transport import Handler

log = logging.getLogger(__name__)

DEFAULT_MAX_REQUEST_BYTES = 100 * 1024 * 1024  # Kafka's socket.request.max.bytes
_RECEIVE_BYTES = 256 * 1024


async def serve_listener(handler: Handler, host: str, port: int, *,
                         max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES, listener_name: str = "NATIVE",
                         task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED) -> None:
    """Serve `handler` on host:port until cancelled; `task_status.started` reports the bound port.

    Port 0 binds an ephemeral port, so tests and embedded clusters never collide; `host` should be a literal
    address, since a name resolving to several addresses would bind each on a different ephemeral port.
    """
    listeners = await trio.open_tcp_listeners(port, host=host)
    bound_port: int = listeners[0].socket.getsockname()[1]
    log.info("%s listener on %s:%d", listener_name, host, bound_port)
    task_status.started(bound_port)
    connection = _ConnectionServer(handler, max_request_bytes, listener_name)
    await trio.serve_listeners(connection.serve, listeners)


class _ConnectionServer:
    def __init__(self, handler: Handler, max_request_bytes: int, listener_name: str) -> None:
        self._handler = handler
        self._max_request_bytes = max_request_bytes
        self._listener_name = listener_name

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
                data = await stream.receive_some(_RECEIVE_BYTES)
                if not data:
                    return
                decoder.feed(data)
                continue
            if not await self._serve_frame(stream, peer, frame):
                return

    async def _serve_frame(self, stream: trio.SocketStream, peer: str, frame: bytes) -> bool:
        """Answer one frame; False when the connection must be closed."""
        try:
            header, request = decode_request(frame)
        except (MalformedRequestError, UnsupportedRequestVersionError) as exc:
            return await self._reject(stream, peer, exc)
        context = RequestContext(source=f"client:{peer}", listener=self._listener_name,
                                 client_id=header.client_id, correlation_id=header.correlation_id)
        response = await self._handle(request, context)
        if response is None:
            log.warning("%s listener: closing connection from %s: %s failed and its response type cannot "
                        "carry the error", self._listener_name, peer, type(request).__name__)
            return False
        try:
            data = encode_response(header.correlation_id, response)
        except Exception:
            log.exception("%s listener: cannot encode %s for %s", self._listener_name, type(response).__name__,
                          peer)
            fallback = error_response(request, UNKNOWN_SERVER_ERROR.code, "the response could not be encoded")
            if fallback is None:
                return False
            data = encode_response(header.correlation_id, fallback)
        await stream.send_all(data)
        return True

    async def _handle(self, request: Request, context: RequestContext) -> Response | None:
        if request.api_key is ApiKey.API_VERSIONS:
            return api_versions_response()
        try:
            return await self._handler(request, context)
        except KafkaError as exc:
            log.warning("%s listener: %s from %s failed: %s", self._listener_name, type(request).__name__,
                        context.source, exc)
            return error_response(request, exc.code, exc.message)
        except Exception as exc:
            log.exception("%s listener: %s from %s failed", self._listener_name, type(request).__name__,
                          context.source)
            return error_response(request, UNKNOWN_SERVER_ERROR.code, f"{type(exc).__name__}: {exc}")

    async def _reject(self, stream: trio.SocketStream, peer: str,
                      exc: MalformedRequestError | UnsupportedRequestVersionError) -> bool:
        """Answer a request that failed to decode if its type allows; False to close the connection.

        The connection is closed in every case except an ApiVersions request at a version we do not speak:
        answering that with our version table and staying open is how Kafka clients negotiate a version.
        """
        header: RequestHeader | None = exc.header
        if header is not None and header.api_key in REQUEST_TYPES:
            request_type: type[Request] | None = REQUEST_TYPES[ApiKey(header.api_key)]
            response = error_response(request_type, exc.code, exc.message)
            if response is not None:
                await stream.send_all(encode_response(header.correlation_id, response))
        else:
            request_type = None
        negotiating = isinstance(exc, UnsupportedRequestVersionError) and request_type is not None \
            and request_type.api_key is ApiKey.API_VERSIONS
        if not negotiating:
            log.warning("%s listener: closing connection from %s: %s", self._listener_name, peer, exc)
        return negotiating
