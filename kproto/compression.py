"""Record-set compression codecs: gzip, snappy, lz4, zstd (PROTOCOL_NOTES §4).

The record decoder calls :func:`decompress` once per compressed batch (with
the GIL); the encoder calls :func:`compress`. Readers accept what every
producer writes:

* gzip: RFC 1952, concatenated members too;
* snappy: xerial framing (``\\x82SNAPPY\\0`` header, then ``[int32 length][raw block]``
  chunks: Java, kafka-python) *and* plain raw snappy (librdkafka, franz-go);
* lz4: the LZ4 frame format; for magic 0 the header checksum may be the broken
  one Kafka < 0.10 wrote (KAFKA-3160), so it is repaired before decoding;
* zstd: streaming frames, several of them, without assuming a content size.

lz4 and zstd each have two backends (:func:`backend`): python-lz4 and zstandard where
installed, else cramjam's LZ4 block codec inside frames this module reads and writes, and
the standard library's ``compression.zstd`` (Python 3.14+, PEP 784; ``backports.zstd``
before): what Pythons without lz4 and zstandard wheels (3.15) use. Either backend reads what
the other writes, and both keep the same limits.

Every failure is a :class:`~kproto.errors.CorruptRecordError` naming the codec;
output beyond ``max_size`` bytes (a decompression bomb) raises
:class:`~kproto.errors.DecompressionLimitError` before it is allocated.
"""

from __future__ import annotations

import importlib
import struct
import threading
import zlib
from typing import Any

from .errors import ConfigError, CorruptRecordError, DecompressionLimitError

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
CODEC_NAMES = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}
_BY_NAME = {v: k for k, v in CODEC_NAMES.items()}
#: Default cap on one batch's decompressed size (Kafka's own fetch ceiling is 50 MiB a
#: response; 256 MiB leaves room while stopping bombs).
DEFAULT_MAX_DECOMPRESSED = 256 * 1024 * 1024

#: Streams are decompressed this much at a time, so a bomb is stopped within one step of
#: the cap: the peak is max_decompressed + _STEP, whatever the stream claims or holds.
_STEP = 1 << 20

XERIAL_MAGIC = b"\x82SNAPPY\x00"
XERIAL_HEADER = 16
XERIAL_BLOCK = 32 * 1024
_LZ4_MAGIC = b"\x04\x22\x4d\x18"
#: an LZ4 frame's maximum block sizes by BD's 3 bits; kproto writes 64 KiB blocks like Java
_LZ4_BLOCK_MAX = {4: 64 << 10, 5: 256 << 10, 6: 1 << 20, 7: 4 << 20}

#: the libraries lz4 and zstd can use, the first importable one chosen (:func:`backend`)
BACKENDS = {LZ4: ("lz4", "cramjam"),
            ZSTD: ("zstandard", "compression.zstd", "backports.zstd")}
_backend: dict[int, str] = {}
_MODULES = {"lz4": "lz4.frame"}


def backend(codec: int) -> str:
    """The library that does ``codec`` (LZ4 or ZSTD) here: the first of
    ``BACKENDS[codec]`` that imports (python-lz4, then cramjam; zstandard, then the
    standard library's ``compression.zstd``, then ``backports.zstd``)."""
    name = _backend.get(codec)
    if name is None:
        for name in BACKENDS[codec]:
            try:
                importlib.import_module(_MODULES.get(name, name))
                break
            except ImportError:
                continue
        else:
            raise ConfigError(f"{CODEC_NAMES[codec]} needs one of {', '.join(BACKENDS[codec])} "
                              "installed")
        _backend[codec] = name
    return name


def _module(codec: int) -> Any:
    return importlib.import_module(_MODULES.get(backend(codec), backend(codec)))


def codec_id(codec: str | int | None) -> int:
    """``"lz4"``, ``"LZ4"``, ``3``, ``None``/``"none"`` -> the codec id."""
    if codec is None:
        return NONE
    if isinstance(codec, int) and codec in CODEC_NAMES:
        return codec
    if isinstance(codec, str) and codec.lower() in _BY_NAME:
        return _BY_NAME[codec.lower()]
    raise ConfigError(f"unknown compression codec {codec!r}; use one of "
                      f"{', '.join(CODEC_NAMES.values())}")


