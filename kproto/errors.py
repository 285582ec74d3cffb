"""kproto's exception hierarchy (placeholder: the broker error table is being added).

Every exception kproto raises derives from :class:`KprotoError`.
"""

from __future__ import annotations


class KprotoError(Exception):
    """Root of every exception raised by kproto."""


class DecodeError(KprotoError, ValueError):
    """Bytes that cannot be decoded: truncated, malformed or out of range."""


class ProtocolError(DecodeError):
    """A protocol message (request/response body or header) is malformed."""


class CorruptRecordError(DecodeError):
    """A record set (message set or record batch) is malformed."""


class EncodeError(KprotoError, ValueError):
    """Values that cannot be encoded at the requested version."""


class UnsupportedVersionError(KprotoError):
    """No API version both sides support, or a version kproto does not know."""
