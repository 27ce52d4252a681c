"""Typed objects several verbs read from their config: the feature set and the case studies.

Each verb's own settings dataclass is built in its job module; this module holds the pieces they
share, so the feature-set and case-study keys are read the same way everywhere.
"""

from __future__ import annotations

from pulse_ml.config import Node, names
from pulse_ml.sessions.case_studies import CaseStudy, load_configured
from pulse_ml.sessions.feature_sets import FeatureSet, feature_set_from_mapping


def feature_set(cfg: Node) -> FeatureSet:
    """The feature set selected by ``features=<set>`` (or a YAML path)."""
    return feature_set_from_mapping(cfg.features.to_dict())


def case_study_config(cfg: Node) -> dict[str, CaseStudy]:
    """Configured case studies (shipped ones plus ``case_study_dirs``)."""
    extra = list(cfg.get("case_study_dirs") or [])
    return load_configured(extra)


def selected_case_studies(cfg: Node) -> list[str] | None:
    """``case_studies`` from config: None = all present in the data."""
    return names(cfg.get("case_studies"))


def load_table(cfg: Node, path: str | None = None):
    """Load and validate ``data.path`` with the configured feature set and case studies."""
    from pulse_ml.sessions.table import load_sessions

    return load_sessions(path or cfg.data.path, feature_set(cfg), case_study_config(cfg),
                         selected_case_studies(cfg))
