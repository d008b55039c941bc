"""`EmbeddedCluster`: the Trio `Cluster` on a background thread, for synchronous code and asyncio programs.

The cluster keeps running its own Trio loop in a daemon thread; every call from the caller's thread is carried
into that loop with `trio.from_thread` and blocks until it is done, so plain `unittest`/pytest code, a Spark
driver or an asyncio program (through `asyncio.to_thread`) all drive the same real cluster. It runs on the real
clock because it serves real sockets: faults that wait for a session timeout take that long, so set a small
`zookeeper.session.timeout.ms` to make them quick.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import re
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from types import TracebackType
from typing import Any, Self

import trio

from kafkalite.client import Admin, Consumer, ConsumerRecord, Producer, RecordHandle, RecordMetadata, TopicPartition
from kafkalite.client.consumer_coordinator import Listener
from kafkalite.cluster import Cluster, check_cluster_arguments, check_seconds
from kafkalite.common.errors import ErrorCode, KafkaError
from kafkalite.common.nursery import unwrap_single
from kafkalite.network.kafka import KAFKA_LISTENER, load_codec
from kafkalite.network.requests import ApiKey
from kafkalite.server.request_faults import RequestFault, resolve_error


_STOPPED_DURING_CALL = "the embedded cluster has stopped while the call was running"


class EmbeddedCluster:
    """A running cluster owned by a background thread; a context manager, or `start()` and `close()`.

    Every public method and property of `Cluster` is here as a blocking call (`create_topic`, `kill_broker`,
    `partition_network`, `wait_until`, ...), so a test reads the same whether it is async or not; a
    `wait_until` condition runs in the loop and may use this object too. `producer()`, `consumer()` and
    `admin()` give blocking clients; `cluster` is the Trio `Cluster` itself, for code already in its loop.
    """

    def __init__(self, brokers: int = 3, config: Mapping[str, Any] | None = None, *,
                 broker_configs: Mapping[int, Mapping[str, Any]] | None = None, seed: int | None = None) -> None:
        check_cluster_arguments(brokers, config, broker_configs, seed)
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
        try:
            self._ready.wait()
        except BaseException:  # Ctrl-C while starting: `with` never gets the object, so nothing else would close it
            self._ready.wait()
            with contextlib.suppress(Exception):
                self.close()
            raise
        if self._failure is not None:
            self.close()
        return self

    def close(self) -> None:
        """Stop every broker, close every socket and join the thread; safe to call twice.

        If the loop died while the cluster was running, its error is raised here, once: a cluster that
        crashed under a test must fail that test even when no later call noticed.
        """
        if self._thread is None:
            return
        if self._thread.is_alive() and self._token is not None and self._stop is not None:
            # Not trio.from_thread, which refuses a thread that runs a Trio loop of its own (a Trio test closing
            # the cluster it was given): setting the event needs no answer, and join() waits for the stop.
            with contextlib.suppress(trio.RunFinishedError):
                self._token.run_sync_soon(self._stop.set)
        self._thread.join()
        failure, self._failure = self._failure, None
        if failure is not None:
            raise failure

    def __enter__(self) -> EmbeddedCluster:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def _run(self) -> None:
        try:
            trio.run(self._main)
        except BaseException as exc:  # raised by start(), or by the next call and close() once running
            self._failure = unwrap_single(exc)
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
        """Run `function` (async or not) in the cluster's loop and return its result here.

        A failure comes back as the exception itself rather than Trio's one-member ExceptionGroup, so that
        `pytest.raises(InvalidTopicError)` works on a synchronous call as it does on the async one.
        """
        if self._token is None or self.cluster is None:
            raise RuntimeError("the embedded cluster is not running: use `with EmbeddedCluster() as cluster:`")
        if self._failure is not None or self._thread is None or not self._thread.is_alive():
            raise RuntimeError("the embedded cluster has stopped") from self._failure
        is_async = inspect.iscoroutinefunction(function)
        if threading.current_thread() is not self._thread and trio.lowlevel.in_trio_run():
            raise RuntimeError("the embedded cluster's calls block, and this thread runs a Trio loop: in Trio code use "
                               "the async `Cluster` (`embedded.cluster`, or the kafkalite_cluster_async fixture), or "
                               "make the call through trio.to_thread.run_sync")
        if threading.current_thread() is self._thread:
            # Already in the loop: a wait_until condition written against this object (`cluster.controller_id`)
            # runs here, and blocking on our own loop would deadlock.
            if is_async:
                raise RuntimeError(f"{function.__name__} is async: inside the cluster's loop await it on "
                                   "`embedded.cluster` instead")
            return function(*args, **kwargs)
        bound = functools.partial(function, *args, **kwargs)
        try:
            try:
                if is_async:
                    return trio.from_thread.run(bound, trio_token=self._token)
                return trio.from_thread.run_sync(bound, trio_token=self._token)
            except BaseExceptionGroup as group:
                raise unwrap_single(group) from None
        except trio.RunFinishedError:
            raise RuntimeError("the embedded cluster has stopped") from self._failure
        except trio.Cancelled:  # the cluster closed under the call: Trio's cancellation means nothing in this thread
            raise RuntimeError(_STOPPED_DURING_CALL) from None
        except Exception as exc:
            if self._stop is not None and self._stop.is_set():  # met as the cluster closed under it (a nursery gone)
                raise RuntimeError(_STOPPED_DURING_CALL) from exc
            raise

    # Where `Cluster` loads kafka-python (see `load_codec`), this thread does it first: in the cluster's loop the
    # import would stall every broker for a quarter of a second.

    @property
    def kafka_bootstrap_servers(self) -> str:
        """`Cluster.kafka_bootstrap_servers`; the Kafka codec loaded in this thread."""
        self._load_codec_here()
        return self.__getattr__("kafka_bootstrap_servers")  # type: ignore[no-any-return]

    def listener_bootstrap_servers(self, listener: str) -> str:
        """`Cluster.listener_bootstrap_servers`; for "KAFKA", the Kafka codec loaded in this thread."""
        if listener == KAFKA_LISTENER:
            self._load_codec_here()
        return self.__getattr__("listener_bootstrap_servers")(listener)  # type: ignore[no-any-return]

    def fail_requests(self, api: ApiKey | str, error: ErrorCode | type[KafkaError] | str | int | None = None,
                      **options: Any) -> RequestFault:
        """`Cluster.fail_requests`, its error resolved in this thread: one only Kafka defines is looked up in
        kafka-python's table."""
        if error is not None and self._running():
            error = resolve_error(error)
        return self.__getattr__("fail_requests")(api, error, **options)  # type: ignore[no-any-return]

    def _running(self) -> bool:
        return self.__dict__.get("cluster") is not None and self._failure is None and self._thread is not None \
            and self._thread.is_alive()

    def _load_codec_here(self) -> None:
        if self._running():  # a call to a cluster not running fails anyway, without the import
            load_codec()

    def __getattr__(self, name: str) -> Any:
        """Every public method and property of `Cluster` (faults, topics, describe), run in the cluster's loop."""
        cluster = self.__dict__.get("cluster")  # not self.cluster: on an object __init__ never ran, that lands here
        if cluster is None or name.startswith("_"):
            if hasattr(Cluster, name) and not name.startswith("_"):
                raise RuntimeError(f"cannot use {name}: the embedded cluster is not running; start() it first")
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        attribute = getattr(type(cluster), name, None)
        if isinstance(attribute, property):
            return self.call(lambda: getattr(cluster, name))
        value = getattr(cluster, name)
        if callable(value):
            return functools.partial(self.call, value)
        return value

    def __dir__(self) -> list[str]:
        return sorted({*super().__dir__(), *(name for name in dir(Cluster) if not name.startswith("_"))})

    def __copy__(self) -> EmbeddedCluster:
        raise TypeError("an EmbeddedCluster cannot be copied: it owns a running cluster; share the one object")

    def serve_control(self, port: int = 0) -> str:
        """Serve the HTTP control endpoint (`kafkalite.control`) on 127.0.0.1 until the cluster stops, for tests
        in other languages; its URL (port 0: a free one)."""
        from kafkalite.control import serve_control

        if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
            raise ValueError(f"port must be 0 (a free one) to 65535, not {port!r}")
        self._load_codec_here()  # its clients read the Kafka address and name Kafka's errors

        async def start() -> int:
            assert self._nursery is not None and self.cluster is not None
            bound: int = await self._nursery.start(serve_control, self.cluster, "127.0.0.1", port)
            return bound

        return f"http://127.0.0.1:{self.call(start)}"

    # -- synchronous clients ----------------------------------------------------------------------------------------

    def _open(self, factory: Callable[[], Any]) -> tuple[Any, _Lifetime]:
        async def open_client() -> tuple[Any, _Lifetime]:
            lifetime = _Lifetime()
            assert self._nursery is not None
            return await self._nursery.start(lifetime.hold, factory), lifetime

        return self.call(open_client)

    def producer(self, **config: Any) -> SyncProducer:
        return SyncProducer(self, *self._open(lambda: Producer(self.cluster, config)))

    def consumer(self, **config: Any) -> SyncConsumer:
        return SyncConsumer(self, *self._open(lambda: Consumer(self.cluster, config)))

    def admin(self, **config: Any) -> SyncAdmin:
        return SyncAdmin(self, *self._open(lambda: Admin(self.cluster, config)))


