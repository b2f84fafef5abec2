"""The Airflow UI in headless chromium: log in, fill the trigger form, see the run succeed.

Against the session's real ``airflow standalone`` (``airflow_server``, started as
``skewlab airflow --run`` does): unpause ``skewlab_experiment`` through the REST
API, log in on the simple auth manager's page, open the DAG, click **Trigger**,
fill the form with a small experiment (KEY grouping, 2 workers, 2 partitions,
2,000 events/s for 5 s), trigger, and poll the REST API until the run succeeds.
Screenshots (``screenshots/`` in the test's tmp dir): the login page, the filled
form, the run page after triggering and after success.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING
from urllib.parse import unquote

import pytest
from tests.integration.fixtures.airflow import EXPERIMENT_DAG, AirflowApi

if TYPE_CHECKING:
    from tests.browser.conftest import Page

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.slow]

FORM = {"workers": "2", "partitions": "2", "rate": "2000", "duration": "5", "window": "2"}
STRATEGY = "key"
TRIGGER_DIALOG = (
    "Array.from(document.querySelectorAll('[role=dialog]'))"
    ".find(d => d.innerText.includes('Trigger Dag'))"
)


def _mark(page: Page, finder: str, tag: str) -> None:
    """Give the element ``finder`` (a JS expression) a ``data-t`` attribute to click it by."""
    ok = page.eval(
        f"(() => {{ const e = {finder}; if (!e) return false;"
        f" e.setAttribute('data-t', {json.dumps(tag)}); return true; }})()"
    )
    assert ok, f"element not found: {finder}"


def _log_in(page: Page, url: str, user: str, password: str) -> None:
    page.goto(f"{url}/")
    page.wait_for("!!document.querySelector('input[name=password]')", "login form")
    page.screenshot("01-login")
    page.type_into("input[name=username]", user)
    page.type_into("input[name=password]", password)
    page.click("button[type=submit]")
    page.wait_for("!location.pathname.startsWith('/auth')", "logged in")


def _fill_trigger_form(page: Page, url: str) -> None:
    page.goto(f"{url}/dags/{EXPERIMENT_DAG}")
    buttons = "Array.from(document.querySelectorAll('button'))"
    page.wait_for(f"{buttons}.some(b => b.innerText.trim() === 'Trigger')", "Trigger button")
    _mark(page, f"{buttons}.find(b => b.innerText.trim() === 'Trigger')", "open-trigger")
    page.click("[data-t=open-trigger]")
    page.wait_for(f"!!{TRIGGER_DIALOG}?.querySelector('input[name=element_workers]')", "form")
    # the params come in collapsible sections (grouping, rebalance, scale-out, autoscale)
    _mark(
        page,
        f"Array.from({TRIGGER_DIALOG}.querySelectorAll('button[data-part=item-trigger]'))"
        ".find(b => b.innerText.trim() === 'Grouping experiment')",
        "grouping-section",
    )
    page.click("[data-t=grouping-section]")
    page.wait_for(
        f"!!{TRIGGER_DIALOG}.querySelector('#element_strategy')?.offsetParent", "grouping section"
    )
    # the grouping is a searchable select: open it, click the option
    _mark(
        page,
        f"{TRIGGER_DIALOG}.querySelector('input[name=element_strategy]')"
        ".parentElement.querySelector('input[type=text]')",
        "strategy",
    )
    page.click("[data-t=strategy]")
    option = (
        "Array.from(document.querySelectorAll('[role=option]'))"
        f".find(o => o.id.startsWith('react-select') && o.innerText.trim() === '{STRATEGY}')"
    )
    page.wait_for(f"!!{option}", "grouping options")
    _mark(page, option, "strategy-option")
    page.click("[data-t=strategy-option]")
    for name, value in FORM.items():
        page.type_into(f"[role=dialog] input[name=element_{name}]", value)
    page.eval("document.activeElement && document.activeElement.blur()")
    values = page.wait_for(
        "(() => { const v = {}; for (const e of document.querySelectorAll("
        "'[role=dialog] input[name^=element_]')) v[e.name.slice(8)] = e.value;"
        f" return v.strategy === '{STRATEGY}' && v.duration === '5' ? v : null; }})()",
        "form values",
    )
    assert {k: values[k] for k in FORM} == FORM
    page.screenshot("02-trigger-form")


def test_trigger_form_runs_the_experiment(browser: Page, airflow_api: AirflowApi) -> None:
    server = airflow_api.server
    airflow_api.unpause(EXPERIMENT_DAG)
    _log_in(browser, server.url, server.user, server.password)
    _fill_trigger_form(browser, server.url)

    dialog_trigger = (
        f"Array.from({TRIGGER_DIALOG}.querySelectorAll('button'))"
        ".filter(b => b.innerText.trim() === 'Trigger').pop()"
    )
    _mark(browser, dialog_trigger, "submit")
    browser.click("[data-t=submit]")
    href = browser.wait_for(
        f"location.pathname.includes('/dags/{EXPERIMENT_DAG}/runs/') && location.pathname",
        "the new run's page",
    )
    run_id = unquote(str(href).rsplit("/runs/", 1)[1].strip("/"))
    browser.screenshot("03-run-triggered")

    conf = airflow_api.get(f"/dags/{EXPERIMENT_DAG}/dagRuns/{run_id}")["conf"]
    assert conf["strategy"] == STRATEGY and conf["workers"] == 2 and conf["duration"] == 5
    state = airflow_api.wait_run(EXPERIMENT_DAG, run_id)
    assert state == "success", airflow_api.task_states(EXPERIMENT_DAG, run_id)

    browser.goto(f"{server.url}/dags/{EXPERIMENT_DAG}/runs/{run_id}")
    browser.wait_for("document.body.innerText.toLowerCase().includes('success')", "success shown")
    shots = [browser.screenshot("04-run-succeeded")]
    shots += sorted(browser.artifacts.glob("0[1-3]-*.png"))
    assert len(shots) == 4
    for shot in shots:
        assert shot.stat().st_size > 5_000, f"{shot} looks empty"
