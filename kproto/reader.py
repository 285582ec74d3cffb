"""Bounded bulk reads and offset lookups, shared by the consumer and the Spark source.

:func:`read_ranges` reads ``start <= offset < end`` of many partitions: one
Fetch in flight per connection, several connections per leader when there is
more than one range to read (a big partition's range is split into disjoint
sub-ranges read at once), each answer decoded by the Cython codec and trimmed
to its range as a zero-copy Arrow slice. :func:`list_offsets` asks the leaders
for offsets by time (or earliest/latest).
"""

from __future__ import annotations

import logging
import queue
import selectors
import threading
import time
from collections.abc import Callable, Generator, Mapping
from contextlib import closing
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from . import records
from .errors import (
    CorruptRecordError,
    KafkaConnectionError,
    KafkaTimeoutError,
    KprotoError,
    OffsetOutOfRangeError,
    error_for_code,
)
from .net.blocking import BrokerConnection, Fields
from .net.cluster import Cluster
from .protocol import ApiKey
from .structs import EARLIEST, LATEST, TopicPartition, topic_id_of, topic_of

if TYPE_CHECKING:
    import pyarrow

__all__ = ["read_ranges", "read_ranges_result", "iter_ranges", "list_offsets", "ReadResult"]

log = logging.getLogger("kproto.reader")

_TP = TopicPartition     # (the name the stepping reader uses)


def list_offsets(cluster: Cluster, config: Mapping[str, Any], wanted: Mapping[Any, int],
                 *, timeout: float | None = None, auto_create: bool | None = None
                 ) -> dict[Any, tuple[int, int]]:
    """``{tp: timestamp | EARLIEST (-2) | LATEST (-1)}`` -> ``{tp: (offset, timestamp)}``
    from the partition leaders, retrying retriable errors after a metadata refresh.
    ``auto_create`` as :meth:`Cluster.wait_for_topics` (default: the cluster's
    setting); a topic that is not there and not created raises
    UnknownTopicOrPartitionError.

    Offset -1 means no record at or after that time. LATEST is raised to the
    high watermark (last stable offset with read_committed) that a Fetch
    reports, because some brokers (Tansu) answer ListOffsets "latest" with the
    start of the last batch + 1.
    """
    read_committed = config.get("isolation_level") == "read_committed"
    meta = cluster.wait_for_topics({tp[0] for tp in wanted}, cluster.request_timeout,
                                   auto_create=auto_create)
    _check_partitions_exist(meta, wanted)

    def attempt() -> dict[Any, tuple[int, int]]:
        by_leader, orphans = cluster.leaders(list(wanted))
        if orphans:
            cluster.mark_stale()
            cls = error_for_code(5)
            assert cls is not None
            raise cls(f"no leader for {orphans}")
        requests: dict[int, list[tuple[int, Fields]]] = {}
        for node, tps in by_leader.items():
            topics: dict[str, list[dict[str, Any]]] = {}
            for tp in tps:
                topics.setdefault(tp[0], []).append({
                    "partition_index": tp[1], "timestamp": wanted[tp],
                    "current_leader_epoch": -1, "max_num_offsets": 1})
            requests[node] = [(ApiKey.LIST_OFFSETS, {
                "replica_id": -1, "isolation_level": int(read_committed),
                "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
                "timeout_ms": int(cluster.request_timeout * 1000)})]
        out: dict[Any, tuple[int, int]] = {}
        keys: dict[tuple[str, int], Any] = {(tp[0], tp[1]): tp for tp in wanted}
        for _node, result in cluster.send_many(requests).items():
            if isinstance(result, Exception):
                raise result
            [resp] = result
            if resp.error is not None:
                raise resp.error
            for t in resp.body["topics"]:
                for p in t["partitions"]:
                    key = keys.get((t["name"], p["partition_index"]))
                    if key is None:
                        continue
                    cls = error_for_code(p["error_code"])
                    if cls is not None:
                        raise cls("ListOffsets failed", topic=t["name"],
                                  partition=p["partition_index"])
                    offset = p.get("offset", -1)
                    if resp.request.version == 0:
                        offset = (p.get("old_style_offsets") or [-1])[0]
                    out[key] = (offset, p.get("timestamp", -1))
        missing = set(wanted) - set(out)
        if missing:
            raise KafkaTimeoutError(f"ListOffsets answered nothing for {sorted(missing)}")
        return out

    found = cluster.call(attempt, "ListOffsets", timeout=timeout)
    latest = {tp: off for tp, (off, _) in found.items() if wanted[tp] == LATEST}
    if latest:
        # retried like ListOffsets: skipping a failed look-up would return Tansu's
        # short "latest" as the end offset
        marks = cluster.call(lambda: _high_watermarks(cluster, latest, read_committed),
                             "Fetch (high watermark)", timeout=timeout)
        for tp, hwm in marks.items():
            if hwm > found[tp][0]:
                found[tp] = (hwm, found[tp][1])
    return found


