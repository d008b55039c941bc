"""The control endpoint: a served cluster's faults over HTTP, for test suites written in any language.

`kafkalite serve --control-port 0` (or `EmbeddedCluster.serve_control()`, or `serve_control` in a Trio nursery)
answers plain HTTP/1.1 with JSON on 127.0.0.1, so a Java, Go or Node test that points its Kafka client at a
served cluster can fail it on command as a Python test does with `Cluster`'s methods:

| method and path                                   | does                                                  |
| ------------------------------------------------- | ----------------------------------------------------- |
| GET /cluster                                      | brokers, live brokers, controller, bootstrap strings  |
| POST /brokers/{id}/{kill,restart,shutdown,pause,resume,expire-session} | that fault, or its end           |
| POST /network/partition  `{"groups": [[1], [2, 3]]}` | replace the cut ("coordination" names the service) |
| POST /network/heal                                | restore every link                                    |
| GET /faults                                       | the request faults, each with its id and hits         |
| POST /faults  `{"api": "Produce", "error": "NOT_LEADER_OR_FOLLOWER", "times": 3}` | a request fault (201) |
| DELETE /faults, DELETE /faults/{id}               | end all request faults, or one                        |
| POST /end-faults                                  | end every fault (`Cluster.end_faults`)                |

A request fault takes `Cluster.fail_requests`' arguments by name (`delay` in seconds, `times` null for no limit).
Bad input gets the status that says why and a JSON body `{"error": "..."}`: 404 for a path or a broker that does not
exist, 405 for a method a path does not take, 400 for a body that is not a JSON object or an argument the cluster
refuses (a partition of fewer than two groups too), 409 for a fault the cluster's state refuses (restarting a
running broker, one whose ports another process has taken meanwhile, or one cut off from the coordination service,
which gives up after the session timeout: it stays stopped), 413 for a body past 64 KiB. Bytes that are not HTTP get
a 400 and the connection is closed; the endpoint keeps serving everyone else.
Requests are served one at a time per connection, inside the cluster's Trio loop, so a kill or a restart has
happened when its answer arrives.
"""

from __future__ import annotations

import json
import logging
import re
from http import HTTPStatus
from collections.abc import Awaitable, Callable
from typing import Any

import h11
import trio

from kafkalite.cluster import COORDINATION, Cluster, CoordinationTimeoutError
from kafkalite.common.errors import KafkaError
from kafkalite.network.kafka import load_codec
from kafkalite.server.request_faults import RequestFault, api_name

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 64 * 1024
_IDLE_S = 60.0  # a connection that sends nothing for this long is closed
_FAULT_ARGUMENTS = ("api", "error", "drop", "delay", "brokers", "topics", "client_id", "times", "cluster_traffic",
                    "message")


