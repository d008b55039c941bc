"""The native wire format: length-prefixed msgpack frames carrying the request and response dataclasses.

Sans-IO, like h11: these functions turn objects into bytes and bytes into objects and never touch a socket,
so the TCP listener, the client connection and the tests share one implementation and the format can be
tested without the network.

A frame is a 4-byte big-endian length followed by a msgpack payload. A request payload is
`[api_key, api_version, correlation_id, client_id, body]`, a response payload `[correlation_id, body]`. A body
is its dataclass as the list of its field values in field order, recursively; a record batch travels as its
`to_wire()` list, so its records are never re-encoded.

Every frame comes from an untrusted peer, so decoding checks each value against the field's annotation and
names the offending field (`ProduceRequest.partitions[0].topic: expected str, got int`) instead of letting a
bad value surface later as an `AttributeError` deep inside a broker. The checks are compiled once per class
into closures, so decoding a message does no introspection.
"""

from __future__ import annotations

import dataclasses
import struct
import threading
import types
import typing
from collections.abc import Callable
from operator import attrgetter
from typing import Any, NamedTuple, TypeVar

import msgpack

from kafkalite.common.errors import InvalidRequestError, UnsupportedVersionError
from kafkalite.network.requests import REQUEST_TYPES, SUPPORTED_VERSIONS, ApiKey, Request, Response

FRAME_LENGTH = struct.Struct(">I")
"""A frame's length prefix."""
REQUEST_START = 0x95
"""The first byte of every request payload: msgpack's mark of an array of five. No Kafka request begins so (one
begins with its API key's high byte), which lets a port tell the two protocols apart (`listener.ProtocolRouter`)."""
_T = TypeVar("_T")


class RequestHeader(NamedTuple):
    api_key: int  # an `ApiKey` when the key is known
    api_version: int
    correlation_id: int
    client_id: str


class MalformedRequestError(InvalidRequestError):
    """A frame that does not match its schema.

    `header` is kept when the header itself was readable, so the listener can still answer the request's
    correlation id with INVALID_REQUEST instead of only dropping the connection.
    """

    def __init__(self, message: str, header: RequestHeader | None = None) -> None:
        super().__init__(message)
        self.header = header


class UnsupportedRequestVersionError(UnsupportedVersionError):
    """A known API at a version outside `SUPPORTED_VERSIONS`; carries the header so the caller can answer it."""

    def __init__(self, message: str, header: RequestHeader) -> None:
        super().__init__(message)
        self.header = header


class FrameTooLargeError(InvalidRequestError):
    """A frame whose declared length exceeds the limit: raised on the length alone, before buffering the body."""


# ---------------------------------------------------------------------------------------------------------------
# Frames


class FrameDecoder:
    """Reassembles frames from a byte stream that arrives in arbitrary chunks.

    Feed it whatever the socket returned, then take frames with `next_frame()` until it returns None. A frame
    whose length prefix exceeds `max_frame_bytes` raises `FrameTooLargeError` as soon as the prefix arrives,
    so a hostile length cannot make the reader buffer gigabytes.
    """

    def __init__(self, max_frame_bytes: int | None = None) -> None:
        self._max_frame_bytes = max_frame_bytes
        self._buffer = bytearray()
        self._start = 0  # consumed bytes stay in the buffer until it is compacted once per feed cycle

    def feed(self, data: bytes) -> None:
        self._buffer += data

    @property
    def buffered_bytes(self) -> int:
        """Bytes of an incomplete frame: non-zero at end of stream means the peer left mid-frame."""
        return len(self._buffer) - self._start

    def next_frame(self) -> bytes | None:
        """The next complete frame's payload, or None until more data is fed."""
        buffer, start = self._buffer, self._start
        if len(buffer) - start >= FRAME_LENGTH.size:
            (length,) = FRAME_LENGTH.unpack_from(buffer, start)
            if self._max_frame_bytes is not None and length > self._max_frame_bytes:
                raise FrameTooLargeError(
                    f"frame of {length} bytes exceeds the limit of {self._max_frame_bytes} bytes")
            end = start + FRAME_LENGTH.size + length
            if len(buffer) >= end:
                self._start = end
                with memoryview(buffer) as view:
                    return bytes(view[start + FRAME_LENGTH.size:end])
        if start:
            del buffer[:start]
            self._start = 0
        return None


