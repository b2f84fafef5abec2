#!/usr/bin/env bash
# Set up if needed, then run the main job on the embedded stack.
# Extra arguments go to the job (see `skewlab --help`).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$root/infra/setup.sh"
cd "$root"
if [ "$#" -eq 0 ]; then
  set -- simulate --compare key,shuffle,pkg,dkg --workers 10 --workload country:R80 --events 2e6
fi
exec "$root/.venv/bin/skewlab" "$@"
