"""What a case study declares beyond its arms: planned split, decision rule, guardrails.

A case-study YAML file (``conf/catalog/case_studies/<name>.yaml``) may declare::

    treatment: small-model            # or a list: several variants against one control
    split: {claude-4-sonnet: 0.5, small-model: 0.5}     # planned share of sessions (SRM check)
    decision: {rule: non_inferiority, margin: 0.1}     # superiority (default) | non_inferiority
    guardrails:
      cost_usd: {better: lower, margin: 0.05, relative: true}
      abandoned: {better: lower, margin: 0.02}

Everything is checked here, when the file is read, and a bad value is one message naming the
case study and the key. Whether a guardrail column exists and is numeric is checked against
the session table (:func:`pulse_ml.inference.decisions.check_guardrail_columns`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pulse_ml.errors import PulseError

RULES = {"superiority": "ship when the treatment is better (the interval is above 0)",
         "non_inferiority": "ship when the treatment is at most `margin` stars worse"}
BETTER = ("higher", "lower")
SPLIT_TOLERANCE = 1e-6


@dataclass(frozen=True)
class Guardrail:
    """A fully observed session metric that must not get worse by more than ``margin``.

    Attributes:
        column: Session-table column (numeric, or 0/1).
        better: ``"higher"`` or ``"lower"``: which direction is good.
        margin: Largest tolerated worsening (> 0), in the column's unit, or a share of the
            control mean when ``relative``.
        relative: The margin (and the interval) is a relative change of the control mean.
    """

    column: str
    better: str = "lower"
    margin: float = 0.05
    relative: bool = False


@dataclass(frozen=True)
class Declaration:
    """The parsed declarations of one case study (defaults: nothing declared)."""

    treatments: tuple[str, ...]
    split: Mapping[str, float] | None = None
    rule: str = "superiority"
    margin: float | None = None
    guardrails: tuple[Guardrail, ...] = ()


def _where(name: str) -> str:
    return f"case study '{name}'"


def _fix(name: str) -> str:
    return f"Fix it in conf/catalog/case_studies/{name}.yaml (or your case_study_dirs file)."


def _positive(name: str, key: str, value: object) -> float:
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        number = float("nan")
    if not number > 0 or number == float("inf"):
        raise PulseError(f"{_where(name)}: {key}={value!r} must be a number > 0. {_fix(name)}")
    return number


def treatments_of(name: str, value: object) -> tuple[str, ...]:
    """``treatment``: one condition or a list of conditions (several variants)."""
    items = list(value) if isinstance(value, Sequence) and not isinstance(value, str) else [value]
    out = tuple(str(v) for v in items if v is not None and str(v) != "")
    if not out:
        raise PulseError(f"{_where(name)}: treatment is empty. {_fix(name)}")
    if len(set(out)) < len(out):
        raise PulseError(f"{_where(name)}: treatment lists a condition twice ({', '.join(out)}). "
                         f"{_fix(name)}")
    return out


def parse_split(name: str, node: object, arms: Sequence[str]) -> dict[str, float] | None:
    """``split``: the planned share of sessions per condition (must name every arm, sum to 1)."""
    if node is None:
        return None
    if not isinstance(node, Mapping):
        raise PulseError(f"{_where(name)}: split must map each condition to its planned share, "
                         f"e.g. split: {{{', '.join(f'{a}: {1 / len(arms):.2g}' for a in arms)}}}."
                         f" {_fix(name)}")
    unknown = [str(k) for k in node if str(k) not in arms]
    if unknown:
        raise PulseError(f"{_where(name)}: split names {', '.join(map(repr, unknown))}, which is "
                         f"not one of its conditions ({', '.join(arms)}). {_fix(name)}")
    missing = [a for a in arms if a not in {str(k) for k in node}]
    if missing:
        raise PulseError(f"{_where(name)}: split lacks {', '.join(map(repr, missing))}; give "
                         f"every condition ({', '.join(arms)}) its share. {_fix(name)}")
    shares = {str(k): _positive(name, f"split.{k}", v) for k, v in node.items()}
    total = sum(shares.values())
    if abs(total - 1.0) > SPLIT_TOLERANCE:
        raise PulseError(f"{_where(name)}: split shares sum to {total:.6g}, not 1 "
                         f"({', '.join(f'{k}: {v:g}' for k, v in shares.items())}). "
                         f"{_fix(name)}")
    return shares


def parse_guardrails(name: str, node: object) -> tuple[Guardrail, ...]:
    """``guardrails``: column -> {better, margin, relative}."""
    if node is None:
        return ()
    if not isinstance(node, Mapping):
        raise PulseError(f"{_where(name)}: guardrails must map a column to {{better: lower|"
                         f"higher, margin: <number > 0>, relative: true|false}}. {_fix(name)}")
    out = []
    for column, spec in node.items():
        spec = spec or {}
        key = f"guardrails.{column}"
        if not isinstance(spec, Mapping):
            raise PulseError(f"{_where(name)}: {key} must be a mapping {{better, margin, "
                             f"relative}}, got {spec!r}. {_fix(name)}")
        unknown = set(map(str, spec)) - {"better", "margin", "relative"}
        if unknown:
            raise PulseError(f"{_where(name)}: {key} has unknown key(s) "
                             f"{', '.join(sorted(unknown))} (allowed: better, margin, relative). "
                             f"{_fix(name)}")
        better = str(spec.get("better", "lower"))
        if better not in BETTER:
            raise PulseError(f"{_where(name)}: {key}.better={better!r} must be 'lower' or "
                             f"'higher'. {_fix(name)}")
        if "margin" not in spec:
            raise PulseError(f"{_where(name)}: {key}.margin is missing: the largest tolerated "
                             f"worsening (> 0). {_fix(name)}")
        relative = spec.get("relative", False)
        if not isinstance(relative, bool):
            raise PulseError(f"{_where(name)}: {key}.relative={relative!r} must be true or false."
                             f" {_fix(name)}")
        out.append(Guardrail(str(column), better,
                             _positive(name, f"{key}.margin", spec["margin"]), relative))
    return tuple(out)


def parse_rule(name: str, node: object) -> tuple[str, float | None]:
    """``decision``: ``{rule, margin}``; non-inferiority needs a margin (stars) > 0."""
    if node is None:
        return "superiority", None
    if not isinstance(node, Mapping):
        raise PulseError(f"{_where(name)}: decision must be a mapping, e.g. decision: {{rule: "
                         f"non_inferiority, margin: 0.1}}. {_fix(name)}")
    rule = str(node.get("rule", "superiority"))
    if rule not in RULES:
        options = "; ".join(f"'{k}' to {v}" for k, v in RULES.items())
        raise PulseError(f"{_where(name)}: decision.rule={rule!r} is not a rule: use {options}. "
                         f"{_fix(name)}")
    margin = node.get("margin")
    if rule == "non_inferiority" and margin is None:
        raise PulseError(f"{_where(name)}: decision.rule=non_inferiority needs decision.margin, "
                         f"the largest tolerated loss in stars (> 0, e.g. 0.1). {_fix(name)}")
    return rule, None if margin is None else _positive(name, "decision.margin", margin)


def parse(name: str, node: Mapping, control: str) -> Declaration:
    """Every declaration of one case-study mapping, checked (one message per problem)."""
    treatments = treatments_of(name, node.get("treatment"))
    if control in treatments:
        raise PulseError(f"{_where(name)}: the control '{control}' is also listed as a treatment."
                         f" {_fix(name)}")
    rule, margin = parse_rule(name, node.get("decision"))
    return Declaration(treatments=treatments,
                       split=parse_split(name, node.get("split"), [control, *treatments]),
                       rule=rule, margin=margin,
                       guardrails=parse_guardrails(name, node.get("guardrails")))


def merge(base: Mapping, override: Mapping) -> dict:
    """``base`` with ``override``'s keys replaced (mappings merged key by key, recursively)."""
    out = dict(base)
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = merge(out[key], value)
        else:
            out[key] = value
    return out
