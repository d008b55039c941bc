"""Broker: Kafka's KafkaServer, the composition of one broker's parts and its life in the cluster.

A broker lives inside its node's nursery. It registers its request handler on the transport, registers
itself in the coordination service (the ephemeral `/brokers/ids/<id>`, whose creation zxid is its broker
epoch), and runs its background tasks there; a crash is that nursery being cancelled. When its coordination
session expires and a new one opens, it registers again and takes the new broker epoch, so requests the
controller addressed to the old incarnation are refused (STALE_BROKER_EPOCH).
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from functools import partial
from typing import NamedTuple

import trio

from kafkalite.common import errors
from kafkalite.common.config import BrokerConfig
from kafkalite.common.errors import NetworkExceptionError
from kafkalite.common.types import GROUP_METADATA_TOPIC_NAME, random_uuid
from kafkalite.coordination.errors import ConnectionLossError, NodeExistsError, SessionExpiredError
from kafkalite.coordination.kafka_zk import CONFIG_CHANGES_PATH, BrokerInfo, EndPoint, KafkaZkClient
from kafkalite.coordinator import GroupCoordinator
from kafkalite.network.requests import ControlledShutdownRequest, ControlledShutdownResponse, Request, \
    RequestContext, Response
from kafkalite.network import codec, kafka
from kafkalite.network.kafka import KAFKA_LISTENER, KafkaListenerWire
from kafkalite.network.listener import NativeWire, ProtocolRouter, WireProtocol, serve_listener
from kafkalite.network.transport import Handler, PauseGate, Transport
from kafkalite.server.kafka_apis import Controller, KafkaApis
from kafkalite.server.log_manager import LogManager
from kafkalite.server.metadata_cache import MetadataCache
from kafkalite.server.offsets_log import ReplicaOffsetsLog
from kafkalite.server.replica_manager import ReplicaManager
from kafkalite.server.request_faults import RequestFaults

log = logging.getLogger(__name__)

NATIVE_LISTENER = "NATIVE"


class _Protocol(NamedTuple):
    wire: Callable[[Handler, str], WireProtocol]
    request_start: int  # the first byte of each of its requests, by which any port serves it (`ProtocolRouter`)


PROTOCOLS = {NATIVE_LISTENER: _Protocol(NativeWire, codec.REQUEST_START),
             KAFKA_LISTENER: _Protocol(KafkaListenerWire, kafka.REQUEST_START)}
"""The protocol each listener name speaks: kafkalite's own, or Apache Kafka's for Kafka's clients."""


def parse_listeners(listeners: str) -> tuple[EndPoint, ...]:
    """`NAME://host:port,...` as Kafka's `listeners` property spells it, an IPv6 host in brackets (`[::1]:9092`).

    The brackets only set the address apart from the port, so the host is what they hold. Without them the last
    colon starts the port.
    """
    endpoints = []
    for item in filter(None, (part.strip() for part in listeners.split(","))):
        name, sep, address = item.partition("://")
        host, colon, port = address.rpartition(":")
        if host.startswith("[") and host.endswith("]"):
            host = host[1:-1]
        if not sep or not colon or not port.isdigit() or "[" in host or "]" in host:
            raise errors.InvalidConfigError(f"Invalid listener {item!r} in listeners: expected NAME://host:port "
                                            "(an IPv6 host in brackets: NAME://[::1]:port)")
        endpoints.append(EndPoint(name, host, int(port)))
    return tuple(endpoints)