def _check_partitions_exist(meta: Any, tps: Any) -> None:
    """A partition index the topic does not have is an error now, not after retries."""
    for tp in tps:
        have = meta.partitions(tp[0])
        if have and tp[1] not in have:
            cls = error_for_code(3)
            assert cls is not None
            raise cls(f"topic {tp[0]!r} has {len(have)} partitions, not partition {tp[1]}",
                      topic=tp[0], partition=tp[1])


def _high_watermarks(cluster: Cluster, at: Mapping[Any, int], read_committed: bool
                     ) -> dict[Any, int]:
    """The high watermark (or LSO) of each partition, from a Fetch of a few bytes."""
    by_leader, _ = cluster.leaders(list(at))
    requests: dict[int, list[tuple[int, Fields]]] = {}
    for node, tps in by_leader.items():
        topics: dict[str, list[dict[str, Any]]] = {}
        for tp in tps:
            topics.setdefault(tp[0], []).append({
                "partition": tp[1], "fetch_offset": max(at[tp], 0), "partition_max_bytes": 1,
                "current_leader_epoch": -1, "log_start_offset": -1})
        requests[node] = [(ApiKey.FETCH, {
            # min_bytes 1: Tansu answers min_bytes 0 with no partitions at all
            "max_wait_ms": 50, "min_bytes": 1, "max_bytes": 1 << 20,
            "isolation_level": int(read_committed), "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": t, "topic_id": topic_id_of(cluster.metadata, t), "partitions": ps}
                       for t, ps in topics.items()],
            "forgotten_topics_data": [], "rack_id": ""})]
    out: dict[Any, int] = {}
    keys: dict[tuple[str, int], Any] = {(tp[0], tp[1]): tp for tp in at}
    names = cluster.metadata.topic_names()
    for result in cluster.send_many(requests, raw=True).values():
        if isinstance(result, Exception):
            raise result
        for resp in result:
            if resp.error is not None:
                raise resp.error
            for p in records.slice_fetch(resp.body, resp.request.version).partitions:
                key = keys.get((topic_of(p, names), p.partition))
                if key is not None and not p.error_code:
                    mark = p.last_stable_offset if read_committed and \
                        p.last_stable_offset >= 0 else p.high_watermark
                    out[key] = mark
    return out


@dataclass
class ReadResult:
    """What :func:`read_ranges` read: Arrow batches, and the offsets it could not
    read because the log no longer holds them (retention, compaction)."""

    batches: list[pyarrow.RecordBatch] = field(default_factory=list)
    #: (topic, partition) -> [(first missing offset, first offset after the gap)]
    gaps: dict[tuple[str, int], list[tuple[int, int]]] = field(default_factory=dict)
    #: (topic, partition) -> (high watermark, requested end) for ranges that asked
    #: for offsets not written yet: they end at the high watermark.
    short: dict[tuple[str, int], tuple[int, int]] = field(default_factory=dict)

    @property
    def num_rows(self) -> int:
        return sum(b.num_rows for b in self.batches)


@dataclass
class _Range:
    tp: _TP
    position: int
    end: int
    in_flight: bool = False


def read_ranges(cluster: Cluster, config: Mapping[str, Any],
                ranges: Mapping[Any, tuple[int, int]], *, timeout: float | None = None,
                connections_per_broker: int = 2, on_gap: str = "skip",
                headers: bool = True) -> list[pyarrow.RecordBatch]:
    """Read ``{(topic, partition): (start, end)}`` and return Arrow batches (Spark's
    Kafka schema), each trimmed to its range. See :func:`read_ranges_result`."""
    result = read_ranges_result(cluster, config, ranges, timeout=timeout,
                                connections_per_broker=connections_per_broker,
                                on_gap=on_gap, headers=headers)
    return result.batches


