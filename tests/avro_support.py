"""Shared by the Avro tests: both decoder loops as a fixture, fastavro as the independent
writer/reader, and the comparison of its Python values with Arrow's."""

from __future__ import annotations

import datetime
import decimal
import io
import os
import uuid
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import pyarrow as pa
import pytest

import kproto._pure.avro
from kproto.formats import avro

fastavro = pytest.importorskip("fastavro")

PURE_REQUESTED = os.environ.get("KPROTO_PURE") == "1"


def extension() -> ModuleType:
    try:
        import kproto._avro as ext
    except ImportError as exc:
        if PURE_REQUESTED:
            pytest.skip("KPROTO_PURE=1 and the extension is not built")
        pytest.fail(f"kproto._avro does not import ({exc}): build it with "
                    "`python setup.py build_ext --inplace`, or set KPROTO_PURE=1", pytrace=False)
    return ext


@pytest.fixture(params=["cython", "pure"])
def loop(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Runs the test with ``avro.decode`` on one decoder loop, then the other."""
    module = extension() if request.param == "cython" else kproto._pure.avro
    monkeypatch.setattr(avro, "_loop", module)
    yield request.param


def write(schema: Any, records: list[Any]) -> list[bytes]:
    """fastavro's schemaless datums of ``records``."""
    parsed = fastavro.parse_schema(schema)
    out = []
    for r in records:
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, parsed, r)
        out.append(buf.getvalue())
    return out


def read(schema: Any, datums: list[bytes | None], reader: Any = None) -> list[Any]:
    """fastavro's per-record reading (with schema resolution when ``reader`` is given)."""
    w = fastavro.parse_schema(schema)
    r = fastavro.parse_schema(reader) if reader is not None else None
    return [None if d is None else fastavro.schemaless_reader(io.BytesIO(d), w, r)
            for d in datums]


def column(datums: list[bytes | None], kind: str = "binary") -> pa.Array:
    arr = pa.array(datums, pa.binary())
    if kind == "large":
        return arr.cast(pa.large_binary())
    if kind == "view":
        return arr.cast(pa.binary_view())
    return arr


def plain(value: Any) -> Any:
    """fastavro's value in the shape Arrow's to_pylist gives (maps as (key, value) lists,
    UUIDs as text, aware datetimes in UTC)."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, datetime.datetime) and value.tzinfo is not None:
        return value.astimezone(datetime.timezone.utc)
    return value


def arrow_values(arr: pa.Array) -> list[Any]:
    """``arr.to_pylist()`` with maps as dicts and aware datetimes in UTC, as ``plain``."""
    return [_conv(v, arr.type) for v in arr.to_pylist()]


def _conv(v: Any, t: pa.DataType) -> Any:
    if v is None:
        return None
    if pa.types.is_map(t):
        return {k: _conv(x, t.item_type) for k, x in v}
    if pa.types.is_struct(t):
        return {f.name: _conv(v[f.name], f.type) for f in t}
    if pa.types.is_list(t):
        return [_conv(x, t.value_type) for x in v]
    if isinstance(v, datetime.datetime) and v.tzinfo is not None:
        return v.astimezone(datetime.timezone.utc)
    return v


D = decimal.Decimal
