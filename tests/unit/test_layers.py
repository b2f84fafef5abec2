"""The package layers point one way and imports sit at module level.

Layers, lowest first (a package may import its own layer or lower ones):

0. core: the pure library (grouping, sketch, rebalance, autoscale, state, sim,
   workload, report, experiments and the top-level modules);
1. pipeline: the data path's pure steps (pipeline/) and the adapters to the
   outside (io/, services/, quality/);
2. control: the decision steps and their loop runners (control/);
3. runtime: what runs one live run (live/, spark/);
4. entry points: orchestration/, commands/, cli.

An import inside a function is allowed only for an optional dependency (any
third-party package but numpy and mmh3: pyspark, mlflow, airflow, deltalake,
...) or a skewlab module that imports one when loaded: a DAG file or a light
command must not pay for it. No module-level import cycle between modules either,
and no import inside a function whose target imports (at module level, through any
chain) the importing module: that import only dodges a cycle. Every name is imported from
the module that defines it, and no module re-exports a name it imports (a package's
``__init__`` may gather its package's public names for users and tests; lib/ does not
import through it).
"""

from __future__ import annotations

import ast
import functools
import sys
from collections import defaultdict
from pathlib import Path

from infra.measure_layers import (
    ModuleInfo,
    cycles,
    load_modules,
    misdirected_imports,
    reexports,
)

LIB = Path(__file__).resolve().parents[2] / "lib"

LAYERS: dict[str, int] = {
    **dict.fromkeys(
        ("top", "grouping", "sketch", "rebalance", "autoscale", "state", "sim", "workload",
         "report", "experiments", "advise"),
        0,
    ),
    **dict.fromkeys(("pipeline", "io", "services", "quality"), 1),
    "control": 2,
    **dict.fromkeys(("live", "spark"), 3),
    **dict.fromkeys(("orchestration", "commands", "cli"), 4),
}  # fmt: skip

CORE_DEPENDENCIES = frozenset(("numpy", "mmh3"))
"""The library's required third-party packages (pyproject.toml); every other one is optional."""


def _optional(top: str) -> bool:
    """Whether package ``top`` is an optional dependency: third-party, not a core one."""
    return top not in sys.stdlib_module_names and top not in CORE_DEPENDENCIES and top != "skewlab"


