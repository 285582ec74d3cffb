"""Inputs the fuzzers (tests/fuzz/) found, kept as bytes, with what must happen now.

Each ``FOUND`` entry is the fuzzer's input in its target's format (targets.py: a flags
or version byte, then the bytes decoded); the oracle must pass on it, and the test next
to it says what the fix does. Hand-written cases below cover the same roots directly.
"""

from __future__ import annotations

import functools
import struct
from pathlib import Path
from typing import Any

import pytest

from kproto import _codec, protocol
from kproto._pure import records as pure_records
from kproto.errors import CorruptRecordError, DecompressionLimitError, ProtocolError
from kproto.protocol import slicer as pure_fetch
from kproto.records import compression

from .fuzz import targets
from .record_sets import Rec, batch_v2, message_set, sample_records, set_base_offset

TWINS = [pytest.param(_codec.decode_records, id="cython"),
         pytest.param(pure_records.decode_records, id="pure")]
SLICERS = [pytest.param(_codec.slice_fetch, id="cython"),
           pytest.param(pure_fetch.slice_fetch, id="pure")]


def unhex(*parts: str) -> bytes:
    return bytes.fromhex("".join(parts))


FOUND = {
    # Fetch v10, responses count int32 -2: the Cython slicer's `except -2` took the count
    # for its error value and raised SystemError("error return without exception set")
    "fetch-count-minus2": ("fetch_cython", unhex(
        "0afffffffffffffffffffffffffffeffffffffffffffffffff")),
    # Fetch v12, a partition's diverging_epoch tag cut short: the Cython slicer skipped the
    # known tags it does not return and accepted it; the engine (pure twin) refused it
    "fetch-diverging-epoch": ("fetch_pure", unhex(
        "0c0000000300000000000902076576656e743202002c76616c7501000000005b000000000000000100ffffff"
        "ff0101010040000a0000004e8bcfe568000000018bcfe50a000000000000006811ffffffffffff7eff11ffff"
        "ff45ffffffffffffffffffff000000022200000001167623616c7565c32d302da92d0042003202002c76616c"
        "7501000000005b00ffffffffffff00000002220000003d000000005b000000000000")),
    # Fetch v16, a truncated node_endpoints response tag: the same, at the top level
    "fetch-node-endpoints": ("fetch_pure", unhex(
        "109d6501013a4e010001320101000000017335010065")),
    # a v2 batch at base offset -2**63 with lastOffsetDelta -2: the Cython decoder's int64
    # sum overflowed (undefined behaviour; next_offset became 2**63-1), Python's did not
    "records-lastdelta-overflow": ("records_pure", unhex(
        "048000000000000000000000650000000002893df57100f0fffffffefff8018bcfe568000000018bcfe56811"
        "0000000000000005000000000000000000022200000001160600000000000000000002200000000a6b65792d"
        "3201020268047632200022020a6b65792d33000202680476b300000000000000050000004200000000028e68"
        "3c700030000000000000000000000001000000000000000100000000000000060000ffffffff000000012000"
        "ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff"
        "ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff000008000000010c00000000"
        "000000")),
    # a magic 1 snappy wrapper whose inner relative offset overflows the wrapper's base:
    # the Cython decoder returned a record at a wrapped-around offset, the pure one none
    "records-offset-overflow": ("records_pure", unhex(
        "10800000000000000700000094e7439e2b01020000000000000000ffffffff0000007e82534e415050590000"
        "000001000000010000006a8c010000090198050000002168443b5b01000000018bcfe56800ffffffff000000"
        "0b76616c75652d302dc3ad2cfa092d20060000002c78963a78152d00110919040016092d10312dc3a92d1d0b"
        "0d1e20070000001b9511fc6d15383422000000056b65792d32ffffffff")),
    # a v2 batch that claims no records (count 0) but holds 52 bytes of them, first in its
    # record set: the record loop (issue 17) made its output pointers with no room reserved
    # yet, NULL + 0, which UBSan reports as undefined; it now reserves one row at least
    "records-null-plus-zero": ("records_cython", unhex(
        "040000000000000000000000650000000002893df5710010000000010000018bcfe568000000013535353535"
        "3535353535353535358bcfe5681100000000000000050000000000000000000222000000011676616c75652d"
        "302dc3a92d0042002202002c040000000000000000000000650000000002893df5710010000000010000018b"
        "cfe568000000018bcfe5681100000000000000050000000000000000000222000000011676616c75652d302d"
        "c3a92d0042002202002c76616c75652d312dc3a92d76616c75652d312dc3a92d020268047631000000000000"
        "0002000000420000000002998401950030000000000000000000000001000000000000000100000000000000"
        "050000ffffff76616c75652d312dc3a92d76616c75652d302dc3a92d02026804763100000000000000020000"
        "ff0042")),
}


