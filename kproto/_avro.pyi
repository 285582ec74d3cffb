"""Stub of the Cython Avro decoder loop (kproto/_avro.pyx); its twin: kproto._pure.avro."""

from typing import Any

import numpy as np

OPS: int
KINDS: int
ERRORS: int
MAX_DEPTH: int
ZERO_SIZE_ITEMS: int
ENCODE_OPS: int
ENCODE_ERRORS: int

def run(nodes: np.ndarray, table: np.ndarray, slots: np.ndarray, root: int, root_slot: int,
        defaults: bytes, buffers: list[Any], buf_index: np.ndarray, starts: np.ndarray,
        lengths: np.ndarray, skip: int, errors_null: bool,
        ) -> tuple[list[tuple[Any, ...]], np.ndarray, tuple[int, ...] | None]: ...
def run_encode(nodes: np.ndarray, table: np.ndarray, root: int, defaults: bytes,
               valid: list[Any], offsets: list[Any], data: list[Any], widths: list[int],
               n: int, prefix: bytes, holds_null: bool,
               ) -> tuple[Any, Any, Any, int, tuple[int, ...] | None]: ...
