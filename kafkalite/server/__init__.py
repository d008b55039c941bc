"""The broker: KafkaServer, KafkaApis, ReplicaManager, partitions, fetchers, metadata cache, purgatory."""

from kafkalite.server.broker import Broker
from kafkalite.server.log_manager import LogManager

__all__ = ["Broker", "LogManager"]
