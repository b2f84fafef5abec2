"""What a live run reports: the verdict, the summary, progress and MLflow.

:mod:`.aggregate` merges the workers' partials and checks exactness; :mod:`.summary`
(with :mod:`.control` and :mod:`.plots`) builds the run's summary; :mod:`.watch` is
the progress line; :mod:`.tracking` logs the run to MLflow.
"""
