"""`EmbeddedCluster`: the Trio `Cluster` on a background thread, for synchronous code and asyncio programs.

The cluster keeps running its own Trio loop in a daemon thread; every call from the caller's thread is carried
into that loop with `trio.from_thread` and blocks until it is done, so plain `unittest`/pytest code, a Spark
driver or an asyncio program (through `asyncio.to_thread`) all drive the same real cluster. It runs on the real
clock because it serves real sockets: faults that wait for a session timeout take that long, so set a small
`zookeeper.session.timeout.ms` to make them quick.
"""

from __future__ import annotations

import functools
import inspect
import threading
from collections.abc import Callable, Iterator, Mapping
from types import TracebackType
from typing import Any

import trio

from kafkalite.client import Admin, Consumer, ConsumerRecord, Producer, RecordMetadata
from kafkalite.cluster import Cluster


class EmbeddedCluster:
    """A running cluster owned by a background thread; a context manager, or `start()` and `close()`."""

    def __init__(self, brokers: int = 3, config: Mapping[str, Any] | None = None, *,
                 broker_configs: Mapping[int, Mapping[str, Any]] | None = None, seed: int | None = None) -> None:
        self._args = (brokers, config, broker_configs, seed)
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._failure: BaseException | None = None
        self._token: trio.lowlevel.TrioToken | None = None
        self._stop: trio.Event | None = None
        self._nursery: trio.Nursery | None = None
        self.cluster: Cluster | None = None

    # -- lifecycle --------------------------------------------------------------------------------------------------

    def start(self) -> EmbeddedCluster:
        if self._thread is not None:
            raise RuntimeError("the embedded cluster was already started")
        self._thread = threading.Thread(target=self._run, name="kafkalite-cluster", daemon=True)
        self._thread.start()
        self._ready.wait()
        if self._failure is not None:
            self._thread.join()
            raise self._failure
        return self

    def close(self) -> None:
        """Stop every broker, close every socket and join the thread; safe to call twice."""
        if self._thread is None or not self._thread.is_alive():
            return
        if self._token is not None and self._stop is not None:
            try:
                trio.from_thread.run_sync(self._stop.set, trio_token=self._token)
            except trio.RunFinishedError:
                pass
        self._thread.join()

    def __enter__(self) -> EmbeddedCluster:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def _run(self) -> None:
        try:
            trio.run(self._main)
        except BaseException as exc:  # reported to start(); after start it is the loop's own failure
            self._failure = exc
        finally:
            self._ready.set()

    async def _main(self) -> None:
        brokers, config, broker_configs, seed = self._args
        self._token = trio.lowlevel.current_trio_token()
        self._stop = trio.Event()
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            async with Cluster(brokers, config, broker_configs=broker_configs, seed=seed) as cluster:
                self.cluster = cluster
                self._ready.set()
                await self._stop.wait()
                nursery.cancel_scope.cancel()

    # -- calling into the loop --------------------------------------------------------------------------------------

    def call(self, function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run `function` (async or not) in the cluster's loop and return its result here."""
        if self._token is None or self.cluster is None:
            raise RuntimeError("the embedded cluster is not running: use `with EmbeddedCluster() as cluster:`")
        bound = functools.partial(function, *args, **kwargs)
        if inspect.iscoroutinefunction(function):
            return trio.from_thread.run(bound, trio_token=self._token)
        return trio.from_thread.run_sync(bound, trio_token=self._token)

    def __getattr__(self, name: str) -> Any:
        """Every public method and property of `Cluster` (faults, topics, describe), run in the cluster's loop."""
        if name.startswith("_") or self.cluster is None:
            raise AttributeError(name)
        attribute = getattr(type(self.cluster), name, None)
        if isinstance(attribute, property):
            return self.call(lambda: getattr(self.cluster, name))
        value = getattr(self.cluster, name)
        if callable(value):
            return functools.partial(self.call, value)
        return value

    @property
    def bootstrap_servers(self) -> str:
        """`host:port,...` of the live brokers' NATIVE listeners, for clients that connect over TCP."""
        def servers() -> str:
            assert self.cluster is not None
            return ",".join(f"{ep.host}:{ep.port}" for broker_id in self.cluster.live_broker_ids
                            for ep in self.cluster.broker(broker_id).endpoints if ep.listener == "NATIVE")
        return self.call(servers)

    # -- synchronous clients ----------------------------------------------------------------------------------------

    def _open(self, factory: Callable[[], Any]) -> Any:
        async def open_client() -> tuple[Any, trio.Event]:
            async def keep(task_status: trio.TaskStatus[tuple[Any, trio.Event]] = trio.TASK_STATUS_IGNORED) -> None:
                closed = trio.Event()
                async with factory() as client:
                    task_status.started((client, closed))
                    await closed.wait()

            assert self._nursery is not None
            return await self._nursery.start(keep)

        return self.call(open_client)

    def producer(self, **config: Any) -> SyncProducer:
        return SyncProducer(self, *self._open(lambda: Producer(self.cluster, config)))

    def consumer(self, **config: Any) -> SyncConsumer:
        return SyncConsumer(self, *self._open(lambda: Consumer(self.cluster, config)))

    def admin(self, **config: Any) -> SyncAdmin:
        return SyncAdmin(self, *self._open(lambda: Admin(self.cluster, config)))


class _SyncClient:
    """A thin blocking face on an async client living in the cluster's loop: each call is carried there."""

    def __init__(self, embedded: EmbeddedCluster, client: Any, closed: trio.Event) -> None:
        self._embedded = embedded
        self._client = client
        self._closed = closed

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._client, name)
        if name.startswith("_") or not callable(value):
            return value
        return functools.partial(self._embedded.call, value)

    def close(self) -> None:
        self._embedded.call(self._closed.set)

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class DeliveryFuture:
    """What `SyncProducer.send` returns: `result(timeout)` blocks until the record is acknowledged or failed."""

    def __init__(self, embedded: EmbeddedCluster, handle: Any) -> None:
        self._embedded = embedded
        self._handle = handle

    def done(self) -> bool:
        return bool(self._handle.done())

    def result(self, timeout: float | None = None) -> RecordMetadata:
        async def wait() -> RecordMetadata:
            with trio.fail_after(timeout if timeout is not None else float("inf")):
                return await self._handle

        return self._embedded.call(wait)


class SyncProducer(_SyncClient):
    def send(self, topic: str, value: bytes | None, **kwargs: Any) -> DeliveryFuture:
        return DeliveryFuture(self._embedded, self._embedded.call(self._client.send, topic, value, **kwargs))


class SyncConsumer(_SyncClient):
    def __iter__(self) -> Iterator[ConsumerRecord]:
        """Records as they come, forever; break out of the loop to stop."""
        while True:
            yield from self._embedded.call(self._client.poll, 1.0)


class SyncAdmin(_SyncClient):
    pass
