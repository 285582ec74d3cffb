"""librdkafka's mock cluster, hosted inside this process (see :mod:`kproto.testing`).
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from ._process import _live, _live_lock, probe_api_versions

# --------------------------------------------------------------------------- librdkafka mock


class MockCluster:
    """librdkafka's mock cluster: ``num_brokers`` brokers on 127.0.0.1, in this process.

    A ``confluent_kafka.Producer`` created with ``test.mock.num.brokers`` hosts
    the cluster in its background threads; the cluster lives exactly as long
    as that client, so it is kept open until ``stop()``.

    >>> with MockCluster(3) as cluster:        # doctest: +SKIP
    ...     cluster.bootstrap                  # '127.0.0.1:p1,127.0.0.1:p2,127.0.0.1:p3'
    ...     cluster.brokers                    # [(1, '127.0.0.1', p1), (2, ...), (3, ...)]

    ``config`` adds librdkafka properties for the hosting client, e.g.
    ``{'log_level': 7}`` to see its notices (the default, 4, hides them).
    """

    def __init__(
        self,
        num_brokers: int = 3,
        *,
        startup_timeout: float = 10.0,
        config: dict[str, Any] | None = None,
    ) -> None:
        if num_brokers < 1:
            raise ValueError("num_brokers must be >= 1")
        self.num_brokers = num_brokers
        self.startup_timeout = startup_timeout
        self.config = dict(config or {})
        self._client: Any = None
        self._brokers: list[tuple[int, str, int]] = []
        self.cluster_id: str | None = None
        self._lock = threading.RLock()

    @property
    def brokers(self) -> list[tuple[int, str, int]]:
        """``[(node_id, host, port), ...]`` sorted by node id."""
        if not self._brokers:
            raise RuntimeError("MockCluster has not been started")
        return list(self._brokers)

    @property
    def bootstrap(self) -> str:
        """Comma-separated ``host:port`` of every broker, for ``bootstrap.servers``."""
        return ",".join(f"{host}:{port}" for _, host, port in self.brokers)

    @property
    def client(self) -> Any:
        """The ``confluent_kafka.Producer`` hosting the cluster (None when stopped)."""
        return self._client

    @property
    def running(self) -> bool:
        return self._client is not None

    def __repr__(self) -> str:
        where = self.bootstrap if self._brokers else "unstarted"
        return f"<MockCluster {where} {'running' if self.running else 'stopped'}>"

    def __enter__(self) -> MockCluster:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def start(self) -> MockCluster:
        """Create the hosting client and wait for every broker to answer; returns ``self``."""
        with self._lock:
            if self._client is not None:
                return self
            try:
                from confluent_kafka import KafkaException, Producer
            except ImportError as exc:
                raise RuntimeError(
                    "MockCluster needs the 'confluent-kafka' package (librdkafka's mock "
                    "cluster): pip install -e '.[test]' (or pip install confluent-kafka)"
                ) from exc
            # bootstrap.servers is ignored (and may be omitted) once the mock is enabled.
            conf = {"test.mock.num.brokers": self.num_brokers, "log_level": 4, **self.config}
            self._client = Producer(conf)
            try:
                deadline = time.monotonic() + self.startup_timeout
                last_error: BaseException | None = None
                while True:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        raise RuntimeError(
                            f"librdkafka mock cluster did not report {self.num_brokers} brokers "
                            f"within {self.startup_timeout:g} s (last error: {last_error!r})"
                        )
                    try:
                        metadata = self._client.list_topics(timeout=min(remaining, 2.0))
                    except KafkaException as exc:
                        last_error = exc
                        continue
                    if len(metadata.brokers) >= self.num_brokers:
                        break
                    time.sleep(0.01)
                self._brokers = sorted((b.id, b.host, b.port) for b in metadata.brokers.values())
                self.cluster_id = metadata.cluster_id
                for _, host, port in self._brokers:
                    probe_api_versions(host, port, timeout=max(deadline - time.monotonic(), 1.0))
            except BaseException:
                self._close_client()
                raise
            with _live_lock:
                _live.add(self)
            return self

    def create_topic(self, name: str, partitions: int, replication_factor: int = 1) -> None:
        """Create a topic of ``partitions`` partitions (the mock has no CreateTopics;
        auto-creation makes 4): librdkafka's ``rd_kafka_mock_topic_create``, called
        through ctypes on the hosting client. ``RuntimeError`` with the broker's
        error code if it refuses (36: the topic exists)."""
        import ctypes

        with self._lock:
            lib, mock = self._mock_api()
            lib.rd_kafka_mock_topic_create.argtypes = [ctypes.c_void_p, ctypes.c_char_p,
                                                       ctypes.c_int, ctypes.c_int]
            err = lib.rd_kafka_mock_topic_create(mock, name.encode(), partitions,
                                                 replication_factor)
            if err:
                raise RuntimeError(f"the mock cluster refused to create {name!r}: error {err}")

    def set_leader(self, topic: str, partition: int, node_id: int) -> None:
        """Make broker ``node_id`` the leader of ``topic``'s ``partition``
        (``rd_kafka_mock_partition_set_leader``; the mock picks leaders at random)."""
        import ctypes

        with self._lock:
            lib, mock = self._mock_api()
            lib.rd_kafka_mock_partition_set_leader.argtypes = [
                ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int32, ctypes.c_int32]
            err = lib.rd_kafka_mock_partition_set_leader(mock, topic.encode(), partition,
                                                         node_id)
            if err:
                raise RuntimeError(f"the mock cluster refused the leader: error {err}")

    def push_request_errors(self, api_key: int, *codes: int) -> None:
        """Answer the next ``len(codes)`` requests of ``api_key`` (to any broker) with
        these error codes, in order (``rd_kafka_mock_push_request_errors``); 0 lets
        one through. E.g. ``push_request_errors(26, 51, 51)``: the next two EndTxn
        get CONCURRENT_TRANSACTIONS."""
        import ctypes

        with self._lock:
            lib, mock = self._mock_api()
            lib.rd_kafka_mock_push_request_errors_array.argtypes = [
                ctypes.c_void_p, ctypes.c_int16, ctypes.c_size_t, ctypes.POINTER(ctypes.c_int)]
            errors = (ctypes.c_int * len(codes))(*codes)
            lib.rd_kafka_mock_push_request_errors_array(mock, api_key, len(codes), errors)

    def push_partition_errors(self, topic: str, partition: int, api_key: int,
                              *codes: int) -> None:
        """Answer ``topic``'s ``partition`` in the next ``len(codes)`` requests of
        ``api_key`` with these error codes, in order, in the partition's own error
        field (``rd_kafka_mock_partition_push_request_errors``; the request's other
        partitions are answered as usual)."""
        import ctypes

        with self._lock:
            lib, mock = self._mock_api()
            fn = lib.rd_kafka_mock_partition_push_request_errors
            fn.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int32, ctypes.c_int16,
                           ctypes.c_size_t]
            err = fn(mock, topic.encode(), partition, api_key, len(codes),
                     *(ctypes.c_int(c) for c in codes))
            if err:
                raise RuntimeError(f"the mock cluster refused the errors: error {err}")

    def clear_request_errors(self, api_key: int) -> None:
        """Drop the errors pushed for ``api_key`` that were not used yet."""
        import ctypes

        with self._lock:
            lib, mock = self._mock_api()
            lib.rd_kafka_mock_clear_request_errors.argtypes = [ctypes.c_void_p, ctypes.c_int16]
            lib.rd_kafka_mock_clear_request_errors(mock, api_key)

    def set_coordinator(self, key_type: str, key: str, node_id: int) -> None:
        """Make broker ``node_id`` the coordinator of ``key`` (``key_type``
        "transaction" or "group"): the old one answers NOT_COORDINATOR from then on."""
        import ctypes

        with self._lock:
            lib, mock = self._mock_api()
            lib.rd_kafka_mock_coordinator_set.argtypes = [ctypes.c_void_p, ctypes.c_char_p,
                                                          ctypes.c_char_p, ctypes.c_int32]
            err = lib.rd_kafka_mock_coordinator_set(mock, key_type.encode(), key.encode(),
                                                    node_id)
            if err:
                raise RuntimeError(f"the mock cluster refused the coordinator: error {err}")

    def set_telemetry(self, requested_metrics: list[str], push_interval_ms: int) -> None:
        """KIP-714: the metric name prefixes GetTelemetrySubscriptions answers with (``[]``:
        none) and its push interval (``rd_kafka_mock_telemetry_set_requested_metrics`` /
        ``_set_push_interval``)."""
        import ctypes

        with self._lock:
            lib, mock = self._mock_api()
            fn = lib.rd_kafka_mock_telemetry_set_requested_metrics
            fn.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_char_p), ctypes.c_size_t]
            names = (ctypes.c_char_p * max(1, len(requested_metrics)))(
                *[m.encode() for m in requested_metrics])
            fn(mock, names, len(requested_metrics))
            fn = lib.rd_kafka_mock_telemetry_set_push_interval
            fn.argtypes = [ctypes.c_void_p, ctypes.c_int64]
            fn(mock, push_interval_ms)

    def set_group_consumer_timeouts(self, session_timeout_ms: int,
                                    heartbeat_interval_ms: int) -> None:
        """KIP-848 consumer groups: the session timeout and heartbeat interval the
        mock gives its members (``rd_kafka_mock_set_group_consumer_session_timeout_ms``
        / ``_heartbeat_interval_ms``)."""
        import ctypes

        with self._lock:
            lib, mock = self._mock_api()
            for name, value in (("session_timeout_ms", session_timeout_ms),
                                ("heartbeat_interval_ms", heartbeat_interval_ms)):
                fn = getattr(lib, f"rd_kafka_mock_set_group_consumer_{name}")
                fn.argtypes = [ctypes.c_void_p, ctypes.c_int]
                fn.restype = None
                fn(mock, value)

    def start_request_tracking(self) -> None:
        """Record every request the brokers get from now on (see :meth:`requests`)."""
        import ctypes

        with self._lock:
            lib, mock = self._mock_api()
            lib.rd_kafka_mock_start_request_tracking.argtypes = [ctypes.c_void_p]
            lib.rd_kafka_mock_start_request_tracking(mock)

    def requests(self) -> list[tuple[int, int, float]]:
        """The requests recorded since :meth:`start_request_tracking`, oldest first:
        ``(broker id, api key, seconds on the mock's monotonic clock)``."""
        import ctypes

        with self._lock:
            lib, mock = self._mock_api()
            lib.rd_kafka_mock_get_requests.restype = ctypes.POINTER(ctypes.c_void_p)
            lib.rd_kafka_mock_get_requests.argtypes = [ctypes.c_void_p,
                                                       ctypes.POINTER(ctypes.c_size_t)]
            for name, res in (("id", ctypes.c_int32), ("api_key", ctypes.c_int16),
                              ("timestamp", ctypes.c_int64)):
                fn = getattr(lib, f"rd_kafka_mock_request_{name}")
                fn.restype, fn.argtypes = res, [ctypes.c_void_p]
            lib.rd_kafka_mock_request_destroy_array.argtypes = [
                ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
            n = ctypes.c_size_t()
            reqs = lib.rd_kafka_mock_get_requests(mock, ctypes.byref(n))
            out = [(lib.rd_kafka_mock_request_id(reqs[i]),
                    lib.rd_kafka_mock_request_api_key(reqs[i]),
                    lib.rd_kafka_mock_request_timestamp(reqs[i]) / 1e6) for i in range(n.value)]
            if n.value:
                lib.rd_kafka_mock_request_destroy_array(reqs, n.value)
            return out

    def set_share_groups(self, *, auto_offset_reset: str | None = None,
                         record_lock_duration_ms: int | None = None,
                         max_delivery_attempts: int | None = None,
                         session_timeout_ms: int | None = None,
                         heartbeat_interval_ms: int | None = None) -> None:
        """Share group settings of the mock (KIP-932 group configs; every share group,
        existing and new): ``share.auto.offset.reset`` ("earliest"/"latest", the
        mock's default latest), the acquisition lock duration (default 30 s; the
        mock expires locks on a 1 s timer), the delivery limit (default 5), the
        member session timeout and heartbeat interval."""
        import ctypes

        calls = [("auto_offset_reset", None if auto_offset_reset is None
                  else {"latest": 0, "earliest": 1}[auto_offset_reset]),
                 ("record_lock_duration", record_lock_duration_ms),
                 ("max_delivery_attempts", max_delivery_attempts),
                 ("session_timeout", session_timeout_ms),
                 ("heartbeat_interval", heartbeat_interval_ms)]
        with self._lock:
            lib, mock = self._mock_api()
            for name, value in calls:
                if value is None:
                    continue
                fn = getattr(lib, f"rd_kafka_mock_sharegroup_set_{name}")
                fn.argtypes = [ctypes.c_void_p, ctypes.c_int]
                fn.restype = None
                fn(mock, int(value))

    def set_share_assignment(self, group: str,
                             assignment: dict[str, list[tuple[str, int]]]) -> None:
        """Assign share group ``group``'s members by hand: ``{member id: [(topic,
        partition), ...]}`` (``rd_kafka_mock_sharegroup_target_assignment``). The
        mock's own assignor gives each partition to one member only (a real
        broker's gives every member every partition when there are more members
        than partitions); this is how several members share one partition."""
        import ctypes

        with self._lock:
            lib, mock = self._mock_api()
            lib.rd_kafka_topic_partition_list_new.restype = ctypes.c_void_p
            lib.rd_kafka_topic_partition_list_new.argtypes = [ctypes.c_int]
            lib.rd_kafka_topic_partition_list_add.restype = ctypes.c_void_p
            lib.rd_kafka_topic_partition_list_add.argtypes = [ctypes.c_void_p, ctypes.c_char_p,
                                                              ctypes.c_int32]
            lib.rd_kafka_topic_partition_list_destroy.argtypes = [ctypes.c_void_p]
            members = list(assignment)
            lists = []
            for m in members:
                tpl = lib.rd_kafka_topic_partition_list_new(len(assignment[m]) or 1)
                for topic, partition in assignment[m]:
                    lib.rd_kafka_topic_partition_list_add(tpl, topic.encode(), partition)
                lists.append(tpl)
            ids = (ctypes.c_char_p * len(members))(*[m.encode() for m in members])
            tpls = (ctypes.c_void_p * len(members))(*lists)
            fn = lib.rd_kafka_mock_sharegroup_target_assignment
            fn.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_char_p),
                           ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
            fn.restype = None
            try:
                fn(mock, group.encode(), ids, tpls, len(members))
            finally:
                for tpl in lists:
                    lib.rd_kafka_topic_partition_list_destroy(tpl)

    def share_group_members(self, group: str) -> list[str]:
        """The member ids of share group ``group`` on the mock (none if no such group)."""
        import ctypes

        with self._lock:
            lib, mock = self._mock_api()
            fn = lib.rd_kafka_mock_sharegroup_get_member_ids
            fn.argtypes = [ctypes.c_void_p, ctypes.c_char_p,
                           ctypes.POINTER(ctypes.POINTER(ctypes.c_char_p)),
                           ctypes.POINTER(ctypes.c_size_t)]
            ids, n = ctypes.POINTER(ctypes.c_char_p)(), ctypes.c_size_t()
            if fn(mock, group.encode(), ctypes.byref(ids), ctypes.byref(n)) or not n.value:
                return []
            # (the C strings and array are librdkafka's malloc'd copies, left to leak:
            # a few bytes per call of a test helper)
            return [ids[i].decode() for i in range(n.value)]

    def _mock_api(self) -> tuple[Any, Any]:
        """librdkafka (ctypes) and the hosting client's ``rd_kafka_mock_cluster_t *``."""
        import ctypes

        import confluent_kafka

        if self._client is None:
            raise RuntimeError("MockCluster has not been started")
        libs = Path(confluent_kafka.__file__).parent.parent / "confluent_kafka.libs"
        lib = ctypes.CDLL(str(next(libs.glob("librdkafka*"), "librdkafka.so.1")))
        lib.rd_kafka_handle_mock_cluster.restype = ctypes.c_void_p
        lib.rd_kafka_handle_mock_cluster.argtypes = [ctypes.c_void_p]
        lib.rd_kafka_mock_cluster_bootstraps.restype = ctypes.c_char_p
        lib.rd_kafka_mock_cluster_bootstraps.argtypes = [ctypes.c_void_p]
        # confluent-kafka's Handle object: PyObject_HEAD, then the rd_kafka_t pointer
        rk = ctypes.c_void_p.from_address(id(self._client) + object.__basicsize__).value
        mock = lib.rd_kafka_handle_mock_cluster(rk) if rk else None
        if not mock or lib.rd_kafka_mock_cluster_bootstraps(mock).decode() != self.bootstrap:
            raise RuntimeError("cannot reach librdkafka's mock cluster API through "
                               "this confluent-kafka build")
        return lib, mock

    def stop(self) -> None:
        """Close the hosting client; the mock brokers' ports close with it."""
        with self._lock:
            try:
                self._close_client()
            finally:
                with _live_lock:
                    _live.discard(self)

    def _close_client(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            close = getattr(client, "close", None)  # Producer.close() is new in confluent-kafka 2.x
            if close is not None:
                close()
            del client