def read_ranges_result(cluster: Cluster, config: Mapping[str, Any],
                       ranges: Mapping[Any, tuple[int, int]], *, timeout: float | None = None,
                       connections_per_broker: int = 2, on_gap: str = "skip",
                       headers: bool = True) -> ReadResult:
    """Read ``start <= offset < end`` of every partition in ``ranges``, all at once.

    Batches come in (topic, partition, offset) order. A range reaching past the
    high watermark ends there (``ReadResult.short``).
    Ranges are split into up to ``connections_per_broker`` disjoint pieces per
    leader, each read on its own connection (Kafka serves one request at a time
    per connection, so this is how one partition is read in parallel). Offsets
    below the log start are gaps: ``on_gap="skip"`` records them in
    ``ReadResult.gaps``; ``"fail"`` raises OffsetOutOfRangeError. Raises
    KafkaTimeoutError when the ranges are not complete within ``timeout``
    seconds (default 4 x the request timeout) without progress.

    Everything read is held in memory until the end; :func:`iter_ranges` reads
    the same ranges in steps of bounded size.
    """
    with _Fetcher(cluster, config, timeout, connections_per_broker, on_gap, headers) as f:
        work = f.prepare(ranges)
        return f.step(work) if work else ReadResult()


def iter_ranges(config: Mapping[str, Any], ranges: Mapping[Any, tuple[int, int]], *,
                step_bytes: int = 64 << 20,
                timeout: float | None = None, connections_per_broker: int = 2,
                on_gap: str = "skip", headers: bool = True,
                read_ahead: bool = True) -> Generator[ReadResult, None, None]:
    """Read the same as :func:`read_ranges_result`, in steps that each hold about
    ``step_bytes`` of decoded Arrow data: memory stays bounded however long the
    ranges are.

    Yields one :class:`ReadResult` per step; together they are what
    :func:`read_ranges_result` returns. Within a partition, batches come in
    offset order across steps. Every step reads a window of each partition,
    sized from the bytes per offset seen so far (the first step reads one Fetch
    answer of each), split over ``connections_per_broker`` connections as
    :func:`read_ranges_result` splits a whole range; the connections are kept
    from one step to the next. With ``read_ahead`` the next step is read by a
    thread while the caller works on the current one (two steps in memory).

    It reads on a :class:`~kproto.net.cluster.Cluster` of its own, made from
    ``config`` (client settings) and used only by the thread that reads; close
    the generator to stop early.
    """
    if step_bytes <= 0:
        raise ValueError(f"step_bytes must be positive, not {step_bytes}")
    steps = _Steps(config, ranges, step_bytes, timeout, connections_per_broker, on_gap,
                   headers)
    if read_ahead:
        return _ahead(steps.run(), "kproto-read-ahead", abort=steps.abort)
    return steps.run()


def _ahead(items: Generator[Any, None, None], name: str,
           abort: Callable[[], None] | None = None) -> Generator[Any, None, None]:
    """``items``, each produced by a thread while the caller handles the one before.

    Leaving early (close, an exception, Ctrl-C) calls ``abort`` (from the caller's
    thread) to cut short what the thread is waiting for, then waits for the thread."""
    got: queue.Queue[tuple[bool, Any]] = queue.Queue()
    want = threading.Semaphore(1)
    stop = threading.Event()

    def produce() -> None:
        try:
            while not stop.is_set():
                if not want.acquire(timeout=0.2):
                    continue
                if stop.is_set():
                    return
                try:
                    got.put((True, next(items)))
                except StopIteration:
                    got.put((False, None))
                    return
        except BaseException as exc:  # noqa: BLE001 - handed to the caller
            got.put((False, exc))
        finally:
            items.close()

    worker = threading.Thread(target=produce, name=name, daemon=True)
    worker.start()
    ended = False
    try:
        while True:
            ok, item = got.get()
            if not ok:
                ended = True
                if item is not None:
                    raise item
                return
            want.release()
            yield item
    finally:
        stop.set()
        # a generator dropped in a reference cycle can be finalized on the worker itself
        # (which then sees ``stop`` within its acquire timeout)
        if threading.current_thread() is not worker:
            want.release()           # wake a worker waiting for its turn
            if abort is not None and not ended:
                abort()
            worker.join()


