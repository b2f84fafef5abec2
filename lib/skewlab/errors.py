"""The one error hierarchy of skewlab.

Every error the library raises on purpose derives from :class:`SkewlabError`, so
callers (the CLI, DAGs, jobs) can turn it into one line for the user.
"""

from __future__ import annotations


class SkewlabError(Exception):
    """Base class of every deliberate skewlab error."""


class ConfigError(SkewlabError, ValueError):
    """A parameter is out of range or malformed; the message says what is allowed."""


class SettingError(ConfigError):
    """A run setting (:data:`skewlab.spec.SETTINGS`) got a value outside what it allows.

    ``name`` is the setting, ``flag`` its CLI flag (``None``: not on the CLI) and
    ``detail`` the rule and the value (``must be in 2..16, got 40``): the CLI reports
    the flag the user typed, a DAG or the library the setting's name."""

    def __init__(self, name: str, detail: str, flag: str | None = None) -> None:
        self.name, self.detail, self.flag = name, detail, flag
        super().__init__(f"{name} {detail}")


class UnknownNameError(ConfigError):
    """A registry lookup failed; the message lists the valid names, and the closest one
    first when the name looks like a misspelling of it (``suggestion``)."""

    def __init__(
        self, kind: str, name: object, valid: list[str], suggestion: str | None = None
    ) -> None:
        self.kind = kind
        self.name = name
        self.valid = sorted(valid)
        self.suggestion = suggestion
        hint = f" (did you mean {suggestion!r}?)" if suggestion is not None else ""
        super().__init__(f"unknown {kind} {name!r}{hint}; valid: {', '.join(self.valid)}")


class StateError(SkewlabError):
    """A snapshot does not fit the object it is restored into."""
