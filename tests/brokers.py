"""The broker matrix: one small interface over the suite's three test brokers.

``tests/conftest.py``'s ``broker`` fixture is parametrized over ``tansu``,
``mock`` and ``noida`` and gives each test a :class:`BrokerUnderTest`: the
bootstrap address, ``create_topic(name, partitions)`` (CreateTopics where the
broker has it, librdkafka's mock API on the mock), capability flags, the
broker's minimum session timeout, and :meth:`BrokerUnderTest.proxied`, the
same cluster reached only through :class:`kproto.testing.FaultProxy` s.

A test that cannot run on some broker says so, and why::

    @pytest.mark.brokers("tansu", "noida", reason="the mock has no DescribeGroups")
    def test_x(broker): ...

    @pytest.mark.brokers(needs=("groups",))          # reason: from CAPABILITIES
    def test_y(broker): ...

and is skipped on the others with that reason. docs/brokers.md has the table
of how the brokers differ from Kafka (and from each other).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest

from kproto.testing import FaultProxy, proxy_cluster

NAMES = ("tansu", "mock", "noida")
FIXTURES = {"tansu": "tansu", "mock": "mock_cluster", "noida": "noida"}

# capability -> why a broker lacking it cannot run a test that needs it
CAPABILITIES = {
    "create_topics": "has no CreateTopics/DeleteTopics (topics are auto-created)",
    "groups": "cannot host kproto's consumer groups (JoinGroup: advertises v6, reads v5)",
    "admin_groups": "has no ListGroups/DescribeGroups/DeleteGroups",
    "transactions": "has no real transactions",
    "enforces_sequences": "does not check idempotent producer sequences",
    "timestamps_lookup": "does not answer ListOffsets by timestamp as Kafka does",
    "create_time": "answers Produce with log_append_time 1234 (a topic in LogAppendTime)",
    "byte_limits": "does not bound a Fetch answer by max_bytes/partition_max_bytes",
    "single_node": "is not a single node (one FaultProxy fronts one node)",
}


class BrokerUnderTest:
    """One of the test brokers, as a test sees it (see the module docstring)."""

    def __init__(self, name: str, process: Any) -> None:
        self.name = name
        self.process = process
        mock, tansu, noida = name == "mock", name == "tansu", name == "noida"
        self.create_topics = not mock
        self.groups = not mock
        self.admin_groups = not mock
        self.transactions = noida
        self.enforces_sequences = not mock
        self.timestamps_lookup = not tansu
        self.create_time = not mock
        self.byte_limits = mock
        self.single_node = not mock
        self.proxyable = True                # every one of them, with port_map proxies
        self.auto_partitions = 1 if noida else 4
        self.min_session_timeout_ms = 6000 if noida else 0

    def __repr__(self) -> str:
        return f"<BrokerUnderTest {self.name} {self.bootstrap}>"

    @property
    def bootstrap(self) -> str:
        return self.process.bootstrap

    @property
    def addresses(self) -> list[tuple[str, int]]:
        """``(host, port)`` of every node."""
        if self.name == "mock":
            return [(host, port) for _, host, port in self.process.brokers]
        return [(self.process.host, self.process.port)]

    @property
    def node_ids(self) -> list[int]:
        """The node ids Metadata names: Tansu's is always 111, noida-db's 1, the
        mock's 1..N (as confluent-kafka's metadata reported them at start)."""
        if self.name == "mock":
            return [node for node, _, _ in self.process.brokers]
        return [111] if self.name == "tansu" else [1]

    def session_timeout_ms(self, wanted: int) -> int:
        """``wanted``, raised to the broker's minimum (noida-db: Kafka's 6000 ms)."""
        return max(wanted, self.min_session_timeout_ms)

    def create_topic(self, name: str, partitions: int) -> str:
        """Create ``name`` with ``partitions`` partitions; returns ``name``."""
        if self.name == "mock":
            self.process.create_topic(name, partitions)
        else:
            from kproto import Admin

            # noida-db applies retention.ms (7 days) to record timestamps within ~1 s
            # (Kafka: every 5 min): the suite's fixed, old timestamps would vanish
            configs = {"retention.ms": "-1"} if self.name == "noida" else None
            with Admin(bootstrap_servers=self.bootstrap) as admin:
                admin.create_topics({name: partitions}, configs=configs)
        return name

    @contextlib.contextmanager
    def proxied(self) -> Iterator[Proxied]:
        """The cluster reached only through fault proxies, one per node (each
        rewrites the ports in Metadata/FindCoordinator answers; ``answer_hook``
        works); stopped when the block ends."""
        nodes = [(0, host, port) for host, port in self.addresses]
        proxies = proxy_cluster(nodes)
        try:
            yield Proxied(self, proxies)
        finally:
            for p in proxies:
                p.stop()


class Proxied:
    """A :class:`BrokerUnderTest` behind fault proxies: ``bootstrap`` names the
    proxies; ``proxy`` is the only one (single-node brokers), ``proxies`` all."""

    def __init__(self, broker: BrokerUnderTest, proxies: list[FaultProxy]) -> None:
        self.broker, self.proxies = broker, proxies
        self.name = broker.name

    @property
    def bootstrap(self) -> str:
        return ",".join(p.address for p in self.proxies)

    @property
    def proxy(self) -> FaultProxy:
        if len(self.proxies) != 1:
            raise AssertionError(f"{self.name} has {len(self.proxies)} nodes: use .proxies")
        return self.proxies[0]


def skip_unless_allowed(request: pytest.FixtureRequest, broker: BrokerUnderTest) -> None:
    """Skip the test on ``broker`` if its ``brokers`` marker leaves that broker out."""
    for marker in request.node.iter_markers("brokers"):
        names = marker.args or NAMES
        unknown = set(names) - set(NAMES)
        if unknown:
            raise pytest.UsageError(f"brokers marker: unknown broker(s) {sorted(unknown)}")
        if broker.name not in names:
            reason = marker.kwargs.get("reason")
            if not reason:
                raise pytest.UsageError("a brokers marker that leaves a broker out needs a "
                                        "reason=")
            pytest.skip(f"not on {broker.name}: {reason}")
        for need in marker.kwargs.get("needs", ()):
            if need not in CAPABILITIES:
                raise pytest.UsageError(f"brokers marker: unknown capability {need!r}")
            if not getattr(broker, need):
                why = marker.kwargs.get("reason") or CAPABILITIES[need]
                pytest.skip(f"not on {broker.name}: it {why}" if not marker.kwargs.get("reason")
                            else f"not on {broker.name}: {why}")
