"""Apache Kafka's wire protocol: the KAFKA listener, so that Kafka's own clients use kafkalite unchanged.

One module per API key, each opening with the versions it serves and how it behaves, each a thin translation
to and from the native request types that `KafkaApis` serves: the KAFKA listener is one more front door to the
same broker, and nothing about replication, the controller or the log is duplicated here. `apis` is the
dispatch table, `wire` the per-frame protocol a listener runs, `protocol` the only module that touches the
codec (kafka-python's generated message classes).

None of it, nor kafka-python, is imported until `load_codec()` is called: where a Kafka client's address is
handed out, where a broker listens for Kafka clients on a port fixed in advance, or at the latest for a KAFKA
listener's first frame (`KafkaListenerWire`).
"""

from __future__ import annotations

import contextlib
import importlib
import warnings
from collections.abc import Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kafkalite.network.kafka.wire import KafkaWire
    from kafkalite.network.listener import Answer
    from kafkalite.network.transport import Handler

KAFKA_LISTENER = "KAFKA"
REQUEST_START = 0x00
"""The first byte of every Kafka request: the high byte of its API key, a big-endian int16 below 256 for every API
Kafka defines."""


@contextlib.contextmanager
def kafka_python_import() -> Iterator[None]:
    """Around every import of kafka-python: its schema loader calls importlib.resources functions deprecated in
    Python 3.11, a DeprecationWarning per schema, which `-W error` or pytest's `filterwarnings = error` make fatal."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        yield


def load_codec() -> None:
    """Import the KAFKA listener's modules, and kafka-python under them, in the calling thread.

    Importing kafka-python imports all of it, its clients too, which made up a third of what importing kafkalite
    took, so it waits until a Kafka client may come. It is done in a thread of the application's (or one that the
    application waits on), before any Kafka client speaks: in the cluster's loop while clients talk to it, it
    would stall every broker for a quarter of a second, and while another thread enters or leaves
    `warnings.catch_warnings` (pytest does around every test) the process-wide filters that thread restores undo
    `kafka_python_import` mid-import, and under `filterwarnings = error` the import fails, for good.
    """
    importlib.import_module("kafkalite.network.kafka.wire")


class KafkaListenerWire:
    """A KAFKA listener's `WireProtocol`, which loads the codec for its first frame if nothing loaded it before:
    the last resort, for a client that found a broker without asking the cluster where (see `load_codec`)."""

    def __init__(self, handler: Handler, listener_name: str = KAFKA_LISTENER) -> None:
        self._handler = handler
        self._listener_name = listener_name
        self._wire: KafkaWire | None = None

    async def answer(self, frame: bytes, peer: str) -> Answer:
        if self._wire is None:
            load_codec()
            from kafkalite.network.kafka.wire import KafkaWire

            self._wire = KafkaWire(self._handler, self._listener_name)
        return await self._wire.answer(frame, peer)
