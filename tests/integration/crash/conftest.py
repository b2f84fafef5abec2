"""The crash matrix (issue 18): the ``crash`` marker, and a skip without supervision."""

from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "crash: the crash matrix (live runs with crash points armed; -m crash)"
    )