def _frame(payload: bytes) -> bytes:
    return FRAME_LENGTH.pack(len(payload)) + payload


# ---------------------------------------------------------------------------------------------------------------
# Requests and responses


def encode_request(header: RequestHeader, request: Request) -> bytes:
    """The request as a complete frame, length prefix included, ready for `send_all`."""
    return _frame(_pack([int(header.api_key), header.api_version, header.correlation_id, header.client_id,
                         request]))


def decode_request(frame: bytes) -> tuple[RequestHeader, Request]:
    """Parse a frame payload (as `FrameDecoder` yields it) into its header and request.

    Raises `MalformedRequestError` (header None if even the header was unreadable; an unknown API key keeps
    its header) or `UnsupportedRequestVersionError`.
    """
    payload = _unpack(frame)
    if type(payload) is not list or len(payload) != 5:
        raise MalformedRequestError("request frame: expected [api_key, api_version, correlation_id, "
                                    f"client_id, body], got {_describe(payload)}")
    api_key, api_version, correlation_id, client_id, body = payload
    for name, value, expected in (("api_key", api_key, int), ("api_version", api_version, int),
                                  ("correlation_id", correlation_id, int), ("client_id", client_id, str)):
        if type(value) is not expected:
            raise MalformedRequestError(
                f"request header {name}: expected {expected.__name__}, got {_describe(value)}")
    if api_key not in REQUEST_TYPES:
        raise MalformedRequestError(f"unknown API key {api_key}",
                                    RequestHeader(api_key, api_version, correlation_id, client_id))
    header = RequestHeader(ApiKey(api_key), api_version, correlation_id, client_id)
    min_version, max_version = SUPPORTED_VERSIONS[header.api_key]
    if not min_version <= api_version <= max_version:
        raise UnsupportedRequestVersionError(
            f"{header.api_key.name} version {api_version} is not supported (supported: "
            f"{min_version}..{max_version})", header)
    try:
        request = decode_body(REQUEST_TYPES[header.api_key], body)
    except MalformedRequestError as exc:
        exc.header = header
        raise
    return header, request


def encode_response(correlation_id: int, response: Response) -> bytes:
    """The response as a complete frame, length prefix included.

    Packed into this thread's msgpack buffer, which keeps its size from one response to the next: `packb` would
    pack a 4 MiB fetch response into a fresh buffer grown (and copied) as it fills, copy that into the bytes it
    returns, and the length prefix would copy it once more, about 0.2 s of a broker's CPU per 3 M rows a Spark
    query reads. Here the frame is copied once, into the bytes returned.
    """
    packer = getattr(_response_packers, "packer", None)
    if packer is None:
        packer = _response_packers.packer = msgpack.Packer(default=_encode_object, autoreset=False)
    try:
        packer.pack([correlation_id, response])
        with packer.getbuffer() as payload:
            if len(payload) > _KEPT_PACKER_BYTES:
                _response_packers.packer = None  # a rare outsized response does not pin its memory
            return FRAME_LENGTH.pack(len(payload)) + payload
    finally:
        packer.reset()


_response_packers = threading.local()
"""Each thread's packer: a response is packed and copied out in one synchronous call, so one per thread suffices
(several clusters may run in one process, each in its own thread)."""

_KEPT_PACKER_BYTES = 16 << 20
"""The largest response whose buffer is kept for the next one: a few fetch responses at the default sizes."""


def decode_response(frame: bytes | bytearray, response_type: type[_T]) -> tuple[int, _T]:
    """Parse a response frame payload; the caller knows the type from the request it sent."""
    payload = _unpack(frame)
    if type(payload) is not list or len(payload) != 2 or type(payload[0]) is not int:
        raise MalformedRequestError(f"response frame: expected [correlation_id, body], got {_describe(payload)}")
    return payload[0], decode_body(response_type, payload[1])


def decode_body(cls: type[_T], body: Any) -> _T:
    """Rebuild a dataclass from its wire form, checking every field against its annotation.

    The lists in `body` are reused for the result rather than copied, as `body` is normally a fresh unpack.
    """
    try:
        return _decoder_for(cls)(body)
    except _Mismatch as exc:
        path = cls.__name__ + "".join(reversed(exc.path))
        raise MalformedRequestError(f"{path}: {exc.detail}") from None


