"""Malformed bytes raise with ``offset`` set: where decoding failed, as a number.

The Cython core's cursor (varints, Fetch slicing) and the record decoder pass ``offset=`` to
the error; the pure twins must give the same offset (the protocol engine, the Fetch slicer's
twin, sets it too).
"""

from __future__ import annotations

import struct

import numpy as np
import pytest

from kproto import _codec, _pure, protocol
from kproto.errors import CorruptRecordError, DecodeError, ProtocolError
from kproto.protocol import slicer as pure_fetch

from .record_sets import batch_v2, fetch_response, sample_records

TWINS = [pytest.param(_codec, id="cython"), pytest.param(_pure, id="pure")]


def _raised(fn, *args, **kwargs) -> Exception:
    try:
        fn(*args, **kwargs)
    except Exception as exc:  # noqa: BLE001 - the caller checks the class
        return exc
    raise AssertionError(f"{fn.__name__} accepted malformed input")


# --------------------------------------------------------------------------- varints


@pytest.mark.parametrize("impl", TWINS)
@pytest.mark.parametrize(("name", "wire", "text"), [
    ("decode_uvarint", b"\x80", "truncated unsigned varint"),
    ("decode_uvarint", b"\xff\xff\xff\xff\x10", "unsigned varint overflows 32 bits"),
    ("decode_uvarint", b"\x80\x80\x80\x80\x80\x00", "unsigned varint is longer than 5 bytes"),
    ("decode_varint", b"\xff\xff", "truncated varint"),
    ("decode_varlong", b"\xff" * 9 + b"\x02", "varlong overflows 64 bits"),
    ("decode_varlong", b"\x80" * 10 + b"\x00", "varlong is longer than 10 bytes"),
])
def test_varint_errors_carry_the_varint_start(impl, name: str, wire: bytes, text: str) -> None:
    for prefix in (b"", b"\x01\x02\x03"):
        for buf in (prefix + wire, bytearray(prefix + wire),
                    np.frombuffer(prefix + wire + b"\x00", np.int8)[:len(prefix + wire)]):
            exc = _raised(getattr(impl, name), buf, len(prefix))
            assert type(exc) is DecodeError
            assert exc.offset == len(prefix)
            assert str(exc) == f"{text} (at byte offset {len(prefix)})"


@pytest.mark.parametrize("impl", TWINS)
def test_no_buffer_is_a_type_error_in_both_twins(impl) -> None:
    # a typed memoryview takes None: the Cython core refuses it as memoryview() does
    for fn in (impl.crc32c, impl.crc32, impl.decode_uvarint, impl.decode_records):
        with pytest.raises(TypeError):
            fn(None)


@pytest.mark.parametrize("impl", TWINS)
def test_any_item_format_decodes_records(impl) -> None:
    data = batch_v2(sample_records(3), base_offset=4)
    want = [tuple(r) for r in _pure.decode_records(data)]
    for buf in (np.frombuffer(data, np.int8), memoryview(data).cast("b")):
        assert [tuple(r) for r in impl.decode_records(buf)] == want


# --------------------------------------------------------------------------- Fetch


def _pure_at(exc: Exception) -> int:
    """Where the engine twin says it failed: ``.offset``, as the Cython slicer."""
    assert isinstance(exc, ProtocolError) and isinstance(exc.offset, int), repr(exc)
    assert str(exc).endswith(f" (at byte offset {exc.offset})") and str(exc).count("at byte") == 1
    return exc.offset


@pytest.mark.parametrize("version", range(19))
def test_fetch_errors_carry_the_offset_the_engine_names(version: int) -> None:
    body = protocol.encode(1, version, "response", fetch_response(
        version, [batch_v2(sample_records(2)), b"xy"]))
    for n in range(len(body)):
        ours = _raised(_codec.slice_fetch, body[:n], version)
        theirs = _raised(pure_fetch.slice_fetch, body[:n], version)
        assert type(ours) is type(theirs) is ProtocolError
        assert isinstance(ours.offset, int) and ours.offset == _pure_at(theirs), (n, ours, theirs)
        assert str(ours).startswith("cannot slice FetchResponse: ")
        assert str(ours).endswith(f" (at byte offset {ours.offset})")
        assert str(ours).count("at byte") == 1


def _v16(partition_tags: bytes, response_tags: bytes, topics: bytes = b"\x02") -> bytes:
    return b"".join([
        struct.pack(">ihi", 0, 0, 0), topics, bytes(16),
        b"\x02", struct.pack(">ihqqq", 0, 0, 1, 1, 0),
        b"\x00", struct.pack(">i", -1), b"\x01",
        partition_tags, b"\x00", response_tags])


PARTITION_TAGS = 10 + 1 + 16 + 1 + 30 + 1 + 4 + 1   # where a _v16 body's partition tags start


@pytest.mark.parametrize(("body", "offset", "text"), [
    (_v16(b"\x00", b"\x01\x00\x05\x80\x80\x80\x80\x10"), PARTITION_TAGS + 5,
     "unsigned varint overflows 32 bits"),
    (_v16(b"\x00", b"\x01\x00\x09\x02\x00\x00\x00\x01\x02\xff\x00\x00"), PARTITION_TAGS + 11,
     "not UTF-8"),
    (_v16(b"\x02\x03\x00\x03\x00", b"\x00"), PARTITION_TAGS + 3, "out of order"),
    (_v16(b"\x05\x00", b"\x00"), PARTITION_TAGS, "tagged field count 5"),
    (_v16(b"\x00", b"\x00", topics=b"\x00"), 10, "invalid responses count -1"),
    (_v16(b"\x00", b"\x00", topics=b"\x7f"), 10, "responses claims 126 elements"),
], ids=["uvarint-overflow", "host-not-utf8", "tags-out-of-order", "tag-count", "null-array",
        "array-count"])
def test_malformed_fetch_bodies(body: bytes, offset: int, text: str) -> None:
    exc = _raised(_codec.slice_fetch, body, 16)
    assert type(exc) is ProtocolError and exc.offset == offset and text in str(exc)
    assert _pure_at(_raised(pure_fetch.slice_fetch, body, 16)) == offset


# --------------------------------------------------------------------------- records


@pytest.mark.parametrize("impl", TWINS)
def test_record_errors_carry_the_batch_offset(impl) -> None:
    first = batch_v2(sample_records(2), base_offset=0)
    second = bytearray(batch_v2(sample_records(2), base_offset=2))
    second[61] = 0x7F            # the first record's length: past the end of the batch
    exc = _raised(impl.decode_records, first + bytes(second), check_crc=False)
    assert type(exc) is CorruptRecordError and exc.offset == len(first)
    assert f"(byte {len(first) + 61} of the record set)" in str(exc)
    second[16] = 9               # magic
    exc = _raised(impl.decode_records, first + bytes(second), check_crc=False)
    assert type(exc) is CorruptRecordError and exc.offset == len(first) + 16
