"""What the ``skewlab_experiment`` tasks do with validated settings: XCom, run, verdict, tags.

The tasks after the first work on the XCom copy of the settings (:func:`settings_to_xcom` /
:func:`settings_from_xcom`) and on the run's scalar row (:func:`run_for_xcom`,
:func:`verdict`, :func:`run_tags`, :func:`quality_skip_reason`). Nothing heavy is imported at
import time. More: docs/orchestration.md.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeAlias

from skewlab.errors import ConfigError
from skewlab.live.autoscale.settings import AutoscaleSettings
from skewlab.orchestration.paramspec import OFF, one_line
from skewlab.runsettings import ExperimentSettings

if TYPE_CHECKING:
    from skewlab.live.autoscale.summary import AutoscaleSummary
    from skewlab.live.report.summary import RunSummary

    Settings: TypeAlias = ExperimentSettings | AutoscaleSettings

__all__ = [
    "progress_logger",
    "quality_skip_reason",
    "result_for_xcom",
    "run_for_xcom",
    "run_tags",
    "settings_from_xcom",
    "settings_to_xcom",
    "verdict",
]


def settings_to_xcom(settings: Settings) -> dict[str, Any]:
    """The settings as a JSON-safe dict with their ``mode`` (see :func:`settings_from_xcom`)."""
    mode = "autoscale" if isinstance(settings, AutoscaleSettings) else "grouping"
    return {"mode": mode, **dataclasses.asdict(settings)}


def settings_from_xcom(data: Mapping[str, Any]) -> Settings:
    """Rebuild (and re-validate) settings from :func:`settings_to_xcom`'s dict.

    ``mode`` selects the class (``grouping`` when absent: XComs of older runs).
    """
    fields = dict(data)
    mode = fields.pop("mode", "grouping")
    classes: dict[str, Any] = {"grouping": ExperimentSettings, "autoscale": AutoscaleSettings}
    if mode not in classes:
        raise ConfigError(f"unknown settings mode {mode!r} in the XCom; valid: autoscale, grouping")
    cls = classes[mode]
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(fields) - names)
    if unknown:
        raise ConfigError(f"unknown settings field(s) {', '.join(unknown)} in the XCom")
    return cls(**fields)


def _json_safe(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    return value


def result_for_xcom(summary: RunSummary | AutoscaleSummary) -> dict[str, Any]:
    """The run's scalar summary row (run id, MLflow run id, verdict, metrics, plot paths).

    Per-window series stay in Delta and MLflow; NaN / inf (e.g. latency of a
    run without samples) become ``None`` so the dict is strict JSON. An
    autoscale run's row says ``mode: autoscale`` and carries its plots.
    """
    row = {k: _json_safe(v) for k, v in summary.row().items()}
    if "algorithm" in row:
        row.update(mode="autoscale", plots=list(getattr(summary, "plots", [])))
    return row


def run_for_xcom(
    settings: Settings, progress: Callable[[dict[str, float]], None] | None = None
) -> dict[str, Any]:
    """Run the experiment ``settings`` select and return :func:`result_for_xcom`'s row.

    Grouping settings run :func:`skewlab.live.driver.run.run_experiment` (with
    ``progress``); autoscale settings :func:`skewlab.live.autoscale.run.run_autoscale`.
    """
    if isinstance(settings, AutoscaleSettings):
        from skewlab.live.autoscale.run import run_autoscale

        return result_for_xcom(run_autoscale(settings))
    from skewlab.live.driver.run import run_experiment

    return result_for_xcom(run_experiment(settings, progress=progress))


def quality_skip_reason(settings: Mapping[str, Any]) -> str | None:
    """Why the data-quality suites do not apply to the run of ``settings`` (an XCom dict)."""
    if settings.get("mode") == "autoscale":
        return (
            "skipped: the suites check the grouping tables (key_loads, results, quarantine), "
            "which an autoscale run does not write; its verdict is the exactly-once check"
        )
    return None


def run_tags(settings: Mapping[str, Any]) -> dict[str, str]:
    """MLflow tags naming the strategy and every policy of the run (an XCom settings dict).

    A policy that is off is tagged ``none``, so runs filter and line up by tag
    (``tags.rebalance = 'none'``) whether or not they used it.
    """
    if settings.get("mode") == "autoscale":
        return {"autoscale": str(settings["algorithm"])}
    return {
        "strategy": str(settings["strategy"]),
        "rebalance": str(settings.get("rebalance") or OFF),
        "scale_out": str(settings.get("scale_out") or OFF),
        "autoscale": OFF,
    }


def verdict(result: Mapping[str, Any]) -> str | None:
    """``None`` if the run was exact (and its key state too), else one line saying why not."""
    if result.get("exact") is not True:
        return one_line(
            f"run {result.get('run_id')} is not exact: {result.get('exactness') or 'no verdict'}"
        )
    if result.get("state_exact") is False:
        return one_line(
            f"run {result.get('run_id')} is exact but its key state is not "
            f"({result.get('order_violations', 0)} per-key order violations)"
        )
    return None


def progress_logger(
    logger: logging.Logger, every_s: float = 10.0, clock: Callable[[], float] = time.monotonic
) -> Callable[[dict[str, float]], None]:
    """A ``run_experiment`` progress callback that logs one line at most every ``every_s``."""
    last = [-math.inf]

    def show(p: dict[str, float]) -> None:
        now = clock()
        if now - last[0] < every_s:
            return
        last[0] = now
        logger.info(
            "produced %d/%d routed %d processed %d imbScore %.1f%%",
            p.get("produced", 0),
            p.get("total", 0),
            p.get("routed", 0),
            p.get("processed", 0),
            p.get("imbalance", 0.0),
        )

    return show