def _corrupt(codec: int, what: str, cause: BaseException | None = None) -> CorruptRecordError:
    err = CorruptRecordError(f"{CODEC_NAMES.get(codec, codec)}: {what}")
    err.__cause__ = cause
    return err


def _too_big(codec: int, max_size: int, declared: int | None = None
             ) -> DecompressionLimitError:
    if declared is not None:
        return DecompressionLimitError(
            f"{CODEC_NAMES[codec]}: a batch declares {declared} decompressed bytes, more than "
            f"max_decompressed ({max_size})")
    return DecompressionLimitError(
        f"{CODEC_NAMES[codec]}: a batch decompresses to more than {max_size} bytes "
        "(max_decompressed)")


# --------------------------------------------------------------------------- decompress


def decompress(codec: int, data: Any, *, magic: int = 2,
               max_size: int = DEFAULT_MAX_DECOMPRESSED) -> bytes:
    """Decompress one batch's records (``data``: any bytes-like object)."""
    out = decompress_buffer(codec, data, magic=magic, max_size=max_size)
    return out if isinstance(out, bytes) else bytes(out)


def decompress_buffer(codec: int, data: Any, *, magic: int = 2,
                      max_size: int = DEFAULT_MAX_DECOMPRESSED, offset: int | None = None,
                      total: int | None = None) -> Any:
    """Like :func:`decompress`, but may return the codec library's own buffer object
    (anything with the buffer protocol) to save a copy: what the record decoder uses.

    ``offset``, the byte offset of the batch (or message) in the record set, goes into
    the error raised for corrupt data, so the message says where. ``total`` is the record
    set's whole ``max_decompressed`` when ``max_size`` is what earlier batches left of it.
    """
    try:
        return _decompress(codec, data, magic, max_size)
    except DecompressionLimitError as exc:
        if total is None or max_size >= total:
            exc.offset = offset
            raise
        raise DecompressionLimitError(
            f"{exc.message}: only {max_size} of the record set's max_decompressed ({total}) "
            "were left after its earlier batches", offset=offset) from None
    except CorruptRecordError as exc:
        if exc.offset is None:
            exc.offset = offset
        raise


def _decompress(codec: int, data: Any, magic: int, max_size: int) -> Any:
    if codec == NONE:
        return bytes(data)
    if codec == GZIP:
        return _gunzip(data, max_size)
    if codec == SNAPPY:
        return _unsnappy(data, max_size)
    if codec == LZ4:
        if backend(LZ4) == "cramjam":
            return _unlz4_cramjam(data, magic, max_size)
        return _unlz4(data, magic, max_size)
    if codec == ZSTD:
        if magic < 2:
            raise _corrupt(codec, f"zstd is not allowed in magic {magic} messages")
        if backend(ZSTD) != "zstandard":
            return _unzstd_std(_module(ZSTD), data, max_size)
        return _unzstd(data, max_size)
    raise CorruptRecordError(f"unknown compression codec {codec}")


def _gunzip(data: Any, max_size: int) -> bytearray:
    out = bytearray()
    view = memoryview(data).cast("B")
    try:
        while view.nbytes:
            d = zlib.decompressobj(wbits=31)  # gzip container only
            src: Any = view
            while not d.eof:
                step = min(_STEP, max_size - len(out) + 1)
                chunk = d.decompress(src, step)
                out += chunk
                if len(out) > max_size:
                    raise _too_big(GZIP, max_size)
                src = d.unconsumed_tail
                if not src and len(chunk) < step:
                    break  # input used up before the end of the stream
            if not d.eof:
                raise _corrupt(GZIP, "truncated gzip stream")
            view = memoryview(d.unused_data)
            if view.nbytes and view[:2] != b"\x1f\x8b":
                break  # trailing garbage after the last member: ignored, like Java
    except zlib.error as exc:
        raise _corrupt(GZIP, f"invalid data ({exc})", exc) from None
    return out


def _uvarint_prefix(view: memoryview) -> int:
    """The uncompressed length at the head of a raw snappy block."""
    result = shift = 0
    for i in range(min(5, view.nbytes)):
        b = view[i]
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result
        shift += 7
    raise _corrupt(SNAPPY, "invalid block header")


