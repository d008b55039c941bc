"""The native columnar payload: a batch's records stored column by column, with the bounds of every key and value.

Sans-IO and stateless, like `kafka_records`. Keys and values are each one msgpack array, so a reader of records
decodes a column in one C call, nearly as fast as msgpack decodes rows; beside each array lie the bounds that cut
it into alternating pieces, [array and item header, item, item header, item, ...], which is Apache Arrow's binary
layout (int32 offsets over one data buffer): a reader that builds columns (the Spark connector's Arrow batches)
wraps an array's bytes as they lie and takes every second piece in C, without a Python object per record.

Layout, every integer little-endian, each numeric section at an offset that is a multiple of its width (a
payload that starts aligned, as a `bytes` object's data does, gives aligned arrays):

    magic 0xC1 (uint8) | flags (uint8) | 2 zero bytes | record count n (uint32)
    timestamp deltas    int64[n]       only with TIMESTAMP_DELTAS: otherwise every delta is 0
    key bounds          int32[2n + 1]  0, then where key i starts (bounds[2i + 1]) and ends (bounds[2i + 2])
    value bounds        int32[2n + 1]    in the key array's bytes; the last bound is the array's length
    key nulls           uint8[n]       only with KEY_NULLS: 1 where the key is null (msgpack nil, 0 bytes long)
    value nulls         uint8[n]       only with VALUE_NULLS
    key array, value array (msgpack arrays of bin or nil), then with HEADERS a msgpack array of each record's
    `[[key, value], ...]`

0xC1 is the one byte msgpack never writes, so a payload's first byte tells this encoding from the msgpack array
of rows that earlier batches hold; both stay readable.
"""

from __future__ import annotations

import functools
import struct
import sys
from array import array
from collections.abc import Sequence
from itertools import accumulate
from typing import NamedTuple

import msgpack

from kafkalite.common.kafka_records import Row

MAGIC = 0xC1
TIMESTAMP_DELTAS, KEY_NULLS, VALUE_NULLS, HEADERS = 1, 2, 4, 8
KNOWN_FLAGS = TIMESTAMP_DELTAS | KEY_NULLS | VALUE_NULLS | HEADERS
_HEADER = struct.Struct("<BBxxI")
HEADER_SIZE = _HEADER.size
BOUND = struct.Struct("<i")
"""One int32 bound of a key or value column, as the payload holds it (little-endian)."""
_SWAP = sys.byteorder != "little"  # arrays are machine order; the payload is little-endian on every machine
_BINARY_TYPES: frozenset[type] = frozenset({bytes, bytearray, type(None)})

Header = tuple[str, bytes | None]


class ColumnBuffers(NamedTuple):
    """A columnar payload's sections, as memoryviews into it (no copy). See the module's layout."""

    count: int
    deltas: memoryview | None
    key_bounds: memoryview
    value_bounds: memoryview
    key_nulls: memoryview | None
    value_nulls: memoryview | None
    key_array: memoryview
    value_array: memoryview
    headers: memoryview | None


def is_columnar(payload: bytes) -> bool:
    return payload[:1] == b"\xc1"


def encode(rows: Sequence[Row]) -> bytes:
    """Rows `(timestamp delta, key, value, headers)` as a columnar payload.

    TypeError, ValueError or OverflowError for a row that is not four fields, a delta that is not a 64-bit
    integer, a key or value that is neither bytes nor None, or a batch past 2 GiB of keys or values.
    """
    count = len(rows)
    deltas, keys, values, headers = zip(*rows, strict=True) if rows else ((), (), (), ())
    flags = 0
    sections: list[bytes] = []
    if deltas.count(0) != count:
        flags |= TIMESTAMP_DELTAS
        sections.append(_pack("q", deltas))
    key_bounds, key_nulls, key_array = _binary_column("key", keys)
    value_bounds, value_nulls, value_array = _binary_column("value", values)
    sections += (key_bounds, value_bounds)
    if key_nulls is not None:
        flags |= KEY_NULLS
        sections.append(key_nulls)
    if value_nulls is not None:
        flags |= VALUE_NULLS
        sections.append(value_nulls)
    sections += (key_array, value_array)
    if any(headers):
        flags |= HEADERS
        sections.append(msgpack.packb(headers))
    return b"".join([_HEADER.pack(MAGIC, flags, count), *sections])


