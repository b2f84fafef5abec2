"""The Spark side of skewlab: session factory, the route job, per-splitter state.

- :func:`skewlab.spark.session.spark_session`: the one session factory (Spark's Kafka
  connector and delta-spark on its classpath).
- :mod:`skewlab.spark.route` / :mod:`skewlab.spark.route_sink`: the route job's query
  and its ``foreachBatch`` sink; :mod:`skewlab.spark.writes`: its Kafka and Delta writes.
- :func:`skewlab.spark.state.route_with_state`: state per splitter in Spark's state store.
"""

from skewlab.spark.session import spark_session

__all__ = ["spark_session"]
