"""Orchestration helpers: what the Airflow DAGs call, kept free of Airflow.

The DAG files under ``dags/`` stay thin (parse params, call a library function,
record the MLflow run id); the decisions they make live here so that unit
tests cover them without an Airflow database. See :mod:`skewlab.orchestration.params`.
"""
