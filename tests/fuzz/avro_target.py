"""The Avro decoder's fuzz targets (``avro_cython``, ``avro_pure``): see targets.py.

An input is a selector byte (which (writer, reader) pair of ``CASES``), a flags byte
(bit 0: the column is binary_view; bit 1: ``skip=2``, a 2-byte header before every
datum) and the values, each after a one-byte length (the last one takes what is left).
No logical timestamps, dates or times: they decode as their base ints (the same ops),
and most int64 values are valid Arrow timestamps but not Python datetimes, which the
comparison (to_pylist) needs. Every input decodes through both loops twice: with
``errors="null"`` (the arrays, valid Arrow, and the bad rows must be the same) and with
``errors="raise"`` (the same FormatError: row, reason, byte offset).
``KPROTO_FUZZ_ONE_LOOP=1`` calls the target's own loop directly, once an input (for long
sanitizer runs: the comparison and pyarrow's column cost nine tenths of the time).
Nothing imports kproto at module level.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

_INNER = {"type": "record", "name": "In", "fields": [
    {"name": "x", "type": "int"}, {"name": "t", "type": {"type": "array", "items": "string"}}]}
_ALL = {"type": "record", "name": "All", "fields": [
    {"name": "b", "type": "boolean"}, {"name": "l", "type": "long"},
    {"name": "f", "type": "float"}, {"name": "d", "type": "double"},
    {"name": "by", "type": "bytes"}, {"name": "s", "type": "string"},
    {"name": "in", "type": _INNER},
    {"name": "m", "type": {"type": "map", "values": ["null", "long"]}},
    {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A", "B", "C"]}},
    {"name": "fx", "type": {"type": "fixed", "name": "F", "size": 3}},
    {"name": "u", "type": ["null", "int", "string", "In"]},
    {"name": "dec", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9,
                             "scale": 2}},
    {"name": "big", "type": {"type": "fixed", "name": "G", "size": 20,
                             "logicalType": "decimal", "precision": 45, "scale": 0}},
    {"name": "nul", "type": {"type": "array", "items": "null"}},
]}
_LIST = {"type": "record", "name": "Node", "fields": [
    {"name": "v", "type": "int"}, {"name": "next", "type": ["null", "Node"]}]}
_READER = {"type": "record", "name": "All", "fields": [
    {"name": "l", "type": "double"}, {"name": "s", "type": "bytes"},
    {"name": "by", "type": "string"}, {"name": "f", "type": ["null", "double"]},
    {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["C", "A"],
                           "default": "A"}},
    {"name": "u", "type": ["null", "long"]},
    {"name": "added", "type": {"type": "map", "values": "int"}, "default": {"k": 1}},
]}
#: (writer, reader or None) pairs the selector byte picks from
CASES: list[tuple[Any, Any]] = [
    (_ALL, None), (_ALL, _READER), (_LIST, {"type": "record", "name": "Node", "fields": [
        {"name": "v", "type": "long"}]}),
    ({"type": "array", "items": ["null", "string", "double"]}, None),
    ({"type": "map", "values": {"type": "array", "items": "boolean"}}, None),
    ("string", None), (["null", "int"], "long"),
]


def avro_input(data: bytes) -> tuple[int, int, list[bytes]]:
    """(case index, flags, values) of an input."""
    case = data[0] % len(CASES) if data else 0
    flags = data[1] if len(data) > 1 else 0
    values, pos = [], 2
    while pos < len(data) and len(values) < 16:
        n = data[pos]
        values.append(data[pos + 1:pos + 1 + n])
        pos += 1 + n
    return case, flags, values


def make_avro(impl: str, outcome: Callable[..., tuple[str, Any]],
              finding: type[AssertionError]) -> Callable[[bytes], None]:
    import pyarrow as pa

    import kproto._avro
    import kproto._pure.avro
    from kproto.formats import avro

    loops = [("cython", kproto._avro), ("pure", kproto._pure.avro)]
    if impl == "pure":
        loops.reverse()
    schemas = [(avro.parse_schema(json.dumps(w)),
                None if r is None else avro.parse_schema(json.dumps(r))) for w, r in CASES]
    if os.environ.get("KPROTO_FUZZ_ONE_LOOP") == "1":
        return _one_loop(loops[0][1], schemas, finding)

    def decode(loop: Any, column: Any, writer: Any, reader: Any, skip: int,
               errors: str) -> Any:
        saved, avro._loop = avro._loop, loop
        try:
            return avro.decode(column, writer, reader, skip=skip, errors=errors)
        finally:
            avro._loop = saved

    def one_input(data: bytes) -> None:
        case, flags, values = avro_input(data)
        writer, reader = schemas[case]
        column = pa.array(values, pa.binary())
        if flags & 1:
            column = column.cast(pa.binary_view())
        skip = 2 if flags & 2 else 0
        seen = []
        for i, (_, loop) in enumerate(loops):
            kind, got = outcome(decode, loop, column, writer, reader, skip, "null")
            if kind != "ok":
                raise finding(f"errors='null' raised {got!r}")
            array, bad = got
            if i == 0:
                array.validate(full=True)
                if len(array) != len(values) or array.null_count < len(bad):
                    raise finding(f"{len(array)} rows, {array.null_count} nulls for "
                                  f"{len(values)} values, {len(bad)} bad")
            kind, err = outcome(decode, loop, column, writer, reader, skip, "raise")
            raised = (type(err).__name__, err.row, err.reason, err.offset) \
                if kind == "error" else None
            if (raised is None) != (len(bad) == 0) or (raised and raised[1] != bad[0]):
                raise finding(f"errors='raise' gave {raised}, errors='null' bad rows {bad}")
            seen.append((repr(array.to_pylist()), bad.tolist(), raised))
        if seen[0] != seen[1]:
            raise finding(f"{loops[0][0]} and {loops[1][0]} differ:\n{seen[0]}\n{seen[1]}")

    # warm up: the first decode of each type loads pyarrow's conversions (tens of MB under
    # ASan), which the RSS check would blame on the first input
    for seed in avro_seeds():
        one_input(seed)
    return one_input


def _one_loop(loop: Any, schemas: list[Any], finding: type[AssertionError]
              ) -> Callable[[bytes], None]:
    """For long sanitizer runs: the target's own loop only, called directly on the values
    (no pyarrow column, no second decode, no comparison); one output in eight is built
    into Arrow arrays and validated."""
    import numpy as np

    from kproto.formats import avro

    programs = [avro._program(w, r or w) for w, r in schemas]
    count = [0]

    def one_input(data: bytes) -> None:
        count[0] += 1
        case, flags, values = avro_input(data)
        p = programs[case]
        lengths = np.array([len(v) for v in values], np.int64)
        starts = np.cumsum(lengths) - lengths
        outs, bad, _ = loop.run(p.node_table, p.table, p.slot_table, p.root,
                                p.root_slot.index, p.default_bytes, [b"".join(values)],
                                np.zeros(len(values), np.int32), starts, lengths,
                                2 if flags & 2 else 0, True)
        if count[0] % 8 and count[0] > 0:
            return      # building and validating Arrow arrays costs 3x the decode: 1 in 8
        array = p.assemble(outs)
        array.validate(full=True)
        if len(array) != len(values) or array.null_count < len(bad):
            raise finding(f"{len(array)} rows, {array.null_count} nulls for {len(values)} "
                          f"values, {len(bad)} bad")

    count[0] = -(10**9)          # warm up (see make_avro), every output built
    for seed in avro_seeds():
        one_input(seed)
    count[0] = 0
    return one_input


def avro_seeds() -> list[bytes]:
    """Good values of every case, written by fastavro (the tests' independent writer)."""
    import decimal
    import io

    import fastavro

    inner = {"x": -3, "t": ["é", ""]}
    samples: list[list[Any]] = [
        [{"b": True, "l": -(2**40), "f": 1.5, "d": -0.25, "by": b"\x00\xff", "s": "héllo",
          "in": inner, "m": {"k": 7, "z": None}, "e": "C", "fx": b"abc", "u": u,
          "dec": decimal.Decimal("-1234567.89"), "big": decimal.Decimal(10**44 - 1),
          "nul": [None, None]} for u in (None, 5, "s", inner)],
        [],
        [{"v": 1, "next": {"v": 2, "next": None}}],
        [[None, "a", 2.5], []],
        [{"a": [True, False]}, {}],
        ["", "日本"],
        [None, -7],
    ]
    samples[1] = samples[0]
    out = []
    for i, ((writer, _), values) in enumerate(zip(CASES, samples, strict=True)):
        parsed = fastavro.parse_schema(writer)
        datums = []
        for v in values:
            buf = io.BytesIO()
            fastavro.schemaless_writer(buf, parsed, v)
            datums.append(buf.getvalue())
        body = b"".join(bytes([len(d)]) + d for d in datums if len(d) < 256)
        out.append(bytes([i, 0]) + body)
        out.append(bytes([i, 1]) + body)
        out.append(bytes([i, 2]) + b"".join(bytes([len(d) + 2]) + b"\x00\x01" + d
                                            for d in datums if len(d) < 254))
    return out
