"""Producer, consumer and admin clients (Trio), reaching a cluster in-process or over native TCP.

Pass a `Cluster` (anything with `transport` and `broker_ids`) to talk to it in-process, or a
"host:port,..." string to connect to brokers' NATIVE listeners; the clients behave the same either way.
Configs use Kafka's property names; invalid ones raise `kafkalite.common.errors.InvalidConfigError`.
"""

from kafkalite.client.admin import (
    Admin, BrokerNode, ClusterDescription, ListOffsetsResultInfo, NewTopic, PartitionDescription,
    TopicDescription,
)
from kafkalite.client.consumer import (
    Consumer, ConsumerRecord, FetchedBatch, LogTruncationError, NoOffsetForPartitionError,
)
from kafkalite.client.consumer_coordinator import OffsetAndMetadata, PollIntervalExceededError
from kafkalite.client.partitioner import murmur2
from kafkalite.client.producer import Producer, RecordHandle, RecordMetadata
from kafkalite.client.transport import ClientTransport, InProcessTransport, TcpTransport
from kafkalite.common.types import TopicPartition

__all__ = [
    "Admin", "BrokerNode", "ClientTransport", "ClusterDescription", "Consumer", "ConsumerRecord", "FetchedBatch",
    "InProcessTransport", "ListOffsetsResultInfo", "LogTruncationError", "NewTopic", "NoOffsetForPartitionError",
    "OffsetAndMetadata",
    "PartitionDescription", "PollIntervalExceededError",
    "Producer", "RecordHandle", "RecordMetadata", "TcpTransport", "TopicDescription", "TopicPartition", "murmur2",
]
