"""Case studies (A/B tests): configured ones (``conf/catalog/case_studies/``) and found ones."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import yaml

from pulse_ml.errors import PulseError
from pulse_ml.paths import catalog_dir


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
    """

    name: str
    control: str
    treatment: str
    description: str = ""
    configured: bool = True
    paper: Mapping[str, tuple[float, float, float]] | None = None


def from_mapping(node: Mapping, default_name: str = "") -> CaseStudy:
    """Build a :class:`CaseStudy` from a config mapping."""
    name = str(node.get("name") or default_name)
    missing = [k for k in ("control", "treatment") if not node.get(k)]
    if not name or missing:
        raise PulseError(f"case study '{name or '?'}': missing {', '.join(missing) or 'name'}. "
                         "A case study needs name, control and treatment.")
    paper = node.get("paper")
    return CaseStudy(
        name=name,
        control=str(node["control"]),
        treatment=str(node["treatment"]),
        description=str(node.get("description", "")),
        configured=True,
        paper={k: tuple(float(x) for x in v) for k, v in paper.items()} if paper else None,
    )


def load_configured(extra_dirs: Iterable[str | Path] = ()) -> dict[str, CaseStudy]:
    """Read every ``case_study/*.yaml`` under the config dir and any ``extra_dirs``.

    Files in ``extra_dirs`` (a user's own folder of case-study YAML files) override shipped ones
    with the same name.
    """
    studies: dict[str, CaseStudy] = {}
    dirs = [catalog_dir("case_studies"), *(Path(d) for d in extra_dirs)]
    for folder in dirs:
        if not folder.is_dir():
            if folder != dirs[0]:
                raise PulseError(f"case-study folder {folder} does not exist.")
            continue
        for path in sorted(folder.glob("*.y*ml")):
            node = yaml.safe_load(path.read_text()) or {}
            study = from_mapping(node, default_name=path.stem)
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
