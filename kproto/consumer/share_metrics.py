"""The share consumer's fetch metrics (Java's ``ShareFetchMetricsManager`` /
``ShareFetchMetricsRegistry``, group prefix ``consumer-share``).

Group ``consumer-share-fetch-manager-metrics`` (tag ``client-id``), recorded by
:class:`~kproto.consumer.share_fetch.ShareSessions` per ShareFetch answer and
per request carrying acknowledgements, each time under one lock of the
registry, never per record:

- ``fetch-latency-avg``/``-max`` (ms from a ShareFetch to its answer),
  ``fetch-rate``/``fetch-total`` (ShareFetch answers);
- ``fetch-throttle-time-avg``/``-max`` (ms the broker said it throttled);
- ``fetch-size-avg``/``-max`` (bytes of record sets in an answer),
  ``bytes-consumed-rate``/``-total`` (their sum);
- ``records-per-request-avg``/``-max`` (records an answer acquired for this
  consumer), ``records-fetched-rate``/``-total`` (their sum);
- ``acknowledgements-send-rate``/``-total`` (acknowledged records sent, on a
  ShareFetch or a ShareAcknowledge), ``acknowledgements-error-rate``/``-total``
  (acknowledged records whose acknowledgement failed).
"""

from __future__ import annotations

import time

from ..metrics import Avg, Max, Metrics, Sensor

__all__ = ["ShareFetchMetrics", "GROUP"]

GROUP = "consumer-share-fetch-manager-metrics"


class ShareFetchMetrics:
    """The share fetch sensors of one share consumer (its thread records; any reads)."""

    def __init__(self, registry: Metrics) -> None:
        self.registry = registry
        self._latency = self._sensor("fetch-latency", "ms from a ShareFetch to its answer",
                                     ("fetch-rate", "fetch-total", True))
        self._throttle = self._sensor("fetch-throttle-time", "ms throttled by the broker")
        self._bytes = self._sensor("fetch-size", "bytes of record sets per ShareFetch answer",
                                   ("bytes-consumed-rate", "bytes-consumed-total", False))
        self._records = self._sensor("records-per-request",
                                     "records acquired per ShareFetch answer",
                                     ("records-fetched-rate", "records-fetched-total", False))
        self._acks_sent = self._sensor("acknowledgements-send", None,
                                       ("acknowledgements-send-rate",
                                        "acknowledgements-send-total", False))
        self._acks_failed = self._sensor("acknowledgements-error", None,
                                         ("acknowledgements-error-rate",
                                          "acknowledgements-error-total", False))

    def _sensor(self, name: str, what: str | None,
                meter: tuple[str, str, bool] | None = None) -> Sensor:
        """Sensor ``name``: ``name-avg``/``-max`` of ``what`` (unless None) and a meter."""
        r = self.registry
        s, new = r.sensor(f"share.{name}")
        if new:
            if what is not None:
                s.add(r.metric_name(f"{name}-avg", GROUP, f"{what}, average"), Avg())
                s.add(r.metric_name(f"{name}-max", GROUP, f"{what}, max"), Max())
            if meter is not None:
                rate, total, count = meter
                s.add_meter(r.metric_name(rate, GROUP), r.metric_name(total, GROUP),
                            count=count)
        return s

    def fetched(self, latency: float, throttle_ms: float, nbytes: int, records: int,
                now: float) -> None:
        """A ShareFetch answer came ``latency`` s after its send, throttled
        ``throttle_ms``, with ``nbytes`` of record sets and ``records`` acquired."""
        self.registry.record_all(((self._latency, latency * 1000),
                                  (self._throttle, throttle_ms), (self._bytes, nbytes),
                                  (self._records, records)), now)

    def acknowledgements_sent(self, count: int) -> None:
        """A request carried ``count`` acknowledged records."""
        if count:
            self._acks_sent.record(count, time.monotonic())

    def acknowledgements_failed(self, count: int) -> None:
        """The acknowledgements of ``count`` records failed."""
        if count:
            self._acks_failed.record(count, time.monotonic())
