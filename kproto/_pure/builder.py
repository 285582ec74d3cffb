"""Pure-Python twin of ``kproto._codec.RecordsBuilder`` (kproto/_builder.pxi): the
producer's open batch, kept as rows and encoded by :func:`encode_batch_v2` when built.
Same bytes as the Cython builder, which encodes each record as it is appended."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import EncodeError
from .encode import _column, encode_batch_v2


class RecordsBuilder:
    """See ``kproto._codec.RecordsBuilder``."""

    def __init__(self) -> None:
        self._rows: list[tuple[bytes | None, bytes | None, int, list[Any]]] = []
        self._stamps: list[int] = []
        self.has_headers = False

    @property
    def count(self) -> int:
        return len(self._stamps)

    @property
    def nbytes(self) -> int:
        """Bytes of the records encoded so far (without the batch header)."""
        return len(self.build()) - 61 if self._rows else 0

    def append(self, key: Any, value: Any, timestamp: int, headers: Any = None) -> int:
        for what, v in (("key", key), ("value", value)):
            if v is not None and type(v) is not bytes:
                raise TypeError(f"{what} must be bytes or None, not {type(v).__name__}")
        if not -2**63 <= timestamp < 2**63:
            raise OverflowError("timestamp out of range")
        if self.count >= 0x7FFFFFFF:
            raise EncodeError("a record batch holds at most 2**31 - 1 records")
        pairs = []
        for hk, hv in headers or ():
            if isinstance(hk, str):
                hk = hk.encode("utf-8")
            elif type(hk) is not bytes:
                raise TypeError(f"a header key must be str or bytes, not {type(hk).__name__}")
            if hv is not None and type(hv) is not bytes:
                raise TypeError(f"a header value must be bytes or None, not "
                                f"{type(hv).__name__}")
            pairs.append((hk, hv))
        if pairs:
            self.has_headers = True
        self._rows.append((key, value, timestamp, pairs))
        self._stamps.append(timestamp)
        return self.count - 1

    def timestamp(self, i: int) -> int:
        """The timestamp of record ``i``."""
        if not 0 <= i < self.count:
            raise IndexError(f"record {i} of {self.count}")
        return self._stamps[i]

    def build(self, codec: int = 0, level: int | None = None) -> bytes:
        """The record batch v2 of the records (base offset 0, no producer id)."""
        if not self._rows:
            raise EncodeError("a record batch needs at least one record")
        n = len(self._rows)
        keys, values, stamps, headers = zip(*self._rows, strict=True)
        header_input = None
        if self.has_headers:
            counts = np.zeros(n + 1, np.int32)
            np.cumsum([len(h) for h in headers], out=counts[1:])
            flat = [pair for h in headers for pair in h]
            header_input = (counts, _column([k for k, _ in flat]), _column([v for _, v in flat]))
        return encode_batch_v2(n, _column(keys), _column(values), np.array(stamps, np.int64),
                               header_input, codec=codec, compression_level=level)

    def slice(self, lo: int, hi: int) -> RecordsBuilder:
        """A builder of records ``lo``..``hi`` (their offsets and timestamps re-based)."""
        if not 0 <= lo < hi <= self.count or (self.count and not self._rows):
            raise IndexError(f"records {lo}..{hi} of {self.count} (or released)")
        out = RecordsBuilder()
        out._rows = self._rows[lo:hi]
        out._stamps = self._stamps[lo:hi]
        out.has_headers = self.has_headers
        return out

    def release(self) -> None:
        """Free the records (after the batch is done); the timestamps stay."""
        self._rows = []
