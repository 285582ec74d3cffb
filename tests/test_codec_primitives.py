"""Varints and CRCs: both twins in the same run, against Kafka's vectors and independent
implementations (kafka-python's varints, the crc32c package, zlib).

The ``impl`` fixture runs each test on ``kproto._pure`` and ``kproto._codec``. The
extension must import: it fails (not skips) when it cannot, unless ``KPROTO_PURE=1``.
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import zlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import ModuleType

import crc32c as crc32c_pkg
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record import _crc32c as kafka_crc32c
from kafka.record import util as kafka_util

import kproto._pure
from kproto.errors import DecodeError, EncodeError

PURE_REQUESTED = os.environ.get("KPROTO_PURE") == "1"
INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)
UINT32 = st.integers(0, 2**32 - 1)
FUZZ = settings(max_examples=300, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow])


def _extension() -> ModuleType:
    try:
        import kproto._codec as codec
    except ImportError as exc:
        if PURE_REQUESTED:
            pytest.skip("KPROTO_PURE=1 and the extension is not built")
        pytest.fail(f"kproto._codec does not import ({exc}): build it with "
                    "`pip install -e . --no-build-isolation`, or set KPROTO_PURE=1",
                    pytrace=False)
    return codec


@pytest.fixture(scope="module", params=["pure", "cython"])
def impl(request: pytest.FixtureRequest) -> ModuleType:
    return kproto._pure if request.param == "pure" else _extension()


@pytest.fixture(scope="module")
def ext() -> ModuleType:
    return _extension()


# --------------------------------------------------------------------------- vectors
# Kafka's ByteUtilsTest (PROTOCOL_NOTES §7) plus every 7-bit boundary and the type limits.

UVARINT = [
    (0, "00"), (1, "01"), (127, "7f"), (128, "8001"), (129, "8101"), (255, "ff01"),
    (300, "ac02"), (1000, "e807"), (8192, "8040"), (16383, "ff7f"), (16384, "808001"),
    (32767, "ffff01"), (2097151, "ffff7f"), (2097152, "80808001"), (268435455, "ffffff7f"),
    (268435456, "8080808001"), (2**31 - 1, "ffffffff07"), (2**31, "8080808008"),
    (2**32 - 1, "ffffffff0f"),
]
VARINT = [
    (0, "00"), (-1, "01"), (1, "02"), (63, "7e"), (-64, "7f"), (64, "8001"), (-65, "8101"),
    (8191, "fe7f"), (-8192, "ff7f"), (8192, "808001"), (-8193, "818001"),
    (1048575, "feff7f"), (-1048576, "ffff7f"), (1048576, "80808001"), (-1048577, "81808001"),
    (134217727, "feffff7f"), (-134217728, "ffffff7f"), (134217728, "8080808001"),
    (-134217729, "8180808001"), (2**31 - 1, "feffffff0f"), (-(2**31), "ffffffff0f"),
]
VARLONG = [
    (0, "00"), (-1, "01"), (1, "02"), (63, "7e"), (-64, "7f"), (64, "8001"), (-65, "8101"),
    (8191, "fe7f"), (-8192, "ff7f"), (8192, "808001"), (-8193, "818001"),
    (2**31 - 1, "feffffff0f"), (-(2**31), "ffffffff0f"), (2**31, "8080808010"),
    (17179869183, "feffffff7f"), (-17179869184, "ffffffff7f"),
    (17179869184, "808080808001"), (-17179869185, "818080808001"),
    (2**62 - 1, "feffffffffffffff7f"), (2**62, "80808080808080808001"),
    (2**63 - 1, "feffffffffffffffff01"), (-(2**63), "ffffffffffffffffff01"),
]
KINDS = {"uvarint": UVARINT, "varint": VARINT, "varlong": VARLONG}
ALL_VECTORS = [(kind, value, hexed) for kind, table in KINDS.items() for value, hexed in table]
NAMES = {"uvarint": "unsigned varint", "varint": "varint", "varlong": "varlong"}


def ops(impl: ModuleType, kind: str) -> tuple:
    return (getattr(impl, f"encode_{kind}"), getattr(impl, f"decode_{kind}"),
            getattr(impl, f"size_of_{kind}"))


@pytest.mark.parametrize("kind", list(KINDS))
def test_vectors(impl: ModuleType, kind: str) -> None:
    encode, decode, size = ops(impl, kind)
    for value, hexed in KINDS[kind]:
        wire = bytes.fromhex(hexed)
        assert encode(value) == wire, value
        assert size(value) == len(wire), value
        assert decode(wire) == (value, len(wire)), value
        # between junk (continuation bytes before, so an ignored pos would misread)
        framed = b"\xff\x80\x81" + wire + b"\x80\x01junk"
        assert decode(framed, 3) == (value, 3 + len(wire)), value


def test_vectors_agree_with_kafka_python() -> None:
    # kafka-python's varint is Kafka's varlong (64-bit zigzag)
    for kind, value, hexed in ALL_VECTORS:
        if kind == "uvarint":
            continue
        theirs = bytearray()
        kafka_util.encode_varint(value, theirs.append)
        assert bytes(theirs) == bytes.fromhex(hexed), value
        assert kafka_util.decode_varint(bytes(theirs), 0) == (value, len(theirs))


def test_uvarint_encodes_up_to_64_bits(impl: ModuleType) -> None:
    assert impl.encode_uvarint(2**32) == bytes.fromhex("8080808010")
    assert impl.encode_uvarint(2**64 - 1) == bytes.fromhex("ffffffffffffffffff01")
    assert impl.size_of_uvarint(2**64 - 1) == 10
    # ...but Kafka's unsigned varints are uint32: decoding them back is an error
    with pytest.raises(DecodeError, match="overflows 32 bits"):
        impl.decode_uvarint(impl.encode_uvarint(2**32))
    with pytest.raises(DecodeError, match="longer than 5 bytes"):
        impl.decode_uvarint(impl.encode_uvarint(2**35))


def test_zigzag(impl: ModuleType) -> None:
    pairs = [(0, 0), (-1, 1), (1, 2), (-2, 3), (2**31 - 1, 2**32 - 2), (-(2**31), 2**32 - 1),
             (2**63 - 1, 2**64 - 2), (-(2**63), 2**64 - 1)]
    for signed, unsigned in pairs:
        assert impl.zigzag_encode(signed) == unsigned
        assert impl.zigzag_decode(unsigned) == signed
    for bad in (2**63, -(2**63) - 1):
        with pytest.raises(EncodeError):
            impl.zigzag_encode(bad)
    for bad in (-1, 2**64):
        with pytest.raises(DecodeError):
            impl.zigzag_decode(bad)


def test_non_canonical_encodings_are_accepted(impl: ModuleType) -> None:
    # padded with 0x80 groups, as Kafka's readers accept
    assert impl.decode_uvarint(b"\x80\x00") == (0, 2)
    assert impl.decode_uvarint(b"\x81\x80\x80\x80\x00") == (1, 5)
    assert impl.decode_varlong(b"\x80" * 9 + b"\x00") == (0, 10)


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize(("kind", "value", "hexed"), ALL_VECTORS)
def test_every_truncation_raises(impl: ModuleType, kind: str, value: int, hexed: str) -> None:
    decode = getattr(impl, f"decode_{kind}")
    wire = bytes.fromhex(hexed)
    parent = b"\x01\x02" + wire  # the full varint follows each truncated view
    for cut in range(len(wire)):
        piece = wire[:cut]
        views = [piece, bytearray(piece), memoryview(parent)[2:2 + cut],
                 np.frombuffer(parent, np.uint8)[2:2 + cut]]
        for view in views:
            with pytest.raises(DecodeError, match=f"truncated {NAMES[kind]}") as info:
                decode(view)
            assert info.value.offset == 0
        # a slice of a bigger buffer ends where it ends, even if the parent goes on
        with pytest.raises(DecodeError, match="truncated") as info:
            decode(memoryview(parent)[:2 + cut], 2)
        assert info.value.offset == 2
        with pytest.raises(DecodeError, match="truncated"):
            decode(np.frombuffer(parent, np.uint8)[:2 + cut], 2)


@pytest.mark.parametrize("kind", ["uvarint", "varint"])
def test_too_long_or_overflowing_32_bit(impl: ModuleType, kind: str) -> None:
    decode = getattr(impl, f"decode_{kind}")
    # Kafka's ByteUtilsTest: a 6th byte is an error
    for bad in ("ffffffffff01", "8080808080" "00", "8080808080"):
        with pytest.raises(DecodeError, match=f"{NAMES[kind]} is longer than 5 bytes") as info:
            decode(b"\x00\x00" + bytes.fromhex(bad), 2)
        assert info.value.offset == 2
        assert "at byte offset 2" in str(info.value)
    # a 5th byte above 0x0F carries bits 32+
    for last in (0x10, 0x1F, 0x7F):
        with pytest.raises(DecodeError, match="overflows 32 bits"):
            decode(b"\xff\xff\xff\xff" + bytes([last]))


def test_too_long_or_overflowing_64_bit(impl: ModuleType) -> None:
    with pytest.raises(DecodeError, match="varlong is longer than 10 bytes"):
        impl.decode_varlong(bytes.fromhex("ff" * 10 + "01"))
    with pytest.raises(DecodeError, match="varlong is longer than 10 bytes"):
        impl.decode_varlong(b"\x80" * 10)
    for last in (0x02, 0x7F):
        with pytest.raises(DecodeError, match="varlong overflows 64 bits"):
            impl.decode_varlong(b"\xff" * 9 + bytes([last]))


def test_position_out_of_range(impl: ModuleType) -> None:
    for decode in (impl.decode_uvarint, impl.decode_varint, impl.decode_varlong):
        for pos in (-1, 4, 2**70, -(2**70)):
            with pytest.raises(DecodeError, match="outside the buffer of 3 bytes"):
                decode(b"\x01\x02\x03", pos)
        with pytest.raises(DecodeError, match="truncated"):
            decode(b"\x01\x02\x03", 3)  # the end itself is a position, with nothing there
        with pytest.raises(TypeError):
            decode(b"\x01", 0.0)


def test_encode_out_of_range(impl: ModuleType) -> None:
    bad = {"uvarint": (-1, 2**64), "varint": (2**31, -(2**31) - 1),
           "varlong": (2**63, -(2**63) - 1)}
    for kind, values in bad.items():
        encode, _, size = ops(impl, kind)
        for value in values:
            with pytest.raises(EncodeError, match="out of range"):
                encode(value)
            with pytest.raises(EncodeError, match="out of range"):
                size(value)
        with pytest.raises(TypeError):
            encode(1.0)  # no silent truncation of floats
    assert impl.encode_varint(np.int32(-1)) == b"\x01"  # anything with __index__ is fine


def test_non_contiguous_buffers_are_refused(impl: ModuleType) -> None:
    strided = memoryview(b"\x01\x02\x03\x04")[::2]
    with pytest.raises(TypeError):
        impl.decode_uvarint(strided)
    with pytest.raises(TypeError):
        impl.crc32c(strided)
    with pytest.raises(TypeError):
        impl.crc32(np.arange(8, dtype=np.uint8)[::2])


@FUZZ
@given(data=st.binary(max_size=12), pos=st.integers(-2, 14))
def test_fuzz_twins_agree_and_never_crash(ext: ModuleType, data: bytes, pos: int) -> None:
    for name in ("decode_uvarint", "decode_varint", "decode_varlong"):
        outcomes = []
        for mod in (kproto._pure, ext):
            try:
                outcomes.append(getattr(mod, name)(data, pos))
            except DecodeError as exc:
                outcomes.append((str(exc), exc.offset))
        assert outcomes[0] == outcomes[1], name
        if isinstance(outcomes[0][0], int):  # decoded: re-encoding is at most as long
            assert 0 <= pos < outcomes[0][1] <= len(data)


# --------------------------------------------------------------------------- oracles


@FUZZ
@given(v32=INT32, v64=INT64, u32=UINT32)
def test_twins_and_kafka_python_agree(ext: ModuleType, v32: int, v64: int, u32: int) -> None:
    theirs32, theirs64 = bytearray(), bytearray()
    kafka_util.encode_varint(v32, theirs32.append)
    kafka_util.encode_varint(v64, theirs64.append)
    junk = b"\xff\x80"
    for mod in (kproto._pure, ext):
        assert mod.encode_varint(v32) == theirs32
        assert mod.encode_varlong(v64) == theirs64
        assert mod.size_of_varint(v32) == kafka_util.size_of_varint(v32) == len(theirs32)
        assert mod.size_of_varlong(v64) == kafka_util.size_of_varint(v64) == len(theirs64)
        assert mod.decode_varint(junk + theirs32, 2) == (v32, 2 + len(theirs32))
        assert mod.decode_varlong(junk + theirs64, 2) == (v64, 2 + len(theirs64))
        wire = mod.encode_uvarint(u32)
        assert mod.decode_uvarint(junk + wire, 2) == (u32, 2 + len(wire))
        assert mod.size_of_uvarint(u32) == len(wire)
        assert mod.zigzag_decode(mod.zigzag_encode(v64)) == v64
    assert kafka_util.decode_varint(bytes(theirs64), 0) == ext.decode_varlong(theirs64)


# --------------------------------------------------------------------------- CRCs

# librdkafka's unittest_rd_crc32c input is the whole zlib license block (843 bytes), not just
# its first sentence (which gives 0x9acb5f25).
ZLIB_LICENSE = (
    b"  This software is provided 'as-is', without any express or implied\n"
    b"  warranty.  In no event will the author be held liable for any damages\n"
    b"  arising from the use of this software.\n"
    b"\n"
    b"  Permission is granted to anyone to use this software for any purpose,\n"
    b"  including commercial applications, and to alter it and redistribute it\n"
    b"  freely, subject to the following restrictions:\n"
    b"\n"
    b"  1. The origin of this software must not be misrepresented; you must not\n"
    b"     claim that you wrote the original software. If you use this software\n"
    b"     in a product, an acknowledgment in the product documentation would be\n"
    b"     appreciated but is not required.\n"
    b"  2. Altered source versions must be plainly marked as such, and must not be\n"
    b"     misrepresented as being the original software.\n"
    b"  3. This notice may not be removed or altered from any source distribution."
)
CRC32C_VECTORS = [
    (b"", 0), (b"a", 0xC1D04330), (b"123456789", 0xE3069283), (ZLIB_LICENSE, 0x7DCDE113),
    # RFC 3720 (iSCSI) B.4
    (bytes(32), 0x8A9136AA), (b"\xff" * 32, 0x62A8AB43), (bytes(range(32)), 0x46DD794E),
    (bytes(range(31, -1, -1)), 0x113FDB5C),
]
CRC32_VECTORS = [(b"", 0), (b"a", 0xE8B7BE43), (b"123456789", 0xCBF43926),
                 (ZLIB_LICENSE, zlib.crc32(ZLIB_LICENSE))]


def test_crc32c_vectors(impl: ModuleType) -> None:
    for data, expected in CRC32C_VECTORS:
        assert crc32c_pkg.crc32c(data) == expected  # the vector itself is right
        assert impl.crc32c(data) == expected
        assert impl.crc32c_software(data) == expected


def test_crc32_vectors(impl: ModuleType) -> None:
    for data, expected in CRC32_VECTORS:
        assert zlib.crc32(data) == expected
        assert impl.crc32(data) == expected


def test_crc_all_lengths_and_alignments(impl: ModuleType) -> None:
    buf = np.random.default_rng(7).integers(0, 256, 400, dtype=np.uint8).tobytes()
    for start in range(8):
        for n in range(301):
            piece = memoryview(buf)[start:start + n]
            want = crc32c_pkg.crc32c(bytes(piece))
            assert impl.crc32c(piece) == want, (start, n)
            assert impl.crc32c_software(piece) == want, (start, n)
            assert impl.crc32(piece) == zlib.crc32(piece), (start, n)


def test_crc_block_boundaries(ext: ModuleType) -> None:
    # around the 3-chain block sizes (3 x 256, 3 x 8192) and the GIL-release cut-off
    buf = os.urandom(3 * 8192 * 2 + 64)
    for n in (767, 768, 769, 1535, 1536, 1537, 24575, 24576, 24577, 32767, 32768, 32769,
              49152, 49159):
        for start in (0, 1, 5):
            piece = memoryview(buf)[start:start + n]
            want = crc32c_pkg.crc32c(piece)
            assert ext.crc32c(piece) == want, (start, n)
            assert ext._crc32c_nofold(piece) == want, (start, n)   # the 3 chains, also
            assert ext.crc32c_software(piece) == want, (start, n)   # where folding runs
            assert ext.crc32(piece) == zlib.crc32(piece), (start, n)


def test_crc_fold_boundaries(ext: ModuleType) -> None:
    # the VPCLMULQDQ fold (from 1024 bytes): 256-byte steps, then 64, 16, 8 and single bytes,
    # every start value carried through the first 32 bits
    buf = os.urandom(4 * 1024 + 64)
    sizes = [1023, 1024, 1025, 1031, 1032, 1039, 1040, 1087, 1088, 1279, 1280, 1281, 1343,
             1344, 2048, 2303, 4095, 4096]
    for n in sizes:
        for start in (0, 1, 3, 8, 63):
            piece = memoryview(buf)[start:start + n]
            for crc in (0, 1, 0xFFFFFFFF, 0x12345678):
                want = crc32c_pkg.crc32c(piece, crc)
                assert ext.crc32c(piece, crc) == want, (start, n, crc)
                assert ext._crc32c_nofold(piece, crc) == want, (start, n, crc)


@pytest.mark.parametrize("size", [1 << 20, (4 << 20) + 3])
def test_crc_large_buffers(impl: ModuleType, size: int) -> None:
    if impl is kproto._pure and size > 1 << 20:
        pytest.skip("one large buffer is enough for the byte-at-a-time twin")
    big = os.urandom(size)
    assert impl.crc32c(big) == crc32c_pkg.crc32c(big)
    assert impl.crc32(big) == zlib.crc32(big)
    if impl is not kproto._pure:
        assert impl.crc32c_software(big) == crc32c_pkg.crc32c(big)


@FUZZ
@given(a=st.binary(max_size=2000), b=st.binary(max_size=2000))
def test_crc_continuation_and_twins(ext: ModuleType, a: bytes, b: bytes) -> None:
    want_c, want = crc32c_pkg.crc32c(a + b), zlib.crc32(a + b)
    assert kafka_crc32c.crc(a + b) == want_c  # a third, independent CRC-32C
    for mod in (kproto._pure, ext):
        assert mod.crc32c(a + b) == want_c
        assert mod.crc32c(b, mod.crc32c(a)) == want_c
        assert mod.crc32c_software(b, mod.crc32c_software(a)) == want_c
        assert mod.crc32(b, mod.crc32(a)) == want
        assert mod.crc32(a + b) == want


def test_crc_start_value_is_taken_modulo_2_32(impl: ModuleType) -> None:
    # as zlib.crc32 and the crc32c package do
    for start in (-1, 2**32, 2**32 + 5, -(2**40), 2**70):
        assert impl.crc32(b"kafka", start) == zlib.crc32(b"kafka", start & 0xFFFFFFFF)
        assert impl.crc32c(b"kafka", start) == crc32c_pkg.crc32c(b"kafka", start)
    with pytest.raises(TypeError):
        impl.crc32c(b"kafka", 1.0)


def test_any_contiguous_buffer(impl: ModuleType) -> None:
    raw = bytes(range(256)) * 3
    want_c, want = crc32c_pkg.crc32c(raw), zlib.crc32(raw)
    views = [raw, bytearray(raw), memoryview(raw), memoryview(bytearray(raw)).toreadonly(),
             np.frombuffer(raw, np.uint8), np.frombuffer(raw, np.int8),
             np.frombuffer(raw, np.uint32), np.frombuffer(raw, np.uint8).reshape(3, 256)]
    for view in views:
        assert impl.crc32c(view) == want_c, type(view)
        assert impl.crc32(view) == want, type(view)
    wire = b"\x00" + impl.encode_varlong(-(2**40))
    for view in (bytearray(wire), memoryview(wire), np.frombuffer(wire, np.uint8),
                 np.frombuffer(wire, np.int8)):
        assert impl.decode_varlong(view, 1) == (-(2**40), len(wire))
    for empty in (b"", bytearray(), np.zeros(0, np.uint8)):
        assert impl.crc32c(empty) == 0
        assert impl.crc32(empty) == 0
        with pytest.raises(DecodeError, match="truncated"):
            impl.decode_uvarint(empty)


def test_crc_from_threads(ext: ModuleType) -> None:
    # big buffers run without the GIL: concurrent calls must not disturb each other
    bufs = [os.urandom((1 << 20) + i) for i in range(8)]
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(ext.crc32c, bufs * 4))
    assert got == [crc32c_pkg.crc32c(b) for b in bufs] * 4


@pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64")
                    or not os.path.exists("/proc/cpuinfo"), reason="x86 Linux only")
def test_sse42_is_used_when_the_cpu_has_it(ext: ModuleType) -> None:
    with open("/proc/cpuinfo") as f:
        has_sse42 = " sse4_2" in f.read()
    assert ext.HAVE_SSE42 is has_sse42
    assert ext.HAVE_ARM_CRC32 is False
    assert kproto._pure.HAVE_SSE42 is False


@pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64")
                    or not os.path.exists("/proc/cpuinfo"), reason="x86 Linux only")
def test_vpclmulqdq_folding_is_used_when_the_cpu_has_it(ext: ModuleType) -> None:
    with open("/proc/cpuinfo") as f:
        flags = next(line for line in f if line.startswith("flags")).split()
    wanted = {"sse4_2", "pclmulqdq", "avx512f", "avx512vl", "vpclmulqdq"}
    assert ext.HAVE_VPCLMULQDQ is wanted.issubset(flags)
    assert kproto._pure.HAVE_VPCLMULQDQ is False


@pytest.mark.skipif(platform.machine().lower() not in ("aarch64", "arm64")
                    or not sys.platform.startswith("linux"), reason="aarch64 Linux only")
def test_arm_crc32_is_used_when_the_cpu_has_it(ext: ModuleType) -> None:
    # the kernel's word (as the extension asks it), read here through libc's getauxval;
    # under qemu-user /proc/cpuinfo is the host's, the auxiliary vector is the guest CPU's
    import ctypes

    getauxval = ctypes.CDLL(None).getauxval
    getauxval.restype, getauxval.argtypes = ctypes.c_ulong, [ctypes.c_ulong]
    has_crc32 = bool(getauxval(16) & (1 << 7))      # AT_HWCAP, HWCAP_CRC32
    assert ext.HAVE_ARM_CRC32 is has_crc32
    assert ext.HAVE_SSE42 is False
    assert kproto._pure.HAVE_ARM_CRC32 is False


# --------------------------------------------------------------------------- selection


def test_twins_have_the_same_public_names(ext: ModuleType) -> None:
    """Every Cython function has its pure twin: in kproto._pure, except the Fetch
    slicer's, which is the protocol engine run over Fetch's schema."""
    from kproto.protocol import slicer

    public = {name for name in dir(ext) if not name.startswith("_")}
    assert public == set(kproto._pure.__all__) | {"slice_fetch"}
    assert callable(slicer.slice_fetch)


def test_extension_is_used_unless_pure_requested() -> None:
    from kproto import _backend

    assert _backend.IS_PURE is PURE_REQUESTED
    if PURE_REQUESTED:
        assert _backend.backend is kproto._pure
    else:
        assert _backend.backend is _extension()


def _select_in_subprocess(env_pure: bool, block_extension: bool) -> str:
    code = f"""
import sys, warnings
if {block_extension}:
    class Block:
        def find_spec(self, name, path=None, target=None):
            if name == "kproto._codec":
                raise ImportError("blocked for the test")
    sys.meta_path.insert(0, Block())
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    from kproto import _backend
print(_backend.IS_PURE, _backend.backend.__name__, [w.category.__name__ for w in caught])
"""
    env = {k: v for k, v in os.environ.items() if k != "KPROTO_PURE"}
    # the same kproto as this process, installed or not
    env["PYTHONPATH"] = os.pathsep.join([str(Path(kproto.__file__).parent.parent),
                                         env.get("PYTHONPATH", "")])
    if env_pure:
        env["KPROTO_PURE"] = "1"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env=env, timeout=120)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_selection_env_and_fallback() -> None:
    assert _select_in_subprocess(env_pure=True, block_extension=False) == \
        "True kproto._pure []"
    # a missing extension falls back to pure Python, loudly
    assert _select_in_subprocess(env_pure=False, block_extension=True) == \
        "True kproto._pure ['RuntimeWarning']"
    if not PURE_REQUESTED:
        assert _select_in_subprocess(env_pure=False, block_extension=False) == \
            "False kproto._codec []"
