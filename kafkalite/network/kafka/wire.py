"""Apache Kafka's wire protocol on a broker listener: one request frame in, its response frame out.

Theory of operation. A frame's first eight bytes name the API key, the version and the correlation id; the
key selects the API module (`apis.APIS`), which declares the versions it accepts. Then kafka-python's codec
(behind `protocol`) decodes the whole frame, the module's handler translates the request into the native
requests the broker serves and back, and the response goes out with the request's correlation id.

Bad input, as a Kafka broker treats it:
- a frame too short for a header, an unknown API key, a body that does not decode: the stream cannot be
  trusted to be in step any more, so the connection is closed (one log line) and nothing reaches the broker;
- an ApiVersions request at a version we do not speak: answered with UNSUPPORTED_VERSION and our version table
  in a v0 body, and the connection stays open, because that is how clients negotiate;
- any other API at a version we did not advertise: closed, as Kafka closes it (a client never sends one);
- errors about the request's content (a bad CRC, an unknown topic): the API's error code in its response.
A produce with acks=0 gets no response at all, as Kafka's clients expect.
"""

from __future__ import annotations

import logging

from kafkalite.common import errors
from kafkalite.common.errors import KafkaError
from kafkalite.network.kafka import KAFKA_LISTENER, api_versions
from kafkalite.network.kafka.api import Session
from kafkalite.network.kafka.apis import APIS
from kafkalite.network.kafka.protocol import decode_request, encode_response, peek_header
from kafkalite.network.listener import Answer, client_host
from kafkalite.network.requests import RequestContext
from kafkalite.network.transport import ConnectionDropped, Handler

log = logging.getLogger(__name__)

_CLOSE = Answer(None, False)


class KafkaWire:
    """The `WireProtocol` of a KAFKA listener: Kafka requests in, translated to the broker's own handler."""

    def __init__(self, handler: Handler, listener_name: str = KAFKA_LISTENER) -> None:
        self._handler = handler
        self._listener_name = listener_name

    async def answer(self, frame: bytes, peer: str) -> Answer:
        header = peek_header(frame)
        if header is None:
            return self._close(peer, f"a frame of {len(frame)} bytes cannot hold a request header")
        api = APIS.get(header.api_key)
        if api is None:
            return self._close(peer, f"unknown API key {header.api_key}")
        if not api.supports(header.api_version):
            if api is api_versions.API:
                log.info("%s listener: %s asked for ApiVersions v%d; answering with the versions we speak",
                         self._listener_name, peer, header.api_version)
                return Answer(encode_response(api_versions.table(APIS, 0, errors.UNSUPPORTED_VERSION.code), 0,
                                              header.correlation_id), True)
            return self._close(peer, f"{api.request.name} v{header.api_version} is not supported "
                                     f"(versions {api.versions[0]}..{api.versions[1]})")
        try:
            request, client_id = decode_request(api.request, frame, header.api_version)
        except ValueError as exc:
            return self._close(peer, f"malformed {api.request.name} v{header.api_version} request: {exc}")
        context = RequestContext(source=f"client:{peer}", listener=self._listener_name, client_host=client_host(peer),
                                 client_id=client_id or "", correlation_id=header.correlation_id)
        try:
            response = await api.handle(request, Session(self._handler, context, header.api_version, APIS))
            if response is None:
                return Answer(None, True)
            return Answer(encode_response(response, header.api_version, header.correlation_id), True)
        except ConnectionDropped as exc:
            log.info("%s listener: closing connection from %s: %s", self._listener_name, peer, exc)
            return _CLOSE
        except KafkaError as exc:
            return self._close(peer, f"{api.request.name} failed: {exc}")
        except Exception:  # a bug in a translation costs this connection only
            log.exception("%s listener: closing connection from %s: %s v%d failed", self._listener_name, peer,
                          api.request.name, header.api_version)
            return _CLOSE

    def _close(self, peer: str, reason: str) -> Answer:
        log.warning("%s listener: closing connection from %s: %s", self._listener_name, peer, reason)
        return _CLOSE