def _framed(schema_id: int, payload: bytes) -> bytes:
    return b"\x00" + schema_id.to_bytes(4, "big") + payload


def _formats_input(case: str, values: list[bytes | None], flags: int = 0) -> bytes:
    from .fuzz.formats_target import CASES, _body

    return bytes([CASES.index(case), flags]) + _body(values)


# Typed values (formats_cython, formats_pure): the fuzzer's first find, and inputs the
# oracle refused on the target's seeds or while it was written, in the target's format
# (a case byte, a flags byte, length-prefixed values; tests/fuzz/formats_target.py)
FOUND.update({
    # formats_pure, first 30 s: JSON without a schema, a field name that is not UTF-8:
    # pyarrow's reader infers a field it cannot name (UnicodeDecodeError out of decode);
    # a string value that is not UTF-8 it reads into an invalid Arrow string array
    "formats-json-key-not-utf8": ("formats_pure", unhex(
        "0106587b226964223a20312c20226e616d65223a202261222c202274616773223a205b227822b6202279"
        "225d2c2022696e6e6572223a207b2278223a20312e352c20226f6b223a20747275657d2c20226b696e64"
        "223a202261227d607b226964223a202d313039393531313632373737362c20226e616d65223a206e756c"
        "6c2c202274616773223a205b5d2c20226b696e64223a202262222c2022657874f461223a202265222c20"
        "226974656d73223a205b7b2276223a20337d5d7d097b226964223a20377dff04207b7d20")),
    # JSON without a schema, values whose types conflict: ArrowInvalid out of
    # errors="null", an AssertionError out of errors="raise"
    "formats-json-inferred-conflict": ("formats_cython", _formats_input(
        "json-inferred", [b'{"a": 1}', b'{"a": 1.5}', b'{"a": "x"}'])),
    # every value fails to read: the reader was then asked to read nothing ("Empty JSON")
    "formats-json-all-bad": ("formats_cython", _formats_input("json", [b'{"id": }'])),
    # the newest id's JSON Schema has no Arrow type: a SchemaError for the whole column
    "formats-json-schema-without-type": ("formats_cython", _formats_input(
        "json-framed", [_framed(1, b'{"id": 1}'), _framed(5, b"{}")])),
    # errors="raise" raised the short row 1 before the payload error of row 0
    "formats-json-raise-order": ("formats_cython", _formats_input(
        "json-framed", [_framed(1, b"[1]"), b"\x00\x00"])),
    # Avro of two ids, both rows truncated: the ids' groups raised in id order (row 1)
    "formats-avro-raise-order": ("formats_cython", _formats_input(
        "avro-framed", [_framed(8, b"\x02"), _framed(6, b"\x02")])),
    # a fz.Other (id: string) among fz.Event rows (id: int64): ArrowInvalid out of decode
    "formats-proto-other-type": ("formats_cython", _formats_input(
        "proto-framed", [_framed(3, b"\x00"), _framed(3, b"\x02\x02\x0a\x01o")])),
    # frame_ids asked for a 1-byte header read the id's 4 bytes past a 3-byte value
    "formats-kernels-short-header": ("formats_cython", bytes([6, 0x10, 2, 0, 3]) + b"\x00ab"),
})


@functools.cache
def _target(name: str) -> Any:
    return targets.make(name)


@pytest.mark.parametrize("name", list(FOUND))
def test_found_inputs_pass_the_oracle_in_both_targets(name: str) -> None:
    target, data = FOUND[name]
    decoder = target.split("_")[0]
    for impl in ("cython", "pure"):
        _target(f"{decoder}_{impl}")(data)


@pytest.mark.parametrize("decoder", ["records", "fetch", "protocol", "formats"])
def test_seed_corpora_pass_the_oracle(decoder: str) -> None:
    one_input = _target(f"{decoder}_cython")
    seeds = sorted((Path(__file__).parent / "fuzz" / "corpus" / decoder).iterdir())
    assert seeds
    for path in seeds:
        one_input(path.read_bytes())


# --------------------------------------------------------------------------- fetch slicing


@pytest.mark.parametrize("slice_fetch", SLICERS)
def test_negative_two_count_is_a_protocol_error(slice_fetch) -> None:
    body = FOUND["fetch-count-minus2"][1][1:]
    with pytest.raises(ProtocolError, match="-2"):
        slice_fetch(body, 10)


