"""Resource bounds: a bogus length is refused before memory is allocated for it.

Every case runs in a fresh subprocess (``python -m tests.test_bounds CASE INPUT``) that
reads its input from a file, resets the kernel's peak-RSS counter (``/proc/self/clear_refs``)
and then decodes; the peak RSS growth (VmHWM after minus VmRSS before) and the peak of
Python-level allocations (tracemalloc: bytes, bytearrays, NumPy arrays) prove what was
allocated. ``python -m tests.test_bounds --report`` prints the measured table (the limits are in
docs/fuzzing.md).

Limits and their knobs:

* record sets: a batch is only decoded once all of its claimed bytes are there (a claimed
  size past the end is a truncated tail); decode_records' ``max_batch_bytes`` refuses
  larger claims outright; output buffers are reserved from the bytes present, never from
  a claimed count;
* decompression: ``max_decompressed`` (records.decode, records.decode_fetch_response;
  default ``compression.DEFAULT_MAX_DECOMPRESSED``, 256 MiB for all the batches of one
  record set, i.e. per partition of a Fetch response): sizes a frame
  declares (zstd, lz4, snappy) are checked before anything is decompressed, streams are
  decompressed 1 MiB at a time and stopped one step past the cap (the bytearray holding
  the output may have room for an eighth more than it holds);
* protocol: array counts larger than the bytes left are refused before a list is made;
* responses: ``max_response_bytes`` (Connection, BrokerConnection; the client setting
  ``receive_message_max_bytes``, default 100 MiB) is checked on the 4-byte size prefix,
  before the body is buffered; the connection is closed.
"""

from __future__ import annotations

import json
import socket
import struct
import subprocess
import sys
import threading
import tracemalloc
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
MiB = 1 << 20
GiB = 1 << 30
CAP = 64 * MiB              # max_decompressed in the bomb cases
SLACK = 16 * MiB            # interpreter noise, one decompression step, small buffers

# --------------------------------------------------------------------------- inputs


def v2_batch(records: bytes, *, codec: int = 0, count: int = 1, size: int | None = None
             ) -> bytes:
    """A record batch v2 header (CRC left 0: decoded with check_crc=False) + records."""
    length = 49 + len(records) if size is None else size
    return (struct.pack(">qiib", 0, length, 0, 2) + struct.pack(">I", 0)
            + struct.pack(">hiqqqhii", codec, count - 1, 0, 0, -1, -1, -1, count) + records)


def gzip_bomb() -> bytes:
    """16 gzip members of 64 MiB of zeros each: 1 GiB from ~1 MiB."""
    co = zlib.compressobj(9, zlib.DEFLATED, 31)
    zeros = bytes(MiB)
    member = b"".join([co.compress(zeros) for _ in range(64)] + [co.flush()])
    return member * 16


def lz4_bomb(declared: bool) -> bytes:
    import lz4.frame

    c = lz4.frame.LZ4FrameCompressor(block_size=lz4.frame.BLOCKSIZE_MAX4MB)
    zeros = bytes(MiB)
    head = c.begin(source_size=GiB if declared else 0)
    return b"".join([head, *(c.compress(zeros) for _ in range(1024)), c.flush()])


