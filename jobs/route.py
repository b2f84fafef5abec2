"""spark-submit entry point of the route job (the embedded stack runs the same
module as ``python -m skewlab.live.mains.route_job``).

    spark-submit jobs/route.py SETTINGS_JSON [SPARK_DATA_DIR]

SETTINGS_JSON is a :class:`skewlab.live.mains.route_job.RouteSettings` as JSON (a file
path or the text); ``skewlab run`` writes one per run under
``<data dir>/runs/<run id>/route.json``.
"""

from skewlab.live.mains.route_job import main

if __name__ == "__main__":
    raise SystemExit(main())
