"""Measure skewlab's package structure: lines per package, imports inside functions, cycles,
and names at two addresses (re-exports, imports of a name from a module that does not define it).

Usage: python infra/measure_layers.py [ROOT] [--names]   (ROOT defaults to the repo holding this
file; --names lists each re-export and each misdirected import)
"""

from __future__ import annotations

import ast
import sys
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping
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


def _bound(target: ast.expr) -> Iterator[str]:
    """The names an assignment target binds (``a``, ``a, (b, *c)``; not ``a.b`` or ``a[0]``)."""
    if isinstance(target, ast.Name):
        yield target.id
    elif isinstance(target, ast.Starred):
        yield from _bound(target.value)
    elif isinstance(target, (ast.Tuple, ast.List)):
        for elt in target.elts:
            yield from _bound(elt)


def _top_statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """The statements run when the module loads: its body and the blocks of its ``if``,
    ``try``, ``with`` and ``for`` statements (not function or class bodies)."""
    for node in body:
        yield node
        for block in ("body", "orelse", "finalbody"):
            yield from _top_statements(getattr(node, block, []))
        for handler in getattr(node, "handlers", []):
            yield from _top_statements(handler.body)


MODULE_DUNDERS = frozenset(
    ("__name__", "__file__", "__doc__", "__spec__", "__path__", "__dict__", "__loader__")
)
"""Names every module has without binding them."""


def defined_names(tree: ast.Module) -> set[str]:
    """Names the module itself binds at load time: defs, classes, assignments, loop and
    ``with`` targets, and :data:`MODULE_DUNDERS`; not the names it imports."""
    out: set[str] = set(MODULE_DUNDERS)
    for node in _top_statements(tree.body):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(node.name)
        elif isinstance(node, ast.Assign):
            for t in node.targets:
                out.update(_bound(t))
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign, ast.For, ast.AsyncFor)):
            out.update(_bound(node.target))
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            for item in node.items:
                if item.optional_vars is not None:
                    out.update(_bound(item.optional_vars))
    return out


def dunder_all(tree: ast.Module) -> list[str]:
    """The string entries of the module's ``__all__`` (``=`` and ``+=`` at load time)."""
    out: list[str] = []
    for node in _top_statements(tree.body):
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
            targets = [node.target]
        else:
            continue
        value = node.value
        if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets) and isinstance(
            value, (ast.List, ast.Tuple)
        ):
            out += [
                e.value
                for e in value.elts
                if isinstance(e, ast.Constant) and isinstance(e.value, str)
            ]
    return out


class ModuleInfo:
    """What the name checks need of one module: where it is, what it binds itself, its
    ``__all__``, each ``from skewlab.X import N`` in it and each dotted name it reads
    through an imported name (``summary.draw`` after ``from skewlab.live.report import
    summary``), anywhere in the file."""

    def __init__(self, name: str, path: Path, tree: ast.Module) -> None:
        self.name, self.path = name, path
        self.is_pkg = path.name == "__init__.py"
        self.defined = defined_names(tree)
        self.all = dunder_all(tree)
        self.name_imports: list[tuple[str, str, int]] = []
        """(source module, name, line) for each name imported from a skewlab module."""
        aliases: dict[str, str] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                src = resolve(name, self.is_pkg, node)
                if src == "skewlab" or src.startswith("skewlab."):
                    for alias in node.names:
                        self.name_imports.append((src, alias.name, node.lineno))
                        aliases[alias.asname or alias.name] = f"{src}.{alias.name}"
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.split(".")[0] == "skewlab":
                        local = alias.asname or alias.name.split(".")[0]
                        aliases[local] = alias.name if alias.asname else "skewlab"
        self.dotted_reads: list[tuple[str, int]] = []
        """(dotted name, line) for each ``a.b.c`` read whose head ``a`` is an imported name,
        spelled from ``skewlab`` (``skewlab.live.report.summary.draw``)."""
        patched: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
                parts = _dotted(node)
                if parts and parts[0] in aliases:
                    full = ".".join([aliases[parts[0]], *parts[1:]])
                    self.dotted_reads.append((full, node.lineno))
            elif isinstance(node, ast.Call) and _is_setattr(node):
                parts = _dotted(node.args[0])
                if parts and parts[0] in aliases:
                    name = node.args[1].value  # type: ignore[attr-defined]
                    patched.add(".".join([aliases[parts[0]], *parts[1:], name]))
        # a test that patches ``mod.f`` may read the original ``mod.f`` (patch where used)
        self.dotted_reads = [(d, n) for d, n in self.dotted_reads if d not in patched]

    def imported(self, name: str) -> str | None:
        """The skewlab module this module imports ``name`` from, if it does."""
        for src, n, _ in self.name_imports:
            if n == name:
                return src
        return None


def _is_setattr(call: ast.Call) -> bool:
    """``setattr(obj, "name", ...)`` or ``monkeypatch.setattr(obj, "name", ...)``."""
    f = call.func
    named = (isinstance(f, ast.Name) and f.id == "setattr") or (
        isinstance(f, ast.Attribute) and f.attr == "setattr"
    )
    return (
        named
        and len(call.args) >= 2
        and isinstance(call.args[1], ast.Constant)
        and isinstance(call.args[1].value, str)
    )


