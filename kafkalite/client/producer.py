"""The producer: Kafka's RecordAccumulator and Sender, as Trio tasks.

`send()` only appends the record to its partition's open batch and returns a handle. Batches are drained when
they are full, have lingered `linger.ms`, or are being flushed: by the task that made them ready (a `send()`,
a response that freed a request slot), or by the sender task, which keeps the clock. A drain makes one
ProduceRequest per leader carrying one batch of every ready partition, with at most
`max.in.flight.requests.per.connection` requests in flight per broker, and hands it to that leader's lane,
whose tasks send the requests in order.

Ordering: a partition whose batch failed with a retriable error stops sending until its requests in flight
have all come back, then re-sends the failed batches in their original order. With idempotence (the
default) each batch carries the producer id, epoch and a per-partition base sequence fixed when it is first
sent, so a retry of a batch the leader already appended is answered with its original offset instead of
being written twice, and a lost batch shows up as a sequence gap instead of a silent hole.
"""

from __future__ import annotations

import logging
import math
from collections import deque
from collections.abc import Generator, Mapping, Sequence
from types import TracebackType
from typing import Any, NamedTuple, cast

import trio

from kafkalite.client.arguments import INT64_MAX, is_int
from kafkalite.client.config import producer_config
from kafkalite.client.metadata import STALE_METADATA_ERRORS, ClusterMetadata
from kafkalite.client.partitioner import StickyPartitioner, partition_for_key
from kafkalite.client.transport import ClientTransport, ClusterLike, OneBlock, RequestStream, open_transport
from kafkalite.common import errors
from kafkalite.common.clock import now_ms
from kafkalite.common.errors import KafkaError, MessageTooLargeError, OutOfOrderSequenceNumberError, \
    RequestTimedOutError
from kafkalite.common.nursery import leave_nursery
from kafkalite.common.records import NO_TIMESTAMP, RECORD_BATCH_OVERHEAD, Header, RecordBatch, Row
from kafkalite.common.timer import Timer
from kafkalite.common.types import TopicPartition
from kafkalite.network.requests import InitProducerIdRequest, InitProducerIdResponse, ProducePartitionData, \
    ProduceRequest, ProduceResponse

log = logging.getLogger(__name__)

# batch.size counts what goes on the wire, as Kafka's producer counts each record's exact size: a batch of
# 100-byte values holds as many records as it has room for, and never more than max.request.size allows.
# The payload is columnar (kafkalite.common.columnar): a record takes its key and value as msgpack packs them in
# their column's array, two bounds in each column, a null-mask byte for each (counted always: one null key or value
# gives the whole column a mask), an entry in the headers column (counted always, as one record with headers makes
# every record take one), and 8 bytes of timestamp delta in a batch that holds a timestamp of its own.
_EMPTY_BATCH_SIZE = RECORD_BATCH_OVERHEAD + 16 + 3 * 5  # the header, the payload's header and first two bounds,
#                                                          and the key, value and headers arrays' headers at their largest
_ROW_FRAMING = 2 * 8 + 2 + 1 + 1  # a row (0, None, value, ()) besides its value: bounds, masks, headers, nil key
_STAMPED_DELTA = 8


def _bytes_size(data: bytes | None) -> int:
    """msgpack's size of a key or value: nil, or bin8/16/32 with its length."""
    if data is None:
        return 1
    size = len(data)
    return size + (2 if size < 0x100 else 3 if size < 0x10000 else 5)


def _headers_size(headers: tuple[Header, ...]) -> int:
    """msgpack's size of a record's entry in the headers column: an array of (str key, bytes or nil value) pairs."""
    size = 1 if len(headers) < 16 else 3 if len(headers) < 0x10000 else 5
    for key, value in headers:
        encoded = len(key.encode())
        size += 1 + encoded + (1 if encoded < 32 else 2 if encoded < 0x100 else 3 if encoded < 0x10000 else 5)
        size += _bytes_size(value)
    return size


def _row_size(row: Row, stamped: bool) -> int:
    """The most `row` may take in a payload; `stamped` when its batch holds timestamp deltas."""
    _, key, value, headers = row
    return _ROW_FRAMING - 2 + _bytes_size(key) + _bytes_size(value) + _headers_size(headers) + \
        (_STAMPED_DELTA if stamped else 0)


def _as_bytes(name: str, data: object) -> bytes:
    if isinstance(data, (bytes, bytearray, memoryview)):
        return bytes(data)
    raise TypeError(f"{name} must be bytes or None, not {type(data).__name__}")


def _checked_headers(headers: Sequence[Header]) -> tuple[Header, ...]:
    """Headers as the batch stores them: (str, bytes or None) pairs, anything else refused by what it is."""
    if isinstance(headers, (str, bytes, Mapping)):
        raise TypeError(f"headers must be a sequence of (str, bytes or None) pairs, not {type(headers).__name__}")
    checked = []
    for header in headers:
        if not isinstance(header, (tuple, list)) or len(header) != 2 or not isinstance(header[0], str):
            raise TypeError(f"each header must be a (str, bytes or None) pair, not {header!r}")
        key, value = header
        checked.append((key, None if value is None else _as_bytes("header value", value)))
    return tuple(checked)


def _check_timestamp(timestamp: object) -> None:
    """For a timestamp that is not plainly a non-negative int: the slow half of `send()`'s check."""
    if not is_int(timestamp):
        raise TypeError(f"timestamp must be an int (epoch milliseconds) or None, not {type(timestamp).__name__}")
    if timestamp < 0:
        raise ValueError(f"Invalid timestamp: {timestamp}. Timestamp should always be non-negative or null.")
    if timestamp > INT64_MAX:
        raise ValueError(f"timestamp {timestamp} is past a Kafka long ({INT64_MAX})")


_LEAST_RETRY_WAIT_S = 0.001
"""The least wait before a batch or a producer id is asked for again, whatever retry.backoff.ms says. Over a
network each attempt costs a round trip; in-process none does, and a producer retrying a refusal at no cost
(NOT_ENOUGH_REPLICAS, a leader not yet known to have moved) kept Trio's autojump clock, and with it
delivery.timeout.ms and the cluster's own timers, from ever moving."""


class RecordMetadata(NamedTuple):
    topic: str
    partition: int
    offset: int  # -1 with acks=0: the broker does not say where the record went
    timestamp: int


