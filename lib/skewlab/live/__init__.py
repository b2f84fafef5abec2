"""What runs one live run, by role.

- :mod:`skewlab.live.driver`: the run in the process of ``skewlab run`` (or one
  Airflow task per phase): its settings and handle, services, the background
  processes and their supervision, the producer, the drain and the ending.
- :mod:`skewlab.live.worker`: the worker process (read ``routed``, apply, commit)
  with its hand-off, shadow and cut, and the spare started ahead.
- :mod:`skewlab.live.report`: the verdict, the summary, the progress line and MLflow.
- :mod:`skewlab.live.mains`: stand-alone process entry points (the route job, the
  producer and aggregate jobs).
- :mod:`skewlab.live.autoscale`: the consumer-group autoscaling run's processes.
"""
