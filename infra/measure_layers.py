"""Measure skewlab's package structure: lines per package, imports inside functions, cycles.

Usage: python infra/measure_layers.py [ROOT]   (ROOT defaults to the repo holding this file)
"""

from __future__ import annotations

import ast
import sys
from collections import defaultdict
from collections.abc import Iterable, Mapping
from pathlib import Path

HEAVY = (
    "pyspark",
    "mlflow",
    "airflow",
    "great_expectations",
    "matplotlib",
    "deltalake",
    "confluent_kafka",
    "kafka",
    "pyarrow",
    "pandas",
    "psutil",
    "requests",
)


def package_of(module: str) -> str:
    parts = module.split(".")
    if len(parts) < 2:
        return parts[0]
    if len(parts) == 2:
        # skewlab.clock / skewlab.live (package) -> name after skewlab
        return parts[1]
    return parts[1]


def module_name(root: Path, path: Path) -> str:
    rel = path.relative_to(root / "lib").with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def resolve(mod: str, is_pkg: bool, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    base = mod.split(".")
    if not is_pkg:
        base = base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def scan(root: Path) -> dict[str, object]:
    lines: dict[str, int] = defaultdict(int)
    local_own = 0
    local_heavy = 0
    local_other = 0
    edges: dict[str, set[str]] = defaultdict(set)
    top_edges: dict[str, set[str]] = defaultdict(set)
    for path in sorted((root / "lib" / "skewlab").rglob("*.py")):
        mod = module_name(root, path)
        is_pkg = path.name == "__init__.py"
        src = path.read_text()
        pkg = package_of(mod) if mod.count(".") >= 1 else "skewlab"
        if mod.count(".") == 1 and not is_pkg:
            pkg = "top." + mod.split(".")[1]
        lines[pkg] += len(src.splitlines())
        tree = ast.parse(src)
        func_nodes: set[int] = set()
        for fn in ast.walk(tree):
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for sub in ast.walk(fn):
                    if isinstance(sub, (ast.Import, ast.ImportFrom)):
                        func_nodes.add(id(sub))
        for node in ast.walk(tree):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = resolve(mod, is_pkg, node)
                targets = [base]
            for t in targets:
                inside = id(node) in func_nodes
                if t.startswith("skewlab"):
                    if inside:
                        local_own += 1
                    tpkg = package_of(t) if t.count(".") >= 1 else "skewlab"
                    if t.count(".") == 1 and not (root / "lib" / t.replace(".", "/")).is_dir():
                        tpkg = "top." + t.split(".")[1]
                    if isinstance(node, ast.ImportFrom) and t == "skewlab":
                        continue
                    if tpkg != pkg:
                        edges[pkg].add(tpkg)
                        if not inside:
                            top_edges[pkg].add(tpkg)
                elif inside:
                    if t.split(".")[0] in HEAVY:
                        local_heavy += 1
                    else:
                        local_other += 1
    return {
        "lines": dict(lines),
        "local_own": local_own,
        "local_heavy": local_heavy,
        "local_other": local_other,
        "edges": {k: sorted(v) for k, v in edges.items()},
        "top_edges": {k: sorted(v) for k, v in top_edges.items()},
    }


def cycles(edges: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """Strongly connected components with more than one package (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, []):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in list(edges):
        if v not in index:
            visit(v)
    return out


def main() -> None:
    root = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[1]
    r = scan(root)
    lines = r["lines"]
    assert isinstance(lines, dict)
    print("lines per package (top.*: top-level modules):")
    for k in sorted(lines):
        print(f"  {k:16s} {lines[k]:6d}")
    print(f"  {'TOTAL':16s} {sum(lines.values()):6d}")
    print(
        f"imports inside functions: skewlab {r['local_own']}, heavy optional "
        f"{r['local_heavy']}, other {r['local_other']}"
    )
    for label, key in (("module-level imports", "top_edges"), ("all imports", "edges")):
        g = r[key]
        assert isinstance(g, dict)
        cyc = cycles(g)
        print(f"package-level cycles ({label}): {len(cyc)}")
        for c in cyc:
            print("  ", " <-> ".join(c))
    edges = r["edges"]
    assert isinstance(edges, dict)
    print("package edges:")
    for k in sorted(edges):
        print(f"  {k} -> {', '.join(edges[k])}")


if __name__ == "__main__":
    main()
