"""The planning side's lookups against a real cluster, through the admin client a lookup keeps between them."""

from __future__ import annotations

import gc
import pickle
import threading

import pytest

from kafkalite.common.types import TopicPartition
from kafkalite.embedded import EmbeddedCluster
from kafkalite.spark.lookup import ClusterLookup
from kafkalite.spark.options import EARLIEST, LATEST, source_options

from .conftest import numbered, produce

pytestmark = pytest.mark.spark


def kept_loops() -> set[threading.Thread]:
    return {thread for thread in threading.enumerate() if thread.name == "kafkalite-spark-kept"}


def test_a_lookup_keeps_one_client_that_follows_a_leader_move_and_a_pickled_copy_asks_on_its_own() -> None:
    with EmbeddedCluster(brokers=3) as cluster:
        cluster.create_topic("orders", 2, 3)
        produce(cluster, "orders", numbered(2, 10))
        options = source_options({"kafka.bootstrap.servers": cluster.bootstrap_servers, "subscribe": "orders"},
                                 streaming=True)
        lookup = ClusterLookup(options)
        orders = {TopicPartition("orders", 0), TopicPartition("orders", 1)}
        loops = kept_loops()
        for _ in range(3):  # as Spark's runner asks, micro-batch after micro-batch
            assert lookup.partitions() == orders
            assert lookup.offsets({tp: LATEST for tp in orders}) == dict.fromkeys(orders, 5)
            assert lookup.offsets({tp: EARLIEST for tp in orders}) == dict.fromkeys(orders, 0)
        assert len(kept_loops() - loops) == 1  # one client for all of it

        leader = cluster.leader_for("orders", 0)
        assert cluster.call(cluster.cluster.shutdown_broker, leader)
        assert cluster.leader_for("orders", 0) != leader
        produce(cluster, "orders", [(0, None, b"after the move", None, ())])
        assert lookup.offsets({tp: LATEST for tp in orders}) == {TopicPartition("orders", 0): 6,
                                                                 TopicPartition("orders", 1): 5}

        copied = pickle.loads(pickle.dumps(lookup))  # as Spark sends a reader to its executors
        assert copied.options == options
        assert copied.offsets({TopicPartition("orders", 0): LATEST}) == {TopicPartition("orders", 0): 6}
        ours = kept_loops() - loops
        assert len(ours) == 2  # the copy opened a client of its own
        del copied, lookup
        gc.collect()  # a query's planning that Spark dropped: its clients close
        for thread in ours:
            thread.join(30)
            assert not thread.is_alive()
