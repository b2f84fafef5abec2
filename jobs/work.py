"""Entry point of one worker process: partition ``i`` of ``routed`` -> Delta.

    python jobs/work.py WORKER_SETTINGS_JSON

The settings (a file path or the JSON text) are written by ``skewlab run`` under
``<data dir>/runs/<run id>/worker-<i>.json``; see :mod:`skewlab.live.worker.process`.
"""

from skewlab.live.driver.launch import without_pandas
from skewlab.live.worker.process import main

if __name__ == "__main__":
    without_pandas()
    raise SystemExit(main())
