"""Hypothesis strategies for Avro writer/reader schema pairs (tests/test_avro_pairs.py).

A base schema (a record: nested records, unions, enums with and without defaults, fixed,
arrays, maps, named types used again by name, every logical type, fields with defaults)
is evolved into a (writer, reader) pair the reader can read, as each compatibility mode
changes schemas:

* ``backward`` (the reader is the new schema): fields added with defaults, fields
  removed, types promoted (int -> long -> float -> double, string <-> bytes), decimal
  precision widened, enum symbols added (and defaults), union branches added, a type made
  a union, fields and named types renamed with aliases, named types moved to another
  namespace (the same unqualified name);
* ``forward`` (the reader is the old schema): the writer adds fields of any type, drops
  fields the reader has defaults for, narrows types, writes fewer enum symbols (more when
  the reader has a default) and fewer union branches, a union's branch on its own;
* ``full``: both ways (fields added or dropped with defaults on both sides, enums with
  defaults on both sides).

``lazy`` pairs also make changes whose values fail one by one (an enum symbol or a union
branch the reader lacks); ``broken`` pairs make one change no reader can resolve, where
every value reaches it (a field without default added, a field's type changed to an
unrelated one or narrowed, a named type renamed without alias, a fixed resized).

Schemas are built with every named type written out in full wherever it is used, and
``dedupe`` then turns every use after the first into its name, as a schema must be.
Default values are JSON; ``py_default`` is the value the specification says a reader
gets from one (fastavro gives defaults back as their JSON, so the tests hand it a reader
whose defaults are already these values).
"""

from __future__ import annotations

import copy
import datetime
import decimal
import json
import math
import struct
from typing import Any

from hypothesis import strategies as st

UTC = datetime.timezone.utc
EPOCH = datetime.datetime(1970, 1, 1, tzinfo=UTC)
NAMED = ("record", "enum", "fixed")
PROMOTIONS = {"int": ["long", "float", "double"], "long": ["float", "double"],
              "float": ["double"], "string": ["bytes"], "bytes": ["string"]}
NARROWINGS = {r: [w for w, rs in PROMOTIONS.items() if r in rs] for r in
              ("long", "float", "double", "bytes", "string")}
LOGICAL = ["date", "time-millis", "time-micros", "timestamp-millis", "timestamp-micros",
           "timestamp-nanos", "local-timestamp-millis", "local-timestamp-micros",
           "local-timestamp-nanos", "uuid", "decimal", "decimal-fixed"]
_TEXT = st.text(alphabet=st.sampled_from("abXY-_é漢🙂 0"), max_size=6)
_SYMBOLS = ["A", "B", "C", "D", "E_1", "F", "G"]


class Ctx:
    """One example's state: fresh names, the named types made so far, the mode."""

    def __init__(self, draw: st.DrawFn, mode: str = "backward") -> None:
        self.draw = draw
        self.mode = mode
        self.count = 0
        self.defs: dict[str, Any] = {}       # base named types by full name
        self.busy: set[str] = set()          # being defined (no self-reference)
        self.memo: dict[str, tuple[Any, Any]] = {}
        self.lazy = False                    # may make per-value failures
        self.made_lazy = False

    def fresh(self, prefix: str = "N") -> str:
        self.count += 1
        return f"{prefix}{self.count}"


# --------------------------------------------------------------------------- type facts


def spec(t: Any) -> dict[str, Any]:
    """A type as a dict (``"int"`` -> ``{"type": "int"}``); unions stay lists."""
    return {"type": t} if isinstance(t, str) else t


def klass(t: Any) -> str:
    """What kind of Python value a union branch takes, so that fastavro writes each
    value into the branch it was made for: at most one branch of a union per class."""
    t = spec(t)
    k, lt = t["type"], t.get("logicalType")
    if lt in ("date",) or (lt or "").endswith(("millis", "micros")) and "time-" not in lt:
        return "date"
    if lt in ("time-millis", "time-micros"):
        return "time"
    if lt == "decimal":
        return "decimal"
    return {"null": "null", "boolean": "int", "int": "int", "long": "int", "float": "float",
            "double": "float", "string": "str", "enum": "str", "bytes": "bytes",
            "fixed": "bytes", "record": "dict", "map": "dict", "array": "list"}[k]