def _snappy_block(block: memoryview, max_size: int) -> Any:
    import cramjam

    if _uvarint_prefix(block) > max_size:
        raise _too_big(SNAPPY, max_size)
    try:
        return cramjam.snappy.decompress_raw(block)  # a buffer-protocol object: no copy
    except Exception as exc:  # cramjam raises its own DecompressionError
        raise _corrupt(SNAPPY, f"invalid block ({exc})", exc) from None


def _unsnappy(data: Any, max_size: int) -> Any:
    view = memoryview(data).cast("B")
    if view[:8] != XERIAL_MAGIC:
        return _snappy_block(view, max_size)
    if view.nbytes < XERIAL_HEADER:
        raise _corrupt(SNAPPY, "truncated xerial header")
    # Walk the chunks once for their sizes, then decompress each into its place in one
    # buffer (no per-chunk objects to join).
    chunks, pos, total = [], XERIAL_HEADER, 0
    while pos < view.nbytes:
        if view.nbytes - pos < 4:
            raise _corrupt(SNAPPY, f"truncated xerial chunk length at byte {pos}")
        (n,) = struct.unpack_from(">i", view, pos)
        pos += 4
        if n < 0 or n > view.nbytes - pos:
            raise _corrupt(SNAPPY, f"xerial chunk of {n} bytes runs past the end at byte {pos}")
        block = view[pos:pos + n]
        size = _uvarint_prefix(block)
        total += size
        if total > max_size:
            raise _too_big(SNAPPY, max_size)
        chunks.append((block, size))
        pos += n
    return _snappy_into(chunks, total)


def _snappy_into(chunks: list[tuple[memoryview, int]], total: int) -> Any:
    import cramjam
    import numpy as np

    out = np.empty(total, np.uint8)     # every byte is written below: no zero-filling first
    target = memoryview(out.data)
    at = 0
    for block, size in chunks:
        try:
            written = cramjam.snappy.decompress_raw_into(block, target[at:at + size])
        except Exception as exc:  # cramjam raises its own DecompressionError
            raise _corrupt(SNAPPY, f"invalid block ({exc})", exc) from None
        if written != size:
            raise _corrupt(SNAPPY, f"block decompressed to {written} bytes, not {size}")
        at += size
    return out


def _xxh32(data: bytes, seed: int = 0) -> int:
    """xxHash32 of a few bytes (the LZ4 frame descriptor checksum)."""
    p1, p2, p3, p4, p5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
    m = 0xFFFFFFFF
    rotl = lambda x, r: ((x << r) | (x >> (32 - r))) & m  # noqa: E731
    n, i = len(data), 0
    if n >= 16:
        v = [(seed + p1 + p2) & m, (seed + p2) & m, seed & m, (seed - p1) & m]
        while i + 16 <= n:
            for k in range(4):
                v[k] = (rotl((v[k] + struct.unpack_from("<I", data, i)[0] * p2) & m, 13) * p1) & m
                i += 4
        h = (rotl(v[0], 1) + rotl(v[1], 7) + rotl(v[2], 12) + rotl(v[3], 18)) & m
    else:
        h = (seed + p5) & m
    h = (h + n) & m
    while i + 4 <= n:
        h = (rotl((h + struct.unpack_from("<I", data, i)[0] * p3) & m, 17) * p4) & m
        i += 4
    while i < n:
        h = (rotl((h + data[i] * p5) & m, 11) * p1) & m
        i += 1
    h ^= h >> 15
    h = (h * p2) & m
    h ^= h >> 13
    h = (h * p3) & m
    return h ^ (h >> 16)


def _lz4_descriptor_end(view: memoryview) -> int:
    """Offset of the header checksum byte: magic(4) FLG BD [size 8] [dict id 4]."""
    if view.nbytes < 7 or view[:4] != _LZ4_MAGIC:
        raise _corrupt(LZ4, "not an LZ4 frame")
    flg = view[4]
    return 6 + (8 if flg & 0x08 else 0) + (4 if flg & 0x01 else 0)


def _lz4_fix_header_checksum(view: memoryview) -> bytes:
    """KAFKA-3160: Kafka < 0.10 computed HC over magic+FLG+BD for magic 0. Recompute it."""
    end = _lz4_descriptor_end(view)
    fixed = bytearray(view)
    fixed[end] = (_xxh32(bytes(view[4:end])) >> 8) & 0xFF
    return bytes(fixed)


