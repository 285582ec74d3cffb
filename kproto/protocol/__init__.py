"""The Kafka wire protocol: every API kproto speaks, every version, as plain data.

Messages are plain Python data: dicts with the snake_case names of the
official Kafka fields, lists, ``int``, ``bool``, ``str``, ``bytes`` (bytes and
records fields), ``None`` (null), :class:`uuid.UUID` and ``float``. Fields left
out take their defaults when encoding; decoding fills in every declared field
(defaults for those absent from the version, as Kafka's own classes do).

>>> from kproto import protocol
>>> body = protocol.encode(3, 1, "request", {"topics": None})   # Metadata v1: all topics
>>> body
b'\\xff\\xff\\xff\\xff'
>>> protocol.decode(3, 1, "request", body)["topics"] is None
True

Bodies are encoded/decoded without header or size prefix; :func:`encode_request`
and :func:`decode_response` add and strip the headers and framing.
"""

from __future__ import annotations

import struct
from typing import Any, Literal

from ..errors import EncodeError, ProtocolError, UnsupportedVersionError
from .apis import APIS, CONSUMER_ASSIGNMENT, CONSUMER_SUBSCRIPTION, REQUEST_HEADER, RESPONSE_HEADER
from .engine import UNKNOWN_TAGS, MessageCodec, codec_for
from .fetch_encode import encode_fetch
from .keys import ApiKey
from .schema import Api, Message
from .versions import (
    API_VERSIONS,
    api_versions_retry,
    broker_ranges,
    common_ranges,
    fillable,
    negotiate,
    pick,
)

__all__ = [
    "API_VERSIONS", "ApiKey", "UNKNOWN_TAGS", "encode", "decode", "encode_request",
    "decode_request", "encode_response", "decode_response", "response_header_size",
    "request_header_version",
    "response_header_version", "negotiate", "common_ranges", "broker_ranges", "pick",
    "fillable", "api_versions_retry",
    "encode_subscription", "decode_subscription", "encode_assignment", "decode_assignment",
    "get_api", "codec",
]

Kind = Literal["request", "response"]
_SIZE = struct.Struct(">i")


def get_api(api_key: int) -> Api:
    """The declaration of ``api_key`` (raises UnsupportedVersionError if unknown)."""
    try:
        return APIS[api_key]
    except KeyError:
        raise UnsupportedVersionError(f"kproto does not speak API key {api_key}") from None


def codec(api_key: int, version: int, kind: Kind) -> MessageCodec:
    """The cached encoder/decoder of one API's request or response at ``version``."""
    api = get_api(api_key)
    if version not in api.versions:
        raise UnsupportedVersionError(
            f"{api.name} v{version} is not a version kproto knows (it knows {api.versions})")
    if kind == "request":
        return codec_for(api.request, version)
    if kind == "response":
        return codec_for(api.response, version)
    raise ValueError(f"kind must be 'request' or 'response', not {kind!r}")


def encode(api_key: int, version: int, kind: Kind, fields: dict[str, Any]) -> bytes:
    """Encode a request or response body (no header, no size prefix)."""
    return codec(api_key, version, kind).encode(fields)


def decode(api_key: int, version: int, kind: Kind, data: Any, *, strict: bool = False
           ) -> dict[str, Any]:
    """Decode a request or response body (no header, no size prefix).

    Raises :class:`~kproto.errors.ProtocolError` naming the API, version,
    field and byte offset when the body is truncated or malformed. Bytes left
    over after the message are ignored, as Kafka's own clients do (librdkafka's
    mock cluster, for one, adds a byte to flexible Metadata responses); with
    ``strict=True`` they are an error.

    An ApiVersions response that cannot be read at ``version`` but reads as a
    v0 error response (what brokers send to a too-new ApiVersions request) is
    returned as decoded at v0, as Kafka's Java client does.
    """
    c = codec(api_key, version, kind)
    try:
        return c.decode(data, whole=strict)[0]
    except ProtocolError:
        if api_key == ApiKey.API_VERSIONS and kind == "response" and version > 0:
            try:
                fallback = codec_for(APIS[api_key].response, 0).decode(data, whole=strict)[0]
            except ProtocolError:
                pass
            else:
                if fallback["error_code"] != 0:
                    return fallback
        raise


def request_header_version(api_key: int, version: int) -> int:
    """Request header v2 for flexible API versions, v1 otherwise."""
    return 2 if version in get_api(api_key).flexible else 1


def response_header_version(api_key: int, version: int) -> int:
    """Response header v1 for flexible API versions, v0 otherwise; ApiVersions always v0."""
    if api_key == ApiKey.API_VERSIONS:
        return 0
    return 1 if version in get_api(api_key).flexible else 0