class _Steps:
    """The steps of :func:`iter_ranges`: ``run()`` reads them on a Cluster of its own
    (used only by the thread running the generator); ``abort()``, from any thread,
    makes the step being read fail at once."""

    def __init__(self, config: Mapping[str, Any], ranges: Mapping[Any, tuple[int, int]],
                 step_bytes: int, timeout: float | None, connections_per_broker: int,
                 on_gap: str, headers: bool) -> None:
        self.config, self.ranges, self.step_bytes = config, ranges, step_bytes
        self.args = (timeout, connections_per_broker, on_gap, headers)
        self.fetcher: _Fetcher | None = None
        self.aborted = False

    def abort(self) -> None:
        self.aborted = True
        f = self.fetcher
        if f is not None:
            f.abort()

    def run(self) -> Generator[ReadResult, None, None]:
        with closing(Cluster(self.config)) as cluster, \
                _Fetcher(cluster, self.config, *self.args) as f:
            self.fetcher = f
            if self.aborted:
                f.abort()
            yield from self._steps(f)

    def _steps(self, f: _Fetcher) -> Generator[ReadResult, None, None]:
        left = {r.tp: r for r in f.prepare(self.ranges)}
        # tp -> [offsets, Arrow bytes] read so far: the window of the next step
        seen: dict[_TP, list[int]] = {}
        while left:
            # partitions with no records read yet are probed first: one answer each
            probe = [tp for tp in left if seen.get(tp, (0, 0))[1] == 0]
            if probe:
                work = [_Range(tp, left[tp].position, left[tp].end) for tp in probe]
            else:
                share = self.step_bytes / len(left)
                work = [_Range(tp, r.position, min(r.end, r.position + max(
                    1, int(share * seen[tp][0] / seen[tp][1])))) for tp, r in left.items()]
            result = f.step(work, probe=bool(probe))
            sizes: dict[tuple[str, int], list[int]] = {}     # -> [rows, Arrow bytes]
            for b in result.batches:
                size = sizes.setdefault(_batch_key(b)[:2], [0, 0])
                size[0] += b.num_rows
                size[1] += b.nbytes
            for piece in work:
                r = left[piece.tp]
                key = (piece.tp.topic, piece.tp.partition)
                rows, nbytes = sizes.get(key, (0, 0))
                if nbytes:
                    # Offsets per byte, from offsets that held records: not the gaps
                    # skipped (retention) nor more than 2 offsets a record (control
                    # records, compaction), or a hole would make the next window, and
                    # the memory it takes, without bound.
                    gone = sum(b - a for a, b in result.gaps.get(key, ()))
                    stats = seen.setdefault(piece.tp, [0, 0])
                    stats[0] += max(1, min(piece.position - r.position - gone, 2 * rows))
                    stats[1] += nbytes
                r.position = piece.position
                if key in result.short:
                    # the log ends before this range does
                    result.short[key] = (result.short[key][0], r.end)
                    r.position = r.end
                if r.position >= r.end:
                    del left[piece.tp]
            yield result


