"""A TCP proxy that injects faults between clients and a broker (see :mod:`kproto.testing`).
"""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections.abc import Callable
from typing import Any

from ._process import LOOPBACK, free_port

# --------------------------------------------------------------------------- fault proxy


class FaultProxy:
    """A TCP proxy on 127.0.0.1 in front of one broker, that injects faults.

    Start the broker with ``advertised_port=proxy.port`` so clients reach it
    only through the proxy (bootstrap and every later connection), or, for a
    broker that cannot be told what to advertise (librdkafka's mock cluster),
    give ``port_map`` (see below). Faults:

    - :meth:`drop_connections`: reset every open connection now (mid-request,
      mid-response, whatever is in flight);
    - :meth:`cut_after`: reset a connection after the broker has sent ``n``
      more bytes (a response truncated mid-way);
    - :meth:`cut_request_after`: reset a connection after the client has sent
      ``n`` more bytes (a request cut mid-way; the broker sees half of it);
    - ``refuse = True``: close new connections at once (a dead broker);
    - ``stall = True``: hold every byte in both directions (a hung broker;
      what was held is forwarded once it is set back to False);
    - ``blackhole = True``: swallow every byte in both directions, forever (a
      broker that reads and never answers; connections carry garbage framing
      afterwards, so drop them when turning it off);
    - ``delay``: seconds to wait before forwarding each chunk (a slow network);
    - :meth:`corrupt_next`: flip one byte of the next chunk from the broker.

    ``faults`` counts what was injected, by kind: ``drop`` (calls that reset
    connections), ``cut``, ``cut_request``, ``refuse``, ``corrupt`` (one per
    fault), and ``stall``, ``blackhole``, ``delay`` (chunks held, swallowed,
    delayed).

    ``port_map`` (``{broker port: proxy port}``) makes the proxy read the
    Kafka framing and rewrite the broker ports in Metadata and FindCoordinator
    answers, so that clients of a multi-broker cluster (one proxy per broker,
    all with the same map) reach every broker through its proxy.

    ``answer_hook`` (settable at any time on a proxy made with ``framed=True``
    or a ``port_map``: the proxy must read the framing from a connection's
    first byte) rewrites answers: it is called as
    ``hook(api_key, version, body)`` with every decoded response body and
    returns the body to forward (changed in place or a new one), or None to
    forward the answer unchanged; a hook that raises ``OSError`` resets the
    connection instead of answering (a broker lost mid-answer). Tests use it to
    inject broker errors (MESSAGE_TOO_LARGE, REBALANCE_IN_PROGRESS...) into real
    answers::

        def too_large(key, version, body):
            if key == 0:                     # Produce
                for t in body["responses"]:
                    for p in t["partition_responses"]:
                        p["error_code"] = 10
            return body
        proxy.answer_hook = too_large
    """

    _REWRITTEN = (3, 10)   # Metadata, FindCoordinator: answers that name brokers

    def __init__(self, upstream_port: int, *, port: int | None = None,
                 port_map: dict[int, int] | None = None, framed: bool = False) -> None:
        self.upstream = (LOOPBACK, upstream_port)
        self.port = port or free_port()
        self.port_map = dict(port_map or {})
        self.framed = framed or bool(self.port_map)
        self.answer_hook: Callable[[int, int, dict[str, Any]], dict[str, Any] | None] | None = None
        #: framed proxies: called as ``hook(frame)`` with every request frame a client
        #: sends (size prefix included; ``kproto.protocol.decode_request(frame[4:])``
        #: reads it), before it is forwarded: tests read what a client sent
        self.request_hook: Callable[[bytes], None] | None = None
        self.refuse = False
        self.stall = False
        self.blackhole = False
        self.delay = 0.0
        self.faults: dict[str, int] = {}
        self._cut_after: int | None = None
        self._cut_request: int | None = None
        self._corrupt: int | None = None
        self._corrupt_min = 0
        self._lock = threading.Lock()
        self._pairs: list[tuple[socket.socket, socket.socket]] = []
        self._server: socket.socket | None = None
        self._threads: list[threading.Thread] = []
        self._stopping = threading.Event()

    @property
    def address(self) -> str:
        return f"{LOOPBACK}:{self.port}"

    @property
    def connections(self) -> int:
        """Client connections open through the proxy now."""
        with self._lock:
            return len(self._pairs)

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def start(self) -> FaultProxy:
        server = socket.socket()
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind((LOOPBACK, self.port))
        server.listen(64)
        server.settimeout(0.1)
        self._server = server
        self._spawn(self._accept_loop)
        return self

    def stop(self) -> None:
        self._stopping.set()
        self.drop_connections(count=False)
        if self._server is not None:
            self._server.close()
        deadline = time.monotonic() + 5
        for t in self._threads:
            t.join(max(0.0, deadline - time.monotonic()))
        self._threads = [t for t in self._threads if t.is_alive()]

    def heal(self) -> None:
        """Turn every fault off (pending cuts and corruption too)."""
        self.refuse = self.stall = self.blackhole = False
        self.delay = 0.0
        self._cut_after = self._cut_request = self._corrupt = None

    def _count(self, kind: str) -> None:
        with self._lock:
            self.faults[kind] = self.faults.get(kind, 0) + 1

    def drop_connections(self, *, count: bool = True) -> int:
        """Reset every open connection; returns how many."""
        with self._lock:
            pairs, self._pairs = self._pairs, []
        for a, b in pairs:
            for s in (a, b):
                _reset(s)
        if count and pairs:
            self._count("drop")
        return len(pairs)

    def cut_after(self, nbytes: int) -> None:
        """Reset the connection that carries the broker's next ``nbytes`` bytes."""
        self._cut_after = nbytes

    def cut_request_after(self, nbytes: int) -> None:
        """Reset the connection that carries the client's next ``nbytes`` bytes
        (the broker gets only those: a request cut mid-way)."""
        self._cut_request = nbytes

    def corrupt_next(self, offset: int = 0, *, min_size: int = 0) -> None:
        """Flip byte ``offset`` of the next chunk of at least ``min_size`` bytes
        the broker sends (a size that singles out e.g. a Fetch answer with records)."""
        self._corrupt = offset
        self._corrupt_min = min_size

    def _spawn(self, target: Any, *args: Any) -> None:
        t = threading.Thread(target=target, args=args, daemon=True)
        self._threads.append(t)
        t.start()

    def _accept_loop(self) -> None:
        assert self._server is not None
        while not self._stopping.is_set():
            try:
                client, _ = self._server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            if self.refuse:
                self._count("refuse")
                _reset(client)
                continue
            try:
                upstream = socket.create_connection(self.upstream, timeout=5)
            except OSError:
                client.close()
                continue
            for s in (client, upstream):
                s.settimeout(None)
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                self._pairs.append((client, upstream))
                self._threads = [t for t in self._threads if t.is_alive()]
            pending: dict[int, tuple[int, int]] = {}   # correlation id -> (api key, version)
            self._spawn(self._pump, client, upstream, False, pending)
            self._spawn(self._pump, upstream, client, True, pending)

    def _pump(self, src: socket.socket, dst: socket.socket, from_broker: bool,
              pending: dict[int, tuple[int, int]]) -> None:
        buf = bytearray()
        try:
            while not self._stopping.is_set():
                data = src.recv(65536)
                if not data:
                    break
                if self.framed:
                    buf += data
                    data = self._whole_frames(buf, from_broker, pending)
                    if not data:
                        continue
                if self.stall:
                    self._count("stall")
                while self.stall and not self._stopping.is_set():
                    time.sleep(0.01)
                if self.blackhole:
                    self._count("blackhole")
                    continue
                if self.delay:
                    self._count("delay")
                    time.sleep(self.delay)
                if from_broker and self._corrupt is not None and \
                        len(data) >= self._corrupt_min:
                    at, self._corrupt = min(self._corrupt, len(data) - 1), None
                    data = data[:at] + bytes([data[at] ^ 0xFF]) + data[at + 1:]
                    self._count("corrupt")
                cut = self._cut_after if from_broker else self._cut_request
                if cut is not None:
                    if len(data) >= cut:
                        dst.sendall(data[:cut])
                        if from_broker:
                            self._cut_after = None
                        else:
                            self._cut_request = None
                        self._count("cut" if from_broker else "cut_request")
                        break
                    if from_broker:
                        self._cut_after = cut - len(data)
                    else:
                        self._cut_request = cut - len(data)
                dst.sendall(data)
        except OSError:
            pass
        finally:
            with self._lock:
                self._pairs = [pair for pair in self._pairs if src not in pair]
            for s in (src, dst):
                _reset(s)

    def _whole_frames(self, buf: bytearray, from_broker: bool,
                      pending: dict[int, tuple[int, int]]) -> bytes:
        """Take the complete Kafka frames off ``buf`` (rewriting broker ports in
        answers that name brokers); a partial frame stays in ``buf``."""
        out = bytearray()
        while len(buf) >= 4:
            size = struct.unpack_from(">i", buf, 0)[0]
            if size < 0 or len(buf) < 4 + size:
                break
            frame = bytes(buf[:4 + size])
            del buf[:4 + size]
            if from_broker:
                cid = struct.unpack_from(">i", frame, 4)[0] if size >= 4 else None
                api = pending.pop(cid, None) if cid is not None else None
                if api is not None:
                    frame = self._rewrite(api[0], api[1], frame)
            elif size >= 8:
                if self.request_hook is not None:
                    self.request_hook(frame)
                key, version, cid = struct.unpack_from(">hhi", frame, 4)
                if key in self._REWRITTEN or self.answer_hook is not None:
                    pending[cid] = (key, version)
            out += frame
        return bytes(out)

    def _rewrite(self, key: int, version: int, frame: bytes) -> bytes:
        from kproto import protocol  # only in port_map mode: the rest is stdlib-only

        try:
            cid, body = protocol.decode_response(key, version, frame[4:])
        except Exception:  # noqa: BLE001 - not ours to judge: forward it as it came
            return frame
        if key in self._REWRITTEN:
            for broker in body.get("brokers") or []:
                broker["port"] = self.port_map.get(broker["port"], broker["port"])
            for coordinator in [body, *(body.get("coordinators") or [])]:
                if isinstance(coordinator.get("port"), int):
                    coordinator["port"] = self.port_map.get(coordinator["port"],
                                                            coordinator["port"])
        hook = self.answer_hook
        if hook is not None:
            changed = hook(key, version, body)
            if changed is not None:
                body = changed
            self._count("rewrite")
        return protocol.encode_response(key, version, cid, body)


def proxy_cluster(brokers: list[tuple[int, str, int]]) -> list[FaultProxy]:
    """One started :class:`FaultProxy` per broker of ``brokers`` (``[(node id,
    host, port)]``, e.g. :attr:`MockCluster.brokers`), rewriting the ports in
    Metadata/FindCoordinator answers so clients bootstrapped on the proxies
    reach every broker through its proxy (framed, so ``answer_hook`` works).
    Stop each one when done."""
    ports = {port: free_port() for _, _, port in brokers}
    proxies = []
    try:
        for _, _, port in brokers:
            proxies.append(FaultProxy(port, port=ports[port], port_map=ports).start())
    except BaseException:
        for p in proxies:
            p.stop()
        raise
    return proxies


def _reset(sock: socket.socket) -> None:
    """Reset a connection now (RST), even while another thread is blocked reading it:
    shutdown() acts on the connection at once, close() alone would wait for that read."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    try:
        sock.close()
    except OSError:
        pass
