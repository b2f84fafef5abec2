"""The driver of a live run: one run from its settings to its ending.

:mod:`.experiment` builds the run's settings and runs it; :mod:`.run` is the run
object; :mod:`.phases` its phases (start services, launch, produce, drain, end) over
the :mod:`.context`; :mod:`.handle` the state saved between phases; :mod:`.launch`
and :mod:`.supervise` the background processes; :mod:`.lifecycle` the states of runs
on disk; :mod:`.producer` the events' producer.
"""