def encode_request(api_key: int, version: int, correlation_id: int, client_id: str | None,
                   fields: dict[str, Any], *, header_tags: dict[int, bytes] | None = None) -> bytes:
    """A complete request frame: int32 size, request header, body."""
    if api_key == ApiKey.FETCH and not header_tags:
        frame = encode_fetch(version, correlation_id, client_id, fields)
        if frame is not None:
            return frame
    header: dict[str, Any] = {
        "request_api_key": api_key, "request_api_version": version,
        "correlation_id": correlation_id, "client_id": client_id,
    }
    if header_tags:
        header[UNKNOWN_TAGS] = header_tags
    out = bytearray(4)
    codec_for(REQUEST_HEADER, request_header_version(api_key, version)).encode_into(out, header)
    codec(api_key, version, "request").encode_into(out, fields)
    _SIZE.pack_into(out, 0, len(out) - 4)
    return bytes(out)


def decode_request(payload: Any, *, strict: bool = True
                   ) -> tuple[dict[str, Any], dict[str, Any]]:
    """Parse a request frame without its size prefix: (header, body).

    The header's api key and version select the body's schema. Unlike
    responses, trailing bytes are an error unless ``strict=False``.
    """
    data = memoryview(payload).cast("B") if not isinstance(payload, bytes) else payload
    if len(data) < 4:
        raise ProtocolError(f"request of {len(data)} bytes is too short for a header")
    api_key, version = struct.unpack_from(">hh", data, 0)
    hv = request_header_version(api_key, version) if api_key in APIS else 1
    header, pos = codec_for(REQUEST_HEADER, hv).decode(data, whole=False)
    body, _ = codec(api_key, version, "request").decode(data, pos, whole=strict)
    return header, body


def encode_response(api_key: int, version: int, correlation_id: int,
                    fields: dict[str, Any]) -> bytes:
    """A complete response frame: int32 size, response header, body (for test servers)."""
    out = bytearray(4)
    codec_for(RESPONSE_HEADER, response_header_version(api_key, version)).encode_into(
        out, {"correlation_id": correlation_id})
    codec(api_key, version, "response").encode_into(out, fields)
    _SIZE.pack_into(out, 0, len(out) - 4)
    return bytes(out)


def response_header_size(api_key: int, version: int, payload: Any) -> int:
    """Bytes taken by the response header at the start of ``payload``."""
    hv = response_header_version(api_key, version)
    return codec_for(RESPONSE_HEADER, hv).decode(payload, whole=False)[1]


def decode_response(api_key: int, version: int, payload: Any, *, framed: bool = False,
                    strict: bool = False) -> tuple[int, dict[str, Any]]:
    """Parse a response: (correlation_id, body).

    ``payload`` is what follows the int32 size on the wire; with ``framed=True``
    it starts with the size, which must match. ``strict`` as in :func:`decode`.
    """
    data = memoryview(payload).cast("B") if not isinstance(payload, bytes) else payload
    if framed:
        if len(data) < 4 or _SIZE.unpack_from(data, 0)[0] != len(data) - 4:
            raise ProtocolError(f"response frame size prefix does not match its {len(data)} bytes")
        data = memoryview(data)[4:]
    header, pos = codec_for(RESPONSE_HEADER, response_header_version(api_key, version)).decode(
        data, whole=False)
    body = decode(api_key, version, "response", memoryview(data)[pos:], strict=strict)
    return header["correlation_id"], body


# --------------------------------------------------------------------------- consumer protocol

_CONSUMER_PROTOCOL_MAX = 3


def _encode_embedded(message: Message, fields: dict[str, Any], version: int) -> bytes:
    if version not in message.versions:
        raise EncodeError(f"{message.name} has versions {message.versions}, not {version}")
    fields = {k: v for k, v in fields.items() if k != "version"}
    return _SIZE.pack(version)[2:] + codec_for(message, version).encode(fields)


def _decode_embedded(message: Message, data: Any) -> dict[str, Any]:
    buf = bytes(data)
    if len(buf) < 2:
        raise ProtocolError(f"{message.name}: {len(buf)} bytes is too short for a version")
    version = struct.unpack_from(">h", buf)[0]
    if version < 0:
        raise ProtocolError(f"{message.name}: invalid version {version}", offset=0)
    out = codec_for(message, min(version, _CONSUMER_PROTOCOL_MAX)).decode_lenient(buf, 2)
    out["version"] = version
    return out


def encode_subscription(fields: dict[str, Any], version: int = 3) -> bytes:
    """ConsumerProtocolSubscription (JoinGroup ``protocols[].metadata``): int16 version + body."""
    return _encode_embedded(CONSUMER_SUBSCRIPTION, fields, version)


def decode_subscription(data: Any) -> dict[str, Any]:
    """Decode a subscription leniently: newer versions read as v3, short bodies
    take defaults for missing trailing fields. The result has a ``version`` key."""
    return _decode_embedded(CONSUMER_SUBSCRIPTION, data)


def encode_assignment(fields: dict[str, Any], version: int = 3) -> bytes:
    """ConsumerProtocolAssignment (SyncGroup ``assignment``): int16 version + body."""
    return _encode_embedded(CONSUMER_ASSIGNMENT, fields, version)


def decode_assignment(data: Any) -> dict[str, Any]:
    """Decode an assignment leniently (see :func:`decode_subscription`)."""
    return _decode_embedded(CONSUMER_ASSIGNMENT, data)
