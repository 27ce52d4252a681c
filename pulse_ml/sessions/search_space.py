"""The ``search_space`` syntax: Optuna ranges of ``conf/model`` and of a feature set's text columns.

A model family (``conf/model/<name>.yaml``) and a ``text`` column of a feature set both declare
``search_space: {setting: {type, low, high, log, step, choices}}``; both are read here, so a
feature set is checked when it is built, without importing any model code.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pulse_ml.errors import PulseError


@dataclass(frozen=True)
class ParamSpec:
    """One tunable hyper-parameter of the estimator (``search_space`` entry)."""

    name: str
    type: str  # float | int | categorical
    low: float | None = None
    high: float | None = None
    log: bool = False
    step: float | None = None
    choices: tuple[Any, ...] = ()


def parse_search_space(owner: str, node: Mapping[str, Any]) -> tuple[ParamSpec, ...]:
    """Parse ``{name: {type, low, high, log, step, choices}}`` into :class:`ParamSpec` s.

    Args:
        owner: Who declares the space (``model 'hist_gb'``), for messages.
        node: The ``search_space`` mapping.

    Raises:
        PulseError: if an entry has an unknown type or misses its range or choices.
    """
    params = []
    for pname, p in node.items():
        ptype = str(p.get("type", "float"))
        if ptype not in ("float", "int", "categorical"):
            raise PulseError(
                f"{owner}, search_space.{pname}: type '{ptype}' unknown; "
                "use float, int or categorical."
            )
        if ptype == "categorical" and not p.get("choices"):
            raise PulseError(f"{owner}, search_space.{pname}: categorical needs choices.")
        if ptype != "categorical" and (p.get("low") is None or p.get("high") is None):
            raise PulseError(f"{owner}, search_space.{pname}: needs low and high.")
        params.append(
            ParamSpec(
                name=str(pname),
                type=ptype,
                low=p.get("low"),
                high=p.get("high"),
                log=bool(p.get("log", False)),
                step=p.get("step"),
                choices=tuple(p.get("choices") or ()),
            )
        )
    return tuple(params)
