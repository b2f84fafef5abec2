#!/usr/bin/env bash
# Debian's PostgreSQL server for `skewlab cluster up` (Airflow's metadata DB): installed
# with apt-get only when no /usr/lib/postgresql/N/bin/postgres exists. Not part of the
# default setup (infra/setup.sh); `skewlab cluster up` runs it when needed. The cluster
# itself (initdb, the server) lives under the skewlab data dir, not the package's default.
set -euo pipefail
if compgen -G "/usr/lib/postgresql/*/bin/postgres" >/dev/null; then
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "postgres.sh: PostgreSQL is missing and apt-get is not available; install the server yourself" >&2
  exit 1
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null 2>&1 || { echo "postgres.sh: apt-get needs root (no sudo found)" >&2; exit 1; }
  sudo="sudo"
fi
echo "postgres.sh: installing Debian's postgresql with apt-get" >&2
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends postgresql >/dev/null
# Debian's package starts its own cluster on 5432; skewlab runs its own under the data dir
if command -v pg_ctlcluster >/dev/null 2>&1; then
  for conf in /etc/postgresql/*/main; do
    [ -d "$conf" ] || continue
    version="$(basename "$(dirname "$conf")")"
    $sudo pg_ctlcluster "$version" main stop 2>/dev/null || true
  done
fi
echo "postgres.sh: done" >&2
