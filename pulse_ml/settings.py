"""Turn composed config nodes into typed objects shared by several jobs."""

from __future__ import annotations

from pathlib import Path

from pulse_ml.inference.case_studies import CaseStudy, load_configured
from pulse_ml.sessions.feature_sets import FeatureSet, feature_set_from_mapping
from pulse_ml.sessions.table import SessionTable, load_sessions


def feature_set(cfg) -> FeatureSet:
    """The feature set selected by ``features=<set>`` (or a YAML path)."""
    from omegaconf import OmegaConf

    node = OmegaConf.to_container(cfg.features, resolve=True)
    return feature_set_from_mapping(node)


def case_study_config(cfg) -> dict[str, CaseStudy]:
    """Configured case studies (shipped ones plus ``case_study_dirs``)."""
    extra = list(cfg.get("case_study_dirs") or [])
    return load_configured(extra)


def selected_case_studies(cfg) -> list[str] | None:
    """``case_studies`` from config: None = all present in the data."""
    value = cfg.get("case_studies")
    if value in (None, "all", "ALL"):
        return None
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    return [str(v) for v in value]


def load_table(cfg, path: str | Path | None = None) -> SessionTable:
    """Load and validate ``data.path`` with the configured feature set and case studies."""
    return load_sessions(path or cfg.data.path, feature_set(cfg), case_study_config(cfg),
                         selected_case_studies(cfg))
