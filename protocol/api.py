"""Entry points of the wire protocol: registries of every API and frame codecs.

A *frame* here is one request or response without its 4-byte size prefix (see
``protocol.framing``). The broker calls :func:`decode_request` and
:func:`encode_response`; the replica fetcher and CLI tools call
:func:`encode_request` and :func:`decode_response`.

Header versions follow Kafka: requests use header v2 when the API version is
flexible and v1 otherwise (v0 only existed for ControlledShutdown v0, which
Kafka 4 removed); responses use header v1 when flexible and v0 otherwise,
except ApiVersions responses, which always use v0 so that a client that does
not yet know the broker's versions can read them.

Errors: every malformed frame raises :class:`~protocol.errors.ProtocolError`
with whatever was known (api key, version, correlation id). Trailing bytes
after a complete request body are ignored, as Kafka's broker ignores them;
responses must be consumed exactly (see ``primitives.decode_exact``).
"""

from __future__ import annotations

import dataclasses
import importlib
import struct
from collections.abc import Iterator, Mapping
from types import ModuleType

from protocol.buffers import Buffer, Chunk
from protocol.errors import ProtocolError
from protocol.messages import API_INDEX
from protocol.messages.request_header import RequestHeader
from protocol.messages.response_header import ResponseHeader
from protocol.primitives import (
    LOW_LEVEL_ERRORS,
    Decoder,
    Encoder,
    Message,
    UnsupportedVersionError,
    _new,
    decode_exact,
    run_encoder,
)

__all__ = [
    "APIS",
    "APIS_BY_NAME",
    "API_VERSIONS_KEY",
    "ApiSpec",
    "DecodedRequest",
    "ProtocolError",
    "RequestHeader",
    "ResponseHeader",
    "UnsupportedVersionError",
    "decode_request",
    "decode_response",
    "encode_request",
    "encode_response",
]

API_VERSIONS_KEY = 18

_REQUEST_PREFIX = struct.Struct(">hhih")  # api key, api version, correlation id, client id size
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")


@dataclasses.dataclass(frozen=True, slots=True)
class ApiSpec:
    """One Kafka API as the schemas define it.

    ``request``/``response`` are the generated message classes; their
    ``_DECODERS``/``_ENCODERS`` dicts map each valid version to the codec
    functions (``decoder(buf: memoryview, pos) -> (message, pos)`` and
    ``encoder(message, out: bytearray, chunks: list) -> bytearray``).
    """

    api_key: int
    name: str
    versions: range
    flexible_min_version: int | None
    listeners: tuple[str, ...]
    request: type[Message]
    response: type[Message]
    module: ModuleType

    request_decoders: dict[int, Decoder]
    request_encoders: dict[int, Encoder]
    response_decoders: dict[int, Decoder]
    response_encoders: dict[int, Encoder]

    def is_flexible(self, version: int) -> bool:
        return self.flexible_min_version is not None and version >= self.flexible_min_version

    def request_header_version(self, version: int) -> int:
        return 2 if self.is_flexible(version) else 1

    def response_header_version(self, version: int) -> int:
        if self.api_key == API_VERSIONS_KEY:
            return 0
        return 1 if self.is_flexible(version) else 0


def _spec_of(module: ModuleType) -> ApiSpec:
    return ApiSpec(
        api_key=module.API_KEY,
        name=module.API_NAME,
        versions=module.VALID_VERSIONS,
        flexible_min_version=module.FLEXIBLE_MIN_VERSION,
        listeners=module.LISTENERS,
        request=module.REQUEST,
        response=module.RESPONSE,
        module=module,
        request_decoders=module.REQUEST._DECODERS,
        request_encoders=module.REQUEST._ENCODERS,
        response_decoders=module.RESPONSE._DECODERS,
        response_encoders=module.RESPONSE._ENCODERS,
    )


class _ApiRegistry(Mapping[int, ApiSpec]):
    """Every API with generated codecs, by key; a codec module is imported on first use.

    Membership and iteration use the generated index only, so asking whether a
    key exists never imports anything.
    """

    def __init__(self) -> None:
        self._specs: dict[int, ApiSpec] = {}

    def __getitem__(self, api_key: int) -> ApiSpec:
        spec = self._specs.get(api_key)
        if spec is None:
            module_name, _ = API_INDEX[api_key]
            spec = self._specs[api_key] = _spec_of(importlib.import_module(f"protocol.messages.{module_name}"))
        return spec

    def get(self, api_key: int, default: ApiSpec | None = None) -> ApiSpec | None:  # type: ignore[override]
        spec = self._specs.get(api_key)  # the per-request fast path
        if spec is not None:
            return spec
        return self[api_key] if api_key in API_INDEX else default

    def __contains__(self, api_key: object) -> bool:
        return api_key in API_INDEX

    def __iter__(self) -> Iterator[int]:
        return iter(API_INDEX)

    def __len__(self) -> int:
        return len(API_INDEX)


