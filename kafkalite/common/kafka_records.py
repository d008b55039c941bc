"""Apache Kafka's record format v2 inside a batch: the bytes after the 61-byte RecordBatch header.

Sans-IO and stateless, like the native codec. A batch produced over the Kafka protocol is stored with these
bytes as its payload, compressed or not, exactly as the client sent them; this module is needed only when a
reader wants the other encoding (`RecordBatch.native()` and `RecordBatch.kafka()` call it once per batch and
cache the result), and for the checksum every produced batch is checked against.

Each record is: length (varint), attributes (int8, unused), timestamp delta (varlong), offset delta (varint),
key length (varint, -1 for null) and key, value length and value, header count (varint), then per header a
key length and UTF-8 key and a value length (-1 for null) and value. Varints are zigzag-encoded, as in
Kafka's `ByteUtils.writeVarint`.

Compression (attributes bits 0-2): gzip through the standard library; snappy, lz4 and zstd through `cramjam`,
an optional dependency (the `kafka` extra). Batches are never compressed here: a native batch converted for a
Kafka client goes out uncompressed, which every client reads. Decompressing without the codec installed
raises UNSUPPORTED_COMPRESSION_TYPE naming the package to install.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable, Sequence
from typing import Any

import google_crc32c

from kafkalite.common.errors import CorruptMessageError, UnsupportedCompressionTypeError

Row = tuple[int, bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...]]
"""(timestamp delta, key, value, headers): one record, as the native payload holds it."""

COMPRESSION_MASK = 0x07
COMPRESSION_NAMES = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}

_XERIAL_MAGIC = b"\x82SNAPPY\x00"  # the Java client's snappy framing (xerial SnappyOutputStream)
_XERIAL_HEADER = 16
_BLOCK_LENGTH = struct.Struct(">i")


def crc32c(data: bytes | memoryview, value: int = 0) -> int:
    """CRC-32C (Castagnoli), the checksum of RecordBatch v2, in C."""
    return google_crc32c.extend(value, data)  # type: ignore[no-any-return]


# -- varints --------------------------------------------------------------------------------------------------------


def _append_varint(out: bytearray, value: int) -> None:
    value = (value << 1) ^ (value >> 63)  # zigzag: small magnitudes of either sign take one byte
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    byte = data[pos]
    if byte < 0x80:  # the common case: lengths and deltas under 64
        return (byte >> 1) ^ -(byte & 1), pos + 1
    value = byte & 0x7F
    shift = 7
    while True:
        pos += 1
        byte = data[pos]
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return (value >> 1) ^ -(value & 1), pos + 1
        shift += 7
        if shift > 63:
            raise ValueError("varint longer than 10 bytes")


def _read_bytes(data: bytes, pos: int) -> tuple[bytes | None, int]:
    length, pos = _read_varint(data, pos)
    if length < 0:
        return None, pos
    end = pos + length
    if end > len(data):
        raise ValueError("field runs past the end of the records")
    return data[pos:end], end


# -- records --------------------------------------------------------------------------------------------------------


def encode_records(rows: Sequence[Row]) -> bytes:
    """The uncompressed v2 record section for native rows; offset deltas count from 0."""
    out = bytearray()
    body = bytearray()
    for offset_delta, (timestamp_delta, key, value, headers) in enumerate(rows):
        body.clear()
        body.append(0)  # record attributes
        _append_varint(body, timestamp_delta)
        _append_varint(body, offset_delta)
        for item in (key, value):
            if item is None:
                body.append(1)  # zigzag(-1)
            else:
                _append_varint(body, len(item))
                body += item
        _append_varint(body, len(headers))
        for header_key, header_value in headers:
            encoded_key = header_key.encode()
            _append_varint(body, len(encoded_key))
            body += encoded_key
            if header_value is None:
                body.append(1)
            else:
                _append_varint(body, len(header_value))
                body += header_value
        _append_varint(out, len(body))
        out += body
    return bytes(out)


def decode_records(payload: bytes, attributes: int, record_count: int) -> list[Row]:
    """Native rows from a v2 record section (decompressed first if `attributes` say so).

    CORRUPT_MESSAGE if the section does not hold exactly `record_count` well-formed records; the rows keep
    the records' own timestamp deltas, so a reader sees the timestamps the producer wrote.
    """
    data = decompress(payload, attributes & COMPRESSION_MASK)
    rows: list[Row] = []
    pos = 0
    try:
        while pos < len(data):
            length, pos = _read_varint(data, pos)
            end = pos + length
            if length < 0 or end > len(data):
                raise ValueError(f"record {len(rows)} claims {length} bytes")
            pos += 1  # record attributes
            timestamp_delta, pos = _read_varint(data, pos)
            _, pos = _read_varint(data, pos)  # offset delta: records are consecutive in a produced batch
            key, pos = _read_bytes(data, pos)
            value, pos = _read_bytes(data, pos)
            header_count, pos = _read_varint(data, pos)
            if header_count < 0:  # Kafka's DefaultRecord refuses it; read as none, the record would pass
                raise ValueError(f"Found invalid number of record headers {header_count}")
            headers = []
            for _ in range(header_count):
                header_key, pos = _read_bytes(data, pos)
                header_value, pos = _read_bytes(data, pos)
                headers.append(((header_key or b"").decode(), header_value))
            if pos != end:
                raise ValueError(f"record {len(rows)} is {length} bytes long but its fields take {pos - end + length}")
            rows.append((timestamp_delta, key, value, tuple(headers)))
    except (IndexError, ValueError, UnicodeDecodeError) as exc:
        raise CorruptMessageError(f"malformed Kafka record section: {exc}") from None
    if len(rows) != record_count:
        raise CorruptMessageError(f"the batch header counts {record_count} records but the batch holds {len(rows)}")
    return rows


# -- compression ----------------------------------------------------------------------------------------------------


def _gunzip(data: bytes) -> bytes:
    return zlib.decompress(data, wbits=47)  # 32 + 15: a gzip or zlib header, detected


def _cramjam(codec: str) -> Any:
    try:
        import cramjam
    except ImportError:
        raise UnsupportedCompressionTypeError(
            f"this batch is {codec}-compressed and the broker cannot decompress it: install the codecs with "
            f"`pip install 'kafkalite[kafka]'` (cramjam)") from None
    return getattr(cramjam, codec)


def _unsnappy(data: bytes) -> bytes:
    snappy = _cramjam("snappy")
    if not data.startswith(_XERIAL_MAGIC):  # librdkafka sends raw snappy
        return bytes(snappy.decompress_raw(data))
    out = bytearray()
    pos = _XERIAL_HEADER
    while pos < len(data):
        (length,) = _BLOCK_LENGTH.unpack_from(data, pos)
        pos += _BLOCK_LENGTH.size
        out += snappy.decompress_raw(data[pos:pos + length])
        pos += length
    return bytes(out)


def _lz4(data: bytes) -> bytes:
    return bytes(_cramjam("lz4").decompress(data))


def _zstd(data: bytes) -> bytes:
    return bytes(_cramjam("zstd").decompress(data))


_DECOMPRESSORS: dict[int, Callable[[bytes], bytes]] = {1: _gunzip, 2: _unsnappy, 3: _lz4, 4: _zstd}


def decompress(payload: bytes, compression: int) -> bytes:
    """The record section of a batch compressed with Kafka's codec number `compression` (0: none)."""
    if compression == 0:
        return payload
    decompressor = _DECOMPRESSORS.get(compression)
    if decompressor is None:
        raise UnsupportedCompressionTypeError(f"unknown compression codec {compression} in a record batch")
    try:
        return decompressor(payload)
    except UnsupportedCompressionTypeError:
        raise
    except Exception as exc:  # each codec raises its own types for garbage; all mean a corrupt batch
        raise CorruptMessageError(
            f"cannot {COMPRESSION_NAMES[compression]}-decompress a record batch: {type(exc).__name__}: {exc}") from None
