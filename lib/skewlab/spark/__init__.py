"""The Spark side of skewlab: session factory, Kafka source/sink, per-splitter state.

- :func:`skewlab.spark.session.spark_session`: the one session factory.
- :mod:`skewlab.spark.kafka_source` / :mod:`skewlab.spark.kafka_sink`: ``skewlab-kafka``,
  Kafka on PySpark's Python Data Source API (the JVM connector is not available here).
- :func:`skewlab.spark.state.route_with_state`: state per splitter in Spark's state store.
"""

from skewlab.spark.session import spark_session

__all__ = ["spark_session"]
