#!/usr/bin/env bash
# Idempotent setup: a virtual environment in .venv with every pinned package and
# skewlab installed editable, and the JVM jars from Maven Central: the Kafka broker
# (infra/maven/broker/pom.xml -> .jars/broker) and the Spark session's Kafka connector
# and delta-spark (infra/maven/spark/pom.xml -> .jars/spark), and the Data Docs assets
# (infra/data_docs_assets.sh -> .assets), and the Spark driver's class-data archive
# (.jars/spark/*.jsa). A second run with unchanged pins does nothing.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.venv"
stamp="$venv/.skewlab-setup"
UV_VERSION=0.13.9  # the installer of the pinned packages (below)

pick_python() {
  for p in python3.11 python3; do
    if command -v "$p" >/dev/null 2>&1 && "$p" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))'; then
      echo "$p"; return 0
    fi
  done
  echo "setup: Python 3.11 is required (python3.11 or python3 on PATH)" >&2
  return 1
}

# The Data Docs pages' CSS and JavaScript from npm (its own stamp: a no-op when present)
bash "$root/infra/data_docs_assets.sh"

jars="$root/.jars"
class_archive() {
  # The Spark driver JVM's class-data archive, once per pyspark (a no-op when present):
  # ~5 s less per Spark start (lib/skewlab/spark/class_archive_dump.py, docs/testing.md)
  "$venv/bin/python" -m skewlab.spark.class_archive_dump
}
want="$(cat "$root/requirements.txt" "$root/constraints.txt" "$root/pyproject.toml" \
  "$root"/infra/maven/*/pom.xml | sha256sum | cut -d' ' -f1)"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -x "$venv/bin/python" ] \
  && [ -d "$jars/broker" ] && [ -d "$jars/spark" ]; then
  class_archive
  exit 0
fi

for tool in java mvn; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "setup: $tool is required (Java 17 runs Kafka and Spark; Maven fetches their jars)" >&2
    exit 1
  fi
done

for pom in "$root"/infra/maven/*/pom.xml; do
  name="$(basename "$(dirname "$pom")")"
  echo "setup: fetching the $name jars from Maven Central into .jars/$name" >&2
  rm -rf "$jars/$name.tmp"
  mvn -q -B -f "$pom" dependency:copy-dependencies -DincludeScope=runtime \
    -DoutputDirectory="$jars/$name.tmp"
  rm -rf "${jars:?}/$name"
  mv "$jars/$name.tmp" "$jars/$name"
done

py="$(pick_python)"
[ -x "$venv/bin/python" ] || "$py" -m venv "$venv"
echo "setup: installing pinned packages into $venv (first time: about 2 minutes)" >&2
pip=("$venv/bin/python" -m pip install --quiet --disable-pip-version-check)
"${pip[@]}" --upgrade "pip>=24"
# uv (PyPI) installs the same pins as pip, downloading in parallel: a cold install of the
# ~200 pinned packages took 116 s with uv against 636 s with pip (docs/main-job.md, "Setup").
# Where uv cannot be installed, pip installs them.
if "${pip[@]}" "uv==$UV_VERSION" && "$venv/bin/uv" --version >/dev/null 2>&1; then
  "$venv/bin/uv" pip install --quiet --python "$venv/bin/python" \
    -r "$root/requirements.txt" -c "$root/constraints.txt"
else
  echo "setup: uv $UV_VERSION not installable here; installing with pip" >&2
  "${pip[@]}" -r "$root/requirements.txt" -c "$root/constraints.txt"
fi
"${pip[@]}" --no-deps -e "$root"
echo "$want" > "$stamp"
class_archive
echo "setup: done" >&2
