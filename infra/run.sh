#!/usr/bin/env bash
# Set up if needed, then run the main job on the embedded stack: a live
# experiment (embedded Kafka broker -> Spark route job -> workers -> Delta,
# checked exact, logged to MLflow). Extra arguments replace the defaults
# and go to `skewlab` (e.g. `bash infra/run.sh simulate --compare key,dkg`).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$root/infra/setup.sh"
cd "$root"
if [ "$#" -eq 0 ]; then
  set -- run --compare key,dkg --workers 4 --partitions 4 \
    --workload country:R80 --rate 5000 --duration 20 --window 5
fi
exec "$root/.venv/bin/skewlab" "$@"
