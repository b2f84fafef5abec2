"""Live consumer-group autoscaling over Kafka + Delta (Landau et al. Sec. V).

One run's processes, each a module with a ``main``: :mod:`.monitor` (write speeds),
:mod:`.controller` (the pure controller executed for real); the consumers (bounded-rate
reading with evidence) are workers: :mod:`skewlab.live.worker.consumer`. :mod:`.protocol`
holds what they share, :mod:`.run` is the run (:class:`AutoscaleRun`), :mod:`.summary` its
summary. More: docs/autoscale.md, "The processes".
"""

from __future__ import annotations

from typing import Any

__all__ = ["AutoscaleRun", "AutoscaleSettings", "AutoscaleSummary", "run_autoscale"]


def __getattr__(name: str) -> Any:
    """Lazy: consumer processes import this package and must not pay for Delta / MLflow."""
    if name in __all__:
        from skewlab.live.autoscale import run

        return getattr(run, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
