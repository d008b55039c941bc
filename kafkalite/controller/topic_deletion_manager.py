"""TopicDeletionManager: a topic leaves the cluster replica by replica (seeds 001, 002, 003).

A topic queued under `/admin/delete_topics` is first announced as being deleted (UpdateMetadata with leader
LeaderDuringDelete, so every broker's MetadataCache drops it and clients stop using it), then each replica goes
Offline -> ReplicaDeletionStarted (StopReplica with delete) -> ReplicaDeletionSuccessful as brokers confirm.
A replica on a dead broker is ReplicaDeletionIneligible and the topic waits until that broker returns; once
every replica is gone the topic's znodes are removed and it may be created again from offset 0.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from kafkalite.common import errors
from kafkalite.controller.context import ControllerContext, PartitionAndReplica, ReplicaKey
from kafkalite.controller.partition_state_machine import PartitionState, PartitionStateMachine
from kafkalite.controller.replica_state_machine import ReplicaState, ReplicaStateMachine
from kafkalite.controller.request_batch import ControllerBrokerRequestBatch
from kafkalite.coordination.kafka_zk import (
    DELETE_TOPICS_PATH,
    delete_topic_path,
    partition_state_path,
    topic_config_path,
    topic_path,
)
from kafkalite.coordination.kafka_zk import KafkaZkClient
from kafkalite.coordination.service import DeleteOp, Op
from kafkalite.network.requests import StopReplicaResponse

log = logging.getLogger(__name__)


class TopicDeletionManager:
    def __init__(self, controller_id: int, enabled: bool, context: ControllerContext, zk: KafkaZkClient,
                 partition_state_machine: PartitionStateMachine, replica_state_machine: ReplicaStateMachine,
                 batch: ControllerBrokerRequestBatch, on_topic_deleted: Callable[[str], None]) -> None:
        self.controller_id = controller_id
        self.enabled = enabled  # delete.topic.enable
        self.context = context
        self.zk = zk
        self._partitions = partition_state_machine
        self._replicas = replica_state_machine
        self._batch = batch
        self._on_topic_deleted = on_topic_deleted

    def _write(self, ops: list[Op]) -> None:
        if ops:
            self.zk.controller_multi(self.context.epoch_zk_version, ops)

    def is_topic_queued_up_for_deletion(self, topic: str) -> bool:
        return topic in self.context.topics_to_be_deleted

    # -- triggers -------------------------------------------------------------------------------------------------

    def process_topic_deletion(self) -> None:
        """`/admin/delete_topics` changed: queue what exists, drop requests for topics that do not."""
        queued = set(self.zk.get_children(DELETE_TOPICS_PATH, watch=True))
        unknown = queued - self.context.all_topics
        if not self.enabled:
            unknown = queued  # deletion disabled: the requests are refused and forgotten, as in Kafka
        if unknown:
            self._write([DeleteOp(delete_topic_path(t)) for t in sorted(unknown)])
        self.enqueue_topics_for_deletion(queued - unknown)

    def enqueue_topics_for_deletion(self, topics: Iterable[str]) -> None:
        new = set(topics) - self.context.topics_to_be_deleted
        if new:
            log.info("controller %d: topics %s queued for deletion", self.controller_id, sorted(new))
        self.context.topics_to_be_deleted |= new
        self.resume_deletions()

    def fail_replica_deletion(self, replicas: Iterable[ReplicaKey]) -> None:
        """Replicas that cannot be deleted now (dead broker, failed StopReplica): the topic waits for them."""
        replicas = [r for r in replicas if self.is_topic_queued_up_for_deletion(r[0])]
        self._to_offline(replicas)
        self._replicas.handle_state_changes(replicas, ReplicaState.DELETION_INELIGIBLE)

    def resume_deletion_for_topics(self, replicas: Iterable[ReplicaKey]) -> None:
        """A broker holding ineligible replicas came back: make them eligible and carry on."""
        returning = [r for r in replicas if self.is_topic_queued_up_for_deletion(r[0])
                     and self.context.replica_states.get(r) is ReplicaState.DELETION_INELIGIBLE]
        self._replicas.handle_state_changes(returning, ReplicaState.OFFLINE)
        self.resume_deletions()

    def on_stop_replica_response(self, broker_id: int, response: StopReplicaResponse) -> None:
        replicas = {(e.topic, e.partition): e.error_code for e in response.partition_errors}
        succeeded, failed = [], []
        for (topic, partition), code in sorted(replicas.items()):
            replica = PartitionAndReplica(topic, partition, broker_id)
            if self.context.replica_states.get(replica) is not ReplicaState.DELETION_STARTED:
                continue
            ok = response.error_code == errors.NONE.code and code == errors.NONE.code
            (succeeded if ok else failed).append(replica)
        self._replicas.handle_state_changes(succeeded, ReplicaState.DELETION_SUCCESSFUL)
        self.fail_replica_deletion(failed)
        self.resume_deletions()

    # -- the flow -------------------------------------------------------------------------------------------------

    def is_topic_being_reassigned(self, topic: str) -> bool:
        return any(tp.topic == topic for tp in self.context.partitions_being_reassigned)

    def resume_deletions(self) -> None:
        """Carry each queued topic one step on; a topic being reassigned waits until the move completes (Kafka's
        markTopicIneligibleForDeletion), since deleting replicas under a move would strand it."""
        for topic in sorted(self.context.topics_to_be_deleted):
            if self.is_topic_being_reassigned(topic):
                continue
            replicas = self.context.replicas_for_partitions(self.context.partitions_for_topic(topic))
            states = [self.context.replica_states.get(r) for r in replicas]
            if all(state is ReplicaState.DELETION_SUCCESSFUL for state in states):
                self.complete_delete_topic(topic)
            elif not any(state in (ReplicaState.DELETION_STARTED, ReplicaState.DELETION_INELIGIBLE)
                         for state in states):
                self.on_topic_deletion(topic)

    def on_topic_deletion(self, topic: str) -> None:
        partitions = self.context.partitions_for_topic(topic)
        self._batch.send_update_metadata_request(self.context.live_or_shutting_down_broker_ids, partitions)
        pending = [r for r in self.context.replicas_for_partitions(partitions)
                   if self.context.replica_states.get(r) is not ReplicaState.DELETION_SUCCESSFUL]
        dead = [r for r in pending if not self.context.is_replica_online(r.replica, include_shutting_down=True)]
        alive = [r for r in pending if r not in dead]
        self.fail_replica_deletion(dead)
        self._to_offline(alive)
        self._replicas.handle_state_changes(alive, ReplicaState.DELETION_STARTED)

    def _to_offline(self, replicas: list[ReplicaKey]) -> None:
        self._replicas.handle_state_changes(
            [r for r in replicas if self.context.replica_states.get(r) in (ReplicaState.NEW, ReplicaState.ONLINE)],
            ReplicaState.OFFLINE)

    def complete_delete_topic(self, topic: str) -> None:
        """Every replica is gone: forget the partitions and remove the topic's znodes in one transaction."""
        partitions = self.context.partitions_for_topic(topic)
        self._replicas.handle_state_changes(self.context.replicas_for_partitions(partitions),
                                            ReplicaState.NON_EXISTENT)
        self._partitions.handle_state_changes(
            [tp for tp in partitions if self.context.partition_states.get(tp) is not PartitionState.OFFLINE],
            PartitionState.OFFLINE)
        self._partitions.handle_state_changes(partitions, PartitionState.NON_EXISTENT)
        ops: list[Op] = []
        for tp in partitions:
            ops += [DeleteOp(partition_state_path(tp)), DeleteOp(f"{topic_path(topic)}/partitions/{tp.partition}")]
        ops += [DeleteOp(f"{topic_path(topic)}/partitions"), DeleteOp(topic_path(topic)),
                DeleteOp(topic_config_path(topic)), DeleteOp(delete_topic_path(topic))]
        self._write([op for op in ops if self.zk.exists(op.path)])
        self.context.remove_topic(topic)
        log.info("controller %d: deletion of topic %s completed", self.controller_id, topic)
        self._on_topic_deleted(topic)
