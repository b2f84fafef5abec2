"""What a live run's driver adds to its settings: its error, its hook and its run ids.

The settings of one live run are core (:class:`skewlab.runsettings.ExperimentSettings`,
validated once there); this module holds what names the runtime: :class:`ExperimentError`
(a part of the run failed), :data:`Hook` (called with the run's processes after each
produce chunk), :func:`new_run_id` and :data:`BOOTSTRAP_ENV`. Running a run:
:func:`skewlab.live.driver.run.run_experiment`. Settings reference: docs/run-settings.md.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable

from skewlab.errors import SkewlabError
from skewlab.live.driver.launch import Procs

__all__ = ["BOOTSTRAP_ENV", "ExperimentError", "Hook", "new_run_id"]

log = logging.getLogger(__name__)


class ExperimentError(SkewlabError):
    """A part of the live run failed; the message says which and where its log is."""


Hook = Callable[[int, Procs], None]
"""Called with the number of events produced so far (after each produce chunk)."""


BOOTSTRAP_ENV = "SKEWLAB_KAFKA_BOOTSTRAP"
"""A Kafka to use instead of the embedded broker (``--bootstrap`` wins)."""


def new_run_id(strategy: str) -> str:
    """A new run id: ``<strategy>-<UTC time>-<6 hex>`` (unique, sorts by start)."""
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    return f"{strategy}-{stamp}-{uuid.uuid4().hex[:6]}"
