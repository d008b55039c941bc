"""ApiVersions (key 18), versions 0-3: the APIs and versions this listener serves.

Every version's response header is v0, even the flexible v3 (kafka-python's codec takes care of that). A
request at a version above 3 is answered by the wire itself with UNSUPPORTED_VERSION and the table in a v0 body,
and the client retries at a version we listed. Only implemented APIs are listed, each with the versions its
module accepts.
"""

from __future__ import annotations

from collections.abc import Mapping

from kafkalite.common import errors
from kafkalite.network.kafka.api import KafkaApi, Session
from kafkalite.network.kafka.protocol import ApiVersionsRequest, ApiVersionsResponse, Message, entry


def table(apis: Mapping[int, KafkaApi], version: int, error_code: int = errors.NONE.code) -> Message:
    return ApiVersionsResponse(
        version=version, error_code=error_code, throttle_time_ms=0,
        api_keys=[entry(ApiVersionsResponse, "ApiVersion", api_key=key, min_version=api.versions[0],
                        max_version=api.versions[1]) for key, api in sorted(apis.items())])


async def handle(request: Message, session: Session) -> Message:
    return table(session.apis, session.version)


API = KafkaApi(ApiVersionsRequest, ApiVersionsResponse, (0, 3), handle)
