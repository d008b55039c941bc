"""Apache Kafka's wire protocol: the KAFKA listener, so that Kafka's own clients use kafkalite unchanged.

One module per API key, each opening with the versions it serves and how it behaves, each a thin translation
to and from the native request types that `KafkaApis` serves: the KAFKA listener is one more front door to the
same broker, and nothing about replication, the controller or the log is duplicated here. `apis` is the
dispatch table, `wire` the per-frame protocol a listener runs, `protocol` the only module that touches the
codec (kafka-python's generated message classes).

Nothing of it is imported before a KAFKA listener's first frame (`KafkaListenerWire`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kafkalite.network.kafka.wire import KafkaWire
    from kafkalite.network.listener import Answer
    from kafkalite.network.transport import Handler

KAFKA_LISTENER = "KAFKA"


class KafkaListenerWire:
    """A KAFKA listener's `WireProtocol`, importing `wire` (and kafka-python's codec under it) when the first frame
    comes. Importing kafka-python imports all of it, its clients too, which made up a third of what importing
    kafkalite took; every broker opens a KAFKA listener by default, and most tests never connect a Kafka client."""

    def __init__(self, handler: Handler, listener_name: str = KAFKA_LISTENER) -> None:
        self._handler = handler
        self._listener_name = listener_name
        self._wire: KafkaWire | None = None

    async def answer(self, frame: bytes, peer: str) -> Answer:
        if self._wire is None:
            from kafkalite.network.kafka.wire import KafkaWire

            self._wire = KafkaWire(self._handler, self._listener_name)
        return await self._wire.answer(frame, peer)
