#!/usr/bin/env bash
# The whole test suite: set up if needed, lint, type-check, then pytest.
# Extra arguments go to pytest (e.g. `-m unit`, `-m integration`, `-k dkg`; `-n 2`: two xdist
# workers, tests grouped by what they start, tests/conftest.py and docs/testing.md).
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
exec "$bin/python" -m pytest "$@"
