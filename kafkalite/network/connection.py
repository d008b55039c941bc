"""The client end of a native TCP connection to one broker.

Requests are pipelined: any number of tasks may `send` on one connection at once, each request goes out as
soon as the previous one is written, and responses, which a broker returns in request order, are matched to
the oldest request in flight and checked against its correlation id (a mismatch means the stream is out of
step and nothing after it can be trusted). There is no background reader task, so a connection needs no
nursery: whichever waiting task holds the receive lock reads frames and hands each to its owner.

Any failure of the byte stream breaks the connection for good: every waiting and later `send` raises
NETWORK_EXCEPTION, the code Kafka's clients retry on after reconnecting.

A response is read straight into a buffer (its length prefix first), which the decoder then reads in place: a
4 MiB fetch response is copied once out of the kernel, not appended to a growing buffer and sliced out of it
again. The buffer is the connection's, kept from one response to the next: decoding copies everything it keeps
out of the frame (msgpack makes `bytes` of every payload), so the next frame may overwrite it, and a stream of
fetch responses does not pay for a fresh 4 MiB allocation, its zeroing and its page faults each time.
"""

from __future__ import annotations

from collections import deque
from typing import Any

import trio

from kafkalite.common.errors import NetworkExceptionError
from kafkalite.network.codec import (
    FRAME_LENGTH, FrameTooLargeError, MalformedRequestError, RequestHeader, decode_response, encode_request,
)
from kafkalite.network.requests import RESPONSE_TYPES, SUPPORTED_VERSIONS, Request


_KEPT_BUFFER_BYTES = 16 << 20
"""The largest receive buffer a connection keeps for its next frame; a larger frame gets a buffer of its own."""


class _InFlight:
    __slots__ = ("correlation_id", "response_type", "response", "error")

    def __init__(self, correlation_id: int, response_type: type) -> None:
        self.correlation_id = correlation_id
        self.response_type = response_type
        self.response: Any = None
        self.error: NetworkExceptionError | None = None

    @property
    def done(self) -> bool:
        return self.response is not None or self.error is not None