def union_ok(branches: list[Any]) -> bool:
    """A union the generator may use: one branch per class and per unnamed type, and no
    branch a value of another one promotes to (fastavro reads a value into the first
    branch it matches, promotions included; Java and kproto into the same type first)."""
    classes = [klass(b) for b in branches]
    kinds = [spec(b)["type"] for b in branches]
    unnamed = [k for k in kinds if k not in NAMED]
    # fastavro tries to parse any text as a date or time (and fails on other text), and
    # writes bytes into a decimal branch
    clash = {"str": ("date", "time"), "decimal": ("bytes",)}
    return len(set(classes)) == len(classes) and len(set(unnamed)) == len(unnamed) and \
        not any(b in PROMOTIONS.get(a, ()) for a in kinds for b in kinds) and \
        not any(c in classes for k in classes for c in clash.get(k, ()))


def fixed_size(precision: int) -> int:
    """The fewest bytes a fixed decimal of ``precision`` digits needs."""
    size = 1
    while math.floor(math.log10(2) * (8 * size - 1)) < precision:
        size += 1
    return size


# --------------------------------------------------------------------------- base schemas


def base_type(ctx: Ctx, depth: int, namespace: str) -> Any:
    draw = ctx.draw
    kinds = ["null", "boolean", "int", "long", "float", "double", "bytes", "string",
             "logical", "logical", "enum", "fixed"]
    if depth < 3:
        kinds += ["record", "record", "array", "map", "union", "union"]
    reusable = [n for n, d in ctx.defs.items()               # nothing that holds itself
                if not any(json.dumps(b) in json.dumps(d) for b in ctx.busy)]
    if reusable:
        kinds.append("again")
    kind = draw(st.sampled_from(kinds))
    if kind == "again":
        return copy.deepcopy(ctx.defs[draw(st.sampled_from(sorted(reusable)))])
    if kind == "logical":
        return logical_type(ctx, draw(st.sampled_from(LOGICAL)), namespace)
    if kind in NAMED:
        name = f"{draw(st.sampled_from([namespace, 'other.ns']))}.{ctx.fresh()}"
        if kind == "enum":
            symbols = draw(st.lists(st.sampled_from(_SYMBOLS), min_size=1, max_size=4,
                                    unique=True))
            out: dict[str, Any] = {"type": "enum", "name": name, "symbols": symbols}
            if draw(st.booleans()):
                out["default"] = draw(st.sampled_from(symbols))
        elif kind == "fixed":
            out = {"type": "fixed", "name": name, "size": draw(st.integers(0, 5))}
        else:
            ctx.busy.add(name)
            out = {"type": "record", "name": name, "fields": [
                base_field(ctx, depth + 1, name.rpartition(".")[0], i)
                for i in range(draw(st.integers(0, 4)))]}
            ctx.busy.discard(name)
        ctx.defs[name] = out
        return copy.deepcopy(out)
    if kind == "array":
        return {"type": "array", "items": base_type(ctx, depth + 1, namespace)}
    if kind == "map":
        return {"type": "map", "values": base_type(ctx, depth + 1, namespace)}
    if kind == "union":
        branches: list[Any] = []
        for _ in range(draw(st.integers(1, 4))):
            b = base_type(ctx, depth + 1, namespace)
            if not isinstance(b, list) and union_ok([*branches, b]):
                branches.append(b)
        return branches or ["null"]
    return kind


def logical_type(ctx: Ctx, name: str, namespace: str) -> Any:
    draw = ctx.draw
    if name.startswith("decimal"):
        precision = draw(st.integers(1, 40))
        out = {"type": "bytes", "logicalType": "decimal", "precision": precision,
               "scale": draw(st.integers(0, min(precision, 6)))}
        if name == "decimal-fixed":
            out.update(type="fixed", name=f"{namespace}.{ctx.fresh('Dec')}",
                       size=fixed_size(precision))
            ctx.defs[out["name"]] = out
            return copy.deepcopy(out)
        return out
    if name == "uuid":
        return {"type": "string", "logicalType": "uuid"}
    base = "int" if name in ("date", "time-millis") else "long"
    return {"type": base, "logicalType": name}


def base_field(ctx: Ctx, depth: int, namespace: str, i: int) -> dict[str, Any]:
    t = base_type(ctx, depth, namespace)
    field: dict[str, Any] = {"name": f"f{ctx.fresh('_')}", "type": t}
    if ctx.draw(st.integers(0, 9)) < 4:
        field["default"] = default_for(ctx, t)
    return field


