"""Spark's Python worker daemon of the workers app (``spark.python.daemon.module``).

The route job's daemon (:mod:`skewlab.spark.pydaemon`: pyspark from site-packages, not
``pyspark.zip``) that also imports what every worker task imports (:data:`TASK_MODULES`)
once its port is reported. The workers app forks one Python worker per task and reuses
none (each task holds its worker process for the run): without these, each of a run's
worker tasks spent ~1.3 s of CPU importing them, all at the run's start
(docs/real-stack.md, session 33).
"""

from __future__ import annotations

from skewlab.spark.pydaemon import main

TASK_MODULES = (
    "skewlab.live.mains.workers_app",  # the task's function
    "skewlab.io.delta.store",  # a worker's hang watch: worker_progress with delta-rs
    "skewlab.io.kafka.confluent",  # ... and its partition's end offset (connect's client)
    "pandas",  # ... which delta-rs's file_uris with a pruning predicate imports (~1 s)
    "pyarrow.compute",
    "psutil",
)
"""What :func:`~skewlab.live.mains.workers_app.run_instance` and its hang watch import."""

if __name__ == "__main__":
    main(preload=TASK_MODULES)
