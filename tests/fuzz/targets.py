"""kproto's fuzz targets and their oracle (run them with tests/fuzz/run.py).

A target is one decoder driven through one implementation; each input also goes
through the other twin, and the two must agree:

=================  ==========================================================  ===========
target             input                                                       coverage of
=================  ==========================================================  ===========
records_cython     flags byte + record sets -> ``_codec.decode_records``       Cython
records_pure       the same -> ``_pure.records.decode_records``                pure Python
fetch_cython       version byte (mod 19) + Fetch body -> ``_codec.slice_fetch``  Cython
fetch_pure         the same -> ``protocol.slicer.slice_fetch`` (engine)      pure Python
protocol_cython    selector byte + body -> every response decoder (all APIs,   engine
                   all versions), ``decode_request``, the consumer protocol;
                   the engine's varints from ``_codec``
protocol_pure      the same, varints from ``_pure``                            engine
avro_cython        case byte + flags byte + Avro datums -> ``formats.avro``    Cython
                   decoding on ``_avro`` (tests/fuzz/avro_target.py)
avro_pure          the same on ``_pure.avro``                                  pure Python
formats_cython     case byte + flags byte + values -> ``formats.decode`` of    Cython
                   JSON (plain, framed) and Protobuf (plain, framed), and the
                   framing and JSON-lines passes alone, on ``_avro``'s passes
                   (tests/fuzz/formats_target.py)
formats_pure       the same on ``_pure.wire``'s                                pure Python
=================  ==========================================================  ===========

The records flags byte: bit 0 check CRCs, bit 1 ``binary_view``, bit 2
``start_offset=5``, bit 3 read_committed (aborted transactions of producers 5 and
6), bit 4 ``max_decompressed=1000`` (else 1 MiB).

The oracle (:func:`run_twins`): an input decodes, or raises a
:class:`~kproto.errors.KprotoError` whose message says where (a byte offset or
position, a field); both twins give the same result, or both raise the same
exception class; decoded columns are valid Arrow; no input raises the peak RSS by
more than 64 MB (inputs are at most 8 KiB, decompression is capped at 1 MiB).
Anything else propagates: an uncaught exception is a finding (atheris saves the
input), as are crashes, hangs (``-timeout``), memory blow-ups (``-rss_limit_mb``)
and ASan reports.

Nothing here imports kproto at module level: run.py first loads libFuzzer, then
imports kproto under atheris's instrumentation.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

TARGETS = {
    "records_cython": ("records", "cython"),
    "records_pure": ("records", "pure"),
    "fetch_cython": ("fetch", "cython"),
    "fetch_pure": ("fetch", "pure"),
    "protocol_cython": ("protocol", "cython"),
    "protocol_pure": ("protocol", "pure"),
    "avro_cython": ("avro", "cython"),
    "avro_pure": ("avro", "pure"),
    "formats_cython": ("formats", "cython"),
    "formats_pure": ("formats", "pure"),
}

#: The Python modules whose coverage guides each target (with an instrumented build, the
#: Cython code's edges too); the other twin runs uninstrumented.
INSTRUMENT = {
    "records_cython": ["kproto.compression"],
    "records_pure": ["kproto._pure.records", "kproto._pure.crc", "kproto.compression"],
    "fetch_cython": [],
    "fetch_pure": ["kproto.protocol.slicer", "kproto._pure.varint", "kproto.protocol.engine"],
    "protocol_cython": ["kproto.protocol", "kproto.protocol.engine"],
    "protocol_pure": ["kproto.protocol", "kproto.protocol.engine", "kproto._pure.varint"],
    "avro_cython": ["kproto.formats.avro", "kproto.formats._avro_program"],
    "avro_pure": ["kproto._pure.avro", "kproto.formats._avro_program"],
    "formats_cython": ["kproto.formats", "kproto.formats._wire", "kproto.formats.json",
                       "kproto.formats.protobuf"],
    "formats_pure": ["kproto._pure.wire", "kproto.formats", "kproto.formats._wire",
                     "kproto.formats.json", "kproto.formats.protobuf"],
}

FLAG_CHECK_CRC, FLAG_VIEWS, FLAG_START, FLAG_COMMITTED, FLAG_SMALL_CAP = 1, 2, 4, 8, 16
ABORTED = [(5, 0), (6, 4)]
FETCH_VERSIONS = 19
#: decode_records' max_decompressed in the records targets (the default is 256 MiB)
MAX_DECOMPRESSED = 1 << 20
#: an input that raises the process's peak RSS by more than this is a finding
MAX_RSS_GROWTH_MB = 64

# "at byte 12", "byte offset 3", "batch at offset 7", "4 bytes is too short", "field a.b"
_WHERE = re.compile(r"\b(bytes?|offset|field)\b")


class Finding(AssertionError):
    """The oracle's verdict on an input (raised, so atheris records the input)."""


