"""Hostile frames of every request type against a served cluster: nothing acknowledged is lost, every broker keeps
answering, and no task or connection is left behind.

Frames are built from the request dataclasses' own annotations (so every field of every request type is
reached), filled from pools of hostile values, then mutated at the msgpack level and at the frame level
(truncated, wrong length, random bytes, an unknown API key or version). Each seed is printed on failure and
replays the same frames. Destructive admin requests that would legitimately remove data (DeleteTopics,
AlterConfigs, IncrementalAlterConfigs, DeleteRecords) never name the topic whose records are checked; everything else
may.

Real clock: the kernel moves the bytes. `KAFKALITE_FUZZ_FRAMES` sets the frames per request type (default 60,
over 1,000 in all); CI runs the default.
"""

from __future__ import annotations

import dataclasses
import os
import random
import struct
import typing
from collections import Counter
from types import UnionType
from typing import Any

import msgpack
import pytest
import trio
import trio.testing

from kafkalite.cluster import Cluster
from kafkalite.common.records import Record, RecordBatch, _checksum
from kafkalite.network.codec import FrameDecoder
from kafkalite.network.connection import Connection
from kafkalite.network.requests import (
    REQUEST_TYPES,
    AlterConfigsRequest,
    ApiKey,
    DeleteRecordsRequest,
    DeleteTopicsRequest,
    IncrementalAlterConfigsRequest,
    MetadataRequest,
)

FRAMES_PER_TYPE = int(os.environ.get("KAFKALITE_FUZZ_FRAMES", "60"))
ACKED_TOPIC = "acked-data"
RESPONSE_WAIT_S = 0.2  # a request that is still waiting (a long-polling fetch) is abandoned by closing

INTS = [0, 1, 2, 3, -1, -2, 7, 100, 2**15 - 1, 2**15, 2**31 - 1, 2**31, 2**63 - 1, -(2**63), 2**64 - 1, 10**12]
STRINGS = ["fuzz-target", "nope", "", ".", "..", "x" * 250, "a/b", "é", "\x00", ACKED_TOPIC, "NATIVE", "retention.ms",
           "min.insync.replicas", "1"]
# may remove records, as asked
DESTRUCTIVE = (DeleteTopicsRequest, AlterConfigsRequest, IncrementalAlterConfigsRequest, DeleteRecordsRequest)
HOSTILE = [None, True, 0, -1, 2**64 - 1, -(2**63), 1.5, "", "x" * 1000, b"", b"\xff" * 64, [], [[[]]], {}, {1: 2},
           [None] * 50, ".."]