@pytest.mark.parametrize("slice_fetch", SLICERS)
def test_known_partition_tags_are_checked(slice_fetch) -> None:
    with pytest.raises(ProtocolError, match="diverging_epoch"):
        slice_fetch(FOUND["fetch-diverging-epoch"][1][1:], 12)
    with pytest.raises(ProtocolError, match="node_endpoints"):
        slice_fetch(FOUND["fetch-node-endpoints"][1][1:], 16)


def fetch_v16(partition_tags: bytes, response_tags: bytes) -> bytes:
    return b"".join([
        struct.pack(">ihi", 0, 0, 0),          # throttle, error, session
        b"\x02", bytes(16),                    # 1 topic, topic_id
        b"\x02", struct.pack(">ihqqq", 0, 0, 1, 1, 0),
        b"\x00", struct.pack(">i", -1), b"\x01",  # null aborted, replica, empty records
        partition_tags, b"\x00", response_tags])


@pytest.mark.parametrize("slice_fetch", SLICERS)
@pytest.mark.parametrize(("partition_tags", "response_tags", "error"), [
    (b"\x01\x00\x0c" + bytes(12) + b"\x00", b"\x00", "diverging_epoch"),   # no own tag section
    (b"\x01\x02\x0e" + bytes(12) + b"\x00\x00", b"\x00", "snapshot_id"),  # a byte too many
    (b"\x00", b"\x01\x00\x09\x02\x00\x00\x00\x01\x02\xff\x00\x00", "host"),  # not UTF-8
    (b"\x00", b"\x01\x00\x05\x80\x80\x80\x80\x10", "32 bits|node_endpoints"),  # uvarint > 2**32
])
def test_tagged_fields_the_slicer_does_not_return_are_still_checked(
        slice_fetch, partition_tags: bytes, response_tags: bytes, error: str) -> None:
    with pytest.raises(ProtocolError, match=error):
        slice_fetch(fetch_v16(partition_tags, response_tags), 16)


@pytest.mark.parametrize("slice_fetch", SLICERS)
def test_well_formed_tags_still_slice(slice_fetch) -> None:
    endpoint = struct.pack(">i", 1) + b"\x02h" + struct.pack(">i", 9092) + b"\x00\x00"
    body = fetch_v16(b"\x02\x00\x0d" + bytes(12) + b"\x00" + b"\x02\x0d" + bytes(12) + b"\x00",
                     b"\x01\x00" + bytes([len(endpoint) + 1]) + b"\x02" + endpoint)
    sliced = slice_fetch(body, 16)
    assert len(sliced.partitions) == 1 and bytes(sliced.partitions[0].records) == b""


# --------------------------------------------------------------------------- record sets


@pytest.mark.parametrize("decode", TWINS)
def test_offset_overflow_is_corrupt_not_undefined(decode) -> None:
    for name in ("records-lastdelta-overflow", "records-offset-overflow"):
        buf, kwargs = targets.records_input(FOUND[name][1])
        with pytest.raises(CorruptRecordError, match="overflows int64"):
            decode(buf, **kwargs)


@pytest.mark.parametrize("decode", TWINS)
def test_record_offset_delta_overflow(decode) -> None:
    batch = set_base_offset(batch_v2(sample_records(3)), 2**63 - 2)  # offsets 2**63-2 ...
    with pytest.raises(CorruptRecordError, match="overflows int64"):
        decode(batch, check_crc=False)


@pytest.mark.parametrize("decode", TWINS)
def test_a_last_offset_of_int64_max_leaves_no_next_offset(decode) -> None:
    batch = set_base_offset(batch_v2(sample_records(1)), 2**63 - 1)
    with pytest.raises(CorruptRecordError, match="no next offset"):
        decode(batch)
    legacy = message_set([Rec(b"k", b"v", [], 1)], magic=1)
    with pytest.raises(CorruptRecordError, match="no next offset"):
        decode(struct.pack(">q", 2**63 - 1) + legacy[8:])


@pytest.mark.parametrize("decode", TWINS)
def test_timestamps_wrap_like_java_longs(decode) -> None:
    batch = bytearray(batch_v2([Rec(b"k", b"v", [], 5), Rec(b"k", b"v", [], 2**62)]))
    struct.pack_into(">q", batch, 27, 2**63 - 1)   # baseTimestamp: deltas now overflow
    cols = decode(bytes(batch), check_crc=False)
    assert [int(t) for t in cols.timestamp] == [2**63 - 1, -(2**63) + 2**62 - 6]


