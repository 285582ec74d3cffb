"""The generic engine: any declared message + version -> an encoder and a decoder.

A :class:`~kproto.protocol.schema.Message` holds every version at once. For one
version, :func:`codec_for` walks the declaration once and builds a tree of small
closures (one per field) that read or write exactly that version's wire layout,
flexible or not; the result is cached. There is no per-version hand-written code.

Wire rules implemented here (PROTOCOL_NOTES §2.3-2.5):

* classic types: int16 string length, int32 bytes/array length, -1 = null;
  flexible versions: compact types (unsigned varint N+1, 0 = null) and a tagged
  field section at the end of every struct (uvarint count, then per field
  uvarint tag, uvarint size, bytes), tags strictly ascending;
* fields absent from a version decode to their default; writing a non-default
  value in a version that lacks the field raises unless the field is
  ``ignorable``; tagged fields equal to their default are not written;
* unknown tagged fields are kept as raw bytes under the ``"_unknown_tags"`` key
  (``{tag: bytes}``) and written back in tag order;
* an untagged nullable struct is preceded by an int8 marker (-1 null, 1 present).
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable
from typing import Any

from .._backend import backend
from ..errors import EncodeError, ProtocolError
from .schema import Field, Message

UNKNOWN_TAGS = "_unknown_tags"

_I8, _I16, _I32, _I64 = (struct.Struct(f) for f in (">b", ">h", ">i", ">q"))
_U16, _U32, _F64, _BOOL = (struct.Struct(f) for f in (">H", ">I", ">d", ">?"))
_FIXED = {
    "int8": _I8, "int16": _I16, "int32": _I32, "int64": _I64,
    "uint16": _U16, "uint32": _U32, "float64": _F64,
}
_MISSING = object()


class _Fail(Exception):
    """Internal: a decode/encode failure that collects the field path on its way up."""

    def __init__(self, message: str, pos: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.pos = pos
        self.path: list[str] = []

    def where(self) -> str:
        """``"field a.b[2].c: "``, or "" at the top level."""
        out = ""
        for part in reversed(self.path):
            out += part if part.startswith("[") or not out else "." + part
        return f"field {out}: " if out else ""


# --------------------------------------------------------------------------- reading


class Reader:
    """A bounds-checked cursor over a buffer (the decoders' only way to read bytes)."""

    __slots__ = ("buf", "pos", "end")

    def __init__(self, buf: Any, pos: int = 0) -> None:
        self.buf = memoryview(buf).cast("B") if not isinstance(buf, bytes) else buf
        self.pos = pos
        self.end = len(self.buf)

    def take(self, n: int) -> int:
        """Advance by ``n`` bytes; return the position where they start."""
        p = self.pos
        if n < 0 or p + n > self.end:
            raise _Fail(f"truncated: needed {n} bytes, {self.end - p} left", p)
        self.pos = p + n
        return p

    def fixed(self, s: struct.Struct) -> Any:
        return s.unpack_from(self.buf, self.take(s.size))[0]

    def uvarint(self) -> int:
        try:
            value, self.pos = backend.decode_uvarint(self.buf, self.pos)
        except ValueError as exc:  # DecodeError: its message, without its own "at byte"
            raise _Fail(getattr(exc, "message", str(exc)), self.pos) from None
        return value

    def raw(self, n: int) -> bytes:
        p = self.take(n)
        return bytes(self.buf[p:p + n])


def _length(r: Reader, compact: bool, width: struct.Struct) -> int:
    """A length/count prefix; -1 means null."""
    if compact:
        return r.uvarint() - 1
    return r.fixed(width)


def _string_reader(compact: bool, nullable: bool) -> Callable[[Reader], Any]:
    def read(r: Reader) -> str | None:
        start = r.pos
        n = _length(r, compact, _I16)
        if n < 0:
            if nullable and n == -1:
                return None
            raise _Fail(f"invalid string length {n}", start)
        p = r.take(n)
        try:
            return str(r.buf[p:p + n], "utf-8")
        except UnicodeDecodeError as exc:
            raise _Fail(f"invalid UTF-8 in string: {exc.reason}", p) from None
    return read


def _bytes_reader(compact: bool, nullable: bool, view: bool = False
                  ) -> Callable[[Reader], Any]:
    def read(r: Reader) -> bytes | memoryview | None:
        start = r.pos
        n = _length(r, compact, _I32)
        if n < 0:
            if nullable and n == -1:
                return None
            raise _Fail(f"invalid bytes length {n}", start)
        if view:  # zero-copy: a slice of the buffer being decoded
            p = r.take(n)
            return memoryview(r.buf)[p:p + n]
        return r.raw(n)
    return read


def _uuid_read(r: Reader) -> uuid.UUID:
    return uuid.UUID(bytes=r.raw(16))


def _bool_read(r: Reader) -> bool:
    return r.buf[r.take(1)] != 0


def _array_reader(item: Callable[[Reader], Any], compact: bool, nullable: bool
                  ) -> Callable[[Reader], Any]:
    def read(r: Reader) -> list[Any] | None:
        start = r.pos
        n = _length(r, compact, _I32)
        if n < 0:
            if nullable and n == -1:
                return None
            raise _Fail(f"invalid array length {n}", start)
        if n > r.end - r.pos:  # every element takes at least one byte: refuse bogus counts early
            raise _Fail(f"array claims {n} elements but only {r.end - r.pos} bytes are left", start)
        out = []
        for i in range(n):
            try:
                out.append(item(r))
            except _Fail as exc:
                exc.path.append(f"[{i}]")
                raise
        return out
    return read


def _primitive_reader(typ: str, compact: bool, nullable: bool, records_view: bool = False
                      ) -> Callable[[Reader], Any]:
    if typ in _FIXED:
        s = _FIXED[typ]
        return lambda r: r.fixed(s)
    if typ == "bool":
        return _bool_read
    if typ == "uuid":
        return _uuid_read
    if typ == "string":
        return _string_reader(compact, nullable)
    return _bytes_reader(compact, nullable, records_view and typ == "records")


def _read_tagged(r: Reader, tagged: dict[int, tuple[str, Callable[[Reader], Any]]],
                 out: dict[str, Any]) -> None:
    count_pos = r.pos
    count = r.uvarint()
    if count > r.end - r.pos:
        raise _Fail(f"tagged field count {count} exceeds the bytes left", count_pos)
    last = -1
    unknown: dict[int, bytes] = {}
    for _ in range(count):
        tag_pos = r.pos
        tag = r.uvarint()
        if tag <= last:
            raise _Fail(f"tagged field {tag} out of order (after {last})", tag_pos)
        last = tag
        size = r.uvarint()
        start = r.take(size)
        if tag in tagged:
            name, read = tagged[tag]
            sub = Reader(memoryview(r.buf)[: start + size], start)
            try:
                out[name] = read(sub)
            except _Fail as exc:
                exc.path.append(name)
                raise
            if sub.pos != start + size:
                raise _Fail(f"tagged field {name} (tag {tag}) has {start + size - sub.pos} "
                            "unread bytes", sub.pos)
        else:
            unknown[tag] = bytes(r.buf[start:start + size])
    if unknown:
        out[UNKNOWN_TAGS] = unknown


# --------------------------------------------------------------------------- writing


def _put_length(w: bytearray, n: int, compact: bool, width: struct.Struct) -> None:
    if compact:
        w += backend.encode_uvarint(n + 1)
    else:
        w += width.pack(n)


def _string_writer(compact: bool, nullable: bool) -> Callable[[bytearray, Any], None]:
    def write(w: bytearray, v: Any) -> None:
        if v is None:
            if not nullable:
                raise _Fail("null is not allowed here")
            _put_length(w, -1, compact, _I16)
            return
        if not isinstance(v, str):
            raise _Fail(f"expected str, got {type(v).__name__}")
        b = v.encode("utf-8")
        if len(b) > 0x7FFF:
            raise _Fail(f"string of {len(b)} bytes is longer than 32767")
        _put_length(w, len(b), compact, _I16)
        w += b
    return write


def _bytes_writer(compact: bool, nullable: bool) -> Callable[[bytearray, Any], None]:
    def write(w: bytearray, v: Any) -> None:
        if v is None:
            if not nullable:
                raise _Fail("null is not allowed here")
            _put_length(w, -1, compact, _I32)
            return
        try:
            b = memoryview(v)
        except TypeError:
            raise _Fail(f"expected bytes, got {type(v).__name__}") from None
        _put_length(w, b.nbytes, compact, _I32)
        w += b
    return write


def _fixed_writer(s: struct.Struct, typ: str) -> Callable[[bytearray, Any], None]:
    def write(w: bytearray, v: Any) -> None:
        if isinstance(v, bool) or not isinstance(v, (int, float) if typ == "float64" else int):
            raise _Fail(f"expected {typ}, got {type(v).__name__}")
        try:
            w += s.pack(v)
        except struct.error:
            raise _Fail(f"{v!r} is out of range for {typ}") from None
    return write


def _bool_write(w: bytearray, v: Any) -> None:
    if not isinstance(v, bool):
        raise _Fail(f"expected bool, got {type(v).__name__}")
    w.append(1 if v else 0)


def _uuid_write(w: bytearray, v: Any) -> None:
    if not isinstance(v, uuid.UUID):
        raise _Fail(f"expected uuid.UUID, got {type(v).__name__}")
    w += v.bytes


def _primitive_writer(typ: str, compact: bool, nullable: bool) -> Callable[[bytearray, Any], None]:
    if typ in _FIXED:
        return _fixed_writer(_FIXED[typ], typ)
    if typ == "bool":
        return _bool_write
    if typ == "uuid":
        return _uuid_write
    if typ == "string":
        return _string_writer(compact, nullable)
    return _bytes_writer(compact, nullable)


def _array_writer(item: Callable[[bytearray, Any], None], compact: bool, nullable: bool
                  ) -> Callable[[bytearray, Any], None]:
    def write(w: bytearray, v: Any) -> None:
        if v is None:
            if not nullable:
                raise _Fail("null is not allowed here")
            _put_length(w, -1, compact, _I32)
            return
        if isinstance(v, (str, bytes, dict)) or not hasattr(v, "__len__"):
            raise _Fail(f"expected a list, got {type(v).__name__}")
        _put_length(w, len(v), compact, _I32)
        for i, x in enumerate(v):
            try:
                item(w, x)
            except _Fail as exc:
                exc.path.append(f"[{i}]")
                raise
    return write


# --------------------------------------------------------------------------- compiling


class _StructCodec:
    """Reader and writer of one struct (or message body) at one version."""

    def __init__(self, fields: tuple[Field, ...], version: int, flexible: bool,
                 records_view: bool = False) -> None:
        self.fields = fields
        self.version = version
        self.flexible = flexible
        self.names = frozenset(f.name for f in fields) | {UNKNOWN_TAGS}
        # (name, reader or None when the field is not on the wire untagged, field)
        self.read_plan: list[tuple[str, Callable[[Reader], Any] | None, Field]] = []
        self.tag_readers: dict[int, tuple[str, Callable[[Reader], Any]]] = {}
        self.write_plan: list[tuple[str, Callable[[bytearray, Any], None], Field]] = []
        self.tag_writers: list[tuple[int, str, Callable[[bytearray, Any], None], Field]] = []
        self.absent: list[Field] = []
        for f in fields:
            on_wire = version in f.versions and (f.tag is None or flexible)
            if not on_wire:
                self.read_plan.append((f.name, None, f))
                self.absent.append(f)
                continue
            read, write = _field_codec(f, version, flexible, records_view)
            if f.tag is None:
                self.read_plan.append((f.name, read, f))
                self.write_plan.append((f.name, write, f))
            else:
                self.read_plan.append((f.name, None, f))
                self.tag_readers[f.tag] = (f.name, read)
                self.tag_writers.append((f.tag, f.name, write, f))
        self.tag_writers.sort(key=lambda t: t[0])

    def read(self, r: Reader) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, read, f in self.read_plan:
            if read is None:
                out[name] = f.default_value()
                continue
            try:
                out[name] = read(r)
            except _Fail as exc:
                exc.path.append(name)
                raise
        if self.flexible:
            _read_tagged(r, self.tag_readers, out)
        return out

    def write(self, w: bytearray, value: Any) -> None:
        if not isinstance(value, dict):
            raise _Fail(f"expected a dict, got {type(value).__name__}")
        extra = value.keys() - self.names
        if extra:
            known = sorted(self.names - {UNKNOWN_TAGS})
            raise _Fail(f"unknown field(s) {sorted(extra)}; known: {known}")
        for f in self.absent:
            v = value.get(f.name, _MISSING)
            if v is not _MISSING and not f.ignorable and not _is_default(f, v):
                raise _Fail(f"non-default value for field {f.name!r}, which version "
                            f"{self.version} does not have (it is in versions {f.versions})")
        for name, write, f in self.write_plan:
            v = value.get(name, _MISSING)
            try:
                write(w, f.default_value() if v is _MISSING else v)
            except _Fail as exc:
                exc.path.append(name)
                raise
        if self.flexible:
            self._write_tagged(w, value)

    def _write_tagged(self, w: bytearray, value: dict[str, Any]) -> None:
        items: list[tuple[int, bytes]] = []
        for tag, name, write, f in self.tag_writers:
            v = value.get(name, _MISSING)
            if v is _MISSING or _is_default(f, v):
                continue
            buf = bytearray()
            try:
                write(buf, v)
            except _Fail as exc:
                exc.path.append(name)
                raise
            items.append((tag, bytes(buf)))
        unknown = value.get(UNKNOWN_TAGS) or {}
        for tag, raw in unknown.items():
            if tag in self.tag_readers:
                raise _Fail(f"{UNKNOWN_TAGS} has tag {tag}, which is the known field "
                            f"{self.tag_readers[tag][0]!r}")
            items.append((tag, bytes(raw)))
        items.sort(key=lambda t: t[0])
        w += backend.encode_uvarint(len(items))
        for tag, raw in items:
            w += backend.encode_uvarint(tag)
            w += backend.encode_uvarint(len(raw))
            w += raw


def _is_default(f: Field, v: Any) -> bool:
    if f.type == "struct" and isinstance(v, dict):
        d = f.default_value()
        return d is not None and all(_is_default(c, v.get(c.name, _MISSING)) or
                                     v.get(c.name, _MISSING) is _MISSING for c in f.fields)
    return bool(v == f.default_value())


def _field_codec(f: Field, version: int, flexible: bool, records_view: bool = False
                 ) -> tuple[Callable[[Reader], Any], Callable[[bytearray, Any], None]]:
    compact = flexible and not f.noflex
    nullable = version in f.nullable
    if f.type == "struct_array":
        sc = _StructCodec(f.fields, version, flexible, records_view)
        return _array_reader(sc.read, compact, nullable), _array_writer(sc.write, compact, nullable)
    if f.type == "array":
        assert f.item is not None
        item_r = _primitive_reader(f.item, compact, False)
        item_w = _primitive_writer(f.item, compact, False)
        return _array_reader(item_r, compact, nullable), _array_writer(item_w, compact, nullable)
    if f.type == "struct":
        sc = _StructCodec(f.fields, version, flexible, records_view)
        if not nullable:
            return sc.read, sc.write
        return _nullable_struct(sc)
    return (_primitive_reader(f.type, compact, nullable, records_view),
            _primitive_writer(f.type, compact, nullable))


def _nullable_struct(sc: _StructCodec
                     ) -> tuple[Callable[[Reader], Any], Callable[[bytearray, Any], None]]:
    def read(r: Reader) -> dict[str, Any] | None:
        marker_pos = r.pos
        marker = r.fixed(_I8)
        if marker == -1:
            return None
        if marker != 1:
            raise _Fail(f"invalid nullable struct marker {marker}", marker_pos)
        return sc.read(r)

    def write(w: bytearray, v: Any) -> None:
        if v is None:
            w += b"\xff"
        else:
            w += b"\x01"
            sc.write(w, v)
    return read, write


class MessageCodec:
    """Encoder and decoder of one message at one version.

    With ``records_view``, records fields decode to zero-copy memoryviews of the
    input instead of bytes (the Fetch response slicer's reference twin uses this).
    """

    def __init__(self, message: Message, version: int, records_view: bool = False) -> None:
        self.message = message
        self.version = version
        self.flexible = version in message.flexible
        self._body = _StructCodec(message.fields, version, self.flexible, records_view)

    def _label(self) -> str:
        return f"{self.message.name} v{self.version}"

    def encode(self, fields: dict[str, Any]) -> bytes:
        w = bytearray()
        self.encode_into(w, fields)
        return bytes(w)

    def encode_into(self, w: bytearray, fields: dict[str, Any]) -> None:
        try:
            self._body.write(w, fields)
        except _Fail as exc:
            raise EncodeError(
                f"cannot encode {self._label()}: {exc.where()}{exc.message}") from None

    def decode(self, data: Any, pos: int = 0, *, whole: bool = True) -> tuple[dict[str, Any], int]:
        """Decode from ``data[pos:]``; return (fields, end position).

        With ``whole`` (the default) bytes left over after the message are an error.
        """
        r = Reader(data, pos)
        try:
            out = self._body.read(r)
            if whole and r.pos != r.end:
                raise _Fail(f"{r.end - r.pos} unexpected bytes after the message", r.pos)
        except _Fail as exc:
            raise self._decode_error(exc, r) from None
        return out, r.pos

    def _decode_error(self, exc: _Fail, r: Reader) -> ProtocolError:
        at = exc.pos if exc.pos is not None else r.pos
        return ProtocolError(f"cannot decode {self._label()}: {exc.where()}{exc.message}",
                             offset=at)

    def decode_lenient(self, data: Any, pos: int = 0) -> dict[str, Any]:
        """Decode what is there: a body cut short at a top-level field boundary
        takes defaults for the missing fields; trailing bytes are ignored."""
        r = Reader(data, pos)
        out: dict[str, Any] = {}
        try:
            for name, read, f in self._body.read_plan:
                if read is None or r.pos == r.end:
                    out[name] = f.default_value()
                    continue
                try:
                    out[name] = read(r)
                except _Fail as exc:
                    exc.path.append(name)
                    raise
        except _Fail as exc:
            raise self._decode_error(exc, r) from None
        return out


_CODECS: dict[tuple[str, int, bool], MessageCodec] = {}


def codec_for(message: Message, version: int, *, records_view: bool = False) -> MessageCodec:
    """The (cached) codec of ``message`` at ``version``."""
    key = (message.name, version, records_view)
    found = _CODECS.get(key)
    if found is None:
        found = _CODECS[key] = MessageCodec(message, version, records_view)
    return found
