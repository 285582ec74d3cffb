"""Fetch and ListOffsets, written once for every reader.

The consumer (``poll``/``poll_batch``), the bounded reader (``read_range``,
``iter_range``, a Spark task) and the offset lookups (``seek_to_*``,
``end_offsets``, ``Admin.list_offsets``, Spark's planning) build their Fetch
requests, match answers to them, judge each partition's outcome and decode its
records here; what each does with an outcome (a consumer resets its position,
a bounded read notes a gap) stays with it.

- :func:`fetch_request` names each partition once, with the leader epoch the
  metadata knows (KIP-320) and the topic ids it has (Fetch v13+; without ids
  the connection picks a version that names topics: ``protocol.fillable``);
- :func:`answer_partitions` names an answer's partitions as its request named
  them and sets aside what the request did not name (Java drops it too);
- :func:`outcome` sorts a partition's error code: records, out of range, retry
  (after a metadata refresh), or an exception;
- :func:`decode_partition` decodes a partition's records and refuses
  unchecksummed framing that contradicts itself;
- :func:`list_offsets`: ListOffsets to the leaders, "latest" checked against a
  Fetch's high watermark.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .. import compression, records
from ..columns import RecordColumns
from ..errors import (
    CorruptRecordError,
    ErrorCode,
    KafkaTimeoutError,
    LeaderNotAvailableError,
    UnknownTopicOrPartitionError,
    error_for_code,
)
from ..net.blocking import Fields
from ..net.cluster import Cluster
from ..protocol import ApiKey
from ..structs import LATEST, TopicPartition, topic_id_of, topic_of

__all__ = ["FetchRequest", "fetch_request", "answer_partitions", "outcome", "watermark",
           "decode_partition", "list_offsets", "check_partitions_exist",
           "RECORDS", "OUT_OF_RANGE", "RETRY"]

log = logging.getLogger("kproto.fetch")

#: What a partition of a Fetch answer holds (see :func:`outcome`).
RECORDS, OUT_OF_RANGE, RETRY = "records", "out_of_range", "retry"


@dataclass(eq=False)
class FetchRequest:
    """A Fetch's fields, the offset each partition was asked from, and the topic
    ids it named (an answer is matched against these, not today's metadata)."""

    fields: dict[str, Any]
    offsets: dict[TopicPartition, int]
    names: dict[uuid.UUID, str]


def fetch_request(partitions: Mapping[TopicPartition, int], metadata: Any, *,
                  partition_bytes: int, max_wait_ms: int, max_bytes: int,
                  read_committed: bool, min_bytes: int = 1, rack_id: str = "") -> FetchRequest:
    """A Fetch of each partition from its offset (``partition_bytes`` at most each)."""
    topics: dict[str, list[dict[str, Any]]] = {}
    for tp, offset in partitions.items():
        topics.setdefault(tp.topic, []).append({
            "partition": tp.partition, "fetch_offset": offset,
            "partition_max_bytes": partition_bytes,
            "current_leader_epoch": leader_epoch(metadata, tp), "log_start_offset": -1})
    ids = {t: topic_id_of(metadata, t) for t in topics}
    fields = {
        "max_wait_ms": max_wait_ms, "min_bytes": min_bytes, "max_bytes": max_bytes,
        "isolation_level": int(read_committed), "session_id": 0, "session_epoch": -1,
        "topics": [{"topic": t, "topic_id": ids[t], "partitions": ps}
                   for t, ps in topics.items()],
        "forgotten_topics_data": [], "rack_id": rack_id}
    return FetchRequest(fields, dict(partitions), {i: t for t, i in ids.items() if i.int})


def leader_epoch(metadata: Any, tp: TopicPartition) -> int:
    """The partition's leader epoch in ``metadata`` (-1: unknown). Sent in Fetch
    (KIP-320), it makes a broker whose leadership is older or newer than what we
    know answer FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH (a metadata refresh)
    instead of serving a log that may be truncated."""
    info = metadata.topics.get(tp.topic)
    part = info.partitions.get(tp.partition) if info is not None else None
    return part.leader_epoch if part is not None else -1


def answer_partitions(resp: Any, request: FetchRequest
                      ) -> tuple[list[tuple[TopicPartition, Any]], list[str]]:
    """The partitions of a Fetch answer, named as ``request`` named them, and a
    description of each part it did not ask for.

    Raises the answer's own failure (undecodable, a top-level error code). A part
    that matches no partition of the request - Tansu answers a deleted topic
    with topic id 0; damage to the unchecksummed framing looks the same - is
    left out, as Java's ``FetchResponse.responseData`` leaves it out: nothing is
    handed out for it and no position moves, so the partitions asked for are
    fetched again (the caller refreshes metadata).
    """
    if resp.error is not None:
        raise resp.error
    sliced = records.slice_fetch(resp.body, resp.request.version)
    if sliced.error_code:
        cls = error_for_code(sliced.error_code)
        assert cls is not None
        raise cls("Fetch failed")
    parts, strays = [], []
    for p in sliced.partitions:
        tp = TopicPartition(topic_of(p, request.names), p.partition)
        if tp in request.offsets:
            parts.append((tp, p))
        else:
            strays.append(f"{tp.topic}[{tp.partition}] (error {p.error_code})")
    return parts, strays


def outcome(tp: TopicPartition, p: Any) -> str:
    """RECORDS (maybe none), OUT_OF_RANGE, or RETRY (a retriable or metadata
    error: refresh and fetch again); any other error code is raised."""
    if not p.error_code:
        return RECORDS
    if p.error_code == ErrorCode.OFFSET_OUT_OF_RANGE:
        return OUT_OF_RANGE
    cls = error_for_code(p.error_code)
    assert cls is not None
    if cls.retriable or cls.invalid_metadata:
        return RETRY
    raise cls("Fetch failed", topic=tp.topic, partition=tp.partition)


def watermark(p: Any, read_committed: bool) -> int:
    """Where a partition's readable log ends: the last stable offset with
    read_committed (when the broker gives one), else the high watermark."""
    return p.last_stable_offset if read_committed and p.last_stable_offset >= 0 \
        else p.high_watermark


def decode_partition(tp: TopicPartition, p: Any, start: int, *, read_committed: bool,
                     check_crc: bool = True,
                     max_decompressed: int = compression.DEFAULT_MAX_DECOMPRESSED,
                     binary_view: bool = False) -> RecordColumns:
    """A partition's records from offset ``start`` (aborted transactions dropped
    with ``read_committed``), checked against the answer's framing: a record
    batch's CRC-32C covers its records but not its base offset, and nothing
    covers the Fetch framing (high watermark), so damage there would label good
    records wrongly. CorruptRecordError when the records reach past the high
    watermark or their offsets do not increase.

    ``max_decompressed`` bounds the memory of one answer, not what can be read:
    the batches that would decompress past it are left for the next Fetch (which
    starts at the returned ``next_offset``; a broker may answer far more than the
    Fetch's byte limits asked, noida-db its whole log). DecompressionLimitError
    when no batch before the one past it reaches ``start`` (a single batch past
    it, or batches that end below ``start`` used it up): the next Fetch would be
    this one again, and the consumer would ask for it for ever."""
    cols = records.decode(p.records, topic=tp.topic, partition=tp.partition,
                          start_offset=start, check_crc=check_crc, stop_at_limit=True,
                          max_decompressed=max_decompressed, binary_view=binary_view,
                          aborted_transactions=(p.aborted_transactions or [])
                          if read_committed else None)
    nxt, high = cols.next_offset, p.high_watermark
    if 0 <= high < nxt and nxt > start:
        raise CorruptRecordError(
            f"{tp.topic}[{tp.partition}]: a record batch ends at offset {nxt - 1}, past the "
            f"high watermark {high} (damaged base offset?)")
    offsets = cols.offset
    if len(offsets) > 1 and bool((offsets[1:] <= offsets[:-1]).any()):
        raise CorruptRecordError(f"{tp.topic}[{tp.partition}]: record offsets go backwards "
                                 "(damaged base offset?)")
    return cols


# --------------------------------------------------------------------------- ListOffsets

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
    check_partitions_exist(meta, wanted)

    def attempt() -> dict[Any, tuple[int, int]]:
        by_leader, orphans = cluster.leaders(list(wanted))
        if orphans:
            cluster.mark_stale()
            raise LeaderNotAvailableError(f"no leader for {orphans}")
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


def check_partitions_exist(meta: Any, tps: Any) -> None:
    """A partition index the topic does not have is an error now, not after retries."""
    for tp in tps:
        have = meta.partitions(tp[0])
        if have and tp[1] not in have:
            raise UnknownTopicOrPartitionError(
                f"topic {tp[0]!r} has {len(have)} partitions, not partition {tp[1]}",
                topic=tp[0], partition=tp[1])


def _high_watermarks(cluster: Cluster, at: Mapping[Any, int], read_committed: bool
                     ) -> dict[Any, int]:
    """The high watermark (or LSO) of each partition, from a Fetch of a few bytes."""
    by_leader, _ = cluster.leaders(list(at))
    requests: dict[int, list[tuple[int, Fields]]] = {}
    sent: dict[int, FetchRequest] = {}
    for node, tps in by_leader.items():
        # min_bytes 1: Tansu answers min_bytes 0 with no partitions at all
        sent[node] = fetch_request(
            {TopicPartition(*tp): max(at[tp], 0) for tp in tps}, cluster.metadata,
            partition_bytes=1, max_wait_ms=50, max_bytes=1 << 20,
            read_committed=read_committed)
        requests[node] = [(ApiKey.FETCH, sent[node].fields)]
    out: dict[Any, int] = {}
    keys: dict[tuple[str, int], Any] = {(tp[0], tp[1]): tp for tp in at}
    for node, result in cluster.send_many(requests, raw=True).items():
        if isinstance(result, Exception):
            raise result
        for resp in result:
            parts, _ = answer_partitions(resp, sent[node])
            for tp, p in parts:
                if not p.error_code:
                    out[keys[tp]] = watermark(p, read_committed)
    return out
