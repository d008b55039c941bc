"""Assertions a test of a replicated system needs and should not have to write: replicas agree, brokers agree.

They wait first (on Trio's clock, so under a MockClock the wait costs nothing) because replication is
asynchronous: a follower catches up a fetch after the leader, a broker's metadata an UpdateMetadata after the
controller's decision. Then they demand exact agreement.
"""

from __future__ import annotations

import trio

from kafkalite.cluster import Cluster
from kafkalite.common.types import TopicPartition


def replica_batches(cluster: Cluster, broker_id: int, tp: TopicPartition) -> list[tuple[int, int, bytes]]:
    """A replica's log as (base offset, leader epoch, payload) per batch: what must be identical everywhere."""
    log = cluster.log_manager(broker_id).get_log(tp)
    assert log is not None, f"broker {broker_id} has no log for {tp}"
    return [(b.base_offset, b.partition_leader_epoch, b.payload) for b in log.read(log.log_start_offset, 1 << 30)]


async def assert_replicas_agree(cluster: Cluster, topic: str, partition: int = 0, *, timeout: float = 120) -> None:
    """Wait until every live replica is in the ISR at the high watermark, then require byte-identical logs."""
    tp = TopicPartition(topic, partition)

    async def caught_up() -> bool:
        d = (await cluster.describe_topic(topic))[partition]
        live = [b for b in d.replicas if b in cluster.live_broker_ids]
        ends = {d.log_end_offsets.get(b) for b in live}
        return set(live) <= set(d.isr) and len(ends) == 1 and d.high_watermark in ends

    with trio.fail_after(timeout):
        while not await caught_up():
            await trio.sleep(0.05)
    d = (await cluster.describe_topic(topic))[partition]
    logs = {b: replica_batches(cluster, b, tp) for b in d.replicas if b in cluster.live_broker_ids}
    first = next(iter(logs.values()))
    for broker_id, batches in logs.items():
        assert batches == first, f"the replica of {tp} on broker {broker_id} diverges from the others"


def metadata_agrees(cluster: Cluster, topic: str, partitions: int) -> bool:
    """Whether every live broker's MetadataCache says what the partition state in the coordination service says."""
    for p in range(partitions):
        state = cluster.partition_state(topic, p)
        for broker_id in cluster.live_broker_ids:
            info = cluster.broker(broker_id).metadata_cache.get_partition_info(TopicPartition(topic, p))
            if info is None or info.leader != state.leader or info.leader_epoch != state.leader_epoch \
                    or sorted(info.isr) != sorted(state.isr):
                return False
    return True