def _binary_column(name: str, items: tuple[bytes | None, ...]) -> tuple[bytes, bytes | None, bytes]:
    """(bounds, nulls or None, msgpack array) of a column of bytes and Nones (`name`: key or value, for errors)."""
    if not set(map(type, items)) <= _BINARY_TYPES:
        index = next(i for i, item in enumerate(items) if type(item) not in _BINARY_TYPES)
        raise TypeError(f"record {index} has a {name} of type {type(items[index]).__name__}; expected bytes or None")
    packed = msgpack.packb(items)
    bounds = bounds_of(items)
    if BOUND.unpack_from(bounds, len(bounds) - 4)[0] != len(packed):
        raise ValueError(f"a column of {len(items)} items does not pack into the bytes its bounds say")
    return bounds, null_mask(items), packed


def null_mask(items: Sequence[bytes | bytearray | None]) -> bytes | None:
    """The null mask of a column as the payload holds it: 1 where an item is None; None when no item is."""
    nulls = items.count(None)
    if not nulls:
        return None
    return b"\x01" * nulls if nulls == len(items) else bytes(item is None for item in items)


def bounds_of(items: Sequence[bytes | bytearray | None]) -> bytes:
    """The bounds of `items` in their msgpack array, as the payload holds them: 0, then each item's start and end
    (after its bin header). A column of nils, or of items of one length (fixed-size records), takes its bounds
    from a cache."""
    count = len(items)
    nulls = items.count(None)
    if nulls == count:
        return _uniform_bounds(count, None)
    if nulls:
        lengths = [0 if item is None else len(item) for item in items]
        heads = [1 if item is None else _bin_header(length) for item, length in zip(items, lengths)]
    else:
        lengths = list(map(len, items))  # type: ignore[arg-type]
        if lengths.count(lengths[0]) == count:
            return _uniform_bounds(count, lengths[0])
        heads = [2] * count if max(lengths) < 0x100 else list(map(_bin_header, lengths))
    return _bounds(count, heads, lengths)


@functools.lru_cache(maxsize=256)
def _uniform_bounds(count: int, length: int | None) -> bytes:
    """Bounds of `count` items of `length` bytes each (None: nils)."""
    return _bounds(count, [1 if length is None else _bin_header(length)] * count, [length or 0] * count)


def _bounds(count: int, heads: list[int], lengths: list[int]) -> bytes:
    steps = [0] * (2 * count)  # header, item, header, item, ...: filled by slice, in C
    steps[::2], steps[1::2] = heads, lengths
    bounds = array("i", list(accumulate(steps, initial=_array_header(count))))
    bounds[0] = 0  # the array's header is part of the first piece
    return _machine_to_little(bounds)


def _bin_header(length: int) -> int:
    return 2 if length < 0x100 else 3 if length < 0x10000 else 5


def _array_header(count: int) -> int:
    return 1 if count < 16 else 3 if count < 0x10000 else 5


