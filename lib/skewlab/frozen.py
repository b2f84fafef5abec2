"""A read-only ``str -> value`` mapping that pickles: the base of immutable state values."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any


class FrozenMapping(Mapping[str, Any]):
    """Read-only view over a private dict; pickles as ``type(self)(data)``.

    Subclasses validate in ``__init__`` and must accept the dict they were built
    from as their only argument (that is how they unpickle).
    """

    __slots__ = ("_data",)

    def __init__(self, data: Mapping[str, Any]) -> None:
        self._data: dict[str, Any] = dict(data)

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self._data,))
