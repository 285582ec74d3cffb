"""Lint and type-check kproto as part of the suite (ruff, mypy on the package)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=600)


def test_ruff() -> None:
    if shutil.which("ruff") is None and run("ruff", "--version").returncode:
        pytest.fail("ruff is a test dependency: pip install -e '.[test]'")
    result = run("ruff", "check", "kproto", "tests", "benchmarks", "tools", "dev.py")
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy() -> None:
    result = run("mypy", "kproto")
    assert result.returncode == 0, result.stdout + result.stderr


# --------------------------------------------------------------------------- structure

KPROTO = ROOT / "kproto"
#: Generated files (tables), exempt from the size limit.
GENERATED = {"kproto/errors.py"}
MAX_LINES = 700


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _kproto_imports(type_only: bool = False) -> dict[str, set[str]]:
    """kproto module -> the kproto modules it imports, at any depth of its code
    (function-level imports count; ``if TYPE_CHECKING:`` blocks only with
    ``type_only``). Cython sources (.pyx/.pxi) are read for their Python-level
    ``import``s too."""
    import ast
    import re

    modules = {_module_name(p): p for p in KPROTO.rglob("*.py")}
    for pyx in KPROTO.glob("*.pyx"):
        modules[_module_name(pyx)] = pyx
    graph: dict[str, set[str]] = {}

    def resolve(current: str, is_package: bool, level: int, name: str | None) -> str:
        base = current.split(".")
        if level:
            base = base[: len(base) - level + (1 if is_package else 0)]
            return ".".join(base + ([name] if name else []))
        return name or ""

    for mod, path in modules.items():
        deps: set[str] = set()
        is_package = path.name == "__init__.py"
        if path.suffix == ".py":
            tree = ast.parse(path.read_text())
            skip: set[int] = set()
            for node in ast.walk(tree):
                if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test) \
                        and not type_only:
                    skip |= {id(n) for child in node.body for n in ast.walk(child)}
            for node in ast.walk(tree):
                if id(node) in skip:
                    continue
                if isinstance(node, ast.Import):
                    deps |= {a.name for a in node.names}
                elif isinstance(node, ast.ImportFrom):
                    target = resolve(mod, is_package, node.level, node.module)
                    deps.add(target)
                    deps |= {f"{target}.{a.name}" for a in node.names}
        else:
            texts = [path.read_text()] + [p.read_text() for p in KPROTO.glob("*.pxi")]
            for text in texts:
                for m in re.finditer(r"^\s*(?:from\s+(\.*[\w.]*)\s+)?import\s+([\w., ]+)",
                                     text, re.M):
                    src = m.group(1)
                    if src and src.startswith("."):
                        level = len(src) - len(src.lstrip("."))
                        deps.add(resolve(mod, False, level, src.lstrip(".") or None))
                    elif src:
                        deps.add(src)
        graph[mod] = {d for d in deps if d in modules and d != mod}
    return graph


@pytest.mark.parametrize("type_only", [False, True], ids=["run-time", "with-type-only"])
def test_no_import_cycles(type_only: bool) -> None:
    """Imports only point one way (docs/design.md): no cycle among kproto's modules,
    type-only imports (``if TYPE_CHECKING:``) included. A package's __init__
    re-exporting its submodules is not a cycle with them."""
    graph = _kproto_imports(type_only)
    cycles: list[list[str]] = []
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for dep in sorted(graph[node]):
            if dep.startswith(node + ".") or node.startswith(dep + "."):
                continue        # a package and its own submodules
            if state.get(dep) == 1:
                cycles.append(stack[stack.index(dep):] + [dep])
            elif dep not in state:
                visit(dep)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_no_hand_written_file_over_700_lines() -> None:
    big = {}
    for path in sorted(KPROTO.rglob("*")):
        rel = str(path.relative_to(ROOT))
        if path.suffix in (".py", ".pyx", ".pxi") and rel not in GENERATED:
            lines = path.read_text().count("\n")
            if lines > MAX_LINES:
                big[rel] = lines
    assert not big, f"files over {MAX_LINES} lines (split them by role): {big}"


#: The modules directly under kproto/ and why each is there: leaves the layers
#: share, the one-module Admin client, the Schema Registry client, the command.
#: The producer, consumer and group code lives in its package (docs/design.md);
#: a new top-level module must be added here, and named in docs/design.md.
TOP_LEVEL = {
    "__init__": "public names, imported on first use",
    "__main__": "python -m kproto",
    "_backend": "picks the hot paths' core: _codec or _pure",
    "columns": "what the core fills (leaf; kproto.records.columns)",
    "fetched": "what the core slices into (leaf; kproto.records.fetched)",
    "compression": "codecs the core calls (leaf; kproto.records.compression)",
    "config": "settings (leaf)",
    "config_providers": "${env:...} / ${file:...} in settings, read where a client connects",
    "errors": "the exception hierarchy (leaf)",
    "structs": "TopicPartition and the other shared records (leaf)",
    "metrics": "the metrics registry every client records into (leaf: sensors, stats)",
    "telemetry": "a client's metrics reporters: stats_callback, KIP-714 pushes",
    "admin": "the Admin client: its parts (admin_*) together, no state beyond a Cluster",
    "admin_groups": "the group listings and descriptions it returns (every group type)",
    "admin_base": "what the Admin's parts share: settings, routing, per-resource Results",
    "admin_configs": "the Admin's config calls (describe / alter / incremental alter)",
    "admin_acls": "the Admin's ACL calls and Java's ACL model",
    "admin_cluster": "the Admin's cluster, partition, record and log dir calls",
    "schema_registry": "the Schema Registry client (typed values)",
    "_registry_http": "its HTTP",
    "cli": "the kproto command",
    "cli_args": "its arguments",
    "cli_groups": "its groups command",
    "cli_admin": "its admin commands (configs, acls, cluster, log-dirs, records)",
    "cli_records": "its consume/produce extras: progress, decoded values, Parquet",
    "bench": "its decode benchmark",
    "demo": "the README's main job",
}


def test_client_code_lives_in_its_package() -> None:
    top = {p.stem for p in KPROTO.glob("*.py")}
    assert top == set(TOP_LEVEL), (
        f"modules directly under kproto/ not accounted for: {sorted(top - set(TOP_LEVEL))} "
        "(producer, consumer and group code goes in its package); gone: "
        f"{sorted(set(TOP_LEVEL) - top)}")
    design = (ROOT / "docs" / "design.md").read_text()
    assert not [m for m in TOP_LEVEL if not m.startswith("__") and m not in design]
    for package in ("producer", "consumer", "groups"):
        doc = (KPROTO / package / "__init__.py").read_text()
        assert doc.startswith('"""'), f"kproto/{package}/__init__.py says what it is"


def test_only_the_driver_waits_on_sockets() -> None:
    """Every wait for answers on several connections goes through the I/O driver
    (kproto/net/driver.py): no other module imports ``selectors`` or ``select``."""
    import ast

    offenders = []
    for path in KPROTO.rglob("*.py"):
        if path == KPROTO / "net" / "driver.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            if {"selectors", "select"} & {n.split(".")[0] for n in names}:
                offenders.append(str(path.relative_to(ROOT)))
    assert not offenders, f"waits outside the driver: {offenders}"
