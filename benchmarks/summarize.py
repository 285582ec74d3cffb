"""Turn a pytest-benchmark JSON file into the ratio tables of BENCHMARKS.md.

    python benchmarks/summarize.py bench.json

``table_main`` is the ``--table`` command line the benchmark modules that print their
own tables share (bench_clients.py, bench_spark.py).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections import defaultdict
from collections.abc import Callable


def table_main(script: str, doc: str | None, tables: Callable[[str], str],
               argv: list[str]) -> int:
    """``script --table [pytest args]`` runs the benchmarks of ``script`` and prints
    ``tables(json)`` of the run; ``script --table saved.json`` prints the tables of a
    saved run. Returns the exit status (pytest's when it fails)."""
    if not argv or argv[0] != "--table":
        print(doc)
        return 2
    if len(argv) > 1 and not argv[1].startswith("-"):
        print(tables(argv[1]))
        return 0
    import pytest

    with tempfile.TemporaryDirectory() as tmp:
        args = argv[1:]
        kept = [a for a in args if a.startswith("--benchmark-json=")]
        out = kept[-1].split("=", 1)[1] if kept else os.path.join(tmp, "bench.json")
        if not kept:
            args.append(f"--benchmark-json={out}")
        code = pytest.main([script, "-o", "python_files=bench_*.py", "-p", "no:cacheprovider",
                            *args])
        if code != 0:
            return int(code)
        if os.path.exists(out):     # not with --benchmark-disable
            print()
            print(tables(out))
    return 0


def main(path: str) -> None:
    runs = json.load(open(path))["benchmarks"]
    t: dict[str, dict[str, float]] = defaultdict(dict)
    info: dict[str, dict] = {}
    for b in runs:
        name = b["name"].split("[")[0].replace("test_", "")
        param = b.get("param") or ""
        t[param][name] = b["stats"]["median"]
        info[f"{param}/{name}"] = b.get("extra_info", {})

    print("### Decode (median of rounds; records/s and ratios from the same run)\n")
    print("| codec | kproto columns | → Arrow | binary_view | aiokafka | kafka-python | "
          "kproto ÷ aiokafka | kproto ÷ ceiling | binary_view ÷ ceiling |")
    print("|---|---|---|---|---|---|---|---|---|")
    ceilings = t.get("", {})
    for codec in ("none", "gzip", "snappy", "lz4", "zstd"):
        row = t.get(codec, {})
        if "kproto_columns" not in row:
            continue
        n = info[f"{codec}/kproto_columns"]["records"]

        def rate(name: str, records: int = n, row: dict[str, float] = row) -> str:
            if name not in row:
                return "-"
            return f"{records / row[name] / 1e6:.2f} M/s"

        def share(ceiling: float | None, name: str, row: dict[str, float] = row) -> str:
            return f"{ceiling / row[name]:.0%}" if ceiling and name in row else "-"

        kp_n = info.get(f"{codec}/kafka_python_records", {}).get("records", n)
        ratio = row["aiokafka_records"] / row["kproto_columns"] if "aiokafka_records" in row else 0
        if codec == "none":     # CRC pass + one copy for columns; the CRC pass for views
            crc, copy = ceilings.get("ceiling_crc32c"), ceilings.get("ceiling_memcpy")
            both = crc + copy if crc and copy else None
            cells = share(both, "kproto_columns"), share(crc, "kproto_binary_view")
        else:
            raw = row.get("ceiling_decompress")
            cells = share(raw, "kproto_columns"), share(raw, "kproto_binary_view")
        print(f"| {codec} | {rate('kproto_columns')} | {rate('kproto_arrow')} | "
              f"{rate('kproto_binary_view')} | {rate('aiokafka_records')} | "
              f"{rate('kafka_python_records', kp_n)} | {ratio:.1f}× | {cells[0]} | {cells[1]} |")
    if "ceiling_crc32c" in ceilings or "ceiling_memcpy" in ceilings:
        size = info.get("/ceiling_memcpy", info.get("/ceiling_crc32c", {})).get("bytes", 0)
        parts = [f"{label} {size / ceilings[name] / 1e9:.2f} GB/s"
                 for name, label in (("ceiling_crc32c", "CRC-32C pass (crc32c package)"),
                                     ("ceiling_memcpy", "one copy"))
                 if name in ceilings]
        if "kproto_columns" in t.get("none", {}):
            parts.append(f"kproto columns {size / t['none']['kproto_columns'] / 1e9:.2f} GB/s")
        print("\nUncompressed corpus (ceilings: none ÷ CRC pass + copy, binary_view ÷ CRC pass; "
              "compressed: ÷ decompress_buffer): " + ", ".join(parts))
    fetch = []
    for codec in ("none", "gzip", "snappy", "lz4", "zstd"):
        for mode, whole in (("columns", "kproto_columns"), ("binary_view", "kproto_binary_view")):
            key = f"{codec}-{mode}"
            one, bulk = t.get(key, {}).get("kproto_one_fetch"), t.get(codec, {}).get(whole)
            if one and bulk:
                n = info[f"{key}/kproto_one_fetch"]["records"]
                n_bulk = info[f"{codec}/{whole}"]["records"]
                fetch.append(f"{codec} {mode} {n / one / 1e6:.2f} M/s "
                             f"({(n / one) / (n_bulk / bulk):.0%})")
    if fetch:
        print("\nOne partition's fetch (the corpus's batches in its first 1 MiB), records/s and "
              "share of the whole corpus's rate: " + ", ".join(fetch))
    crc = {k: v for k, v in t.items() if k in ("64KiB", "1MiB")}
    if crc:
        print("\n### CRC\n\n| size | kproto CRC-32C | crc32c package | ratio | kproto CRC-32 "
              "| zlib |")
        print("|---|---|---|---|---|---|")
        for size, row in crc.items():
            nbytes = info[f"{size}/kproto_crc32c"]["bytes"]

            def gbs(name: str, row: dict[str, float] = row, nbytes: int = nbytes) -> str:
                return f"{nbytes / row[name] / 1e9:.2f} GB/s" if name in row else "-"

            ratio = row.get("crc32c_package", 0) / row["kproto_crc32c"]
            print(f"| {size} | {gbs('kproto_crc32c')} | {gbs('crc32c_package')} | "
                  f"{ratio:.2f}× | {gbs('kproto_crc32')} | {gbs('zlib_crc32')} |")
    enc = {k: v for k, v in t.items() if k in ("none", "lz4") and "kproto_encode_arrow" in v}
    if enc:
        print("\n### Encode\n\n| codec | kproto from Arrow | aiokafka builder | ratio |")
        print("|---|---|---|---|")
        for codec, row in enc.items():
            n = info[f"{codec}/kproto_encode_arrow"]["records"]
            print(f"| {codec} | {n / row['kproto_encode_arrow'] / 1e6:.2f} M/s | "
                  f"{n / row['aiokafka_builder'] / 1e6:.2f} M/s | "
                  f"{row['aiokafka_builder'] / row['kproto_encode_arrow']:.1f}× |")


if __name__ == "__main__":
    main(sys.argv[1])
