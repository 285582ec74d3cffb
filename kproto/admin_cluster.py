"""The cluster, partitions and records as Java's Admin manages them:
``describe_cluster`` (DescribeCluster where the broker has it, else Metadata),
``create_partitions`` (to the controller), ``delete_records`` (to each
partition's leader), ``describe_log_dirs`` (to each broker) and
``list_partition_reassignments`` (to the controller).

>>> admin.describe_cluster().controller                              # doctest: +SKIP
>>> admin.delete_records({("events", 0): 1000})[("events", 0)]       # doctest: +SKIP
1000
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .admin_base import AdminBase, Results, error_of
from .errors import (
    ConfigError,
    KprotoError,
    LeaderNotAvailableError,
    ProtocolError,
    UnknownTopicOrPartitionError,
)
from .net.blocking import Fields
from .net.cluster import BrokerInfo
from .protocol import ApiKey
from .structs import TopicPartition
from .structs import as_tp as _tp

__all__ = ["ClusterDescription", "LogDirDescription", "ReplicaInfo", "PartitionReassignment",
           "ClusterAdmin"]


@dataclass(frozen=True)
class ClusterDescription:
    """Java's ``DescribeClusterResult``: the cluster id, the controller and the brokers."""

    cluster_id: str | None
    #: The controller's node id (-1: unknown). KRaft brokers name a broker here.
    controller_id: int
    #: node id -> broker, by id.
    brokers: Mapping[int, BrokerInfo] = field(default_factory=dict)
    #: The fenced brokers (DescribeCluster v2+ with ``include_fenced_brokers``).
    fenced: frozenset[int] = frozenset()
    #: "DescribeCluster" or "Metadata": which API answered.
    source: str = "Metadata"

    @property
    def nodes(self) -> list[BrokerInfo]:
        """The brokers (Java's ``nodes()``)."""
        return list(self.brokers.values())

    @property
    def controller(self) -> BrokerInfo | None:
        """The controller (Java's ``controller()``), None if unknown."""
        return self.brokers.get(self.controller_id)


@dataclass(frozen=True)
class ReplicaInfo:
    """A partition's replica in a log dir (Java's ``ReplicaInfo``)."""

    size: int
    #: How far it is behind the leader's high watermark (a future replica: behind
    #: the current one).
    offset_lag: int
    #: A replica being moved here from another log dir.
    is_future: bool


@dataclass(frozen=True)
class LogDirDescription:
    """One log dir of a broker: its error (None when healthy), replicas and space."""

    error: Exception | None
    replicas: Mapping[TopicPartition, ReplicaInfo]
    #: Bytes of the volume, and free (v4+; -1 when the broker does not say).
    total_bytes: int = -1
    usable_bytes: int = -1
    is_cordoned: bool = False


@dataclass(frozen=True)
class PartitionReassignment:
    """A reassignment in progress (Java's ``PartitionReassignment``)."""

    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...]
    removing_replicas: tuple[int, ...]


