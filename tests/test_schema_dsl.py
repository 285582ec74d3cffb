"""The schema DSL's parser (kproto.protocol.schema): comments."""

from __future__ import annotations

from kproto.protocol.schema import parse_fields

PLAIN = """
    replica_id                       int32     0+     default=-1
    topics                           []        0+
      name                           string    0+
      partitions                     [int32]   0+
"""

COMMENTED = """
    # -1: a consumer, not a follower.
    replica_id                       int32     0+     default=-1   # tag=3 null (not options)
    topics                           []        0+
  # A comment's indentation does not matter,
            # nor does a comment line inside a struct.
      name                           string    0+
      partitions                     [int32]   0+     #
#
"""


def test_comments_are_ignored() -> None:
    assert parse_fields(COMMENTED) == parse_fields(PLAIN)