def _module(path: Path) -> str:
    parts = list(path.relative_to(LIB).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _package(module: str) -> str:
    """``skewlab.live.driver.run`` -> ``live``; ``skewlab.clock`` -> ``top.clock``; cli -> ``cli``.

    Each top-level module is its own node (they are unrelated small modules).
    """
    parts = module.split(".")
    if len(parts) == 1:
        return "top"
    if parts[1] == "cli":
        return "cli"
    if len(parts) == 2 and not (LIB / "skewlab" / parts[1]).is_dir():
        return f"top.{parts[1]}"
    return parts[1]


def _layer(package: str) -> int:
    return LAYERS["top" if package.startswith("top") else package]


class _Imports(ast.NodeVisitor):
    """Every import of one file: (target module, line, inside a function)."""

    def __init__(self, module: str, is_pkg: bool) -> None:
        self.module, self.is_pkg = module, is_pkg
        self.found: list[tuple[str, int, bool]] = []
        self.depth = 0
        self.type_checking = 0

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_If(self, node: ast.If) -> None:
        test = node.test
        is_tc = (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
            isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
        )
        if is_tc:
            self.type_checking += 1
            for sub in node.body:
                self.visit(sub)
            self.type_checking -= 1
            for sub in node.orelse:
                self.visit(sub)
        else:
            self.generic_visit(node)

    def _add(self, target: str, node: ast.AST) -> None:
        if not self.type_checking:
            self.found.append((target, node.lineno, self.depth > 0))  # type: ignore[attr-defined]

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._add(alias.name, node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:
            base = self.module.split(".")
            base = base if self.is_pkg else base[:-1]
            base = base[: len(base) - node.level + 1]
            target = ".".join([*base, node.module] if node.module else base)
        else:
            target = node.module or ""
        if target.startswith("skewlab"):
            # ``from skewlab.x import y`` may name the submodule skewlab.x.y
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                self._add(sub if _exists(sub) else target, node)
        else:
            self._add(target, node)


def _exists(module: str) -> bool:
    p = LIB.joinpath(*module.split("."))
    return p.with_suffix(".py").is_file() or (p / "__init__.py").is_file()


def _scan() -> dict[str, list[tuple[str, int, bool]]]:
    out = {}
    for path in sorted((LIB / "skewlab").rglob("*.py")):
        mod = _module(path)
        v = _Imports(mod, path.name == "__init__.py")
        v.visit(ast.parse(path.read_text(), str(path)))
        out[mod] = v.found
    return out


IMPORTS = _scan()


def _loads_heavy() -> set[str]:
    """skewlab modules whose import (at module level, transitively) loads an optional package."""
    heavy = {
        m for m, found in IMPORTS.items()
        if any(_optional(t.split(".")[0]) for t, _, inside in found if not inside)
    }  # fmt: skip
    changed = True
    while changed:
        changed = False
        for m, found in IMPORTS.items():
            if m in heavy:
                continue
            deps = {t for t, _, inside in found if not inside and t.startswith("skewlab")}
            # importing skewlab.a.b runs skewlab.a's __init__ too
            parents = {".".join(m.split(".")[:i]) for i in range(2, m.count(".") + 1)}
            if (deps | parents) & heavy:
                heavy.add(m)
                changed = True
    return heavy


def test_no_package_imports_a_higher_layer() -> None:
    bad = []
    for mod, found in IMPORTS.items():
        pkg = _package(mod)
        assert pkg.split(".")[0] in LAYERS, f"{mod}: package {pkg} has no layer; add it to LAYERS"
        for target, line, _ in found:
            if not target.startswith("skewlab") or target == "skewlab":
                continue
            tpkg = _package(target)
            if _layer(tpkg) > _layer(pkg):
                bad.append(f"{mod}:{line} ({pkg}, layer {_layer(pkg)}) imports {target} "
                           f"(layer {_layer(tpkg)})")  # fmt: skip
    assert bad == []


def test_no_cycles_between_subpackages() -> None:
    edges: dict[str, set[str]] = defaultdict(set)
    for mod, found in IMPORTS.items():
        for target, _, _ in found:
            if target.startswith("skewlab.") and _package(target) != _package(mod):
                edges[_package(mod)].add(_package(target))
    assert cycles(edges) == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def allowed_inside(target: str, heavy: set[str]) -> bool:
    """An import a function may hold: an optional dependency, a skewlab module that loads
    one, or one of :data:`_STDLIB_OK`."""
    top = target.split(".")[0]
    return _optional(top) or target in heavy or top in _STDLIB_OK


def test_imports_inside_functions_are_only_for_optional_dependencies() -> None:
    heavy = _loads_heavy()
    bad = [
        f"{mod}:{line} imports {target} inside a function"
        for mod, found in IMPORTS.items()
        for target, line, inside in found
        if inside and not allowed_inside(target, heavy)
    ]
    assert bad == []


_STDLIB_OK = frozenset(("importlib", "runpy", "signal", "sys"))
"""Standard-library modules a function may import where it needs them (process entry)."""


def _module_graph() -> dict[str, set[str]]:
    """Module -> the skewlab modules it imports at module level (names resolved to modules)."""
    graph: dict[str, set[str]] = defaultdict(set)
    for mod, found in IMPORTS.items():
        for target, _, inside in found:
            if not inside and target.startswith("skewlab"):
                resolved = _resolve(target)
                if resolved and resolved != mod:
                    graph[mod].add(resolved)
    return graph


def _resolve(target: str) -> str:
    """The module a dotted import target names (``skewlab.a.b.NAME`` -> ``skewlab.a.b``)."""
    while target and not _exists(target):
        target = target.rpartition(".")[0]
    return target


def _reaches(graph: dict[str, set[str]], start: str, goal: str) -> bool:
    seen, todo = {start}, [start]
    while todo:
        node = todo.pop()
        if node == goal:
            return True
        for nxt in graph.get(node, ()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return False


def test_no_module_level_import_cycles() -> None:
    assert cycles(_module_graph()) == []


def test_no_import_inside_a_function_dodges_a_cycle() -> None:
    graph = _module_graph()
    bad = [
        f"{mod}:{line} imports {target} inside a function; {target} imports {mod}"
        for mod, found in IMPORTS.items()
        for target, line, inside in found
        if inside and target.startswith("skewlab") and _reaches(graph, _resolve(target), mod)
    ]
    assert bad == []


def test_the_reach_check_follows_chains() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": set()}
    assert _reaches(graph, "a", "c") and not _reaches(graph, "c", "a")


REPO = LIB.parent
IMPORTERS = ("lib", "tests", "jobs", "dags", "bench", "infra")
"""Where the modules live whose imports make a name of lib/ re-exported."""

KEPT_REEXPORTS: dict[str, set[str]] = {}
"""Re-exports kept on purpose: none."""


@functools.cache
def _repo_modules() -> dict[str, ModuleInfo]:
    return load_modules(REPO, IMPORTERS)


def _lib_modules() -> dict[str, ModuleInfo]:
    return {m: info for m, info in _repo_modules().items() if m.split(".")[0] == "skewlab"}


def test_lib_imports_every_name_from_the_module_that_defines_it() -> None:
    bad = [
        f"{mod}:{line} takes {name} from {src}, which does not define it"
        for mod, line, src, name in misdirected_imports(_lib_modules())
    ]
    assert bad == []


def test_no_module_re_exports_a_name() -> None:
    """Besides a package's ``__init__``, no module of lib/ lists in ``__all__`` a name it
    imports, and no module anywhere in the repository imports such a name from it."""
    modules = _repo_modules()
    found = {m: names for m, names in reexports(modules).items() if not modules[m].is_pkg}
    assert found == KEPT_REEXPORTS


def test_package_inits_gather_only_their_own_package() -> None:
    modules = _lib_modules()
    bad = [
        f"{pkg} re-exports {name} from {modules[pkg].imported(name)}"
        for pkg, names in reexports(modules).items()
        for name in sorted(names)
        if not (modules[pkg].imported(name) or "").startswith(pkg + ".")
    ]
    assert bad == []


def _planted(files: dict[str, str]) -> dict[str, ModuleInfo]:
    return {
        name: ModuleInfo(name, Path(name.replace(".", "/") + ".py"), ast.parse(src))
        for name, src in files.items()
    }


def test_the_name_checks_find_a_planted_re_export() -> None:
    modules = _planted({
        "skewlab.a": "X = 1\ndef f(): pass\n",
        "skewlab.b": "from skewlab.a import X, f\n__all__ = ['X', 'g']\ndef g(): return f()\n",
        "skewlab.c": "from skewlab.b import X, g\n",
        "skewlab.d": "from skewlab import b\ny = b.f\nz = b.g\n",
        "skewlab.e": "import skewlab.b\ny = skewlab.b.X\n",
    })  # fmt: skip
    assert misdirected_imports(modules) == [
        ("skewlab.c", 1, "skewlab.b", "X"),
        ("skewlab.d", 2, "skewlab.b", "f"),
        ("skewlab.e", 2, "skewlab.b", "X"),
    ]
    assert reexports(modules) == {"skewlab.b": {"X", "f"}}


def test_the_name_checks_let_a_test_read_what_it_patches() -> None:
    modules = _planted({
        "skewlab.a": "def f(): pass\n",
        "skewlab.b": "from skewlab.a import f\ndef g(): return f()\n",
        "tests.t": "from skewlab import b\n"
                   "def test(monkeypatch):\n"
                   "    real = b.f\n"
                   "    monkeypatch.setattr(b, 'f', lambda: real())\n",
    })  # fmt: skip
    assert misdirected_imports(modules) == [] and reexports(modules) == {}


def _folders(root: Path) -> set[str]:
    """The folders under ``root`` holding Python files (data folders and caches left out)."""
    return {p.parent.relative_to(root).as_posix() for p in root.rglob("*.py")} - {"."}


def test_unit_tests_mirror_the_packages() -> None:
    """tests/unit/<folder> for each package folder of lib/skewlab, and no other folder."""
    assert _folders(REPO / "tests" / "unit") == _folders(LIB / "skewlab")