def _unlz4(data: Any, magic: int, max_size: int) -> Any:
    import lz4.frame

    view = memoryview(data).cast("B")
    src: Any = _lz4_fix_header_checksum(view) if magic == 0 else view
    try:  # a frame that declares its size is refused before anything is decompressed
        declared = lz4.frame.get_frame_info(src)["content_size"]
    except (RuntimeError, ValueError, TypeError):
        declared = 0  # no valid header: the decompressor says what is wrong
    if declared > max_size:
        raise _too_big(LZ4, max_size, declared)
    d = lz4.frame.LZ4FrameDecompressor()
    out = _Output(LZ4, max_size)
    try:
        while True:
            chunk = d.decompress(src, max_length=out.step())
            out.add(chunk)
            if d.eof or d.needs_input or not chunk:
                break
            src = b""  # more output is waiting inside the decompressor
    except RuntimeError as exc:
        raise _corrupt(LZ4, f"invalid frame ({exc})", exc) from None
    if not d.eof:
        raise _corrupt(LZ4, "truncated frame")
    return out.result()


def _lz4_frame(view: memoryview) -> tuple[int, int, int | None]:
    """Walk an LZ4 frame's blocks: (its length, a bound on its content from the block
    sizes, the content size it declares or None). Bytes after the frame are ignored, as
    python-lz4's decompressor does."""
    pos = _lz4_descriptor_end(view) + 1
    flg, bd = view[4], view[5]
    if view.nbytes < pos:
        raise _corrupt(LZ4, "truncated frame header")
    block_max = _LZ4_BLOCK_MAX.get((bd >> 4) & 7)
    if flg >> 6 != 1 or block_max is None:
        raise _corrupt(LZ4, f"invalid frame descriptor (FLG {flg:#04x}, BD {bd:#04x})")
    declared = int.from_bytes(view[6:14], "little") if flg & 0x08 else None
    block_checksum = 4 if flg & 0x10 else 0
    bound = 0
    while True:
        if view.nbytes - pos < 4:
            raise _corrupt(LZ4, "truncated frame")
        (n,) = struct.unpack_from("<I", view, pos)
        pos += 4
        if n == 0:  # the end mark, then the content checksum
            pos += 4 if flg & 0x04 else 0
            break
        size = n & 0x7FFFFFFF
        if size > block_max:
            raise _corrupt(LZ4, f"a block of {size} bytes is over the frame's {block_max}")
        bound += size if n >> 31 else block_max
        pos += size + block_checksum
    if pos > view.nbytes:
        raise _corrupt(LZ4, "truncated frame")
    return pos, bound, declared


def _unlz4_cramjam(data: Any, magic: int, max_size: int) -> Any:
    """_unlz4 by cramjam: into one buffer of the frame's bound, the cap + 1 at most."""
    import cramjam
    import numpy as np

    view = memoryview(data).cast("B")
    end, bound, declared = _lz4_frame(view)
    if declared is not None and declared > max_size:
        raise _too_big(LZ4, max_size, declared)
    src: Any = view[:end]
    if magic == 0:
        src = _lz4_fix_header_checksum(src)
    out = np.empty(min(bound, max_size + 1), np.uint8)   # pages untouched until written
    try:
        written = cramjam.lz4.decompress_into(src, memoryview(out.data))
    except Exception as exc:  # cramjam raises its own DecompressionError
        if bound > max_size and "failed to write whole buffer" in str(exc):
            raise _too_big(LZ4, max_size) from None
        raise _corrupt(LZ4, f"invalid frame ({exc})", exc) from None
    if written > max_size:
        raise _too_big(LZ4, max_size)
    return out[:written]


class _Output:
    """A stream's output, taken a step at a time under the cap. A stream that fits in one
    step (a record batch, almost always) comes back as the codec's own chunk: no second
    buffer to allocate, fault in and copy into."""

    __slots__ = ("codec", "max_size", "first", "rest", "size")

    def __init__(self, codec: int, max_size: int) -> None:
        self.codec, self.max_size = codec, max_size
        self.first: Any = b""
        self.rest: bytearray | None = None
        self.size = 0

    def step(self) -> int:
        return min(_STEP, self.max_size - self.size + 1)

    def add(self, chunk: Any) -> None:
        if not len(chunk):
            return
        self.size += len(chunk)
        if self.size > self.max_size:
            raise _too_big(self.codec, self.max_size)
        if self.rest is not None:
            self.rest += chunk
        elif len(self.first):           # a second step: from now on one bytearray
            self.rest = bytearray(self.first)
            self.rest += chunk
            self.first = b""
        else:
            self.first = chunk

    def result(self) -> Any:
        return self.rest if self.rest is not None else self.first


