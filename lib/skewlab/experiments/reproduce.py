"""Run the seed reproductions and judge the papers' claims (``skewlab reproduce``).

:func:`reproduce` runs the named experiments, collects every claim into one table, writes
``reproduce.md`` under the run directory and, with a tracker, logs one MLflow parent run with
a child per experiment; the order of work is on :func:`reproduce`, the layout in
docs/experiments.md.
"""

from __future__ import annotations

import csv
import logging
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from skewlab.errors import ConfigError
from skewlab.experiments import Experiment, ExperimentArgs, ExperimentReport, registry
from skewlab.experiments.claims import Claim

if TYPE_CHECKING:
    from skewlab.io.tracking import Tracker

__all__ = [
    "CLAIM_COLUMNS",
    "MLFLOW_EXPERIMENT",
    "REPRODUCE_SCALES",
    "ExperimentOutcome",
    "ReproduceResult",
    "claims_document",
    "claims_markdown",
    "describe",
    "reproduce",
    "resolve_names",
]

log = logging.getLogger(__name__)

REPRODUCE_SCALES: dict[str, float] = {
    "smalops-latency": 1.0,
    "smalops-threshold": 1.0,
    "smalops-dynamic": 1.0,
    "dlb-switch": 1.0,
    "pkg-split-state": 0.25,
    "dkg-country": 0.25,
    "autoscale-offline": 0.4,
    "autoscale-latency": 1.0,
    "scaleout-ramp": 1.0,
    "scaleout-threshold-sweep": 1.0,
    "scaleout-alternating": 1.0,
}
"""The claim-bearing experiments and the scale each runs at by default (1 = the paper's).

SMALOPS, DLB and scale-out run at the paper's size; together they all took 52 min wall on
2 cores shared with other work (measured; dkg-country the largest at ~20 min, the SMALOPS
placement reruns ~19 min); ``--scale`` overrides them all.
"""

CLAIM_COLUMNS: tuple[str, ...] = ("seed", "claim", "paper", "ours", "rule", "holds?")
"""Columns of the claims table (:meth:`Claim.row` keys)."""

MLFLOW_EXPERIMENT = "skewlab-reproduce"

DOC_COMMAND = "skewlab reproduce --no-mlflow --doc docs/reproduce.md"
"""The command that regenerates docs/reproduce.md (named at its top)."""

EARLIER_COUNTS: tuple[tuple[str, int, int], ...] = (
    (
        "before issue 32 (murmur3 KG and hashing, synthetic autoscale input, mislabelled and "
        "unfalsifiable claims)",
        38,
        50,
    ),
)
"""Earlier counts of the default reproduction, (when, held, total), quoted in the document."""


@dataclass
class ExperimentOutcome:
    """One experiment of a reproduction: its report (None if it raised) and where it went."""

    name: str
    scale: float
    seconds: float
    out: Path
    report: ExperimentReport | None = None
    error: str = ""
    run_id: str | None = None

    @property
    def claims(self) -> list[Claim]:
        """The experiment's claims (none when it raised)."""
        return list(self.report.claims) if self.report is not None else []


@dataclass
class ReproduceResult:
    """What :func:`reproduce` did: the run directory, the report, every outcome."""

    out: Path
    report_path: Path
    outcomes: list[ExperimentOutcome] = field(default_factory=list)
    parent_run_id: str | None = None

    @property
    def claims(self) -> list[Claim]:
        """Every experiment's claims, in run order."""
        return [c for o in self.outcomes for c in o.claims]

    @property
    def holding(self) -> int:
        """How many claims hold."""
        return sum(c.holds for c in self.claims)

    @property
    def failed(self) -> list[str]:
        """Experiments that raised instead of reporting."""
        return [o.name for o in self.outcomes if o.error]

    def rows(self) -> list[dict[str, str]]:
        """The claims table, one dict per claim (:data:`CLAIM_COLUMNS`)."""
        return [c.row() for c in self.claims]


def describe(experiment: Experiment) -> str:
    """What an experiment reproduces: the first line of its docstring."""
    doc = (experiment.__doc__ or "").strip()
    return doc.splitlines()[0].strip() if doc else ""


def resolve_names(names: Sequence[str] | None, known: Mapping[str, Experiment]) -> list[str]:
    """The experiments to run: ``names`` checked against ``known``, else the defaults.

    Raises :class:`ConfigError` naming every unknown name and the valid ones.
    """
    if not names:
        return [n for n in REPRODUCE_SCALES if n in known]
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ConfigError(
            f"unknown experiment {', '.join(unknown)}; choose from {', '.join(sorted(known))}"
        )
    return list(dict.fromkeys(names))


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def claims_markdown(rows: Sequence[Mapping[str, str]]) -> str:
    """The claims table as a GitHub Markdown table (tabulate's ``github`` format)."""
    from tabulate import tabulate

    body = [[_cell(r[c]) for c in CLAIM_COLUMNS] for r in rows]
    headers = ["seed", "claim (figure)", "paper", "ours", "rule", "holds?"]
    return str(tabulate(body, headers=headers, tablefmt="github"))


