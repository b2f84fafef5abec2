#!/usr/bin/env bash
# Idempotent setup: a virtual environment in .venv with every pinned package and
# skewlab installed editable. A second run with unchanged pins does nothing.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.venv"
stamp="$venv/.skewlab-setup"

pick_python() {
  for p in python3.11 python3; do
    if command -v "$p" >/dev/null 2>&1 && "$p" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))'; then
      echo "$p"; return 0
    fi
  done
  echo "setup: Python 3.11 is required (python3.11 or python3 on PATH)" >&2
  return 1
}

want="$(cat "$root/requirements.txt" "$root/constraints.txt" "$root/pyproject.toml" | sha256sum | cut -d' ' -f1)"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -x "$venv/bin/python" ]; then
  exit 0
fi

if ! command -v java >/dev/null 2>&1; then
  echo "setup: Java 17 is required for Spark (java on PATH)" >&2
  exit 1
fi

py="$(pick_python)"
[ -x "$venv/bin/python" ] || "$py" -m venv "$venv"
echo "setup: installing pinned packages into $venv (first time: about 2 minutes)" >&2
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade "pip>=24"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
  -r "$root/requirements.txt" -c "$root/constraints.txt"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps -e "$root"
echo "$want" > "$stamp"
echo "setup: done" >&2
