"""Headless Debian chromium driven over the Chrome DevTools Protocol (no Selenium).

``infra/browser.sh`` installs ``chromium``; ``infra/test.sh`` runs it before pytest.

Fixtures:

- ``chromium_bin`` (session): the chromium executable (fails, never skips, if missing).
- ``browser``: a fresh headless chromium (own ``--user-data-dir``, DevTools on a port
  it picks itself) and a :class:`Page` connected to its first tab over a websocket;
  the browser's process group is killed afterwards.

:class:`Page` speaks CDP directly: ``send(method, **params)`` waits for the reply
with the same id, queueing events; ``goto``, ``eval``, ``wait_for`` (a JavaScript
condition), ``type_into`` (focus a CSS selector, then ``Input.insertText``, which
React's controlled inputs accept), ``click`` and ``screenshot``.
"""

from __future__ import annotations

import base64
import contextlib
import itertools
import json
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--window-size=1400,1000",
)
START_TIMEOUT_S = 30.0
WAIT_S = 120.0
"""How long a page condition may take: generous, the machine may be busy (a slow page only
makes a failing test fail later)."""
WIDTH, HEIGHT = 1400, 1000


class CdpError(AssertionError):
    """A DevTools command failed, or a page condition never became true."""


class Page:
    """One chromium tab over CDP (``websockets`` sync client)."""

    def __init__(self, ws_url: str, artifacts: Path) -> None:
        from websockets.sync.client import connect

        self._stack = contextlib.ExitStack()
        self.ws = self._stack.enter_context(connect(ws_url, max_size=None, open_timeout=10))
        self.ids = itertools.count(1)
        self.events: list[dict[str, Any]] = []
        self.artifacts = artifacts
        self.send("Page.enable")
        self.send("Runtime.enable")
        self.send(
            "Emulation.setDeviceMetricsOverride",
            width=WIDTH,
            height=HEIGHT,
            deviceScaleFactor=1,
            mobile=False,
        )

    def send(self, method: str, timeout_s: float = 30.0, **params: Any) -> dict[str, Any]:
        """Send one command and return its ``result`` (events seen meanwhile are kept)."""
        msg_id = next(self.ids)
        self.ws.send(json.dumps({"id": msg_id, "method": method, "params": params}))
        deadline = time.monotonic() + timeout_s
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise CdpError(f"{method}: no reply after {timeout_s:.0f} s")
            msg = json.loads(self.ws.recv(timeout=left))
            if msg.get("id") == msg_id:
                if "error" in msg:
                    raise CdpError(f"{method}: {msg['error']}")
                result: dict[str, Any] = msg.get("result", {})
                return result
            if "method" in msg:
                self.events.append(msg)

    def eval(self, expression: str, timeout_s: float = 30.0) -> Any:
        """The JSON value of a JavaScript expression (promises awaited)."""
        out = self.send(
            "Runtime.evaluate",
            timeout_s=timeout_s,
            expression=expression,
            returnByValue=True,
            awaitPromise=True,
        )
        if "exceptionDetails" in out:
            detail = out["exceptionDetails"]
            text = detail.get("exception", {}).get("description") or detail.get("text")
            raise CdpError(f"JavaScript failed: {text}\n{expression[:300]}")
        return out.get("result", {}).get("value")

    def wait_for(self, condition: str, what: str, timeout_s: float = WAIT_S) -> Any:
        """Poll a JavaScript expression until it is truthy; its value."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                value = self.eval(condition)
            except CdpError:
                value = None  # the page is navigating: its context is gone for a moment
            if value:
                return value
            if time.monotonic() > deadline:
                shot = self.screenshot("timeout-" + re.sub(r"[^A-Za-z0-9_.-]+", "_", what)[:40])
                raise CdpError(f"{what}: not after {timeout_s:.0f} s (screenshot {shot})")
            time.sleep(0.3)

    def goto(self, url: str, ready: str = "document.readyState === 'complete'") -> None:
        """Navigate and wait until ``ready`` holds."""
        out = self.send("Page.navigate", url=url)
        if out.get("errorText"):
            raise CdpError(f"navigate {url}: {out['errorText']}")
        self.wait_for(ready, f"load {url}")

    def type_into(self, selector: str, text: str, clear: bool = True) -> None:
        """Focus the element at ``selector`` (select its text if ``clear``) and type ``text``."""
        sel = json.dumps(selector)
        found = self.eval(
            f"(() => {{ const e = document.querySelector({sel}); if (!e) return false;"
            " e.scrollIntoView({block: 'center'}); e.focus();"
            f" {'if (e.select) e.select();' if clear else ''} return true; }})()"
        )
        if not found:
            raise CdpError(f"no element {selector}")
        if clear:
            self.send(
                "Input.dispatchKeyEvent",
                type="keyDown",
                key="Backspace",
                code="Backspace",
                windowsVirtualKeyCode=8,
            )
            self.send(
                "Input.dispatchKeyEvent",
                type="keyUp",
                key="Backspace",
                code="Backspace",
                windowsVirtualKeyCode=8,
            )
        self.send("Input.insertText", text=text)

    def click(self, selector: str) -> None:
        """A real mouse click at the centre of the element at ``selector``."""
        sel = json.dumps(selector)
        box = self.eval(
            f"(() => {{ const e = document.querySelector({sel}); if (!e) return null;"
            " e.scrollIntoView({block: 'center'}); const r = e.getBoundingClientRect();"
            " return [r.x + r.width / 2, r.y + r.height / 2]; })()"
        )
        if not box:
            raise CdpError(f"no element {selector}")
        x, y = box
        for kind in ("mousePressed", "mouseReleased"):
            self.send("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left", clickCount=1)

    def screenshot(self, name: str) -> Path:
        """A PNG of the viewport under the test's tmp dir; its path."""
        data = self.send("Page.captureScreenshot", format="png")["data"]
        path = self.artifacts / f"{name}.png"
        path.write_bytes(base64.b64decode(data))
        return path

    def text(self) -> str:
        """The page's visible text."""
        value = self.eval("document.body ? document.body.innerText : ''")
        return str(value or "")

    def scroll_to_text(self, text: str) -> bool:
        """Scroll the last (innermost) element whose text is ``text`` into view; found or not."""
        return bool(
            self.eval(
                "(() => { const t = " + json.dumps(text) + ";"
                " const all = Array.from(document.querySelectorAll('body *'));"
                " const hits = all.filter(x => x.textContent.trim() === t);"
                " const e = hits[hits.length - 1];"
                " if (!e) return false; e.scrollIntoView({block: 'start'}); return true; })()"
            )
        )

    def close(self) -> None:
        self._stack.close()