class _HttpError(Exception):
    def __init__(self, status: int, message: str, headers: list[tuple[str, str]] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.headers = headers or []


Handler = Callable[[Cluster, dict[str, str], Any], Awaitable[tuple[int, Any]]]


def fault_json(fault: RequestFault) -> dict[str, Any]:
    return {"id": fault.id, "api": api_name(fault.api), "error": None if fault.error is None else fault.error.name,
            "error_code": None if fault.error is None else fault.error.code, "drop": fault.drop,
            "delay": fault.delay_s, "brokers": None if fault.brokers is None else sorted(fault.brokers),
            "topics": None if fault.topics is None else sorted(fault.topics), "client_id": fault.client_id,
            "times": fault.times, "cluster_traffic": fault.cluster_traffic, "hits": fault.hits,
            "active": fault.active}


def _broker(cluster: Cluster, params: dict[str, str]) -> int:
    broker_id = int(params["broker"])
    if broker_id not in cluster.broker_ids:
        raise _HttpError(404, f"no broker {broker_id}: the brokers are {cluster.broker_ids}")
    return broker_id


async def _describe(cluster: Cluster, params: dict[str, str], body: Any) -> tuple[int, Any]:
    return 200, {"cluster_id": cluster.cluster_id, "brokers": cluster.broker_ids,
                 "live_brokers": cluster.live_broker_ids, "controller": cluster.controller_id,
                 "bootstrap_servers": cluster.bootstrap_servers,
                 "kafka_bootstrap_servers": cluster.kafka_bootstrap_servers,
                 "request_faults": [fault_json(f) for f in cluster.request_faults.faults]}


async def _broker_action(cluster: Cluster, params: dict[str, str], body: Any) -> tuple[int, Any]:
    broker_id = _broker(cluster, params)
    action = params["action"]
    running = broker_id in cluster.live_broker_ids
    if action == "restart" and running:
        raise _HttpError(409, f"broker {broker_id} is running: kill or shut it down first")
    if action != "restart" and not running:
        raise _HttpError(409, f"broker {broker_id} is not running: restart it first")
    if action == "kill":
        await cluster.kill_broker(broker_id)
    elif action == "restart":
        try:
            await cluster.restart_broker(broker_id)
        except OSError as exc:  # its ports taken: the machine's state refuses it, as a running broker's would
            raise _HttpError(409, f"{exc.strerror or exc}; it stays stopped until its ports are free") from None
        except CoordinationTimeoutError as exc:  # cut off the coordination service: POST /network/heal first
            raise _HttpError(409, f"{exc} (POST /network/heal)") from None
    elif action == "shutdown":
        return 200, {"broker": broker_id, "clean": await cluster.shutdown_broker(broker_id)}
    elif action == "pause":
        cluster.pause_broker(broker_id)
    elif action == "resume":
        cluster.resume_broker(broker_id)
    else:
        await cluster.expire_session(broker_id)
    return 200, {"broker": broker_id, "live_brokers": cluster.live_broker_ids}


async def _partition(cluster: Cluster, params: dict[str, str], body: Any) -> tuple[int, Any]:
    groups = _object(body, ("groups",)).get("groups")
    if not isinstance(groups, list) or not all(isinstance(g, list) for g in groups):
        raise _HttpError(400, f'expected {{"groups": [[1], [2, 3]]}}: lists of broker ids (and "{COORDINATION}", '
                              "in-process clients' names)")
    cluster.partition_network(*groups)
    return 200, {"groups": groups}


async def _heal(cluster: Cluster, params: dict[str, str], body: Any) -> tuple[int, Any]:
    cluster.heal()
    return 200, {}


async def _list_faults(cluster: Cluster, params: dict[str, str], body: Any) -> tuple[int, Any]:
    return 200, [fault_json(f) for f in cluster.request_faults.faults]


async def _add_fault(cluster: Cluster, params: dict[str, str], body: Any) -> tuple[int, Any]:
    arguments = _object(body, _FAULT_ARGUMENTS)
    if "api" not in arguments:
        raise _HttpError(400, 'a request fault needs its "api", e.g. "Produce"')
    if "times" not in arguments:
        arguments["times"] = 1
    return 201, fault_json(cluster.fail_requests(**arguments))


async def _clear_faults(cluster: Cluster, params: dict[str, str], body: Any) -> tuple[int, Any]:
    cluster.clear_request_faults()
    return 200, []


async def _remove_fault(cluster: Cluster, params: dict[str, str], body: Any) -> tuple[int, Any]:
    fault_id = int(params["fault"])
    fault = next((f for f in cluster.request_faults.faults if f.id == fault_id), None)
    if fault is None:
        raise _HttpError(404, f"no active request fault {fault_id}")
    fault.remove()
    return 200, fault_json(fault)


async def _end_faults(cluster: Cluster, params: dict[str, str], body: Any) -> tuple[int, Any]:
    await cluster.end_faults()
    return 200, {"live_brokers": cluster.live_broker_ids}


def _object(body: Any, accepted: tuple[str, ...]) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise _HttpError(400, f"expected a JSON object with {', '.join(accepted)}")
    unknown = sorted(set(body) - set(accepted))
    if unknown:
        raise _HttpError(400, f"unknown field {unknown[0]!r}: the fields are {', '.join(accepted)}")
    return dict(body)


ROUTES: list[tuple[re.Pattern[str], dict[str, Handler]]] = [
    (re.compile(r"/cluster"), {"GET": _describe}),
    (re.compile(r"/brokers/(?P<broker>\d{1,9})/(?P<action>kill|restart|shutdown|pause|resume|expire-session)"),
     {"POST": _broker_action}),
    (re.compile(r"/network/partition"), {"POST": _partition}),
    (re.compile(r"/network/heal"), {"POST": _heal}),
    (re.compile(r"/faults"), {"GET": _list_faults, "POST": _add_fault, "DELETE": _clear_faults}),
    (re.compile(r"/faults/(?P<fault>\d{1,9})"), {"DELETE": _remove_fault}),
    (re.compile(r"/end-faults"), {"POST": _end_faults}),
]
"""One row per path: its pattern and the handler of each method it takes."""


async def _answer(cluster: Cluster, method: str, target: str, body: bytes) -> tuple[int, Any, list[tuple[str, str]]]:
    """(status, JSON value, extra headers) for one request."""
    path = target.split("?", 1)[0]
    try:
        for pattern, methods in ROUTES:
            match = pattern.fullmatch(path)
            if match is None:
                continue
            handler = methods.get(method)
            if handler is None:
                allowed = ", ".join(sorted(methods))
                raise _HttpError(405, f"{path} takes {allowed}, not {method}", [("Allow", allowed)])
            try:
                parsed = json.loads(body) if body.strip() else {}
            except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
                raise _HttpError(400, f"the body is not JSON: {exc or type(exc).__name__}") from None
            status, value = await handler(cluster, match.groupdict(), parsed)
            return status, value, []
        raise _HttpError(404, f"no such path {path}: the paths are /cluster, /brokers/{{id}}/{{action}}, "
                              "/network/partition, /network/heal, /faults, /faults/{id}, /end-faults")
    except _HttpError as exc:
        return exc.status, {"error": str(exc)}, exc.headers
    except (ValueError, TypeError) as exc:
        return 400, {"error": str(exc)}, []
    except KafkaError as exc:
        return 409, {"error": str(exc), "code": exc.error.name}, []
    except Exception as exc:  # a bug here must cost one request, never the cluster whose nursery this runs in
        log.exception("control: %s %s failed", method, path)
        return 500, {"error": f"{type(exc).__name__}: {exc}"}, []


async def serve_control(cluster: Cluster, host: str = "127.0.0.1", port: int = 0, *,
                        task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED) -> None:
    """Serve the control endpoint for `cluster` until cancelled; `task_status.started` reports the bound port.

    Its clients read the Kafka address and name Kafka's errors: kafka-python is loaded now, before any of them is
    served, not in the middle of their requests (see `load_codec`)."""
    load_codec()
    listeners = await trio.open_tcp_listeners(port, host=host)
    task_status.started(listeners[0].socket.getsockname()[1])
    await trio.serve_listeners(lambda stream: _connection(cluster, stream), listeners)


async def _connection(cluster: Cluster, stream: trio.SocketStream) -> None:
    """One client's connection; whatever happens on it, refusals included, ends it and nothing else."""
    try:
        await _serve(cluster, stream, h11.Connection(h11.SERVER))
    except (trio.BrokenResourceError, trio.ClosedResourceError, trio.TooSlowError):
        pass  # the client left, reset the connection (even while it was being refused) or went quiet
    except Exception:  # as above: one connection lost, the endpoint and the cluster go on
        log.exception("control: closing a connection after an unexpected error")
    finally:
        await stream.aclose()


async def _serve(cluster: Cluster, stream: trio.SocketStream, connection: h11.Connection) -> None:
    try:
        while True:
            request, body = await _read_request(connection, stream)
            if request is None:
                return
            method, target = request.method.decode("ascii", "replace"), request.target.decode("ascii", "replace")
            status, value, headers = await _answer(cluster, method, target, body)
            log.info("control: %s %s: %d", method, target, status)
            await _send(connection, stream, status, value, headers)
            if connection.our_state is h11.MUST_CLOSE:
                return
            connection.start_next_cycle()
    except h11.RemoteProtocolError as exc:
        if connection.our_state in (h11.IDLE, h11.SEND_RESPONSE):
            await _send(connection, stream, exc.error_status_hint, {"error": f"not an HTTP request: {exc}"}, [],
                        close=True)
    except _HttpError as exc:
        await _send(connection, stream, exc.status, {"error": str(exc)}, [], close=True)


async def _read_request(connection: h11.Connection, stream: trio.SocketStream
                        ) -> tuple[h11.Request | None, bytes]:
    """The next request and its body; (None, b"") once the client has closed its end."""
    request = None
    body = bytearray()
    while True:
        event = connection.next_event()
        if event is h11.NEED_DATA:
            with trio.fail_after(_IDLE_S):
                data = await stream.receive_some(16 * 1024)
            connection.receive_data(data)
        elif isinstance(event, h11.Request):
            request = event
        elif isinstance(event, h11.Data):
            body += event.data
            if len(body) > MAX_BODY_BYTES:
                raise _HttpError(413, f"the body is over {MAX_BODY_BYTES} bytes")
        elif isinstance(event, h11.EndOfMessage):
            return request, bytes(body)
        elif isinstance(event, h11.ConnectionClosed) or event is h11.PAUSED:
            return None, b""


async def _send(connection: h11.Connection, stream: trio.SocketStream, status: int, value: Any,
                headers: list[tuple[str, str]], *, close: bool = False) -> None:
    payload = json.dumps(value).encode()
    all_headers = [("Content-Type", "application/json"), ("Content-Length", str(len(payload))), *headers]
    if close:
        all_headers.append(("Connection", "close"))
    data = connection.send(h11.Response(status_code=status, headers=all_headers,
                                        reason=HTTPStatus(status).phrase.encode()))
    data += connection.send(h11.Data(data=payload))
    data += connection.send(h11.EndOfMessage())
    await stream.send_all(data)