def claims_document(
    rows: Sequence[Mapping[str, str]], seed: int = 1, scale: float | None = None
) -> str:
    """docs/reproduce.md: the command that regenerates it, the counts, the claims table.

    ``rows`` are :meth:`Claim.row` dicts (or the run's ``claims.csv``); the text depends on
    them alone, so the same run always writes the same document.
    """
    held = sum(r["holds?"] == "holds" for r in rows)
    where = "each experiment's default scale" if scale is None else f"scale {scale:g}"
    lines = [
        "# Seed reproductions: the claims table",
        "",
        f"Regenerate with `{DOC_COMMAND}` (about 50 minutes on two busy cores).",
        "",
        f"**{held} of {len(rows)} claims hold** (seed {seed}, {where}: "
        + ", ".join(f"{n} {s:g}" for n, s in REPRODUCE_SCALES.items())
        + ").",
        "",
    ]
    lines += [f"Earlier: {h} of {t} ({when})." for when, h, t in EARLIER_COUNTS]
    lines += [
        "",
        "A claim that does not hold says why after its verdict, in terms of the paper. Each "
        "experiment's setup, with the sentences of the paper it reproduces, is in the run's "
        "`reproduce.md` (`skewlab reproduce` prints where); the experiments are described in "
        "docs/experiments.md.",
        "",
        claims_markdown(rows),
        "",
    ]
    return "\n".join(lines)


def reproduce(
    names: Sequence[str] | None = None,
    *,
    home: Path,
    now: datetime,
    scale: float | None = None,
    seed: int = 1,
    tracker: Tracker | None = None,
    progress: Callable[[str], None] | None = None,
    clock: Callable[[], float] = time.perf_counter,
) -> ReproduceResult:
    """Run the reproductions, write ``reproduce.md`` under ``<home>/runs/reproduce-<now>/``.

    ``now`` (UTC) names the run directory and ``clock`` times each experiment;
    both are injected. ``scale`` overrides :data:`REPRODUCE_SCALES` for every
    experiment (``1`` = the papers' sizes). Unknown names raise
    :class:`ConfigError` before anything runs. An experiment that raises is
    recorded (its child run FAILED) and the others still run.

    Order of work: 1. validate every name (nothing runs on a bad one); 2. start the parent
    run; 3. per experiment: run it, write its files, log its child run (FAILED with the error
    if it raised, and go on); 4. write the report and close the parent (FAILED when an
    experiment failed).
    """
    if scale is not None and not 0 < scale <= 1.0:
        raise ConfigError(f"scale must be in (0, 1], got {scale}")
    known = registry()
    chosen = resolve_names(names, known)
    stamp = now.strftime("%Y%m%dT%H%M%SZ")
    out = Path(home) / "runs" / f"reproduce-{stamp}"
    out.mkdir(parents=True, exist_ok=True)
    result = ReproduceResult(out=out, report_path=out / "reproduce.md")
    parent = None
    if tracker is not None:
        parent = tracker.start_run(
            MLFLOW_EXPERIMENT,
            f"reproduce-{stamp}",
            params={"experiments": ",".join(chosen), "scale": scale or "default", "seed": seed},
            tags={"mode": "reproduce"},
        )
        result.parent_run_id = parent
    say = progress or (lambda msg: log.info("%s", msg))
    for i, name in enumerate(chosen, 1):
        run_scale = scale if scale is not None else REPRODUCE_SCALES.get(name, 1.0)
        say(f"[{i}/{len(chosen)}] {name} at scale {run_scale:g}")
        outcome = _run_one(name, known[name], out / name, run_scale, seed, say, clock)
        if tracker is not None and parent is not None:
            try:
                outcome.run_id = _log_child(tracker, parent, outcome, seed, stamp)
            except Exception as exc:  # the results stay in the report even if MLflow refuses
                log.exception("logging %s to MLflow failed", name)
                outcome.error = outcome.error or f"MLflow logging failed: {exc}"
        held = sum(c.holds for c in outcome.claims)
        say(
            f"[{i}/{len(chosen)}] {name}: "
            + (f"failed: {outcome.error}" if outcome.error else f"{held}/{len(outcome.claims)}")
            + f" claims hold ({outcome.seconds:.0f} s)"
        )
        result.outcomes.append(outcome)
    result.report_path.write_text(_markdown(result, scale, seed))
    _write_csv(out / "claims.csv", result.rows())
    if tracker is not None and parent is not None:
        tracker.log_metrics(
            parent,
            {
                "claims": len(result.claims),
                "claims_hold": result.holding,
                "experiments_failed": len(result.failed),
            },
        )
        tracker.log_artifact(parent, result.report_path)
        tracker.log_artifact(parent, out / "claims.csv")
        tracker.end_run(parent, "FAILED" if result.failed else "FINISHED")
    return result


