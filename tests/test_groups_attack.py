"""Hostile use of consumer groups (the KIP-848 consumer protocol, admin of groups)
against librdkafka's mock cluster."""

from __future__ import annotations

import re
import time
import uuid

import pytest

from kproto import Consumer
from kproto.errors import ConfigError, ErrorCode, InvalidRegularExpressionError
from kproto.structs import TopicPartition

pytestmark = pytest.mark.broker


# Valid RE2J that Python's re rejects (\p{Lu}, \Q...\E): with group_protocol="consumer"
# the pattern goes to the broker as written (the broker resolves it), never through re.
@pytest.mark.parametrize("pattern", [r"\p{Lu}[a-z]+-events", r"\Qorders.v1\E.*"])
def test_an_re2j_pattern_python_rejects_is_sent_to_the_broker(mock_cluster, pattern) -> None:
    c = Consumer(bootstrap_servers=mock_cluster.bootstrap, group_id="g-re2j",
                 group_protocol="consumer")
    try:
        c.subscribe(pattern=pattern)
        assert c._group.state.regex == pattern      # as written, for the broker
    finally:
        c.close()


def test_a_bad_classic_pattern_is_a_config_error(mock_cluster) -> None:
    c = Consumer(bootstrap_servers=mock_cluster.bootstrap, group_id="g-bad-pattern")
    try:
        with pytest.raises(ConfigError, match=r"pattern.*\(unclosed"):
            c.subscribe(pattern="(unclosed")
    finally:
        c.close()


@pytest.mark.brokers(needs=("groups",))
def test_a_classic_pattern_is_matched_with_python_re(broker) -> None:
    """The other side of the above: a pattern Python compiles is matched (fullmatch)
    against the cluster's topics by the classic member."""
    prefix = f"px{uuid.uuid4().hex[:6]}"
    for name in ("a", "b", "ab"):
        broker.create_topic(f"{prefix}-{name}", 1)
    c = Consumer(bootstrap_servers=broker.bootstrap, group_id=f"g-{prefix}",
                 session_timeout_ms=broker.session_timeout_ms(10000))
    try:
        c.subscribe(pattern=rf"{prefix}-[ab]")
        deadline = time.monotonic() + 60
        while len(c.assignment()) < 2 and time.monotonic() < deadline:
            c.poll(100)
        assert c.assignment() == {TopicPartition(f"{prefix}-a", 0),
                                  TopicPartition(f"{prefix}-b", 0)}
    finally:
        c.close()


def test_a_pattern_the_broker_refuses_fails_the_next_poll_naming_it(mock_cluster) -> None:
    """INVALID_REGULAR_EXPRESSION in the heartbeat answer (the broker's RE2J
    refused the pattern): the next poll raises kproto's error naming the pattern."""
    c = Consumer(bootstrap_servers=mock_cluster.bootstrap, group_id="g-re2j-refused",
                 group_protocol="consumer")
    try:
        pattern = r"\Qorders(\E"
        mock_cluster.push_request_errors(68, ErrorCode.INVALID_REGULAR_EXPRESSION)
        c.subscribe(pattern=pattern)
        deadline = time.monotonic() + 20
        with pytest.raises(InvalidRegularExpressionError,
                           match="invalid RE2J subscription pattern " + re.escape(repr(pattern))):
            while time.monotonic() < deadline:
                c.poll(100)
    finally:
        c.close()
