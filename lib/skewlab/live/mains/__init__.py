"""Stand-alone process entry points of a live run.

:mod:`.route_job` is the Spark route job's process, :mod:`.route_host` the warm route
host serving many runs' route queries on one session; :mod:`.jobs` the producer and
aggregate steps for ``jobs/produce.py`` and ``jobs/aggregate.py``.
"""
