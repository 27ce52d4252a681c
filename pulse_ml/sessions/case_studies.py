"""Case studies (A/B tests): configured ones (``conf/catalog/case_studies/``) and found ones."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from pulse_ml.env.paths import catalog_dir
from pulse_ml.errors import PulseError
from pulse_ml.sessions.declarations import Guardrail, merge, parse
from pulse_ml.yaml_limits import load_yaml_text

if TYPE_CHECKING:  # pandas is not imported at run time: the CLI's early checks stay fast
    import numpy as np
    import pandas as pd

MIN_LABELED_PER_ARM = 2
RANDOMIZATION_UNITS = {"user": "every session of a user was assigned to one arm",
                       "session": "each session was assigned to an arm on its own"}


@dataclass(frozen=True)
class CaseStudy:
    """One A/B test: sessions with ``case_study == name`` split into two conditions.

    Attributes:
        name: Value of the ``case_study`` column.
        control: Condition of the control arm.
        treatment: Condition of the treatment arm (effect = treatment - control).
        description: One line for humans.
        configured: False when discovered in the data (control = alphabetically first).
        paper: Optional reference figures ``{naive: [effect, lo, hi], augmented: [...]}``.
        randomization_unit: What was randomized, ``"user"`` or ``"session"`` (key
            ``randomization_unit``); ``None`` = not declared (randomization inference then
            infers it from the data and says so).
        treatments: Every treatment condition (several variants against one control; the
            first is ``treatment``); empty = ``(treatment,)``.
        split: Planned share of sessions per condition (the SRM check); ``None`` = equal.
        rule: Decision rule of the rating effect, ``superiority`` or ``non_inferiority``.
        margin: Non-inferiority margin in stars (``rule == "non_inferiority"``).
        guardrails: Fully observed session metrics that must not get worse.
    """

    name: str
    control: str
    treatment: str
    description: str = ""
    configured: bool = True
    paper: Mapping[str, tuple[float, float, float]] | None = None
    randomization_unit: str | None = None
    treatments: tuple[str, ...] = ()
    split: Mapping[str, float] | None = None
    rule: str = "superiority"
    margin: float | None = None
    guardrails: tuple[Guardrail, ...] = ()

    @property
    def all_treatments(self) -> tuple[str, ...]:
        """Every treatment condition (``(treatment,)`` for a two-arm case study)."""
        return self.treatments or (self.treatment,)

    @property
    def arms(self) -> tuple[str, ...]:
        """The control followed by every treatment."""
        return (self.control, *self.all_treatments)

    def variants(self) -> list[CaseStudy]:
        """One two-arm case study per treatment (itself when there is one treatment)."""
        if len(self.all_treatments) == 1:
            return [self]
        return [replace(self, treatment=t, treatments=(t,)) for t in self.all_treatments]


def from_mapping(node: Mapping, default_name: str = "") -> CaseStudy:
    """Build a :class:`CaseStudy` from a config mapping."""
    name = str(node.get("name") or default_name)
    missing = [k for k in ("control", "treatment") if not node.get(k)]
    if not name or missing:
        raise PulseError(f"case study '{name or '?'}': missing {', '.join(missing) or 'name'}. "
                         "A case study needs name, control and treatment.")
    paper = node.get("paper")
    unit = node.get("randomization_unit")
    if unit is not None and str(unit) not in RANDOMIZATION_UNITS:
        options = "; ".join(f"'{k}' if {v}" for k, v in RANDOMIZATION_UNITS.items())
        raise PulseError(f"case study '{name}': randomization_unit={unit!r} is not a "
                         f"randomization unit. Set it in conf/catalog/case_studies/{name}.yaml "
                         f"(or your case_study_dirs file) to {options}.")
    declared = parse(name, node, str(node["control"]))
    return CaseStudy(
        name=name,
        control=str(node["control"]),
        treatment=declared.treatments[0],
        description=str(node.get("description", "")),
        configured=True,
        paper={k: tuple(float(x) for x in v) for k, v in paper.items()} if paper else None,
        randomization_unit=None if unit is None else str(unit),
        treatments=declared.treatments if len(declared.treatments) > 1 else (),
        split=declared.split, rule=declared.rule, margin=declared.margin,
        guardrails=declared.guardrails,
    )


def load_configured(extra_dirs: Iterable[str | Path] = (),
                    overrides: Mapping[str, Mapping] | None = None) -> dict[str, CaseStudy]:
    """Read every ``case_study/*.yaml`` under the config dir and any ``extra_dirs``.

    Files in ``extra_dirs`` (a user's own folder of case-study YAML files) override shipped ones
    with the same name; ``overrides`` (the command line's ``declare.<name>.<key>=...``) replace
    keys of a case study's file, or declare a new case study when it names all its keys.
    """
    nodes: dict[str, Mapping] = {}
    dirs = [catalog_dir("case_studies"), *(Path(d) for d in extra_dirs)]
    for folder in dirs:
        if not folder.is_dir():
            if folder != dirs[0]:
                raise PulseError(f"case-study folder {folder} does not exist.")
            continue
        for path in sorted(folder.glob("*.y*ml")):
            node = load_yaml_text(path, path.read_text()) or {}
            nodes[str(node.get("name") or path.stem)] = {"name": path.stem, **node}
    for name, override in (overrides or {}).items():
        if not isinstance(override, Mapping):
            raise PulseError(f"declare.{name}={override!r}: give keys, e.g. "
                             f"declare.{name}.decision.margin=0.1.")
        nodes[str(name)] = merge(nodes.get(str(name), {"name": str(name)}), override)
    studies: dict[str, CaseStudy] = {}
    for name, node in nodes.items():
        study = from_mapping(node, default_name=name)
        studies[study.name] = study
    return studies


def resolve_case_studies(
    configured: Mapping[str, CaseStudy],
    conditions_by_study: Mapping[str, list[str]],
) -> tuple[list[CaseStudy], list[str]]:
    """Combine configured case studies with the ones present in the data.

    Args:
        configured: Case studies from config, by name.
        conditions_by_study: For each non-empty ``case_study`` value in the data, its sorted
            distinct conditions.

    Returns:
        The case studies present in the data (configured ones first, then discovered ones with
        exactly two conditions, control = alphabetically first), and notes for the user about
        values that were skipped or guessed.
    """
    out: list[CaseStudy] = []
    notes: list[str] = []
    for name, conds in conditions_by_study.items():
        if name in configured:
            out.append(configured[name])
        elif len(conds) == 2:
            out.append(CaseStudy(name=name, control=conds[0], treatment=conds[1],
                                 description="found in the data", configured=False))
            notes.append(f"case study '{name}' is not configured: control = '{conds[0]}' "
                         f"(alphabetically first), treatment = '{conds[1]}'. Add "
                         f"conf/catalog/case_studies/{name}.yaml to choose.")
        else:
            notes.append(f"case study '{name}' has {len(conds)} conditions ({', '.join(conds)}); "
                         "only two-arm case studies are analysed. Configure it to pick two.")
    order = {n: i for i, n in enumerate(configured)}
    out.sort(key=lambda s: (order.get(s.name, len(order)), s.name))
    return out, notes


def absent_message(absent: list[str], present: Iterable[str],
                   configured: Mapping[str, CaseStudy], setting: str = "case_studies") -> str:
    """Selected case studies that are not in the data: the names, what is there, did-you-mean.

    Args:
        absent: The selected names the data lacks.
        present: The non-empty ``case_study`` values of the data.
        configured: Configured case studies (their names are suggested too).
        setting: The config key that selected them (``case_studies``, ``case_study``).
    """
    present = sorted(present)
    hints = []
    for name in absent:
        close = difflib.get_close_matches(name, present, n=1, cutoff=0.6)
        elsewhere = difflib.get_close_matches(name, list(configured), n=1, cutoff=0.6)
        if close:
            hints.append(f"'{name}': did you mean '{close[0]}'?")
        elif elsewhere:  # configured, but this table has no session of it
            hints.append(f"'{name}': did you mean '{elsewhere[0]}' (configured, but not in "
                         "this data)?")
    shown = ", ".join(present[:12]) + (" …" if len(present) > 12 else "")
    return (f"case study {', '.join(map(repr, absent))} not in the data (present: "
            f"{shown or 'none'}). {' '.join(hints) + ' ' if hints else ''}Fix the name in "
            f"`{setting}` or the data.")


def check_selected(frame: pd.DataFrame, path: str, only: Iterable[str] | None,
                   configured: Mapping[str, CaseStudy], setting: str = "case_studies") -> None:
    """Refuse selected case studies that the raw table's ``case_study`` column lacks.

    Jobs call it right after reading the table, before the model loads, so a misspelled
    ``case_studies=[memry]`` costs a read, not a model load and an analysis. A name is
    refused only when no row has it: configured or not (a found case study has no catalogue
    entry), it cannot be analysed. Values are compared as the table's validation types them
    (stripped strings); a table without the column is left to that validation.

    Raises:
        PulseError: naming the setting, the absent names, what the data has and the closest name.
    """
    if "case_study" not in frame:
        return
    conds = _conditions(frame)
    if only is not None:
        absent = [name for name in only if name not in conds]
        if absent:
            raise PulseError(f"{path}: {absent_message(absent, conds, configured, setting)}")
        conds = {k: v for k, v in conds.items() if k in set(only)}
    if "condition" not in frame:
        return
    studies = resolve_case_studies(configured, conds)[0]
    if not any({s.control, s.treatment} <= set(conds[s.name]) for s in studies):
        lacking = "".join(f"; case study '{s.name}' has condition(s) "
                          f"{', '.join(conds[s.name]) or 'none'}, not both '{s.control}' and "
                          f"'{s.treatment}'" for s in studies[:3])
        raise PulseError(f"{path}: no two-arm case study in column 'case_study'{lacking}. "
                         "Fill case_study/condition for the sessions of each A/B test.")


def _strip(values: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """``(codes, stripped distinct values)`` of a column as validation types it (vectorized)."""
    import pandas as pd

    codes, uniques = pd.factorize(values, use_na_sentinel=False)
    text = pd.Series(uniques, dtype=object).astype("string").fillna("").astype(str).str.strip()
    return codes, text.to_numpy()


def _conditions(frame: pd.DataFrame) -> dict[str, list[str]]:
    """Sorted distinct conditions per non-empty ``case_study`` of a raw table.

    Without a ``condition`` column the case studies have no conditions listed (the table's
    validation names the missing column).
    """
    import numpy as np

    study_codes, studies = _strip(frame["case_study"])
    if "condition" not in frame:
        return {name: [] for name in sorted(set(studies) - {""})}
    cond_codes, conditions = _strip(frame["condition"])
    pairs = np.unique(np.stack([study_codes, cond_codes], axis=1), axis=0)
    out: dict[str, set[str]] = {}
    for sc, cc in pairs:  # one pair per distinct (case study, condition): a few
        if studies[sc]:
            out.setdefault(studies[sc], set()).add(conditions[cc])
    return {name: sorted(c) for name, c in out.items()}


def check_case_studies(out: pd.DataFrame, configured: Mapping[str, CaseStudy],
                       only: Iterable[str] | None, problems: list[str]) -> tuple[list, list]:
    """Resolve the two-arm case studies of a typed table and check each arm has labels.

    Args:
        out: The typed frame (``case_study``, ``condition``, ``rating``).
        configured: Configured case studies by name.
        only: Restrict to these names; ``[]`` = no case study (e.g. for training).
        problems: Problems found are appended here (one message for the whole table).

    Returns:
        ``(studies, notes)``.
    """
    present = out.loc[out["case_study"] != "", ["case_study", "condition"]]
    conds = {name: sorted(g["condition"].unique()) for name, g in present.groupby("case_study")}
    wanted = list(only) if only is not None else None
    if wanted is not None:
        absent = [w for w in wanted if w not in conds]
        if absent:
            problems.append("column 'case_study': " + absent_message(absent, conds, configured))
        conds = {k: v for k, v in conds.items() if k in wanted}
    studies, notes = resolve_case_studies(configured, conds)
    labeled = out["rating"].notna()
    for study in studies:
        in_study = out["case_study"] == study.name
        for role, arm in (("control", study.control),
                          *(("treatment", t) for t in study.all_treatments)):
            rows = in_study & (out["condition"] == arm)
            n_lab = int((rows & labeled).sum())
            if not rows.any():
                problems.append(f"column 'condition': case study '{study.name}' has no session "
                                f"with its {role} condition '{arm}' (conditions present: "
                                f"{', '.join(conds.get(study.name, []))}). Fix the data or "
                                f"conf/catalog/case_studies/{study.name}.yaml.")
            elif n_lab < MIN_LABELED_PER_ARM:
                problems.append(f"column 'rating': case study '{study.name}', {role} arm "
                                f"'{arm}' has {n_lab} labeled session(s); at least "
                                f"{MIN_LABELED_PER_ARM} rated sessions per arm are needed "
                                "for an interval. Collect ratings or drop the case study.")
        extra = set(conds.get(study.name, [])) - set(study.arms)
        if study.configured and extra:
            notes.append(f"case study '{study.name}': sessions with condition(s) "
                         f"{', '.join(sorted(extra))} are ignored.")
    return studies, notes
