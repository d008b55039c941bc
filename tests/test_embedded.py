"""EmbeddedCluster from plain synchronous code and from asyncio: the same real cluster, driven from outside Trio."""

from __future__ import annotations

import asyncio
import socket
import threading

import pytest

from kafkalite.client import NewTopic, TopicPartition
from kafkalite.common.errors import InvalidPartitionsError
from kafkalite.embedded import EmbeddedCluster

TP = TopicPartition("orders", 0)


def poll_all(consumer, count: int) -> list:
    records = []
    for _ in range(50):
        records += consumer.poll(0.2)
        if len(records) >= count:
            break
    return records


def test_sync_producer_and_consumer_with_a_failover() -> None:
    with EmbeddedCluster(brokers=3, config={"zookeeper.session.timeout.ms": 600}) as cluster:
        cluster.create_topic("orders", partitions=1, replication_factor=3, config={"min.insync.replicas": 2})
        assert cluster.controller_id in (1, 2, 3)
        with cluster.producer(acks="all") as producer:
            futures = [producer.send("orders", b"v%d" % i, partition=0) for i in range(20)]
            producer.flush()
            assert [f.result(timeout=10).offset for f in futures] == list(range(20))
        leader = cluster.leader_for("orders", 0)
        cluster.kill_broker(leader)
        assert cluster.wait_for_leader("orders", 0, not_on=[leader], timeout=10) != leader
        with cluster.consumer(auto_offset_reset="earliest") as consumer:
            consumer.assign([TP])
            assert [r.value for r in poll_all(consumer, 20)] == [b"v%d" % i for i in range(20)]
        with cluster.admin() as admin:
            with pytest.raises(InvalidPartitionsError):
                admin.create_topics([NewTopic("x", 0, 1)])


def test_close_joins_the_thread_and_closes_every_socket() -> None:
    cluster = EmbeddedCluster(brokers=2).start()
    ports = [int(server.rsplit(":", 1)[1]) for server in cluster.bootstrap_servers.split(",")]
    assert len(ports) == 2
    cluster.close()
    assert not any(t.name == "kafkalite-cluster" and t.is_alive() for t in threading.enumerate())
    for port in ports:
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
    cluster.close()  # twice is harmless


def test_usable_from_an_asyncio_program() -> None:
    async def program() -> list[bytes]:
        cluster = await asyncio.to_thread(EmbeddedCluster(brokers=1).start)
        try:
            await asyncio.to_thread(cluster.create_topic, "orders", 1, 1)
            producer = await asyncio.to_thread(cluster.producer)
            future = await asyncio.to_thread(producer.send, "orders", b"from asyncio", partition=0)
            assert (await asyncio.to_thread(future.result, 10)).offset == 0
            await asyncio.to_thread(producer.close)
            rows = await asyncio.to_thread(cluster.fetch_all, "orders", 0)
            return [record.value for _, record in rows]
        finally:
            await asyncio.to_thread(cluster.close)

    assert asyncio.run(program()) == [b"from asyncio"]


def test_bootstrap_servers_reach_the_brokers_over_tcp() -> None:
    with EmbeddedCluster(brokers=1) as cluster:
        servers = cluster.bootstrap_servers
        host, port = servers.split(":")
        socket.create_connection((host, int(port)), timeout=1).close()