class _Lifetime:
    """Holds an async client open in a task of the cluster's loop, since `async with` cannot span threads.

    An error the client raises on the way out (a producer whose flush fails) belongs to whoever closes it, not
    to the cluster's nursery, where it would bring every broker down.
    """

    def __init__(self) -> None:
        self._closing = trio.Event()
        self._closed = trio.Event()
        self._error: Exception | None = None

    async def hold(self, factory: Callable[[], Any], task_status: trio.TaskStatus[Any] = trio.TASK_STATUS_IGNORED
                   ) -> None:
        opened = False
        try:
            async with factory() as client:
                opened = True
                task_status.started(client)
                await self._closing.wait()
        except Exception as exc:
            if not opened:
                raise
            self._error = exc
        finally:
            self._closed.set()

    async def close(self) -> None:
        self._closing.set()
        await self._closed.wait()
        error, self._error = self._error, None
        if error is not None:
            raise error


class _SyncClient:
    """A thin blocking face on an async client living in the cluster's loop: each call is carried there."""

    def __init__(self, embedded: EmbeddedCluster, client: Any, lifetime: _Lifetime) -> None:
        self._embedded = embedded
        self._client = client
        self._lifetime = lifetime

    def __getattr__(self, name: str) -> Any:
        if "_client" not in self.__dict__:  # an object __init__ never ran: self._client would land here again
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        value = getattr(self._client, name)
        if name.startswith("_") or not callable(value):
            return value
        return functools.partial(self._embedded.call, value)

    def close(self) -> None:
        """Close the client the way `async with` would (a producer flushes first) and wait until it has."""
        self._embedded.call(self._lifetime.close)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __copy__(self) -> Self:
        raise TypeError(f"a {type(self).__name__} cannot be copied: it is one client of the cluster; share it, or "
                        "open another")


