"""Live consumer-group autoscaling over Kafka + Delta (Landau et al. Sec. V).

Processes of one run, each a module with a ``main``:

* :mod:`.monitor` -- write speed per partition over a sliding window, to the
  ``monitor`` topic and Delta ``partition_loads``;
* :mod:`.controller` -- the pure :class:`skewlab.autoscale.Controller` executed
  for real: consumer processes, the synchronous stop -> ack -> start hand-off
  over ``consumer.metadata``, persisted group state, Delta ``decisions`` and
  ``consumer_assignments``;
* :mod:`.consumer` -- reads its partitions at a bounded rate, commits offsets,
  writes evidence (offset ranges, latencies) to the ``processed`` topic.

:mod:`.protocol` holds what they share (settings, topics, messages, the
evidence and its checks); :mod:`.run` is the run (:class:`AutoscaleRun`, the
phases of a grouping run's :class:`~skewlab.live.run.Run`; ``skewlab
autoscale``), :mod:`.summary` its summary, plot and MLflow run.
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
