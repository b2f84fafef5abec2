"""The worker process of a live run and its parts.

:mod:`.process` is the process (``python -m skewlab.live.worker.process``): fetch a
batch of ``routed`` (:mod:`.fetch`), apply it (:mod:`.batch`), write its rows
(:mod:`.rows`) and commit. :mod:`.shadow`, :mod:`.cut` and :mod:`.switch_watch` are its
part in a hand-off; :mod:`.warm` starts a scale-out spare ahead; :mod:`.settings` its
settings. :mod:`.consumer` is the autoscale run's worker: a consumer of the group
(``python -m skewlab.live.worker.consumer``), reading its partitions at a bounded rate.
"""
