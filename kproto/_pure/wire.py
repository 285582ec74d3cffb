"""Pure-Python twins of the framing and JSON-lines passes of ``kproto._avro``
(kproto/_wire.pxi): the oracle they are tested against, in NumPy."""

from __future__ import annotations

import numpy as np

_BLANK = np.arange(256, dtype=np.uint8)
_BLANK[[10, 13]] = 32                       # \n, \r -> space


def _check_offsets(offsets: np.ndarray, size: int) -> None:
    if len(offsets) < 1:
        raise ValueError("offsets must hold n + 1 entries")
    bad = np.flatnonzero((offsets[:-1] < 0) | (offsets[:-1] > offsets[1:])
                         | (offsets[1:] > size))
    if len(bad):
        i = int(bad[0])
        raise ValueError(f"offsets[{i}:{i + 2}] = {offsets[i]}, {offsets[i + 1]} "
                         f"are not within the {size} data bytes")


def frame_ids(offsets: np.ndarray, data: np.ndarray, valid: np.ndarray, header: int,
              magic: int) -> tuple[np.ndarray, np.ndarray]:
    """See ``kproto._avro.frame_ids``."""
    offsets = np.asarray(offsets, np.int64)
    _check_offsets(offsets, len(data))
    valid = np.asarray(valid).astype(bool)
    n = len(offsets) - 1
    if len(valid) != n:
        raise ValueError("valid must hold one entry a row")
    if header < 5:
        raise ValueError(f"header must be at least 5 bytes (magic byte and id), not {header}")
    starts, lengths = offsets[:-1], np.diff(offsets)
    ids = np.full(n, -1, np.int64)
    status = np.zeros(n, np.uint8)
    short = valid & (lengths < header)
    status[short] = 1
    ok = valid & ~short
    wrong = ok.copy()
    wrong[ok] = data[starts[ok]] != magic
    status[wrong] = 2
    ok &= ~wrong
    s = starts[ok]
    ids[ok] = ((data[s + 1].astype(np.int64) << 24) | (data[s + 2].astype(np.int64) << 16)
               | (data[s + 3].astype(np.int64) << 8) | data[s + 4].astype(np.int64))
    return ids, status


def json_lines(offsets: np.ndarray, data: np.ndarray, rows: np.ndarray, skip: int
               ) -> tuple[bytes, np.ndarray]:
    """See ``kproto._avro.json_lines`` (``lines`` here is bytes)."""
    offsets = np.asarray(offsets, np.int64)
    _check_offsets(offsets, len(data))
    rows = np.asarray(rows).astype(bool)
    if len(rows) != len(offsets) - 1 or skip < 0:
        raise ValueError("rows must hold one entry a row, skip must be >= 0")
    pieces, others = [], []
    for i in np.flatnonzero(rows).tolist():
        start, end = int(offsets[i]) + skip, int(offsets[i + 1])
        value = data[start:end].tobytes() if start < end else b""
        text = value.strip()
        if not (text.startswith(b"{") and text.endswith(b"}")):
            others.append(i)
            continue
        pieces.append(_BLANK[data[start:end]].tobytes())
        pieces.append(b"\n")
    return b"".join(pieces), np.array(others, np.int64)
