"""The Avro decoder loops on bad and hostile input: every error names the row and the
reason (never wrong data), errors="null" nulls exactly the bad rows, lengths and counts
are checked before anything is allocated, nesting is bounded; the two loops agree on
random bytes; rows= and skip= as the framing side uses them."""

from __future__ import annotations

import random
import resource

import numpy as np
import pyarrow as pa
import pytest

import kproto._pure.avro as pure
from kproto.errors import DecodeError, FormatError
from kproto.formats import avro
from kproto.formats._avro_schema import zigzag

from .avro_support import (
    column,
    extension,
    loop,  # noqa: F401  (the fixture: both decoder loops)
    write,
)
from .threads import run_at_once

REC = avro.parse_schema({"type": "record", "name": "R", "fields": [
    {"name": "s", "type": "string"},
    {"name": "u", "type": ["null", "long"]},
    {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A", "B"]}},
    {"name": "xs", "type": {"type": "array", "items": "int"}},
    {"name": "ok", "type": "boolean"},
    {"name": "d", "type": {"type": "bytes", "logicalType": "decimal", "precision": 4,
                           "scale": 1}}]})
GOOD = {"s": "hé", "u": 5, "e": "B", "xs": [1, 2], "ok": True}


def _good(**change: object) -> bytes:
    import decimal

    return write(REC.json and __import__("json").loads(REC.json),
                 [{**GOOD, "d": decimal.Decimal("12.3"), **change}])[0]


def test_numbering_of_the_two_loops_agrees() -> None:
    ext = extension()
    assert ext.OPS == pure.OP_SKIP_UNION + 1
    assert ext.KINDS == pure.K_UNION + 1
    assert ext.ERRORS == pure.ERR_TOO_BIG
    assert (ext.MAX_DEPTH, ext.ZERO_SIZE_ITEMS) == (pure.MAX_DEPTH, pure.ZERO_SIZE_ITEMS)
    assert ext.ENCODE_OPS == pure.E_UNION + 1 and ext.ENCODE_ERRORS == pure.EERR_VALUE
    assert ext.ENCODE_REFUSED == pure.REFUSED


BAD_VALUES = [
    # (value, reason fragment)
    (b"", "truncated datum"),
    (_good()[:-1], "truncated datum"),
    (_good() + b"\x00", "1 bytes left over"),
    (b"\x03", "negative length -2"),
    (b"\x80" * 11, "malformed varint"),
    (zigzag(1000) + b"abc", "1000 more bytes needed, 3 left"),
    (zigzag(2) + b"\xff\xfe", "not valid UTF-8"),
    (zigzag(2) + b"ok" + b"\x08", "union branch 4 out of range"),
    (zigzag(2) + b"ok" + b"\x00" + b"\x04", "enum index 2 out of range"),
    (zigzag(2) + b"ok\x00\x02" + zigzag(10**9), "block count 1000000000"),
    (zigzag(2) + b"ok\x00\x02\x00\x05", "boolean byte is 5"),
    (zigzag(2) + b"ok\x00\x02\x00\x01" + zigzag(2) + (20000).to_bytes(2, "big"),
     "decimal does not fit precision 4"),
    (zigzag(2) + b"ok\x00\x02" + zigzag(-(2**62)) + zigzag(0), "block count 461168601842"),
    (zigzag(2) + b"ok\x00\x02" + zigzag(-1) + zigzag(-8), "negative length -8"),
]


@pytest.mark.usefixtures("loop")
@pytest.mark.parametrize("value,reason", BAD_VALUES)
def test_bad_values_raise_format_error_with_row_and_reason(value: bytes, reason: str) -> None:
    values = column([_good(), _good(), value])
    with pytest.raises(FormatError) as info:
        avro.decode(values, REC)
    err = info.value
    assert isinstance(err, DecodeError) and err.row == 2 and err.format == "avro"
    assert reason in err.reason and reason in str(err) and "row 2" in str(err)
    # errors="null": the bad row is null and listed, the good rows are intact
    array, bad = avro.decode(values, REC, errors="null")
    array.validate(full=True)
    assert bad.tolist() == [2] and array.null_count == 1
    assert array.to_pylist()[:2] == avro.decode(column([_good(), _good()]), REC)[0].to_pylist()


@pytest.mark.usefixtures("loop")
def test_errors_null_rolls_back_a_half_decoded_row() -> None:
    """A row that fails deep inside (after its string, union and enum were appended) leaves
    no trace in the children: the rows after it line up."""
    half = _good()[:-2]
    values = column([_good(s="a"), half, None, _good(s="c", u=None, xs=[])])
    array, bad = avro.decode(values, REC, errors="null")
    array.validate(full=True)
    assert bad.tolist() == [1]
    rows = array.to_pylist()
    assert rows[1] is None and rows[2] is None
    assert rows[0]["s"] == "a" and rows[3]["s"] == "c" and rows[3]["u"] is None
    assert rows[3]["xs"] == [] and array.field("s").to_pylist()[3] == "c"


@pytest.mark.usefixtures("loop")
def test_rows_and_skip_decode_a_subset_of_framed_values() -> None:
    framed = [b"\x00\x00\x00\x00\x07" + _good(s=str(i)) for i in range(6)]
    framed[4] = b"\x00\x00\x00\x00\x09" + b"garbage"
    rows = np.array([5, 0, 2], np.int64)
    array, bad = avro.decode(column(framed), REC, skip=5, rows=rows)
    assert [r["s"] for r in array.to_pylist()] == ["5", "0", "2"] and len(bad) == 0
    array, bad = avro.decode(column(framed), REC, skip=5, rows=np.array([3, 4]),
                             errors="null")
    assert bad.tolist() == [4] and array.to_pylist()[1] is None
    with pytest.raises(FormatError) as info:
        avro.decode(column(framed), REC, skip=5, rows=np.array([1, 4]))
    assert info.value.row == 4
    with pytest.raises(FormatError, match="shorter than its 5-byte header"):
        avro.decode(column([b"\x00\x00"]), REC, skip=5)


@pytest.mark.usefixtures("loop")
def test_sliced_and_chunked_input() -> None:
    values = column([_good(s=str(i)) for i in range(5)]).slice(2, 2)
    array, _ = avro.decode(values, REC)
    assert [r["s"] for r in array.to_pylist()] == ["2", "3"]
    array, _ = avro.decode(pa.chunked_array([values]), REC)
    assert len(array) == 2


# --------------------------------------------------------------------------- hostile input


def _max_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


@pytest.mark.usefixtures("loop")
def test_hostile_lengths_and_counts_allocate_nothing() -> None:
    before = _max_rss_mb()
    nulls = avro.parse_schema('{"type": "array", "items": "null"}')
    empty = avro.parse_schema('{"type": "array", "items": {"type": "record", "name": "E",'
                              ' "fields": []}}')
    strings = avro.parse_schema('{"type": "map", "values": "string"}')
    for schema, value in [
        (avro.parse_schema('"bytes"'), zigzag(2**62)),
        (strings, zigzag(2**62) + b"\x00"),
        (strings, zigzag(-(2**62)) + zigzag(2**40)),
        (nulls, zigzag(2**62)),                      # items of no bytes: a per-value budget
        (empty, zigzag(2**40)),
        (nulls, (zigzag(60000) * 100) + b"\x00"),    # many small blocks add up
    ]:
        with pytest.raises(FormatError, match="block count|more bytes needed"):
            avro.decode(column([value]), schema)
    assert _max_rss_mb() - before < 64
    # within the budget, items of no bytes decode
    array, _ = avro.decode(column([zigzag(1000) + b"\x00"]), nulls)
    assert len(array[0].values) == 1000


@pytest.mark.usefixtures("loop")
def test_recursive_writer_nesting_is_bounded() -> None:
    """A recursive writer schema whose recursion the reader leaves out (skipped): deep
    values stop at MAX_DEPTH, as a FormatError."""
    writer = avro.parse_schema({"type": "record", "name": "Node", "fields": [
        {"name": "v", "type": "int"}, {"name": "next", "type": ["null", "Node"]}]})
    reader = avro.parse_schema({"type": "record", "name": "Node", "fields": [
        {"name": "v", "type": "int"}]})

    def chain(n: int) -> bytes:
        return b"".join(zigzag(i) + b"\x02" for i in range(n - 1)) + zigzag(n) + b"\x00"

    array, _ = avro.decode(column([chain(3), chain(100)]), writer, reader)
    assert array.to_pylist() == [{"v": 0}, {"v": 0}]
    with pytest.raises(FormatError, match="nested deeper than"):
        avro.decode(column([chain(5000)]), writer, reader)


@pytest.mark.usefixtures("loop")
def test_utf8_is_checked_as_python_does() -> None:
    schema = avro.parse_schema('"string"')
    for raw in [b"\xc0\x80", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xe2\x82", b"a" * 9 + b"\xff",
                b"\xf0\x9f\x99\x82", "ascii then é".encode(), b"\xe0\xa0\x80"]:
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            text = None
        datum = zigzag(len(raw)) + raw
        if text is None:
            with pytest.raises(FormatError, match="UTF-8"):
                avro.decode(column([datum]), schema)
        else:
            assert avro.decode(column([datum]), schema)[0].to_pylist() == [text]


def test_the_two_loops_agree_on_random_bytes() -> None:
    """A small fuzz in the suite: mutated good values through both loops give the same
    array, or the same error (row, reason, byte offset)."""
    ext = extension()
    rng = random.Random(19)
    seeds = [_good(), _good(u=None, xs=[]), _good(s="é" * 20, xs=list(range(30)))]
    for _ in range(400):
        value = bytearray(rng.choice(seeds))
        for _ in range(rng.randint(1, 4)):
            pos = rng.randrange(len(value) + 1)
            choice = rng.random()
            if choice < 0.4 and value:
                value[min(pos, len(value) - 1)] = rng.randrange(256)
            elif choice < 0.7:
                value[pos:pos] = bytes([rng.randrange(256)])
            else:
                del value[pos:pos + rng.randint(1, 4)]
        results = []
        for module in (ext, pure):
            saved = avro._loop
            avro._loop = module
            try:
                array, bad = avro.decode(column([bytes(value), _good()]), REC, errors="null")
                results.append((array.to_pylist(), bad.tolist()))
                try:
                    avro.decode(column([bytes(value)]), REC)
                except FormatError as exc:
                    results.append((exc.row, exc.reason, exc.offset))
            finally:
                avro._loop = saved
        assert results[0] == results[len(results) // 2], bytes(value)
        assert results[1:len(results) // 2] == results[len(results) // 2 + 1:], bytes(value)


# --------------------------------------------------------------------------- encoding

ENC = avro.parse_schema({"type": "record", "name": "Enc", "fields": [
    {"name": "i", "type": "int"},
    {"name": "e", "type": {"type": "enum", "name": "E2", "symbols": ["A", "B"]}},
    {"name": "d", "type": {"type": "fixed", "name": "F2", "size": 2, "logicalType": "decimal",
                           "precision": 4, "scale": 0}},
    {"name": "u", "type": ["null", "int", "string"]},
    {"name": "kept", "type": "string", "default": "dflt"}]})


def _enc_table(**cols: object) -> pa.Table:
    base: dict[str, object] = {"i": pa.array([1], pa.int64()), "e": pa.array(["B"]),
                               "d": pa.array([__import__("decimal").Decimal(-128)],
                                             pa.decimal128(4, 0)),
                               "u": pa.array(["text"])}
    base.update(cols)
    return pa.table(base)


@pytest.mark.usefixtures("loop")
def test_encode_java_minimal_decimals_defaults_and_plain_union_columns() -> None:
    from .avro_support import read

    out = avro.encode(_enc_table(), ENC).to_pylist()
    # i=1, e=B (1), d=-128 in 2 fixed bytes (ff 80), u=branch 2 "text", kept=default
    assert out == [b"\x02\x02\xff\x80\x04\x08text\x08dflt"]
    assert read(__import__("json").loads(ENC.json), out)[0]["d"] == -128
    dec = avro.parse_schema('{"type": "bytes", "logicalType": "decimal", "precision": 5,'
                            ' "scale": 2}')
    import decimal

    values = pa.array([decimal.Decimal(x) for x in ("-1.28", "1.28", "0", "-0.01", "-1.29")],
                      pa.decimal128(5, 2))
    assert avro.encode(values, dec).to_pylist() == [
        b"\x02\x80", b"\x04\x00\x80", b"\x02\x00", b"\x02\xff", b"\x04\xff\x7f"]


@pytest.mark.usefixtures("loop")
@pytest.mark.parametrize("cols,message", [
    ({"i": pa.array([2**31], pa.int64())}, "row 0: i: 2147483648 is out of range"),
    ({"i": pa.array([None], pa.int64())}, "row 0: i: null, but the schema"),
    ({"e": pa.array(["C"])}, "row 0: e: 'C' is not a symbol of enum E2"),
    ({"d": pa.array([__import__("decimal").Decimal("1.5")], pa.decimal128(4, 1))},
     "row 0: d: Decimal\\('1.5'\\) cannot be written as decimal\\(4, 0\\) exactly"),
    ({"u": pa.array([1.5])}, "u: a double column fits no branch"),
])
def test_encode_errors_name_row_and_field(cols: dict[str, object], message: str) -> None:
    from kproto.errors import EncodeError

    with pytest.raises(EncodeError, match=message):
        avro.encode(_enc_table(**cols), ENC)


def test_encode_loops_agree_on_dense_unions_and_nulls() -> None:
    ext = extension()
    union = pa.UnionArray.from_dense(
        pa.array([0, 1, 2, 2], pa.int8()), pa.array([0, 0, 0, 1], pa.int32()),
        [pa.nulls(1), pa.array([7], pa.int32()), pa.array(["x", "y"])],
        ["null", "int", "string"])
    table = pa.table({"i": pa.array([1, 2, 3, 4], pa.int64()), "e": ["A", "B", "A", "B"],
                      "d": pa.array([__import__("decimal").Decimal(i) for i in range(4)],
                                    pa.decimal128(4, 0)), "u": union})
    struct = pa.StructArray.from_arrays([c.combine_chunks() for c in table.columns],
                                        names=table.column_names,
                                        mask=pa.array([False, True, False, False]))
    outs = []
    for module in (ext, pure):
        saved, avro._loop = avro._loop, module
        try:
            outs.append(avro.encode(struct.slice(1), ENC).to_pylist())
        finally:
            avro._loop = saved
    assert outs[0] == outs[1]
    # row 2: i=3, e=A, d=2 (2 fixed bytes), u="x" (branch 2), kept=its default
    assert outs[0][0] is None and outs[0][1] == b"\x06\x00\x00\x02\x04\x02x\x08dflt"
    assert outs[0][2] == b"\x08\x02\x00\x03\x04\x02y\x08dflt"


@pytest.mark.usefixtures("loop")
@pytest.mark.parametrize("value,offset", [
    (zigzag(2) + b"\xff\xfe", 1),                                        # the string's bytes
    (zigzag(2) + b"ok\x00\x02\x00\x01" + zigzag(2) + (20000).to_bytes(2, "big"), 8),  # decimal
    (zigzag(2) + b"ok\x00\x02\x00\x07", 7),                              # after the bad byte
    (zigzag(2) + b"ok\x00", 4),                                          # where bytes ran out
])
def test_error_offsets_point_at_the_bad_bytes(value: bytes, offset: int) -> None:
    """Both loops name the same byte (found by avro_cython: the pure twin's decimal and
    UTF-8 errors pointed past the bytes they refused)."""
    with pytest.raises(FormatError) as info:
        avro.decode(column([value]), REC)
    assert info.value.offset == offset and f"byte offset {offset}" in str(info.value)


def test_threads_decode_at_once_and_agree() -> None:
    """The loop runs without the GIL and keeps no state between calls: four threads
    decoding different columns at once each get what one thread gets."""
    ext = extension()
    columns = [column([_good(s=f"{k}-{i}", xs=list(range(i % 7))) for i in range(3000)]
                      + [b"\x01bad"] * (k + 1)) for k in range(4)]
    saved, avro._loop = avro._loop, ext
    try:
        expected = [avro.decode(c, REC, errors="null") for c in columns]

        def work(k: int) -> None:
            for r in range(5):
                i = (k + r) % len(columns)
                array, bad = avro.decode(columns[i], REC, errors="null")
                assert array.equals(expected[i][0])
                assert bad.tolist() == expected[i][1].tolist()

        run_at_once(work)
    finally:
        avro._loop = saved