def _run_one(
    name: str,
    experiment: Experiment,
    out: Path,
    scale: float,
    seed: int,
    say: Callable[[str], None],
    clock: Callable[[], float],
) -> ExperimentOutcome:
    out.mkdir(parents=True, exist_ok=True)
    start = clock()
    args = ExperimentArgs(out=out, scale=scale, seed=seed, progress=lambda m: say(f"{name}: {m}"))
    try:
        report = experiment(args)
    except Exception as exc:  # one failing experiment must not lose the others' results
        log.exception("experiment %s failed", name)
        error = f"{type(exc).__name__}: {exc}"
        return ExperimentOutcome(name, scale, clock() - start, out, error=error)
    (out / "table.txt").write_text(report.table + "\n")
    if report.setup:
        (out / "setup.txt").write_text(report.setup + "\n")
    return ExperimentOutcome(name, scale, clock() - start, out, report)


def _write_csv(path: Path, rows: Sequence[Mapping[str, str]]) -> None:
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(CLAIM_COLUMNS))
        writer.writeheader()
        writer.writerows(rows)


def _log_child(
    tracker: Tracker, parent: str, outcome: ExperimentOutcome, seed: int, stamp: str
) -> str:
    report = outcome.report
    params: dict[str, Any] = {"experiment": outcome.name, "scale": outcome.scale, "seed": seed}
    if report is not None:
        params.update({_key(k): v for k, v in report.params.items() if k not in params})
    rid = tracker.start_run(
        MLFLOW_EXPERIMENT,
        f"{outcome.name}-{stamp}",
        params=params,
        tags={"experiment": outcome.name, "mode": "reproduce"},
        parent_run_id=parent,
    )
    if report is None:
        tracker.set_tags(rid, {"error": outcome.error[:5000]})
        tracker.end_run(rid, "FAILED")
        return rid
    claims = [c.row() for c in report.claims]
    tracker.log_metrics(
        rid,
        {
            **{_key(k): v for k, v in report.metrics.items()},
            "claims": len(claims),
            "claims_hold": sum(c.holds for c in report.claims),
            "seconds": outcome.seconds,
        },
    )
    for plot in report.plots:
        tracker.log_artifact(rid, plot, "plots")
    tracker.log_artifact(rid, outcome.out / "table.txt")
    if report.setup:
        tracker.log_artifact(rid, outcome.out / "setup.txt")
    if report.rows:
        tracker.log_table(rid, report.rows, "rows.csv")
    if claims:
        tracker.log_table(rid, claims, "claims.csv")
    tracker.end_run(rid)
    return rid


_NOT_A_KEY = re.compile(r"[^A-Za-z0-9_\-. :/]")


def _key(name: str) -> str:
    """A metric / param name MLflow accepts (``%`` -> ``pct``, other odd characters -> ``_``)."""
    return _NOT_A_KEY.sub("_", str(name).replace("%", "pct"))


def _markdown(result: ReproduceResult, scale: float | None, seed: int) -> str:
    lines = [
        "# Seed reproductions",
        "",
        f"{result.holding} of {len(result.claims)} claims hold "
        f"(seed {seed}, scale {'per experiment' if scale is None else f'{scale:g}'}).",
        "",
        claims_markdown(result.rows()) if result.claims else "(no claims)",
        "",
    ]
    for o in result.outcomes:
        lines += [f"## {o.name}", "", f"scale {o.scale:g}, {o.seconds:.0f} s", ""]
        if o.report is None:
            lines += [f"**failed**: {o.error}", ""]
            continue
        lines += [f"**{o.report.title}**", ""]
        if o.report.setup:
            lines += ["Setup: " + o.report.setup, ""]
        lines += ["```", o.report.table, "```", ""]
        for plot in o.report.plots:
            lines += [f"![{plot.stem}]({_link(plot, result.out)})", ""]
    return "\n".join(lines)


def _link(plot: Path, out: Path) -> str:
    """``plot`` relative to the report's directory (absolute if it lies outside)."""
    try:
        return plot.resolve().relative_to(out.resolve()).as_posix()
    except ValueError:
        return plot.resolve().as_posix()