class DeliveryFuture:
    """What `SyncProducer.send` returns: `result(timeout)` blocks until the record is acknowledged or failed."""

    def __init__(self, embedded: EmbeddedCluster, handle: RecordHandle) -> None:
        self._embedded = embedded
        self._handle = handle

    def done(self) -> bool:
        return bool(self._embedded.call(self._handle.done))

    def result(self, timeout: float | None = None) -> RecordMetadata:
        """The record's metadata, or its delivery error; TimeoutError (as `concurrent.futures`) after `timeout`."""
        if timeout is not None:
            check_seconds(timeout, "timeout")

        async def wait() -> RecordMetadata:
            if self._handle.done():  # a zero timeout still answers for a settled record
                return self._handle.result()
            with trio.move_on_after(timeout if timeout is not None else float("inf")):
                return await self._handle
            raise TimeoutError(f"the record was not acknowledged within {timeout} s")

        return self._embedded.call(wait)


class SyncProducer(_SyncClient):
    def send(self, topic: str, value: bytes | None, key: bytes | None = None, **kwargs: Any) -> DeliveryFuture:
        """Queue the record (as `Producer.send`: partition, headers, timestamp) without waiting for its ack."""
        return DeliveryFuture(self._embedded, self._embedded.call(self._client.send, topic, value, key, **kwargs))


