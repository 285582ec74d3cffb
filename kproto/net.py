"""Talking to one broker: a minimal blocking connection with version negotiation.

:class:`BrokerConnection` opens a TCP connection, asks the broker which API
versions it speaks (ApiVersions at kproto's newest version, downgrading when
the broker answers UNSUPPORTED_VERSION, and to v0 when it answers with a body
that cannot be parsed), and then sends requests at the negotiated versions,
one at a time.

>>> with BrokerConnection("127.0.0.1:9092") as conn:          # doctest: +SKIP
...     meta = conn.request(ApiKey.METADATA, {"topics": None})
"""

from __future__ import annotations

import socket
import struct
from types import TracebackType
from typing import Any

from . import __version__, protocol
from .errors import KafkaConnectionError, ProtocolError, UnsupportedVersionError
from .protocol import ApiKey

_SIZE = struct.Struct(">i")
#: Largest response accepted (Kafka's own socket.request.max.bytes default).
MAX_RESPONSE_BYTES = 100 * 1024 * 1024


def parse_address(address: str, default_port: int = 9092) -> tuple[str, int]:
    """``"host:port"`` (or ``"[v6]:port"``, or a bare host) -> (host, port)."""
    host, sep, port = address.strip().rpartition(":")
    if not sep or "]" in port:
        return address.strip().strip("[]"), default_port
    if not port.isdigit():
        raise ValueError(f"invalid port in broker address {address!r}")
    return host.strip("[]"), int(port)


class BrokerConnection:
    """A blocking connection to one broker, with ApiVersions negotiation.

    ``versions`` maps API key to the version chosen for this connection;
    ``broker_versions`` is what the broker advertised.
    """

    def __init__(self, address: str, *, client_id: str = "kproto",
                 timeout: float = 30.0, max_response_bytes: int = MAX_RESPONSE_BYTES) -> None:
        self.address = address
        self.host, self.port = parse_address(address)
        self.client_id = client_id
        self.timeout = timeout
        self.max_response_bytes = max_response_bytes
        self.versions: dict[int, int] = {}
        self.broker_versions: dict[int, tuple[int, int]] = {}
        self.api_versions_version = -1
        self._sock: socket.socket | None = None
        self._correlation_id = 0

    # -- lifecycle

    def connect(self) -> BrokerConnection:
        """Open the socket and negotiate versions (idempotent)."""
        if self._sock is None:
            try:
                self._sock = socket.create_connection((self.host, self.port), self.timeout)
            except OSError as exc:
                raise KafkaConnectionError(f"cannot connect to {self.address}: {exc}") from exc
            self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            try:
                self._negotiate()
            except BaseException:
                self.close()
                raise
        return self

    def close(self) -> None:
        """Close the socket."""
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def __enter__(self) -> BrokerConnection:
        return self.connect()

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    # -- requests

    def request(self, api_key: int, fields: dict[str, Any], *, version: int | None = None
                ) -> dict[str, Any]:
        """Send one request and return the decoded response body.

        ``version`` defaults to the negotiated version of ``api_key``.
        """
        self.connect()
        if version is None:
            version = protocol.pick(self.versions, api_key)
        return self._round_trip(api_key, version, fields)

    def request_raw(self, api_key: int, fields: dict[str, Any], *, version: int | None = None
                    ) -> tuple[int, memoryview]:
        """Send one request; return (version, the response body undecoded).

        For responses decoded in bulk elsewhere, e.g. Fetch responses by
        :func:`kproto.records.decode_fetch_response`.
        """
        self.connect()
        if version is None:
            version = protocol.pick(self.versions, api_key)
        payload = self._exchange(api_key, version, fields)
        pos = protocol.response_header_size(api_key, version, payload)
        return version, memoryview(payload)[pos:]

    def api_versions(self, version: int) -> dict[str, Any]:
        """Send ApiVersions at ``version`` and return the body, as decoded."""
        fields: dict[str, Any] = {}
        if version >= 3:
            fields = {"client_software_name": "kproto", "client_software_version": __version__}
        return self._round_trip(ApiKey.API_VERSIONS, version, fields)

    def _negotiate(self) -> None:
        version = protocol.API_VERSIONS[ApiKey.API_VERSIONS][1]
        while True:
            try:
                body = self.api_versions(version)
            except ProtocolError:
                # Some brokers (librdkafka's mock cluster) answer a newer ApiVersions
                # than they speak with a body we cannot parse: fall back to v0.
                if version == 0:
                    raise
                self._reconnect()
                version = 0
                continue
            retry = protocol.api_versions_retry(body, version)
            if retry is None:
                break
            version = retry
        if body["error_code"] != 0:
            raise UnsupportedVersionError(
                f"{self.address} refused ApiVersions (error {body['error_code']})")
        self.api_versions_version = version
        self.broker_versions = protocol.broker_ranges(body)
        self.versions = protocol.negotiate(body)

    def _reconnect(self) -> None:
        self.close()
        self._sock = socket.create_connection((self.host, self.port), self.timeout)

    def _round_trip(self, api_key: int, version: int, fields: dict[str, Any]) -> dict[str, Any]:
        payload = self._exchange(api_key, version, fields)
        return protocol.decode_response(api_key, version, payload)[1]

    def _exchange(self, api_key: int, version: int, fields: dict[str, Any]) -> bytes:
        """Send a request, read its response frame, check the correlation id."""
        assert self._sock is not None
        self._correlation_id = (self._correlation_id + 1) & 0x7FFFFFFF
        cid = self._correlation_id
        frame = protocol.encode_request(api_key, version, cid, self.client_id, fields)
        try:
            self._sock.sendall(frame)
            size = _SIZE.unpack(self._recv_exactly(4))[0]
            if not 0 <= size <= self.max_response_bytes:
                raise ProtocolError(f"response of {size} bytes from {self.address} exceeds "
                                    f"the {self.max_response_bytes}-byte limit")
            payload = self._recv_exactly(size)
        except OSError as exc:
            self.close()
            raise KafkaConnectionError(f"connection to {self.address} failed: {exc}") from exc
        got = _SIZE.unpack_from(payload)[0] if len(payload) >= 4 else None
        if got != cid:
            self.close()
            raise ProtocolError(f"{self.address} answered correlation id {got}, expected {cid}")
        return payload

    def _recv_exactly(self, n: int) -> bytes:
        assert self._sock is not None
        buf = bytearray(n)
        view = memoryview(buf)
        got = 0
        while got < n:
            k = self._sock.recv_into(view[got:])
            if k == 0:
                raise KafkaConnectionError(f"{self.address} closed the connection")
            got += k
        return bytes(buf)
