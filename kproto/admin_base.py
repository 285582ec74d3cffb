"""What every part of :class:`~kproto.admin.Admin` shares: its settings and
Cluster, where a request goes (the controller, a group's coordinator, each
broker) and :class:`Results`, the answer of a call about several resources.

A call about several resources (topics, partitions, groups, config resources,
ACL filters) succeeds or fails per resource, as Java's Admin returns a
``KafkaFuture`` per resource: never one exception for the batch.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Generic, TypeVar

from .config import resolve
from .errors import KprotoError, error_for_code
from .metrics import MetricName
from .net.blocking import BrokerConnection, Fields
from .protocol.requests import GROUP

__all__ = ["AdminBase", "Results", "ids"]

K = TypeVar("K")
V = TypeVar("V")
T = TypeVar("T")


class Results(Mapping[K, V], Generic[K, V]):
    """Resource -> value, for a call about several resources.

    ``results[r]`` is the value for ``r``, or raises the error ``r`` got (Java's
    ``future.get()``); ``results.errors`` holds the errors by resource,
    ``results.succeeded`` the values of the resources without one, and
    ``results.all()`` the values of every resource or the first error (Java's
    ``all()``). Iterating gives every resource asked about, failed ones too.

    >>> r = Results({"a": 1}, {"b": KprotoError("no")})
    >>> sorted(r), r["a"], r.succeeded, list(r.errors)
    (['a', 'b'], 1, {'a': 1}, ['b'])
    """

    def __init__(self, values: Mapping[K, V], errors: Mapping[K, Exception] | None = None
                 ) -> None:
        self.errors: dict[K, Exception] = dict(errors or {})
        self.succeeded: dict[K, V] = {k: v for k, v in values.items() if k not in self.errors}
        self._order = list(dict.fromkeys([*values, *self.errors]))

    def __getitem__(self, key: K) -> V:
        if key in self.errors:
            raise self.errors[key]
        return self.succeeded[key]

    def __iter__(self) -> Iterator[K]:
        return iter(self._order)

    def __len__(self) -> int:
        return len(self._order)

    def all(self) -> dict[K, V]:
        """Every resource's value; the first resource's error if any failed."""
        for key in self._order:
            if key in self.errors:
                raise self.errors[key]
        return dict(self.succeeded)

    def __repr__(self) -> str:
        shown = {k: (f"<{type(self.errors[k]).__name__}>" if k in self.errors
                     else self.succeeded[k]) for k in self._order}
        return f"Results({shown!r})"


def ids(value: Any) -> list[str]:
    """Names (topics, group ids...) given as an iterable of strings, or as one string:
    one name, never its letters (``delete_topics("events")`` deleted e, v, n, t, s)."""
    return [value] if isinstance(value, str) else list(value)


def error_of(code: int, message: str | None = None, **context: Any) -> Exception | None:
    """The exception for a resource's error code (None for 0), naming the resource."""
    cls = error_for_code(code)
    return None if cls is None else cls(message or None, **context)


class AdminBase:
    """Settings, the Cluster and request routing (the base of every Admin part)."""

    def __init__(self, config: Mapping[str, Any] | None = None, **settings: Any) -> None:
        from .net.cluster import Cluster
        from .telemetry import Instruments

        self.config = resolve("admin", config, **settings)
        self._cluster = Cluster(self.config)
        # metrics() (per-broker requests), stats_callback, KIP-714 pushes (kproto.telemetry)
        self._instruments = Instruments(self.config, "admin", self._cluster)

    def _controller_request(self, api_key: int, fields: Fields) -> dict[str, Any]:
        """One request to the controller (any broker when Metadata names none)."""
        meta = self._cluster.maybe_refresh()
        node = meta.controller_id if meta.controller_id in meta.brokers else None

        def attempt() -> dict[str, Any]:
            if node is None:
                return self._cluster.request_any(api_key, fields)
            return self._cluster.request(node, api_key, fields)

        return self._cluster.call(attempt, "admin request")

    def _coordinator_request(self, key: str, api_key: int, fields: Fields,
                             key_type: int = GROUP) -> dict[str, Any]:
        return self._with_coordinator(key, lambda conn: conn.request(api_key, fields), key_type)

    def _with_coordinator(self, key: str, call: Callable[[BrokerConnection], T],
                          key_type: int = GROUP) -> T:
        """``call`` on a connection to ``key``'s coordinator, again on a retriable error."""
        deadline = time.monotonic() + self._cluster.request_timeout
        while True:
            address = self._cluster.find_coordinator(key, key_type)
            conn = self._cluster.new_connection(address)
            try:
                return call(conn)
            except KprotoError as exc:
                # asking again cannot change an answer such as "no such API here"
                if not exc.retriable or time.monotonic() > deadline:
                    raise
                time.sleep(self._cluster.retry_backoff_ms / 1000)
            finally:
                conn.close()

    def metrics(self) -> dict[MetricName, float]:
        """The admin client's metrics now, ``{MetricName: value}`` as Java's
        ``Admin.metrics()``: its requests, bytes and latency per broker
        (``admin-client-node-metrics``) and in all (``admin-client-metrics``);
        docs/client.md "Metrics". Empty with ``metrics_enabled=False``."""
        return self._instruments.metrics()

    def close(self) -> None:
        """Stop the metrics reporters (a last KIP-714 push), close every connection."""
        try:
            self._instruments.close()
        finally:
            self._cluster.close()

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
