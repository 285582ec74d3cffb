"""The framing and JSON-lines passes (kproto/_wire.pxi) against their NumPy twins
(kproto/_pure/wire.py) on the same columns: Confluent headers of every shape (null,
short, wrong magic, ids up to 2**32 - 1), values with raw line breaks, whitespace around
objects, values that are not one object's text, sliced columns, and offsets that do not
fit the data (a ValueError, never a read out of bounds)."""

from __future__ import annotations

import random

import numpy as np
import pyarrow as pa
import pytest

import kproto._pure.wire as pure
from kproto.formats import _wire
from kproto.formats import json as json_format

from .avro_support import extension

core = extension()


def _column(rng: random.Random, n: int) -> pa.Array:
    pool = [b"", b"\x00", b"\x00\x00\x00\x00", b"\x00\x00\x00\x00\x07{}",
            b"\x01\x00\x00\x00\x01{}",
            b"\x00\xff\xff\xff\xff{\"a\": 1}", b"\x00\x00\x00\x00\x02 \t{\"a\":\n2}\r\n",
            b"\x00\x00\x00\x00\x02[1]", b"\x00\x00\x00\x00\x02{\"a\": 1}{", b"{}", b" {} ",
            b"\x00\x00\x00\x00\x02\n\r\x0b\x0c", None]
    values = [rng.choice(pool) if rng.random() < 0.7 else bytes(rng.randrange(256) for _ in
                                                                range(rng.randrange(12)))
              for _ in range(n)]
    return pa.array(values, pa.binary())


def _inputs(column: pa.Array) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    offsets, data, valid = _wire.buffers(column)
    return offsets.astype(np.int64), data, valid.view(np.uint8)


@pytest.mark.parametrize("seed", range(20))
def test_the_two_passes_agree_on_random_columns(seed: int) -> None:
    rng = random.Random(seed)
    column = _column(rng, rng.randrange(0, 200))
    if len(column) > 4 and seed % 2:
        column = column.slice(2, len(column) - 3)
    offsets, data, valid = _inputs(column)
    got = core.frame_ids(offsets, data, valid, _wire.HEADER, _wire.MAGIC)
    want = pure.frame_ids(offsets, data, valid, _wire.HEADER, _wire.MAGIC)
    assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])
    for skip in (0, 5):
        rows = valid.copy()
        rows[::3] = 0
        lines, others = core.json_lines(offsets, data, rows, skip)
        want_lines, want_others = pure.json_lines(offsets, data, rows, skip)
        assert bytes(lines) == want_lines
        assert others.tolist() == want_others.tolist()


def test_header_ids_statuses_and_lines_by_hand() -> None:
    column = pa.array([b"\x00\x00\x00\x01\x00{\"x\":\r\n1}", None, b"\x00\x00\x01",
                       b"\x05\x00\x00\x00\x01{}", b"\x00\xff\xff\xff\xff  {}\t",
                       b"\x00\x00\x00\x00\x01[]"])
    offsets, data, valid = _inputs(column)
    for kernels in (core, pure):
        ids, status = kernels.frame_ids(offsets, data, valid, 5, 0)
        assert ids.tolist() == [256, -1, -1, -1, 2**32 - 1, 1]
        assert status.tolist() == [0, 0, 1, 2, 0, 0]
        lines, others = kernels.json_lines(offsets, data, np.array([1, 0, 0, 0, 1, 1], np.uint8),
                                           5)
        assert bytes(lines) == b'{"x":  1}\n  {}\t\n'
        assert others.tolist() == [5]


@pytest.mark.parametrize("offsets", [[0, 5, 4], [0, 11], [-1, 3], [3, 2]])
def test_offsets_outside_the_data_raise(offsets: list[int]) -> None:
    data = np.zeros(10, np.uint8)
    n = len(offsets) - 1
    for kernels in (core, pure):
        with pytest.raises(ValueError, match="not within the 10 data bytes"):
            kernels.frame_ids(np.array(offsets, np.int64), data, np.ones(n, np.uint8), 5, 0)
        with pytest.raises(ValueError, match="not within the 10 data bytes"):
            kernels.json_lines(np.array(offsets, np.int64), data, np.ones(n, np.uint8), 0)


def test_decode_reports_values_that_are_not_one_object_by_row() -> None:
    column = pa.array([b'{"a": 1}', b"[1]", b' \n{"a": 2}\r\n', b"", b'{"a": 3}{"a": 4}'])
    array, bad = json_format.decode(column, pa.struct([("a", pa.int64())]), errors="null")
    assert array.to_pylist() == [{"a": 1}, None, {"a": 2}, None, None]
    assert bad.tolist() == [1, 3, 4]
