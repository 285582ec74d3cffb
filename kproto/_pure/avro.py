"""Pure-Python twin of ``kproto._avro``: the Avro decoder loop, readable and slow (the
oracle the Cython loop is tested against).

``run`` executes a compiled program (``kproto.formats._avro_program``: the op codes, slot
kinds and error codes are defined here and imported there) over one value per row and
fills, per output slot, the buffers an Arrow array is built from. It raises nothing for
bad data: it reports ``(row, code, a, b, offset)`` and the caller words it.

Avro binary encoding (the specification's "Binary Encoding"): int and long are zigzag
varints (at most 5 and 10 bytes); float and double are little-endian IEEE 754; bytes and
string are a long length then the bytes; fixed is its size in bytes; an enum is its index
(an int); a union is a long branch index then the branch's value; arrays and maps are
blocks: a long count (0 ends; a negative count -n says n items follow, preceded by a
long byte size of the block), then the items (a map's: a string key, then the value);
a record is its fields in order.
"""

from __future__ import annotations

from typing import Any

import numpy as np

# ---- ops
(OP_NULL, OP_NULLS_INTO, OP_BOOL, OP_INT, OP_INT_TO_LONG, OP_INT_TO_FLOAT, OP_INT_TO_DOUBLE,
 OP_LONG, OP_LONG_TO_FLOAT, OP_LONG_TO_DOUBLE, OP_FLOAT, OP_FLOAT_TO_DOUBLE, OP_DOUBLE,
 OP_BYTES, OP_STRING, OP_FIXED, OP_DEC_BYTES, OP_DEC_FIXED, OP_ENUM, OP_ARRAY, OP_MAP,
 OP_RECORD, OP_UNION, OP_TAG, OP_DEFAULT, OP_SKIP_VARINT, OP_SKIP_BYTES, OP_SKIP_N,
 OP_SKIP_ARRAY, OP_SKIP_MAP, OP_SKIP_RECORD, OP_SKIP_UNION) = range(32)
# ---- slot kinds
K_NULL, K_FIXED, K_BOOL, K_BINARY, K_LIST, K_MAP, K_STRUCT, K_UNION = range(8)
# ---- errors
(ERR_TRUNCATED, ERR_VARINT, ERR_NEG_LENGTH, ERR_BOOL, ERR_UTF8, ERR_ENUM, ERR_BRANCH,
 ERR_UNREADABLE_BRANCH, ERR_ENUM_SYMBOL, ERR_DECIMAL, ERR_COUNT, ERR_TRAILING, ERR_DEPTH,
 ERR_SHORT, ERR_TOO_BIG) = range(1, 16)

#: How deep a value may nest (calls of the loop within one value).
MAX_DEPTH = 500
#: Items that take no bytes (nulls, empty records) a value may hold: this plus 64 per byte.
ZERO_SIZE_ITEMS = 1 << 16
_I32_MAX = 2**31 - 1


class _Bad(Exception):
    def __init__(self, code: int, a: int = 0, b: int = 0) -> None:
        self.code, self.a, self.b = code, a, b


