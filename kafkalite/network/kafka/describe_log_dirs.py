"""DescribeLogDirs (key 35), versions 1-4: the replicas a broker holds, with their sizes.

Asked of each broker in turn (kafka-python's `describe_log_dirs`, Java's `describeLogDirs`), as in Kafka. A
kafkalite broker keeps its logs in memory, in one log directory named `memory:broker-<id>`; each replica comes
with its size in bytes and its log end's lag behind the high watermark, 0 for a current replica (Kafka's
answer too), -1 for a log whose partition is not online on the broker. There are no future replicas (no
AlterReplicaLogDirs), and the directory's total and usable bytes (version 4) are -1, Kafka's "unknown": memory
has no disk size to report. A null topic list asks for every replica; replicas the broker does not hold are
left out, as Kafka leaves them out.
"""

from __future__ import annotations

from kafkalite.network import requests as native
from kafkalite.network.kafka.api import KafkaApi, Session, by_topic
from kafkalite.network.kafka.protocol import DescribeLogDirsRequest, DescribeLogDirsResponse, Message, entry


async def handle(request: Message, session: Session) -> Message:
    asked = None if request.topics is None else [
        (topic.topic, partition) for topic in request.topics for partition in topic.partitions]
    response: native.DescribeLogDirsResponse = await session.send(native.DescribeLogDirsRequest(asked))
    if response.error_code:
        return DescribeLogDirsResponse(throttle_time_ms=0, error_code=response.error_code, results=[])
    return DescribeLogDirsResponse(throttle_time_ms=0, error_code=0, results=[
        entry(DescribeLogDirsResponse, "DescribeLogDirsResult", error_code=0, log_dir=response.log_dir, topics=[
            entry(DescribeLogDirsResponse, "DescribeLogDirsResult.DescribeLogDirsTopic", name=name, partitions=[
                entry(DescribeLogDirsResponse, "DescribeLogDirsResult.DescribeLogDirsTopic.DescribeLogDirsPartition",
                      partition_index=r.partition, partition_size=r.size, offset_lag=r.offset_lag,
                      is_future_key=False)
                for r in replicas])
            for name, replicas in by_topic(response.replicas).items()])])


API = KafkaApi(DescribeLogDirsRequest, DescribeLogDirsResponse, (1, 4), handle)
