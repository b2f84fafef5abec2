"""Regular expressions of the spec strings a trigger form takes, derived from the registries.

:func:`workload_pattern` is built from :data:`skewlab.workload.spec.WORKLOADS`:
each workload's name with its own ``name=value`` parameters (names from the
workload's ``PARAMS``), the positional ``R<percent>`` of the country workloads,
``trace:<file>``, and DKG's dataset names (``COUNTRY_SKEW_R80``). A spec the
pattern refuses is one :func:`~skewlab.workload.spec.parse_workload` refuses
too (an unknown name, an unknown parameter); the converse does not hold (a
value of the wrong type or out of bounds, a missing trace file), which is why
``validate_params`` parses again. Names and parameters are matched as the docs
write them (lower case), not in every spelling the parser forgives.
"""

from __future__ import annotations

from skewlab.workload.spec import WORKLOADS

__all__ = [
    "AUTOSCALE_WORKLOAD_PATTERN",
    "AUTOSCALE_WORKLOAD_WORDS",
    "WORKLOAD_WORDS",
    "workload_pattern",
]

_POSITIONAL = {"country": "[Rr][0-9]+", "country-half": "[Rr][0-9]+"}
_DKG_NAMES = "(COUNTRY_SKEW_R|COUNTRY_HALF_SKEW_R)[0-9]+"


def _args(names: list[str], positional: str | None) -> str:
    """``(:(ARG|,)*)?`` with ARG a ``name=value`` pair of ``names`` (or ``positional``);
    empty args are fine, as for the parser (``zipf:`` is ``zipf``).

    Short on purpose: Airflow prints the pattern in its refusal.
    """
    arg = "(" + "|".join(names) + ")=[^,=]+"
    if positional is not None:
        arg = f"{arg}|{positional}"
    return f"(:({arg}|,)*)?"


def workload_pattern() -> str:
    """The JSON-schema ``pattern`` of a workload spec (anchored), from the registry."""
    alternatives = []
    for name, cls in WORKLOADS.items():
        if name == "trace":
            alternatives.append(f"{name}:.+")
            continue
        alternatives.append(name + _args(list(cls.PARAMS), _POSITIONAL.get(name)))
    alternatives.append(_DKG_NAMES + "(:.+)?")
    return "^(" + "|".join(alternatives) + ")$"


WORKLOAD_WORDS = (
    f"NAME[:ARGS] with NAME one of {', '.join(WORKLOADS)} and ARGS its name=value "
    "parameters (country, country-half: also R<percent>; trace: the file), e.g. "
    "zipf:s=1.1,v=2.72 or country:R80"
)
"""What :func:`workload_pattern` allows, in words (the form shows it under the field)."""

AUTOSCALE_WORKLOAD_PATTERN = r"^(stream|step|const)(:[a-z]+=[^,=]+(,[a-z]+=[^,=]+)*)?$"
"""``skewlab.live.autoscale.protocol.speed_plan``'s specs: a name and ``key=value`` pairs."""
AUTOSCALE_WORKLOAD_WORDS = (
    "stream:delta=D[,start=..,seed=..], step:lo=..,hi=..,up=..,down=.. or const:level=.."
)
