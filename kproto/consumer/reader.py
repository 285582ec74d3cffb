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
import operator
import queue
import threading
import time
from collections.abc import Callable, Generator, Mapping
from contextlib import closing
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from .. import compression
from ..errors import (
    KafkaConnectionError,
    KafkaTimeoutError,
    KprotoError,
    OffsetOutOfRangeError,
    error_for_code,
)
from ..net.blocking import BrokerConnection
from ..net.cluster import Cluster
from ..net.driver import Driver, SelectorDriver
from ..protocol import ApiKey
from ..structs import EARLIEST, LATEST, TopicPartition
from .fetcher import (
    OUT_OF_RANGE,
    RETRY,
    FetchRequest,
    answer_partitions,
    check_partitions_exist,
    decode_partition,
    fetch_request,
    list_offsets,
    outcome,
    watermark,
)

if TYPE_CHECKING:
    import pyarrow

__all__ = ["read_ranges", "read_ranges_result", "iter_ranges", "list_offsets", "ReadResult",
           "Bound", "bound_offset"]

log = logging.getLogger("kproto.reader")


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
    tp: TopicPartition
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
        seen: dict[TopicPartition, list[int]] = {}
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


class _Sent(NamedTuple):
    """A Fetch in flight on a lane: its ranges, when it went, what it asked."""

    ranges: list[_Range]
    at: float
    request: FetchRequest


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
                                           compression.DEFAULT_MAX_DECOMPRESSED)
        self.max_wait = config.get("fetch_max_wait_ms", 500)
        self.partition_bytes = config.get("max_partition_fetch_bytes", 1 << 20)
        self.fetch_bytes = config.get("fetch_max_bytes", 50 << 20)
        self.patience = timeout if timeout is not None else cluster.request_timeout * 4
        self.nlanes = connections_per_broker
        self.on_gap = on_gap
        self.headers = headers
        # one Fetch in flight per (leader, lane); lanes are extra connections to the leader
        self.lanes: dict[tuple[int, int], BrokerConnection] = {}
        self.driver: Driver = SelectorDriver()     # where the lanes' answers are waited for
        self.aborted = False
        # the last thing that kept each partition from moving on (for a timeout's message)
        self.stalled: dict[TopicPartition, str] = {}

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
        self.driver.close()

    def prepare(self, ranges: Mapping[Any, tuple[int, int]]) -> list[_Range]:
        """The non-empty ranges, once their topics are known and their partitions exist."""
        work = [_Range(TopicPartition(str(tp[0]), int(tp[1])), int(a), int(b))
                for tp, (a, b) in ranges.items() if b > a]
        if work:
            meta = self.cluster.wait_for_topics({r.tp.topic for r in work},
                                                self.cluster.request_timeout,
                                                auto_create=False)
            check_partitions_exist(meta, [r.tp for r in work])
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
        in_flight: dict[tuple[int, int], _Sent] = {}
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
                why = {f"{r.tp.topic}[{r.tp.partition}]": self.stalled.get(r.tp, "no answer")
                       for r in todo}
                raise KafkaTimeoutError(f"bounded read made no progress for "
                                        f"{self.patience:g} s; left: {left}; last: {why}")
            if cluster.needs_refresh:
                try:
                    cluster.refresh_metadata(auto_create=False)
                except KprotoError as exc:
                    log.debug("metadata refresh failed: %s", exc)
            self.launch(todo, in_flight)
            if not in_flight:
                time.sleep(cluster.retry_backoff_ms / 1000)
                continue
            for lane, resp in self.wait(in_flight,
                                        cluster.request_timeout + self.max_wait / 1000):
                sent = in_flight.pop(lane)
                for r in sent.ranges:
                    r.in_flight = False
                if isinstance(resp, str):
                    for r in sent.ranges:
                        self.stalled[r.tp] = f"no answer from broker {lane[0]} ({resp})"
                    continue
                if self.absorb(resp, sent, result):
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

    # -- one round of a step: send on idle lanes, wait for answers, take them in

    def launch(self, todo: list[_Range], in_flight: dict[tuple[int, int], _Sent]) -> None:
        """Send a Fetch on every idle lane for ranges not in flight (one range of a
        partition per Fetch: a Fetch names a partition once)."""
        cluster, lanes = self.cluster, self.lanes
        by_leader: dict[int, list[_Range]] = {}
        for r in todo:
            if not r.in_flight:
                node = cluster.metadata.leader(*r.tp)
                if node < 0:
                    self.stalled[r.tp] = "no leader"
                    cluster.mark_stale()
                    continue
                by_leader.setdefault(node, []).append(r)
        for node, rs in by_leader.items():
            for lane_no in range(self.nlanes):
                lane = (node, lane_no)
                if lane in in_flight or not rs:
                    continue
                chosen: list[_Range] = []
                seen: set[TopicPartition] = set()
                for r in list(rs):
                    if r.tp not in seen:
                        chosen.append(r)
                        seen.add(r.tp)
                        rs.remove(r)
                request = fetch_request(
                    {r.tp: r.position for r in chosen}, cluster.metadata,
                    partition_bytes=self.partition_bytes, max_wait_ms=self.max_wait,
                    max_bytes=self.fetch_bytes, read_committed=self.read_committed)
                try:
                    conn = lanes.get(lane)
                    if conn is None or not conn.connected:
                        broker = cluster.metadata.brokers[node]
                        conn = lanes[lane] = cluster.new_connection(broker.address)
                    conn.send(ApiKey.FETCH, request.fields, raw=True)
                except (KprotoError, KeyError) as exc:
                    log.debug("fetch to broker %d failed: %s", node, exc)
                    for r in chosen:
                        self.stalled[r.tp] = f"broker {node}: {exc}"
                    cluster.mark_stale()
                    rs[:0] = chosen
                    continue
                for r in chosen:
                    r.in_flight = True
                in_flight[lane] = _Sent(chosen, time.monotonic(), request)

    def wait(self, in_flight: dict[tuple[int, int], _Sent], limit: float
             ) -> list[tuple[tuple[int, int], Any]]:
        """Wait for at least one answer; returns [(lane, response, or why there is
        none: e.g. an answer past receive_message_max_bytes)]."""
        lanes, cluster = self.lanes, self.cluster
        out: list[tuple[tuple[int, int], Any]] = []
        waiting: dict[int, tuple[int, int]] = {}
        for lane in in_flight:
            conn = lanes[lane]
            if conn.connected:
                waiting[id(conn)] = lane
            else:
                out.append((lane, "connection closed"))
        if out:
            return out
        oldest = min(s.at for s in in_flight.values())
        ready = self.driver.wait([lanes[lane] for lane in waiting.values()], oldest + limit)
        for conn in ready:
            lane = waiting[id(conn)]
            try:
                got = lanes[lane].receive(in_flight[lane].at + limit)
            except KprotoError as exc:
                log.debug("fetch on %s failed: %s", lane, exc)
                cluster.mark_stale()
                out.append((lane, str(exc)))
                continue
            if got:
                out.append((lane, got[-1]))
        now = time.monotonic()
        for lane, sent in in_flight.items():
            if now - sent.at > limit and all(lane != o[0] for o in out):
                lanes[lane].close()
                cluster.mark_stale()
                out.append((lane, f"none within {limit:g} s"))
        return out

    def absorb(self, resp: Any, sent: _Sent, result: ReadResult) -> bool:
        """Decode one Fetch answer into ``result``; advance the ranges. True on progress."""
        cluster = self.cluster
        parts, strays = answer_partitions(resp, sent.request)
        if strays:
            log.debug("a Fetch answer named what its request did not: %s", ", ".join(strays))
            cluster.mark_stale()
        by_tp = {r.tp: r for r in sent.ranges}
        progress = False
        for tp, p in parts:
            r = by_tp[tp]
            what = outcome(tp, p)
            if what == RETRY:
                cluster.mark_stale()
                self.stalled[tp] = _error_name(p.error_code)
            elif (self._out_of_range(r, p, result) if what == OUT_OF_RANGE
                  else self._records(r, p, result)):
                progress = True
                self.stalled.pop(tp, None)
            else:
                self.stalled[tp] = (f"no records (high watermark {p.high_watermark}, "
                                    f"log start {p.log_start_offset})")
        return progress

    def _out_of_range(self, r: _Range, p: Any, result: ReadResult) -> bool:
        """OFFSET_OUT_OF_RANGE: the log no longer starts at ``r.position`` (a gap,
        skipped or refused per ``on_gap``), or it ends before it."""
        tp, cluster = r.tp, self.cluster
        start = p.log_start_offset
        if start < 0:
            start = list_offsets(cluster, self.config, {tp: EARLIEST},
                                 auto_create=False)[tp][0]
        if start <= r.position:
            # past the end? (Kafka answers a fetch beyond the high watermark so;
            # a split range's later pieces can start there)
            mark = p.high_watermark if p.high_watermark >= 0 else \
                list_offsets(cluster, self.config, {tp: LATEST}, auto_create=False)[tp][0]
            if 0 <= mark <= r.position:
                result.short[(tp.topic, tp.partition)] = (mark, r.end)
                r.end = r.position
                return True
            raise OffsetOutOfRangeError(f"offset {r.position} is out of range (log "
                                        f"{start}..{mark})", topic=tp.topic,
                                        partition=tp.partition)
        if self.on_gap == "fail":
            raise OffsetOutOfRangeError(
                f"offsets {r.position}..{min(start, r.end) - 1} are gone (log starts at "
                f"{start})", topic=tp.topic, partition=tp.partition)
        result.gaps.setdefault((tp.topic, tp.partition), []).append(
            (r.position, min(start, r.end)))
        r.position = start
        return True

    def _records(self, r: _Range, p: Any, result: ReadResult) -> bool:
        """A partition's records: the part inside the range goes to ``result``."""
        mark = watermark(p, self.read_committed)
        if p.records is None or not len(p.records):
            if 0 <= mark <= r.position < r.end:
                # nothing more has been written: the range ends at the high watermark
                result.short[(r.tp.topic, r.tp.partition)] = (mark, r.end)
                r.end = r.position
                return True
            return False
        cols = decode_partition(r.tp, p, r.position, read_committed=self.read_committed,
                                check_crc=self.check_crc,
                                max_decompressed=self.max_decompressed)
        progress = cols.next_offset > r.position
        if len(cols):
            batch = cols.to_arrow(headers=self.headers)
            stop = int(np.searchsorted(cols.offset, r.end))
            if stop < len(cols):
                # a slice keeps the whole answer's buffers: copy a small part
                batch = batch.slice(0, stop) if 2 * stop >= len(cols) else batch.take(
                    np.arange(stop))
            if batch.num_rows:
                result.batches.append(batch)
        r.position = max(r.position, cols.next_offset)
        return progress


def _error_name(code: int) -> str:
    """A Kafka error code as its protocol name and number (BrokerError's own)."""
    known = error_for_code(code)
    return f"{known.name} ({code})" if known is not None else f"error {code}"


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


#: A bound of read_range: an offset, "earliest" (the log start) or "latest"/None (the end).
Bound = int | str | None
EARLIEST_NAME, LATEST_NAME = "earliest", "latest"


def bound_offset(value: Bound, which: str, topic: str, partition: int) -> int:
    """An offset, or EARLIEST/LATEST for the names (None: the end)."""
    if value == EARLIEST_NAME:
        return EARLIEST
    if value == LATEST_NAME or (value is None and which == "end"):
        return LATEST
    try:
        offset = operator.index(value)  # type: ignore[arg-type]  # (NumPy ints too)
    except TypeError:
        offset = -1
    if offset < 0 or isinstance(value, bool):
        raise ValueError(f"{topic}[{partition}]: bad {which} {value!r}: an offset >= 0, "
                         f"'earliest'{', None' if which == 'end' else ''} or 'latest'")
    return offset