def _outcome(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[str, Any]:
    from kproto.errors import KprotoError, UnsupportedVersionError

    try:
        return "ok", fn(*args, **kwargs)
    except KprotoError as exc:
        text = str(exc)
        if not _WHERE.search(text) and not isinstance(exc, UnsupportedVersionError):
            raise Finding(f"{type(exc).__name__} does not say where: {text!r}") from exc
        return "error", exc


def _agree(first: tuple[str, Any], second: tuple[str, Any], names: tuple[str, str],
           same: Callable[[Any, Any], bool]) -> None:
    (k1, v1), (k2, v2) = first, second
    if k1 == k2 == "ok":
        if not same(v1, v2):
            raise Finding(f"{names[0]} and {names[1]} decode differently:\n{v1!r}\n{v2!r}")
    elif k1 == k2 == "error":
        if type(v1) is not type(v2):
            raise Finding(f"{names[0]} raised {type(v1).__name__}: {v1}; "
                          f"{names[1]} raised {type(v2).__name__}: {v2}")
    else:
        ok, err = (names[0], names[1]) if k1 == "ok" else (names[1], names[0])
        raise Finding(f"{ok} decodes, {err} raises {v2 if k1 == 'ok' else v1!r}")


def _order(impl: str, cython: Any, pure: Any) -> list[tuple[str, Any]]:
    return [("cython", cython), ("pure", pure)] if impl == "cython" else [
        ("pure", pure), ("cython", cython)]


# --------------------------------------------------------------------------- records


def _rows(cols: Any, validate: bool) -> tuple[list[tuple[Any, ...]], int]:
    """Every row, and next_offset (what the twins must agree on).

    ``validate`` checks every buffer the decoder built, with Arrow's full validation of the
    variable-length columns (offsets in order and within the data, views within their
    buffers, validity bitmaps long enough) and the header list offsets by hand (header keys
    are Arrow strings, but bytes that are not UTF-8 are kept as sent, as Kafka's clients
    do, so Arrow's UTF-8 check would refuse what is not a decoder bug).
    """
    import numpy as np

    if validate:
        n = len(cols)
        for column in (cols.key, cols.value, cols.headers.keys, cols.headers.values):
            column.to_arrow().validate(full=True)
        assert len(cols.key) == len(cols.value) == len(cols.timestamp) == n
        assert len(cols.timestamp_type) == n and len(cols.headers.offsets) == n + 1
        offsets = cols.headers.offsets
        assert offsets[0] == 0 and offsets[-1] == len(cols.headers.keys)
        assert len(cols.headers.keys) == len(cols.headers.values)
        assert bool(np.all(offsets[1:] >= offsets[:-1]))
    return [tuple(r) for r in cols], cols.next_offset


def records_input(data: bytes) -> tuple[bytes, dict[str, Any]]:
    """Split a records target input into the record sets and decode_records' options."""
    flags = data[0] if data else 0
    kwargs: dict[str, Any] = {"check_crc": bool(flags & FLAG_CHECK_CRC),
                              "binary_view": bool(flags & FLAG_VIEWS)}
    if flags & FLAG_START:
        kwargs["start_offset"] = 5
    if flags & FLAG_COMMITTED:
        kwargs["aborted_transactions"] = ABORTED
    # a small cap keeps every input cheap, and makes any allocation past it stand out
    kwargs["max_decompressed"] = 1000 if flags & FLAG_SMALL_CAP else MAX_DECOMPRESSED
    return data[1:], kwargs


def make_records(impl: str) -> Callable[[bytes], None]:
    from kproto import _codec
    from kproto._pure import records as pure

    twins = _order(impl, _codec.decode_records, pure.decode_records)

    def one_input(data: bytes) -> None:
        buf, kwargs = records_input(data)
        outcomes = []
        for i, (_, decode) in enumerate(twins):
            kind, value = _outcome(decode, buf, **kwargs)
            outcomes.append((kind, _rows(value, i == 0) if kind == "ok" else value))
        _agree(outcomes[0], outcomes[1], (twins[0][0], twins[1][0]), lambda x, y: x == y)

    return one_input


# --------------------------------------------------------------------------- fetch


def make_fetch(impl: str) -> Callable[[bytes], None]:
    from kproto import _codec, _pure
    from kproto.protocol import engine
    from kproto.protocol import slicer as pure

    def pure_slice(body: bytes, version: int) -> Any:
        engine.backend = _pure  # the pure twin all the way down (its varints too)
        try:
            return pure.slice_fetch(body, version)
        finally:
            engine.backend = _codec

    twins = _order(impl, _codec.slice_fetch, pure_slice)

    def one_input(data: bytes) -> None:
        version = data[0] % FETCH_VERSIONS if data else 0
        body = data[1:]
        a = _outcome(twins[0][1], body, version)
        b = _outcome(twins[1][1], body, version)
        _agree(a, b, (twins[0][0], twins[1][0]), lambda x, y: x == y)

    return one_input


# --------------------------------------------------------------------------- protocol


def protocol_cases() -> list[tuple[Any, ...]]:
    """What a protocol target input's first byte selects (modulo the length)."""
    from kproto.protocol.apis import APIS

    cases: list[tuple[Any, ...]] = []
    for key in sorted(APIS):
        versions = APIS[key].versions
        cases += [("response", key, v) for v in range(versions.lo, versions.hi + 1)]
    return cases + [("request",), ("subscription",), ("assignment",)]


def make_protocol(impl: str) -> Callable[[bytes], None]:
    from kproto import _codec, _pure, protocol
    from kproto.protocol import engine

    cases = protocol_cases()

    def decode(case: tuple[Any, ...], body: bytes) -> Any:
        if case[0] == "response":
            return protocol.decode(case[1], case[2], "response", body)
        if case[0] == "request":
            return protocol.decode_request(body)
        if case[0] == "subscription":
            return protocol.decode_subscription(body)
        return protocol.decode_assignment(body)

    mods = _order(impl, _codec, _pure)

    def one_input(data: bytes) -> None:
        case = cases[data[0] % len(cases)] if data else cases[0]
        body = data[1:]
        outcomes = []
        try:
            for _, mod in mods:
                engine.backend = mod
                outcomes.append(_outcome(decode, case, body))
        finally:
            engine.backend = _codec
        _agree(outcomes[0], outcomes[1], (mods[0][0], mods[1][0]), lambda x, y: x == y)

    return one_input


def make(name: str, keep_going: str | None = None) -> Callable[[bytes], None]:
    """The one-input function of target ``name`` (imports kproto).

    ``keep_going`` (a directory), for triage: a failing input is written there and its
    message printed once per kind (digits ignored) instead of stopping the fuzzer.
    """
    import resource

    decoder, impl = TARGETS[name]
    if decoder == "avro":
        from .avro_target import make_avro

        decode = make_avro(impl, _outcome, Finding)
    elif decoder == "formats":
        from .formats_target import make_formats

        decode = make_formats(impl, Finding)
    else:
        decode = {"records": make_records, "fetch": make_fetch,
                  "protocol": make_protocol}[decoder](impl)

    def one_input(data: bytes) -> None:
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        decode(data)
        grew = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) // 1024
        if grew > MAX_RSS_GROWTH_MB:
            raise Finding(f"decoding this input raised the peak RSS by {grew} MB")

    if keep_going is None:
        return one_input
    import hashlib
    import os
    import traceback

    seen: set[str] = set()
    os.makedirs(keep_going, exist_ok=True)

    def triage(data: bytes) -> None:
        try:
            one_input(data)
        except Exception as exc:  # noqa: BLE001 - every failure is a finding here
            kind = re.sub(r"\d+", "N", f"{type(exc).__name__}: {exc}")[:200]
            if kind not in seen:
                seen.add(kind)
                path = os.path.join(keep_going, "finding-" + hashlib.sha1(data).hexdigest())
                with open(path, "wb") as f:
                    f.write(data)
                print(f"\nFINDING {path}\n{''.join(traceback.format_exception(exc))}",
                      flush=True)

    return triage