def _pack(obj: Any) -> bytes:
    return msgpack.packb(obj, default=_encode_object)


def _unpack(frame: bytes | bytearray) -> Any:
    try:
        # strict_map_key=False: Kafka schemas key maps by partition number (`dict[int, list[int]]`).
        return msgpack.unpackb(frame, raw=False, strict_map_key=False)
    except Exception as exc:  # msgpack raises several unrelated types for garbage; all mean the same here
        raise MalformedRequestError(f"frame is not valid msgpack: {type(exc).__name__}: {exc}") from None


# ---------------------------------------------------------------------------------------------------------------
# Encoding: msgpack walks lists and dicts itself and calls back for dataclasses and record batches only


def _compile_encoder(cls: type) -> Callable[[Any], Any]:
    # A type's own wire form wins over the generic dataclass one: a record batch keeps its payload as-is.
    if hasattr(cls, "to_wire"):
        return cls.to_wire  # type: ignore[no-any-return]
    if dataclasses.is_dataclass(cls):
        names = [f.name for f in dataclasses.fields(cls)]
        if len(names) >= 2:
            return attrgetter(*names)  # returns the tuple of values, which msgpack packs as an array
        return lambda obj: tuple(getattr(obj, name) for name in names)
    raise TypeError(f"cannot encode {cls.__name__} on the native wire")


class _EncoderCache(dict[type, Callable[[Any], Any]]):
    def __missing__(self, cls: type) -> Callable[[Any], Any]:
        encoder = self[cls] = _compile_encoder(cls)
        return encoder


_encoders = _EncoderCache()


def _encode_object(obj: Any) -> Any:
    return _encoders[type(obj)](obj)


# ---------------------------------------------------------------------------------------------------------------
# Decoding: one closure per annotation, built once per class


class _Mismatch(Exception):
    """A value that does not fit its annotation; `path` collects field names on the way out, innermost first."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail
        self.path: list[str] = []


Decoder = Callable[[Any], Any]
_PLAIN = (int, str, bool, bytes)
_decoders: dict[type, Decoder] = {}


def _describe(value: Any) -> str:
    return "None" if value is None else type(value).__name__


def _decoder_for(cls: type) -> Decoder:
    decoder = _decoders.get(cls)
    if decoder is None:
        decoder = _decoders[cls] = _dataclass(cls)
    return decoder


def _compile_decoder(annotation: Any) -> Decoder:
    if annotation in _PLAIN:
        return _exact(annotation)
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin in (types.UnionType, typing.Union):
        return _union(annotation)
    if origin is list:
        return _list(_compile_decoder(args[0]), args[0])
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            item = _list(_compile_decoder(args[0]), args[0])
            return lambda value: tuple(item(value))
        return _fixed_tuple([_compile_decoder(arg) for arg in args])
    if origin is dict:
        return _dict(_compile_decoder(args[0]), _compile_decoder(args[1]))
    if isinstance(annotation, type) and hasattr(annotation, "from_wire"):
        return _wire_type(annotation)
    if isinstance(annotation, type) and dataclasses.is_dataclass(annotation):
        return _decoder_for(annotation)
    raise TypeError(f"no native wire decoding for annotation {annotation!r}")


def _exact(expected: type) -> Decoder:
    """`type(value) is expected`, not isinstance: msgpack's bool would otherwise pass as an int."""

    def decode(value: Any) -> Any:
        if type(value) is not expected:
            raise _Mismatch(f"expected {expected.__name__}, got {_describe(value)}")
        return value

    return decode


def _union(annotation: Any) -> Decoder:
    args = typing.get_args(annotation)
    optional = type(None) in args
    options = [_compile_decoder(arg) for arg in args if arg is not type(None)]
    expected = " or ".join(_describe(None) if arg is type(None) else getattr(arg, "__name__", str(arg))
                           for arg in args)

    def decode(value: Any) -> Any:
        if value is None and optional:
            return None
        for option in options:
            try:
                return option(value)
            except _Mismatch as exc:
                if exc.path:  # the value had the option's shape but something inside is wrong: report that
                    raise
        raise _Mismatch(f"expected {expected}, got {_describe(value)}")

    return decode