@pytest.mark.parametrize("decode", TWINS)
@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_decompression_errors_say_which_batch(decode, codec: int) -> None:
    first = batch_v2(sample_records(2))
    bad = bytearray(batch_v2(sample_records(40), base_offset=2, codec=codec))
    assert struct.unpack_from(">h", bad, 21)[0] & 7 == codec
    bad[70:90] = b"\xa5" * 20      # inside the compressed records
    with pytest.raises(CorruptRecordError) as info:
        decode(first + bytes(bad), check_crc=False)
    assert info.value.offset == len(first)
    assert f"at byte offset {len(first)}" in str(info.value)


@pytest.mark.parametrize("decode", TWINS)
def test_legacy_decompression_errors_say_which_message(decode) -> None:
    first = message_set([Rec(b"k", b"v", [], 1)], magic=1)
    wrapper = bytearray(message_set([Rec(b"k", b"v" * 50, [], 1)] * 3, magic=1, codec=1))
    assert wrapper[17] & 7 == 1
    wrapper[40:50] = b"\x00" * 10
    with pytest.raises(CorruptRecordError, match=f"gzip: .*at byte offset {len(first)}"):
        decode(first + bytes(wrapper), check_crc=False)


def test_decompression_limit_error_says_where_too() -> None:
    bomb = compression.compress(compression.ZSTD, bytes(1 << 20))
    with pytest.raises(DecompressionLimitError) as info:
        compression.decompress_buffer(compression.ZSTD, bomb, max_size=1000, offset=7)
    assert info.value.offset == 7 and "1048576" in str(info.value)


# --------------------------------------------------------------------------- protocol


def test_consumer_protocol_errors_say_where() -> None:
    with pytest.raises(ProtocolError, match="invalid version -1 .*byte offset 0"):
        protocol.decode_subscription(b"\xff\xff")
    with pytest.raises(ProtocolError, match="1 bytes"):
        protocol.decode_assignment(b"\x00")


def test_engine_varint_errors_name_the_position_once() -> None:
    with pytest.raises(ProtocolError) as info:
        protocol.decode(18, 3, "response", b"\x00\x00\x80")   # api_keys count cut short
    assert str(info.value).count("at byte") == 1


# --------------------------------------------------------------------------- by reading


@pytest.mark.parametrize("decode", TWINS)
def test_binary_view_refuses_buffers_its_int32_offsets_cannot_reach(decode, tmp_path) -> None:
    """Views hold int32 offsets: past 2 GiB they would point at the wrong bytes (or outside
    the buffer). Found reading the code, not fuzzing (inputs are 8 KiB). A sparse file: no
    memory is used."""
    import mmap

    from kproto.errors import ConfigError

    path = tmp_path / "big"
    batch = batch_v2(sample_records(2))
    with open(path, "wb") as f:
        f.write(batch)
        f.truncate(2**31 + 100)
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        with pytest.raises(ConfigError, match="2 GiB"):
            decode(m, binary_view=True)
        assert len(decode(m[:len(batch)], binary_view=True)) == 2   # a copy: under 2 GiB


@pytest.mark.parametrize("decode", TWINS)
def test_binary_view_refuses_decompressed_buffers_past_2gib(decode, monkeypatch) -> None:
    import mmap

    from kproto.errors import ConfigError

    # a decompressed batch of 2 GiB + 1 (a cap raised that far): an anonymous mapping whose
    # pages are never touched stands in for it
    monkeypatch.setattr(compression, "decompress_buffer",
                        lambda *args, **kwargs: mmap.mmap(-1, 2**31 + 1))
    batch = batch_v2(sample_records(40), codec=1)
    with pytest.raises(ConfigError, match="2 GiB"):
        decode(batch, binary_view=True, max_decompressed=2**32)
    legacy = message_set([Rec(b"k", b"v" * 50, [], 1)] * 3, magic=1, codec=1)
    with pytest.raises(ConfigError, match="2 GiB"):
        decode(legacy, binary_view=True, max_decompressed=2**32)


# --------------------------------------------------------------------------- typed values


def _decoded(values: list[bytes | None], fmt: str = "json", **kwargs: Any) -> Any:
    import pyarrow as pa

    from kproto import formats

    got = formats.decode_with_bad_rows(pa.array(values, pa.binary()), fmt, errors="null",
                                       **kwargs)
    got.array.validate(full=True)
    return got