class _Fetcher:
    """Fetches ranges of partitions: the connections (lanes) and the settings
    of one :func:`read_ranges_result` / :func:`iter_ranges` call."""

    def __init__(self, cluster: Cluster, config: Mapping[str, Any], timeout: float | None,
                 connections_per_broker: int, on_gap: str, headers: bool) -> None:
        self.cluster = cluster
        self.config = config
        self.read_committed = config.get("isolation_level") == "read_committed"
        self.check_crc = config.get("check_crcs", True)
        self.max_decompressed = config.get("max_decompressed_bytes",
                                           records.compression.DEFAULT_MAX_DECOMPRESSED)
        self.max_wait = config.get("fetch_max_wait_ms", 500)
        self.partition_bytes = config.get("max_partition_fetch_bytes", 1 << 20)
        self.fetch_bytes = config.get("fetch_max_bytes", 50 << 20)
        self.patience = timeout if timeout is not None else cluster.request_timeout * 4
        self.nlanes = connections_per_broker
        self.on_gap = on_gap
        self.headers = headers
        # one Fetch in flight per (leader, lane); lanes are extra connections to the leader
        self.lanes: dict[tuple[int, int], BrokerConnection] = {}
        self.aborted = False

    def abort(self) -> None:
        """From another thread: the step being read fails at once (KafkaConnectionError)."""
        self.aborted = True
        for conn in list(self.lanes.values()):
            conn.abort()
        self.cluster.abort()

    def __enter__(self) -> _Fetcher:
        return self

    def __exit__(self, *exc: object) -> None:
        for conn in self.lanes.values():
            conn.close()
        self.lanes.clear()

    def prepare(self, ranges: Mapping[Any, tuple[int, int]]) -> list[_Range]:
        """The non-empty ranges, once their topics are known and their partitions exist."""
        work = [_Range(_TP(str(tp[0]), int(tp[1])), int(a), int(b))
                for tp, (a, b) in ranges.items() if b > a]
        if work:
            meta = self.cluster.wait_for_topics({r.tp.topic for r in work},
                                                self.cluster.request_timeout,
                                                auto_create=False)
            _check_partitions_exist(meta, [r.tp for r in work])
        return work

    def step(self, work: list[_Range], probe: bool = False) -> ReadResult:
        """Read every range of ``work`` to its end (advancing ``position``); with
        ``probe``, only until each range has had one answer with records, read on
        one connection."""
        cluster = self.cluster
        result = ReadResult()
        starts = {id(r): r.position for r in work}
        ends = {(r.tp.topic, r.tp.partition): r.end for r in work}
        pieces = work if probe else _split(work, cluster, self.nlanes)
        in_flight: dict[tuple[int, int], tuple[list[_Range], float]] = {}
        last_progress = time.monotonic()
        while True:
            todo = [r for r in pieces if r.position < r.end
                    and not (probe and r.position > starts[id(r)])]
            if not todo:
                break
            if self.aborted:
                raise KafkaConnectionError("the read was stopped")
            if time.monotonic() - last_progress > self.patience:
                left = {f"{r.tp.topic}[{r.tp.partition}]": (r.position, r.end) for r in todo}
                raise KafkaTimeoutError(f"bounded read made no progress for "
                                        f"{self.patience:g} s; left: {left}")
            if cluster.needs_refresh:
                try:
                    cluster.refresh_metadata(auto_create=False)
                except KprotoError as exc:
                    log.debug("metadata refresh failed: %s", exc)
            _launch(self, todo, in_flight)
            if not in_flight:
                time.sleep(cluster.retry_backoff_ms / 1000)
                continue
            for lane, resp in _wait(self.lanes, in_flight, cluster,
                                    cluster.request_timeout + self.max_wait / 1000):
                ranges_sent, _ = in_flight.pop(lane)
                for r in ranges_sent:
                    r.in_flight = False
                if resp is None:
                    continue
                if _absorb(self, resp, ranges_sent, result):
                    last_progress = time.monotonic()
        if in_flight:
            # a probe can end with Fetches still out: their answers are not wanted
            for lane in in_flight:
                self.lanes.pop(lane).close()
        if probe:
            for r in work:
                r.end = min(r.end, r.position)
        else:
            for r in work:
                # the pieces of a range are done: so is the range
                r.position = max(r.position, r.end)
        for key, (mark, _) in result.short.items():
            result.short[key] = (mark, ends[key])     # a piece's end is not the range's
        # pieces of one partition arrive in any order: give them in offset order
        result.batches.sort(key=_batch_key)
        return result


def _batch_key(batch: pyarrow.RecordBatch) -> tuple[str, int, int]:
    """(topic, partition, first offset) of a batch the reader made (never empty)."""
    return (batch.column("topic")[0].as_py(), batch.column("partition")[0].as_py(),
            batch.column("offset")[0].as_py())