class _ProducerBatch:
    """Records on their way to one partition, kept as the rows of the payload they will be encoded into.

    `send()` appends `(0, key, value, headers)`: a plain tuple is built several times faster than any object,
    and `RecordBatch.from_rows` packs the list as it is. Only a batch that holds a record with a timestamp of its
    own keeps `timestamps`, one per row, and pays for turning them into deltas when it is sealed.
    """

    __slots__ = ("tp", "rows", "timestamps", "size", "deadline", "created", "created_ms", "base_sequence", "encoded",
                 "attempts", "retry_at", "done", "base_offset", "log_append_time", "error", "last_error", "parent",
                 "parts", "maybe_appended", "sequence_owner")

    def __init__(self, tp: TopicPartition, created: float, delivery_timeout_s: float) -> None:
        self.tp = tp
        self.rows: list[Row] = []
        self.timestamps: list[int] | None = None
        self.size = _EMPTY_BATCH_SIZE
        self.created = created
        self.created_ms = now_ms()  # the timestamp of its records sent without one, read once per batch
        self.deadline = created + delivery_timeout_s
        self.base_sequence = -1
        self.sequence_owner: tuple[int, int] | None = None  # the producer id and epoch the sequence belongs to
        self.encoded: RecordBatch | None = None
        self.maybe_appended = False  # sent, and no answer since has shown that no attempt was appended
        self.attempts = 0
        self.retry_at = 0.0
        self.done = trio.Event()
        self.base_offset = -1
        self.log_append_time = -1
        self.error: KafkaError | None = None
        self.last_error: KafkaError | None = None  # what the last attempt failed with, while it is retried
        self.parent: _ProducerBatch | None = None
        self.parts: list[_ProducerBatch] | None = None  # one batch per record after a split

    def add_timestamp(self, timestamp: int) -> None:
        """The timestamp of the row just appended; the batch's earlier rows had none of their own."""
        if self.timestamps is None:
            self.timestamps = [NO_TIMESTAMP] * (len(self.rows) - 1)
        self.timestamps.append(timestamp)

    def complete(self, base_offset: int, log_append_time: int) -> None:
        self.base_offset = base_offset
        self.log_append_time = log_append_time
        self._finish()

    def fail(self, error: KafkaError) -> None:
        self.error = error
        self._finish()

    def _finish(self) -> None:
        self.done.set()
        parent = self.parent
        if parent is not None and all(part.done.is_set() for part in parent.parts or ()):
            parent.done.set()

    def split(self) -> list[_ProducerBatch]:
        """One batch per record, in order and keeping the sequence numbers, for a batch the broker found too large.

        The broker refused the whole batch, so the parts may take its sequence numbers one by one: the
        partition's sequence continues exactly as before and only the record that is too large fails.
        """
        parts = []
        for index, row in enumerate(self.rows):
            part = _ProducerBatch(self.tp, self.created, 0.0)
            part.deadline, part.created_ms, part.attempts = self.deadline, self.created_ms, self.attempts
            part.last_error = self.last_error
            part.rows.append(row)
            if self.timestamps is not None:
                part.timestamps = [self.timestamps[index]]
            part.size = _EMPTY_BATCH_SIZE + _row_size(row, self.timestamps is not None)
            part.base_sequence = self.base_sequence + index if self.base_sequence >= 0 else -1
            part.sequence_owner = self.sequence_owner
            part.parent = self
            parts.append(part)
        self.parts = parts
        return parts


class RecordHandle(tuple[_ProducerBatch, int]):
    """What `send()` returns; `await handle` gives the record's RecordMetadata or raises its delivery error.

    Underneath it is the pair (batch, index in the batch): `send()` builds one per record, and a tuple built with
    `tuple.__new__` costs half of what an object with two slots does.
    """

    __slots__ = ()

    @classmethod
    def failed(cls, tp: TopicPartition, error: KafkaError) -> RecordHandle:
        """A record refused before it reached a batch (too large): the error surfaces on the handle, as in Kafka."""
        batch = _ProducerBatch(tp, 0.0, 0.0)
        batch.fail(error)
        return _new_handle(cls, (batch, 0))

    def done(self) -> bool:
        return self[0].done.is_set()

    def result(self) -> RecordMetadata:
        """The outcome of a completed send (raises if it failed); RuntimeError while it is still pending."""
        batch, index = self
        if not batch.done.is_set():
            raise RuntimeError("the record has not been acknowledged yet")
        if batch.parts is not None:
            batch, index = batch.parts[index], 0
        if batch.error is not None:
            raise batch.error
        offset = batch.base_offset + index if batch.base_offset >= 0 else -1
        timestamp = batch.log_append_time
        if timestamp < 0:
            timestamp = batch.timestamps[index] if batch.timestamps is not None else NO_TIMESTAMP
            if timestamp < 0:
                timestamp = batch.created_ms
        return RecordMetadata(batch.tp.topic, batch.tp.partition, offset, timestamp)

    def __await__(self) -> Generator[Any, None, RecordMetadata]:
        yield from self[0].done.wait().__await__()
        return self.result()


_new_handle = tuple.__new__


# What the leader answers a batch numbered under a producer id or epoch the producer has since left behind.
_FOREIGN_SEQUENCE = frozenset(e.code for e in (
    errors.OUT_OF_ORDER_SEQUENCE_NUMBER, errors.UNKNOWN_PRODUCER_ID, errors.INVALID_PRODUCER_EPOCH))


def _sequence_owner(batch: _ProducerBatch) -> tuple[int, int] | None:
    """The producer id and epoch a batch's sequence numbers belong to; None before it is numbered."""
    return batch.sequence_owner if batch.base_sequence >= 0 else None


