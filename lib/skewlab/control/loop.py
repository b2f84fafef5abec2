"""One protocol for every in-process control loop: start, stop, report."""

from __future__ import annotations

import threading
from typing import Any, Generic, Protocol, TypeVar

__all__ = ["ControlLoop", "Runnable", "ThreadLoop"]


class Runnable(Protocol):
    """A loop body: ``run(stop)`` decides every interval until ``stop`` is set."""

    def run(self, stop: threading.Event) -> None:
        """Decide every interval; return once ``stop`` is set (after the current step)."""
        ...


class ControlLoop(Protocol):
    """What a run needs of a control loop (rebalancer, state manager, ...)."""

    name: str

    def start(self) -> None:
        """Start deciding (called once)."""
        ...

    def signal(self) -> None:
        """Ask the loop to stop, without waiting for it."""
        ...

    def stop(self) -> None:
        """Ask the loop to stop and wait until it has."""
        ...

    def report(self) -> dict[str, Any] | None:
        """The loop's final numbers (``None``: it reports nothing)."""
        ...


T = TypeVar("T", bound=Runnable)


class ThreadLoop(Generic[T]):
    """A :class:`ControlLoop` running ``body.run(stop)`` in a daemon thread of this process."""

    def __init__(self, name: str, body: T) -> None:
        self.name, self.body = name, body
        self._stop = threading.Event()
        self._thread = threading.Thread(target=body.run, args=(self._stop,), name=name, daemon=True)

    def start(self) -> None:
        """Start the thread (once)."""
        self._thread.start()

    def signal(self) -> None:
        """Ask the loop to stop after its current step."""
        self._stop.set()

    def stop(self) -> None:
        """Ask the loop to stop and wait for its thread (a loop never started returns at once)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def report(self) -> dict[str, Any] | None:
        """The body's ``report()`` if it has one, else ``None``."""
        fn = getattr(self.body, "report", None)
        return fn() if callable(fn) else None
