"""Measure skewlab's words: docstring lines per package, module essays, undocumented public API.

Usage: python infra/measure_docs.py [ROOT] [--missing]
(ROOT defaults to the repo holding this file; --missing lists every undocumented public name.)

Per package (``top.*`` = a top-level module) it prints: lines of code, docstring lines (module /
class / function), module-docstring lines, the share of all docstring lines that sit in module
essays (a module docstring longer than ``ESSAY_LINES``), and the number of public functions,
classes and methods without a docstring. "Public" means: a top-level function or class, or a
method of a public class, whose name does not start with ``_`` (dunders such as ``__init__`` are
not counted); nested functions are not counted. It also counts module docstrings that only
point to docs/ (:func:`pointer_only`) and step citations that name steps not there
(:func:`missing_steps`, :func:`unlisted_steps`). tests/unit/test_docstrings.py imports these
checks from here.
"""

from __future__ import annotations

import ast
import io
import re
import sys
import tokenize
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


_POINTER = re.compile(r"^(?:Details|More|See|Rationale)\b[^:]*:\s*docs/\S+[^.]*\.?$", re.S)


def pointer_only(tree: ast.Module) -> bool:
    """Whether the module docstring says nothing past its first line but where the words are
    (``Details: docs/x.md``; a one-line docstring is not counted)."""
    doc = ast.get_docstring(tree) or ""
    rest = " ".join(doc.splitlines()[1:]).strip()
    return bool(_POINTER.match(rest))


_CITE = re.compile(r"(?:[Ss]teps?|[Rr]ules?) (\d+)(?:\s*-\s*(\d+))? of the module doc(?:string)?")
"""A docstring citing numbered steps of its module's docstring: ``steps 1-4 of the module doc``."""

_ITEM = re.compile(r"^\s*(\d+)[.)]\s", re.M)
"""A numbered item of a docstring: ``1. read;`` or ``2) write`` at the start of a line."""

_DOCUMENTED = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)


def missing_steps(tree: ast.Module) -> list[str]:
    """Citations of ``steps A-B of the module doc`` whose module docstring lacks a numbered
    item ``1.`` .. ``B.`` (one per line)."""
    have = {int(n) for n in _ITEM.findall(ast.get_docstring(tree) or "")}
    bad = []
    for node in ast.walk(tree):
        if isinstance(node, _DOCUMENTED):
            for m in _CITE.finditer(ast.get_docstring(node) or ""):
                if not set(range(1, int(m.group(2) or m.group(1)) + 1)) <= have:
                    bad.append(f"{getattr(node, 'name', '<module>')}: {m.group(0)!r}")
    return bad


_STEP = re.compile(r"\b[Ss]teps? (\d+)((?:\s*(?:-|,|and|or)\s*\d+\b)*)")
"""A bare step citation: ``step 3``, ``Steps 1-4``, ``steps 1, 3 and 4``, ``step 2 or 4``."""

_ELSEWHERE = re.compile(r"\s+(?:of|in)\s+(?!the module doc)")
"""After a citation: it names whose steps (``of :func:`run```, ``of the state manager``)."""


def _step_numbers(m: re.Match[str]) -> set[int]:
    first, rest = int(m.group(1)), m.group(2)
    nums = {first, *map(int, re.findall(r"\d+", rest))}
    span = re.match(r"\s*-\s*(\d+)", rest)
    return nums | set(range(first, int(span.group(1)) + 1)) if span else nums


def unlisted_steps(src: str) -> list[str]:
    """Bare citations of steps (in a docstring or a comment) whose numbers are no numbered
    item of any docstring of the module (module, class or function): ``line: text``.

    A citation that says whose steps it means (``steps 2-4 of :func:`run```, ``step 1 of
    the state manager``) or sits in a docstring or comment pointing to docs/ is left to the
    reader; ``of the module doc`` is :func:`missing_steps`'s.
    """
    tree = ast.parse(src)
    have: set[int] = set()
    texts: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, _DOCUMENTED) and (doc := ast.get_docstring(node)):
            have |= {int(n) for n in _ITEM.findall(doc)}
            first = node.body[0]
            texts.append((first.lineno, doc))
    for tok in tokenize.generate_tokens(io.StringIO(src).readline):
        if tok.type == tokenize.COMMENT:
            texts.append((tok.start[0], tok.string))
    bad = []
    for line, text in texts:
        if "docs/" in text:
            continue
        for m in _STEP.finditer(text):
            after = text[m.end() :]
            if after.startswith(" of the module doc") or _ELSEWHERE.match(after):
                continue
            if not _step_numbers(m) <= have:
                bad.append(f"{line + text[: m.start()].count(chr(10))}: {m.group(0)!r}")
    return bad


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
    pointers: list[str] = field(default_factory=list)
    """Modules whose docstring only points to docs/ (:func:`pointer_only`)."""
    bad_steps: list[str] = field(default_factory=list)
    """Step citations naming steps that are not there (:func:`missing_steps`,
    :func:`unlisted_steps`)."""


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
        if pointer_only(tree):
            pw.pointers.append(str(rel))
        pw.bad_steps += [f"{rel}: {b}" for b in missing_steps(tree) + unlisted_steps(src)]
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
        tot.pointers += p.pointers
        tot.bad_steps += p.bad_steps
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
    print(f"module docstrings that only point to docs/: {len(tot.pointers)}")
    print(f"step citations naming steps that are not there: {len(tot.bad_steps)}")
    for m in tot.pointers + tot.bad_steps:
        print("  " + m)


if __name__ == "__main__":
    main(sys.argv[1:])
