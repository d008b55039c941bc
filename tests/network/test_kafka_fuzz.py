"""Hostile requests of every API and version the KAFKA listener serves: each well-formed one is answered, nothing
acknowledged is lost, and every broker keeps serving.

Requests are built from kafka-python's own schemas (every field the version has, nested structs and arrays
included), filled from pools of hostile values: extreme integers, empty, long, control-character and internal
topic names, null where the schema allows it, garbage and real record batches. A third of the frames are then
mutated at the byte level (a flipped byte, cut short, junk appended). A well-formed frame must get an answer
whose correlation id is its own and that decodes as the response of its version; only a broken frame may close
the connection, and a produce with acks=0 gets no answer. Requests that may wait (fetches, joins, timeouts) are
given two seconds, then left, which tests the broker's handling of a client that goes away mid-request too.
Each seed is printed on failure and replays the same frames.

Real clock: the kernel moves the bytes. `KAFKALITE_KAFKA_FUZZ_FRAMES` sets the frames per API version (default 3,
over 400 frames a seed); CI runs the default.
"""

from __future__ import annotations

import math
import os
import random
import struct
from typing import Any

import pytest
import trio

from kafkalite.cluster import Cluster
from kafkalite.common.records import Record, RecordBatch
from kafkalite.network.codec import FrameDecoder
from kafkalite.network.kafka.api import KafkaApi
from kafkalite.network.kafka.apis import APIS

FRAMES_PER_VERSION = int(os.environ.get("KAFKALITE_KAFKA_FUZZ_FRAMES", "3"))
CHECKED = "fuzz-checked"  # never named by a frame: its acknowledged records must survive
TARGET = "fuzz-target"  # named by frames, so handlers reach a real topic (which they may delete or alter)
WORKERS = 6
ANSWER_WAIT = 2.0

_INT_RANGES = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}
_STRINGS = ["", TARGET, TARGET, "no-such-topic", "__consumer_offsets", "a" * 300, "\x00\n\t", "ünïcødé", "*", ".."]
_TIMEOUT_FIELDS = ("timeout", "max_wait", "session_timeout", "rebalance_timeout")


def _kafka_batch(value: bytes) -> bytes:
    return RecordBatch.from_records([Record(b"k", value, 1_700_000_000_000)]).to_kafka_bytes()


def _integer(type_name: str, name: str, rng: random.Random) -> int:
    if type_name == "uint16":
        return rng.choice([0, 1, 65535, rng.randrange(65536)])
    bits = _INT_RANGES[type_name]
    low, high = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    if any(part in name for part in _TIMEOUT_FIELDS):  # mostly short, so that most requests answer in time
        return rng.choice([0, 1, 100, -1, high])
    return rng.choice([0, 0, 1, 2, 3, -1, -2, low, high, rng.randint(low, high)])


def _primitive(type_name: str, name: str, nullable: bool, rng: random.Random) -> Any:
    if nullable and rng.random() < 0.15:
        return None
    if type_name in _INT_RANGES or type_name == "uint16":
        return _integer(type_name, name, rng)
    if type_name == "bool":
        return rng.random() < 0.5
    if type_name == "float64":
        return rng.choice([0.0, -1.0, math.inf, math.nan, rng.random()])
    if type_name == "string":
        return rng.choice(_STRINGS)
    if type_name in ("bytes", "records"):
        choices = [b"", rng.randbytes(rng.randrange(1, 80)), _kafka_batch(b"fuzz")]
        mutated = bytearray(_kafka_batch(b"fuzz"))
        mutated[rng.randrange(len(mutated))] ^= 0xFF
        return rng.choice([*choices, bytes(mutated)])
    raise LookupError(type_name)  # uuid and the like: the schema's default is kept


def _values(message_type: Any, fields: dict[str, Any], version: int, rng: random.Random, depth: int = 0
            ) -> dict[str, Any]:
    """Field values for one struct at `version`: every field the version has, untagged, hostile values."""
    values: dict[str, Any] = {}
    for name, field in fields.items():
        spec = field._json
        if not field.for_version_q(version) or "tag" in spec:
            continue
        type_name: str = spec["type"]
        nullable = field.nullable_for_version_q(version)
        try:
            if type_name.startswith("[]"):
                element = type_name[2:]
                if nullable and rng.random() < 0.15:
                    values[name] = None
                elif hasattr(field, "fields") and field.fields:
                    nested = getattr(message_type, element)
                    values[name] = [nested(**_values(nested, field.fields, version, rng, depth + 1))
                                    for _ in range(rng.choice([0, 1, 1, 2, 3]) if depth < 3 else 0)]
                else:
                    values[name] = [_primitive(element, name, False, rng) for _ in range(rng.choice([0, 1, 2]))]
            elif hasattr(field, "fields") and field.fields:
                nested = getattr(message_type, type_name)
                values[name] = nested(**_values(nested, field.fields, version, rng, depth + 1))
            else:
                values[name] = _primitive(type_name, name, nullable, rng)
        except LookupError:
            continue
    return values