class _PartitionQueue:
    """One partition's batches: queued (the last one open), in flight, and failed ones awaiting their turn."""

    __slots__ = ("batches", "open", "in_flight", "retries", "next_sequence", "acked_sequence")

    def __init__(self) -> None:
        self.batches: deque[_ProducerBatch] = deque()
        self.open: _ProducerBatch | None = None  # the last queued batch, while it takes records
        self.in_flight: list[_ProducerBatch] = []
        self.retries: list[_ProducerBatch] = []
        self.next_sequence = 0
        # The last sequence the leader acknowledged under the current producer id: a batch refused for a gap right
        # after it shows that the log lost what it had acknowledged, instead of waiting on a batch being retried.
        self.acked_sequence = -1

    def pop(self) -> _ProducerBatch:
        """The oldest queued batch, taken out to be sent or expired: no record joins it any more."""
        batch = self.batches.popleft()
        if batch is self.open:
            self.open = None
        return batch

    def requeue_retries(self) -> None:
        """Put failed batches back in front, oldest first, once nothing of this partition is in flight."""
        if not self.in_flight and self.retries:
            self.retries.sort(key=lambda b: b.base_sequence)
            self.batches.extendleft(reversed(self.retries))
            self.retries.clear()


class _Lane:
    """The produce requests for one leader that are drained and counted in flight but not yet sent.

    Kafka's NetworkClient queues requests per connection and one I/O thread sends them; here one task per
    lane slot does, taking requests in the order they were drained. A lane has max.in.flight slots over TCP,
    where requests overlap on the wire, and one in-process, where the broker serves them one at a time anyway:
    a task per request there only paid for spawning it and for queueing on the connection's lock.
    """

    __slots__ = ("requests", "lot")

    def __init__(self) -> None:
        self.requests: deque[list[_ProducerBatch]] = deque()
        self.lot = trio.lowlevel.ParkingLot()

    def submit(self, batches: list[_ProducerBatch]) -> None:
        self.requests.append(batches)
        self.lot.unpark()


