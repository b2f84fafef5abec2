"""
### skewlab_reproduce: the seed reproductions and the papers' claims (`skewlab reproduce`)

Runs the seed papers' reproductions through the library's `reproduce()` (the same
code as `skewlab reproduce`): every experiment's claims judged by their rules, one
claims table `seed | claim (figure) | paper | ours | rule | holds?`, a Markdown
report `reproduce.md` with each experiment's setup, table and plots under
`$SKEWLAB_HOME/runs/reproduce-<UTC stamp>/`, and one MLflow parent run
(`skewlab-reproduce` experiment) with a child run per experiment.

**Params**

- `experiments`: names to run (empty: every claim-bearing experiment).
- `scale`: one scale for all, in (0, 1] (1 = the papers' sizes); empty: each
  experiment's default reproduction scale.
- `seed`: the seed of every stream and workload.

**Tasks**

1. `plan`: validates the params (an unknown name fails the run with one line,
   before anything runs).
2. `reproduce`: runs the experiments and logs the MLflow runs. XCom: the parent
   run id, the report path, claims that hold / all claims. Claims that do not hold
   are results, not failures; the task fails only if an experiment raised.

Data directory: `$SKEWLAB_HOME` (set by `skewlab airflow`), else `./.skewlab`.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from typing import Any

from airflow.sdk import Param, dag, get_current_context, task

from skewlab.experiments.reproduce import REPRODUCE_SCALES

log = logging.getLogger(__name__)


@dag(
    dag_id="skewlab_reproduce",
    schedule=None,
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
    catchup=False,
    doc_md=__doc__,
    tags=["skewlab", "reproduce", "experiment"],
    params={
        "experiments": Param(
            [],
            type="array",
            items={"type": "string", "enum": list(REPRODUCE_SCALES)},
            description="experiments to run (empty: all)",
        ),
        "scale": Param(
            None,
            type=["null", "number"],
            exclusiveMinimum=0,
            maximum=1,
            description="one scale for all (empty: each experiment's default)",
        ),
        "seed": Param(1, type="integer", description="seed of every stream and workload"),
    },
    default_args={"owner": "skewlab", "retries": 0, "retry_delay": timedelta(seconds=10)},
    max_active_runs=1,
)
def skewlab_reproduce() -> None:
    """Validate the params -> run the reproductions."""

    @task
    def plan() -> dict[str, Any]:
        """The experiments, scale and seed to run, checked against the registry."""
        from airflow.sdk.exceptions import AirflowFailException

        from skewlab.errors import ConfigError
        from skewlab.experiments import registry
        from skewlab.experiments.reproduce import resolve_names

        params = dict(get_current_context()["params"])
        try:
            names = resolve_names(params.get("experiments") or None, registry())
        except ConfigError as exc:
            raise AirflowFailException(f"bad params: {exc}") from None
        return {"names": names, "scale": params.get("scale"), "seed": int(params["seed"])}

    @task(execution_timeout=timedelta(hours=2))
    def reproduce(planned: dict[str, Any]) -> dict[str, Any]:
        """Run ``skewlab.experiments.reproduce.reproduce`` and log the MLflow runs."""
        from airflow.sdk.exceptions import AirflowFailException

        from skewlab.experiments.reproduce import reproduce as run_all
        from skewlab.io.tracking import Tracker, TrackingSettings
        from skewlab.services.datadir import resolve_home

        home = resolve_home()
        tracker = Tracker(TrackingSettings.for_runs(home))
        result = run_all(
            planned["names"],
            home=home,
            now=datetime.now(UTC),
            scale=planned["scale"],
            seed=planned["seed"],
            tracker=tracker,
            progress=log.info,
        )
        if result.parent_run_id:
            ti = get_current_context()["ti"]
            tracker.set_tags(
                result.parent_run_id, {"airflow.dag_id": ti.dag_id, "airflow.run_id": ti.run_id}
            )
        held, total = result.holding, len(result.claims)
        log.info("%d of %d claims hold; report %s", held, total, result.report_path)
        if result.failed:
            raise AirflowFailException(f"experiments failed: {', '.join(result.failed)}")
        return {
            "parent_run_id": result.parent_run_id,
            "report": str(result.report_path),
            "claims": len(result.claims),
            "claims_hold": result.holding,
        }

    reproduce(plan())


skewlab_reproduce()
