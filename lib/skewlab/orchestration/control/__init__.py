"""The ``skewlab_control`` DAG's side of the control steps: each step's form and the
params -> :class:`~skewlab.orchestration.control.params.ControlSettings` validation.

The steps themselves live in :mod:`skewlab.control`.
"""