class Producer:
    """`async with Producer(cluster_or_bootstrap_servers, {"acks": "all"}, linger_ms=5) as producer:`.

    Config keys are Kafka's producer properties (see kafkalite.client.config); unknown keys or bad values
    raise InvalidConfigError naming the key.
    """

    def __init__(self, bootstrap: ClusterLike | str | ClientTransport, config: Mapping[str, Any] | None = None,
                 **kwargs: Any) -> None:
        self.config = producer_config({**(config or {}), **kwargs})
        cfg = self.config
        self.acks: int = cfg["acks"]
        self._linger_s = cfg["linger.ms"] / 1000
        # A batch closes at batch.size, and never grows past what one request may carry: a batch.size above
        # max.request.size would build batches the broker refuses, then split them into one request per record.
        self._batch_size: int = min(cfg["batch.size"], cfg["max.request.size"])
        self._max_in_flight: int = cfg["max.in.flight.requests.per.connection"]
        self._retries: int = cfg["retries"]
        self._delivery_timeout_s = self._delivery_timeout_ms() / 1000
        self._request_timeout_ms: int = cfg["request.timeout.ms"]
        self._retry_backoff_s = max(cfg["retry.backoff.ms"] / 1000, _LEAST_RETRY_WAIT_S)
        self._max_block_s = cfg["max.block.ms"] / 1000
        self._max_request_size: int = cfg["max.request.size"]
        self._max_record_size = self._max_request_size - _EMPTY_BATCH_SIZE  # alone in its batch
        self.idempotent = self._idempotence_wanted()
        self.producer_id = -1
        self.producer_epoch = -1
        self._transport = open_transport(bootstrap, "producer", cfg)
        self._block = OneBlock()
        # As Kafka's producer, it asks for its topics allowing their creation, and for a topic only while it is sent
        # to: one unused for metadata.max.idle.ms is forgotten (KIP-526), so a topic deleted after its last send
        # stays deleted.
        self.metadata = ClusterMetadata(self._transport, cfg["retry.backoff.ms"], cfg["metadata.max.age.ms"],
                                        allow_auto_topic_creation=True, max_idle_ms=cfg["metadata.max.idle.ms"],
                                        on_forget=self._forget_topics)
        self._topics = self.metadata.topics  # updated in place by every refresh
        self._partitioner = StickyPartitioner()
        self._queues: dict[TopicPartition, _PartitionQueue] = {}
        # The sequence state (next sequence, last acknowledged) of the partitions whose queues went with their
        # topic's metadata, under the current producer id: a partition's leader may still know the producer, and
        # would refuse its sequence starting over (Kafka's producer keeps every partition's sequence too).
        self._sequences: dict[TopicPartition, tuple[int, int]] = {}
        # The queues that may hold batches to send: draining and expiring walk these, not every partition the
        # producer ever wrote to (a keyed producer over hundreds of partitions drains after nearly every record).
        self._queued: dict[TopicPartition, _PartitionQueue] = {}
        # The queues with batches in flight, whose batches (and those failed, waiting for them to come back to be
        # retried) expire too: delivery.timeout.ms bounds the wait for a request the broker holds (KIP-91).
        self._sending: dict[TopicPartition, _PartitionQueue] = {}
        self._incomplete: set[_ProducerBatch] = set()
        self._in_flight: dict[int, int] = {}
        self._lanes: dict[int, _Lane] = {}
        self._wakeup = trio.Event()
        self._timer = Timer()  # wakes the sender for linger.ms, retry backoffs and delivery timeouts
        self._next_check = math.inf  # when the sender's timer wakes it next
        # A send yields for a batch that has lingered only after its task has had a turn as long as the one it
        # last gave the others by yielding here (the brokers' work on what it sent), and at least linger.ms. Where
        # the brokers' turn outlasted linger.ms (a slow machine), yielding for every lingered batch handed them most
        # of the time, and a keyed producer over hundreds of partitions sent one or two records a batch, each
        # costing the brokers a batch's work: a producer in its own process is never held back that way.
        self._quiet_until = -math.inf
        # No queued batch expires before this: a batch entering a queue lowers it, and only a walk of the queues
        # once it has passed raises it, so the sender looks for expired batches once per delivery.timeout.ms, not
        # at every wake-up.
        self._expiry_bound = math.inf
        self._backlog = False  # the last drain left batches behind that a request coming back may let go
        self._flushing = 0
        self._open = False  # between __aenter__ and __aexit__
        self._closed = False  # after __aexit__
        self._needs_producer_id = self.idempotent
        self._init_error: KafkaError | None = None  # why the last InitProducerId failed, while it is asked again
        # What every record pending or sent from now on fails with: as Kafka's producer, one refused a producer id
        # (not authorized, idempotence asked for of brokers that do not grant ids) does not send without one.
        self._fatal_error: KafkaError | None = None
        self._refreshing_metadata = False
        self._nursery: trio.Nursery | None = None
        self._nursery_manager: Any = None

    def _delivery_timeout_ms(self) -> int:
        """Kafka's rule (KIP-91): a batch may linger, then must get one full request before it can expire.

        A smaller delivery.timeout.ms would expire batches that were never given a chance: Kafka rejects it when
        set explicitly and raises it to linger.ms + request.timeout.ms when it is the default.
        """
        cfg = self.config
        floor: int = cfg["linger.ms"] + cfg["request.timeout.ms"]
        if cfg["delivery.timeout.ms"] >= floor:
            return cast(int, cfg["delivery.timeout.ms"])
        if cfg.explicitly_set("delivery.timeout.ms"):
            raise errors.InvalidConfigError(
                f"delivery.timeout.ms ({cfg['delivery.timeout.ms']}) should be equal to or larger than linger.ms + "
                f"request.timeout.ms ({cfg['linger.ms']} + {cfg['request.timeout.ms']})")
        log.warning("delivery.timeout.ms raised to linger.ms + request.timeout.ms = %d", floor)
        return floor

    def _idempotence_wanted(self) -> bool:
        """Kafka 3's rule: idempotence is on by default but yields to acks != all unless asked for explicitly."""
        cfg = self.config
        if not cfg["enable.idempotence"]:
            return False
        compatible = self.acks == -1 and self._max_in_flight <= 5 and self._retries > 0
        if not compatible and cfg.explicitly_set("enable.idempotence"):
            raise errors.InvalidConfigError(
                "enable.idempotence=true needs acks=all, retries > 0 and max.in.flight.requests.per.connection <= 5")
        return compatible

    # -- lifecycle ----------------------------------------------------------------------------------------------

    async def __aenter__(self) -> Producer:
        self._block.enter(self._transport.name)
        self._nursery_manager = trio.open_nursery()
        self._nursery = await self._nursery_manager.__aenter__()
        self._nursery.start_soon(self._timer.run)
        self._nursery.start_soon(self._run_sender)
        self._nursery.start_soon(self.metadata.refresh_when_old)
        self._open = True
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> bool | None:
        try:
            if exc_type is None:
                await self.flush()
        finally:
            self._open, self._closed = False, True
            closed = RequestTimedOutError("the producer was closed before the record was acknowledged")
            for batch in self._incomplete:
                batch.fail(closed)
            assert self._nursery is not None
            self._nursery.cancel_scope.cancel()
            try:
                left = await leave_nursery(self._nursery_manager, exc_type, exc, tb)
            finally:
                if self._transport.owned:
                    await self._transport.aclose()
        return left  # not from `finally`, which would swallow what flush() raised (and warns from Python 3.14)

    # -- sending ------------------------------------------------------------------------------------------------

    async def send(self, topic: str, value: bytes | None, key: bytes | None = None, partition: int | None = None,
                   headers: Sequence[Header] | None = None, timestamp: int | None = None) -> RecordHandle:
        """Queue a record; the handle resolves once the broker acknowledged it (per `acks`) or it failed.

        Waits only for metadata: for an answer that lists all of the topic's partitions, and for `partition` if
        the last answer did not have it (it may have been added since), as Kafka's producer does, up to
        max.block.ms; then raises UNKNOWN_TOPIC_OR_PARTITION, or NETWORK_EXCEPTION naming the servers tried if no
        broker answered. Arguments that can never succeed raise at once: TypeError for a wrong type, ValueError
        for a negative partition or timestamp. A record without a timestamp gets the time its batch was opened, at
        most linger.ms before the send for a batch that leaves on time: reading the clock once per batch instead
        of once per record is a fifth of this call's cost.
        """
        if not self._open:
            raise RuntimeError("Cannot perform operation after producer has been closed" if self._closed else
                               "the producer is not open: use `async with Producer(...)`")
        if type(value) is bytes:  # _ROW_FRAMING + _bytes_size(value), inlined on the client's hottest line
            size = len(value)
            size += _ROW_FRAMING + (2 if size < 0x100 else 3 if size < 0x10000 else 5)
        else:
            if value is not None:
                value = _as_bytes("value", value)
            size = _ROW_FRAMING + _bytes_size(value)
        if key is not None:
            if type(key) is not bytes:
                key = _as_bytes("key", key)
            size += _bytes_size(key) - 1
        record_headers: tuple[Header, ...] = ()
        if headers:
            record_headers = _checked_headers(headers)
            size += _headers_size(record_headers) - 1
        try:
            topic_metadata = self._topics.get(topic)
        except TypeError:  # unhashable: not a topic name, which _wait_for_partition says
            topic_metadata = None
        num_partitions = topic_metadata.partition_count if topic_metadata is not None else None
        waited = False  # for metadata: the wait counted as the topic's use (metadata.max.idle.ms) when it began
        if partition is None:
            if num_partitions is None:
                num_partitions = await self._wait_for_partition(topic, None)
                waited = True
            partition = partition_for_key(key, num_partitions) if key is not None else \
                self._partitioner.partition(topic, num_partitions)
        elif num_partitions is None or type(partition) is not int or not 0 <= partition < num_partitions:
            await self._wait_for_partition(topic, partition)
            waited = True
        if size > self._max_record_size:
            return RecordHandle.failed(TopicPartition(topic, partition), MessageTooLargeError(
                f"The message is {size + _EMPTY_BATCH_SIZE} bytes when serialized which is larger than "
                f"max.request.size ({self._max_request_size})"))
        queue = self._queues.get((topic, partition))  # type: ignore[call-overload]  # a plain tuple hashes alike
        batch = queue.open if queue is not None else None
        stamped = timestamp is not None or (batch is not None and batch.timestamps is not None)
        if stamped:
            if timestamp is not None and (type(timestamp) is not int or not 0 <= timestamp <= INT64_MAX):
                _check_timestamp(timestamp)
            size += _STAMPED_DELTA  # a delta from a timestamp of the record's own, or from another record's
            if batch is not None and batch.timestamps is None:  # the batch's earlier records get deltas too
                size += _STAMPED_DELTA * len(batch.rows)
        if batch is None or batch.size + size > self._batch_size:
            if self._fatal_error is not None:  # checked per batch, not per record: no batch stays open after it
                return RecordHandle.failed(TopicPartition(topic, partition), self._fatal_error)
            batch = self._open_batch(queue, topic, partition, waited)
            started = True
            if stamped:
                size = _row_size((0, key, value, record_headers), True)  # alone in a batch of its own
        else:
            started = False
        rows = batch.rows
        rows.append((0, key, value, record_headers))
        if stamped and (timestamp is not None or batch.timestamps is not None):  # not a new batch left plain
            batch.add_timestamp(NO_TIMESTAMP if timestamp is None else timestamp)
        batch.size += size
        drained = batch.size >= self._batch_size or (started and self._may_send_now(batch))
        if drained:
            self._drain_now()
        elif started and batch.created + self._linger_s < self._next_check:
            # The sender must look again by the time this batch has lingered: its timer is set here rather than by
            # waking it now, so the records that follow a drain join batches instead of each opening its own.
            self._next_check = batch.created + self._linger_s
            self._timer.schedule(self._next_check, self._wakeup)
        handle = _new_handle(RecordHandle, (batch, len(rows) - 1))
        if started and (drained or self._wakeup.is_set()  # started: batch.created is now
                        or batch.created >= max(self._next_check, self._quiet_until)):
            # Something is there to send (a batch made ready here, or one that has lingered) or the sender's timer
            # must be set: let the sender and the brokers run while records keep coming, as Kafka's sender thread
            # would. Not for every batch opened: a keyed producer over hundreds of partitions opens one per record
            # after each drain, and yielding for each let the brokers in so often that linger.ms ran out after a
            # few records a batch.
            await trio.lowlevel.checkpoint()
            resumed = trio.current_time()
            self._quiet_until = resumed + max(self._linger_s, resumed - batch.created)
        return handle

    async def _wait_for_partition(self, topic: str, partition: int | None) -> int:
        """The topic's partition count once metadata lists all partitions, `partition` among them (max.block.ms).

        `send()` comes here only off its fast path: for a topic or partition the metadata does not show yet, or
        for arguments of the wrong type, which are checked here rather than on every record.
        """
        if not isinstance(topic, str):
            raise TypeError(f"topic must be a str, not {type(topic).__name__}")
        if partition is not None:
            if not is_int(partition):
                raise TypeError(f"partition must be an int or None, not {type(partition).__name__}")
            if partition < 0:
                raise ValueError(f"Invalid partition: {partition}. Partition number should always be non-negative "
                                 "or null.")
        began = trio.current_time()
        count = await self.metadata.wait_for_partition_count(topic, self._max_block_s, partition)
        # The send's use of the topic is when it began, as Kafka's producer counts it: a topic sent to once expires
        # from the metadata metadata.max.idle.ms after that send, not after the answer it waited for.
        self.metadata.use(topic, began)
        return count

    def _open_batch(self, queue: _PartitionQueue | None, topic: str, partition: int, waited: bool) -> _ProducerBatch:
        tp = TopicPartition(topic, partition)
        if queue is None:
            queue = self._queues[tp] = _PartitionQueue()
            sequences = self._sequences.pop(tp, None)
            if sequences is not None:
                queue.next_sequence, queue.acked_sequence = sequences
        batch = _ProducerBatch(tp, trio.current_time(), self._delivery_timeout_s)
        if not waited:
            # The topic's use, for metadata.max.idle.ms: per batch rather than per record, which is as good, since a
            # record joining an open batch comes at most linger.ms after it opened (or waits for a leader, and a
            # topic forgotten meanwhile is asked for again by the refresh that looks for one). A send that waited
            # for metadata counted its use when it began.
            self.metadata.use(topic, batch.created)
        queue.batches.append(batch)
        self._queued[tp] = queue
        queue.open = batch
        self._incomplete.add(batch)
        self._expiry_bound = min(self._expiry_bound, batch.deadline)
        return batch

    def _may_send_now(self, opened: _ProducerBatch) -> bool:
        """Whether opening this batch can make a drain send something, or needs one to look for a leader.

        It can when it leaves its partition's previous batch behind (that batch is ready then), when the producer
        is flushing, or when its partition's leader is unknown. A batch opened alone only waits out linger.ms;
        should its leader be ready on account of another partition, the drain that sends it takes this one along.
        Draining after every opened batch walked every queued partition per record of a keyed producer.
        """
        return len(self._queues[opened.tp].batches) > 1 or bool(self._flushing) \
            or self.metadata.leader_for(opened.tp) is None

    async def flush(self) -> None:
        """Send everything queued now, without lingering, and wait until each record succeeded or failed."""
        pending = list(self._incomplete)
        self._flushing += 1
        self._wakeup.set()
        try:
            for batch in pending:
                await batch.done.wait()
        finally:
            self._flushing -= 1

    # -- the sender ---------------------------------------------------------------------------------------------

    async def _run_sender(self) -> None:
        while True:
            self._wakeup = trio.Event()
            now = trio.current_time()
            self._expire_batches(now)
            if self._needs_producer_id and not sum(self._in_flight.values()):
                await self._init_producer_id()
                continue
            # A new producer id waits for the requests in flight to come back; nothing is sent meanwhile, but
            # batches still expire on time.
            self._next_check = next_check = self._expiry_bound if self._needs_producer_id else self._drain(now)
            entry = self._timer.schedule(next_check, self._wakeup) if next_check < math.inf else None
            await self._wakeup.wait()
            if entry is not None:
                self._timer.cancel(entry)

    def _drain_now(self) -> None:
        """Drain from the task that made a batch ready: a send that filled or opened one, a response that freed a slot.

        Waking the sender task for it cost a scheduling round per batch. The sender keeps the clock (linger.ms,
        retry backoffs, delivery timeouts) and is woken only when something is due before its timer fires.
        """
        if self._needs_producer_id:
            self._wakeup.set()
            return
        if self._drain(trio.current_time()) < self._next_check:
            self._wakeup.set()

    def _drain(self, now: float) -> float:
        """Send the batches of every leader with a ready batch, one request per leader; returns when to look again.

        As Kafka's RecordAccumulator drains a ready node: once one of a leader's batches is full or has lingered
        long enough, every partition's first batch for that leader rides in the same request, lingered or not.
        A keyed producer spread over many partitions would otherwise send a request per partition, each batch
        alone, as its linger ran out.
        """
        next_check = self._expiry_bound
        ready: dict[int, list[tuple[_PartitionQueue, _ProducerBatch]]] = {}
        due: set[int] = set()
        self._backlog = False
        for tp, queue in list(self._queued.items()):
            if not queue.batches:
                del self._queued[tp]
                continue
            if queue.retries:
                continue
            batch = queue.batches[0]
            if batch.retry_at > now:
                next_check = min(next_check, batch.retry_at)
                continue
            lingered = (len(queue.batches) > 1 or batch.size >= self._batch_size or self._flushing
                        or now >= batch.created + self._linger_s)
            if not lingered:
                next_check = min(next_check, batch.created + self._linger_s)
            found = self.metadata.leader_for(tp)
            if found is None:
                self._refresh_metadata_soon()
                continue
            if self.idempotent and (len(queue.in_flight) >= 5 or queue.in_flight and queue.acked_sequence < 0):
                # At most five in flight, and only one until the leader has acknowledged a batch under this
                # producer id: it takes any first sequence from an id it does not know, so a second batch served
                # while the first is refused and retried would be written ahead of it, and the first never.
                self._backlog = True
                continue
            ready.setdefault(found.leader, []).append((queue, batch))
            if lingered:
                due.add(found.leader)
        for leader, entries in ready.items():
            if leader not in due:
                continue
            if self._in_flight.get(leader, 0) >= self._max_in_flight:
                self._backlog = True
                continue
            batches: list[_ProducerBatch] = []
            request_size = 0
            for queue, batch in entries:
                if batches and request_size + batch.size > self._max_request_size:
                    next_check = now
                    break
                request_size += batch.size
                queue.pop()
                if queue.batches:  # the next one goes in a later request, at the latest when this one is answered
                    self._backlog = True
                queue.in_flight.append(batch)
                self._sending[batch.tp] = queue
                batches.append(self._seal(queue, batch))
            self._in_flight[leader] = self._in_flight.get(leader, 0) + 1
            lane = self._lanes.get(leader)
            if lane is None:
                lane = self._lanes[leader] = _Lane()
                assert self._nursery is not None
                for _ in range(1 if self._transport.serial else self._max_in_flight):
                    self._nursery.start_soon(self._run_lane, leader, lane)
            lane.submit(batches)
        return next_check

    async def _run_lane(self, leader: int, lane: _Lane) -> None:
        """Send the lane's requests in order over one stream to the leader, opened again whenever it breaks."""
        requests = lane.requests
        while True:
            while not requests:
                await lane.lot.park()
            # reconnect.backoff.ms after the leader could not be reached; waited before taking a request, as the
            # lane's tasks (over TCP, one per request in flight) wake from it in no set order
            await self._transport.ready(leader)
            if not requests:
                continue
            batches = requests.popleft()
            opened = False
            try:
                with self._transport.stream(leader) as stream:
                    opened = True
                    await self._send_produce(stream, leader, batches)
                    while requests:
                        await self._send_produce(stream, leader, requests.popleft())
            except KafkaError as exc:  # the request in progress when the stream broke has failed with it
                if not opened:  # the leader could not be reached: the request fails as its send would have
                    self._complete_request(leader, batches, exc)

    def _seal(self, queue: _PartitionQueue, batch: _ProducerBatch) -> _ProducerBatch:
        """Fix the batch's sequence and encode it, once: retries re-send the very same bytes."""
        if batch.encoded is None:
            producer_id = producer_epoch = -1
            if self.idempotent and self.producer_id >= 0:
                producer_id, producer_epoch = self.producer_id, self.producer_epoch
                if batch.base_sequence < 0:
                    batch.sequence_owner = (producer_id, producer_epoch)
                    batch.base_sequence = queue.next_sequence
                    queue.next_sequence += len(batch.rows)
            batch.encoded = RecordBatch.from_rows(batch.rows, timestamps=batch.timestamps, producer_id=producer_id,
                                                  producer_epoch=producer_epoch, base_sequence=batch.base_sequence,
                                                  default_timestamp=batch.created_ms)
        if batch.attempts == 0:
            num_partitions = self.metadata.partition_count(batch.tp.topic)
            if num_partitions is not None:
                self._partitioner.on_batch_sent(batch.tp.topic, batch.tp.partition, num_partitions)
        batch.attempts += 1
        batch.maybe_appended = True
        return batch

    async def _send_produce(self, stream: RequestStream, leader: int, batches: list[_ProducerBatch]) -> None:
        request = ProduceRequest(self.acks, self._request_timeout_ms, [
            ProducePartitionData(b.tp.topic, b.tp.partition, [b.encoded]) for b in batches])  # type: ignore[list-item]
        outcome: ProduceResponse | KafkaError | None = None
        try:
            outcome = await stream.send(request)
        except KafkaError as exc:
            outcome = exc
        finally:  # also when the stream is cancelled under the request: it broke, or the request timed out
            self._complete_request(leader, batches, stream.failure() if outcome is None else outcome)

    def _complete_request(self, leader: int, batches: list[_ProducerBatch],
                          outcome: ProduceResponse | KafkaError) -> None:
        try:
            if isinstance(outcome, KafkaError):
                for batch in batches:
                    if not batch.done.is_set():  # a producer closing has failed every batch already
                        self._on_failure(batch, outcome)
                return
            results = {(r.topic, r.partition): r for r in outcome.partitions}
            for batch in batches:
                result = results.get(batch.tp)
                if batch.done.is_set():  # expired while in flight: its outcome was reported as unknown
                    continue
                if result is None:
                    self._on_failure(batch, errors.InvalidRequestError(f"no response for {batch.tp}"))
                elif result.error_code == errors.NONE.code:
                    self._acknowledged(batch, result.base_offset if self.acks else -1, result.log_append_time)
                elif result.error_code == errors.DUPLICATE_SEQUENCE_NUMBER.code:
                    # Appended by an attempt whose answer was lost, so long ago that the leader no longer holds
                    # the batch to say where: written, at an unknown offset (Kafka's producer does the same).
                    self._acknowledged(batch, -1, -1)
                else:
                    error = errors.for_code(result.error_code).exception(result.error_message)
                    self._on_failure(batch, error)
        finally:
            self._in_flight[leader] -= 1
            retrying = False
            for batch in batches:
                queue = self._queues[batch.tp]
                queue.in_flight.remove(batch)
                if not queue.in_flight:
                    del self._sending[batch.tp]
                if queue.retries and not queue.in_flight:
                    retrying = True
                    queue.requeue_retries()
                if queue.batches:
                    self._queued[batch.tp] = queue
            # What this answer can make sendable: batches left behind (by the in-flight limits, or queued behind the
            # ones sent) and retries; or the sender waits for the requests in flight to come back before it asks
            # for a new producer id. Anything else waits out linger.ms, which the sender's timer already covers.
            if self._backlog or retrying or self._needs_producer_id:
                self._drain_now()

    def _acknowledged(self, batch: _ProducerBatch, base_offset: int, log_append_time: int) -> None:
        self._incomplete.discard(batch)
        batch.complete(base_offset, log_append_time)
        if batch.base_sequence >= 0 and batch.sequence_owner == (self.producer_id, self.producer_epoch):
            queue = self._queues[batch.tp]
            queue.acked_sequence = max(queue.acked_sequence, batch.base_sequence + len(batch.rows) - 1)

    def _on_failure(self, batch: _ProducerBatch, error: KafkaError) -> None:
        queue = self._queues[batch.tp]
        if not error.retriable or error.code in _FOREIGN_SEQUENCE:
            # The leader refused the very bytes, or checked its producer state and found the batch missing: no
            # attempt of it was appended. A retriable refusal (NOT_ENOUGH_REPLICAS, NOT_LEADER_OR_FOLLOWER) says
            # nothing of an earlier attempt whose answer was lost: the leader checks those before duplicates.
            batch.maybe_appended = False
        retriable = error.retriable
        if self.idempotent and error.code in _FOREIGN_SEQUENCE:
            owner = _sequence_owner(batch)
            if owner not in (None, (self.producer_id, self.producer_epoch)):
                # Kept under the previous producer id because its outcome was unknown, and now known not to have
                # been appended: it takes its place in the current id's sequence, and is retried there.
                batch.base_sequence = -1
                batch.encoded = None
                error = errors.OutOfOrderSequenceNumberError(error.message)
                retriable = True
            elif error.code == errors.UNKNOWN_PRODUCER_ID.code or self._log_lost_sequences(queue, batch, error):
                # The leader lost the producer's state, or its log lost batches it had acknowledged (an unclean
                # election): no retry under this id can fill the gap. As Kafka's producer bumps its epoch, this one
                # takes a new id, under which the batch is numbered again and retried.
                batch.base_sequence = -1
                batch.encoded = None
                self._needs_producer_id = retriable = True
            elif isinstance(error, OutOfOrderSequenceNumberError):
                retriable = True  # an earlier batch is being retried, and this one follows it
        now = trio.current_time()
        if isinstance(error, MessageTooLargeError) and len(batch.rows) > 1:
            self._incomplete.discard(batch)
            parts = batch.split()
            self._incomplete.update(parts)
            queue.retries.extend(parts)
            return
        if retriable and batch.attempts <= self._retries and now < batch.deadline:
            log.info("%s: retrying batch of %d records for %s after %s", self._transport.name,
                     len(batch.rows), batch.tp, error)
            batch.retry_at = now + self._retry_backoff_s
            batch.last_error = error
            queue.retries.append(batch)
            if error.code in STALE_METADATA_ERRORS:
                self._refresh_metadata_soon()
            return
        if retriable and now >= batch.deadline:
            batch.last_error = error
            error = self._expired(batch)
        self._fail_batch(batch, error)

    @staticmethod
    def _log_lost_sequences(queue: _PartitionQueue, batch: _ProducerBatch, error: KafkaError) -> bool:
        """Whether an OUT_OF_ORDER_SEQUENCE_NUMBER for a batch of the current producer id is a gap in the log.

        It is when the batch follows the last one acknowledged and no earlier one is in flight (Kafka's
        TransactionManager.canRetry): nothing on its way can fill the gap. Otherwise it waits for those before it.
        """
        return isinstance(error, OutOfOrderSequenceNumberError) and \
            batch.base_sequence == queue.acked_sequence + 1 and \
            not any(other.sequence_owner == batch.sequence_owner and 0 <= other.base_sequence < batch.base_sequence
                    for other in queue.in_flight)

    def _fail_batch(self, batch: _ProducerBatch, error: KafkaError) -> None:
        """Give up on a batch. Its sequence numbers must not leave a gap the broker would wait on forever.

        So the producer moves to a new producer id, as Kafka's does since KIP-360, rather than renumber the later
        batches down into the gap: some of them may be in flight already, or appended by a leader that took the
        producer for new, and a sequence reused for other records is answered with the first records' offsets.
        A batch numbered under an id already left behind leaves no gap in the current one.
        """
        self._incomplete.discard(batch)
        batch.fail(error)
        if self.idempotent and batch.base_sequence >= 0 and \
                _sequence_owner(batch) == (self.producer_id, self.producer_epoch):
            self._needs_producer_id = True

    def _expire_batches(self, now: float) -> None:
        """Fail the batches out of delivery.timeout.ms, oldest deadline first, across partitions.

        Within a queue deadlines only grow from the front (a batch is created after those before it; retries go
        back in front in their order), so the expired queued batches are the front ones, and the earliest deadline
        of the batches left is a front one too. Batches in flight expire as well, as Kafka's Sender expires them
        (KIP-91: delivery.timeout.ms bounds the time to report an outcome, and a broker may hold a request for all
        of request.timeout.ms): their outcome is reported as unknown and a later answer ignored, and the producer
        takes a new id (`_fail_batch`). So do failed batches waiting for their partition's requests to come back.
        """
        if now < self._expiry_bound:
            return
        expired: list[tuple[_ProducerBatch, bool]] = []  # and whether it is in flight
        bound = math.inf
        for queue in self._queued.values():
            while queue.batches and queue.batches[0].deadline <= now:
                expired.append((queue.pop(), False))
            if queue.batches:
                bound = min(bound, queue.batches[0].deadline)
        for queue in self._sending.values():
            for batch in queue.in_flight:
                if batch.done.is_set():  # expired already, its answer still to come
                    continue
                if batch.deadline <= now:
                    expired.append((batch, True))
                else:
                    bound = min(bound, batch.deadline)
            waiting: list[_ProducerBatch] = []
            for batch in queue.retries:
                if batch.deadline <= now:
                    expired.append((batch, False))
                else:
                    waiting.append(batch)
                    bound = min(bound, batch.deadline)
            queue.retries[:] = waiting
        self._expiry_bound = bound
        expired.sort(key=lambda entry: entry[0].deadline)
        for batch, in_flight in expired:
            self._fail_batch(batch, self._expired(batch, in_flight))

    def _expired(self, batch: _ProducerBatch, in_flight: bool = False) -> KafkaError:
        """What a batch out of delivery.timeout.ms fails with: the error it was being retried after, if any.

        Its type is that error's, so that `except NotEnoughReplicasError` catches a producer that gave up on
        too small an ISR, and its message says both that time ran out and why the attempts failed. A batch
        never sent gets REQUEST_TIMED_OUT, saying so when the partition had no leader to send it to, or the error
        InitProducerId keeps failing with when the producer had no id to send it with. One expired `in_flight`
        says that its last attempt is unanswered: the records may be written yet.
        """
        reason = (f"Expiring {len(batch.rows)} record(s) for {batch.tp}: {self._delivery_timeout_s * 1000:.0f} ms "
                  "has passed since batch creation")
        last = batch.last_error
        if in_flight:
            reason += f", after {batch.attempts} attempt(s), the last unanswered so far (it may yet be written)"
            if last is not None:
                reason += f", the one before failing with {last}"
        elif last is not None:
            reason += f", after {batch.attempts} attempt(s), the last failing with {last}"
        else:
            if self.metadata.leader_for(batch.tp) is None:
                reason += f", and no leader of {batch.tp} was known to send them to"
            if self._needs_producer_id and self._init_error is not None:
                last = self._init_error
                reason += f", and the producer had no producer id to send them with, InitProducerId failing with {last}"
        if last is None:
            return RequestTimedOutError(reason)
        error = type(last)(reason)
        error.__cause__ = last
        return error

    def _refresh_metadata_soon(self) -> None:
        if not self._refreshing_metadata and self._nursery is not None:
            self._refreshing_metadata = True
            self._nursery.start_soon(self._refresh_metadata)

    async def _refresh_metadata(self) -> None:
        """Refresh for the batches waiting for a leader: their topics count as used, as Kafka's Sender adds the
        topics of batches without a leader back to the metadata, should they have been forgotten meanwhile."""
        try:
            await self.metadata.refresh({tp.topic for tp, queue in self._queued.items() if queue.batches})
        except KafkaError as exc:
            log.info("%s: metadata refresh failed: %s", self._transport.name, exc)
        finally:
            self._refreshing_metadata = False
            self._wakeup.set()

    def _forget_topics(self, topics: set[str]) -> None:
        """Drop the queues of partitions of `topics` (forgotten by the metadata) with nothing queued, in flight or
        awaiting a retry, keeping their sequence state, so that a producer sending to ever new topics does not keep
        a queue for every partition it ever sent to."""
        for tp, queue in list(self._queues.items()):
            if tp.topic in topics and not (queue.batches or queue.in_flight or queue.retries):
                del self._queues[tp]
                self._queued.pop(tp, None)
                if queue.next_sequence:
                    self._sequences[tp] = (queue.next_sequence, queue.acked_sequence)
        for topic in topics:
            self._partitioner.forget(topic)

    def _fail_fatally(self, error: KafkaError) -> None:
        """Fail every pending record with `error`, and every record sent from now on (`send()` checks)."""
        log.error("%s: %s; every record fails with it", self._transport.name, error)
        self._fatal_error = error
        self._needs_producer_id = False
        for queue in self._queues.values():
            queue.batches.clear()
            queue.open = None
            queue.retries.clear()
        self._queued.clear()
        for batch in self._incomplete:
            batch.fail(error)
        self._incomplete.clear()

    async def _init_producer_id(self) -> None:
        """Get a producer id and epoch; start every partition's sequence over under them.

        Except for a batch whose outcome is unknown (sent, and its answer lost): it keeps the producer id and
        sequence it was sent with, so that if the leader did append it, its retry is recognised as a duplicate
        and answered with its offset (Kafka keeps such sequences too, KIP-360). Renumbered, it would be appended
        a second time. If it was not appended, the leader says so (OUT_OF_ORDER_SEQUENCE_NUMBER for the gap the
        expired batch left), and only then does it take a sequence under the new id.

        A broker that does not serve InitProducerId gets a non-idempotent producer rather than none at all, unless
        enable.idempotence was set explicitly: as in Kafka, idempotence asked for is never dropped silently, and its
        refusal is fatal, as are the errors no retry cures (not authorized, or unexpected).
        """
        while True:
            try:
                response: InitProducerIdResponse = await self._transport.send_to_any(
                    InitProducerIdRequest(transaction_timeout_ms=self.config["delivery.timeout.ms"]))
            except KafkaError as exc:
                failure = exc
            else:
                error = errors.for_code(response.error_code)
                if error is errors.NONE:
                    self.producer_id, self.producer_epoch = response.producer_id, response.producer_epoch
                    break
                message = response.error_message or error.description
                if error in (errors.UNSUPPORTED_VERSION, errors.INVALID_REQUEST):  # a broker that does not serve it
                    if not self.config.explicitly_set("enable.idempotence"):
                        log.warning("%s: the brokers do not grant producer ids (%s: %s); producing without "
                                    "idempotence", self._transport.name, error, response.error_message)
                        self.idempotent = False
                        break
                    message += "; enable.idempotence=true needs brokers that grant producer ids"
                if not error.retriable:
                    self._fail_fatally(error.exception(f"InitProducerId refused the producer an id: {message}"))
                    return
                failure = error.exception(message)
            self._init_error = failure
            log.info("%s: InitProducerId failed: %s; retrying", self._transport.name, failure)
            retry_at = trio.current_time() + self._retry_backoff_s
            while trio.current_time() < retry_at:  # batches expire on time meanwhile
                await trio.sleep_until(min(retry_at, self._expiry_bound))
                self._expire_batches(trio.current_time())
        self._init_error = None
        self._sequences.clear()
        for queue in self._queues.values():
            queue.next_sequence = 0
            queue.acked_sequence = -1
            for batch in queue.batches:
                if not batch.maybe_appended:
                    batch.base_sequence = -1
                    batch.encoded = None
        self._needs_producer_id = False
