"""Measure skewlab's words: docstring lines per package, module essays, undocumented public API.

Usage: python infra/measure_docs.py [ROOT] [--missing]
(ROOT defaults to the repo holding this file; --missing lists every undocumented public name.)

Per package (``top.*`` = a top-level module) it prints: lines of code, docstring lines (module /
class / function), module-docstring lines, the share of all docstring lines that sit in module
essays (a module docstring longer than ``ESSAY_LINES``), and the number of public functions,
classes and methods without a docstring. "Public" means: a top-level function or class, or a
method of a public class, whose name does not start with ``_`` (dunders such as ``__init__`` are
not counted); nested functions are not counted. tests/unit/test_docstrings.py imports
``public_without_docstring`` and ``module_docstring_lines`` from here.
"""

from __future__ import annotations

import ast
import sys
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

ESSAY_LINES = 15
"""A module docstring longer than this many lines counts as an essay."""

_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _doc_lines(node: ast.AST) -> int:
    doc = ast.get_docstring(node, clean=False)  # type: ignore[arg-type]
    return 0 if doc is None else len(doc.splitlines()) or 1


def module_docstring_lines(tree: ast.Module) -> int:
    """Number of lines of the module docstring of ``tree`` (0 without one)."""
    return _doc_lines(tree)


def _public(name: str) -> bool:
    return not name.startswith("_")


def public_defs(tree: ast.Module) -> Iterator[tuple[str, ast.AST]]:
    """Yield ``(qualified name, node)`` for every public top-level def/class and public method.

    Methods are yielded for public classes only, recursing into nested public classes;
    functions nested inside functions are skipped.
    """

    def walk(body: list[ast.stmt], prefix: str) -> Iterator[tuple[str, ast.AST]]:
        for node in body:
            if isinstance(node, _DEFS) and _public(node.name):
                qual = f"{prefix}{node.name}"
                yield qual, node
                if isinstance(node, ast.ClassDef):
                    yield from walk(node.body, qual + ".")

    yield from walk(tree.body, "")


def public_without_docstring(tree: ast.Module) -> list[str]:
    """Qualified names of the public defs in ``tree`` that have no docstring."""
    return [q for q, n in public_defs(tree) if ast.get_docstring(n) is None]  # type: ignore[arg-type]


def all_docstring_lines(tree: ast.Module) -> int:
    """Docstring lines of the module and of every function and class in it (nested included)."""
    total = _doc_lines(tree)
    for node in ast.walk(tree):
        if isinstance(node, _DEFS):
            total += _doc_lines(node)
    return total


@dataclass
class PackageWords:
    """Totals for one package."""

    files: int = 0
    lines: int = 0
    doc_lines: int = 0
    module_doc_lines: int = 0
    essay_lines: int = 0
    essays: int = 0
    public: int = 0
    missing: list[str] = field(default_factory=list)


def package_key(rel: Path) -> str:
    """``grouping`` for lib/skewlab/grouping/..., ``top.keys`` for lib/skewlab/keys.py."""
    parts = rel.parts
    if len(parts) == 1:
        return "skewlab" if parts[0] == "__init__.py" else "top." + rel.stem
    return parts[0]


def scan(root: Path) -> dict[str, PackageWords]:
    """Measure every module under ``root/lib/skewlab``, grouped by package."""
    base = root / "lib" / "skewlab"
    out: dict[str, PackageWords] = defaultdict(PackageWords)
    for path in sorted(base.rglob("*.py")):
        rel = path.relative_to(base)
        src = path.read_text()
        tree = ast.parse(src)
        pw = out[package_key(rel)]
        pw.files += 1
        pw.lines += len(src.splitlines())
        pw.doc_lines += all_docstring_lines(tree)
        mdl = module_docstring_lines(tree)
        pw.module_doc_lines += mdl
        if mdl > ESSAY_LINES:
            pw.essays += 1
            pw.essay_lines += mdl
        defs = list(public_defs(tree))
        pw.public += len(defs)
        pw.missing += [
            f"{rel}:{q}"
            for q, n in defs
            if ast.get_docstring(n) is None  # type: ignore[arg-type]
        ]
    return dict(out)


def main(argv: list[str]) -> None:
    args = [a for a in argv if not a.startswith("--")]
    root = Path(args[0]) if args else Path(__file__).resolve().parents[1]
    res = scan(root)
    head = (
        f"{'package':16s} {'files':>5s} {'lines':>6s} {'doc':>5s} {'moddoc':>6s} "
        f"{'essays':>6s} {'essay%':>6s} {'public':>6s} {'no-doc':>6s}"
    )
    print(f"docstring lines per package (essay = module docstring > {ESSAY_LINES} lines;")
    print("essay% = essay lines / all docstring lines; no-doc = public defs without a docstring)")
    print(head)
    tot = PackageWords()
    for k in sorted(res):
        p = res[k]
        share = 100.0 * p.essay_lines / p.doc_lines if p.doc_lines else 0.0
        print(
            f"{k:16s} {p.files:5d} {p.lines:6d} {p.doc_lines:5d} {p.module_doc_lines:6d} "
            f"{p.essays:6d} {share:6.1f} {p.public:6d} {len(p.missing):6d}"
        )
        tot.files += p.files
        tot.lines += p.lines
        tot.doc_lines += p.doc_lines
        tot.module_doc_lines += p.module_doc_lines
        tot.essay_lines += p.essay_lines
        tot.essays += p.essays
        tot.public += p.public
        tot.missing += p.missing
    share = 100.0 * tot.essay_lines / tot.doc_lines if tot.doc_lines else 0.0
    print(
        f"{'TOTAL':16s} {tot.files:5d} {tot.lines:6d} {tot.doc_lines:5d} "
        f"{tot.module_doc_lines:6d} {tot.essays:6d} {share:6.1f} {tot.public:6d} "
        f"{len(tot.missing):6d}"
    )
    if "--missing" in argv:
        print("public defs without a docstring:")
        for m in tot.missing:
            print("  " + m)


if __name__ == "__main__":
    main(sys.argv[1:])
