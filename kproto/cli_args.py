"""The ``kproto`` command line (:mod:`kproto.cli` runs the commands): the parser,
argument types that refuse a malformed value before anything runs, the two
errors the commands raise, and the masking of secrets in what is printed.

argparse's own errors are raised as :class:`UsageError` instead of printing a
usage block: every error the command prints is one line.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Callable
from typing import Any, NoReturn

from .config import SECRET_NAME, is_secret_name

__all__ = ["CliError", "UsageError", "parser", "secrets", "mask", "is_secret_name"]


class CliError(Exception):
    """What was asked cannot be done: one line, exit 1."""

    code = 1


class UsageError(CliError):
    """A malformed command line: one line, exit 1 as every other error (not
    argparse's 2: one exit code for "it did not run"); ``prog`` is the (sub)command it
    is about, when argparse knows it, and the line points at its ``--help``."""

    def __init__(self, message: str, prog: str | None = None) -> None:
        super().__init__(message)
        self.prog = prog


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(message, self.prog)


# --------------------------------------------------------------------------- types


def _at_least(low: int, what: str) -> Callable[[str], int]:
    def convert(text: str) -> int:
        try:
            n = int(text)
        except ValueError:
            n = low - 1
        if n < low:
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}")
        return n

    return convert


positive = _at_least(1, "a positive integer")
partition = _at_least(0, "a partition (0 or more)")
millis = _at_least(0, "a time in ms (0 or more)")


def pair(text: str) -> tuple[str, str]:
    """``KEY=VALUE`` as ``(KEY, VALUE)``."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"{text!r} is not KEY=VALUE")
    return key.strip(), value


def header(text: str) -> tuple[str, str | None]:
    """``KEY=VALUE``, or ``KEY`` alone: a header with a null value."""
    key, sep, value = text.partition("=")
    return key, value if sep else None


_OFFSET_SPEC = re.compile(r"earliest|latest|end|@\d+|-\d+|\d+")


def offset_spec(text: str) -> str:
    """``earliest``, ``latest``/``end``, an offset, ``-N`` (the last N), ``@MS``."""
    if not _OFFSET_SPEC.fullmatch(text):
        raise argparse.ArgumentTypeError(
            f"bad offset {text!r}: use earliest, latest, a number, -N (the last N) or @MS "
            "(a time in ms)")
    return text


def fetch_version(text: str) -> int:
    from .protocol.apis import FETCH

    if not text.isdigit() or int(text) not in FETCH.versions:
        raise argparse.ArgumentTypeError(f"Fetch v{text} is not a version kproto knows "
                                         f"({FETCH.versions.lo} to {FETCH.versions.hi})")
    return int(text)


def separator(text: str) -> str:
    if not text:
        raise argparse.ArgumentTypeError("an empty separator")
    return text


#: Kafka's transaction states (ListTransactions filters by these names)
TRANSACTION_STATES = ("Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit",
                      "CompleteAbort", "Dead", "PrepareEpochFence")
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
#: Kafka's group types (ListGroups v5 filters by these; kproto.admin_groups.GROUP_TYPES)
GROUP_TYPES = ("classic", "consumer", "share", "streams")


# --------------------------------------------------------------------------- secrets

# (key.pem, keystore.key, keydata: a private key given inline, librdkafka's and KIP-651's)
_SECRET_NAME = SECRET_NAME
_URL_CREDENTIALS = re.compile(r"(?<=://)[^\s/@]+@")


_SCHEME_PREFIX = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*://")


def secrets(argv: list[str]) -> list[str]:
    """The values of secret settings on a command line (``-X sasl.password=...``,
    and its slips ``KEY:VALUE`` and ``KEY VALUE``) and the user info of a bootstrap
    address (``-b u:pw@host:9092``, also from ``$KPROTO_BOOTSTRAP_SERVERS``), for
    :func:`mask`."""
    found = []
    for i, token in enumerate(argv):
        if token == "-X" and i + 1 < len(argv):
            item, after = argv[i + 1], argv[i + 2:i + 3]
        elif token.startswith("-X") and len(token) > 2:
            item, after = token[2:], argv[i + 1:i + 2]
        else:
            continue
        name = re.match(r"[\w.\-]*", item).group()  # type: ignore[union-attr]
        if not _SECRET_NAME.search(name):
            continue
        value = item.partition("=")[2] if "=" in item else \
            item[len(name):].lstrip(": \t") or "".join(after)
        if value:
            found.append(value)
    # configs alter --set sasl.jaas.config=... (a broker's secret config)
    for i, token in enumerate(argv):
        item = argv[i + 1] if token == "--set" and i + 1 < len(argv) else \
            token[len("--set="):] if token.startswith("--set=") else ""
        key, _, value = item.partition("=")
        if value and is_secret_name(key):
            found.append(value)
    # a bootstrap address with user info (u:pw@host, with or without a scheme)
    addresses = [os.environ.get("KPROTO_BOOTSTRAP_SERVERS") or ""]
    for i, token in enumerate(argv):
        if token in ("-b", "--bootstrap-servers") and i + 1 < len(argv):
            addresses.append(argv[i + 1])
        elif token.startswith(("-b", "--bootstrap-servers=")) and token != "-b":
            addresses.append(token.partition("=")[2] if "=" in token else token[2:])
    for address in ",".join(addresses).split(","):
        info = _SCHEME_PREFIX.sub("", address.strip()).rpartition("@")[0]
        if info:
            found.append(info)
    return found


def mask(text: str, hidden: list[str]) -> str:
    """``text`` with every secret in ``hidden`` and any URL's user:password@ as ***."""
    for secret in sorted(hidden, key=len, reverse=True):
        text = text.replace(secret, "***")
    return _URL_CREDENTIALS.sub("***@", text)


# --------------------------------------------------------------------------- the parser


def parser(doc: str | None = None) -> argparse.ArgumentParser:
    """The ``kproto`` parser: ``args.command`` names the command (``demo`` takes the
    rest of the line as its own arguments)."""
    p = _Parser(prog="kproto", description=doc,
                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-b", "--bootstrap-servers",
                   default=os.environ.get("KPROTO_BOOTSTRAP_SERVERS"),
                   help="host:port[,host:port] (default $KPROTO_BOOTSTRAP_SERVERS)")
    p.add_argument("-X", action="append", metavar="KEY=VALUE", type=pair,
                   help="a client setting under its Kafka name (repeatable)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--debug", action="store_true",
                   help="tracebacks and protocol logs (also KPROTO_DEBUG=1)")
    sub = p.add_subparsers(dest="command", required=True)

    m = sub.add_parser("metadata", help="brokers, topics, partitions, leaders, ISR")
    m.add_argument("topic", nargs="*")

    t = sub.add_parser("topics", help="list, create or delete topics")
    t.add_argument("action", choices=["list", "create", "delete", "add-partitions"])
    t.add_argument("names", nargs="*")
    t.add_argument("-p", "--partitions", type=positive,
                   help="create: the count (default: the broker's); add-partitions: the new "
                   "total")
    t.add_argument("-r", "--replication-factor", type=positive,
                   help="(default: the broker's)")
    t.add_argument("-c", "--config", action="append", metavar="KEY=VALUE", type=pair)
    t.add_argument("--if-not-exists", action="store_true")

    pr = sub.add_parser("produce", help="records from stdin lines, a file, Parquet or Arrow")
    pr.add_argument("topic")
    pr.add_argument("-f", "--file", help="lines, .parquet or .arrow (default: stdin lines)")
    pr.add_argument("-K", "--key-separator", type=separator,
                    help="split each line into key SEP value")
    pr.add_argument("-H", "--header", action="append", metavar="KEY=VALUE", type=header,
                    help="a header on every record (KEY alone: a null value)")
    pr.add_argument("-p", "--partition", type=partition, help="(default: murmur2 of the key)")
    pr.add_argument("-z", "--compression", choices=CODECS)
    pr.add_argument("--progress", action=argparse.BooleanOptionalAction,
                    default=sys.stderr.isatty(), help="progress on stderr (default on a tty)")

    c = sub.add_parser("consume", help="records to stdout or a Parquet file")
    c.add_argument("topic")
    c.add_argument("-p", "--partition", type=partition, action="append")
    c.add_argument("--from", dest="from_", default="earliest", type=offset_spec,
                   help="earliest, latest, OFFSET, -N (last N), @MS (time)")
    c.add_argument("--to", default="end", type=offset_spec,
                   help="end (the current end), OFFSET, @MS")
    c.add_argument("--follow", action="store_true", help="keep reading new records")
    c.add_argument("-n", "--count", type=positive, help="stop after this many records")
    c.add_argument("--format", choices=["table", "json", "raw", "avro", "protobuf"],
                   default="table", help="avro, protobuf (and json with --registry): values "
                   "in Confluent's wire format, decoded (JSON lines)")
    c.add_argument("--registry", metavar="URL",
                   help="the Schema Registry of --format avro|json|protobuf")
    c.add_argument("-o", "--output", help="write a Parquet file instead (decoded values "
                   "with --format avro|json|protobuf --registry)")
    c.add_argument("--progress", action=argparse.BooleanOptionalAction,
                   default=sys.stderr.isatty(), help="progress on stderr (default on a tty)")

    o = sub.add_parser("offsets", help="earliest/latest (and by time) per partition")
    o.add_argument("topic")
    o.add_argument("-p", "--partition", type=partition, action="append")
    o.add_argument("-t", "--time", type=millis, help="also the offset at this time (ms)")

    g = sub.add_parser("groups", help="list groups (by type, state), or describe them with lag")
    g.add_argument("action", choices=["list", "describe", "lag", "delete", "delete-offsets"])
    g.add_argument("names", nargs="*", metavar="GROUP")
    g.add_argument("-t", "--type", action="append", choices=GROUP_TYPES,
                   help="list: only groups of this type (classic, consumer, share, streams)")
    g.add_argument("-s", "--state", action="append", metavar="STATE",
                   help="list: only groups in this state (Stable, Empty, ...)")
    g.add_argument("--topic", help="delete-offsets: the topic")
    g.add_argument("-p", "--partition", type=partition, action="append",
                   help="delete-offsets: only these partitions")

    tx = sub.add_parser("transactions", help="list or describe transactions; a topic's "
                        "producers")
    tx.add_argument("action", choices=["list", "describe", "producers"])
    tx.add_argument("names", nargs="*", help="transactional ids (describe), a topic (producers)")
    tx.add_argument("-s", "--state", action="append", choices=TRANSACTION_STATES,
                    help="list: only in this state")
    tx.add_argument("-p", "--partition", type=partition, action="append",
                    help="producers: only these")

    _admin_commands(sub)

    d = sub.add_parser("decode", help="decode a record set or a Fetch response body file")
    d.add_argument("file")
    d.add_argument("--fetch-version", type=fetch_version,
                   help="the file is a Fetch response body of this version")

    be = sub.add_parser("bench", help="decode benchmark against the installed peers")
    be.add_argument("-n", "--records", type=positive, default=200_000)
    be.add_argument("--progress", action=argparse.BooleanOptionalAction,
                    default=sys.stderr.isatty(), help="progress on stderr (default on a tty)")

    sub.add_parser("demo", help="the end-to-end demo (embedded broker, Arrow, Spark)")
    return p


#: Java's ACL names (kproto.admin_acls), lower case as kafka-acls.sh takes them
ACL_OPERATIONS = ("all", "read", "write", "create", "delete", "alter", "describe",
                  "cluster_action", "describe_configs", "alter_configs", "idempotent_write",
                  "create_tokens", "describe_tokens", "two_phase_commit")


def _admin_commands(sub: Any) -> None:
    """configs, acls, cluster, log-dirs, records (kproto.cli_admin runs them)."""
    cf = sub.add_parser("configs", help="describe or alter a topic's or broker's configs")
    cf.add_argument("action", choices=["describe", "alter"])
    cf.add_argument("type", choices=["topic", "broker", "broker_logger", "group"])
    cf.add_argument("name", help="the topic, the broker id ('' the cluster default), ...")
    cf.add_argument("-k", "--key", action="append", help="describe: only these keys")
    cf.add_argument("--synonyms", action="store_true", help="describe: the values overridden")
    cf.add_argument("--set", action="append", metavar="KEY=VALUE", type=pair)
    cf.add_argument("--delete", action="append", metavar="KEY", help="back to the default")
    cf.add_argument("--dry-run", action="store_true", help="alter: validate only")

    a = sub.add_parser("acls", help="list, create or delete ACLs (kafka-acls.sh's options)")
    a.add_argument("action", choices=["list", "create", "delete"])
    a.add_argument("--topic")
    a.add_argument("--group")
    a.add_argument("--transactional-id")
    a.add_argument("--cluster", action="store_true")
    a.add_argument("--pattern-type", choices=["literal", "prefixed", "match", "any"])
    a.add_argument("--principal", action="append", help="User:NAME (repeatable)")
    a.add_argument("--host", help="(default: * for create, any for list/delete)")
    a.add_argument("--operation", action="append", choices=ACL_OPERATIONS)
    a.add_argument("--permission", choices=["allow", "deny"],
                   help="(default: allow for create, any for list/delete)")

    sub.add_parser("cluster", help="cluster id, controller and brokers (DescribeCluster)")

    ld = sub.add_parser("log-dirs", help="each broker's log dirs: replicas, sizes, lags")
    ld.add_argument("--broker", type=_at_least(0, "a broker id"), action="append")
    ld.add_argument("--topic", action="append", help="only these topics' replicas")

    r = sub.add_parser("records", help="delete records before an offset (truncate)")
    r.add_argument("action", choices=["delete"])
    r.add_argument("topic")
    r.add_argument("--before", required=True, type=_at_least(-1, "an offset (-1: the end)"),
                   help="delete every record before this offset (-1: all, up to the end)")
    r.add_argument("-p", "--partition", type=partition, action="append")