class _ApiRegistryByName(Mapping[str, ApiSpec]):
    def __init__(self, by_key: _ApiRegistry) -> None:
        self._by_key = by_key
        self._keys = {name: key for key, (_, name) in API_INDEX.items()}

    def __getitem__(self, name: str) -> ApiSpec:
        return self._by_key[self._keys[name]]

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)


#: Every API with generated codecs, by API key (codec modules load lazily).
APIS: Mapping[int, ApiSpec] = _ApiRegistry()
#: The same, by Kafka's API name ("Produce", "Fetch", ...).
APIS_BY_NAME: Mapping[str, ApiSpec] = _ApiRegistryByName(APIS)  # type: ignore[arg-type]


@dataclasses.dataclass(slots=True)
class DecodedRequest:
    """A decoded request frame: its header, its body and the API it belongs to."""

    header: RequestHeader
    body: Message
    api: ApiSpec

    @property
    def api_key(self) -> int:
        return self.header.request_api_key

    @property
    def api_version(self) -> int:
        return self.header.request_api_version

    @property
    def correlation_id(self) -> int:
        return self.header.correlation_id

    @property
    def client_id(self) -> str | None:
        return self.header.client_id


def _as_view(frame: Buffer) -> memoryview:
    view = frame if isinstance(frame, memoryview) else memoryview(frame)
    if view.format != "B" or view.ndim != 1:
        view = view.cast("B")
    return view


def _peek_client_id(buf: memoryview) -> str | None:
    """The client id of a request header, if it can be read at all."""
    try:
        (size,) = _INT16.unpack_from(buf, 8)
        if size < 0 or 10 + size > len(buf):
            return None
        return str(buf[10 : 10 + size], "utf-8")
    except LOW_LEVEL_ERRORS:
        return None


def _unsupported(buf: memoryview, api_key: int, version: int, correlation_id: int) -> UnsupportedVersionError:
    known = "unsupported version" if api_key in APIS else "unknown API key"
    exc = UnsupportedVersionError(
        f"{known} {api_key} v{version}", api_key=api_key, api_version=version, correlation_id=correlation_id
    )
    # The header v1 part is always decodable, so the broker can still answer
    # (e.g. ApiVersions of a future version gets UNSUPPORTED_VERSION in v0).
    exc.client_id = _peek_client_id(buf)  # type: ignore[attr-defined]
    return exc


def decode_request(frame: Buffer) -> DecodedRequest:
    """Decode one request frame (without its size prefix): header and body.

    Raises ``UnsupportedVersionError`` (a ProtocolError carrying api_key,
    api_version, correlation_id and ``client_id``) for an unknown API key or
    version, and ProtocolError for anything malformed. Records fields of the
    body are memoryview slices of ``frame``: keep ``frame`` alive while using them.
    """
    buf = _as_view(frame)
    if len(buf) < 10:
        known = _REQUEST_PREFIX.unpack_from(bytes(buf) + bytes(10), 0) if len(buf) >= 8 else (None, None, None)
        raise ProtocolError(
            f"request frame of {len(buf)} bytes is shorter than a request header",
            api_key=known[0],
            api_version=known[1],
            correlation_id=known[2],
        )
    api_key, version, correlation_id, client_id_size = _REQUEST_PREFIX.unpack_from(buf, 0)
    spec = APIS.get(api_key)
    if spec is None or (decoder := spec.request_decoders.get(version)) is None:
        raise _unsupported(buf, api_key, version, correlation_id)
    try:
        # The header is parsed inline rather than by the generated decoder:
        # it precedes every request, and this is the broker's hottest path.
        pos = 10 + client_id_size
        if client_id_size < 0:
            if client_id_size != -1:
                raise ProtocolError("negative client id length")
            client_id, pos = None, 10
        elif pos > len(buf):
            raise ProtocolError("client id runs past the end of the frame")
        else:
            client_id = str(buf[10:pos], "utf-8")
        if spec.flexible_min_version is not None and version >= spec.flexible_min_version:
            if buf[pos]:
                _, pos = RequestHeader._DECODERS[2](buf, 0)  # rare: the header carries tagged fields
            else:
                pos += 1
        body, _end = decoder(buf, pos)
    except ProtocolError as exc:
        exc.api_key, exc.api_version, exc.correlation_id = api_key, version, correlation_id
        raise
    except LOW_LEVEL_ERRORS as exc:
        raise ProtocolError(
            f"malformed {spec.name} request: {type(exc).__name__}: {exc}",
            api_key=api_key,
            api_version=version,
            correlation_id=correlation_id,
        ) from None
    # Bytes after a complete body are ignored, as Kafka's broker ignores them
    # (its generated read() never checks for leftovers): librdkafka 2.16 sends
    # Metadata v13 requests with three bytes more than Kafka 4's schema has.
    header = _new(RequestHeader)
    header.request_api_key = api_key
    header.request_api_version = version
    header.correlation_id = correlation_id
    header.client_id = client_id
    return DecodedRequest(header, body, spec)