@st.composite
def base_schema(draw: st.DrawFn, ctx_mode: str = "backward") -> tuple[Ctx, Any]:
    ctx = Ctx(draw, ctx_mode)
    name = f"root.{ctx.fresh('R')}"
    fields = [base_field(ctx, 1, "root", i) for i in range(draw(st.integers(1, 5)))]
    return ctx, {"type": "record", "name": name, "fields": fields}


# --------------------------------------------------------------------------- defaults


def default_for(ctx: Ctx, t: Any) -> Any:
    """A JSON default of type ``t`` (a union's: of its first branch, sometimes of a later
    one, which Avro 1.12 allows)."""
    draw = ctx.draw
    if isinstance(t, list):
        later = [b for b in t[1:] if _default_fits_only(b, t)]
        if later and draw(st.integers(0, 4)) == 0:
            return default_for(ctx, draw(st.sampled_from(later)))
        return default_for(ctx, t[0])
    s = spec(t)
    k, lt = s["type"], s.get("logicalType")
    if k == "null":
        return None
    if k == "boolean":
        return draw(st.booleans())
    if lt == "decimal":
        size = s["size"] if k == "fixed" else draw(st.integers(1, 3))
        limit = min(2 ** (8 * size - 1), 10 ** s["precision"])
        n = draw(st.integers(-limit + 1, limit - 1))
        width = s["size"] if k == "fixed" else max(1, (n.bit_length() + 8) // 8)
        return n.to_bytes(width, "big", signed=True).decode("latin-1")
    if lt == "date":
        return draw(st.integers(-719162, 2932896))
    if lt in ("time-millis",):
        return draw(st.integers(0, 86_399_999))
    if lt in ("time-micros",):
        return draw(st.integers(0, 86_399_999_999))
    if k == "int":
        return draw(st.integers(-(2**31), 2**31 - 1))
    if k == "long":
        bound = {"millis": 10**13, "micros": 10**16}.get((lt or "-").rpartition("-")[2],
                                                          2**63 - 1)
        return draw(st.integers(-bound, bound))
    if k in ("float", "double"):
        return draw(st.sampled_from([0.5, -1.25, 3.0, 1e10, 0]))
    if lt == "uuid":
        return str(draw(st.uuids()))
    if k == "string":
        return draw(_TEXT)
    if k in ("bytes", "fixed"):
        size = s.get("size", draw(st.integers(0, 4)))
        return draw(st.binary(min_size=size, max_size=size)).decode("latin-1")
    if k == "enum":
        return draw(st.sampled_from(s["symbols"]))
    if k == "array":
        return [default_for(ctx, s["items"]) for _ in range(draw(st.integers(0, 2)))]
    if k == "map":
        return {draw(_TEXT): default_for(ctx, s["values"]) for _ in range(draw(st.integers(0, 2)))}
    assert k == "record"
    return {f["name"]: default_for(ctx, f["type"]) for f in s["fields"]
            if "default" not in f or draw(st.booleans())}


def _default_fits_only(b: Any, union: list[Any]) -> bool:
    """Whether defaults of branch ``b`` fit no branch before it (so they stay ``b``'s)."""
    kinds = {spec(x)["type"] for x in union[:union.index(b)]}
    k = spec(b)["type"]
    clash = {"int": {"long", "float", "double"}, "long": {"int", "float", "double"},
             "float": {"double", "int", "long"}, "double": {"float", "int", "long"},
             "string": {"bytes", "fixed", "enum"}, "bytes": {"string", "fixed", "enum"},
             "fixed": {"string", "bytes", "enum"}, "enum": {"string", "bytes", "fixed"},
             "record": {"map", "record"}, "map": {"record", "map"}}.get(k, set())
    return not (kinds & (clash | {k}))


def py_default(t: Any, v: Any) -> Any:
    """The value a reader gets from the JSON default ``v`` of type ``t`` (a union's: the
    first branch it fits); ValueError when it fits none."""
    if isinstance(t, list):
        for b in t:
            try:
                return py_default(b, v)
            except ValueError:
                continue
        raise ValueError(f"{v!r} fits no branch of {t}")
    s = spec(t)
    k, lt = s["type"], s.get("logicalType")
    number = isinstance(v, int | float) and not isinstance(v, bool)
    if k == "null" and v is None or k == "boolean" and isinstance(v, bool):
        return v
    if k in ("int", "long") and isinstance(v, int) and not isinstance(v, bool):
        if not -(2 ** (31 if k == "int" else 63)) <= v < 2 ** (31 if k == "int" else 63):
            raise ValueError(v)
        if lt == "date":
            return datetime.date(1970, 1, 1) + datetime.timedelta(days=v)
        if lt in ("time-millis", "time-micros"):
            us = v * 1000 if lt == "time-millis" else v
            return (datetime.datetime(2000, 1, 1) + datetime.timedelta(microseconds=us)).time()
        if lt and lt.endswith(("millis", "micros")):
            local = lt.startswith("local")
            us = v * 1000 if lt.endswith("millis") else v
            out = EPOCH + datetime.timedelta(microseconds=us)
            return out.replace(tzinfo=None) if local else out
        return v
    if k == "float" and number:
        return struct.unpack("<f", struct.pack("<f", v))[0]
    if k == "double" and number:
        return float(v)
    if k in ("string", "enum") and isinstance(v, str):
        if k == "enum" and v not in s["symbols"]:
            raise ValueError(v)
        return v
    if k in ("bytes", "fixed") and isinstance(v, str):
        try:
            data = v.encode("latin-1")
        except UnicodeEncodeError:
            raise ValueError(v) from None
        if k == "fixed" and len(data) != s["size"]:
            raise ValueError(v)
        if lt == "decimal":
            return _decimal(int.from_bytes(data, "big", signed=True), s["scale"])
        return data
    if k == "array" and isinstance(v, list):
        return [py_default(s["items"], x) for x in v]
    if k == "map" and isinstance(v, dict):
        return {key: py_default(s["values"], x) for key, x in v.items()}
    if k == "record" and isinstance(v, dict):
        out = {}
        for f in s["fields"]:
            if f["name"] not in v and "default" not in f:
                raise ValueError(f"default lacks {f['name']}")
            out[f["name"]] = py_default(f["type"], v.get(f["name"], f.get("default")))
        return out
    raise ValueError(f"{v!r} is not a {k}")


def _decimal(unscaled: int, scale: int) -> decimal.Decimal:
    """The decimal ``unscaled * 10**-scale``, exactly (no context rounds it)."""
    return decimal.Decimal(f"{unscaled}e-{scale}")


def with_py_defaults(t: Any) -> Any:
    """``t`` with every field default replaced by its ``py_default`` (for fastavro)."""
    if isinstance(t, list):
        return [with_py_defaults(b) for b in t]
    if isinstance(t, str):
        return t
    out = dict(t)
    if "fields" in out:
        out["fields"] = [{**f, "type": with_py_defaults(f["type"]),
                          **({"default": py_default(f["type"], f["default"])}
                             if "default" in f else {})} for f in out["fields"]]
    for key in ("items", "values"):
        if key in out:
            out[key] = with_py_defaults(out[key])
    return out


def dedupe(t: Any, seen: set[str] | None = None) -> Any:
    """``t`` with every use of a named type after its first written as its full name."""
    seen = set() if seen is None else seen
    if isinstance(t, list):
        return [dedupe(b, seen) for b in t]
    if isinstance(t, str):
        return t
    if t["type"] in NAMED:
        if t["name"] in seen:
            return t["name"]
        seen.add(t["name"])
    out = dict(t)
    if "fields" in out:
        out["fields"] = [{**f, "type": dedupe(f["type"], seen)} for f in out["fields"]]
    for key in ("items", "values"):
        if key in out:
            out[key] = dedupe(out[key], seen)
    return out


# --------------------------------------------------------------------------- values


def values(t: Any) -> st.SearchStrategy[Any]:
    """Values of ``t`` as fastavro writes them."""
    if isinstance(t, list):
        return st.one_of([values(b) for b in t])
    s = spec(t)
    k, lt = s["type"], s.get("logicalType")
    if lt == "decimal":
        bound = 10 ** s["precision"] - 1
        return st.integers(-bound, bound).map(lambda n: _decimal(n, s["scale"]))
    if lt == "date":
        return st.dates(datetime.date(1, 1, 1), datetime.date(9999, 12, 31))
    if lt in ("time-millis", "time-micros"):
        times = st.times()
        return times.map(lambda t: t.replace(microsecond=t.microsecond // 1000 * 1000)) \
            if lt == "time-millis" else times
    if lt and lt.endswith("nanos"):
        return st.integers(-(2**62), 2**62)
    if lt and lt.endswith(("millis", "micros")):
        moments = st.datetimes(datetime.datetime(1800, 1, 1), datetime.datetime(2300, 1, 1))
        if lt.endswith("millis"):
            moments = moments.map(lambda d: d.replace(microsecond=d.microsecond // 1000 * 1000))
        return moments if lt.startswith("local") else moments.map(
            lambda d: d.replace(tzinfo=UTC))
    if lt == "uuid":
        return st.uuids().map(str)
    simple = {"null": st.none(), "boolean": st.booleans(),
              "int": st.integers(-(2**31), 2**31 - 1),
              "long": st.integers(-(2**63), 2**63 - 1),
              "float": st.floats(width=32, allow_nan=False), "double": st.floats(allow_nan=False),
              "bytes": st.binary(max_size=6), "string": _TEXT}
    if k in simple:
        return simple[k]
    if k == "fixed":
        return st.binary(min_size=s["size"], max_size=s["size"])
    if k == "enum":
        return st.sampled_from(s["symbols"])
    if k == "array":
        return st.lists(values(s["items"]), max_size=3)
    if k == "map":
        return st.dictionaries(_TEXT, values(s["values"]), max_size=3)
    return st.fixed_dictionaries({f["name"]: values(f["type"]) for f in s["fields"]})


# --------------------------------------------------------------------------- evolution


def evolve(ctx: Ctx, t: Any, in_union: frozenset[str] | None = None) -> tuple[Any, Any]:
    """(writer, reader) types from the base type ``t``: the reader reads the writer. In a
    union (``in_union``: the types of its other branches) a branch keeps its class (int ->
    long, float -> double only) and takes no type another branch has."""
    draw, mode = ctx.draw, ctx.mode
    if isinstance(t, list):
        return _union(ctx, t)
    s = spec(t)
    k, lt = s["type"], s.get("logicalType")
    if k in NAMED:
        if s["name"] not in ctx.memo:
            ctx.busy.add(s["name"])               # new fields do not use it: no recursion
            ctx.memo[s["name"]] = _named(ctx, s)
            ctx.busy.discard(s["name"])
        return copy.deepcopy(ctx.memo[s["name"]])
    if k == "array" or k == "map":
        key = "items" if k == "array" else "values"
        w, r = evolve(ctx, s[key])
        return {"type": k, key: w}, {"type": k, key: r}
    w, r = t, t
    if lt == "decimal":
        if mode != "full" and draw(st.booleans()):       # precision widened, same scale
            less = {**s, "precision": max(s["precision"] - draw(st.integers(1, 5)),
                                          s["scale"], 1)}
            w, r = (s, {**s, "precision": s["precision"] + 3}) if mode == "backward" \
                else (less, s)
    elif not lt and mode != "full" and draw(st.integers(0, 2)) == 0:
        keep = ({"int": ["long"], "float": ["double"]} if in_union is not None
                else PROMOTIONS).get(k, [])
        narrow = [x for x in NARROWINGS.get(k, []) if in_union is None or klass(x) == klass(k)]
        keep = [x for x in keep if x not in (in_union or ())]
        narrow = [x for x in narrow if x not in (in_union or ())]
        if mode == "backward" and keep:
            r = draw(st.sampled_from(keep))
        elif mode == "forward" and narrow:
            w = draw(st.sampled_from(narrow))
        ctx.made_lazy |= (w, r) == ("bytes", "string")   # bytes that are not UTF-8 fail
    if mode != "full" and in_union is None and draw(st.integers(0, 5)) == 0:
        extra = draw(st.sampled_from(["null", "string", "boolean", "double",
                                      {"type": "array", "items": "int"}]))
        union = [extra, r] if draw(st.booleans()) else [r, extra]
        if union_ok(union) and not _takes(spec(w)["type"], extra):
            r = union                 # the reader's union holds the writer's type
    return w, r


def _takes(kind: str, branch: Any) -> bool:
    """Whether a value of ``kind`` could be read as ``branch`` (the same type or a
    promotion): fastavro takes the first such branch of a reader's union, Java the same
    type first, so the pairs add no such branch to the writer's type's union."""
    return spec(branch)["type"] in (kind, *PROMOTIONS.get(kind, ()))


def _union(ctx: Ctx, branches: list[Any]) -> tuple[Any, Any]:
    draw, mode = ctx.draw, ctx.mode
    types = frozenset(spec(b)["type"] for b in branches)
    pairs = [evolve(ctx, b, in_union=types) for b in branches]
    ws, rs = [w for w, _ in pairs], [r for _, r in pairs]
    assert union_ok(ws) and union_ok(rs), (ws, rs)
    if mode == "full":
        return ws, [rs[i] for i in draw(st.permutations(range(len(rs))))]
    taken = ws + rs
    more = [b for b in ("null", "boolean", "string", "double", {"type": "map", "values": "long"})
            if union_ok([*taken, b]) and not any(_takes(spec(x)["type"], b) for x in ws)]
    extra = draw(st.lists(st.sampled_from(more), max_size=2, unique_by=str)) if more else []
    if mode == "backward":
        rs = draw(st.permutations(rs + extra))       # the reader has more branches
        if ctx.lazy and len(rs) > 1:
            rs.pop(draw(st.integers(0, len(rs) - 1)))   # a branch it no longer reads
            ctx.made_lazy = True
        if len(rs) == 1 and (len(ws) == 1 or ctx.lazy) and draw(st.booleans()):
            ctx.made_lazy |= len(ws) > 1
            return ws, rs[0]
        return ws, rs
    if len(ws) > 1 and draw(st.integers(0, 2)) == 0:  # the writer has fewer branches
        keep = draw(st.lists(st.integers(0, len(ws) - 1), min_size=1, unique=True))
        ws = [ws[i] for i in sorted(keep)]
    if ctx.lazy and extra:
        ws = ws + extra[:1]                          # one the reader does not read
        ctx.made_lazy = True
    if len(ws) == 1 and draw(st.booleans()):
        return ws[0], rs
    return ws, rs


def _fits(t: Any, v: Any) -> bool:
    try:
        py_default(t, v)
        return True
    except ValueError:
        return False


def _field(ctx: Ctx, f: dict[str, Any], t: Any) -> dict[str, Any]:
    """Field ``f`` of type ``t``, its default made anew where the old one does not fit."""
    out = {**f, "type": t}
    if "default" in out and not _fits(t, out["default"]):
        out["default"] = default_for(ctx, t)
    return out


def _named(ctx: Ctx, s: dict[str, Any]) -> tuple[Any, Any]:
    draw, mode = ctx.draw, ctx.mode
    w, r = dict(s), dict(s)
    if mode == "backward" and draw(st.integers(0, 3)) == 0:
        space, _, short = s["name"].rpartition(".")
        if draw(st.booleans()):
            r["name"] = f"{space}.{ctx.fresh(short + 'x')}"   # renamed, the old as alias
            r["aliases"] = [s["name"]]
        else:                                        # another namespace, the same name
            r["name"] = f"{'other.ns' if space != 'other.ns' else 'root'}.{short}"
    if s["type"] == "fixed":
        return w, r
    if s["type"] == "enum":
        return _enum(ctx, s, w, r)
    wf, rf = [], []
    for f in s["fields"]:
        ftw, ftr = evolve(ctx, f["type"])
        choice = draw(st.integers(0, 5))
        if choice == 0 and "default" in f:
            rf.append(_field(ctx, f, ftr))           # only the reader's: its default
            continue
        if choice == 1 and (mode != "full" or "default" in f):
            wf.append(_field(ctx, f, ftw))           # only the writer's: skipped
            continue
        wf.append(_field(ctx, f, ftw))
        field = _field(ctx, f, ftr)
        if mode == "backward" and choice == 2:       # renamed, the old name an alias
            field["name"] = ctx.fresh("g")
            field["aliases"] = draw(st.sampled_from([[f["name"]], ["zz", f["name"]]]))
        rf.append(field)
    for _ in range(draw(st.integers(0, 2))):         # fields only one side has
        new = base_field(ctx, 3, s["name"].rpartition(".")[0], 0)
        new_w, new_r = evolve(ctx, new["type"])      # (named types as each side has them)
        if mode == "forward":
            wf.append(_field(ctx, new, new_w))
            continue
        new.setdefault("default", default_for(ctx, new["type"]))
        if mode == "full" and draw(st.booleans()):
            wf.append(_field(ctx, new, new_w))
        else:
            rf.append(_field(ctx, new, new_r))
    w["fields"] = list(draw(st.permutations(wf)))
    r["fields"] = list(draw(st.permutations(rf)))
    return w, r


def _enum(ctx: Ctx, s: dict[str, Any], w: dict[str, Any],
          r: dict[str, Any]) -> tuple[Any, Any]:
    draw, mode = ctx.draw, ctx.mode
    symbols = list(s["symbols"])
    others = [x for x in _SYMBOLS if x not in symbols]
    extra = draw(st.lists(st.sampled_from(others), max_size=2, unique=True)) if others else []
    if mode == "backward":
        r["symbols"] = list(draw(st.permutations(symbols + extra)))
        if not ctx.lazy and draw(st.booleans()):
            r["default"] = draw(st.sampled_from(r["symbols"]))
        if ctx.lazy and "default" not in r and len(r["symbols"]) > 1:
            r["symbols"] = r["symbols"][1:]          # a symbol it no longer reads
            ctx.made_lazy = True
    elif mode == "forward":
        if "default" in s or (ctx.lazy and extra):
            w["symbols"] = list(draw(st.permutations(symbols + extra)))
            ctx.made_lazy |= "default" not in s and bool(extra)
        else:
            w["symbols"] = draw(st.lists(st.sampled_from(symbols), min_size=1, unique=True))
        if "default" in w and w["default"] not in w["symbols"]:
            del w["default"]
    else:                                            # both ways: defaults on both sides
        w["symbols"] = list(draw(st.permutations(symbols + extra)))
        r["symbols"] = draw(st.lists(st.sampled_from(symbols + others), min_size=1,
                                     unique=True))
        w["default"] = draw(st.sampled_from(w["symbols"]))
        r["default"] = draw(st.sampled_from(r["symbols"]))
    return w, r


# --------------------------------------------------------------------------- pairs


@st.composite
def pairs(draw: st.DrawFn, mode: str, lazy: bool = False) -> tuple[Any, Any, list[Any], bool]:
    """(writer, reader, values of the writer, whether values may fail one by one), the
    schemas with every named type written out in full (``dedupe`` them to use them)."""
    ctx, base = draw(base_schema(mode))
    ctx.lazy = lazy
    if lazy:                        # something values can fail in: an enum, a union
        t = draw(st.sampled_from([
            {"type": "enum", "name": f"root.{ctx.fresh('E')}", "symbols": ["A", "B", "C"]},
            ["null", "int", "string"], ["null", {"type": "array", "items": "long"}]]))
        base["fields"].append({"name": ctx.fresh("lz"), "type": t})
    w, r = evolve(ctx, base)
    records = draw(st.lists(values(w), min_size=1, max_size=8 if lazy else 4))
    return w, r, records, ctx.made_lazy


BREAKS = ["added without default", "unrelated type", "narrowed", "renamed",
          "fixed resized", "enum renamed"]


@st.composite
def broken_pairs(draw: st.DrawFn) -> tuple[Any, Any, list[Any], str]:
    """(writer, reader, values, what broke): a pair no reader can resolve, the break in
    a field of the root record (every value reaches it)."""
    ctx, base = draw(base_schema("full"))
    w, r = evolve(ctx, base)
    how = draw(st.sampled_from(BREAKS))
    fields = r["fields"]
    if how == "added without default":
        fields.append({"name": ctx.fresh("req"),
                       "type": evolve(ctx, base_type(ctx, 2, "root"))[1]})
    else:
        t = {"unrelated type": ("int", "string"), "narrowed": ("long", "int"),
             "renamed": ("record", None), "fixed resized": ("fixed", None),
             "enum renamed": ("enum", None)}[how]
        name = ctx.fresh("brk")
        if how == "renamed":
            wt = {"type": "record", "name": f"root.{ctx.fresh('Old')}",
                  "fields": [{"name": "x", "type": "int"}]}
            rt = {**wt, "name": f"root.{ctx.fresh('New')}"}
        elif how == "fixed resized":
            wt = {"type": "fixed", "name": f"root.{ctx.fresh('F')}", "size": 3}
            rt = {**wt, "size": 4}
        elif how == "enum renamed":
            wt = {"type": "enum", "name": f"root.{ctx.fresh('E')}", "symbols": ["A"]}
            rt = {**wt, "name": f"other.ns.{ctx.fresh('E')}"}
        else:
            wt, rt = t
        w["fields"].append({"name": name, "type": wt})
        fields.insert(draw(st.integers(0, len(fields))), {"name": name, "type": rt})
    records = draw(st.lists(values(w), min_size=1, max_size=3))
    return w, r, records, how
