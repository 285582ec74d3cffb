"""Hostile use of consumer groups (the KIP-848 consumer protocol, admin of groups)
against librdkafka's mock cluster. Findings not fixed yet are strict xfails with
the reason (the fix belongs to a module another engineer is changing)."""

from __future__ import annotations

import re

import pytest

from kproto import Consumer
from kproto.errors import ConfigError

pytestmark = pytest.mark.broker


@pytest.mark.xfail(strict=True, raises=re.error, reason=(
    "Consumer.subscribe() compiles the pattern with Python's re even with "
    "group_protocol='consumer', where it goes to the broker as an RE2J expression: "
    "valid RE2J that Python rejects (\\p{Lu}, \\Q...\\E) cannot be subscribed to, and "
    "the error is re.error, not kproto's (kproto/consumer/consumer.py, being changed)"))
@pytest.mark.parametrize("pattern", [r"\p{Lu}[a-z]+-events", r"\Qorders.v1\E.*"])
def test_an_re2j_pattern_python_rejects_is_sent_to_the_broker(mock_cluster, pattern) -> None:
    c = Consumer(bootstrap_servers=mock_cluster.bootstrap, group_id="g-re2j",
                 group_protocol="consumer")
    try:
        c.subscribe(pattern=pattern)
        assert c._group.state.regex == pattern      # as written, for the broker
    finally:
        c.close()


@pytest.mark.xfail(strict=True, raises=re.error, reason=(
    "a pattern Python cannot compile is re.error out of Consumer.subscribe(), not a "
    "ConfigError naming it (kproto/consumer/consumer.py, being changed)"))
def test_a_bad_classic_pattern_is_a_config_error(mock_cluster) -> None:
    c = Consumer(bootstrap_servers=mock_cluster.bootstrap, group_id="g-bad-pattern")
    try:
        with pytest.raises(ConfigError, match=r"pattern.*\(unclosed"):
            c.subscribe(pattern="(unclosed")
    finally:
        c.close()
