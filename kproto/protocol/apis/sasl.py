"""SASL authentication (KIP-43, KIP-152)."""

from ..schema import Api

__all__ = ["SASL_HANDSHAKE", "SASL_AUTHENTICATE"]


SASL_HANDSHAKE = Api(17, "SaslHandshake", "0-1", flexible="none", request="""
    # v0: the SASL tokens then follow as raw size-prefixed frames; v1: in SaslAuthenticate.
    mechanism                        string    0+
""", response="""
    error_code                       int16     0+
    mechanisms                       [string]  0+
""")

SASL_AUTHENTICATE = Api(36, "SaslAuthenticate", "0-2", flexible="2+", request="""
    auth_bytes                       bytes     0+
""", response="""
    error_code                       int16     0+
    error_message                    string    0+     null
    auth_bytes                       bytes     0+
    # Re-authenticate before this many ms (KIP-368); 0: never.
    session_lifetime_ms              int64     1+     ignorable
""")
