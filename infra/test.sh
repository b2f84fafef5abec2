#!/usr/bin/env bash
# The whole test suite: set up if needed, lint, type-check, then pytest.
# With no arguments pytest runs on two xdist workers: the tests sharing the session's services
# on one, in order; the tests that start what they use (Airflow, DAG, browser, Spark, Delta),
# then the unit tests at a lower priority, on the other (tests/groups.py, tests/conftest.py,
# docs/testing.md). Arguments go to pytest instead, in one process (e.g. `-m unit`, `-k dkg`).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$root/infra/setup.sh"
cd "$root"
bin="$root/.venv/bin"
echo "== ruff" >&2
"$bin/ruff" check .
"$bin/ruff" format --check .
echo "== mypy (lib/)" >&2
"$bin/mypy"
echo "== pytest" >&2
bash "$root/infra/browser.sh" >&2  # chromium for -m browser (apt-get if missing)
if [ "$#" -eq 0 ]; then
  set -- -n 2
fi
exec "$bin/python" -m pytest "$@"