_zstd_local = threading.local()


def _zstd_check_frames_end(view: memoryview) -> None:
    """Raise for a zstd frame cut short: zstandard's stream reader returns what it has
    and no error when the input ends inside a frame (RFC 8878 framing walked here)."""
    pos = 0
    while pos < view.nbytes:
        if view.nbytes - pos < 4:
            raise _corrupt(ZSTD, "truncated frame")
        (magic,) = struct.unpack_from("<I", view, pos)
        if magic & 0xFFFFFFF0 == 0x184D2A50:  # a skippable frame: [size][bytes]
            if view.nbytes - pos < 8:
                raise _corrupt(ZSTD, "truncated frame")
            pos += 8 + struct.unpack_from("<I", view, pos + 4)[0]
            continue
        if magic != 0xFD2FB528:
            return  # not a frame: the decompressor says what is wrong
        fhd = view[pos + 4] if view.nbytes > pos + 4 else 0
        single = fhd >> 5 & 1
        pos += 5 + (1 - single) + (0, 1, 2, 4)[fhd & 3] + (single, 2, 4, 8)[fhd >> 6]
        last = 0
        while not last:
            if view.nbytes - pos < 3:
                raise _corrupt(ZSTD, "truncated frame")
            header = view[pos] | view[pos + 1] << 8 | view[pos + 2] << 16
            last, kind, size = header & 1, header >> 1 & 3, header >> 3
            pos += 3 + (1 if kind == 1 else size)
        pos += 4 if fhd & 0x04 else 0
    if pos > view.nbytes:
        raise _corrupt(ZSTD, "truncated frame")


def _unzstd(data: Any, max_size: int) -> Any:
    import zstandard

    _zstd_check_frames_end(memoryview(data).cast("B"))
    dctx = getattr(_zstd_local, "dctx", None)
    if dctx is None:
        dctx = _zstd_local.dctx = zstandard.ZstdDecompressor()
    try:  # a frame that declares its size is refused before anything is decompressed
        declared = zstandard.frame_content_size(data)
    except zstandard.ZstdError:
        declared = -1  # no valid header: the decompressor says what is wrong
    if declared > max_size:
        raise _too_big(ZSTD, max_size, declared)
    out = _Output(ZSTD, max_size)
    try:
        with dctx.stream_reader(data, read_across_frames=True, closefd=False) as reader:
            while True:
                chunk = reader.read(out.step())
                if not chunk:
                    break
                out.add(chunk)
    except zstandard.ZstdError as exc:
        raise _corrupt(ZSTD, f"invalid data ({exc})", exc) from None
    return out.result()


def _unzstd_std(zstd: Any, data: Any, max_size: int) -> Any:
    """_unzstd by ``compression.zstd``: one decompressor a frame, a step at a time."""
    view = memoryview(data).cast("B")
    try:  # a frame that declares its size is refused before anything is decompressed
        declared = zstd.get_frame_info(view).decompressed_size
    except zstd.ZstdError:
        declared = None  # no valid header: the decompressor says what is wrong
    if declared is not None and declared > max_size:
        raise _too_big(ZSTD, max_size, declared)
    out = _Output(ZSTD, max_size)
    src: Any = view
    try:
        while len(src):  # each frame (zstandard's read_across_frames)
            d = zstd.ZstdDecompressor()
            while not d.eof:
                chunk = d.decompress(src, max_length=out.step())
                out.add(chunk)
                src = b""
                if d.needs_input and not d.eof:
                    raise _corrupt(ZSTD, "truncated frame")
            src = d.unused_data
    except zstd.ZstdError as exc:
        raise _corrupt(ZSTD, f"invalid data ({exc})", exc) from None
    return out.result()


# --------------------------------------------------------------------------- compress


# the levels each codec has (Java's compression.gzip.level and compression.zstd.level); lz4
# frames take any level (negative: faster, past 16: 16) and snappy none
_LEVELS = {GZIP: (-1, 9), ZSTD: (-131072, 22)}


