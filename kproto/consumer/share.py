"""The share consumer (KIP-932, "queues for Kafka"): records shared by a group.

>>> c = ShareConsumer(bootstrap_servers="127.0.0.1:9092", group_id="workers")  # doctest: +SKIP
>>> c.subscribe(["jobs"])                                                     # doctest: +SKIP
>>> for record in c.poll(1000):              # each with record.delivery_count # doctest: +SKIP
...     handle(record)
>>> batch = c.poll_batch(1000)               # pyarrow.RecordBatch + delivery_count
>>> c.acknowledge_batch(batch, accept=ok_mask)   # released where False       # doctest: +SKIP

Every member of a share group reads every partition it is assigned, and the
broker hands each record to one member at a time: it *acquires* records for a
member (for the group's lock duration), and the member acknowledges each one:
ACCEPT (done), RELEASE (deliver it again, to any member), REJECT (never again),
or RENEW (more time; brokers with ShareFetch v2+). A record not acknowledged
before its lock times out is delivered again, with a higher ``delivery_count``.

The names are Java's ``KafkaShareConsumer``'s in snake_case. With
``share_acknowledgement_mode="implicit"`` (the default) the next ``poll`` or
``commit_sync``/``commit_async`` accepts every record the last poll returned;
with ``"explicit"`` every record must be acknowledged (:meth:`acknowledge`,
:meth:`acknowledge_batch`) before the next poll, which otherwise raises
IllegalStateError. Acknowledgements ride on the next ShareFetch to the
partition's leader; :meth:`commit_sync` sends them at once and waits for the
answers. :meth:`close` sends what was acknowledged, closes the share sessions
(the broker releases what this consumer still held, including, as in Java,
the records of the last poll in implicit mode) and leaves the group.

:meth:`poll_batch` is the columnar path no other client has: one Arrow batch of
every record acquired (the consumer's columns plus ``delivery_count``), and
:meth:`acknowledge_batch` acknowledges a batch whole or by a boolean mask.
The membership is :mod:`kproto.groups.share`; the sessions
:mod:`kproto.consumer.share_fetch`.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from ..config import SHARE_CONSUMER, check_poll_timeout, resolve
from ..errors import ConfigError, IllegalStateError, KprotoError
from ..metrics import MetricName
from ..net.cluster import Cluster
from ..net.driver import Driver, SelectorDriver, Steps
from ..structs import TopicPartition
from ..telemetry import Instruments
from .share_acks import PENDING, AcknowledgeType, InFlight
from .share_buffer import ShareBuffer, ShareCollected, ShareRecord
from .share_fetch import ShareSessions
from .share_metrics import ShareFetchMetrics

if TYPE_CHECKING:
    import pyarrow

    from ..groups.share import ShareMembership

__all__ = ["ShareConsumer", "AcknowledgeType", "ShareRecord", "AcknowledgementCommitCallback"]

log = logging.getLogger("kproto.consumer")

#: ``callback(offsets, exception)``: Java's ``AcknowledgementCommitCallback.onComplete``;
#: ``offsets`` maps each partition to the offsets answered, ``exception`` is None when
#: the broker took them.
AcknowledgementCommitCallback = Callable[[dict[TopicPartition, set[int]],
                                          BaseException | None], None]

_F = TypeVar("_F", bound=Callable[..., Any])


def _exclusive(method: _F) -> _F:
    """One thread at a time (Java's ``acquire``/``release``): a call from a second
    thread while one is in progress is an IllegalStateError, not a race."""
    @functools.wraps(method)
    def guarded(self: ShareConsumer, *args: Any, **kwargs: Any) -> Any:
        me = threading.get_ident()
        with self._owner_lock:
            if self._owner is not None and self._owner != me:
                raise IllegalStateError(
                    f"ShareConsumer.{method.__name__}(): the share consumer is not safe "
                    "for multi-threaded access: another thread is using it")
            self._owner, self._depth = me, self._depth + 1
        try:
            return method(self, *args, **kwargs)
        finally:
            with self._owner_lock:
                self._depth -= 1
                if not self._depth:
                    self._owner = None
    return guarded  # type: ignore[return-value]


class ShareConsumer:
    """A member of share group ``group_id``; see the module docstring.

    Settings are Kafka's keys as keyword arguments or a dict with dotted names:
    the common ones, ``group_id``, ``share_acknowledgement_mode``,
    ``max_poll_records`` (records asked of each ShareFetch, and returned by
    :meth:`poll`), ``fetch_max_wait_ms``, ``fetch_min_bytes``, ``fetch_max_bytes``,
    ``max_poll_interval_ms``... Consumer settings a share group decides
    (``auto_offset_reset``, ``enable_auto_commit``, ``isolation_level``...) are a
    ConfigError, as in Java. Not thread-safe (the heartbeat runs on its own thread):
    a call from a second thread while another is in progress (``close()`` during a
    ``poll()``...) is an IllegalStateError, as Java's ConcurrentModificationException.
    """

    def __init__(self, config: Mapping[str, Any] | None = None, **settings: Any) -> None:
        self.config = resolve(SHARE_CONSUMER, config, **settings)
        for key, least in (("max_poll_records", 1), ("max_poll_interval_ms", 1),
                           ("fetch_max_wait_ms", 0)):      # Java's atLeast bounds
            if self.config[key] < least:
                raise ConfigError(f"{key} must be at least {least}, not {self.config[key]}")
        self._explicit = self.config["share_acknowledgement_mode"] == "explicit"
        self._cluster = Cluster(self.config)
        self._driver: Driver = SelectorDriver()
        self._buffer = ShareBuffer()
        self._member: ShareMembership | None = None
        self._sessions = ShareSessions(self._cluster, self.config, self._buffer,
                                       lambda: self._member.member_id if self._member else "")
        self._assigned: set[TopicPartition] = set()
        self._assignment_version = 0
        self._inflight = self._sessions.inflight    # acquired, not acknowledged yet
        self._callback: AcknowledgementCommitCallback | None = None
        self._reported = 0                  # results handed to the callback so far
        self._closed = False
        self._owner_lock = threading.Lock()
        self._owner: int | None = None      # the thread in a call now (see _exclusive)
        self._depth = 0
        # metrics() (per-broker requests), stats_callback, KIP-714 pushes (kproto.telemetry)
        self._instruments = Instruments(self.config, "share_consumer", self._cluster,
                                        resource={"group_id": self.config["group_id"]})
        if self._instruments.registry is not None:
            self._sessions.metrics = ShareFetchMetrics(self._instruments.registry)

    # ------------------------------------------------------------------ subscription

    @_exclusive
    def subscribe(self, topics: Iterable[str] | str) -> None:
        """Join share group ``group_id`` reading ``topics`` (an empty list unsubscribes)."""
        from ..groups.share import ShareMembership

        self._check_open()
        if not self.config["group_id"]:
            raise ConfigError("a share consumer needs group_id")
        names = [topics] if isinstance(topics, str) else list(topics)
        if not names:
            self.unsubscribe()
            return
        for t in names:
            if not isinstance(t, str) or not t.strip():
                raise ValueError(f"subscribe(): topic names must be non-empty text, not {t!r}")
        self._cluster.add_topics(names)
        if self._member is None:
            self._member = ShareMembership(self.config)
        self._member.subscribe(frozenset(names))

    @_exclusive
    def unsubscribe(self) -> None:
        """Send what was acknowledged, release the rest and leave the group."""
        self._check_open()
        if self._member is None:
            return
        self._finish(time.monotonic() + self._cluster.request_timeout)
        self._member.close()
        self._member = None
        self._set_assigned(set())

    def subscription(self) -> set[str]:
        """The topics subscribed to."""
        return set(self._member.topics) if self._member is not None else set()

    def assignment(self) -> set[TopicPartition]:
        """The partitions the group assigned this member now."""
        return set(self._assigned)

    # ------------------------------------------------------------------ reading

    @_exclusive
    def poll(self, timeout_ms: int = 1000) -> list[ShareRecord]:
        """Records acquired within ``timeout_ms`` (returning as soon as some are; at
        most ``max_poll_records``), each a :class:`ShareRecord` with its
        ``delivery_count``."""
        return self._collect(timeout_ms, self.config["max_poll_records"]).to_records()

    @_exclusive
    def poll_batch(self, timeout_ms: int = 1000) -> pyarrow.RecordBatch:
        """Every record acquired within ``timeout_ms`` (returning as soon as some are)
        as one ``pyarrow.RecordBatch``: :meth:`Consumer.poll_batch`'s columns plus
        ``delivery_count`` (int16). Acknowledge it with :meth:`acknowledge_batch`."""
        return self._collect(timeout_ms, None).to_arrow()

    def _collect(self, timeout_ms: int, max_records: int | None) -> ShareCollected:
        self._check_open()
        check_poll_timeout(timeout_ms)
        if self._member is None:
            raise IllegalStateError("the share consumer is not subscribed to any topics")
        self._check_acknowledged()
        self._report()
        self._implicit_accept()
        self._member.poll()
        return self._driver.run(self._poll_steps(time.monotonic() + timeout_ms / 1000,
                                                 max_records))

    def _poll_steps(self, deadline: float, max_records: int | None
                    ) -> Steps[ShareCollected]:
        """A poll: the acknowledgements taken; records already acquired, or a ShareFetch
        to each leader (acknowledgements on board) waited for until ``deadline``.
        Nothing is fetched ahead (as Java): records acquired early would hold their
        locks while the application works, and the acknowledgements of the records
        returned ride on the next poll's ShareFetch."""
        self._take_acks()
        while True:
            self._apply_assignment()
            got = self._buffer.collect(max_records)
            if got.pieces:
                return got
            self._send(deadline)
            wait = self._sessions.wait(deadline)
            self._sessions.take((yield wait))
            if time.monotonic() >= deadline:        # what arrived, if anything
                self._apply_assignment()
                return self._buffer.collect(max_records)

    def _send(self, deadline: float | None = None) -> None:
        self._sessions.send(self._assigned, self._buffer.partitions(), deadline)

    # ------------------------------------------------------------------ acknowledging

    def acknowledge(self, record: Any, type: AcknowledgeType = AcknowledgeType.ACCEPT) -> None:
        """Acknowledge one record the last poll returned (explicit mode): ACCEPT,
        RELEASE, REJECT or RENEW. Sent with the next poll or commit."""
        self.acknowledge_offset(record.topic, record.partition, record.offset, type)

    @_exclusive
    def acknowledge_offset(self, topic: str, partition: int, offset: int,
                           type: AcknowledgeType = AcknowledgeType.ACCEPT) -> None:
        """:meth:`acknowledge` by coordinates (Java's ``acknowledge(topic, partition,
        offset, type)``)."""
        kind = self._ack_type(type)
        self._acknowledge(TopicPartition(topic, int(partition)),
                          np.array([offset], np.int64), np.array([kind], np.int8))

    @_exclusive
    def acknowledge_batch(self, batch: Any, type: AcknowledgeType | None = None, *,
                          accept: Any = None,
                          otherwise: AcknowledgeType = AcknowledgeType.RELEASE) -> None:
        """Acknowledge every row of ``batch`` (what :meth:`poll_batch` returned, or
        rows of it: any Arrow table or batch with ``topic``, ``partition`` and
        ``offset`` columns) as ``type`` (default ACCEPT), or by ``accept``: a
        boolean mask (an Arrow array or a NumPy array, one value a row, no nulls)
        accepting the rows where it is true and ``otherwise`` (RELEASE or REJECT)
        the others. All or nothing: a row not in flight raises IllegalStateError
        and acknowledges none, as does a record named twice.

        >>> batch = consumer.poll_batch()                                # doctest: +SKIP
        >>> ok = pc.greater(pc.binary_length(batch["value"]), 0)         # doctest: +SKIP
        >>> consumer.acknowledge_batch(batch, accept=ok, otherwise=AcknowledgeType.REJECT)
        """
        self._check_explicit()
        n = getattr(batch, "num_rows", None)
        if not isinstance(n, int):
            raise ValueError(f"acknowledge_batch(): an Arrow table or record batch (what "
                             f"poll_batch() returned), not {batch.__class__.__name__}")
        if accept is not None:
            if type is not None:
                raise ValueError("acknowledge_batch(): give a type or an accept mask, not both")
            mask = _mask(accept, n)
            other = self._ack_type(otherwise)
            kinds = np.where(mask, np.int8(AcknowledgeType.ACCEPT), np.int8(other))
        else:
            kinds = np.full(n, self._ack_type(type or AcknowledgeType.ACCEPT), np.int8)
        if not n:
            return
        topics, parts, offsets = _coordinates(batch)
        import pyarrow as pa
        import pyarrow.compute as pc

        encoded = pc.dictionary_encode(topics)
        if isinstance(encoded, pa.ChunkedArray):
            encoded = encoded.combine_chunks()
        names = encoded.dictionary.to_pylist()
        key = np.asarray(encoded.indices.to_numpy(zero_copy_only=False), np.int64) << 32 | parts
        keys, inverse = np.unique(key, return_inverse=True)
        groups = []
        for g, k in enumerate(keys.tolist()):
            rows = np.flatnonzero(inverse == g)
            tp = TopicPartition(names[k >> 32], k & 0xFFFFFFFF)
            groups.append((tp, offsets[rows], kinds[rows]))
        located = [self._locate(tp, offs) for tp, offs, _ in groups]   # all, then apply
        for (_, _, ks), where in zip(groups, located, strict=True):
            for inflight, idx, sel in where:
                inflight.types[idx] = ks[sel]

    def _acknowledge(self, tp: TopicPartition, offsets: np.ndarray, kinds: np.ndarray) -> None:
        self._check_explicit()
        for inflight, idx, sel in self._locate(tp, offsets):
            inflight.types[idx] = kinds[sel]

    def _locate(self, tp: TopicPartition, offsets: np.ndarray
                ) -> list[tuple[InFlight, np.ndarray, np.ndarray]]:
        """Where each of ``offsets`` of ``tp`` is in flight, handed out and not yet
        acknowledged: (state, its rows, which of ``offsets``); IllegalStateError
        naming the first that is not, or one ``offsets`` name twice."""
        if len(offsets) > 1:
            ordered = np.sort(offsets)
            twice = ordered[1:][ordered[1:] == ordered[:-1]]
            if len(twice):
                raise IllegalStateError(
                    f"{tp.topic}[{tp.partition}] offset {int(twice[0])} is named twice: "
                    "a record is acknowledged once")
        found = np.zeros(len(offsets), bool)
        out = []
        for inflight in self._inflight.get(tp, []):
            rows = inflight.rows_of(offsets)
            ok = (rows >= 0) & ~found
            if ok.any():
                r = rows[ok]
                ok[ok] = inflight.delivered[r] & (inflight.types[r] == PENDING)
            if ok.any():
                sel = np.flatnonzero(ok)
                out.append((inflight, rows[sel], sel))
                found[sel] = True
        if not found.all():
            first = int(offsets[np.flatnonzero(~found)[0]])
            raise IllegalStateError(
                f"{tp.topic}[{tp.partition}] offset {first} cannot be acknowledged: it was "
                "not returned by the last poll, or it is acknowledged already")
        return out

    def _ack_type(self, kind: Any) -> int:
        try:
            kind = AcknowledgeType(kind)
        except ValueError:
            raise ValueError(f"not an acknowledge type: {kind!r} (ACCEPT, RELEASE, REJECT, "
                             "RENEW)") from None
        if kind == AcknowledgeType.RENEW and not self._sessions.renew_supported():
            raise IllegalStateError("RENEW needs ShareFetch and ShareAcknowledge v2+ "
                                    "(Kafka 4.2); the brokers speak older versions")
        return int(kind)

    def _check_explicit(self) -> None:
        self._check_open()
        if not self._explicit:
            raise IllegalStateError(
                "implicit acknowledgement of delivery is being used: acknowledge() needs "
                "share_acknowledgement_mode='explicit'")

    def _check_acknowledged(self) -> None:
        """Explicit mode: every record handed out is acknowledged before the next poll."""
        if not self._explicit:
            return
        left = sum(f.unacknowledged() for fs in self._inflight.values() for f in fs)
        if left:
            raise IllegalStateError(
                f"all records must be acknowledged in explicit acknowledgement mode: "
                f"{left} returned by the last poll are not")

    def _implicit_accept(self) -> None:
        if not self._explicit:
            for fs in self._inflight.values():
                for f in fs:
                    f.acknowledge_all(AcknowledgeType.ACCEPT)

    def _take_acks(self) -> None:
        """Hand the acknowledgements recorded so far to the sessions."""
        for tp, fs in list(self._inflight.items()):
            for f in fs:
                self._sessions.add_acks(tp, *f.take())
            kept = [f for f in fs if not f.done]
            if kept:
                self._inflight[tp] = kept
            else:
                del self._inflight[tp]

    # ------------------------------------------------------------------ commits

    @_exclusive
    def set_acknowledgement_commit_callback(self, callback: AcknowledgementCommitCallback | None
                                            ) -> None:
        """``callback(offsets, exception)`` for every acknowledgement answered, called
        from this consumer's poll, commit and close (Java's
        ``setAcknowledgementCommitCallback``)."""
        self._check_open()
        self._callback = callback

    @_exclusive
    def commit_sync(self, timeout_ms: int | None = None
                    ) -> dict[TopicPartition, BaseException | None]:
        """Send the acknowledgements (implicit mode: accepting the last poll's
        records) and wait for the answers, at most ``timeout_ms`` (default the
        request timeout): ``{partition: None, or the error that failed them}``."""
        self._check_open()
        self._implicit_accept()
        self._take_acks()
        start = len(self._sessions.results)
        wait = self._cluster.request_timeout if timeout_ms is None else timeout_ms / 1000
        self._driver.run(self._sessions.acknowledge(time.monotonic() + wait))
        return self._acknowledged(start)

    def _acknowledged(self, start: int) -> dict[TopicPartition, BaseException | None]:
        """commit_sync's answer (the metrics reported): each partition among the
        acknowledgement results from ``start`` on, with the error that failed it or None."""
        out: dict[TopicPartition, BaseException | None] = {}
        for r in self._sessions.results[start:]:
            if out.get(r.tp) is None:
                out[r.tp] = r.error
        self._report()
        return out

    @_exclusive
    def commit_async(self) -> None:
        """Send the acknowledgements now (implicit mode: accepting the last poll's
        records) without waiting; the callback gets the answers."""
        self._check_open()
        self._implicit_accept()
        self._take_acks()
        self._sessions.send(set(), set())

    def acquisition_lock_timeout_ms(self) -> int | None:
        """The broker's acquisition lock timeout, as its last ShareFetch answer said
        (None before one)."""
        ms = self._sessions.lock_timeout_ms
        return ms if ms >= 0 else None

    def _report(self) -> None:
        """Hand the answered acknowledgements to the callback (grouped by error)."""
        results = self._sessions.results
        new, self._reported = results[self._reported:], len(results)
        if len(results) > 10_000:
            del results[:]
            self._reported = 0
        if self._callback is None or not new:
            return
        by_error: dict[int, tuple[BaseException | None, dict[TopicPartition, set[int]]]] = {}
        for r in new:
            _, offsets = by_error.setdefault(id(r.error), (r.error, {}))
            offsets.setdefault(r.tp, set()).update(r.offsets.tolist())
        for error, offsets in by_error.values():
            self._callback(offsets, error)

    # ------------------------------------------------------------------ assignment

    def _apply_assignment(self) -> None:
        assert self._member is not None
        version, by_id = self._member.assignment()
        if version == self._assignment_version:
            return
        names = self._topic_names(set(by_id))
        if names is None:
            return                              # ids not in the metadata yet: next poll
        self._assignment_version = version
        self._set_assigned({TopicPartition(names[t], p) for t, ps in by_id.items() for p in ps})

    def _topic_names(self, ids: set[Any]) -> dict[Any, str] | None:
        def known() -> dict[Any, str]:
            return {info.topic_id: name for name, info in self._cluster.metadata.topics.items()
                    if info.topic_id in ids}
        found = known()
        if len(found) < len(ids):
            assert self._member is not None
            try:
                self._cluster.refresh_metadata(set(self._member.topics))
            except KprotoError as exc:
                log.debug("metadata refresh failed: %s", exc)
            found = known()
        return found if len(found) == len(ids) else None

    def _set_assigned(self, assigned: set[TopicPartition]) -> None:
        """A new assignment: records of partitions taken away that were not handed
        out are released at once."""
        self._assigned = assigned
        self._cluster.add_topics({tp.topic for tp in assigned})
        for f in self._buffer.drain(assigned.__contains__):
            if f.inflight is not None:
                undelivered = ~f.inflight.delivered & (f.inflight.types == PENDING)
                f.inflight.types[undelivered] = AcknowledgeType.RELEASE

    # ------------------------------------------------------------------ closing

    def metrics(self) -> dict[MetricName, float]:
        """The share consumer's metrics now, ``{MetricName: value}`` as Java's
        ``KafkaShareConsumer.metrics()``: its ShareFetch answers, records and
        acknowledgements (``consumer-share-fetch-manager-metrics``) and its
        requests per broker (``consumer-node-metrics``, ``consumer-metrics``);
        docs/client.md "Metrics". Empty with ``metrics_enabled=False``."""
        return self._instruments.metrics()

    @_exclusive
    def close(self, timeout_ms: int = 30000) -> None:
        """Send what was acknowledged, close the share sessions (the broker releases
        what is still acquired) and leave the group, within ``timeout_ms``."""
        if self._closed:
            return
        deadline = time.monotonic() + max(timeout_ms, 0) / 1000
        self._instruments.close(min(2.0, max(timeout_ms, 0) / 1000))
        try:
            if self._member is not None:
                self._finish(deadline)
        finally:
            self._closed = True
            try:
                if self._member is not None:
                    self._member.close(max(0.0, deadline - time.monotonic()))
            finally:
                self._member = None
                self._sessions.close()
                self._driver.close()
                self._cluster.close()

    def _finish(self, deadline: float) -> None:
        """Acknowledgements sent and the sessions closed (epoch -1)."""
        self._take_acks()
        try:
            self._driver.run(self._sessions.acknowledge(deadline, final=True))
        except KprotoError as exc:
            log.warning("share group %s: closing the share sessions failed: %s",
                        self.config["group_id"], exc)
        self._inflight.clear()
        self._buffer.drain(lambda tp: False)
        self._report()

    def __enter__(self) -> ShareConsumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<ShareConsumer {self.config['group_id']!r} " \
               f"{','.join(self._cluster.bootstrap_servers)} {len(self._assigned)} partitions>"

    def _check_open(self) -> None:
        if self._closed:
            raise IllegalStateError("the share consumer is closed")


def _coordinates(batch: Any) -> tuple[Any, np.ndarray, np.ndarray]:
    """The ``topic`` column and the ``partition`` and ``offset`` ones as int64 of a batch
    to acknowledge: ValueError naming a column missing, with nulls or out of range
    (a null topic would otherwise acknowledge a record of another topic)."""
    names = set(batch.schema.names)
    for column in ("topic", "partition", "offset"):
        if column not in names:
            raise ValueError(f"acknowledge_batch(): the batch has no {column!r} column")
        if batch.column(column).null_count:
            raise ValueError(f"acknowledge_batch(): the {column!r} column has nulls")
    parts = np.asarray(batch.column("partition").to_numpy(zero_copy_only=False), np.int64)
    offsets = np.asarray(batch.column("offset").to_numpy(zero_copy_only=False), np.int64)
    if len(parts) and not (0 <= parts.min() and parts.max() < 2**31):
        raise ValueError("acknowledge_batch(): the 'partition' column has partition "
                         f"{int(parts.min() if parts.min() < 0 else parts.max())}")
    return batch.column("topic"), parts, offsets


def _mask(accept: Any, n: int) -> np.ndarray:
    """A boolean NumPy mask of ``n`` values from an Arrow or NumPy one (no nulls)."""
    import pyarrow as pa

    if isinstance(accept, (pa.Array, pa.ChunkedArray)):
        if accept.null_count:
            raise ValueError("acknowledge_batch(): the accept mask has nulls")
        if not pa.types.is_boolean(accept.type):
            raise ValueError(f"acknowledge_batch(): the accept mask must be boolean, "
                             f"not {accept.type}")
        accept = accept.to_numpy(zero_copy_only=False)
    mask = np.asarray(accept)
    if mask.dtype != bool:
        raise ValueError(f"acknowledge_batch(): the accept mask must be boolean, not {mask.dtype}")
    if mask.shape != (n,):
        raise ValueError(f"acknowledge_batch(): the accept mask has {mask.size} values "
                         f"for {n} rows")
    return mask

