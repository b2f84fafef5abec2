"""The Airflow UI in headless chromium: log in, fill the trigger form, see the run succeed.

Against the session's real ``airflow standalone`` (``airflow_server``, started as
``skewlab airflow --run`` does): unpause ``skewlab_experiment`` through the REST
API, log in on the simple auth manager's page, open the DAG, click **Trigger**,
fill the form with a small experiment (KEY grouping, 2 workers, 2 partitions,
2,000 events/s for 5 s), trigger, and poll the REST API until the run succeeds.
Screenshots (``screenshots/`` in the test's tmp dir): the login page, the filled
form, the run page after triggering and after success.

The experiment's form cannot hold a bad value: workers 0, rate -5 and skew 120 are
brought back into their range as the field loses focus (the range is said under it);
the workload is a drop-down of the registered workloads ("cuntry" matches none); a JSON
text field a pattern refuses (the autoscale workload) is refused in the dialog, naming
the param, and no run is created. After the run succeeds, its ``record_result`` task has an
**MLflow run** button opening the run's MLflow page. With the DAG
paused (and "unpause on trigger" unticked) the untouched form creates a queued run whose
conf is the DAG's defaults, which the run's first task accepts; the run is then deleted.

The sweep's form (``skewlab_sweep``): a workers list that is not a list is refused
inline (the field's error, Trigger disabled); ``events`` 0 is kept as typed (not
clamped) and refused by the API, the dialog naming the param and no run created;
the untouched defaults trigger a run that succeeds and links its MLflow parent run.
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
CLOSE_TRIES = 3
SWEEP_DAG = "skewlab_sweep"
TRIGGER_DIALOG = (
    "Array.from(document.querySelectorAll('[role=dialog]'))"
    ".find(d => d.innerText.includes('Trigger Dag'))"
)


def _mark(page: Page, finder: str, tag: str) -> None:
    """Give the element ``finder`` (a JS expression) a ``data-t`` attribute to click it by,
    once it exists (a section's editor renders after the section opens)."""
    page.wait_for(
        f"(() => {{ const e = {finder}; if (!e) return false;"
        f" e.setAttribute('data-t', {json.dumps(tag)}); return true; }})()",
        f"element {tag}",
    )


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
        ".find(o => o.id.startsWith('react-select')"
        f" && o.innerText.trim().split(':')[0] === '{STRATEGY}')"  # labelled "key: hash of..."
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
    state = airflow_api.wait_run(EXPERIMENT_DAG, run_id, timeout_s=900)  # 2 busy cores
    assert state == "success", airflow_api.task_states(EXPERIMENT_DAG, run_id)

    browser.goto(f"{server.url}/dags/{EXPERIMENT_DAG}/runs/{run_id}")
    browser.wait_for("document.body.innerText.toLowerCase().includes('success')", "success shown")
    shots = [browser.screenshot("04-run-succeeded")]

    # the record_result task has an "MLflow run" button opening the run's MLflow page
    url = airflow_api.xcom(EXPERIMENT_DAG, run_id, "record_result", "mlflow_run_url")
    browser.goto(f"{server.url}/dags/{EXPERIMENT_DAG}/runs/{run_id}/tasks/record_result")
    details = "Array.from(document.querySelectorAll('a, button'))" + (
        ".find(e => e.innerText.trim() === 'Details')"
    )
    _mark(browser, details, "details-tab")  # Airflow lists a task's extra links there
    browser.click("[data-t=details-tab]")
    button = (
        "Array.from(document.querySelectorAll('a')).find(a => a.innerText.trim() === 'MLflow run')"
    )
    href = browser.wait_for(f"{button}?.getAttribute('href')", "the MLflow run button")
    assert href == url and str(url).startswith("http"), (href, url)
    shots.append(browser.screenshot("05-mlflow-run-button"))
    shots += sorted(browser.artifacts.glob("0[1-3]-*.png"))
    assert len(shots) == 5
    for shot in shots:
        assert shot.stat().st_size > 5_000, f"{shot} looks empty"


def _open_trigger(page: Page, url: str, dag_id: str, field: str) -> None:
    """Open the Trigger dialog of ``dag_id`` and wait for its form field ``field``."""
    page.goto(f"{url}/dags/{dag_id}")
    buttons = "Array.from(document.querySelectorAll('button'))"
    page.wait_for(
        f"{buttons}.some(b => b.innerText.trim() === 'Trigger')", "Trigger button", timeout_s=120
    )
    _mark(page, f"{buttons}.find(b => b.innerText.trim() === 'Trigger')", "open-trigger")
    page.click("[data-t=open-trigger]")
    page.wait_for(f"!!{TRIGGER_DIALOG}?.querySelector('[name=element_{field}]')", "form")


def _open_section(page: Page, title: str, field: str) -> None:
    _mark(
        page,
        f"Array.from({TRIGGER_DIALOG}.querySelectorAll('button[data-part=item-trigger]'))"
        f".find(b => b.innerText.trim() === '{title}')",
        "section",
    )
    page.click("[data-t=section]")
    page.eval("document.querySelector('[data-t=section]').removeAttribute('data-t')")
    page.wait_for(
        f"!!{TRIGGER_DIALOG}.querySelector('[id=element_{field}], [name=element_{field}]')"
        "?.offsetParent",
        f"section {title}",
    )


CLAMPED = {"workers": ("0", "1"), "rate": ("-5", "1"), "skew": ("120", "100")}
"""A bad number typed into the experiment form -> what the field holds once it loses focus."""


def test_experiment_form_cannot_hold_a_bad_value_or_names_it(
    browser: Page, airflow_api: AirflowApi
) -> None:
    from skewlab.workload.spec import WORKLOAD_NAMES

    server = airflow_api.server
    runs = f"/dags/{EXPERIMENT_DAG}/dagRuns"
    before = airflow_api.get(runs)["total_entries"]
    _log_in(browser, server.url, server.user, server.password)
    _open_trigger(browser, server.url, EXPERIMENT_DAG, "workers")
    _open_section(browser, "Grouping experiment", "workers")

    # 1. numbers: brought back into their range as the field loses focus, range said below
    for name, (typed, held) in CLAMPED.items():
        field = f"[role=dialog] input[name=element_{name}]"
        browser.type_into(field, typed)
        browser.eval("document.activeElement && document.activeElement.blur()")
        browser.wait_for(f"document.querySelector('{field}').value === '{held}'", f"{name} held")
    described = browser.text()
    assert "Allowed: an integer in 1..64." in described
    browser.screenshot("20-experiment-numbers-in-range")

    # 2. the workload is a drop-down of the registry's workloads: "cuntry" matches none
    _mark(
        browser,
        f"{TRIGGER_DIALOG}.querySelector('input[name=element_workload]')"
        ".parentElement.querySelector('input[type=text]')",
        "workload",
    )
    browser.click("[data-t=workload]")
    options = (
        "Array.from(document.querySelectorAll('[role=option]'))"
        ".filter(o => o.id.startsWith('react-select')).map(o => o.innerText.trim())"
    )
    shown = browser.wait_for(f"{options}.length > 0 && {options}", "workload options")
    assert [str(o).split(":", 1)[0] for o in shown] == list(WORKLOAD_NAMES)
    browser.send("Input.insertText", text="cuntry")
    browser.wait_for(f"{options}.length === 0", "no workload matches cuntry")
    browser.screenshot("21-experiment-workload-choices")
    browser.send("Input.dispatchKeyEvent", type="keyDown", key="Escape", code="Escape")
    _close_dialog(browser)

    # 3. free text a pattern refuses (the autoscale workload): the dialog names the param
    _open_trigger(browser, server.url, EXPERIMENT_DAG, "workers")
    section = "Autoscale a consumer group (instead of the grouping experiment)"
    _open_section(browser, section, "autoscale_workload")
    browser.type_into("[role=dialog] input[name=element_autoscale_workload]", "zipf:s=1")
    browser.eval("document.activeElement && document.activeElement.blur()")
    browser.click(_submit_button(browser))
    refused = browser.wait_for(
        f"Array.from({TRIGGER_DIALOG}.querySelectorAll('p'))"
        ".map(p => p.innerText)"
        ".find(t => t.includes('Invalid input for param autoscale_workload'))",
        "the refusal of autoscale_workload",
    )
    assert "zipf:s=1" in str(refused)
    assert airflow_api.get(runs)["total_entries"] == before, "a bad value made a run"
    browser.scroll_to_text(str(refused).strip().splitlines()[0])
    browser.screenshot("22-experiment-refuses-autoscale_workload")
    _close_dialog(browser)
    for shot in sorted(browser.artifacts.glob("2[0-2]-*.png")):
        assert shot.stat().st_size > 5_000, f"{shot} looks empty"


def test_experiment_form_submits_its_defaults(browser: Page, airflow_api: AirflowApi) -> None:
    from skewlab.orchestration.params import param_schemas, settings_from_params

    server = airflow_api.server
    r = airflow_api.http.patch(f"/api/v2/dags/{EXPERIMENT_DAG}", json={"is_paused": True})
    assert r.status_code == 200, r.text[:300]
    _log_in(browser, server.url, server.user, server.password)
    _open_trigger(browser, server.url, EXPERIMENT_DAG, "workers")
    unpause = f"Array.from({TRIGGER_DIALOG}.querySelectorAll('label'))" + (
        ".find(l => l.innerText.includes('Unpause'))"
    )
    _mark(browser, unpause, "unpause")
    browser.click("[data-t=unpause]")
    browser.wait_for(
        "document.querySelector('[data-t=unpause] input').checked === false", "unpause unticked"
    )
    browser.screenshot("30-experiment-defaults")
    browser.click(_submit_button(browser))
    href = browser.wait_for(
        f"location.pathname.includes('/dags/{EXPERIMENT_DAG}/runs/') && location.pathname",
        "the default run's page",
    )
    run_id = unquote(str(href).rsplit("/runs/", 1)[1].strip("/"))
    path = f"/dags/{EXPERIMENT_DAG}/dagRuns/{run_id}"
    try:
        run = airflow_api.get(path)
        defaults = {name: kwargs["default"] for name, kwargs in param_schemas().items()}
        assert run["conf"] == defaults
        assert run["state"] == "queued"  # paused: it waits, no experiment starts
        settings_from_params(run["conf"], home=str(server.home))  # validate_params accepts it
    finally:
        assert airflow_api.http.delete(f"/api/v2{path}").status_code == 204


def _submit_button(page: Page) -> str:
    """Mark the dialog's Trigger button; its selector."""
    _mark(
        page,
        f"Array.from({TRIGGER_DIALOG}.querySelectorAll('button'))"
        ".filter(b => b.innerText.trim() === 'Trigger').pop()",
        "submit",
    )
    return "[data-t=submit]"


def _close_dialog(page: Page) -> None:
    """Click the dialog's close button until the dialog is gone. The dialog can re-render
    between marking its button and clicking it (an Escape just sent, a busy machine): then
    the button is marked again."""
    from tests.browser.conftest import CdpError

    mark = (
        f"(() => {{ const d = {TRIGGER_DIALOG}; if (!d) return 'gone';"
        " const e = d.querySelector('[data-part=close-trigger]'); if (!e) return false;"
        " e.setAttribute('data-t', 'close'); return 'marked'; })()"
    )
    for _ in range(CLOSE_TRIES):
        if page.wait_for(mark, "the dialog's close button") == "gone":
            return
        try:
            page.click("[data-t=close]")
            page.wait_for(f"!{TRIGGER_DIALOG}", "dialog closed", timeout_s=30)
            return
        except CdpError:
            continue  # re-rendered or still open: mark its button again
    page.wait_for(f"!{TRIGGER_DIALOG}", "dialog closed")


def _replace_json(page: Page, field: str, text: str) -> None:
    """Select all in the JSON editor of ``field`` and type ``text`` (no brackets or quotes:
    the editor closes them itself)."""
    _mark(page, f"{TRIGGER_DIALOG}.querySelector('#element_{field} .view-lines')", f"{field}-ed")
    page.click(f"[data-t={field}-ed]")
    page.wait_for("document.activeElement?.closest('.monaco-editor') != null", "editor focus")
    select_all = {"key": "a", "code": "KeyA", "modifiers": 2, "windowsVirtualKeyCode": 65}
    page.send("Input.dispatchKeyEvent", type="keyDown", commands=["selectAll"], **select_all)
    page.send("Input.dispatchKeyEvent", type="keyUp", **select_all)
    page.send("Input.insertText", text=text)


def test_sweep_form_submits_defaults_and_refuses_bad_values(
    browser: Page, airflow_api: AirflowApi
) -> None:
    server = airflow_api.server
    airflow_api.unpause(SWEEP_DAG)
    _log_in(browser, server.url, server.user, server.password)
    runs = f"/dags/{SWEEP_DAG}/dagRuns"

    # 1. workers must be a list: a bare number is refused in the field, Trigger disabled
    _open_trigger(browser, server.url, SWEEP_DAG, "preset")
    submit = _submit_button(browser)
    assert browser.eval(f"document.querySelector('{submit}').disabled") is False  # defaults
    _open_section(browser, "Grid", "workers")
    browser.screenshot("11-sweep-form-defaults")
    _replace_json(browser, "workers", "4")
    error = browser.wait_for(
        f"{TRIGGER_DIALOG}.querySelector('#element_workers')?.closest('[data-part=root]')"
        "?.querySelector('[data-part=error-text]')?.innerText",
        "inline error under workers",
    )
    assert "array" in str(error).lower()
    assert browser.eval(f"document.querySelector('{_submit_button(browser)}').disabled") is True
    browser.screenshot("12-sweep-inline-error")
    _close_dialog(browser)

    # 2. events 0 stays 0 (no silent clamp); the API refuses it and the dialog says why
    _open_trigger(browser, server.url, SWEEP_DAG, "events")
    _open_section(browser, "Cell size", "events")
    events = "[role=dialog] input[name=element_events]"
    assert browser.eval(f"document.querySelector('{events}').value") == "200000"  # reset
    browser.type_into(events, "0")
    browser.eval("document.activeElement && document.activeElement.blur()")
    browser.click(_submit_button(browser))
    refused = browser.wait_for(
        f"Array.from({TRIGGER_DIALOG}.querySelectorAll('p'))"
        ".map(p => p.innerText).find(t => t.includes('Invalid input for param'))",
        "the refusal in the dialog",
    )
    assert "param events: 0 " in str(refused)
    assert browser.eval(f"document.querySelector('{events}').value") == "0"
    assert airflow_api.get(runs)["total_entries"] == 0
    browser.scroll_to_text(str(refused).strip())
    browser.screenshot("13-sweep-refused")
    _close_dialog(browser)

    # 3. the untouched defaults trigger a sweep that succeeds and links its MLflow run
    _open_trigger(browser, server.url, SWEEP_DAG, "preset")
    browser.click(_submit_button(browser))
    href = browser.wait_for(
        f"location.pathname.includes('/dags/{SWEEP_DAG}/runs/') && location.pathname",
        "the sweep run's page",
    )
    run_id = unquote(str(href).rsplit("/runs/", 1)[1].strip("/"))
    conf = airflow_api.get(f"{runs}/{run_id}")["conf"]
    assert conf["preset"] == "custom" and conf["workers"] == [4] and conf["events"] == 200_000
    state = airflow_api.wait_run(SWEEP_DAG, run_id)
    assert state == "success", airflow_api.task_states(SWEEP_DAG, run_id)
    parent = airflow_api.xcom(SWEEP_DAG, run_id, "compare", "parent_run_id")
    url = airflow_api.xcom(SWEEP_DAG, run_id, "compare", "parent_run_url")
    assert str(url).startswith("http") and str(url).split("?")[0].endswith(f"/runs/{parent}")
    log = airflow_api.get(f"{runs}/{run_id}/taskInstances/start_parent/logs/1")["content"]
    ours = [e for e in log if isinstance(e, dict) and e.get("logger") == "skewlab.dags.sweep"]
    assert any(str(url) in str(e.get("event")) for e in ours), ours
    assert not [e for e in log if str(e.get("logger", "")).startswith("unusual_prefix")]
    browser.goto(f"{server.url}/dags/{SWEEP_DAG}/runs/{run_id}")
    browser.wait_for("document.body.innerText.toLowerCase().includes('success')", "success shown")
    browser.screenshot("14-sweep-succeeded")
    for shot in sorted(browser.artifacts.glob("1[1-4]-*.png")):
        assert shot.stat().st_size > 5_000, f"{shot} looks empty"
