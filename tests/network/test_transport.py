"""The in-process transport's connections: a Channel serves a stream of requests in one cancel scope, and a broker
going down, a cut link or a deadline each end a request the way the sender expects, and a sender can have its
parked request answered at once."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from kafkalite.common.errors import NetworkExceptionError
from kafkalite.network.requests import MetadataRequest, Request, RequestContext
from kafkalite.network.transport import PauseGate, Transport


class Broker:
    """A node that answers with what it was asked and who asked; `park` holds requests until released."""

    def __init__(self) -> None:
        self.park = False
        self.parked = 0
        self.cancelled = 0
        self.released = trio.Event()

    async def handle(self, request: Request, context: RequestContext) -> Any:
        if self.park:
            self.parked += 1
            try:
                await self.released.wait()
            except trio.Cancelled:
                self.cancelled += 1
                raise
        return (request, context.source)


def transport_with(broker: Broker) -> Transport:
    transport = Transport()
    transport.register(1, broker.handle, PauseGate())
    return transport


async def test_a_channel_serves_requests_in_order_with_the_senders_context() -> None:
    broker = Broker()
    transport = transport_with(broker)
    requests = [MetadataRequest([f"t{i}"]) for i in range(3)]
    with transport.channel(2, 1) as channel:
        answers = [await channel.send(request) for request in requests]
    assert answers == [(request, 2) for request in requests]


async def test_a_broker_going_down_ends_the_channel_and_its_parked_request(autojump_clock: Any) -> None:
    broker = Broker()
    broker.park = True
    transport = transport_with(broker)
    async with trio.open_nursery() as nursery:
        with pytest.raises(NetworkExceptionError, match="disconnected"):
            with transport.channel(2, 1) as channel:
                async def crash_later() -> None:
                    await trio.sleep(1)
                    transport.unregister(1)

                nursery.start_soon(crash_later)
                await channel.send(MetadataRequest())
    assert (broker.parked, broker.cancelled) == (1, 1)
    with pytest.raises(NetworkExceptionError, match="not available"):
        with transport.channel(2, 1):
            pass


async def test_hurrying_a_channel_has_its_parked_request_answered_now(autojump_clock: Any) -> None:
    """A handler that may wait hands its wake-up to the context's `Hurry`; the sender hurrying sets it, so the
    request is answered (not abandoned) at once, and a hurry that comes before the handler waits is kept."""
    answered_at: list[float] = []

    async def handle(request: Request, context: RequestContext) -> Any:
        assert isinstance(request, MetadataRequest) and context.hurry is not None
        if request.topics == ["late"]:
            await trio.sleep(2)  # busy before it parks
        wake = trio.Event()
        if context.hurry.park(wake):
            with trio.move_on_after(60):
                await wake.wait()
            context.hurry.unpark()
        answered_at.append(trio.current_time())
        return request

    transport = Transport()
    transport.register(1, handle, PauseGate())
    started = trio.current_time()
    async with trio.open_nursery() as nursery:
        with transport.channel(2, 1) as channel:
            async def hurry_later() -> None:
                await trio.sleep(1)
                channel.hurry()

            nursery.start_soon(hurry_later)
            assert await channel.send(MetadataRequest(["a"])) == MetadataRequest(["a"])
            assert answered_at == [started + 1]
            channel.hurry()  # between requests: it concerns the request in flight, so the next one waits
            assert await channel.send(MetadataRequest(["b"])) == MetadataRequest(["b"])
            assert answered_at[1] == started + 61
            nursery.start_soon(hurry_later)
            assert await channel.send(MetadataRequest(["late"])) == MetadataRequest(["late"])
            assert answered_at[2] == started + 63  # hurried at 62, before it parked at 63: it did not park


async def test_a_cut_link_fails_the_next_request() -> None:
    transport = transport_with(Broker())
    with transport.channel(2, 1) as channel:
        assert await channel.send(MetadataRequest()) == (MetadataRequest(), 2)
        transport.partition([1], [2])
        with pytest.raises(NetworkExceptionError, match="cut"):
            await channel.send(MetadataRequest())
        transport.heal()
        assert await channel.send(MetadataRequest()) == (MetadataRequest(), 2)


async def test_a_channel_deadline_abandons_the_request_and_breaks_the_channel(autojump_clock: Any) -> None:
    """How client request timeouts work in-process: the broker serves the request in a channel whose deadline is
    the request's, and a request that times out breaks the channel, as a Kafka client drops the connection."""
    broker = Broker()
    broker.park = True
    transport = transport_with(broker)
    started = trio.current_time()
    with pytest.raises(NetworkExceptionError, match="disconnected"):
        with transport.channel("client", 1) as channel:
            channel.deadline = started + 2
            await channel.send(MetadataRequest())
    assert trio.current_time() - started == 2 and broker.cancelled == 1