class _Out:
    """One slot's buffers: validity bits (None until the first null), data, offsets."""

    __slots__ = ("length", "nulls", "valid", "data", "offsets")

    def __init__(self, kind: int) -> None:
        self.length = 0
        self.nulls = 0
        self.valid: bytearray | None = None
        self.data = bytearray()
        self.offsets = bytearray(b"\0\0\0\0" if kind in (K_BINARY, K_LIST, K_MAP) else b"")

    def snapshot(self) -> tuple[Any, ...]:
        return (self.length, self.nulls, None if self.valid is None else bytes(self.valid),
                len(self.data), len(self.offsets))

    def restore(self, snap: tuple[Any, ...]) -> None:
        self.length, self.nulls, valid, data_len, offsets_len = snap
        self.valid = None if valid is None else bytearray(valid)
        del self.data[data_len:]
        del self.offsets[offsets_len:]

    def mark(self, valid: bool) -> None:
        """Count a value at row ``length`` (the bitmap starts at the first null)."""
        if not valid:
            self.nulls += 1
            if self.valid is None:
                self.valid = bytearray(b"\xff" * ((self.length + 8) // 8))
        if self.valid is not None:
            row = self.length
            while len(self.valid) <= row >> 3:
                self.valid.append(0)
            if valid:
                self.valid[row >> 3] |= 1 << (row & 7)
            else:
                self.valid[row >> 3] &= ~(1 << (row & 7)) & 0xFF
        self.length += 1


class _Loop:
    def __init__(self, nodes: Any, table: Any, slots: Any, defaults: bytes) -> None:
        self.nodes = [list(map(int, n)) for n in nodes]
        self.table = [int(x) for x in table]
        self.slots = [list(map(int, s)) for s in slots]
        self.outs = [_Out(s[0]) for s in self.slots]
        self.defaults = defaults
        self.buf: Any = b""
        self.pos = self.end = 0
        self.budget = 0

    # ------------------------------------------------------------------ reading

    def take(self, n: int) -> bytes:
        if n > self.end - self.pos:
            raise _Bad(ERR_TRUNCATED, n, self.end - self.pos)
        data = bytes(self.buf[self.pos:self.pos + n])
        self.pos += n
        return data

    def varint(self, max_bytes: int, last_max: int) -> int:
        u = shift = 0
        for i in range(max_bytes):
            if self.pos >= self.end:
                raise _Bad(ERR_TRUNCATED, 1, 0)
            byte = self.buf[self.pos]
            self.pos += 1
            if i == max_bytes - 1 and byte > last_max:
                raise _Bad(ERR_VARINT)
            u |= (byte & 0x7F) << shift
            if byte < 0x80:
                return (u >> 1) ^ -(u & 1)
            shift += 7
        raise AssertionError("unreachable")

    def long(self) -> int:
        return self.varint(10, 0x01)

    def int32(self) -> int:
        return self.varint(5, 0x0F)

    def length(self) -> int:
        n = self.long()
        if n < 0:
            raise _Bad(ERR_NEG_LENGTH, n)
        if n > self.end - self.pos:
            raise _Bad(ERR_TRUNCATED, n, self.end - self.pos)
        return n

    def block_count(self, min_size: int) -> int:
        """The item count of the next block (0: the end), checked against the bytes left."""
        count = self.long()
        if count < 0:
            if count == -(2**63):
                raise _Bad(ERR_COUNT, count, self.end - self.pos)
            count = -count
            self.length()                                  # the block's byte size
        left = self.end - self.pos
        if min_size > 0:
            if count > left // min_size:
                raise _Bad(ERR_COUNT, count, left)
        else:
            if count > self.budget:
                raise _Bad(ERR_COUNT, count, left)
            self.budget -= count
        return count

    def check_utf8(self, data: bytes) -> None:
        """Strict UTF-8 (the error points at the string's first byte)."""
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            self.pos -= len(data)
            raise _Bad(ERR_UTF8) from None

    # ------------------------------------------------------------------ writing

    def put_binary(self, slot: int, data: bytes) -> None:
        out = self.outs[slot]
        out.data += data
        if len(out.data) > _I32_MAX:
            raise _Bad(ERR_TOO_BIG)
        out.offsets += len(out.data).to_bytes(4, "little")
        out.mark(True)

    def end_list(self, slot: int, child: int) -> None:
        n = self.outs[child].length
        if n > _I32_MAX:
            raise _Bad(ERR_TOO_BIG)
        out = self.outs[slot]
        out.offsets += n.to_bytes(4, "little")
        out.mark(True)

    def append_null(self, slot: int) -> None:
        kind, width, first, count = self.slots[slot]
        out = self.outs[slot]
        children = self.table[first:first + count]
        if kind == K_NULL:
            out.length += 1
            return
        if kind == K_UNION:
            out.data.append(0)
            out.offsets += self.outs[children[0]].length.to_bytes(4, "little")
            self.append_null(children[0])
            out.length += 1
            return
        if kind in (K_FIXED, K_BOOL):
            out.data += bytes(width)
        elif kind == K_BINARY:
            out.offsets += len(out.data).to_bytes(4, "little")
        elif kind in (K_LIST, K_MAP):
            out.offsets += self.outs[children[0]].length.to_bytes(4, "little")
        else:
            for child in children:
                self.append_null(child)
        out.mark(False)

    # ------------------------------------------------------------------ the loop

    def run(self, index: int, depth: int) -> None:
        if depth > MAX_DEPTH:
            raise _Bad(ERR_DEPTH, MAX_DEPTH)
        op, slot, a, b, c, d, _, _ = self.nodes[index]
        out = self.outs[slot] if slot >= 0 else None
        if op == OP_NULL:
            assert out is not None
            out.length += 1
        elif op == OP_NULLS_INTO:
            self.append_null(slot)
        elif op == OP_BOOL:
            byte = self.take(1)[0]
            if byte > 1:
                raise _Bad(ERR_BOOL, byte)
            assert out is not None
            out.data.append(byte)
            out.mark(True)
        elif OP_INT <= op <= OP_DOUBLE:
            assert out is not None
            out.data += self.number(op)
            out.mark(True)
        elif op in (OP_BYTES, OP_STRING):
            data = self.take(self.length())
            if op == OP_STRING:
                self.check_utf8(data)
            self.put_binary(slot, data)
        elif op == OP_FIXED:
            assert out is not None
            out.data += self.take(c)
            out.mark(True)
        elif op in (OP_DEC_BYTES, OP_DEC_FIXED):
            assert out is not None
            raw = self.take(self.length() if op == OP_DEC_BYTES else c)
            width, precision = self.table[d], self.table[d + 1]
            value = int.from_bytes(raw, "big", signed=True)
            if abs(value) >= 10**precision:
                self.pos -= len(raw)          # the error points at the decimal's bytes
                raise _Bad(ERR_DECIMAL, precision)
            out.data += value.to_bytes(width, "little", signed=True)
            out.mark(True)
        elif op == OP_ENUM:
            i = self.int32()
            if not 0 <= i < b:
                raise _Bad(ERR_ENUM, i, b)
            mapped = self.table[a + i]
            if mapped < 0:
                raise _Bad(ERR_ENUM_SYMBOL, i)
            assert out is not None
            out.data += mapped.to_bytes(4, "little", signed=True)
            out.mark(True)
        elif op in (OP_ARRAY, OP_MAP, OP_SKIP_ARRAY, OP_SKIP_MAP):
            is_map = op in (OP_MAP, OP_SKIP_MAP)
            while count := self.block_count(d if is_map else c):
                for _ in range(count):
                    if op == OP_MAP:
                        key = self.take(self.length())
                        self.check_utf8(key)
                        self.put_binary(c, key)
                    elif op == OP_SKIP_MAP:
                        self.take(self.length())
                    self.run(a, depth + 1)
            if op == OP_ARRAY:
                self.end_list(slot, self.table[self.slots[slot][2]])
            elif op == OP_MAP:
                self.end_list(slot, c)
        elif op in (OP_RECORD, OP_SKIP_RECORD):
            for step in self.table[a:a + b]:
                self.run(step, depth + 1)
            if out is not None:
                out.mark(True)
        elif op in (OP_UNION, OP_SKIP_UNION):
            i = self.long()
            if not 0 <= i < b:
                raise _Bad(ERR_BRANCH, i, b)
            target = self.table[a + i]
            if target < 0:
                raise _Bad(ERR_UNREADABLE_BRANCH, i, target)
            self.run(target, depth + 1)
        elif op == OP_TAG:
            assert out is not None
            out.data.append(c)
            out.offsets += self.outs[d].length.to_bytes(4, "little")
            out.length += 1
            self.run(a, depth + 1)
        elif op == OP_DEFAULT:
            saved = self.buf, self.pos, self.end
            self.buf, self.pos, self.end = self.defaults, c, c + d
            self.run(a, depth + 1)
            self.buf, self.pos, self.end = saved
        elif op == OP_SKIP_VARINT:
            self.long()
        elif op == OP_SKIP_BYTES:
            self.take(self.length())
        elif op == OP_SKIP_N:
            self.take(c)
        else:
            raise AssertionError(f"unknown op {op}")

    def number(self, op: int) -> bytes:
        if op <= OP_INT_TO_DOUBLE:
            v: Any = self.int32()
            kind = {OP_INT: "<i4", OP_INT_TO_LONG: "<i8", OP_INT_TO_FLOAT: "<f4",
                    OP_INT_TO_DOUBLE: "<f8"}[op]
            return np.array([v], np.int64).astype(kind).tobytes()
        if op <= OP_LONG_TO_DOUBLE:
            v = self.long()
            kind = {OP_LONG: "<i8", OP_LONG_TO_FLOAT: "<f4", OP_LONG_TO_DOUBLE: "<f8"}[op]
            return np.array([v], np.int64).astype(kind).tobytes()
        if op in (OP_FLOAT, OP_FLOAT_TO_DOUBLE):
            v = np.frombuffer(self.take(4), "<f4")
            return v.tobytes() if op == OP_FLOAT else v.astype("<f8").tobytes()
        return self.take(8)


def run(nodes: Any, table: Any, slots: Any, root: int, root_slot: int, defaults: bytes,
        buffers: list[Any], buf_index: Any, starts: Any, lengths: Any, skip: int,
        errors_null: bool) -> tuple[list[tuple[Any, ...]], Any, tuple[int, ...] | None]:
    """Decode value ``i`` (bytes ``starts[i]:starts[i] + lengths[i]`` of
    ``buffers[buf_index[i]]``; length -1: a null value) for every i, each after ``skip``
    header bytes.

    Returns (per slot: length, nulls, validity bitmap or None, data, offsets as NumPy
    arrays; the indexes i of bad values, int64; the first error as (i, code, a, b, byte
    offset in the value) or None). A bad value stops the loop, unless ``errors_null``: then
    it becomes a null and the loop goes on.
    """
    loop = _Loop(nodes, table, slots, defaults)
    views = [memoryview(b).cast("B") for b in buffers]
    bad: list[int] = []
    error: tuple[int, ...] | None = None
    for i in range(len(starts)):
        n = int(lengths[i])
        if n == -1:
            loop.append_null(root_slot)
            continue
        snaps = [o.snapshot() for o in loop.outs] if errors_null else None
        start = int(starts[i])
        loop.buf = views[int(buf_index[i])]
        loop.pos, loop.end = start + min(skip, n), start + n
        loop.budget = ZERO_SIZE_ITEMS + 64 * n
        try:
            if n < skip:
                raise _Bad(ERR_SHORT, n, skip)
            loop.run(root, 0)
            if loop.pos != loop.end:
                raise _Bad(ERR_TRAILING, loop.end - loop.pos)
        except _Bad as exc:
            if error is None:
                error = (i, exc.code, exc.a, exc.b, max(loop.pos - start, 0))
            bad.append(i)
            if not errors_null:
                break
            assert snaps is not None
            for out, snap in zip(loop.outs, snaps, strict=True):
                out.restore(snap)
            loop.append_null(root_slot)
    outs = []
    for out in loop.outs:
        valid = None
        if out.nulls:
            assert out.valid is not None
            valid = np.frombuffer(bytes(out.valid).ljust((out.length + 7) // 8, b"\0"),
                                  np.uint8)
        outs.append((out.length, out.nulls, valid, np.frombuffer(bytes(out.data), np.uint8),
                     np.frombuffer(bytes(out.offsets), np.uint8)))
    return outs, np.array(bad, dtype=np.int64), error




# =========================================================================== encoding
# The encoder's steps (kproto/formats/_avro_encode.py compiles them; _avro_enc.pxi mirrors
# the numbers). A node: op, source, a, b, c, d; a source: validity (uint8 per value or
# None), offsets (int64: n + 1 for binary/list/map, n value offsets for a dense union),
# data (the values, ``width`` bytes each), all indexed from 0 for that Arrow array.
(E_NULL, E_BOOL, E_INT, E_LONG, E_FLOAT, E_DOUBLE, E_BYTES, E_FIXED, E_DEC_BYTES,
 E_DEC_FIXED, E_ENUM, E_ARRAY, E_MAP, E_RECORD, E_DEFAULT, E_NULLABLE, E_BRANCH,
 E_UNION) = range(18)
(EERR_NULL, EERR_INT, EERR_BRANCH, EERR_DECIMAL, EERR_TOO_BIG, EERR_VALUE) = range(1, 7)
#: A source's validity byte for a value the compiler could not convert exactly: reaching
#: it is EERR_VALUE (node, index of the value in its array).
REFUSED = 2


class _EncBad(Exception):
    def __init__(self, code: int, node: int, value: int = 0) -> None:
        self.code, self.node, self.value = code, node, value


def _zigzag(n: int, out: bytearray) -> None:
    u = ((n << 1) ^ (n >> 63)) & (2**64 - 1)
    while u > 0x7F:
        out.append((u & 0x7F) | 0x80)
        u >>= 7
    out.append(u)


def run_encode(nodes: Any, table: Any, root: int, defaults: bytes, valid: list[Any],
               offsets: list[Any], data: list[Any], widths: list[int], n: int,
               prefix: bytes, holds_null: bool) -> tuple[Any, Any, Any, int, Any]:
    """Encode rows ``0..n-1`` of the root source: (data, int32 offsets, validity bitmap or
    None, null count, the error as (row, code, node, value) or None). A row that is null
    where the schema holds no null is a null value, not a datum."""
    steps = [list(map(int, x)) for x in nodes]
    tab = [int(x) for x in table]
    views = [memoryview(d).cast("B") if len(d) else b"" for d in data]
    out = bytearray()
    ends = [0]
    oks: list[bool] = []

    def ok(src: int, i: int) -> bool:
        return valid[src] is None or bool(valid[src][i])

    def i64(src: int, i: int) -> int:
        return int.from_bytes(views[src][8 * i:8 * i + 8], "little", signed=True)

    def enc(index: int, i: int) -> None:
        op, src, a, b, c, d = steps[index]
        if op == E_DEFAULT:
            out.extend(defaults[c:c + d])
            return
        if op in (E_NULLABLE, E_BRANCH):
            if ok(src, i):
                _zigzag(d if op == E_NULLABLE else c, out)
                enc(a, i)
            elif (c if op == E_NULLABLE else d) < 0:
                raise _EncBad(EERR_NULL, index)
            else:
                _zigzag(c if op == E_NULLABLE else d, out)
            return
        if op == E_NULL:
            return
        if op != E_UNION and not ok(src, i):
            raise _EncBad(EERR_NULL, index)
        if src >= 0 and valid[src] is not None and valid[src][i] == REFUSED:
            raise _EncBad(EERR_VALUE, index, i)
        if op == E_BOOL:
            out.append(views[src][i])
        elif op in (E_INT, E_LONG, E_ENUM):
            v = int.from_bytes(views[src][4 * i:4 * i + 4], "little", signed=True) \
                if op == E_ENUM else i64(src, i)
            if op == E_INT and not -(2**31) <= v < 2**31:
                raise _EncBad(EERR_INT, index, v)
            _zigzag(v, out)
        elif op == E_FLOAT:
            with np.errstate(over="ignore"):
                out.extend(np.frombuffer(views[src][8 * i:8 * i + 8], "<f8")
                           .astype("<f4").tobytes())
        elif op == E_DOUBLE:
            out.extend(views[src][8 * i:8 * i + 8])
        elif op == E_BYTES:
            s, e = int(offsets[src][i]), int(offsets[src][i + 1])
            _zigzag(e - s, out)
            out.extend(views[src][s:e])
        elif op == E_FIXED:
            out.extend(views[src][c * i:c * i + c])
        elif op in (E_DEC_BYTES, E_DEC_FIXED):
            w = widths[src]
            v = int.from_bytes(views[src][w * i:w * i + w], "little", signed=True)
            if op == E_DEC_BYTES:
                size = (v if v >= 0 else ~v).bit_length() // 8 + 1    # Java's toByteArray
                _zigzag(size, out)
            else:
                size = c
                if (v if v >= 0 else ~v).bit_length() >= 8 * c:
                    raise _EncBad(EERR_DECIMAL, index, c)
            out.extend(v.to_bytes(size, "big", signed=True))
        elif op in (E_ARRAY, E_MAP):
            s, e = int(offsets[src][i]), int(offsets[src][i + 1])
            if e > s:
                _zigzag(e - s, out)
                for j in range(s, e):
                    if op == E_MAP:
                        enc_key(c, j)
                    enc(a, j)
            out.append(0)
        elif op == E_RECORD:
            for step in tab[a:a + b]:
                enc(step, i)
        else:
            assert op == E_UNION
            k = int.from_bytes(views[src][8 * i:8 * i + 8], "little", signed=True)
            if not 0 <= k < 2 * b:
                raise _EncBad(EERR_BRANCH, index, k)
            _zigzag(tab[a + k], out)
            enc(tab[a + k + 1], int(offsets[src][i]))

    def enc_key(src: int, j: int) -> None:
        s, e = int(offsets[src][j]), int(offsets[src][j + 1])
        _zigzag(e - s, out)
        out.extend(views[src][s:e])

    root_src = steps[root][1]
    error = None
    for i in range(n):
        if not holds_null and root_src >= 0 and not ok(root_src, i):
            oks.append(False)
            ends.append(len(out))
            continue
        out.extend(prefix)
        try:
            enc(root, i)
        except _EncBad as exc:
            error = (i, exc.code, exc.node, exc.value)
            break
        if len(out) > 2**31 - 1:
            error = (i, EERR_TOO_BIG, root, 0)
            break
        oks.append(True)
        ends.append(len(out))
    nulls = oks.count(False)
    validity = np.packbits(np.array(oks, bool), bitorder="little") if nulls else None
    return (np.frombuffer(bytes(out), np.uint8), np.array(ends, np.int32), validity, nulls,
            error)


__all__ = ["run", "run_encode", "MAX_DEPTH", "ZERO_SIZE_ITEMS"]