class Broker:
    def __init__(self, config: BrokerConfig, zk: KafkaZkClient, transport: Transport, log_manager: LogManager,
                 gate: PauseGate, rng: random.Random | None = None, request_faults: RequestFaults | None = None
                 ) -> None:
        self.config = config
        self.broker_id = config.broker_id
        self.broker_epoch = -1
        self.zk = zk
        self.transport = transport
        self.log_manager = log_manager
        self.gate = gate
        self.endpoints = parse_listeners(config["listeners"])
        self.metadata_cache = MetadataCache(self.broker_id)
        self.replica_manager = ReplicaManager(config, zk, transport, log_manager, self.metadata_cache, gate,
                                              self._current_broker_epoch)
        self._rng = rng if rng is not None else random.Random()
        self.group_coordinator = GroupCoordinator(
            self.broker_id, config, ReplicaOffsetsLog(self.replica_manager),
            partial(self.metadata_cache.partition_count, GROUP_METADATA_TOPIC_NAME), self._rng)
        self.apis = KafkaApis(self.broker_id, self.replica_manager, self.metadata_cache, zk, transport,
                              self._current_broker_epoch, self.group_coordinator, request_faults)
        self._new_session = trio.Event()
        self._config_changed = trio.Event()

    def _current_broker_epoch(self) -> int:
        return self.broker_epoch

    def set_controller(self, controller: Controller) -> None:
        self.apis.controller = controller

    async def handle(self, request: Request, context: RequestContext) -> Response:
        return await self.apis.handle(request, context)

    async def _handle_from_listener(self, request: Request, context: RequestContext) -> Response:
        """A paused broker holds its TCP clients' requests at the door too, as the in-process transport does."""
        await self.gate.checkpoint()
        return await self.apis.handle(request, context)

    async def startup(self, nursery: trio.Nursery) -> None:
        """Learn the cluster's id, open the listeners, start serving and register with the ports actually bound."""
        self.apis.cluster_id = self.zk.create_or_get_cluster_id(random_uuid(self._rng))
        await nursery.start(self.group_coordinator.startup)
        wires = self._wires()
        self.endpoints = tuple([await self._open_listener(nursery, endpoint, wires) for endpoint in self.endpoints])
        self.zk.ensure_persistent_paths()
        self.transport.register(self.broker_id, self.handle, self.gate)
        self.replica_manager.startup(nursery)
        await self._register()
        self.zk.register_state_change_handler(f"broker-{self.broker_id}", self._on_new_session)
        nursery.start_soon(self._register_on_new_session)
        self.zk.register_child_change_handler(CONFIG_CHANGES_PATH, lambda _: self._config_changed.set())
        nursery.start_soon(self._apply_config_changes)
        nursery.start_soon(self.log_manager.run_retention, self.gate)

    def _wires(self) -> dict[str, WireProtocol]:
        """One wire per listener name configured, shared by every port that serves its protocol."""
        wires = {}
        for endpoint in self.endpoints:
            protocol = PROTOCOLS.get(endpoint.listener)
            if protocol is None:
                raise errors.InvalidConfigError(
                    f"Unsupported listener {endpoint.listener!r} in listeners: this broker speaks "
                    f"{' and '.join(PROTOCOLS)}")
            wires[endpoint.listener] = protocol.wire(self._handle_from_listener, endpoint.listener)
        return wires

    async def _open_listener(self, nursery: trio.Nursery, endpoint: EndPoint, wires: dict[str, WireProtocol]
                             ) -> EndPoint:
        """Serve the listener's protocol on its port, and the broker's other protocols too (`ProtocolRouter`)."""
        others = {protocol.request_start: (name, wires.get(name)) for name, protocol in PROTOCOLS.items()
                  if name != endpoint.listener}
        wire = ProtocolRouter(endpoint.listener, wires[endpoint.listener], others)
        port = await nursery.start(partial(serve_listener, self._handle_from_listener, endpoint.host, endpoint.port,
                                           max_request_bytes=self.config["socket.request.max.bytes"],
                                           max_idle_ms=self.config["connections.max.idle.ms"],
                                           listener_name=endpoint.listener, wire=wire))
        return EndPoint(endpoint.listener, endpoint.host, port, endpoint.security_protocol)

    async def _register(self) -> None:
        """Create `/brokers/ids/<id>` and take its czxid as the broker epoch.

        After a crash the previous incarnation's node lives until its session times out, so a quick restart
        retries until it is gone, as a restarted Kafka broker must wait for its old registration to expire.
        """
        info = BrokerInfo(self.broker_id, self.endpoints, self.config["broker.rack"])
        retry_s = min(1.0, self.config.session_timeout_ms / 10_000)
        while True:
            await self.gate.checkpoint()
            try:
                self.broker_epoch = self.zk.register_broker(info)
                log.info("broker %d registered with broker epoch %d", self.broker_id, self.broker_epoch)
                return
            except NodeExistsError:
                log.info("broker %d: a previous registration still exists; waiting for it to expire",
                         self.broker_id)
            except (ConnectionLossError, SessionExpiredError) as exc:
                log.warning("broker %d: registration failed: %s", self.broker_id, exc)
            await trio.sleep(retry_s)

    def _on_new_session(self) -> None:
        """Called inside the coordination client's reconnect: only flag it, the tasks do the work (registering;
        the config watch died with the old session, and changes made since were never notified)."""
        self._new_session.set()
        self._config_changed.set()

    async def _register_on_new_session(self) -> None:
        while True:
            await self._new_session.wait()
            self._new_session = trio.Event()
            await self._register()

    async def _apply_config_changes(self) -> None:
        """Kafka's dynamic config manager: on each `/config/changes` notification, and on each new session, re-read
        hosted topics' configs, then purge the notifications old enough for every broker to have read. Cut off
        from the service, it waits for the link; a session that ends meanwhile leaves the work to the next one."""
        while True:
            try:
                await self.zk.when_reachable(lambda: self.zk.get_children(CONFIG_CHANGES_PATH, watch=True))
            except SessionExpiredError:
                pass  # the new session flags a change
            await self._config_changed.wait()
            await self.gate.checkpoint()
            self._config_changed = trio.Event()
            try:
                await self.zk.when_reachable(self.replica_manager.update_topic_configs)
                await self.zk.when_reachable(self.zk.purge_config_changes)
            except SessionExpiredError:
                pass
            if self.apis.controller is not None:
                self.apis.controller.on_topic_config_change()

    async def controlled_shutdown(self) -> bool:
        """Ask the controller to move leadership off this broker; True once it reports nothing remaining."""
        if not self.config["controlled.shutdown.enable"]:
            return False
        backoff_s = self.config["controlled.shutdown.retry.backoff.ms"] / 1000
        retries = self.config["controlled.shutdown.max.retries"]
        for attempt in range(1, retries + 1):
            await self.gate.checkpoint()
            try:
                controller_id = self.zk.get_controller_id()
                response: ControlledShutdownResponse | None = None
                if controller_id is not None:
                    with trio.move_on_after(self.config["controller.socket.timeout.ms"] / 1000):
                        response = await self.transport.send(
                            self.broker_id, controller_id, ControlledShutdownRequest(self.broker_id, self.broker_epoch))
                    if response is None:
                        raise NetworkExceptionError(f"controller {controller_id} did not answer within "
                                                    "controller.socket.timeout.ms")
                    if response.error_code == errors.NONE.code and not response.remaining_partitions:
                        log.info("broker %d: controlled shutdown succeeded", self.broker_id)
                        return True
                    log.info("broker %d: controlled shutdown attempt %d: %s, %d partitions remaining",
                             self.broker_id, attempt, errors.for_code(response.error_code),
                             len(response.remaining_partitions))
            except (NetworkExceptionError, ConnectionLossError, SessionExpiredError) as exc:
                log.info("broker %d: controlled shutdown attempt %d failed: %s", self.broker_id, attempt, exc)
            if attempt < retries:
                await trio.sleep(backoff_s)
        return False