def _dotted(node: ast.expr) -> list[str]:
    """``["a", "b", "c"]`` for the expression ``a.b.c``; ``[]`` if it is not a dotted name."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    return [node.id, *reversed(parts)] if isinstance(node, ast.Name) else []


def load_modules(root: Path, dirs: Iterable[str] = ("lib",)) -> dict[str, ModuleInfo]:
    """Every module under ``root/<dir>`` for each dir, by dotted name (``lib`` is the
    import root of lib/; the others are named ``tests.unit.x`` and so on)."""
    out: dict[str, ModuleInfo] = {}
    for d in dirs:
        base = root / d
        if not base.is_dir():
            continue
        top = root / "lib" if d == "lib" else root
        for path in sorted(base.rglob("*.py")):
            parts = list(path.relative_to(top).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            mod = ".".join(parts)
            out[mod] = ModuleInfo(mod, path, ast.parse(path.read_text(), str(path)))
    return out


def _through(modules: Mapping[str, ModuleInfo], dotted: str) -> tuple[str, str] | None:
    """For a dotted read ``skewlab.a.b.N.x``: ``(module, name)`` if its longest module
    prefix ``skewlab.a.b`` neither defines ``N`` nor has a submodule ``N``, else None."""
    parts = dotted.split(".")
    for i in range(len(parts) - 1, 0, -1):
        mod = ".".join(parts[:i])
        if mod in modules:
            name = parts[i]
            if name in modules[mod].defined or f"{mod}.{name}" in modules:
                return None
            return mod, name
    return None


def misdirected_imports(modules: Mapping[str, ModuleInfo]) -> list[tuple[str, int, str, str]]:
    """``from M import N`` (or a read of ``M.N`` through an imported module) where M is a
    skewlab module that does not define N and N is not a submodule of M: (importer, line, M,
    N). Only modules in ``modules`` are checked as sources."""
    bad = []
    for mod, info in modules.items():
        for src, name, line in info.name_imports:
            source = modules.get(src)
            if source is None or name in source.defined or f"{src}.{name}" in modules:
                continue
            bad.append((mod, line, src, name))
        for dotted, line in info.dotted_reads:
            hit = _through(modules, dotted)
            if hit is not None:
                bad.append((mod, line, *hit))
    return bad


def reexports(modules: Mapping[str, ModuleInfo]) -> dict[str, set[str]]:
    """Per skewlab module M, the names it re-exports: names M imports from another skewlab
    module (or does not bind at all, such as a lazy ``__getattr__``'s) that M lists in
    ``__all__`` or that another module of ``modules`` imports from M."""
    taken: dict[str, set[str]] = defaultdict(set)
    for _, _, src, name in misdirected_imports(modules):
        taken[src].add(name)
    out: dict[str, set[str]] = {}
    for mod, info in modules.items():
        if not mod.startswith("skewlab"):
            continue
        names = {
            n
            for n in set(info.all) | taken.get(mod, set())
            if n != "*" and n not in info.defined and f"{mod}.{n}" not in modules
        }
        if names:
            out[mod] = names
    return out


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


def folders(root: Path) -> dict[str, tuple[int, int]]:
    """Each folder of lib/skewlab (``live/driver``, ``control``; ``.`` for the top) with its
    own modules and lines, subfolders not included."""
    out: dict[str, tuple[int, int]] = {}
    base = root / "lib" / "skewlab"
    for path in sorted(base.rglob("*.py")):
        key = path.parent.relative_to(base).as_posix()
        n, lines = out.get(key, (0, 0))
        out[key] = (n + 1, lines + len(path.read_text().splitlines()))
    return out


def report_folders(root: Path) -> None:
    """Print modules and lines per folder, a package's total beside its subfolders."""
    own = folders(root)
    total_lines = sum(lines for _, lines in own.values())
    print("modules and lines per folder (own files; a package with subfolders: its total too):")
    for key in sorted(own):
        n, lines = own[key]
        sub = [k for k in own if k.startswith(key + "/")] if key != "." else []
        line = f"  {key:22s} {n:4d} {lines:7d} {100.0 * lines / total_lines:5.1f} %"
        if sub:
            tn = n + sum(own[k][0] for k in sub)
            tl = lines + sum(own[k][1] for k in sub)
            line += f"   with subfolders: {tn:4d} {tl:7d} {100.0 * tl / total_lines:5.1f} %"
        print(line)


NAME_DIRS = ("lib", "tests", "jobs", "dags", "bench", "infra")
"""The folders whose modules' imports are checked against lib/."""


def report_names(root: Path, listing: bool) -> None:
    """Print the re-exports of lib/ (plain modules and package ``__init__`` files apart) and the
    imports, in lib/ and in the whole repository, that take a name from a module of lib/ that
    does not define it."""
    modules = load_modules(root, NAME_DIRS)
    lib = {m: i for m, i in modules.items() if m.split(".")[0] == "skewlab"}
    found = reexports(modules)
    for label, is_pkg in (("plain modules", False), ("package __init__s", True)):
        part = {m: n for m, n in found.items() if modules[m].is_pkg == is_pkg}
        names = sum(len(n) for n in part.values())
        print(f"re-exported names, {label}: {len(part)} modules, {names} names")
        for m in sorted(part) if listing else ():
            print(f"  {m}: {', '.join(sorted(part[m]))}")
    for label, scope in (("lib/", lib), ("lib/ + tests/ jobs/ dags/ bench/ infra/", modules)):
        bad = misdirected_imports(scope)
        plain = sum(1 for b in bad if not scope[b[2]].is_pkg)
        print(
            f"imports of a name from a module that does not define it ({label}): {len(bad)} "
            f"({plain} through plain modules, {len(bad) - plain} through package __init__s)"
        )
        for mod, line, src, name in bad if listing and scope is lib else ():
            print(f"  {mod}:{line} {src}.{name}")


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    root = Path(args[0]) if args else Path(__file__).resolve().parents[1]
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
    report_folders(root)
    report_names(root, "--names" in sys.argv)
    edges = r["edges"]
    assert isinstance(edges, dict)
    print("package edges:")
    for k in sorted(edges):
        print(f"  {k} -> {', '.join(edges[k])}")


if __name__ == "__main__":
    main()