def value_for(annotation: Any, rng: random.Random, request_type: type, depth: int = 0) -> Any:
    """A wire value of the annotation's shape, from the hostile pools."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if annotation is int:
        return rng.choice(INTS) if rng.random() < 0.5 else rng.randrange(-2, 4)
    if annotation is str:
        pool = [s for s in STRINGS if s != ACKED_TOPIC] if request_type in DESTRUCTIVE else STRINGS
        return rng.choice(pool)
    if annotation is bool:
        return rng.random() < 0.5
    if annotation is bytes:
        return rng.randbytes(rng.choice([0, 1, 16]))
    if annotation is float:
        return rng.choice([0.0, -1.0, 1e308])
    if origin in (UnionType, typing.Union):
        return value_for(rng.choice(args), rng, request_type, depth)
    if annotation is type(None):
        return None
    if origin is list or (origin is tuple and len(args) == 2 and args[1] is Ellipsis):
        return [value_for(args[0], rng, request_type, depth + 1) for _ in range(rng.choice([0, 1, 1, 2, 3]))]
    if origin is tuple:
        return [value_for(arg, rng, request_type, depth + 1) for arg in args]
    if origin is dict:
        return {value_for(args[0], rng, request_type, depth + 1): value_for(args[1], rng, request_type, depth + 1)
                for _ in range(rng.choice([0, 1, 2]))}
    if annotation is RecordBatch:
        return batch_for(rng)
    if dataclasses.is_dataclass(annotation):
        hints = typing.get_type_hints(annotation)
        return [value_for(hints[f.name], rng, request_type, depth + 1) for f in dataclasses.fields(annotation)]
    raise TypeError(f"no fuzz values for {annotation!r}")


def batch_for(rng: random.Random) -> list[Any]:
    """A record batch as it travels: valid, with a wrong crc, or a forged payload with a matching crc."""
    rows: Any = [[0, rng.choice([None, b"k"]), rng.choice([None, b"v" * rng.randrange(1, 50)]), []]
                 for _ in range(rng.randrange(1, 4))]
    batch = RecordBatch.from_records([Record(None, b"fuzz")])
    kind = rng.randrange(4)
    if kind == 1:
        rows = rng.choice([[[0, None, 42, []]], [[0, None]], {"not": "rows"}, [[0, "str", b"v", [["h", 1]]]]])
    payload = msgpack.packb(rows)
    count = rng.choice([len(rows) if isinstance(rows, list) else 1, 1, 1000, 0, -1])
    first, maximum = rng.choice([(-1, -1), (1_700_000_000_000, 1_700_000_000_000), (5, 3)])
    producer = rng.choice([(-1, -1, -1), (0, 0, 0), (2**63 - 1, 2**15 - 1, 2**31 - 1)])
    crc = _checksum(payload, 0, max(count, 1), first, maximum, *producer) if kind != 2 else rng.randrange(2**32)
    if kind == 3:
        return batch.to_wire()
    return [rng.choice([0, -1, 2**63 - 1]), -1, *producer, count, first, maximum, 0, crc, payload]


def mutate(body: Any, rng: random.Random) -> Any:
    """Replace one random node of the body with a hostile value of any type."""
    if not isinstance(body, list) or not body or rng.random() < 0.3:
        return rng.choice(HOSTILE)
    index = rng.randrange(len(body))
    body[index] = mutate(body[index], rng)
    return body


def frame_for(api_key: ApiKey, rng: random.Random) -> bytes:
    request_type = REQUEST_TYPES[api_key]
    body = value_for(request_type, rng, request_type)
    if rng.random() < 0.5:
        body = mutate(body, rng)
    key, version = int(api_key), 0
    roll = rng.random()
    if roll < 0.05:
        key = rng.choice([99, -1, 2**16])
    elif roll < 0.1:
        version = rng.choice([1, -1, 255])
    header = [key, version, rng.choice([0, 1, 2**31 - 1, -5]), rng.choice(["fuzz", "", "x" * 300])]
    if rng.random() < 0.05:
        header = mutate(header, rng)
    try:
        payload = msgpack.packb([*header, body] if isinstance(header, list) else header)
    except (OverflowError, ValueError, TypeError):
        payload = rng.randbytes(40)
    roll = rng.random()
    if roll < 0.05:
        payload = rng.randbytes(rng.randrange(1, 200))
    elif roll < 0.1:
        payload = payload[: rng.randrange(len(payload) + 1)]
    length = len(payload)
    if rng.random() < 0.05:
        length = rng.choice([0, length + 10, 2**31, max(length - 3, 0)])
    return struct.pack(">I", length) + payload


async def exchange(port: int, frame: bytes) -> None:
    """Send one frame on a fresh connection, read its answer (or the close), then close: a request still waiting
    after RESPONSE_WAIT_S (a long-polling fetch) is abandoned."""
    decoder = FrameDecoder()
    with trio.move_on_after(2):  # a safety net: everything below is bounded by RESPONSE_WAIT_S already
        async with await trio.open_tcp_stream("127.0.0.1", port) as stream:
            try:
                await stream.send_all(frame)
                with trio.move_on_after(RESPONSE_WAIT_S):
                    while decoder.next_frame() is None and (data := await stream.receive_some()):
                        decoder.feed(data)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass


def tasks_by_name() -> Counter[str]:
    counts: Counter[str] = Counter()

    def walk(task: trio.lowlevel.Task) -> None:
        counts[task.name] += 1
        for nursery in task.child_nurseries:
            for child in nursery.child_tasks:
                walk(child)

    walk(trio.lowlevel.current_root_task())
    return counts


@pytest.mark.parametrize("seed", [1, 2])
async def test_hostile_frames_of_every_request_type_change_nothing_acknowledged(seed: int) -> None:
    config = {"zookeeper.session.timeout.ms": 6000, "auto.leader.rebalance.enable": False,
              "max.partitions.per.request": 16, "max.topics.per.request": 16, "num.partitions": 1}
    async with Cluster(brokers=3, config=config, seed=seed) as cluster:
        await cluster.create_topic(ACKED_TOPIC, partitions=1, replication_factor=3, config={"min.insync.replicas": 2})
        await cluster.create_topic("fuzz-target", partitions=2, replication_factor=2)
        acknowledged = [b"acked-%d" % i for i in range(50)]
        for i in range(0, 50, 10):
            await cluster.produce(ACKED_TOPIC, 0, [Record(None, v) for v in acknowledged[i:i + 10]])
        ports = [cluster.broker(b).endpoints[0].port for b in cluster.broker_ids]
        await trio.testing.wait_all_tasks_blocked()
        before = tasks_by_name()
        rng = random.Random(seed)
        sent = 0
        for api_key in sorted(REQUEST_TYPES):
            for _ in range(FRAMES_PER_TYPE):
                frame = frame_for(api_key, rng)
                try:
                    await exchange(rng.choice(ports), frame)
                except OSError as exc:
                    pytest.fail(f"seed {seed}: a listener stopped accepting after {sent} frames: {exc}")
                sent += 1
        assert sent >= 1000
        # every broker still answers, and the controller still works
        for port in ports:
            with trio.fail_after(10):
                async with await Connection.open("127.0.0.1", port) as connection:
                    metadata = await connection.send(MetadataRequest([ACKED_TOPIC]))
            assert sorted(b.node_id for b in metadata.brokers) == cluster.broker_ids, f"seed {seed}"
        await cluster.create_topic("after-fuzz", partitions=1, replication_factor=3, timeout=30)
        # nothing acknowledged is lost (records appended by valid fuzz frames may follow it)
        await cluster.wait_for_leader(ACKED_TOPIC, 0)
        values = [r.value for _, r in await cluster.fetch_all(ACKED_TOPIC, 0)]
        assert values[:50] == acknowledged, f"seed {seed}: acknowledged records changed"
        # no connection or request task is left behind
        grown = tasks_by_name() - before
        with trio.move_on_after(10):
            while any("serve" in name for name in grown):
                await trio.sleep(0.05)
                grown = tasks_by_name() - before
        leaked = {name: n for name, n in grown.items() if "fetcher" not in name.lower()}
        assert not leaked, f"seed {seed}: tasks left behind: {leaked}"