def _split(work: list[_Range], cluster: Cluster, lanes: int) -> list[_Range]:
    """Split each partition's range so that every leader has ~``lanes`` pieces."""
    by_leader: dict[int, list[_Range]] = {}
    for r in work:
        by_leader.setdefault(cluster.metadata.leader(*r.tp), []).append(r)
    out = []
    for rs in by_leader.values():
        pieces = max(1, -(-lanes // len(rs)))
        for r in rs:
            size = r.end - r.position
            n = min(pieces, max(1, size // 10000))
            bounds = np.linspace(r.position, r.end, n + 1).astype(np.int64)
            out += [_Range(r.tp, int(a), int(b)) for a, b in zip(bounds, bounds[1:], strict=False)
                    if b > a]
    return out


def _launch(f: _Fetcher, todo: list[_Range],
            in_flight: dict[tuple[int, int], tuple[list[_Range], float]]) -> None:
    """Send a Fetch on every idle lane for ranges not in flight (one range of a
    partition per Fetch: a Fetch names a partition once)."""
    cluster, lanes = f.cluster, f.lanes
    by_leader: dict[int, list[_Range]] = {}
    for r in todo:
        if not r.in_flight:
            node = cluster.metadata.leader(*r.tp)
            if node < 0:
                cluster.mark_stale()
                continue
            by_leader.setdefault(node, []).append(r)
    for node, rs in by_leader.items():
        for lane_no in range(f.nlanes):
            lane = (node, lane_no)
            if lane in in_flight or not rs:
                continue
            chosen: list[_Range] = []
            seen: set[_TP] = set()
            for r in list(rs):
                if r.tp not in seen:
                    chosen.append(r)
                    seen.add(r.tp)
                    rs.remove(r)
            topics: dict[str, list[dict[str, Any]]] = {}
            for r in chosen:
                topics.setdefault(r.tp.topic, []).append({
                    "partition": r.tp.partition, "fetch_offset": r.position,
                    "partition_max_bytes": f.partition_bytes, "current_leader_epoch": -1,
                    "log_start_offset": -1})
            fields = {
                "max_wait_ms": f.max_wait, "min_bytes": 1, "max_bytes": f.fetch_bytes,
                "isolation_level": int(f.read_committed), "session_id": 0, "session_epoch": -1,
                "topics": [{"topic": t, "topic_id": topic_id_of(cluster.metadata, t), "partitions": ps}
                           for t, ps in topics.items()],
                "forgotten_topics_data": [], "rack_id": ""}
            try:
                conn = lanes.get(lane)
                if conn is None or not conn.connected:
                    broker = cluster.metadata.brokers[node]
                    conn = lanes[lane] = cluster.new_connection(broker.address)
                conn.send(ApiKey.FETCH, fields, raw=True)
            except (KprotoError, KeyError) as exc:
                log.debug("fetch to broker %d failed: %s", node, exc)
                cluster.mark_stale()
                rs[:0] = chosen
                continue
            for r in chosen:
                r.in_flight = True
            in_flight[lane] = (chosen, time.monotonic())


def _wait(lanes: dict[tuple[int, int], BrokerConnection],
          in_flight: dict[tuple[int, int], tuple[list[_Range], float]], cluster: Cluster,
          limit: float) -> list[tuple[tuple[int, int], Any]]:
    """Wait for at least one answer; returns [(lane, response or None if it failed)]."""
    out: list[tuple[tuple[int, int], Any]] = []
    with selectors.DefaultSelector() as sel:
        for lane in in_flight:
            conn = lanes[lane]
            if conn.connected:
                sel.register(conn.fileno(), selectors.EVENT_READ, lane)
            else:
                out.append((lane, None))
        if out:
            return out
        oldest = min(sent for _, sent in in_flight.values())
        events = sel.select(max(0.0, oldest + limit - time.monotonic()))
    for key, _ in events:
        lane = key.data
        conn = lanes[lane]
        try:
            got = conn.receive(in_flight[lane][1] + limit)
        except KprotoError as exc:
            log.debug("fetch on %s failed: %s", lane, exc)
            cluster.mark_stale()
            out.append((lane, None))
            continue
        if got:
            out.append((lane, got[-1]))
    now = time.monotonic()
    for lane, (_, sent) in in_flight.items():
        if now - sent > limit and all(lane != o[0] for o in out):
            lanes[lane].close()
            cluster.mark_stale()
            out.append((lane, None))
    return out


def _absorb(f: _Fetcher, resp: Any, sent: list[_Range], result: ReadResult) -> bool:
    """Decode one Fetch answer into ``result``; advance the ranges. True on progress."""
    cluster, read_committed = f.cluster, f.read_committed
    if resp.error is not None:
        raise resp.error
    sliced = records.slice_fetch(resp.body, resp.request.version)
    names = cluster.metadata.topic_names()
    by_tp = {r.tp: r for r in sent}
    progress = False
    for p in sliced.partitions:
        topic = topic_of(p, names)
        r = by_tp.get(_TP(topic, p.partition))
        if r is None:
            continue
        if p.error_code == 1:      # OFFSET_OUT_OF_RANGE: the log no longer starts there
            start = p.log_start_offset
            if start < 0:
                start = list_offsets(cluster, f.config, {r.tp: EARLIEST},
                                     auto_create=False)[r.tp][0]
            if start <= r.position:
                # past the end? (Kafka answers a fetch beyond the high watermark so;
                # a split range's later pieces can start there)
                mark = p.high_watermark if p.high_watermark >= 0 else \
                    list_offsets(cluster, f.config, {r.tp: LATEST}, auto_create=False)[r.tp][0]
                if 0 <= mark <= r.position:
                    result.short[(r.tp.topic, r.tp.partition)] = (mark, r.end)
                    r.end = r.position
                    progress = True
                    continue
                raise OffsetOutOfRangeError(f"offset {r.position} is out of range (log "
                                            f"{start}..{mark})", topic=topic,
                                            partition=p.partition)
            if f.on_gap == "fail":
                raise OffsetOutOfRangeError(
                    f"offsets {r.position}..{min(start, r.end) - 1} are gone (log starts at "
                    f"{start})", topic=topic, partition=p.partition)
            gap = (r.position, min(start, r.end))
            result.gaps.setdefault((r.tp.topic, r.tp.partition), []).append(gap)
            r.position = start
            progress = True
            continue
        if p.error_code:
            cls = error_for_code(p.error_code)
            assert cls is not None
            if cls.retriable or cls.invalid_metadata:
                cluster.mark_stale()
                continue
            raise cls("Fetch failed", topic=topic, partition=p.partition)
        mark = p.last_stable_offset if read_committed and p.last_stable_offset >= 0 \
            else p.high_watermark
        if p.records is None or not len(p.records):
            if 0 <= mark <= r.position < r.end:
                # nothing more has been written: the range ends at the high watermark
                result.short[(r.tp.topic, r.tp.partition)] = (mark, r.end)
                r.end = r.position
                progress = True
            continue
        cols = records.decode(p.records, topic=topic, partition=p.partition,
                              start_offset=r.position, check_crc=f.check_crc,
                              max_decompressed=f.max_decompressed,
                              aborted_transactions=(p.aborted_transactions or [])
                              if read_committed else None)
        _check_offsets(cols, p.high_watermark, topic, p.partition)
        if cols.next_offset > r.position:
            progress = True
        if len(cols):
            batch = cols.to_arrow(headers=f.headers)
            stop = int(np.searchsorted(cols.offset, r.end))
            if stop < len(cols):
                # a slice keeps the whole answer's buffers: copy a small part
                batch = batch.slice(0, stop) if 2 * stop >= len(cols) else batch.take(
                    np.arange(stop))
            if batch.num_rows:
                result.batches.append(batch)
        r.position = max(r.position, cols.next_offset)
    return progress


def _check_offsets(cols: Any, high_watermark: int, topic: str, partition: int) -> None:
    """A record batch's base offset is outside its CRC: refuse offsets that go
    backwards or past the high watermark rather than label records wrongly."""
    if 0 <= high_watermark < cols.next_offset:
        raise CorruptRecordError(f"{topic}[{partition}]: a record batch ends at offset "
                                 f"{cols.next_offset - 1}, past the high watermark "
                                 f"{high_watermark} (damaged base offset?)")
    if len(cols) > 1 and np.any(cols.offset[1:] <= cols.offset[:-1]):
        raise CorruptRecordError(f"{topic}[{partition}]: record offsets go backwards "
                                 "(damaged base offset?)")