def zstd_bomb(declared: bool, size: int = GiB) -> bytes:
    import zstandard

    o = zstandard.ZstdCompressor(level=1).compressobj(size=size if declared else -1)
    zeros = bytes(MiB)
    return b"".join([*(o.compress(zeros) for _ in range(size // MiB)), o.flush()])


def snappy_raw_claim() -> bytes:
    """A raw snappy block whose length prefix claims 1 GiB."""
    return bytes([0x80, 0x80, 0x80, 0x80, 0x04]) + b"\x00" * 64


def snappy_xerial_claims() -> bytes:
    """xerial framing: 16 chunks, each claiming 64 MiB (more than the cap together)."""
    chunk = bytes([0x80, 0x80, 0x80, 0x20]) + b"\x00" * 8
    return (b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
            + (struct.pack(">i", len(chunk)) + chunk) * 16)


BOMBS: dict[str, tuple[int, Callable[[], bytes]]] = {
    "gzip": (1, gzip_bomb),
    "snappy-raw": (2, snappy_raw_claim),
    "snappy-xerial": (2, snappy_xerial_claims),
    "lz4-stream": (3, lambda: lz4_bomb(False)),
    "lz4-declared": (3, lambda: lz4_bomb(True)),
    "zstd-stream": (4, lambda: zstd_bomb(False)),
    "zstd-declared": (4, lambda: zstd_bomb(True)),
}
#: bombs whose size is known before decompressing: refused with nothing allocated
DECLARED = {"snappy-raw", "snappy-xerial", "lz4-declared", "zstd-declared"}


def fetch_v4(records_length: int, tail: bytes) -> bytes:
    """Fetch v4 response: one topic, one partition, records claiming records_length."""
    return b"".join([
        struct.pack(">i", 0), struct.pack(">i", 1), struct.pack(">h", 1), b"t",
        struct.pack(">i", 1), struct.pack(">ihqq", 0, 0, 10, 10), struct.pack(">i", -1),
        struct.pack(">i", records_length), tail])


# --------------------------------------------------------------------------- the cases


def _twin(impl: str) -> Any:
    if impl == "cython":
        from kproto import _codec

        return _codec
    import types

    from kproto import _pure
    from kproto.protocol import slicer

    # the pure twins: kproto._pure, and the protocol engine's Fetch slicer
    return types.SimpleNamespace(**{n: getattr(_pure, n) for n in _pure.__all__},
                                 slice_fetch=slicer.slice_fetch)


def _decode(impl: str, **kwargs: Any) -> Callable[[bytes], Any]:
    return lambda data: _twin(impl).decode_records(data, check_crc=False, **kwargs)


def _slice(impl: str, version: int) -> Callable[[bytes], Any]:
    return lambda data: _twin(impl).slice_fetch(data, version)


def _protocol(api: int, version: int) -> Callable[[bytes], Any]:
    from kproto import protocol

    return lambda data: protocol.decode(api, version, "response", data)


def _every_response(data: bytes) -> None:
    """Every API and version kproto decodes, on the same hostile bytes."""
    from kproto import protocol
    from kproto.errors import ProtocolError

    for key, api in protocol.apis.APIS.items():
        for v in range(api.versions.lo, api.versions.hi + 1):
            try:
                protocol.decode(key, v, "response", data)
            except ProtocolError:
                pass




def _connection(data: bytes) -> None:
    from kproto.net import Connection

    conn = Connection(versions={12: 4}, max_response_bytes=MiB)
    conn.send(12, {"group_id": "g"})
    try:
        for i in range(0, len(data), 64 * 1024):   # as the socket delivers it
            conn.receive_data(data[i:i + 64 * 1024])
    finally:
        assert conn.closed and conn.in_flight == 0


CASES: dict[str, tuple[Callable[[bytes], Any], Callable[[], bytes], str]] = {}
for _impl in ("cython", "pure"):
    CASES |= {
        f"batch-claims-2GiB/{_impl}": (
            _decode(_impl), lambda: v2_batch(b"\x00" * 64, size=0x7FFFFFFF), "ok"),
        f"batch-claims-2GiB-over-max_batch_bytes/{_impl}": (
            _decode(_impl, max_batch_bytes=MiB), lambda: v2_batch(b"\x00" * 64, size=0x7FFFFFFF),
            "CorruptRecordError: record set of 2147483647 bytes exceeds the 1048576-byte limit"),
        f"count-claims-2**31-1/{_impl}": (
            _decode(_impl), lambda: v2_batch(b"\x0c\x00\x00\x00\x00\x00\x00" * 3,
                                             count=0x7FFFFFFF), "CorruptRecordError"),
        f"key-claims-2GiB/{_impl}": (
            _decode(_impl), lambda: v2_batch(b"\x14\x00\x00\x00\xfe\xff\xff\xff\x0f" + bytes(8)),
            "CorruptRecordError"),
        f"fetch-records-claim-2GiB/{_impl}": (
            _slice(_impl, 4), lambda: fetch_v4(0x7FFFFFFF, b"\x00" * 64), "ProtocolError"),
        f"fetch-count-2**31-1/{_impl}": (
            _slice(_impl, 4), lambda: struct.pack(">ii", 0, 0x7FFFFFFF) + bytes(64),
            "ProtocolError"),
        f"fetch-compact-count-2**32/{_impl}": (
            _slice(_impl, 12), lambda: bytes(10) + b"\xff\xff\xff\xff\x0f" + bytes(64),
            "ProtocolError"),
    }
    for _name, (_codec_id, _make) in BOMBS.items():
        CASES[f"bomb-{_name}/{_impl}"] = (
            _decode(_impl, max_decompressed=CAP),
            (lambda c=_codec_id, m=_make: v2_batch(m(), codec=c)), "DecompressionLimitError")
def sixteen_mib_batches(n: int) -> bytes:
    """n zstd batches of 16 records of 1 MiB each: every one under the cap, not together."""
    from kproto import records

    return b"".join(records.encode(value=[bytes(MiB)] * 16, compression="zstd",
                                   base_offset=16 * i) for i in range(n))


for _impl in ("cython", "pure"):
    CASES[f"bombs-each-under-the-cap/{_impl}"] = (
        _decode(_impl, max_decompressed=CAP), lambda: sixteen_mib_batches(8),
        "DecompressionLimitError")
CASES |= {
    "metadata-brokers-2**31-1": (
        _protocol(3, 1), lambda: struct.pack(">i", 0x7FFFFFFF) + bytes(64),
        "ProtocolError: cannot decode MetadataResponse v1: field brokers: array claims "
        "2147483647 elements"),
    "metadata-compact-brokers-2**32": (
        _protocol(3, 12), lambda: bytes(4) + b"\xff\xff\xff\xff\x0f" + bytes(64),
        "ProtocolError"),
    "sasl-auth-bytes-2GiB": (
        _protocol(36, 0), lambda: struct.pack(">hhi", 0, -1, 0x7FFFFFFF) + bytes(64),
        "ProtocolError: cannot decode SaslAuthenticateResponse v0: field auth_bytes: truncated"),
    "tagged-fields-2**31": (
        _protocol(18, 3), lambda: struct.pack(">h", 0) + b"\x01" + bytes(4)
        + b"\x80\x80\x80\x80\x08", "ProtocolError"),
    "every-response-7fffffff": (_every_response, lambda: b"\x7f\xff\xff\xff" * 16, "ok"),
    "response-frame-claims-2GiB": (
        _connection, lambda: struct.pack(">ii", 0x7FFFFFFF, 1) + bytes(8 * MiB),
        "ProtocolError: response size 2147483647 is outside 4..1048576 bytes; the connection "
        "can no longer be trusted and was closed"),
}


def _status() -> dict[str, int]:
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                out[key] = int(value.split()[0]) * 1024
    return out


def probe(case: str, path: str) -> dict[str, Any]:
    """Run one case in this process; the memory it took and how it ended."""
    import kproto._codec
    import kproto._pure
    import kproto.net
    import kproto.protocol  # noqa: F401 - imports are not what is measured

    op = CASES[case][0]
    data = Path(path).read_bytes()
    if op is _every_response:
        op(b"")                             # the decoders compiled (cached): not what is measured
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")                        # VmHWM := VmRSS
    before = _status()
    tracemalloc.start()
    try:
        op(data)
        outcome = "ok"
    except Exception as exc:  # noqa: BLE001 - reported, the test judges it
        outcome = f"{type(exc).__name__}: {exc}"
    traced = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    after = _status()
    return {"case": case, "input": len(data), "rss": after["VmHWM"] - before["VmRSS"],
            "traced": traced, "outcome": outcome}


def measure(case: str, tmp_path: Path) -> dict[str, Any]:
    path = tmp_path / "input"
    path.write_bytes(CASES[case][1]())
    proc = subprocess.run([sys.executable, "-m", "tests.test_bounds", case, str(path)],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.splitlines()[-1])


# --------------------------------------------------------------------------- tests

pytestmark = pytest.mark.skipif(not Path("/proc/self/clear_refs").exists(),
                                reason="needs Linux /proc (peak RSS reset)")


@pytest.mark.parametrize("case", [c for c in CASES if not c.startswith("bomb")])
def test_bogus_lengths_allocate_nothing(case: str, tmp_path: Path) -> None:
    result = measure(case, tmp_path)
    assert result["outcome"].startswith(CASES[case][2]), result
    assert result["rss"] < SLACK, result
    assert result["traced"] < 2 * MiB, result


@pytest.mark.parametrize("case", [c for c in CASES if c.startswith("bomb")])
def test_decompression_bombs_stop_at_the_cap(case: str, tmp_path: Path) -> None:
    result = measure(case, tmp_path)
    assert result["outcome"].startswith("DecompressionLimitError"), result
    assert str(CAP) in result["outcome"], result
    name = case.split("/")[0].removeprefix("bomb-")
    if name == "bombs-each-under-the-cap":  # the 4th batch of 16 MiB + a bit breaks the cap
        assert "were left after its earlier batches" in result["outcome"], result
        # the 3 batches decoded before it: 48 MiB of values copied into the columns
        assert result["rss"] < 2 * CAP + SLACK, result
    elif name in DECLARED:   # the frame said how big: refused before decompressing anything
        assert "declares" in result["outcome"] or "more than" in result["outcome"]
        assert result["rss"] < SLACK and result["traced"] < 2 * MiB, result
    else:  # a stream: decompressed 1 MiB at a time, stopped one step past the cap (the
        # bytearray holding it may have room for an eighth more: CPython's growth policy)
        assert result["rss"] < CAP * 9 // 8 + SLACK, result
        assert result["traced"] < CAP * 9 // 8 + 4 * MiB, result


def test_default_cap_and_its_knobs() -> None:
    import inspect

    from kproto import _codec, records
    from kproto._pure import records as pure
    from kproto.records import compression

    assert compression.DEFAULT_MAX_DECOMPRESSED == 256 * MiB
    for fn in (records.decode, records.decode_fetch_response, pure.decode_records):
        default = inspect.signature(fn).parameters["max_decompressed"].default
        assert default == compression.DEFAULT_MAX_DECOMPRESSED, fn
    assert callable(_codec.decode_records)  # its default (-1) means DEFAULT_MAX_DECOMPRESSED


def test_decode_fetch_response_passes_the_cap_down() -> None:
    from kproto import protocol, records
    from kproto.errors import DecompressionLimitError

    from .record_sets import batch_v2, sample_records

    batch = batch_v2(sample_records(200), codec=4)
    body = protocol.encode(1, 4, "response", {"responses": [{"topic": "t", "partitions": [
        {"partition_index": 0, "high_watermark": 200, "records": batch}]}]})
    assert len(records.decode_fetch_response(body, 4)) == 200
    with pytest.raises(DecompressionLimitError, match="max_decompressed"):
        records.decode_fetch_response(body, 4, max_decompressed=1000)


def test_oversized_response_closes_a_real_socket() -> None:
    """BrokerConnection against a fake broker whose every answer claims 2 GiB."""
    from kproto.errors import ProtocolError
    from kproto.net.blocking import BrokerConnection

    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(10)
    hung_up: list[bool] = []

    def broker() -> None:  # the client retries ApiVersions at v0 on a new connection
        for _ in range(2):
            conn, _ = server.accept()
            with conn:
                conn.recv(65536)                              # the ApiVersions request
                conn.sendall(struct.pack(">ii", 0x7FFFFFFF, 1) + bytes(64 * 1024))
                conn.settimeout(10)
                try:
                    hung_up.append(conn.recv(1) == b"")       # the client closed it
                except ConnectionResetError:
                    hung_up.append(True)

    thread = threading.Thread(target=broker, daemon=True)
    thread.start()
    port = server.getsockname()[1]
    client = BrokerConnection(f"127.0.0.1:{port}", max_response_bytes=MiB, timeout=10)
    try:
        with pytest.raises(ProtocolError,
                           match=r"response size 2147483647 is outside 4\.\.1048576"):
            client.connect()
        thread.join(10)
    finally:
        client.close()
        server.close()
    assert hung_up == [True, True]
    assert client.in_flight == 0


def report() -> None:
    import tempfile

    print("| case | input bytes | peak RSS growth | peak traced | outcome |")
    print("|---|---:|---:|---:|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for case in CASES:
            r = measure(case, Path(tmp))
            print(f"| {case} | {r['input']:,} | {r['rss'] / MiB:.1f} MiB | "
                  f"{r['traced'] / MiB:.2f} MiB | {r['outcome'][:90]} |", flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "--report":
        report()
    else:
        print(json.dumps(probe(sys.argv[1], sys.argv[2])))
