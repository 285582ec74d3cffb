"""The consumer: Fetch from every leader at once, decoded into Arrow batches.

>>> c = Consumer(bootstrap_servers="127.0.0.1:9092",               # doctest: +SKIP
...              auto_offset_reset="earliest")
>>> c.assign([("events", 0), ("events", 1)])                       # doctest: +SKIP
>>> batch = c.poll_batch(timeout_ms=1000)    # one pyarrow.RecordBatch   # doctest: +SKIP
>>> table = c.read_range("events", {0: (0, 1000)})   # bounded, a Table  # doctest: +SKIP

:meth:`Consumer.poll_batch` is the fast path: one call returns every record
that arrived from every leader as one ``pyarrow.RecordBatch`` with Spark's
Kafka schema (key, value, topic, partition, offset, timestamp, timestampType,
headers), decoded by the Cython codec without a Python object per record. A
Fetch goes to each leader at once (one request per broker naming all its
partitions, long-polled with ``fetch_min_bytes``/``fetch_max_wait_ms``); as
soon as an answer arrives the next Fetch to that broker is sent, before the
caller sees the records, so the broker works while the caller does.

``poll()`` and iteration give :class:`~kproto.records.Record` objects for
convenience. :meth:`Consumer.subscribe` joins a consumer group (see
:mod:`kproto.groups.classic`); :meth:`Consumer.assign` reads partitions directly.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Iterator, Mapping
from functools import partial
from typing import TYPE_CHECKING, Any

from ..columns import Record, RecordColumns
from ..config import check_poll_timeout, resolve
from ..errors import (
    ConfigError,
    IllegalStateError,
    OffsetOutOfRangeError,
    UnknownTopicOrPartitionError,
)
from ..metrics import MetricName
from ..net.cluster import Cluster
from ..net.driver import Driver, Offload, SelectorDriver, Steps, Wait
from ..structs import EARLIEST, LATEST, OffsetAndTimestamp, SubscriptionState, TopicPartition, as_tp
from ..telemetry import Instruments
from .fetch_buffer import Collected, FetchBuffer
from .fetch_metrics import FetchMetrics
from .fetcher import list_offsets
from .fetches import Fetches
from .reader import EARLIEST_NAME, LATEST_NAME, Bound, bound_offset, iter_ranges, read_ranges

if TYPE_CHECKING:
    import pyarrow

    from ..groups.member import GroupMember, RebalanceListener
    from ..structs import ConsumerGroupMetadata

__all__ = ["Consumer"]

log = logging.getLogger("kproto.consumer")

_tp = as_tp


class Consumer:
    """A Kafka consumer; see the module docstring.

    Settings are Kafka's config keys (``group_id``, ``auto_offset_reset``,
    ``fetch_max_bytes``, ``isolation_level``...) as keyword arguments or a dict
    with dotted names. Not thread-safe: use one consumer per thread (the group
    heartbeat runs on its own thread internally).
    """

    def __init__(self, config: Mapping[str, Any] | None = None, **settings: Any) -> None:
        self.config = resolve("consumer", config, **settings)
        self._cluster = Cluster(self.config)
        self._subs = SubscriptionState()     # assignment, positions, paused (structs.py)
        self._driver: Driver = SelectorDriver()   # where polls wait (net/driver.py)
        self._group: GroupMember | None = None
        self._closed = False
        self._buffer = FetchBuffer()        # fetched, not yet handed out (fetch_buffer.py)
        # the Fetches in flight, one per leader, answers into the buffer (fetches.py)
        self._fetches = Fetches(self._cluster, self.config, self._subs, self._buffer,
                                self._reset, self._list_offsets)
        # metrics(), stats_callback and KIP-714 pushes (kproto.metrics, kproto.telemetry)
        self._fetch_metrics: FetchMetrics | None = None
        self._instruments = Instruments(
            self.config, "consumer", self._cluster,
            resource={"group_id": self.config["group_id"],
                      "group_instance_id": self.config["group_instance_id"]},
            extra=lambda: self._fetch_metrics.statistics() if self._fetch_metrics else {})
        if self._instruments.registry is not None:
            self._fetch_metrics = FetchMetrics(self._instruments.registry)
            self._fetches.metrics = self._buffer.metrics = self._fetch_metrics

    # ------------------------------------------------------------------ assignment

    def assign(self, partitions: Iterable[tuple[str, int]]) -> None:
        """Read exactly these partitions (no group); positions start from the
        committed offset (with a ``group_id``) or ``auto_offset_reset``."""
        if self._group is not None and self._group.subscribed:
            raise IllegalStateError("assign() cannot be mixed with subscribe(); "
                                    "call unsubscribe() first")
        self._set_assignment([_tp(p) for p in partitions])

    def _set_assignment(self, tps: list[TopicPartition]) -> None:
        self._check_open()
        self._subs.assign(tps)
        keep = set(self._subs.assignment)
        self._buffer.discard(keep.__contains__)
        if self._fetch_metrics is not None:
            self._fetch_metrics.keep(keep)
        self._cluster.add_topics({tp.topic for tp in self._subs.assignment})

    def assignment(self) -> set[TopicPartition]:
        """The partitions this consumer reads now."""
        return set(self._subs.assignment)

    def subscribe(self, topics: Iterable[str] | str | None = None, *, pattern: str | None = None,
                  listener: RebalanceListener | None = None) -> None:
        """Join the consumer group ``group_id`` and read the partitions it assigns.

        ``topics`` (names) or ``pattern`` (a regular expression over topic names:
        with ``group_protocol="classic"`` Python's ``re``, matched against the
        cluster's topics here, a pattern it cannot compile a :class:`ConfigError`;
        with ``"consumer"`` an RE2J expression sent to the broker as written, which
        resolves it - one the broker refuses fails the next poll with
        :class:`~kproto.errors.InvalidRegularExpressionError`). ``listener`` gets
        ``on_partitions_revoked`` / ``on_partitions_assigned`` calls from inside
        :meth:`poll_batch` around each rebalance (with auto-commit, positions are
        committed before revocation).
        """
        from ..groups import new_member

        if not self.config["group_id"]:
            raise ConfigError("subscribe() needs group_id")
        if self._subs.assignment and (self._group is None or not self._group.subscribed):
            raise IllegalStateError("subscribe() cannot be mixed with assign(); "
                                    "call unsubscribe() first")
        if isinstance(topics, str):
            topics = [topics]
        if pattern is None and not topics:
            raise ValueError("subscribe() needs topics or a pattern")
        if self._group is None:
            self._group = new_member(self._subs, self._cluster, self.config)
        self._group.subscribe(set(topics or ()), pattern, listener)

    def unsubscribe(self) -> None:
        """Leave the group (committing first with auto-commit) and read nothing."""
        if self._group is not None:
            self._group.close()
            self._group = None
        self._set_assignment([])

    # ------------------------------------------------------------------ positions

    def seek(self, partition: tuple[str, int], offset: int) -> None:
        """Read ``partition`` from ``offset`` next (records fetched before are dropped)."""
        tp = _tp(partition)
        self._require_assigned(tp)
        if offset < 0:
            raise ValueError(f"offset must be >= 0, not {offset}")
        self._subs.positions[tp] = int(offset)
        self._buffer.discard(lambda t: t != tp)

    def seek_to_beginning(self, *partitions: tuple[str, int]) -> None:
        """Read from the log start of these partitions (all assigned ones if none)."""
        self._seek_to(EARLIEST, partitions)

    def seek_to_end(self, *partitions: tuple[str, int]) -> None:
        """Read only records written from now on (all assigned partitions if none)."""
        self._seek_to(LATEST, partitions)

    def _seek_to(self, which: int, partitions: tuple[tuple[str, int], ...]) -> None:
        tps = [_tp(p) for p in partitions] or list(self._subs.assignment)
        for tp in tps:
            self._require_assigned(tp)
        offsets = self._list_offsets({tp: which for tp in tps})
        for tp in tps:
            self._subs.positions[tp] = offsets[tp][0]
        moved = set(tps)
        self._buffer.discard(lambda t: t not in moved)

    def position(self, partition: tuple[str, int]) -> int:
        """The offset of the next record this consumer will return for ``partition``
        (records fetched but not yet returned by ``poll`` do not count)."""
        tp = _tp(partition)
        self._require_assigned(tp)
        self._resolve_positions()
        pos = self._subs.positions[tp]
        assert pos is not None
        return pos

    def pause(self, *partitions: tuple[str, int]) -> None:
        """Return no records of these partitions until :meth:`resume` (records
        already fetched are dropped and fetched again after it)."""
        self._subs.paused |= {_tp(p) for p in partitions}
        self._buffer.discard(lambda t: t not in self._subs.paused)

    def resume(self, *partitions: tuple[str, int]) -> None:
        """Fetch these partitions again (from their positions)."""
        self._subs.paused -= {_tp(p) for p in partitions}

    # ------------------------------------------------------------------ offsets

    def beginning_offsets(self, partitions: Iterable[tuple[str, int]]) -> dict[TopicPartition, int]:
        """The log start offset of each partition."""
        return {tp: o for tp, (o, _) in self._list_offsets(
            {_tp(p): EARLIEST for p in partitions}).items()}

    def end_offsets(self, partitions: Iterable[tuple[str, int]]) -> dict[TopicPartition, int]:
        """The offset after the last record of each partition (the high watermark;
        the last stable offset with ``read_committed``)."""
        return {tp: o for tp, (o, _) in self._list_offsets(
            {_tp(p): LATEST for p in partitions}).items()}

    def offsets_for_times(self, timestamps: Mapping[tuple[str, int], int]
                          ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        """For each partition, the first offset whose timestamp is >= the given ms
        (None when there is none)."""
        found = self._list_offsets({_tp(p): int(t) for p, t in timestamps.items()})
        return {tp: None if o < 0 else OffsetAndTimestamp(o, ts) for tp, (o, ts) in found.items()}

    def committed(self, partitions: Iterable[tuple[str, int]]) -> dict[TopicPartition, int | None]:
        """The group's committed offset of each partition (None if none)."""
        return self._require_group_coordinator().fetch_committed([_tp(p) for p in partitions])

    def commit(self, offsets: Mapping[tuple[str, int], int] | None = None) -> None:
        """Commit ``offsets`` (default: the current positions, i.e. every record
        ``poll`` has returned) for ``group_id``, synchronously."""
        if offsets is None:
            self._resolve_positions()
            todo = {tp: pos for tp, pos in self._subs.positions.items() if pos is not None}
        else:
            todo = {_tp(p): int(o) for p, o in offsets.items()}
        self._require_group_coordinator().commit(todo)

    def group_metadata(self) -> ConsumerGroupMetadata:
        """This member of ``group_id`` (generation, member id) for a transactional
        producer's ``send_offsets_to_transaction`` (Java's ``groupMetadata()``)."""
        return self._require_group_coordinator().group_metadata()

    def _require_group_coordinator(self) -> GroupMember:
        from ..groups import new_member

        if not self.config["group_id"]:
            raise ConfigError("committed offsets need group_id")
        if self._group is None:
            self._group = new_member(self._subs, self._cluster, self.config)
        return self._group

    # ------------------------------------------------------------------ reading

    def poll_batch(self, timeout_ms: int = 1000) -> pyarrow.RecordBatch:
        """Every record that arrives within ``timeout_ms`` (returning as soon as some
        have), across partitions, as one ``pyarrow.RecordBatch`` (may be empty)."""
        return self._collect(timeout_ms, None).to_arrow(headers=True)

    def poll(self, timeout_ms: int = 1000, max_records: int | None = None) -> list[Record]:
        """Records as :class:`~kproto.records.Record` objects (at most
        ``max_records``, default ``max_poll_records``). Records fetched beyond
        that wait for the next call; positions count only what was returned."""
        limit = max_records or self.config["max_poll_records"]
        return self._collect(timeout_ms, limit).to_records()

    def __iter__(self) -> Iterator[Record]:
        """Records forever (until :meth:`close`)."""
        while not self._closed:
            yield from self.poll(1000)

    def _collect(self, timeout_ms: int, max_records: int | None) -> Collected:
        """The body of every poll: :meth:`_poll_steps` run by the consumer's driver."""
        self._check_open()
        check_poll_timeout(timeout_ms)
        return self._driver.run(self._poll_steps(time.monotonic() + timeout_ms / 1000,
                                                 max_records))

    def _poll_steps(self, deadline: float, max_records: int | None) -> Steps[Collected]:
        """A poll, in the Java consumer's order: group duties and the auto-commit of
        what earlier polls returned; then records already fetched, or new ones
        waited for until ``deadline``; then, before returning them, the next
        Fetches (the brokers work while the caller does). Waits for Fetch answers
        and the group's JoinGroup/SyncGroup answers are yielded to the driver
        (net/driver.py), so a rebalance goes on across polls and a poll returns
        at ``deadline`` however long the coordinator holds it (a cooperative
        member reads the partitions it keeps meanwhile); the rest does not wait
        on a Fetch. Its blocking exchanges (the group's join, commits and
        metadata checks, resolving positions, a metadata refresh, opening a
        Fetch connection) are yielded as an ``Offload`` when due: the blocking
        driver makes them in place, the asyncio one (kproto.aio) off its loop."""
        group = self._group
        if group is not None:
            if group.blocking_due():
                yield Offload(partial(self._group_duties, group, deadline))
            else:
                self._group_duties(group, deadline)
        if self._fetch_metrics is not None:     # (a rebalance's revoked partitions)
            self._fetch_metrics.follow(self._subs.assignment)
        while True:
            if self._fetches.connect_due() or None in self._subs.positions.values():
                yield Offload(partial(self._fetch_duties, deadline))
            else:
                self._resolve_or_wait()
            got = self._buffer.collect(self._subs.positions, self._subs.is_readable,
                                      max_records)
            if got.pieces:
                self._fetches.send(deadline)
                return got
            self._fetches.send(deadline)
            wait = self._fetches.wait(deadline)
            joining = group.waiting_on() if group is not None else []
            if joining:
                wait = Wait([*wait.conns, *joining],
                            wait.deadline if wait.conns or self._subs.assignment else deadline)
            ready = yield wait
            self._fetches.take(ready, wait)
            if group is not None:
                if group.blocking_due() or any(conn in joining for conn in ready):
                    yield Offload(partial(group.poll_within, deadline, ready))
                else:
                    group.poll_within(deadline, ready)
            if len(self._buffer):
                continue
            if time.monotonic() >= deadline:
                return got

    @staticmethod
    def _group_duties(group: GroupMember, deadline: float) -> None:
        group.poll_within(deadline)
        group.maybe_auto_commit()

    def _fetch_duties(self, deadline: float) -> None:
        """Positions resolved and the Fetches sent (blocking exchanges: offloaded)."""
        self._resolve_or_wait()
        self._fetches.send(deadline)

    def read_range(self, topic: str, ranges: Mapping[int, tuple[Bound, Bound]] | None = None,
                   *, timeout_ms: int | None = None, headers: bool = True) -> pyarrow.Table:
        """Records of ``topic`` with ``start <= offset < end`` for each
        ``{partition: (start, end)}``, as a ``pyarrow.Table``.

        ``start`` may be ``"earliest"`` (the log start), ``end`` ``"latest"`` or
        None (the high watermark now; the last stable offset with
        ``read_committed``); ``ranges=None`` reads every partition from earliest
        to latest. A topic that does not exist raises
        UnknownTopicOrPartitionError (reading never creates topics).

        Bounded and independent of the consumer's assignment (it uses its own
        positions and connections). Offsets the log no longer holds (retention,
        compaction) are simply absent. Raises KafkaTimeoutError if the range is
        not complete within ``timeout_ms`` (default: request timeout x 4).

        >>> consumer.read_range("events")                      # doctest: +SKIP
        >>> consumer.read_range("events", {0: (1000, None)})   # doctest: +SKIP
        """
        import pyarrow as pa

        batches = read_ranges(self._cluster, self.config, self._ranges(topic, ranges),
                              timeout=(timeout_ms / 1000) if timeout_ms is not None else None,
                              headers=headers)
        schema = RecordColumns.empty().to_arrow(headers=headers).schema
        return pa.Table.from_batches(batches, schema=schema)

    def iter_range(self, topic: str, ranges: Mapping[int, tuple[Bound, Bound]] | None = None,
                   *, step_bytes: int = 64 << 20, timeout_ms: int | None = None,
                   headers: bool = True) -> Iterator[pyarrow.RecordBatch]:
        """The records :meth:`read_range` returns (same ``ranges`` forms), as
        ``pyarrow.RecordBatch``es while they are read, holding about
        ``step_bytes`` of them at a time: for ranges too big for memory (export
        to Parquet, a Spark task).

        Within a partition, batches come in offset order. The next step is read
        by a thread, on cluster connections of its own, so the consumer stays
        usable meanwhile.
        """
        steps = iter_ranges(self.config, self._ranges(topic, ranges),
            step_bytes=step_bytes, headers=headers,
            timeout=(timeout_ms / 1000) if timeout_ms is not None else None)
        try:
            for step in steps:
                yield from step.batches
        finally:
            steps.close()           # stops the read-ahead thread now, not at collection

    def _ranges(self, topic: str, ranges: Mapping[int, tuple[Bound, Bound]] | None
                ) -> dict[TopicPartition, tuple[int, int]]:
        """``{partition: (start, end)}`` with every bound an offset (see read_range)."""
        if ranges is None:
            meta = self._cluster.wait_for_topics([topic], self._cluster.request_timeout,
                                                 auto_create=False)
            ranges = {p: (EARLIEST_NAME, LATEST_NAME) for p in meta.partitions(topic)}
        spans = {TopicPartition(topic, int(p)): (bound_offset(start, "start", topic, int(p)),
                                                 bound_offset(end, "end", topic, int(p)))
                 for p, (start, end) in ranges.items()}
        found: dict[int, dict[TopicPartition, int]] = {}    # EARLIEST/LATEST -> offsets
        for which in (EARLIEST, LATEST):
            asked = {tp: which for tp, span in spans.items() if which in span}
            if asked:
                found[which] = {tp: o for tp, (o, _) in self._list_offsets(
                    asked, auto_create=False).items()}
        return {tp: (found[a][tp] if a < 0 else a, found[b][tp] if b < 0 else b)
                for tp, (a, b) in spans.items()}

    def metrics(self) -> dict[MetricName, float]:
        """The consumer's metrics now, ``{MetricName: value}`` as Java's
        ``KafkaConsumer.metrics()`` (names and groups: docs/client.md "Metrics"):
        fetch latency and rates, records and bytes consumed, ``records-lag`` per
        partition and ``records-lag-max``, rebalances and commits, per-broker
        requests. Empty with ``metrics_enabled=False``."""
        if self._fetch_metrics is not None:
            self._fetch_metrics.keep(self._subs.assignment)
        return self._instruments.metrics()

    def close(self) -> None:
        """Leave the group (committing first with auto-commit) and close connections."""
        if self._closed:
            return
        try:
            if self._group is not None:
                self._group.close()
        finally:
            self._instruments.close()
            self._group = None
            self._closed = True
            self._fetches.close()
            self._driver.close()
            self._cluster.close()

    def __enter__(self) -> Consumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Consumer {','.join(self._cluster.bootstrap_servers)} " \
               f"{len(self._subs.assignment)} partitions>"

    # ------------------------------------------------------------------ internals

    def _check_open(self) -> None:
        if self._closed:
            raise IllegalStateError("the consumer is closed")

    def _require_assigned(self, tp: TopicPartition) -> None:
        if tp not in self._subs.positions:
            raise IllegalStateError(f"{tp.topic}[{tp.partition}] is not assigned to this consumer")

    def _resolve_positions(self, topic: str | None = None) -> None:
        """Positions for the partitions (of ``topic``, or all) that have none: the
        committed offset, else ``auto_offset_reset``."""
        missing = [tp for tp, pos in self._subs.positions.items()
                   if pos is None and (topic is None or tp.topic == topic)]
        if not missing:
            return
        if self._group is not None or self.config["group_id"]:
            committed = self._require_group_coordinator().fetch_committed(missing)
            for tp, off in committed.items():
                if off is not None and off >= 0:
                    self._subs.positions[tp] = off
            missing = [tp for tp in missing if self._subs.positions[tp] is None]
        if missing:
            self._reset(missing)

    def _resolve_or_wait(self) -> None:
        """:meth:`_resolve_positions` for poll: a partition whose topic does not
        exist (and is not created: ``allow_auto_create_topics=False``) keeps no
        position and is asked about again at the next poll, as Java's consumer
        waits for it; the other topics are read meanwhile."""
        try:
            self._resolve_positions()
        except UnknownTopicOrPartitionError as exc:
            log.warning("%s; waiting for it to be created", exc)
            missing = exc.context.get("topic")
            for topic in sorted({tp.topic for tp, pos in self._subs.positions.items()
                                 if pos is None and tp.topic != missing}):
                try:
                    self._resolve_positions(topic)
                except UnknownTopicOrPartitionError as more:
                    log.warning("%s; waiting for it to be created", more)

    def _reset(self, tps: list[TopicPartition], cause: BaseException | None = None) -> None:
        policy = self.config["auto_offset_reset"]
        if policy == "none":
            if cause is not None:
                raise cause
            raise OffsetOutOfRangeError(
                "no committed offset and auto_offset_reset is 'none'",
                partitions=", ".join(f"{t}[{p}]" for t, p in tps))
        which = EARLIEST if policy == "earliest" else LATEST
        found = self._list_offsets({tp: which for tp in tps})
        for tp in tps:
            self._subs.positions[tp] = found[tp][0]

    def _list_offsets(self, wanted: Mapping[TopicPartition, int], *,
                      auto_create: bool | None = None) -> dict[TopicPartition, tuple[int, int]]:
        """ListOffsets to the leaders: {tp: (offset, timestamp)} for a timestamp or
        EARLIEST/LATEST. LATEST is checked against the high watermark of a Fetch
        (some brokers, Tansu among them, answer the last batch's start + 1).
        Topics are created only per ``allow_auto_create_topics`` (or
        ``auto_create``)."""
        return list_offsets(self._cluster, self.config, wanted, auto_create=auto_create)
