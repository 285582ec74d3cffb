"""The connection state machine, sans I/O: requests in, bytes out; bytes in, responses out.

:class:`Connection` owns framing, correlation ids, the queue of requests in
flight (Kafka answers in order on one connection, so several may be pipelined)
and which requests get no answer (Produce with ``acks=0``). It never touches
a socket: a transport feeds it the bytes it reads (:meth:`Connection.receive_data`)
and writes what it asks to send (:meth:`Connection.data_to_send`). That keeps
the protocol logic testable byte by byte and shared by every transport.

>>> conn = Connection(client_id="me", versions={3: 12})
>>> req = conn.send(3, {"topics": None})
>>> wire = conn.data_to_send()          # write these bytes to the broker
>>> # ... then for every chunk read from the socket:
>>> # for response in conn.receive_data(chunk): ...
"""

from __future__ import annotations

import itertools
import struct
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .. import protocol
from ..errors import KafkaConnectionError, ProtocolError

_SIZE = struct.Struct(">i")

#: Kafka's own socket.request.max.bytes default; responses above it are refused.
DEFAULT_MAX_RESPONSE_BYTES = 100 * 1024 * 1024

#: From these versions the broker answers at once and the *client* must wait out
#: ``throttle_time_ms`` before sending more on the connection (KIP-219).
CLIENT_SIDE_THROTTLE_FROM = {
    0: 6, 1: 8, 2: 3, 3: 6, 8: 4, 9: 4, 10: 2, 11: 3, 12: 2, 13: 2, 14: 2, 15: 2, 16: 2,
    18: 2, 19: 3, 20: 2, 22: 1,
}


@dataclass
class Request:
    """A request sent on a connection (and, once answered, its response)."""

    api_key: int
    version: int
    correlation_id: int
    expect_response: bool = True
    raw: bool = False
    #: Free slot for the transport (a future, a callback, ...).
    context: Any = None
    #: ``time.monotonic()`` when it was written (set by a transport that keeps metrics).
    sent_at: float = 0.0


@dataclass
class Response:
    """One answer, in the order requests were sent.

    ``body`` is the decoded dict, or a memoryview of the undecoded body when the
    request asked for ``raw``; ``error`` is set instead when the body could not
    be decoded (the connection itself is still in step).
    """

    request: Request
    body: Any = None
    error: Exception | None = None
    throttle_ms: int = 0


