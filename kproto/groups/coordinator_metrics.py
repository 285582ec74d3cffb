"""A group member's metrics (Java's ``ConsumerCoordinatorMetrics`` / rebalance metrics).

Group ``consumer-coordinator-metrics`` (tag ``client-id``): ``commit-latency-avg``/
``-max`` (ms of an OffsetCommit, retries included), ``commit-rate``/``-total``,
``rebalance-latency-avg``/``-max``/``-total`` (ms from the JoinGroup that starts
a rebalance to the SyncGroup answer that ends it; with the KIP-848 protocol from
the member becoming RECONCILING to its target applied), ``rebalance-total``,
``rebalance-rate-per-hour``, ``last-rebalance-seconds-ago`` (-1: none yet),
``assigned-partitions``.
"""

from __future__ import annotations

import time

from ..metrics import Avg, CumulativeCount, CumulativeSum, Max, Metrics, Rate, WindowedCount
from ..structs import SubscriptionState

__all__ = ["CoordinatorMetrics"]

GROUP = "consumer-coordinator-metrics"


class CoordinatorMetrics:
    """The rebalance and commit sensors of one consumer's group membership."""

    def __init__(self, registry: Metrics, subscription: SubscriptionState) -> None:
        n = registry.metric_name
        self._commit, new = registry.sensor("commit-latency")
        if new:
            self._commit.add(n("commit-latency-avg", GROUP, "ms of an offset commit"), Avg())
            self._commit.add(n("commit-latency-max", GROUP, "ms of an offset commit, max"),
                             Max())
            self._commit.add_meter(n("commit-rate", GROUP, "offset commits per second"),
                                   n("commit-total", GROUP, "offset commits"), count=True)
        self._rebalance, new = registry.sensor("rebalance-latency")
        if new:
            r = self._rebalance
            r.add(n("rebalance-latency-avg", GROUP, "ms of a rebalance"), Avg())
            r.add(n("rebalance-latency-max", GROUP, "ms of a rebalance, max"), Max())
            r.add(n("rebalance-latency-total", GROUP, "ms spent in rebalances"), CumulativeSum())
            r.add(n("rebalance-total", GROUP, "rebalances completed"), CumulativeCount())
            rate = Rate(WindowedCount())
            r.add(n("rebalance-rate-per-hour", GROUP, "rebalances per hour"), _PerHour(rate))
        self._started: float | None = None
        self._last: float | None = None
        registry.add_gauge(n("last-rebalance-seconds-ago", GROUP,
                             "seconds since the last rebalance (-1: none)"),
                           lambda: -1.0 if self._last is None else time.monotonic() - self._last)
        registry.add_gauge(n("assigned-partitions", GROUP, "partitions assigned now"),
                           lambda: float(len(subscription.assignment)))

    def commit_done(self, started: float) -> None:
        now = time.monotonic()
        self._commit.record((now - started) * 1000, now)

    def rebalance_started(self) -> None:
        """A JoinGroup starts a rebalance (a rejoin within one counts once)."""
        if self._started is None:
            self._started = time.monotonic()

    def rebalance_failed(self) -> None:
        """The rebalance under way did not complete (a KIP-848 member fenced or
        leaving while reconciling): the next one is timed from its own start."""
        self._started = None

    def rebalance_done(self) -> None:
        """The member has its assignment of the new generation."""
        now = time.monotonic()
        if self._started is not None:
            self._rebalance.record((now - self._started) * 1000, now)
        self._started, self._last = None, now


class _PerHour:
    def __init__(self, rate: Rate) -> None:
        self.rate = rate

    def record(self, value: float, now: float, window: float, samples: int) -> None:
        self.rate.record(value, now, window, samples)

    def measure(self, now: float, window: float, samples: int) -> float:
        return self.rate.measure(now, window, samples) * 3600