def check_level(codec: int, level: Any) -> None:
    """Raise ConfigError for a compression level ``codec`` does not have; None is its
    default (gzip 9, lz4 0, zstd 3), and negative levels are levels (zstd's and lz4's
    faster ones; gzip's -1: zlib's default, 6)."""
    if level is None:
        return
    if isinstance(level, bool) or not isinstance(level, int):
        raise ConfigError(f"compression level must be an int or None, not {level!r}")
    low, high = _LEVELS.get(codec, (level, level))
    if not low <= level <= high:
        raise ConfigError(f"compression level {level} is outside {CODEC_NAMES.get(codec, codec)}'s "
                          f"{low} to {high}")


def compress(codec: int, data: Any, *, level: int | None = None, magic: int = 2) -> bytes:
    """Compress a batch's records the way the Java client does, at the codec's ``level``
    (None: its default; see :func:`check_level`)."""
    check_level(codec, level)
    if codec == NONE:
        return bytes(data)
    if codec == GZIP:
        import gzip

        return gzip.compress(bytes(data), compresslevel=9 if level is None else level, mtime=0)
    if codec == SNAPPY:
        return _snappy_xerial(data)
    if codec == LZ4:
        lz4_frame = _lz4_frame_cramjam if backend(LZ4) == "cramjam" else _lz4_frame_python_lz4
        out = lz4_frame(data, level)
        if magic == 0:  # what Kafka < 0.10 expects: the broken header checksum (KAFKA-3160)
            view = memoryview(out)
            end = _lz4_descriptor_end(view)
            fixed = bytearray(out)
            fixed[end] = (_xxh32(bytes(view[:end])) >> 8) & 0xFF
            out = bytes(fixed)
        return bytes(out)
    if codec == ZSTD:
        if magic < 2:
            raise ConfigError("zstd needs record batches (magic 2)")
        if backend(ZSTD) != "zstandard":
            return _module(ZSTD).compress(data, level=3 if level is None else level)
        import zstandard

        return zstandard.ZstdCompressor(level=3 if level is None else level).compress(data)
    raise ConfigError(f"unknown compression codec {codec}")


def _lz4_frame_python_lz4(data: Any, level: int | None) -> Any:
    import lz4.frame

    return lz4.frame.compress(data, block_size=lz4.frame.BLOCKSIZE_MAX64KB,
                              compression_level=0 if level is None else level,
                              content_checksum=False, block_linked=False,
                              store_size=False)


def _lz4_frame_cramjam(data: Any, level: int | None) -> bytes:
    """The frame python-lz4 writes above, its blocks compressed by cramjam: independent
    64 KiB blocks, no checksums or content size; a block that does not shrink is stored.
    Levels as LZ4F's: below 0 faster (acceleration 1 - level), 3 and up LZ4HC (up to 12)."""
    import cramjam

    level = level or 0
    if level < 0:
        mode: dict[str, Any] = {"mode": "fast", "acceleration": 1 - level}
    elif level < 3:
        mode = {"mode": "default"}
    else:
        mode = {"mode": "high_compression", "compression": min(level, 12)}
    descriptor = b"\x60\x40"  # version 1, independent blocks; 64 KiB blocks
    out = [_LZ4_MAGIC, descriptor, bytes([(_xxh32(descriptor) >> 8) & 0xFF])]
    view = memoryview(data).cast("B")
    for pos in range(0, view.nbytes, _LZ4_BLOCK_MAX[4]):
        raw = view[pos:pos + _LZ4_BLOCK_MAX[4]]
        block = bytes(cramjam.lz4.compress_block(raw, store_size=False, **mode))
        if len(block) < raw.nbytes:
            out += [struct.pack("<I", len(block)), block]
        else:
            out += [struct.pack("<I", raw.nbytes | 0x80000000), bytes(raw)]
    out.append(b"\x00\x00\x00\x00")
    return b"".join(out)


def _snappy_xerial(data: Any) -> bytes:
    import cramjam

    view = memoryview(data).cast("B")
    out = [XERIAL_MAGIC, struct.pack(">ii", 1, 1)]
    for pos in range(0, view.nbytes, XERIAL_BLOCK):
        block = bytes(cramjam.snappy.compress_raw(view[pos:pos + XERIAL_BLOCK]))
        out.append(struct.pack(">i", len(block)))
        out.append(block)
    return b"".join(out)
