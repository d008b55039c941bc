"""ControllerChannelManager: one queue and one sender task per live broker (seed 001).

One request in flight per broker is what keeps the controller's requests in order at each broker: a
LeaderAndIsr sent after another always lands after it. A broker that cannot be reached is retried until the
controller removes it (when its registration disappears), as Kafka's RequestSendThread does.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass

import trio

from kafkalite.common.errors import NetworkExceptionError
from kafkalite.network.requests import Request, Response
from kafkalite.network.transport import PauseGate, Transport

log = logging.getLogger(__name__)

RETRY_BACKOFF_S = 0.1

ResponseCallback = Callable[[Response], None]


@dataclass
class _BrokerChannel:
    send: trio.MemorySendChannel[tuple[Request, ResponseCallback | None]]
    scope: trio.CancelScope


class ControllerChannelManager:
    def __init__(self, controller_id: int, transport: Transport, gate: PauseGate, nursery: trio.Nursery) -> None:
        self.controller_id = controller_id
        self._transport = transport
        self._gate = gate
        self._nursery = nursery
        self._channels: dict[int, _BrokerChannel] = {}

    def add_broker(self, broker_id: int) -> None:
        if broker_id in self._channels:
            return
        send, receive = trio.open_memory_channel[tuple[Request, ResponseCallback | None]](math.inf)
        scope = trio.CancelScope()
        self._channels[broker_id] = _BrokerChannel(send, scope)
        self._nursery.start_soon(self._request_send_loop, broker_id, receive, scope)

    def remove_broker(self, broker_id: int) -> None:
        channel = self._channels.pop(broker_id, None)
        if channel is not None:
            channel.scope.cancel()

    def shutdown(self) -> None:
        for broker_id in list(self._channels):
            self.remove_broker(broker_id)

    def send_request(self, broker_id: int, request: Request, callback: ResponseCallback | None = None) -> None:
        channel = self._channels.get(broker_id)
        if channel is None:
            log.warning("controller %d: not sending %s to broker %d, which is not live", self.controller_id,
                        type(request).__name__, broker_id)
            return
        channel.send.send_nowait((request, callback))

    async def _request_send_loop(self, broker_id: int,
                                 receive: trio.MemoryReceiveChannel[tuple[Request, ResponseCallback | None]],
                                 scope: trio.CancelScope) -> None:
        with scope:
            async for request, callback in receive:
                while True:
                    await self._gate.checkpoint()
                    try:
                        response = await self._transport.send(self.controller_id, broker_id, request)
                        break
                    except NetworkExceptionError as exc:
                        log.debug("controller %d: %s to broker %d failed (%s); retrying", self.controller_id,
                                  type(request).__name__, broker_id, exc)
                        await trio.sleep(RETRY_BACKOFF_S)
                if callback is not None:
                    callback(response)
                # Not kept until the next request: a LeaderAndIsr of a large batch names every partition, and its
                # answer has an entry for each (600,000 objects at 100,000 partitions).
                del request, callback, response
