"""Live consumer-group autoscaling over Kafka + Delta (Landau et al. Sec. V).

One run's processes, each a module with a ``main``: :mod:`.monitor` (write speeds),
:mod:`.controller` (the pure controller executed for real); the consumers (bounded-rate
reading with evidence) are workers: :mod:`skewlab.live.worker.consumer`. :mod:`.protocol`
holds what they share, :mod:`.run` is the run (:class:`~.run.AutoscaleRun`),
:mod:`.summary` its summary. More: docs/autoscale.md, "The processes".
"""
