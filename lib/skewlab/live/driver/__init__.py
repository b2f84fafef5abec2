"""The driver of a live run: one run from its settings to its ending.

:mod:`.experiment` names the run's error, hook and ids; :mod:`.base` is the phase
machinery every run kind shares (:class:`~skewlab.live.driver.base.PhasedRun`) and
:mod:`.run` the grouping run, a kind of it, over the :mod:`.context`; :mod:`.handle` the
state saved between phases; :mod:`.launch`, :mod:`.spark_launcher`, :mod:`.route_host`
and :mod:`.supervise` the background processes; :mod:`.lifecycle` the states of runs on
disk; :mod:`.producer` the events' producer.
"""
