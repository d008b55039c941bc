"""Produce (key 0), versions 3-9: record batches in, offsets out.

Each partition's record set is split into its v2 batches as sent; the broker checks each one's CRC-32C
(CORRUPT_MESSAGE on a mismatch), assigns offsets by rewriting only the base offset and partition leader epoch,
which the CRC does not cover, and stores the bytes as they came, compressed or not. Record counts come from
the batch headers. Replication, acks=-1 waiting, min.insync.replicas and idempotence are the broker's: a
duplicate idempotent batch answers error 0 with its original offset, and a producer id of -1 is a plain
non-idempotent producer. A record set that does not frame into batches is refused for its partition
(CORRUPT_MESSAGE) while the request's other partitions are still served, and so is one that breaks Kafka's
ProduceRequest.validateRecords: exactly one batch per partition, of the v2 format (INVALID_RECORD: the pre-0.11
formats, magic 0 and 1, are not taken), and no zstd before version 7 (UNSUPPORTED_COMPRESSION_TYPE).

With acks=0 the client expects no response, and gets none; when any partition failed, the connection is closed,
as Kafka closes it: that is how the producer learns to refresh its metadata. Kept open, a producer whose leader
moved would go on writing to a follower that drops every record.
"""

from __future__ import annotations

from kafkalite.common import errors
from kafkalite.common.errors import KafkaError
from kafkalite.common.records import RecordBatch
from kafkalite.network import requests as native
from kafkalite.network.kafka.api import KafkaApi, Session, by_topic
from kafkalite.network.kafka.protocol import Message, ProduceRequest, ProduceResponse, entry
from kafkalite.network.transport import ConnectionDropped

_ZSTD = 4


def _batches(records: bytes | None, version: int) -> list[RecordBatch]:
    """The partition's one batch, checked as Kafka's ProduceRequest.validateRecords checks it, in its words."""
    try:
        batches = RecordBatch.from_kafka_bytes(records or b"")
    except errors.UnsupportedForMessageFormatError as exc:
        raise errors.InvalidRecordError(f"Produce requests with version {version} are only allowed to contain record "
                                        "batches with magic version 2") from exc
    if not batches:
        raise errors.InvalidRecordError(f"Produce requests with version {version} must have at least one record "
                                        "batch per partition")
    if version < 7 and batches[0].compression == _ZSTD:
        raise errors.UnsupportedCompressionTypeError(f"Produce requests with version {version} are not allowed to "
                                                     "use ZStandard compression")
    if len(batches) > 1:
        raise errors.InvalidRecordError(f"Produce requests with version {version} are only allowed to contain "
                                        "exactly one record batch per partition")
    return batches


async def handle(request: Message, session: Session) -> Message | None:
    answers: list[native.ProducePartitionResponse] = []
    appends: list[native.ProducePartitionData] = []
    for topic in request.topic_data:
        for data in topic.partition_data:
            try:
                batches = _batches(data.records, session.version)
            except KafkaError as exc:
                answers.append(native.ProducePartitionResponse(topic.name, data.index, exc.code,
                                                               error_message=exc.message))
                continue
            appends.append(native.ProducePartitionData(topic.name, data.index, batches))
    if appends:
        response = await session.send(native.ProduceRequest(request.acks, request.timeout_ms, appends,
                                                            request.transactional_id))
        answers += response.partitions
    if request.acks == 0:
        failed = [f"{p.topic}-{p.partition}: {errors.for_code(p.error_code).name}" for p in answers
                  if p.error_code != errors.NONE.code]
        if failed:
            raise ConnectionDropped(f"an acks=0 produce failed ({', '.join(failed)}), so the producer must refresh "
                                    "its metadata")
        return None
    return ProduceResponse(throttle_time_ms=0, responses=[
        entry(ProduceResponse, "TopicProduceResponse", name=name, partition_responses=[
            entry(ProduceResponse, "TopicProduceResponse.PartitionProduceResponse", index=p.partition,
                  error_code=p.error_code, base_offset=p.base_offset, log_append_time_ms=p.log_append_time,
                  log_start_offset=p.log_start_offset, record_errors=[], error_message=p.error_message)
            for p in partitions])
        for name, partitions in by_topic(answers).items()])


API = KafkaApi(ProduceRequest, ProduceResponse, (3, 9), handle)
