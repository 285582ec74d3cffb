"""Per-broker request metrics (Java's selector and node metrics), recorded by
:class:`~kproto.net.blocking.BrokerConnection` per request and per read.

Group ``<prefix>-node-metrics`` (tags ``client-id``, ``node-id`` = ``node-<id>``,
``node--1`` for a bootstrap connection) and, summed over the brokers,
``<prefix>-metrics``: ``request-rate``/``-total``, ``request-size-avg``/``-max``,
``outgoing-byte-rate``/``-total``, ``response-rate``/``-total``,
``incoming-byte-rate``/``-total``; per broker only, ``request-latency-avg``/``-max``
(ms; ``producer-metrics`` has the sender's Produce latency under that name, as Java).
``<prefix>`` is ``producer``, ``consumer`` or ``admin-client``, as in Java.
"""

from __future__ import annotations

from ..metrics import Avg, Max, Metrics, Sensor

__all__ = ["NodeSensors", "node_sensors", "PREFIXES"]

#: the metric group prefix of each client type (Java's)
PREFIXES = {"producer": "producer", "consumer": "consumer", "share_consumer": "consumer",
            "admin": "admin-client"}


class NodeSensors:
    """The sensors of one broker's connections (shared by a client's connections to it)."""

    __slots__ = ("requests", "sizes", "outgoing", "responses", "incoming", "latency",
                 "registry")

    def __init__(self, requests: Sensor, sizes: Sensor, outgoing: Sensor, responses: Sensor,
                 incoming: Sensor, latency: Sensor, registry: Metrics) -> None:
        self.requests, self.sizes, self.outgoing = requests, sizes, outgoing
        self.responses, self.incoming, self.latency = responses, incoming, latency
        self.registry = registry

    def sent(self, count: int, nbytes: int, now: float) -> None:
        """``count`` requests of ``nbytes`` in all were written."""
        self.registry.record_all([*((self.requests, 1.0),) * count,
                                  (self.sizes, nbytes / max(count, 1)),
                                  (self.outgoing, nbytes)], now)

    def received(self, latencies: list[float], nbytes: int, now: float) -> None:
        """``nbytes`` were read, completing answers that took ``latencies`` (s)."""
        todo: list[tuple[Sensor, float]] = [(self.incoming, nbytes)]
        for lat in latencies:
            todo += ((self.responses, 1.0), (self.latency, lat * 1000))
        self.registry.record_all(todo, now)


def node_sensors(registry: Metrics, node_id: int) -> NodeSensors:
    """The sensors of broker ``node_id`` (made once per registry)."""
    prefix = PREFIXES.get(registry.client_type, registry.client_type)
    node = f"node-{node_id}"

    def pair(what: str, add: dict[str, str], kind: str, client_wide: bool = True) -> Sensor:
        parents: tuple[Sensor, ...] = ()
        if client_wide:
            total, new = registry.sensor(f"{what}")
            if new:
                _add(registry, total, f"{prefix}-metrics", add, kind, {})
            parents = (total,)
        s, new = registry.sensor(f"{node}.{what}", parents=parents)
        if new:
            _add(registry, s, f"{prefix}-node-metrics", add, kind, {"node_id": node})
        return s

    return NodeSensors(
        pair("requests", {"rate": "request-rate", "total": "request-total"}, "count"),
        pair("request-size", {"avg": "request-size-avg", "max": "request-size-max"}, "stats"),
        pair("bytes-sent", {"rate": "outgoing-byte-rate", "total": "outgoing-byte-total"},
             "sum"),
        pair("responses", {"rate": "response-rate", "total": "response-total"}, "count"),
        pair("bytes-received", {"rate": "incoming-byte-rate", "total": "incoming-byte-total"},
             "sum"),
        pair("request-latency", {"avg": "request-latency-avg", "max": "request-latency-max"},
             "stats", client_wide=False), registry)


def _add(registry: Metrics, s: Sensor, group: str, names: dict[str, str], kind: str,
         tags: dict[str, str]) -> None:
    if kind == "stats":
        s.add(registry.metric_name(names["avg"], group, **tags), Avg())
        s.add(registry.metric_name(names["max"], group, **tags), Max())
    else:
        s.add_meter(registry.metric_name(names["rate"], group, **tags),
                    registry.metric_name(names["total"], group, **tags),
                    count=kind == "count")
