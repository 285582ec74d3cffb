"""A misbehaving HTTP/1.1 server on loopback, for the registry client's tests.

Each request gets the next scripted answer: a list of steps, each ``bytes`` to
send, a ``float`` to pause (seconds) or :data:`CLOSE`, so an answer can redirect,
drip its status line and headers or its body a few bytes at a time, never come, or
run to the end of the connection. The
server records every request it read (method, path, headers) and stops every
pause when it stops, so no handler thread outlives the test by more than a
moment.

>>> with FaultServer() as server:                            # doctest: +SKIP
...     server.answers = [drip(answer(200, b'[]'), every=0.5)]
...     # a client asking server.url + "/subjects" gets b'[]' two bytes a time
"""

from __future__ import annotations

import socket
import socketserver
import ssl
import threading
from dataclasses import dataclass, field

LOOPBACK = "127.0.0.1"
#: a pause that lasts until the server stops
FOREVER = 3600.0
#: a step that closes the connection (the end of an answer without a length)
CLOSE = None


@dataclass
class Request:
    """One request the server read: its method, path and headers (names lowercased)."""

    method: str
    path: str
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""


def answer(status: int, body: bytes = b"", headers: dict[str, str] | None = None,
           *, reason: str = "X") -> bytes:
    """An HTTP/1.1 answer with a Content-Length."""
    head = [f"HTTP/1.1 {status} {reason}", f"Content-Length: {len(body)}"]
    head += [f"{k}: {v}" for k, v in (headers or {}).items()]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


def head(status: int, headers: dict[str, str] | None = None, *, reason: str = "X") -> bytes:
    """An HTTP/1.1 status line and headers alone: no Content-Length unless ``headers``
    give one, so without one (or ``Transfer-Encoding: chunked``) the body runs to
    the end of the connection (end the answer with :data:`CLOSE`)."""
    lines = [f"HTTP/1.1 {status} {reason}"] + [f"{k}: {v}" for k, v in (headers or {}).items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def chunk(data: bytes) -> bytes:
    """``data`` as one chunk of a chunked body (``b""``: the last chunk)."""
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


def redirect(location: str, status: int = 302) -> list[bytes | float | None]:
    return [answer(status, b"", {"Location": location})]


def drip(data: bytes, *, every: float, size: int = 2) -> list[bytes | float | None]:
    """``data`` sent ``size`` bytes at a time, ``every`` seconds apart."""
    steps: list[bytes | float | None] = []
    for i in range(0, len(data), size):
        steps += [data[i:i + size], every]
    return steps


class FaultServer:
    """An HTTP/1.1 server on a free loopback port answering from a script.

    ``answers``: one list of steps per request, taken in order; when it is
    empty, ``default`` is answered (a 200 with ``[]``). ``ssl_context``: a
    server-side context serves HTTPS (the handshake runs on the handler thread).
    """

    def __init__(self, *, ssl_context: ssl.SSLContext | None = None) -> None:
        self.answers: list[list[bytes | float | None]] = []
        self.default: list[bytes | float | None] = [answer(200, b"[]")]
        self.requests: list[Request] = []
        self.stopping = threading.Event()
        self.lock = threading.Lock()
        self._context = ssl_context
        handler = type("Handler", (_Handler,), {"owner": self})
        self._server = socketserver.ThreadingTCPServer((LOOPBACK, 0), handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        scheme = "https" if ssl_context is not None else "http"
        self.url = f"{scheme}://{LOOPBACK}:{self.port}"
        self._thread: threading.Thread | None = None

    def start(self) -> FaultServer:
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.stopping.set()
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(5)

    def __enter__(self) -> FaultServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def next_answer(self, request: Request) -> list[bytes | float | None]:
        with self.lock:
            self.requests.append(request)
            return self.answers.pop(0) if self.answers else self.default


class _Handler(socketserver.BaseRequestHandler):
    owner: FaultServer

    def handle(self) -> None:
        sock: socket.socket = self.request
        sock.settimeout(10)
        owner = self.owner
        try:
            if owner._context is not None:
                sock = owner._context.wrap_socket(sock, server_side=True)
            with sock.makefile("rb") as reader:
                while not owner.stopping.is_set():
                    request = _read_request(reader)
                    if request is None:
                        return
                    for step in owner.next_answer(request):
                        if step is CLOSE:
                            return
                        if isinstance(step, float):
                            if owner.stopping.wait(step):
                                return
                        else:
                            sock.sendall(step)
        except (OSError, ValueError):
            return                       # the client went away (or shut its socket down)
        finally:
            if sock is not self.request:
                sock.close()             # the TLS socket (the server closes the plain one)


def _read_request(reader: object) -> Request | None:
    line = reader.readline(65536)        # type: ignore[attr-defined]
    if not line:
        return None
    method, path, _ = line.decode("latin-1").split(" ", 2)
    headers: dict[str, str] = {}
    while True:
        line = reader.readline(65536)    # type: ignore[attr-defined]
        if line in (b"\r\n", b"\n", b""):
            break
        name, _, value = line.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length") or 0)
    body = reader.read(length) if length else b""       # type: ignore[attr-defined]
    return Request(method, path, headers, body)
