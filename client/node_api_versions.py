"""The API versions one broker supports, and the version to use for each (Kafka's NodeApiVersions).

Sans-IO: the blocking :class:`~client.connection.BrokerConnection` and the
asyncio :class:`~client.async_connection.AsyncBrokerConnection` both send the
ApiVersions request this module builds and let :class:`ApiVersionsNegotiation`
decide what its answer means.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from client.errors import KafkaConnectionError, NoCompatibleVersionError, check_error
from protocol.api import API_VERSIONS_KEY, APIS
from protocol.errors import ErrorCode
from protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from protocol.primitives import Message

__all__ = [
    "CLIENT_SOFTWARE_NAME",
    "CLIENT_SOFTWARE_VERSION",
    "ApiVersionsNegotiation",
    "NodeApiVersions",
    "api_versions_request",
]

CLIENT_SOFTWARE_NAME = "pafka-client"
CLIENT_SOFTWARE_VERSION = "0.1.0"


@dataclass(slots=True)
class NodeApiVersions:
    """What one broker advertised, and the highest version both sides support for each API."""

    #: The broker's (min, max) version for each API key it advertises.
    broker_versions: dict[int, tuple[int, int]] = field(default_factory=dict)
    #: The version to use for each API both sides support.
    api_versions: dict[int, int] = field(default_factory=dict)

    @classmethod
    def from_response(cls, response: ApiVersionsResponse) -> NodeApiVersions:
        broker = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
        chosen = {}
        for api_key, (low, high) in broker.items():
            spec = APIS.get(api_key)
            if spec is None:
                continue
            top = min(high, spec.versions.stop - 1)
            if top >= max(low, spec.versions.start):
                chosen[api_key] = top
        return cls(broker, chosen)

    def version_for(self, api_key: int, *, max_version: int | None = None) -> int:
        """The version to use for ``api_key`` (capped at ``max_version``)."""
        version = self.api_versions.get(api_key)
        spec = APIS[api_key]
        if version is None:
            raise NoCompatibleVersionError(spec.name, self.broker_versions.get(api_key), spec.versions)
        if max_version is not None and max_version < version:
            low = max(self.broker_versions[api_key][0], spec.versions.start)
            if max_version < low:
                raise NoCompatibleVersionError(spec.name, self.broker_versions.get(api_key), spec.versions)
            version = max_version
        return version


def api_versions_request() -> ApiVersionsRequest:
    return ApiVersionsRequest(client_software_name=CLIENT_SOFTWARE_NAME, client_software_version=CLIENT_SOFTWARE_VERSION)


class ApiVersionsNegotiation:
    """The ApiVersions exchange on a new connection, without the I/O.

    Send ``api_versions_request()`` at :attr:`version` and hand the answer to
    :meth:`received` until :attr:`result` is set. The first request goes at
    our highest version; a broker that does not know it answers
    UNSUPPORTED_VERSION in a v0 body listing its own range (KIP-511), and the
    second goes at the highest version both sides have. Any other error, or a
    second refusal, raises.
    """

    def __init__(self, address: object) -> None:
        self.address = address
        self.version = APIS[API_VERSIONS_KEY].versions.stop - 1
        self.result: NodeApiVersions | None = None
        self._refused = False

    def received(self, response: Message | None) -> None:
        assert isinstance(response, ApiVersionsResponse)
        if response.error_code != ErrorCode.UNSUPPORTED_VERSION:
            check_error(response.error_code, api_name="ApiVersions")
            self.result = NodeApiVersions.from_response(response)
            return
        theirs = {k.api_key: k.max_version for k in response.api_keys}
        fallback = min(theirs.get(API_VERSIONS_KEY, 0), self.version)
        if self._refused or fallback >= self.version:
            raise KafkaConnectionError(f"{self.address}: ApiVersions negotiation failed")
        self._refused, self.version = True, fallback
