"""Talking to brokers: the sans-I/O connection state machine and the transports that
drive it."""

from .blocking import MAX_RESPONSE_BYTES, BrokerConnection, parse_address
from .connection import Connection, Request, Response
from .security import SaslPlain, SaslScram, make_ssl_context

__all__ = ["BrokerConnection", "Connection", "Request", "Response", "parse_address",
           "MAX_RESPONSE_BYTES", "SaslPlain", "SaslScram", "make_ssl_context"]
