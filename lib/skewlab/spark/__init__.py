"""The Spark side of skewlab: session factory, the route job.

- :func:`skewlab.spark.session.spark_session`: the one session factory (Spark's Kafka
  connector and delta-spark on its classpath).
- :mod:`skewlab.spark.route` / :mod:`skewlab.spark.route_sink`: the route job's query
  and its ``foreachBatch`` sink; :mod:`skewlab.spark.task_route`: what the batch's tasks
  run (decode, splitters, records); :mod:`skewlab.spark.writes`: its Kafka and Delta writes.
"""

from skewlab.spark.session import spark_session

__all__ = ["spark_session"]