def _mutated(frame: bytes, rng: random.Random) -> bytes:
    body = bytearray(frame[4:])
    kind = rng.randrange(3)
    if kind == 0 and len(body) > 8:
        body[rng.randrange(8, len(body))] ^= 1 << rng.randrange(8)  # past the api key, version, correlation id
    elif kind == 1 and len(body) > 8:
        del body[rng.randrange(8, len(body)):]
    else:
        body += rng.randbytes(rng.randrange(1, 20))
    return struct.pack(">i", len(body)) + bytes(body)


class Frame:
    """One frame to send and what its answer must be."""

    def __init__(self, key: int, api: KafkaApi, version: int, correlation_id: int, rng: random.Random) -> None:
        self.key, self.api, self.version, self.correlation_id = key, api, version, correlation_id
        request = None
        for _ in range(5):  # a value the codec cannot encode (a string too long for its length field): redraw
            try:
                request = api.request(version=version, **_values(api.request, api.request._struct.fields, version,
                                                                  rng))
                request.with_header(correlation_id=correlation_id, client_id=rng.choice(["fuzz", None, ""]))
                self.data = bytes(request.encode(header=True, framed=True))
                break
            except Exception:
                request = None
        if request is None:
            request = api.request(version=version)
            request.with_header(correlation_id=correlation_id, client_id="fuzz")
            self.data = bytes(request.encode(header=True, framed=True))
        self.silent = key == 0 and request.acks == 0  # acks=0: Kafka sends no response
        self.broken = rng.random() < 1 / 3
        if self.broken:
            self.data = _mutated(self.data, rng)

    def __repr__(self) -> str:
        return f"{self.api.request.name} v{self.version}{' (mutated)' if self.broken else ''}: {self.data[:200]!r}"


async def _send(port: int, data: bytes) -> list[bytes] | None:
    """The answer to a frame ([] if the broker closed the connection), or None if none came in time."""
    decoder = FrameDecoder()
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    async with stream:
        await stream.send_all(data)
        with trio.move_on_after(ANSWER_WAIT):
            while True:
                found = decoder.next_frame()
                if found is not None:
                    return [found]
                chunk = await stream.receive_some(65536)
                if not chunk:
                    return []
                decoder.feed(chunk)
    return None


def _check_answer(frame: Frame, answers: list[bytes] | None, problems: list[str]) -> None:
    if answers is None or frame.broken:
        return  # a slow request; or a broken frame, which may be answered or cut off
    if not answers:
        if not frame.silent:
            problems.append(f"closed the connection on a well-formed request: {frame!r}")
        return
    [answer] = answers
    if struct.unpack_from(">i", answer)[0] != frame.correlation_id:
        problems.append(f"answered with another correlation id: {frame!r}")
        return
    flexible = frame.api.request.flexible_version_q(frame.version) and frame.key != 18
    try:
        frame.api.response.decode(answer[5 if flexible else 4:], version=frame.version)
    except Exception as exc:
        problems.append(f"answer does not decode ({type(exc).__name__}: {exc}): {frame!r}")


@pytest.mark.parametrize("seed", range(3))
async def test_hostile_requests_of_every_api_are_answered_and_lose_nothing(seed: int) -> None:
    rng = random.Random(seed)
    frames = [Frame(key, api, version, correlation_id, rng)
              for correlation_id, (key, api, version) in enumerate(
                  (key, api, version) for key, api in sorted(APIS.items())
                  for version in range(api.versions[0], api.versions[1] + 1) for _ in range(FRAMES_PER_VERSION))]
    rng.shuffle(frames)
    problems: list[str] = []
    with trio.fail_after(120):
        async with Cluster(brokers=3, seed=seed) as cluster:
            await cluster.create_topic(CHECKED, partitions=1, replication_factor=3)
            await cluster.create_topic(TARGET, partitions=2, replication_factor=3)
            acknowledged = [b"acked-%d" % i for i in range(20)]
            for i in range(0, 20, 5):
                await cluster.produce(CHECKED, 0, [Record(None, value) for value in acknowledged[i:i + 5]])
            ports = [next(ep.port for ep in cluster.broker(b).endpoints if ep.listener == "KAFKA")
                     for b in cluster.broker_ids]
            sender, receiver = trio.open_memory_channel[Frame](len(frames))
            for frame in frames:
                sender.send_nowait(frame)
            sender.close()

            async def worker() -> None:
                async for frame in receiver:
                    _check_answer(frame, await _send(rng.choice(ports), frame.data), problems)

            async with trio.open_nursery() as nursery:
                for _ in range(WORKERS):
                    nursery.start_soon(worker)
            assert not problems, f"seed {seed}: {len(problems)} problems, the first: {problems[:5]}"
            for port in ports:  # every broker still answers
                assert await _send(port, _metadata_frame()), f"seed {seed}: the broker at {port} stopped answering"
            await cluster.wait_for_leader(CHECKED, 0)
            read = [record.value for _, record in await cluster.fetch_all(CHECKED, 0)]
            assert read[:20] == acknowledged, f"seed {seed}: acknowledged records changed: {read[:25]}"


def _metadata_frame() -> bytes:
    request = APIS[3].request(version=1, topics=None)
    request.with_header(correlation_id=10**6, client_id="check")
    return bytes(request.encode(header=True, framed=True))