def _spec_for(api_key: int, version: int, correlation_id: int | None = None) -> ApiSpec:
    spec = APIS.get(api_key)
    if spec is None or version not in spec.versions:
        raise UnsupportedVersionError(
            f"no codec for API {api_key} v{version}", api_key=api_key, api_version=version, correlation_id=correlation_id
        )
    return spec


def _finish(b: bytearray, chunks: list[Chunk]) -> list[Chunk]:
    """Append the last buffer and write the size prefix into the first chunk."""
    if b:
        chunks.append(b)
    # Every chunk's len() is its byte size: memoryview chunks are byte-format
    # (put_records casts others) and FileRange defines __len__.
    size = len(b) - 4 if len(chunks) == 1 else sum(map(len, chunks)) - 4
    first = chunks[0]
    assert isinstance(first, bytearray)
    _INT32.pack_into(first, 0, size)
    return chunks


def encode_response(api_key: int, api_version: int, correlation_id: int, body: Message) -> list[Chunk]:
    """Encode a response frame, size prefix included, as chunks for writelines/sendfile.

    The first chunk is a bytearray holding the size, header and the body up to
    the first large records field; records given as large buffers or
    FileRanges follow as their own chunks, uncopied.
    """
    spec = _spec_for(api_key, api_version, correlation_id)
    b = bytearray(4)
    b += _INT32.pack(correlation_id)
    if spec.response_header_version(api_version) == 1:
        b.append(0)  # no tagged fields in the response header
    chunks: list[Chunk] = []
    b = run_encoder(spec.response_encoders[api_version], body, b, chunks, api_key, api_version)
    return _finish(b, chunks)


def encode_request(
    api_key: int, api_version: int, correlation_id: int, client_id: str | None, body: Message
) -> list[Chunk]:
    """Encode a request frame (client side), size prefix included, as chunks."""
    spec = _spec_for(api_key, api_version, correlation_id)
    header = RequestHeader(
        request_api_key=api_key, request_api_version=api_version, correlation_id=correlation_id, client_id=client_id
    )
    chunks: list[Chunk] = []
    hv = spec.request_header_version(api_version)
    b = run_encoder(RequestHeader._ENCODERS[hv], header, bytearray(4), chunks, api_key, api_version)
    b = run_encoder(spec.request_encoders[api_version], body, b, chunks, api_key, api_version)
    return _finish(b, chunks)


def decode_response(api_key: int, api_version: int, frame: Buffer) -> tuple[int, Message]:
    """Decode a response frame (without size prefix) to ``(correlation_id, body)``."""
    spec = _spec_for(api_key, api_version)
    buf = _as_view(frame)
    if len(buf) < 4:
        raise ProtocolError("response frame shorter than its header", api_key=api_key, api_version=api_version)
    (correlation_id,) = _INT32.unpack_from(buf, 0)
    try:
        _header, pos = ResponseHeader._DECODERS[spec.response_header_version(api_version)](buf, 0)
        body = decode_exact(spec.response_decoders[api_version], buf, pos, spec.response.__name__, api_key, api_version)
    except ProtocolError as exc:
        exc.api_key, exc.api_version, exc.correlation_id = api_key, api_version, correlation_id
        raise
    except LOW_LEVEL_ERRORS as exc:
        raise ProtocolError(
            f"malformed response header: {type(exc).__name__}: {exc}",
            api_key=api_key,
            api_version=api_version,
            correlation_id=correlation_id,
        ) from None
    return correlation_id, body