class Connection:
    """One TCP connection speaking the native protocol; safe to share between tasks."""

    def __init__(self, stream: trio.SocketStream, client_id: str = "", *,
                 max_response_bytes: int | None = None) -> None:
        self.client_id = client_id
        self._stream = stream
        self._peer = "broker"
        self._max_response_bytes = max_response_bytes
        self._length = bytearray(FRAME_LENGTH.size)
        self._buffer = bytearray()  # kept for the next frame, up to _KEPT_BUFFER_BYTES
        self._frame: memoryview | None = None  # the frame being read (in `_buffer`, or its own), once its size is known
        self._received = 0  # bytes read of the length prefix, then of the frame: a cancelled read resumes here
        self._send_lock = trio.Lock()
        self._receive_lock = trio.Lock()
        self._in_flight: deque[_InFlight] = deque()
        self._next_correlation_id = 0
        self._broken: str | None = None

    @classmethod
    async def open(cls, host: str, port: int, client_id: str = "", *,
                   max_response_bytes: int | None = None) -> Connection:
        """Connect to a broker's native listener; NETWORK_EXCEPTION if nobody answers there."""
        try:
            stream = await trio.open_tcp_stream(host, port)
        except OSError as exc:
            raise NetworkExceptionError(f"cannot connect to {host}:{port}: {exc}") from exc
        connection = cls(stream, client_id, max_response_bytes=max_response_bytes)
        connection._peer = f"{host}:{port}"
        return connection

    @property
    def closed(self) -> bool:
        return self._broken is not None

    async def send(self, request: Request, sent: trio.Event | None = None) -> Any:
        """Send `request` and return its response (the type `RESPONSE_TYPES` names for its API key); `sent` is set
        once the request is written.

        Cancelling a send abandons the wait, not the request: the broker may still act on it, and its
        response is read and dropped when it arrives. Cancelling while the request is being written breaks the
        connection, since a half-written frame leaves the stream out of step.
        """
        self._raise_if_broken()
        api_key = request.api_key
        correlation_id = self._next_correlation_id
        self._next_correlation_id = (correlation_id + 1) & 0x7FFFFFFF
        frame = encode_request(RequestHeader(api_key, SUPPORTED_VERSIONS[api_key][1], correlation_id,
                                             self.client_id), request)
        entry = _InFlight(correlation_id, RESPONSE_TYPES[api_key])
        async with self._send_lock:
            self._raise_if_broken()
            self._in_flight.append(entry)
            try:
                await self._stream.send_all(frame)
            except BaseException as exc:
                self._break(f"sending to {self._peer} failed: {exc!r}")
                if isinstance(exc, (trio.BrokenResourceError, trio.ClosedResourceError)):
                    raise NetworkExceptionError(self._broken) from exc
                raise
        if sent is not None:
            sent.set()
        async with self._receive_lock:
            while not entry.done:
                await self._receive_one()
        if entry.error is not None:
            raise entry.error
        return entry.response

    async def aclose(self) -> None:
        self._break(f"connection to {self._peer} was closed")
        await self._stream.aclose()

    async def __aenter__(self) -> Connection:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def _receive_one(self) -> None:
        """Read one response and complete its request; on any stream failure, break the connection."""
        try:
            frame = await self._receive_frame()
            if not self._in_flight:
                raise NetworkExceptionError(f"{self._peer} sent a response to no request")
            entry = self._in_flight.popleft()
            with frame:  # decoding copies what it keeps: the buffer is free for the next frame after this
                correlation_id, response = decode_response(frame, entry.response_type)
            if correlation_id != entry.correlation_id:
                raise NetworkExceptionError(f"{self._peer} answered correlation id {correlation_id}, "
                                            f"expected {entry.correlation_id}")
            entry.response = response
        except (NetworkExceptionError, FrameTooLargeError, MalformedRequestError, trio.BrokenResourceError,
                trio.ClosedResourceError, OSError) as exc:
            self._break(exc.message if isinstance(exc, NetworkExceptionError) else
                        f"connection to {self._peer} failed: {exc}")

    async def _receive_frame(self) -> memoryview:
        """The next frame's payload, a view into the receive buffer that is valid until the next frame is read.
        A read cancelled midway (its request abandoned) keeps what it read, and the next read goes on from there,
        so the stream stays in step."""
        if self._frame is None:
            with memoryview(self._length) as prefix:
                await self._fill(prefix)
            (length,) = FRAME_LENGTH.unpack(self._length)
            if self._max_response_bytes is not None and length > self._max_response_bytes:
                raise FrameTooLargeError(
                    f"frame of {length} bytes exceeds the limit of {self._max_response_bytes} bytes")
            if length > len(self._buffer):
                buffer = bytearray(length)
                if length <= _KEPT_BUFFER_BYTES:
                    self._buffer = buffer
                self._frame = memoryview(buffer)
            else:
                self._frame = memoryview(self._buffer)[:length]
        frame = self._frame
        await self._fill(frame)
        self._frame = None
        return frame

    async def _fill(self, view: memoryview) -> None:
        """Fill `view` from the socket from `_received` on; NETWORK_EXCEPTION if the broker closes first."""
        socket = self._stream.socket
        while self._received < len(view):
            with view[self._received:] as rest:
                received = await socket.recv_into(rest)
            if not received:
                raise NetworkExceptionError(f"{self._peer} closed the connection")
            self._received += received
        self._received = 0

    def _break(self, reason: str) -> None:
        if self._broken is None:
            self._broken = reason
        for entry in self._in_flight:
            entry.error = NetworkExceptionError(self._broken)
        self._in_flight.clear()

    def _raise_if_broken(self) -> None:
        if self._broken is not None:
            raise NetworkExceptionError(self._broken)