def sections(payload: bytes) -> ColumnBuffers:
    """The sections of a columnar payload, checked to add up to exactly its length (ValueError otherwise).

    Offsets are checked to start at 0 and end at their data's length, not to grow monotonically: `validate`
    does that, where the broker checks what producers send.
    """
    view = memoryview(payload)
    if len(view) < _HEADER.size:
        raise ValueError(f"a columnar payload needs {_HEADER.size} header bytes; it has {len(view)}")
    magic, flags, count = _HEADER.unpack_from(view)
    if magic != MAGIC or flags & ~KNOWN_FLAGS:
        raise ValueError(f"not a columnar payload (magic {magic:#x}, flags {flags:#x})")
    bounds = 4 * (2 * count + 1)
    position = _HEADER.size + (8 * count if flags & TIMESTAMP_DELTAS else 0)  # where the bounds start
    arrays = position + 2 * bounds + (count if flags & KEY_NULLS else 0) + (count if flags & VALUE_NULLS else 0)
    if arrays > len(view):
        raise ValueError(f"a columnar payload of {count} records needs more than its {len(view)} bytes")
    deltas = view[_HEADER.size:position] if flags & TIMESTAMP_DELTAS else None
    key_bounds, value_bounds = view[position:position + bounds], view[position + bounds:position + 2 * bounds]
    position += 2 * bounds
    key_nulls = value_nulls = None
    if flags & KEY_NULLS:
        key_nulls, position = view[position:position + count], position + count
    if flags & VALUE_NULLS:
        value_nulls = view[position:position + count]
    (key_start,), (value_start,) = BOUND.unpack_from(key_bounds), BOUND.unpack_from(value_bounds)
    if key_start or value_start:
        raise ValueError("a column's offsets must start at 0")
    (key_length,), (value_length,) = BOUND.unpack_from(key_bounds, 8 * count), BOUND.unpack_from(value_bounds,
                                                                                                    8 * count)
    position = arrays + key_length + value_length
    if key_length < 0 or value_length < 0 or position > len(view):
        raise ValueError(f"a columnar payload of {count} records needs more than its {len(view)} bytes")
    key_array, value_array = view[arrays:arrays + key_length], view[arrays + key_length:position]
    rest = view[position:]
    if rest and not flags & HEADERS:
        raise ValueError(f"{len(rest)} bytes follow the last column")
    return ColumnBuffers(count, deltas, key_bounds, value_bounds, key_nulls, value_nulls, key_array, value_array,
                         rest if flags & HEADERS else None)


def decode(buffers: ColumnBuffers) -> tuple[tuple[int, ...], tuple[bytes | None, ...], tuple[bytes | None, ...],
                                            tuple[tuple[Header, ...], ...]]:
    """The four columns as Python objects: timestamp deltas, keys, values, headers (TypeError or ValueError for
    headers that are not one list per record)."""
    count = buffers.count
    deltas = tuple(_unpack("q", buffers.deltas)) if buffers.deltas is not None else (0,) * count
    keys = _decode_binary(buffers.key_array, count)
    values = _decode_binary(buffers.value_array, count)
    return deltas, keys, values, decode_headers(buffers)


def decode_headers(buffers: ColumnBuffers) -> tuple[tuple[Header, ...], ...]:
    """Each record's headers, `()` for none (ValueError if the column does not hold one entry per record)."""
    if buffers.headers is None:
        return ((),) * buffers.count
    column = msgpack.unpackb(buffers.headers, use_list=False)
    if type(column) is not tuple or len(column) != buffers.count:
        raise ValueError(f"the headers column does not hold one entry for each of {buffers.count} records")
    return column  # type: ignore[no-any-return]


def _decode_binary(data: memoryview, count: int) -> tuple[bytes | None, ...]:
    column = msgpack.unpackb(data, use_list=False)
    if type(column) is not tuple or len(column) != count:
        raise ValueError(f"a key or value column does not hold one entry for each of {count} records")
    return column  # type: ignore[no-any-return]


def consistent(buffers: ColumnBuffers, keys: tuple[bytes | None, ...], values: tuple[bytes | None, ...]) -> bool:
    """Whether the bounds and null masks say what the key and value arrays hold, the arrays' items being bytes or
    None (checked where the broker checks what producers send: a reader of columns trusts the bounds, a reader of
    records the arrays)."""
    for bounds, nulls, items in ((buffers.key_bounds, buffers.key_nulls, keys),
                                 (buffers.value_bounds, buffers.value_nulls, values)):
        mask = null_mask(items)
        if nulls is None:
            if mask is not None:
                return False
        elif bytes(nulls) != (bytes(len(items)) if mask is None else mask):  # a mask of no nulls: all zeros
            return False
        if bounds != bounds_of(items):
            return False
    return True


def _pack(code: str, items: Sequence[int]) -> bytes:
    return _machine_to_little(array(code, items))


def _machine_to_little(items: array[int]) -> bytes:
    if _SWAP:
        items.byteswap()
    return items.tobytes()


def _unpack(code: str, data: memoryview) -> array[int]:
    items = array(code)
    items.frombytes(data)
    if _SWAP:
        items.byteswap()
    return items