def _list(item: Decoder, item_annotation: Any) -> Decoder:
    if item_annotation in _PLAIN:
        def decode_plain(value: Any) -> Any:
            if type(value) is not list:
                raise _Mismatch(f"expected list, got {_describe(value)}")
            for index, element in enumerate(value):
                if type(element) is not item_annotation:
                    exc = _Mismatch(f"expected {item_annotation.__name__}, got {_describe(element)}")
                    exc.path.append(f"[{index}]")
                    raise exc
            return value  # msgpack built a fresh list of immutable values: nothing to copy

        return decode_plain

    def decode(value: Any) -> Any:
        if type(value) is not list:
            raise _Mismatch(f"expected list, got {_describe(value)}")
        index = 0
        try:
            for index, element in enumerate(value):
                value[index] = item(element)
        except _Mismatch as exc:
            exc.path.append(f"[{index}]")
            raise
        return value

    return decode


def _fixed_tuple(items: list[Decoder]) -> Decoder:
    def decode(value: Any) -> Any:
        if type(value) is not list or len(value) != len(items):
            raise _Mismatch(f"expected a tuple of {len(items)}, got {_describe(value)}"
                            + (f" of {len(value)}" if type(value) is list else ""))
        out = []
        index = 0
        try:
            for index, element in enumerate(value):
                out.append(items[index](element))
        except _Mismatch as exc:
            exc.path.append(f"[{index}]")
            raise
        return tuple(out)

    return decode


def _dict(key: Decoder, val: Decoder) -> Decoder:
    def decode(value: Any) -> Any:
        if type(value) is not dict:
            raise _Mismatch(f"expected dict, got {_describe(value)}")
        out = {}
        k: Any = None
        try:
            for k, v in value.items():
                out[key(k)] = val(v)
        except _Mismatch as exc:
            exc.path.append(f"[{k!r}]")
            raise
        return out

    return decode


def _dataclass(cls: type) -> Decoder:
    fields = dataclasses.fields(cls)
    names = [f".{f.name}" for f in fields]
    required = sum(1 for f in fields
                   if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING)
    total = len(fields)
    arity = f"{total}" if required == total else f"{required} to {total}"
    # Plain fields are checked inline rather than through a closure call each: most fields are plain ints.
    plain: list[tuple[int, type]] = []
    nested: list[tuple[int, Decoder]] = []

    def compile_fields() -> None:
        # Deferred to first use: annotations may name classes defined later, or the class itself.
        hints = typing.get_type_hints(cls)
        for index, f in enumerate(fields):
            annotation = hints[f.name]
            if annotation in _PLAIN:
                plain.append((index, annotation))
            else:
                nested.append((index, _compile_decoder(annotation)))

    def decode(value: Any) -> Any:
        if type(value) is not list:
            raise _Mismatch(f"expected {cls.__name__} as a list of {arity} fields, got {_describe(value)}")
        count = len(value)
        if not required <= count <= total:
            raise _Mismatch(f"expected {arity} fields for {cls.__name__}, got {count}")
        if not plain and not nested:
            compile_fields()
        for index, expected in plain:
            if index >= count:
                break
            if type(value[index]) is not expected:
                exc = _Mismatch(f"expected {expected.__name__}, got {_describe(value[index])}")
                exc.path.append(names[index])
                raise exc
        index = 0
        try:
            for index, decoder in nested:
                if index >= count:
                    break
                value[index] = decoder(value[index])  # msgpack's fresh list is ours to reuse
        except _Mismatch as exc:
            exc.path.append(names[index])
            raise
        return cls(*value)

    return decode


def _wire_type(cls: type) -> Decoder:
    from_wire = cls.from_wire  # type: ignore[attr-defined]

    def decode(value: Any) -> Any:
        if type(value) is not list:
            raise _Mismatch(f"expected {cls.__name__} as a list, got {_describe(value)}")
        try:
            return from_wire(value)
        except Exception as exc:  # from_wire validates its own shape; any failure means a bad peer
            raise _Mismatch(f"invalid {cls.__name__}: {exc}") from None

    return decode