@pytest.fixture(scope="session")
def chromium_bin() -> str:
    """Debian's chromium (``infra/browser.sh`` installs it)."""
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        pytest.fail("chromium is not installed: run infra/browser.sh (apt-get)")
    return path


def _devtools_port(profile: Path, proc: subprocess.Popen[bytes], log: Path) -> int:
    """The port chromium wrote to ``<profile>/DevToolsActivePort``."""
    marker = profile / "DevToolsActivePort"
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"chromium exited ({proc.returncode}): {log.read_text()[-1500:]}")
        try:
            return int(marker.read_text().splitlines()[0])
        except (OSError, ValueError, IndexError):
            time.sleep(0.2)
    pytest.fail(f"chromium did not open DevTools in {START_TIMEOUT_S:.0f} s")


def _page_ws_url(port: int) -> str:
    import httpx

    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        try:
            targets = httpx.get(f"http://127.0.0.1:{port}/json/list", timeout=5.0).json()
        except httpx.HTTPError:
            targets = []
        pages = [t for t in targets if t.get("type") == "page"]
        if pages:
            url: str = pages[0]["webSocketDebuggerUrl"]
            return url
        time.sleep(0.2)
    pytest.fail("chromium has no page target")


@pytest.fixture
def browser(chromium_bin: str, tmp_path: Path) -> Iterator[Page]:
    """A fresh headless chromium and its first tab; killed (whole group) afterwards."""
    profile = tmp_path / "chromium-profile"
    profile.mkdir()
    shots = tmp_path / "screenshots"
    shots.mkdir()
    log = tmp_path / "chromium.log"
    argv = [
        chromium_bin,
        *CHROMIUM_FLAGS,
        f"--user-data-dir={profile}",
        "--remote-debugging-address=127.0.0.1",
        "--remote-debugging-port=0",
        "about:blank",
    ]
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    page = None
    try:
        port = _devtools_port(profile, proc, log)
        page = Page(_page_ws_url(port), shots)
        yield page
    finally:
        if page is not None:
            page.close()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
