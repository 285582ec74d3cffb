"""Drafting aid: print kproto's schema DSL for an official Kafka JSON message definition.

When Kafka adds a version, run this on the new definition, review the diff
against the declaration in ``kproto/protocol/apis/`` and edit that by hand.
The declarations in kproto are the source of truth; ``tests/test_schema_vs_kafka_json.py``
checks them against the JSON shipped inside the installed kafka-python, or against the
newer official file vendored in ``tests/kafka_json/`` where there is one (this tool
reads that first too).

    python tools/json_to_dsl.py FetchResponse [more names...]
"""

from __future__ import annotations

import re
import sys

_SIMPLE = {"int8", "int16", "int32", "int64", "uint16", "uint32", "float64", "bool",
           "string", "bytes", "records", "uuid"}
_TYPE_DEFAULT = {"int8": "0", "int16": "0", "int32": "0", "int64": "0", "uint16": "0",
                 "uint32": "0", "bool": "false", "string": "", "float64": "0"}


def snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def field_lines(fields: list[dict], indent: int) -> list[str]:
    out = []
    for f in fields:
        t = f["type"]
        if t.startswith("[]"):
            typ = f"[{t[2:]}]" if t[2:] in _SIMPLE else "[]"
        else:
            typ = t if t in _SIMPLE else "{}"
        opts = []
        nv = f.get("nullableVersions")
        if nv:
            opts.append("null" if nv == "0+" else f"null={nv}")
        if "tag" in f:
            if f.get("taggedVersions", f["versions"]) != f["versions"]:
                raise SystemExit(f"taggedVersions differ for {f['name']}")
            opts.append(f"tag={f['tag']}")
        if "default" in f:
            d = str(f["default"]).lower() if isinstance(f["default"], bool) else str(f["default"])
            if d != _TYPE_DEFAULT.get(t):
                if t == "string" and d != "null":
                    d = f"'{d}'"
                opts.append(f"default={d}")
        if f.get("ignorable"):
            opts.append("ignorable")
        if f.get("flexibleVersions") == "none":
            opts.append("noflex")
        left = " " * indent + snake(f["name"])
        out.append(f"{left:<36} {typ:<9} {f['versions']:<6} {' '.join(opts)}".rstrip())
        if "fields" in f:
            out.extend(field_lines(f["fields"], indent + 2))
    return out


def main(names: list[str]) -> None:
    from pathlib import Path

    from kafka.protocol.schemas.load_json import load_json

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    vendored = Path(__file__).resolve().parent.parent / "tests" / "kafka_json"
    for name in names:
        package = ("tests.kafka_json" if (vendored / f"{name}.json").exists()
                   else "kafka.protocol.schemas.resources")
        d = load_json(name, package)
        print(f"# {name}: versions {d['validVersions']}, flexible {d['flexibleVersions']}")
        print("\n".join(field_lines(d["fields"], 4)))
        print()


if __name__ == "__main__":
    main(sys.argv[1:])
