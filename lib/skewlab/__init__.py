"""skewlab: keyed streams under skew.

The domain library is pure Python + numpy: groupings, sketches, workloads,
metrics and the simulator live here and import no Spark, Kafka, Airflow or
MLflow. Adapters (``skewlab.io``, ``skewlab.spark``) translate; they do not decide.
"""

__version__ = "0.1.0"
