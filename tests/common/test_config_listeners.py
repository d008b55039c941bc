"""The `listeners` property as Kafka spells it, IPv6 hosts in brackets (`KAFKA://[::1]:9092`): the brackets only
delimit the address, so a broker binds the host inside them. They used to be kept, and binding `[::1]` failed with
"Name or service not known"."""

from __future__ import annotations

import re
import socket

import pytest
import trio.testing

from kafkalite import Cluster
from kafkalite.common.errors import InvalidConfigError
from kafkalite.coordination.kafka_zk import EndPoint
from kafkalite.server.broker import parse_listeners


def test_an_ipv6_host_is_given_in_brackets() -> None:
    assert parse_listeners("NATIVE://[::1]:0, KAFKA://[fe80::1%eth0]:9092") == (
        EndPoint("NATIVE", "::1", 0), EndPoint("KAFKA", "fe80::1%eth0", 9092))
    assert parse_listeners("NATIVE://::1:0") == (EndPoint("NATIVE", "::1", 0),)  # the last colon starts the port


@pytest.mark.parametrize("listener", ["NATIVE://[::1:0", "NATIVE://::1]:0", "NATIVE://[[::1]]:0"])
def test_brackets_that_hold_no_host_are_refused_naming_the_listener(listener: str) -> None:
    with pytest.raises(InvalidConfigError, match=re.escape(f"Invalid listener {listener!r} in listeners")):
        parse_listeners(listener)


def _ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
    except OSError:
        return False
    return True


@pytest.mark.skipif(not _ipv6_loopback(), reason="this host has no IPv6 loopback")
async def test_a_broker_listens_on_an_ipv6_host_and_restarts_on_the_same_ports(
        autojump_clock: trio.testing.MockClock) -> None:
    async with Cluster(brokers=1, config={"listeners": "NATIVE://[::1]:0,KAFKA://[::1]:0"}) as cluster:
        endpoints = cluster.broker(1).endpoints
        assert [(ep.listener, ep.host) for ep in endpoints] == [("NATIVE", "::1"), ("KAFKA", "::1")]
        await cluster.kill_broker(1)
        await cluster.restart_broker(1)
        assert cluster.broker(1).endpoints == endpoints
        # Kafka's clients take an IPv6 bootstrap address in brackets only
        assert cluster.kafka_bootstrap_servers == f"[::1]:{endpoints[1].port}"
        assert cluster.describe_cluster().brokers[0].endpoints == tuple(f"{ep.listener}://[::1]:{ep.port}"
                                                                        for ep in endpoints)
        for endpoint in endpoints:
            socket.create_connection(("::1", endpoint.port), timeout=5).close()
