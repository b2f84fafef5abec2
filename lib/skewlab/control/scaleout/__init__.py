"""Scale-out of overloaded stateful operators: the control step and the live state manager.

:mod:`.step` is the scale-out control step (worker signals from Delta -> policy ->
``operator_state`` and ``decisions``, one data interval). :mod:`.manager` is the live
state manager (:class:`~skewlab.control.scaleout.manager.StateManager`) built from
:mod:`.settings`, with its mixins :mod:`.pacing` (when it steps) and :mod:`.sweep` (the
routing sweep); :mod:`.state` computes its score and checkpoints, :mod:`.events` its scale
events, :mod:`.recovery` rebuilds a dead manager's state from what the run recorded.
"""