class ClusterAdmin(AdminBase):
    """The cluster, partition and record calls of :class:`~kproto.admin.Admin`."""

    def describe_cluster(self, *, include_fenced_brokers: bool = False) -> ClusterDescription:
        """Cluster id, controller and brokers: DescribeCluster (KIP-700) where the
        broker has it, else a Metadata answer (as Java's Admin falls back)."""
        conn = self._cluster.any_connection()
        if ApiKey.DESCRIBE_CLUSTER in conn.versions:
            body = self._cluster.call(lambda: self._cluster.request_any(
                ApiKey.DESCRIBE_CLUSTER, {"include_cluster_authorized_operations": False,
                                          "endpoint_type": 1,
                                          "include_fenced_brokers": include_fenced_brokers}),
                "DescribeCluster")
            err = error_of(body["error_code"], body["error_message"], api="DescribeCluster")
            if err is not None:
                raise err
            brokers = {b["broker_id"]: BrokerInfo(b["broker_id"], b["host"], b["port"],
                                                  b["rack"])
                       for b in sorted(body["brokers"], key=lambda b: b["broker_id"])}
            return ClusterDescription(body["cluster_id"], body["controller_id"], brokers,
                                      frozenset(b["broker_id"] for b in body["brokers"]
                                                if b.get("is_fenced")), "DescribeCluster")
        meta = self._cluster.refresh_metadata()
        return ClusterDescription(meta.cluster_id, meta.controller_id,
                                  dict(sorted(meta.brokers.items())))

    def create_partitions(self, counts: Mapping[str, int], *,
                          assignments: Mapping[str, list[list[int]]] | None = None,
                          validate_only: bool = False, timeout_ms: int = 30000
                          ) -> Results[str, None]:
        """Grow each topic to ``counts[topic]`` partitions (Java's
        ``createPartitions``); ``assignments[topic]``: the new partitions' replicas
        (default: the broker places them). Each topic succeeds or fails on its own."""
        wanted = {t: _whole(n, f"topic {t!r}'s partition count") for t, n in counts.items()}
        if not wanted:
            return Results({})
        body = self._controller_request(ApiKey.CREATE_PARTITIONS, {
            "topics": [{"name": t, "count": n,
                        "assignments": None if not assignments or t not in assignments
                        else [{"broker_ids": ids} for ids in assignments[t]]}
                       for t, n in wanted.items()],
            "timeout_ms": timeout_ms, "validate_only": validate_only})
        values: dict[str, None] = {}
        errors: dict[str, Exception] = {}
        for r in body["results"]:
            err = error_of(r["error_code"], r["error_message"], topic=r["name"])
            if err is None:
                values[r["name"]] = None
            else:
                errors[r["name"]] = err
        if values and not validate_only:
            self._cluster.mark_stale()
        return Results(values, _unanswered(wanted, values, errors, "CreatePartitions"))

    def delete_records(self, before: Mapping[Any, int], *, timeout_ms: int = 30000
                       ) -> Results[TopicPartition, int]:
        """Delete every record before ``before[(topic, partition)]`` (-1: the high
        watermark) on each partition's leader (Java's ``deleteRecords``): per
        partition, its new low watermark (log start offset), or its error."""
        wanted = {tp: _whole(v, f"the offset to delete {tp.topic}[{tp.partition}] before")
                  for tp, v in ((_tp(k), v) for k, v in before.items())}
        errors: dict[TopicPartition, Exception] = {}
        meta = self._cluster.refresh_metadata(sorted({tp.topic for tp in wanted}),
                                             auto_create=False)
        for tp in wanted:
            if tp.partition not in meta.partitions(tp.topic):
                errors[tp] = UnknownTopicOrPartitionError(topic=tp.topic,
                                                          partition=tp.partition)
        by_leader, orphans = self._cluster.leaders(tp for tp in wanted if tp not in errors)
        for t, p in orphans:
            errors[TopicPartition(t, p)] = LeaderNotAvailableError(topic=t, partition=p)
        requests: dict[int, list[tuple[int, Fields]]] = {}
        for node, owned in by_leader.items():
            topics: dict[str, list[dict[str, int]]] = {}
            for t, p in owned:
                topics.setdefault(t, []).append({"partition_index": p,
                                                 "offset": wanted[TopicPartition(t, p)]})
            requests[node] = [(ApiKey.DELETE_RECORDS, {
                "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
                "timeout_ms": timeout_ms})]
        values: dict[TopicPartition, int] = {}
        for node, result in self._cluster.send_many(requests).items():
            if isinstance(result, Exception):
                errors.update({TopicPartition(t, p): result for t, p in by_leader[node]})
                continue
            for t in result[0].body["topics"]:
                for p in t["partitions"]:
                    tp = TopicPartition(t["name"], p["partition_index"])
                    err = error_of(p["error_code"], topic=tp.topic, partition=tp.partition,
                                   node=node)
                    if err is None:
                        values[tp] = p["low_watermark"]
                    else:
                        errors[tp] = err
        return Results(dict(sorted(values.items())),
                       _unanswered(wanted, values, errors, "DeleteRecords"))

    def describe_log_dirs(self, brokers: Iterable[int] | int | None = None
                          ) -> Results[int, dict[str, LogDirDescription]]:
        """Each broker's log dirs (default: every broker's): per dir its error,
        replicas (size, offset lag, future) and space (Java's ``describeLogDirs``)."""
        given = None if brokers is None else [brokers] if isinstance(brokers, int) \
            else list(brokers)
        for n in given or ():
            _whole(n, "a broker id")
        meta = self._cluster.maybe_refresh()
        nodes = sorted(meta.brokers) if given is None else list(dict.fromkeys(given))
        errors: dict[int, Exception] = {}
        for n in nodes:
            if n not in meta.brokers:
                errors[n] = KprotoError(f"broker {n} is not in the cluster "
                                        f"(brokers: {sorted(meta.brokers)})")
        answers = self._cluster.send_many({n: [(ApiKey.DESCRIBE_LOG_DIRS, {"topics": None})]
                                           for n in nodes if n not in errors})
        values: dict[int, dict[str, LogDirDescription]] = {}
        for node, result in answers.items():
            if isinstance(result, Exception):
                errors[node] = result
                continue
            body = result[0].body
            err = error_of(body.get("error_code", 0), api="DescribeLogDirs", node=node)
            if err is not None:
                errors[node] = err
                continue
            values[node] = {d["log_dir"]: LogDirDescription(
                error_of(d["error_code"], log_dir=d["log_dir"], node=node),
                {TopicPartition(t["name"], p["partition_index"]): ReplicaInfo(
                    p["partition_size"], p["offset_lag"], p["is_future_key"])
                 for t in d["topics"] for p in t["partitions"]},
                d.get("total_bytes", -1), d.get("usable_bytes", -1), d.get("is_cordoned", False))
                for d in body["results"]}
        return Results({n: values[n] for n in nodes if n in values}, errors)

    def list_partition_reassignments(self, partitions: Iterable[Any] | None = None,
                                     *, timeout_ms: int = 30000
                                     ) -> dict[TopicPartition, PartitionReassignment]:
        """The reassignments in progress (of ``partitions``, default all), from the
        controller (Java's ``listPartitionReassignments``)."""
        topics = None
        if partitions is not None:
            by_topic: dict[str, list[int]] = {}
            for tp in map(_tp, partitions):
                by_topic.setdefault(tp.topic, []).append(tp.partition)
            topics = [{"name": t, "partition_indexes": ps} for t, ps in by_topic.items()]
        body = self._controller_request(ApiKey.LIST_PARTITION_REASSIGNMENTS,
                                        {"timeout_ms": timeout_ms, "topics": topics})
        err = error_of(body["error_code"], body["error_message"],
                       api="ListPartitionReassignments")
        if err is not None:
            raise err
        return dict(sorted(
            (TopicPartition(t["name"], p["partition_index"]), PartitionReassignment(
                tuple(p["replicas"]), tuple(p["adding_replicas"]),
                tuple(p["removing_replicas"])))
            for t in body["topics"] for p in t["partitions"]))


def _whole(value: Any, what: str) -> int:
    """``value``, an int (not a float, a string or a bool: a number out of range is
    the broker's to refuse, per resource)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{what} must be a whole number, not {value!r}")
    return value


def _unanswered(wanted: Iterable[Any], values: Mapping[Any, Any],
                errors: dict[Any, Exception], api: str) -> dict[Any, Exception]:
    """``errors``, and an error for each item the answer left out."""
    for item in wanted:
        if item not in values and item not in errors:
            errors[item] = ProtocolError(f"{api}: the answer says nothing of {item!r}")
    return errors
