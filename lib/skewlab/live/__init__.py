"""The live pipeline's runtimes: producer, workers, aggregate, and the experiment
that wires them (broker, Spark route job, Delta, MLflow). Jobs in ``jobs/`` are
thin entry points into these.
"""
