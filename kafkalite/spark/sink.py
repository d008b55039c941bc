"""The sink: `df.write.format("kafkalite")` and `df.writeStream.format("kafkalite")`, as Spark's Kafka sink.

Columns: `value` (required), `key`, `topic` (the `topic` option wins over it: the column is then not looked at),
`partition`, `headers`, and `timestamp` (the record's; a null one, or none, is the producer's clock), as Spark's
KafkaWriter types them: key and value binary or string (written as UTF-8), the timestamp a timestamp or a double
counting seconds. Each Spark task writes its rows with one idempotent producer, `acks=all` unless `kafka.acks`
says otherwise, waits until every record is acknowledged, and fails with the broker's error (NOT_ENOUGH_REPLICAS,
say) if any record was not: a job never succeeds having silently dropped rows. Its commit message says what it
wrote, per partition. As with Spark's Kafka sink the guarantee is at-least-once: a task Spark retries writes its
rows again.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import repeat
from typing import Any

import pyarrow as pa
import trio
from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage
from pyspark.sql.types import (
    ArrayType, BinaryType, DataType, DoubleType, IntegerType, StringType, StructType, TimestampType,
)

from kafkalite.client import Producer, RecordHandle, TopicPartition
from kafkalite.spark import bridge
from kafkalite.spark.lookup import check_reachable
from kafkalite.spark.options import OptionError, SinkOptions

log = logging.getLogger(__name__)

_HEADERS_TYPE = ArrayType(StructType().add("key", StringType()).add("value", BinaryType()))
_COLUMN_TYPES: dict[str, tuple[DataType, ...]] = {
    "value": (BinaryType(), StringType()),
    "key": (BinaryType(), StringType()),
    "topic": (StringType(),),
    "partition": (IntegerType(),),
    "headers": (_HEADERS_TYPE,),
    "timestamp": (TimestampType(), DoubleType()),  # Spark's KafkaWriter.timestampExpression (SPARK-50160)
}


def _same_type(actual: DataType, expected: DataType) -> bool:
    """Types equal up to nullability, which Spark's plans set as they please."""
    if isinstance(actual, ArrayType) and isinstance(expected, ArrayType):
        return _same_type(actual.elementType, expected.elementType)
    if isinstance(actual, StructType) and isinstance(expected, StructType):
        return [f.name for f in actual.fields] == [f.name for f in expected.fields] and all(
            _same_type(a.dataType, e.dataType) for a, e in zip(actual.fields, expected.fields))
    return actual == expected


def check_sink(options: SinkOptions, schema: StructType) -> SinkOptions:
    """Check the DataFrame's columns and that the cluster answers, before Spark starts writing."""
    names = schema.fieldNames()
    if "value" not in names:
        raise ValueError(f"kafkalite sink: the DataFrame needs a value column (binary or string); it has {names}")
    if options.topic is None and "topic" not in names:
        raise OptionError("topic", "(missing)", "set the topic option or give the DataFrame a topic column")
    for column in schema.fields:
        if column.name == "topic" and options.topic is not None:
            continue  # as Spark's KafkaWriter.topicExpression, which takes the option as a literal
        allowed = _COLUMN_TYPES.get(column.name)
        if allowed is not None and not any(_same_type(column.dataType, t) for t in allowed):
            raise ValueError(f"kafkalite sink: column {column.name} is {column.dataType.simpleString()}; it must be "
                             f"{' or '.join(t.simpleString() for t in allowed)}")
    check_reachable(options.bootstrap, options.client_config)
    return options


@dataclass
class WrittenMessage(WriterCommitMessage):
    """What one task wrote: per partition, the number of records and the first and last offset."""

    written: dict[TopicPartition, tuple[int, int, int]] = field(default_factory=dict)

    @property
    def records(self) -> int:
        return sum(count for count, _, _ in self.written.values())


def _column(batch: pa.RecordBatch, name: str) -> Any:
    """A column as Python values (strings as UTF-8 bytes for key and value), or Nones if the batch lacks it."""
    index = batch.schema.get_field_index(name)
    if index < 0:
        return repeat(None)
    column = batch.column(index)
    if name in ("key", "value") and pa.types.is_string(column.type):
        column = column.cast(pa.binary())
    return column.to_pylist()


def _timestamps(batch: pa.RecordBatch) -> Any:
    """The timestamp column as each record's epoch milliseconds, None (the producer's clock) where null or absent.

    As Spark's Kafka sink (KafkaRowWriter) takes it: cast to a timestamp (a double counts seconds since the epoch),
    whose microseconds are divided by 1000 as Scala divides a Long, toward zero.
    """
    index = batch.schema.get_field_index("timestamp")
    if index < 0:
        return repeat(None)
    column = batch.column(index)
    if pa.types.is_timestamp(column.type):
        micros = column.cast(pa.int64()).to_pylist()
    else:
        micros = [None if seconds is None else _micros(seconds) for seconds in column.to_pylist()]
    return [None if us is None else us // 1000 if us >= 0 else -(-us // 1000) for us in micros]


def _micros(seconds: float) -> int:
    micros = seconds * 1_000_000
    # NaN and the infinities fail the comparison too. Spark's cast fails on each (ANSI mode, Spark 4's default);
    # written, a record beyond a long's microseconds could not be read back by the source.
    if not -2**63 <= micros < 2**63:
        raise ValueError(f"kafkalite sink: a row's timestamp is {seconds} seconds, beyond what a timestamp holds "
                         "(microseconds since the epoch in a long)")
    return int(micros)


async def _write(options: SinkOptions, batches: Iterator[pa.RecordBatch]) -> WrittenMessage:
    handles: list[RecordHandle] = []
    async with Producer(options.bootstrap, {"acks": "all", **options.client_config}) as producer:
        send = producer.send
        while (batch := await trio.to_thread.run_sync(next, batches, None)) is not None:
            topics = repeat(options.topic) if options.topic is not None else _column(batch, "topic")
            for value, key, topic, partition, record_headers, timestamp in zip(
                    _column(batch, "value"), _column(batch, "key"), topics, _column(batch, "partition"),
                    _column(batch, "headers"), _timestamps(batch)):
                if topic is None:
                    raise ValueError("kafkalite sink: a row has a null topic and no topic option is set")
                pairs = [(h["key"], h["value"]) for h in record_headers] if record_headers else None
                if pairs and any(name is None for name, _ in pairs):
                    raise ValueError(f"kafkalite sink: a row for topic {topic} has a header with a null key in its "
                                     "headers column; a record header needs a key")
                handles.append(await send(topic, value, key, partition, pairs, timestamp))
    message = WrittenMessage()
    for handle in handles:  # raises the first record's error: the task, and so the job, fails with it
        metadata = handle.result()
        tp = TopicPartition(metadata.topic, metadata.partition)
        count, first, _ = message.written.get(tp, (0, metadata.offset, 0))
        message.written[tp] = (count + 1, first, metadata.offset)
    return message


class _Writer:
    def __init__(self, options: SinkOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WrittenMessage:
        return bridge.run(_write, self.options, iterator)


def _log_commit(messages: list[WriterCommitMessage | None], what: str) -> None:
    records = sum(m.records for m in messages if isinstance(m, WrittenMessage))
    log.info("kafkalite sink: %s wrote %d records in %d tasks", what, records, len(messages))


class BatchWriter(_Writer, DataSourceArrowWriter):
    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        _log_commit(messages, "the job")


class StreamWriter(_Writer, DataSourceStreamArrowWriter):
    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        _log_commit(messages, f"micro-batch {batchId}")
