# Airflow 3 for skewlab: Java 17 for the route job's Spark driver, and this repository's
# pinned stack.
#
# The experiment task of the skewlab_experiment DAG starts the Spark route job (a pyspark
# driver) inside the Airflow task's container, and the apache/airflow image has no Java.
# docker-compose.yml builds this image for every Airflow service; the build context is the
# repository root:
#
#   docker compose build airflow-init          # or: docker build -f infra/docker/airflow.Dockerfile .
#
# The Airflow tag below is the apache-airflow pin of requirements.txt and the Python of
# pyproject.toml (tests/unit/test_compose.py checks both). The base image is Debian 12
# (bookworm), whose main archive has openjdk-17-jre-headless.
FROM apache/airflow:3.3.2-python3.11

# 1. Java, as root: a headless OpenJDK 17 runtime (Spark 4 runs on Java 17), under an
#    architecture-independent JAVA_HOME (amd64 and arm64 install to different directories).
USER root
RUN apt-get update \
    && apt-get install -y --no-install-recommends openjdk-17-jre-headless \
    && ln -s "$(dirname "$(dirname "$(readlink -f "$(command -v java)")")")" /usr/lib/jvm/java-17 \
    && /usr/lib/jvm/java-17/bin/java -version \
    && apt-get autoremove -yqq --purge \
    && apt-get clean \
    && rm -rf /var/lib/apt/lists/*
ENV JAVA_HOME=/usr/lib/jvm/java-17

# 2. The pinned stack, as the airflow user (the image's pip installs into its home). The
#    pins include apache-airflow itself at the base image's version, so pip keeps it.
USER airflow
COPY --chown=airflow:root requirements.txt constraints.txt /opt/skewlab/
RUN pip install --no-cache-dir -r /opt/skewlab/requirements.txt -c /opt/skewlab/constraints.txt

# 3. The package, editable at /opt/skewlab: compose mounts the checkout over this directory,
#    so the DAGs, jobs and library a task runs are the checkout's.
COPY --chown=airflow:root pyproject.toml README.md /opt/skewlab/
COPY --chown=airflow:root lib /opt/skewlab/lib
RUN pip install --no-cache-dir --no-deps -e /opt/skewlab
