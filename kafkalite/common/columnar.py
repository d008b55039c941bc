"""The native columnar payload: a batch's records stored column by column, keys and values as contiguous bytes.

Sans-IO and stateless, like `kafka_records`. A reader that builds columns (the Spark connector's Arrow batches)
takes the key and value bytes and their offsets as they lie in the payload, without a Python object per record;
a reader of records slices them back into rows, about as fast as msgpack decodes its rows.

Layout, every integer little-endian, each numeric section at an offset that is a multiple of its width (a
payload that starts aligned, as a `bytes` object's data does, gives aligned arrays):

    magic 0xC1 (uint8) | flags (uint8) | 2 zero bytes | record count n (uint32)
    timestamp deltas    int64[n]      only with TIMESTAMP_DELTAS: otherwise every delta is 0
    key offsets         int32[n + 1]  key i is key data[offsets[i]:offsets[i + 1]]; the first offset is 0
    value offsets       int32[n + 1]
    key nulls           uint8[n]      only with KEY_NULLS: 1 where the key is null (its length is 0)
    value nulls         uint8[n]      only with VALUE_NULLS
    key data, value data, then with HEADERS a msgpack array of each record's `[[key, value], ...]`

These are Apache Arrow's binary layout (int32 offsets and data), so a reader wraps them as Arrow arrays as they
are. 0xC1 is the one byte msgpack never writes, so a payload's first byte tells this encoding from the msgpack
array of rows that earlier batches hold; both stay readable.
"""

from __future__ import annotations

import operator
import struct
import sys
from array import array
from collections.abc import Sequence
from itertools import accumulate, islice
from typing import NamedTuple

import msgpack

from kafkalite.common.kafka_records import Row

MAGIC = 0xC1
TIMESTAMP_DELTAS, KEY_NULLS, VALUE_NULLS, HEADERS = 1, 2, 4, 8
_KNOWN_FLAGS = TIMESTAMP_DELTAS | KEY_NULLS | VALUE_NULLS | HEADERS
_HEADER = struct.Struct("<BBxxI")
_OFFSET = struct.Struct("<i")
_SWAP = sys.byteorder != "little"  # arrays are machine order; the payload is little-endian on every machine

Header = tuple[str, bytes | None]


class ColumnBuffers(NamedTuple):
    """A columnar payload's sections, as memoryviews into it (no copy). See the module's layout."""

    count: int
    deltas: memoryview | None
    key_offsets: memoryview
    value_offsets: memoryview
    key_nulls: memoryview | None
    value_nulls: memoryview | None
    key_data: memoryview
    value_data: memoryview
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
    key_offsets, key_nulls, key_data = _binary_column(keys)
    value_offsets, value_nulls, value_data = _binary_column(values)
    sections += (key_offsets, value_offsets)
    if key_nulls is not None:
        flags |= KEY_NULLS
        sections.append(key_nulls)
    if value_nulls is not None:
        flags |= VALUE_NULLS
        sections.append(value_nulls)
    sections += (key_data, value_data)
    if any(headers):
        flags |= HEADERS
        sections.append(msgpack.packb(headers))
    return b"".join([_HEADER.pack(MAGIC, flags, count), *sections])


def _binary_column(items: tuple[bytes | None, ...]) -> tuple[bytes, bytes | None, bytes]:
    """(offsets, nulls or None, data) of a column of bytes and Nones."""
    nulls = items.count(None)
    if nulls == 0:
        data, lengths = b"".join(items), map(len, items)  # type: ignore[arg-type]
        mask = None
    elif nulls == len(items):
        data, lengths, mask = b"", [0] * nulls, b"\x01" * nulls
    else:
        present = [item for item in items if item is not None]
        data, lengths = b"".join(present), [0 if item is None else len(item) for item in items]
        mask = bytes(item is None for item in items)
    offsets = array("i", [0])
    offsets.extend(accumulate(lengths))
    return _machine_to_little(offsets), mask, data


