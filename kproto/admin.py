"""Cluster administration: topics, cluster description, groups and their offsets.

>>> admin = Admin(bootstrap_servers="127.0.0.1:9092")                # doctest: +SKIP
>>> admin.create_topics({"events": 12})                              # doctest: +SKIP
>>> admin.list_groups(types=["consumer"], states=["Stable"])         # doctest: +SKIP
>>> admin.describe_groups(["etl"])[0].members                        # doctest: +SKIP
>>> admin.list_consumer_group_offsets("etl")                         # doctest: +SKIP
>>> admin.list_transactions(states=["Ongoing"])                      # doctest: +SKIP
>>> admin.describe_producers([("events", 0)])                        # doctest: +SKIP
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from .admin_acls import (
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AclsAdmin,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)
from .admin_base import Results, error_of, ids
from .admin_cluster import (
    ClusterAdmin,
    ClusterDescription,
    LogDirDescription,
    PartitionReassignment,
    ReplicaInfo,
)
from .admin_configs import AlterConfigOp, ConfigEntry, ConfigResource, ConfigsAdmin, ConfigSynonym
from .admin_groups import (
    ConsumerGroupDescription,
    ConsumerMemberDescription,
    GroupDescription,
    GroupListing,
    MemberDescription,
    ShareGroupDescription,
    ShareMemberDescription,
    classic_description,
    consumer_descriptions,
    group_types,
    listings,
    share_descriptions,
)
from .consumer.fetcher import list_offsets
from .errors import (
    ErrorCode,
    GroupIdNotFoundError,
    KprotoError,
    LeaderNotAvailableError,
    ProtocolError,
    UnsupportedVersionError,
    error_for_code,
)
from .net.blocking import BrokerConnection, Fields
from .protocol import ApiKey
from .protocol.requests import TRANSACTION, offset_fetch_fields
from .structs import EARLIEST, LATEST, OffsetAndMetadata, OffsetAndTimestamp, TopicPartition
from .structs import as_tp as _tp

__all__ = ["Admin", "GroupListing", "GroupDescription", "MemberDescription",
           "ConsumerGroupDescription", "ConsumerMemberDescription", "ShareGroupDescription",
           "ShareMemberDescription", "TransactionListing", "TransactionDescription",
           "ProducerState", "Results", "ConfigResource", "ConfigEntry", "ConfigSynonym",
           "AlterConfigOp", "ClusterDescription", "LogDirDescription", "ReplicaInfo",
           "PartitionReassignment", "ResourceType", "PatternType", "AclOperation",
           "AclPermissionType", "ResourcePattern", "AccessControlEntry", "AclBinding",
           "ResourcePatternFilter", "AccessControlEntryFilter", "AclBindingFilter",
           "PartitionLag"]

AnyGroupDescription = GroupDescription | ConsumerGroupDescription | ShareGroupDescription

_TOPIC_ALREADY_EXISTS = ErrorCode.TOPIC_ALREADY_EXISTS
T = TypeVar("T")


@dataclass(frozen=True)
class TransactionListing:
    """A transactional id as ListTransactions names it."""

    transactional_id: str
    producer_id: int
    #: Empty, Ongoing, PrepareCommit, PrepareAbort, CompleteCommit, CompleteAbort...
    state: str


@dataclass(frozen=True)
class TransactionDescription:
    """A transactional id as its coordinator describes it (DescribeTransactions)."""

    transactional_id: str
    state: str
    timeout_ms: int
    #: When the open transaction began (ms since the epoch), -1 if none is open.
    start_time_ms: int
    producer_id: int
    producer_epoch: int
    #: The partitions in the open transaction.
    partitions: frozenset[TopicPartition] = frozenset()


@dataclass(frozen=True)
class ProducerState:
    """A producer with state on a partition, as its leader sees it (DescribeProducers)."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int
    #: The first offset of the producer's open transaction on the partition, or -1:
    #: the partition's last stable offset stops there.
    current_txn_start_offset: int


@dataclass(frozen=True)
class PartitionLag:
    """A partition of a group (:meth:`Admin.consumer_group_lag`): the committed
    offset, the end offset (high watermark), the lag between them, and the member
    it is assigned to (None: no member has it). ``committed`` and ``lag`` are None
    for an assigned partition nobody committed; ``end`` and ``lag`` for a
    partition that no longer exists (its topic deleted, the offsets kept)."""

    committed: int | None
    end: int | None
    lag: int | None
    member: str | None = None