class SyncConsumer(_SyncClient):
    """The blocking face of `Consumer`. Its iterator hands out one poll's records at a time; a seek or a new
    assignment made through this object drops the records of the partitions it moves that the iterator has yet
    to hand out, as the async consumer's iterator does, so the loop goes on from the new position."""

    def __init__(self, embedded: EmbeddedCluster, client: Any, lifetime: _Lifetime) -> None:
        super().__init__(embedded, client, lifetime)
        self._iterated: deque[ConsumerRecord] = deque()

    def subscribe(self, topics: Iterable[str] | None = None, *, pattern: str | re.Pattern[str] | None = None,
                  on_assign: Listener | None = None, on_revoke: Listener | None = None,
                  on_lost: Listener | None = None) -> None:
        """As `Consumer.subscribe`. A plain callback runs on a worker thread while the poll that called it waits,
        so it may use this consumer, as Kafka's onPartitionsRevoked calls commitSync: in the cluster's loop it
        could not block on a call to that loop. An async callback runs in the loop, as on the async consumer."""
        self._embedded.call(self._client.subscribe, topics, pattern=pattern, on_assign=_off_loop(on_assign),
                            on_revoke=_off_loop(on_revoke), on_lost=_off_loop(on_lost))

    def __iter__(self) -> Iterator[ConsumerRecord]:
        """Records as they come, forever; break out of the loop to stop."""
        while True:
            while self._iterated:
                yield self._iterated.popleft()
            self._iterated.extend(self._embedded.call(self._client.poll, 1.0))

    def seek(self, tp: TopicPartition, offset: int, leader_epoch: int = -1) -> None:
        self._embedded.call(self._client.seek, tp, offset, leader_epoch)
        self._forget({tp})

    def seek_to_beginning(self, partitions: Iterable[TopicPartition] | None = None) -> None:
        moved = None if partitions is None else list(partitions)  # read once: it may be a generator
        self._embedded.call(self._client.seek_to_beginning, moved)
        self._forget(None if moved is None else set(moved))

    def seek_to_end(self, partitions: Iterable[TopicPartition] | None = None) -> None:
        moved = None if partitions is None else list(partitions)  # read once: it may be a generator
        self._embedded.call(self._client.seek_to_end, moved)
        self._forget(None if moved is None else set(moved))

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        partitions = list(partitions)
        self._embedded.call(self._client.assign, partitions)
        kept = set(partitions)
        self._iterated = deque(r for r in self._iterated if TopicPartition(r.topic, r.partition) in kept)

    def _forget(self, moved: set[TopicPartition] | None) -> None:
        """Drop the records of `moved` (None: every partition) that the iterator has yet to hand out."""
        self._iterated = deque(r for r in self._iterated
                               if moved is not None and TopicPartition(r.topic, r.partition) not in moved)


class SyncAdmin(_SyncClient):
    pass


def _off_loop(listener: Listener | None) -> Listener | None:
    """A plain rebalance callback as an async one that runs it on a worker thread (see `SyncConsumer.subscribe`)."""
    if listener is None or inspect.iscoroutinefunction(listener):
        return listener
    plain = listener

    async def run(partitions: set[TopicPartition]) -> None:
        # Boxed, since Trio refuses a thread's result that is a coroutine: an async callable that is no coroutine
        # function (a lambda returning one, an object with an async __call__) is awaited here, in the loop.
        (result,) = await trio.to_thread.run_sync(lambda: (plain(partitions),))
        if inspect.isawaitable(result):
            await result

    return run