def sections(payload: bytes) -> ColumnBuffers:
    """The sections of a columnar payload, checked to add up to exactly its length (ValueError otherwise).

    Offsets are checked to start at 0 and end at their data's length, not to grow monotonically: `validate`
    does that, where the broker checks what producers send.
    """
    view = memoryview(payload)
    if len(view) < _HEADER.size:
        raise ValueError(f"a columnar payload needs {_HEADER.size} header bytes; it has {len(view)}")
    magic, flags, count = _HEADER.unpack_from(view)
    if magic != MAGIC or flags & ~_KNOWN_FLAGS:
        raise ValueError(f"not a columnar payload (magic {magic:#x}, flags {flags:#x})")
    position = _HEADER.size

    def take(size: int) -> memoryview:
        nonlocal position
        if size < 0 or position + size > len(view):
            raise ValueError(f"a columnar payload of {count} records needs more than its {len(view)} bytes")
        position += size
        return view[position - size:position]

    deltas = take(8 * count) if flags & TIMESTAMP_DELTAS else None
    key_offsets, value_offsets = take(4 * (count + 1)), take(4 * (count + 1))
    key_nulls = take(count) if flags & KEY_NULLS else None
    value_nulls = take(count) if flags & VALUE_NULLS else None
    for offsets in (key_offsets, value_offsets):
        if _OFFSET.unpack_from(offsets)[0] != 0:
            raise ValueError("a column's offsets must start at 0")
    key_data = take(_OFFSET.unpack_from(key_offsets, 4 * count)[0])
    value_data = take(_OFFSET.unpack_from(value_offsets, 4 * count)[0])
    rest = view[position:]
    if rest and not flags & HEADERS:
        raise ValueError(f"{len(rest)} bytes follow the last column")
    return ColumnBuffers(count, deltas, key_offsets, value_offsets, key_nulls, value_nulls, key_data, value_data,
                         rest if flags & HEADERS else None)


def decode(buffers: ColumnBuffers) -> tuple[tuple[int, ...], tuple[bytes | None, ...], tuple[bytes | None, ...],
                                            tuple[tuple[Header, ...], ...]]:
    """The four columns as Python objects: timestamp deltas, keys, values, headers (TypeError or ValueError for
    headers that are not one list per record)."""
    count = buffers.count
    deltas = tuple(_unpack("q", buffers.deltas)) if buffers.deltas is not None else (0,) * count
    keys = _decode_binary(buffers.key_offsets, buffers.key_nulls, buffers.key_data)
    values = _decode_binary(buffers.value_offsets, buffers.value_nulls, buffers.value_data)
    return deltas, keys, values, decode_headers(buffers)


def decode_headers(buffers: ColumnBuffers) -> tuple[tuple[Header, ...], ...]:
    """Each record's headers, `()` for none (ValueError if the column does not hold one entry per record)."""
    if buffers.headers is None:
        return ((),) * buffers.count
    column = msgpack.unpackb(buffers.headers, use_list=False)
    if type(column) is not tuple or len(column) != buffers.count:
        raise ValueError(f"the headers column does not hold one entry for each of {buffers.count} records")
    return column  # type: ignore[no-any-return]


def _decode_binary(offsets: memoryview, nulls: memoryview | None, data: memoryview) -> tuple[bytes | None, ...]:
    mask = bytes(nulls) if nulls is not None else None
    if mask is not None and mask.count(1) == len(mask):
        return (None,) * len(mask)
    bounds = _unpack("i", offsets).tolist()
    items = tuple(map(bytes(data).__getitem__, map(slice, bounds, islice(bounds, 1, None))))
    if mask is None:
        return items
    return tuple(None if null else item for null, item in zip(mask, items, strict=True))


def offsets_ascend(buffers: ColumnBuffers) -> bool:
    """Whether every key and value has a length of zero or more (its offsets never go back)."""
    return all(all(map(operator.le, bounds, islice(bounds, 1, None)))
               for bounds in (_unpack("i", buffers.key_offsets), _unpack("i", buffers.value_offsets)))


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