@dataclass
class Connection:
    """Framing and bookkeeping of one broker connection, without I/O."""

    client_id: str | None = "kproto"
    versions: dict[int, int] = field(default_factory=dict)
    #: The broker's own ranges, {api key: (min, max)} (to step down within them).
    broker_ranges: dict[int, tuple[int, int]] = field(default_factory=dict)
    max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES
    #: Monotonic time (seconds) before which the broker asked us not to send.
    throttled_until: float = 0.0

    def __post_init__(self) -> None:
        self._ids = itertools.count(1)
        self._outbox: list[bytes] = []
        self._in_flight: deque[Request] = deque()
        self._inbox = bytearray()
        self._closed: str | None = None

    # -- sending

    def send(self, api_key: int, fields: dict[str, Any] | Callable[[int], dict[str, Any]], *,
             version: int | None = None,
             expect_response: bool = True, raw: bool = False, context: Any = None) -> Request:
        """Queue a request (its bytes go out with the next :meth:`data_to_send`).

        ``fields`` may be a function of the version, for requests whose fields
        changed between versions (FindCoordinator v4 batches its keys).
        ``version`` defaults to the negotiated one, or the newest the fields
        can fill (a topic without an id: the versions that still name topics,
        see :func:`kproto.protocol.fillable`); ``expect_response=False`` is
        for Produce with ``acks=0``, which the broker never answers; ``raw``
        returns the response body undecoded (e.g. for bulk Fetch decoding).
        """
        if self._closed:
            raise KafkaConnectionError(f"connection is closed: {self._closed}")
        make = fields if callable(fields) else (lambda _version, f=fields: f)
        if version is None:
            version = protocol.pick(self.versions, api_key)
            body = make(version)
            fillable = protocol.fillable(api_key, version, body, self.broker_ranges)
            if fillable != version:         # (a topic without an id: an older version)
                version, body = fillable, make(fillable)
        else:
            body = make(version)
        cid = next(self._ids) & 0x7FFFFFFF
        frame = protocol.encode_request(api_key, version, cid, self.client_id, body)
        req = Request(api_key, version, cid, expect_response, raw, context)
        self._outbox.append(frame)
        if expect_response:
            self._in_flight.append(req)
        return req

    def data_to_send(self) -> bytes:
        """Everything queued so far, to write to the socket (and forget here)."""
        out = b"".join(self._outbox)
        self._outbox.clear()
        return out

    @property
    def in_flight(self) -> int:
        """Requests sent and not yet answered."""
        return len(self._in_flight)

    def requests_in_flight(self) -> list[Request]:
        """The requests sent and not yet answered, oldest first (a copy)."""
        return list(self._in_flight)

    # -- receiving

    def receive_data(self, data: bytes | bytearray | memoryview, now: float = 0.0
                     ) -> list[Response]:
        """Feed bytes read from the socket; return the responses they complete."""
        if self._closed:
            raise KafkaConnectionError(f"connection is closed: {self._closed}")
        # Bodies are views of one immutable buffer, copied at most once: a 1 MB Fetch
        # answer copied twice more (and its pages faulted in) cost as much as decoding it.
        if self._inbox:
            self._inbox += data
            if self._frame_size(self._inbox) > len(self._inbox):
                return []                   # the first frame is not complete yet
            data = bytes(self._inbox)
            self._inbox.clear()
        elif not isinstance(data, bytes):
            data = bytes(data)              # (a caller's buffer may change after)
        view = memoryview(data)
        out = []
        pos = 0
        while len(view) - pos >= 4:
            end = pos + self._frame_size(view, pos)
            if end > len(view):
                break
            out.append(self._complete(view[pos + 4:end], now))
            pos = end
        if pos < len(view):
            self._inbox += view[pos:]
        return out

    def _frame_size(self, buf: Any, pos: int = 0) -> int:
        """Bytes of the frame at ``pos`` of ``buf`` with its size prefix (0 when its
        size is not all there); ProtocolError for a size out of bounds."""
        if len(buf) - pos < 4:
            return 0
        size = _SIZE.unpack_from(buf, pos)[0]
        if size < 4 or size > self.max_response_bytes:
            self._fail(f"response size {size} is outside 4..{self.max_response_bytes} bytes")
        return 4 + size

    def _complete(self, payload: memoryview, now: float) -> Response:
        cid = _SIZE.unpack_from(payload)[0]
        if not self._in_flight:
            self._fail(f"unexpected response (correlation id {cid}): nothing is in flight")
        req = self._in_flight.popleft()
        if cid != req.correlation_id:
            self._fail(f"response correlation id {cid} does not match the oldest request's "
                       f"{req.correlation_id}")
        resp = Response(req)
        try:
            start = protocol.response_header_size(req.api_key, req.version, payload)
            if req.raw:
                resp.body = memoryview(payload)[start:]
            else:
                resp.body = protocol.decode(req.api_key, req.version, "response",
                                            memoryview(payload)[start:])
                resp.throttle_ms = self._throttle(req, resp.body, now)
        except ProtocolError as exc:
            resp.error = exc
        return resp

    def _throttle(self, req: Request, body: dict[str, Any], now: float) -> int:
        if req.api_key == protocol.ApiKey.API_VERSIONS and body.get("error_code"):
            return 0  # an error answer is v0-shaped: nothing after its api_keys is meaningful
        ms = int(body.get("throttle_time_ms") or 0)
        first = CLIENT_SIDE_THROTTLE_FROM.get(req.api_key)
        if ms > 0 and first is not None and req.version >= first:
            self.throttled_until = max(self.throttled_until, now + ms / 1000)
        return ms

    # -- closing

    def close(self, reason: str = "closed") -> list[Request]:
        """Mark the connection closed; return the requests that will never be answered."""
        self._closed = reason
        lost = list(self._in_flight)
        self._in_flight.clear()
        self._outbox.clear()
        self._inbox.clear()
        return lost

    @property
    def closed(self) -> bool:
        return self._closed is not None

    def _fail(self, why: str) -> None:
        self.close(why)
        raise ProtocolError(f"{why}; the connection can no longer be trusted and was closed")
