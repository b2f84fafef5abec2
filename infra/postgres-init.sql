-- Second database on the compose Postgres: MLflow's tracking store.
CREATE DATABASE mlflow;