def _raised(values: list[bytes | None], fmt: str = "json", **kwargs: Any) -> Any:
    import pyarrow as pa

    from kproto import formats
    from kproto.errors import FormatError

    with pytest.raises(FormatError) as info:
        formats.decode(pa.array(values, pa.binary()), fmt, **kwargs)
    return info.value


def test_json_without_a_schema_values_whose_types_conflict_are_bad_rows() -> None:
    import pyarrow as pa

    values = [b'{"a": 1, "b": null}', b'{"a": 1.5}', b'{"a": "x"}', b'{"b": {"c": 1}}',
              b'{"b": 2}']
    got = _decoded(values)
    assert got.bad_rows.tolist() == [2, 4]
    assert got.array.type == pa.struct([("a", pa.float64()), ("b", pa.struct([("c", pa.int64())]))])
    assert got.array.to_pylist() == [{"a": 1.0, "b": None}, {"a": 1.5, "b": None}, None,
                                     {"a": None, "b": {"c": 1}}, None]
    err = _raised(values)
    assert err.row == 2 and "conflict" in err.reason
    # a value that does not read alone, after the conflict: the conflict is still first
    assert _raised(values[:3] + [b'{"a": }']).row == 2


def test_json_values_must_be_utf8_keys_and_strings() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string"}}}
    values = [b'{"\xff": 1}', b'{"a": "\xc3("}', b'{"a": "\xc3\xa9"}', None]
    for kwargs in ({}, {"schema": schema}):
        got = _decoded(values, **kwargs)      # validated in full: no invalid string array
        assert got.bad_rows.tolist() == [0, 1]
        assert got.array.to_pylist()[2:] == [{"a": "é"}, None]
    err = _raised(values[1:], schema=schema)
    assert err.row == 0 and "not UTF-8 (byte 7" in err.reason


def test_json_every_value_bad_decodes_to_nulls() -> None:
    got = _decoded([b'{"a": }', b'{"a": tru}'])
    assert got.bad_rows.tolist() == [0, 1] and got.array.null_count == 2


def test_framed_values_raise_the_first_bad_row_of_any_kind() -> None:
    from .fuzz.formats_target import offline_registry

    client = offline_registry()
    assert _raised([_framed(1, b"[1]"), b"\x00\x00"], registry=client).row == 0
    assert _raised([_framed(1, b'{"id": 1}'), _framed(99, b"{}"), b"\x00"],
                   registry=client).row == 1
    err = _raised([_framed(8, b"\x02"), _framed(6, b"\x02")], "avro", registry=client)
    assert err.row == 0 and err.offset is not None
    assert _raised([_framed(3, b"\x02\x08"), b"\x01"], "protobuf", registry=client).row == 0
    assert _raised([b"\x01", _framed(3, b"\x02\x08")], "protobuf", registry=client).row == 0


def test_a_registered_json_schema_without_an_arrow_type_makes_its_rows_bad() -> None:
    from .fuzz.formats_target import offline_registry

    got = _decoded([_framed(1, b'{"id": 1}'), _framed(5, b"{}")], registry=offline_registry())
    assert got.bad_rows.tolist() == [1]
    assert got.array.to_pylist()[0]["id"] == 1


def test_protobuf_rows_of_another_message_whose_fields_do_not_fit_are_bad() -> None:
    from .fuzz.formats_target import offline_registry, proto_classes

    classes = proto_classes()
    values = [_framed(3, b"\x00" + classes["Event"](id=4).SerializeToString()),
              _framed(3, b"\x02\x02" + classes["Other"](id="o").SerializeToString()),
              _framed(3, b"\x04\x00\x00" + classes["Inner"](x=2).SerializeToString())]
    got = _decoded(values, "protobuf", registry=offline_registry())
    assert got.bad_rows.tolist() == [1]
    rows = got.array.to_pylist()
    assert rows[0]["id"] == 4 and rows[1] is None and rows[2]["id"] is None
    err = _raised(values, "protobuf", registry=offline_registry())
    assert err.row == 1 and "fz.Other" in err.reason and "fz.Event" in err.reason


@pytest.mark.parametrize("kernels", ["cython", "pure"])
def test_frame_ids_refuses_a_header_shorter_than_confluents(kernels: str) -> None:
    import numpy as np

    import kproto._avro
    import kproto._pure.wire

    module = kproto._avro if kernels == "cython" else kproto._pure.wire
    with pytest.raises(ValueError, match="at least 5 bytes"):
        module.frame_ids(np.array([0, 3], np.int64), np.frombuffer(b"\x00ab", np.uint8),
                         np.ones(1, np.uint8), 1, 0)