class Admin(ConfigsAdmin, AclsAdmin, ClusterAdmin):
    """Administrative operations on a cluster (Java's ``Admin`` names in snake_case).
    Settings as for the other clients (``bootstrap_servers``, security...). A call
    about several resources answers each on its own: a
    :class:`~kproto.admin_base.Results` (resource -> value, or its error raised
    on access)."""

    # -- topics

    def create_topics(self, topics: Mapping[str, int] | Iterable[str], *,
                      replication_factor: int = -1, configs: Mapping[str, str] | None = None,
                      timeout_ms: int = 30000, validate_only: bool = False,
                      exist_ok: bool = False) -> None:
        """Create topics (``{name: partitions}``, or names with the broker's default
        count) and wait until their partitions have leaders. ``replication_factor``
        -1 takes the broker default. Raises the first topic's error
        (TopicAlreadyExistsError unless ``exist_ok``)."""
        wanted = dict(topics) if isinstance(topics, Mapping) else {t: -1 for t in ids(topics)}
        body = self._controller_request(ApiKey.CREATE_TOPICS, {
            "topics": [{"name": name, "num_partitions": n,
                        "replication_factor": replication_factor, "assignments": [],
                        "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()]}
                       for name, n in wanted.items()],
            "timeout_ms": timeout_ms, "validate_only": validate_only})
        for t in body["topics"]:
            code = t["error_code"]
            if code == _TOPIC_ALREADY_EXISTS and exist_ok:
                continue
            cls = error_for_code(code)
            if cls is not None:
                raise cls(t.get("error_message"), topic=t["name"])
        if not validate_only:
            self._cluster.wait_for_topics(wanted, timeout_ms / 1000)

    def delete_topics(self, topics: Iterable[str], *, timeout_ms: int = 30000) -> None:
        """Delete topics; raises the first topic's error."""
        names = ids(topics)
        body = self._controller_request(ApiKey.DELETE_TOPICS, lambda v: {
            "timeout_ms": timeout_ms, **({"topics": [{"name": n} for n in names]} if v >= 6
                                        else {"topic_names": names})})
        for t in body["responses"]:
            cls = error_for_code(t["error_code"])
            if cls is not None:
                raise cls(t.get("error_message"), topic=t["name"])
        self._cluster.topics -= set(names)

    def list_topics(self, *, internal: bool = False) -> dict[str, Any]:
        """Every topic: name -> :class:`~kproto.net.cluster.TopicInfo`."""
        meta = self._cluster.refresh_metadata(all_topics=True)
        return {n: t for n, t in sorted(meta.topics.items()) if internal or not t.is_internal}

    # -- offsets

    def list_offsets(self, specs: Mapping[tuple[str, int], str | int]
                     ) -> dict[TopicPartition, OffsetAndTimestamp]:
        """``{(topic, partition): "earliest" | "latest" | timestamp_ms}`` ->
        (offset, timestamp); offset -1 when no record is that recent."""
        codes = {"earliest": EARLIEST, "latest": LATEST}
        wanted = {_tp(p): codes[s] if isinstance(s, str) else int(s) for p, s in specs.items()}
        found = list_offsets(self._cluster, self.config, wanted, auto_create=False)
        return {tp: OffsetAndTimestamp(o, ts) for tp, (o, ts) in found.items()}

    # -- groups

    def list_groups(self, *, types: Iterable[str] = (), states: Iterable[str] = ()
                    ) -> list[GroupListing]:
        """Every group on every broker (Java's ``listGroups``), or those of these
        ``types`` (classic, consumer, share, streams) in these ``states`` (Stable,
        Empty, ...: Kafka compares them case-insensitively). A broker answering
        ListGroups before v5 (no types; its groups are all classic) is filtered
        here; one before v4 cannot be asked for states: UnsupportedVersionError."""
        wanted_types, wanted_states = group_types(types), list(states)
        meta = self._cluster.maybe_refresh()

        def fields(version: int) -> dict[str, Any]:
            if wanted_states and version < 4:
                raise UnsupportedVersionError(
                    f"ListGroups v{version} (the broker's newest) cannot filter groups by "
                    "state: that needs v4+")
            return {"states_filter": wanted_states if version >= 4 else [],
                    "types_filter": wanted_types if version >= 5 else []}

        answers = self._cluster.send_many({n: [(ApiKey.LIST_GROUPS, fields)]
                                           for n in meta.brokers})
        out = []
        for node, result in sorted(answers.items()):
            if isinstance(result, Exception):
                raise result
            body = result[0].body
            cls = error_for_code(body["error_code"])
            if cls is not None:
                raise cls("ListGroups failed", node=node)
            out += listings(body, result[0].request.version, wanted_types, wanted_states)
        return sorted(out, key=lambda g: g.group_id)

    def describe_groups(self, group_ids: Iterable[str]) -> list[AnyGroupDescription]:
        """Groups of every type, each as its own API describes it: classic groups
        (DescribeGroups) as :class:`GroupDescription`, KIP-848 consumer groups
        (ConsumerGroupDescribe) as :class:`ConsumerGroupDescription`, share groups
        (ShareGroupDescribe) as :class:`ShareGroupDescription`; each has ``type``.
        A group no API knows comes back as DescribeGroups says (state Dead, or
        Empty from some brokers)."""
        return [self._with_coordinator(gid, functools.partial(self._describe_any, gid=gid))
                for gid in ids(group_ids)]

    def describe_classic_groups(self, group_ids: Iterable[str]) -> list[GroupDescription]:
        """Classic groups: state, protocol and members (with their decoded
        assignments), from DescribeGroups (Java's ``describeClassicGroups``)."""
        return [self._with_coordinator(gid, functools.partial(self._describe_classic, gid=gid))
                for gid in ids(group_ids)]

    def describe_consumer_groups(self, group_ids: Iterable[str]
                                 ) -> list[ConsumerGroupDescription | GroupDescription]:
        """Consumer groups of either protocol (Java's ``describeConsumerGroups``):
        KIP-848 groups from ConsumerGroupDescribe (members, member epochs,
        assignments and target assignments by topic name, the broker's
        assignor), classic ones from DescribeGroups. A share group raises
        GroupIdNotFoundError."""
        out: list[ConsumerGroupDescription | GroupDescription] = []
        for desc in self.describe_groups(group_ids):
            if isinstance(desc, ShareGroupDescription):
                raise GroupIdNotFoundError(f"group {desc.group_id!r} is a share group, not a "
                                           "consumer group", group=desc.group_id)
            out.append(desc)
        return out

    def describe_share_groups(self, group_ids: Iterable[str]) -> list[ShareGroupDescription]:
        """Share groups (KIP-932) from ShareGroupDescribe (Java's
        ``describeShareGroups``): members, epochs, assignments by topic name. A
        coordinator without ShareGroupDescribe raises UnsupportedVersionError
        naming it; a group that is not a share group, GroupIdNotFoundError."""
        out = []
        for gid in ids(group_ids):
            body = self._coordinator_request(gid, ApiKey.SHARE_GROUP_DESCRIBE, {
                "group_ids": [gid], "include_authorized_operations": False})
            out += share_descriptions(body, self._topic_names)
        return out

    def list_consumer_group_offsets(self, group_id: str,
                                    partitions: Iterable[tuple[str, int]] | None = None,
                                    *, metadata: bool = False) -> dict[TopicPartition, Any]:
        """The committed offsets of ``group_id`` (all of its partitions by default);
        with ``metadata``, :class:`~kproto.structs.OffsetAndMetadata` values (the
        metadata string a commit or a transaction stored with each offset)."""
        tps = None if partitions is None else [_tp(p) for p in partitions]
        topics: dict[str, list[int]] | None = None
        if tps is not None:
            topics = {}
            for tp in tps:
                topics.setdefault(tp.topic, []).append(tp.partition)
        req_topics = None if topics is None else [
            {"name": t, "partition_indexes": ps} for t, ps in topics.items()]
        body = self._coordinator_request(group_id, ApiKey.OFFSET_FETCH,
                                         offset_fetch_fields(group_id, req_topics))
        if body.get("groups"):
            group = body["groups"][0]
            code, answer = group["error_code"], group["topics"]
        else:
            code, answer = body.get("error_code", 0), body["topics"]
        cls = error_for_code(code)
        if cls is not None:
            raise cls("OffsetFetch failed", group=group_id)
        out: dict[TopicPartition, Any] = {}
        for t in answer:
            for p in t["partitions"]:
                if p["error_code"] == ErrorCode.NONE and p["committed_offset"] >= 0:
                    tp = TopicPartition(t["name"], p["partition_index"])
                    out[tp] = OffsetAndMetadata(p["committed_offset"], p["metadata"],
                                                p.get("committed_leader_epoch", -1)) \
                        if metadata else p["committed_offset"]
        return dict(sorted(out.items()))

    def alter_consumer_group_offsets(self, group_id: str,
                                     offsets: Mapping[Any, int | OffsetAndMetadata]) -> None:
        """Commit ``offsets`` (``{(topic, partition): next offset to read}``, or
        :class:`~kproto.structs.OffsetAndMetadata` values) for ``group_id`` from
        outside the group: an OffsetCommit without a generation, as Java's
        ``Admin.alterConsumerGroupOffsets``. A group with active members refuses
        it (UnknownMemberIdError); a partition's error is raised naming it."""
        topics: dict[str, list[dict[str, Any]]] = {}
        for tp, value in sorted(((_tp(k), v) for k, v in offsets.items()),
                                key=lambda kv: kv[0]):
            om = value if isinstance(value, OffsetAndMetadata) else OffsetAndMetadata(int(value))
            topics.setdefault(tp.topic, []).append({
                "partition_index": tp.partition, "committed_offset": om.offset,
                "committed_leader_epoch": om.leader_epoch, "commit_timestamp": -1,
                "committed_metadata": om.metadata or ""})
        if not topics:
            return
        body = self._coordinator_request(group_id, ApiKey.OFFSET_COMMIT, {
            "group_id": group_id, "generation_id_or_member_epoch": -1, "member_id": "",
            "group_instance_id": None, "retention_time_ms": -1,
            "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]})
        for t in body["topics"]:
            for p in t["partitions"]:
                cls = error_for_code(p["error_code"])
                if cls is not None:
                    raise cls("OffsetCommit failed", group=group_id, topic=t["name"],
                              partition=p["partition_index"])

    def delete_consumer_groups(self, group_ids: Iterable[str]) -> Results[str, None]:
        """Delete groups with no members, and their committed offsets (Java's
        ``deleteConsumerGroups``); each group succeeds or fails on its own
        (GroupNotEmptyError, GroupIdNotFoundError...)."""
        values: dict[str, None] = {}
        errors: dict[str, Exception] = {}
        for gid in dict.fromkeys(ids(group_ids)):
            try:
                body = self._coordinator_request(gid, ApiKey.DELETE_GROUPS,
                                                 {"groups_names": [gid]})
                [r] = [r for r in body["results"] if r["group_id"] == gid] or [None]
                if r is None:
                    raise ProtocolError(f"DeleteGroups: the answer says nothing of {gid!r}")
                err = error_of(r["error_code"], group=gid)
                if err is not None:
                    raise err
                values[gid] = None
            except KprotoError as exc:
                errors[gid] = exc
        return Results(values, errors)

    def delete_consumer_group_offsets(self, group_id: str, partitions: Iterable[Any]
                                      ) -> Results[TopicPartition, None]:
        """Delete ``group_id``'s committed offsets of ``partitions`` (OffsetDelete,
        Java's ``deleteConsumerGroupOffsets``); per partition None or its error (a
        partition the group is subscribed to: GroupSubscribedToTopicError). An
        error of the whole group is every partition's."""
        tps = list(dict.fromkeys(_tp(p) for p in partitions))
        topics: dict[str, list[dict[str, int]]] = {}
        for tp in tps:
            topics.setdefault(tp.topic, []).append({"partition_index": tp.partition})
        try:
            body = self._coordinator_request(group_id, ApiKey.OFFSET_DELETE, {
                "group_id": group_id,
                "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]})
            err = error_of(body["error_code"], group=group_id)
            if err is not None:
                raise err
        except KprotoError as exc:
            return Results({}, dict.fromkeys(tps, exc))
        values: dict[TopicPartition, None] = {}
        errors: dict[TopicPartition, Exception] = {}
        for t in body["topics"]:
            for p in t["partitions"]:
                tp = TopicPartition(t["name"], p["partition_index"])
                err = error_of(p["error_code"], group=group_id, topic=tp.topic,
                               partition=tp.partition)
                if err is None:
                    values[tp] = None
                else:
                    errors[tp] = err
        for tp in tps:
            if tp not in values and tp not in errors:
                errors[tp] = ProtocolError(f"OffsetDelete: the answer says nothing of {tp}")
        return Results(values, errors)

    def consumer_group_lag(self, group_id: str) -> dict[TopicPartition, PartitionLag]:
        """Per partition the group committed or a member is assigned: committed
        offset, end offset (high watermark, ListOffsets), lag, and the member it is
        assigned to (from describe_groups; None where the coordinator cannot
        describe the group). As Java's kafka-consumer-groups.sh shows ``-``: an
        assigned partition nobody committed has ``committed`` and ``lag`` None; a
        partition whose topic is gone has ``end`` and ``lag`` None - the others'
        lag is still given."""
        committed: dict[TopicPartition, int | None] = dict(
            self.list_consumer_group_offsets(group_id))
        owner: dict[TopicPartition, str] = {}
        try:
            [desc] = self.describe_groups([group_id])
            owner = {tp: m.member_id for m in desc.members for tp in m.assignment}
        except (UnsupportedVersionError, GroupIdNotFoundError):
            pass    # (librdkafka's mock describes no group: lag without members)
        for tp in sorted(owner):
            committed.setdefault(tp, None)
        if not committed:
            return {}
        meta = self._cluster.refresh_metadata(sorted({tp.topic for tp in committed}),
                                             auto_create=False)
        live = [tp for tp in committed if tp.partition in meta.partitions(tp.topic)]
        found = self.list_offsets(dict.fromkeys(live, "latest")) if live else {}
        ends = {tp: found[tp].offset for tp in live}
        return {tp: PartitionLag(off, ends.get(tp),
                                 None if tp not in ends or off is None
                                 else max(0, ends[tp] - off),
                                 owner.get(tp)) for tp, off in committed.items()}

    # -- transactions

    def list_transactions(self, *, states: Iterable[str] = (),
                          producer_ids: Iterable[int] = (), duration_ms: int = -1,
                          pattern: str | None = None) -> list[TransactionListing]:
        """Every transactional id on every broker (ListTransactions, KIP-664), or those
        in ``states``, of ``producer_ids``, open longer than ``duration_ms`` (v1+),
        matching the regular expression ``pattern`` (v2+)."""
        meta = self._cluster.maybe_refresh()
        fields = {"state_filters": list(states), "producer_id_filters": list(producer_ids),
                  "duration_filter": duration_ms, "transactional_id_pattern": pattern}
        answers = self._cluster.send_many({n: [(ApiKey.LIST_TRANSACTIONS, fields)]
                                           for n in meta.brokers})
        out = []
        for node, result in sorted(answers.items()):
            if isinstance(result, Exception):
                raise result
            body = result[0].body
            cls = error_for_code(body["error_code"])
            if cls is not None:
                raise cls("ListTransactions failed", node=node)
            out += [TransactionListing(t["transactional_id"], t["producer_id"],
                                       t["transaction_state"])
                    for t in body["transaction_states"]]
        return sorted(out, key=lambda t: t.transactional_id)

    def describe_transactions(self, transactional_ids: Iterable[str]
                              ) -> list[TransactionDescription]:
        """State, producer id and epoch, timeout and open partitions of each
        transactional id, from its coordinator (DescribeTransactions)."""
        out = []
        for tid in ids(transactional_ids):
            body = self._coordinator_request(tid, ApiKey.DESCRIBE_TRANSACTIONS,
                                             {"transactional_ids": [tid]}, TRANSACTION)
            for t in body["transaction_states"]:
                cls = error_for_code(t["error_code"])
                if cls is not None:
                    raise cls("DescribeTransactions failed", transactional_id=tid)
                out.append(TransactionDescription(
                    t["transactional_id"], t["transaction_state"], t["transaction_timeout_ms"],
                    t["transaction_start_time_ms"], t["producer_id"], t["producer_epoch"],
                    frozenset(TopicPartition(x["topic"], p) for x in t["topics"]
                              for p in x["partitions"])))
        return out

    def describe_producers(self, partitions: Iterable[tuple[str, int]]
                           ) -> dict[TopicPartition, list[ProducerState]]:
        """The producers with state on each partition, from its leader
        (DescribeProducers): ids, epochs, last sequences, open transactions."""
        tps = sorted({_tp(p) for p in partitions})
        self._cluster.wait_for_topics({tp.topic for tp in tps}, self._cluster.request_timeout,
                                      auto_create=False)
        by_leader, orphans = self._cluster.leaders(tps)
        if orphans:
            raise LeaderNotAvailableError(topic=orphans[0][0], partition=orphans[0][1])
        requests: dict[int, list[tuple[int, Fields]]] = {}
        for node, owned in by_leader.items():
            topics: dict[str, list[int]] = {}
            for t, p in owned:
                topics.setdefault(t, []).append(p)
            requests[node] = [(ApiKey.DESCRIBE_PRODUCERS, {"topics": [
                {"name": t, "partition_indexes": ps} for t, ps in topics.items()]})]
        out: dict[TopicPartition, list[ProducerState]] = {}
        for node, result in sorted(self._cluster.send_many(requests).items()):
            if isinstance(result, Exception):
                raise result
            for t in result[0].body["topics"]:
                for p in t["partitions"]:
                    cls = error_for_code(p["error_code"])
                    if cls is not None:
                        raise cls(p.get("error_message"), topic=t["name"],
                                  partition=p["partition_index"], node=node)
                    out[TopicPartition(t["name"], p["partition_index"])] = [ProducerState(
                        a["producer_id"], a["producer_epoch"], a["last_sequence"],
                        a["last_timestamp"], a["coordinator_epoch"],
                        a["current_txn_start_offset"]) for a in p["active_producers"]]
        return dict(sorted(out.items()))

    # -- plumbing

    def _describe_classic(self, conn: BrokerConnection, gid: str) -> GroupDescription:
        [g] = conn.request(ApiKey.DESCRIBE_GROUPS, {
            "groups": [gid], "include_authorized_operations": False})["groups"]
        cls = error_for_code(g["error_code"])
        if cls is not None:
            raise cls(g.get("error_message"), group=gid)
        return classic_description(g)

    def _describe_any(self, conn: BrokerConnection, gid: str) -> AnyGroupDescription:
        """DescribeGroups first (every broker but librdkafka's mock has it); a group it
        does not know as a classic one (GROUP_ID_NOT_FOUND from Kafka 4's v6, Dead
        before, Empty with no protocol from some brokers) is asked for with
        ConsumerGroupDescribe, then ShareGroupDescribe, where the coordinator has them."""
        classic: GroupDescription | None = None
        conn.connect()  # negotiates: which of the three the coordinator has
        if ApiKey.DESCRIBE_GROUPS in conn.versions:
            try:
                classic = self._describe_classic(conn, gid)
            except GroupIdNotFoundError:
                classic = None
            if classic is not None and not (classic.state in ("Dead", "Empty")
                                            and not classic.protocol_type):
                return classic
        for api_key, parse in ((ApiKey.CONSUMER_GROUP_DESCRIBE, consumer_descriptions),
                               (ApiKey.SHARE_GROUP_DESCRIBE, share_descriptions)):
            if api_key not in conn.versions:
                continue
            body = conn.request(api_key, {"group_ids": [gid],
                                          "include_authorized_operations": False})
            [g] = body["groups"]
            if g["error_code"] == ErrorCode.GROUP_ID_NOT_FOUND:
                continue
            [desc] = parse(body, self._topic_names)
            # an empty answer where DescribeGroups had one too: nothing there
            if classic is None or desc.members or desc.state not in ("Empty", "Dead"):
                return desc
        if classic is not None:
            return classic
        if ApiKey.DESCRIBE_GROUPS not in conn.versions and not any(
                k in conn.versions for k in (ApiKey.CONSUMER_GROUP_DESCRIBE,
                                             ApiKey.SHARE_GROUP_DESCRIBE)):
            raise UnsupportedVersionError(
                f"the coordinator of group {gid!r} speaks none of DescribeGroups, "
                "ConsumerGroupDescribe, ShareGroupDescribe")
        raise GroupIdNotFoundError(f"group {gid!r} does not exist", group=gid)

    def _topic_names(self, ids: set[Any]) -> dict[Any, str]:
        """Names of topic ids (a group describe answer without them), from Metadata."""
        meta = self._cluster.refresh_metadata(all_topics=True)
        return {t.topic_id: name for name, t in meta.topics.items() if t.topic_id in ids}
