"""The one error hierarchy of skewlab.

Every error the library raises on purpose derives from :class:`SkewlabError`, so
callers (the CLI, DAGs, jobs) can turn it into one line for the user.
"""

from __future__ import annotations


class SkewlabError(Exception):
    """Base class of every deliberate skewlab error."""


class ConfigError(SkewlabError, ValueError):
    """A parameter is out of range or malformed; the message says what is allowed."""


class UnknownNameError(ConfigError):
    """A registry lookup failed; the message lists the valid names."""

    def __init__(self, kind: str, name: object, valid: list[str]) -> None:
        self.kind = kind
        self.name = name
        self.valid = sorted(valid)
        super().__init__(f"unknown {kind} {name!r}; valid: {', '.join(self.valid)}")


class StateError(SkewlabError):
    """A snapshot does not fit the object it is restored into."""
