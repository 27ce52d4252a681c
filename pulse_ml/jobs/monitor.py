"""Anytime-valid monitoring: the first day each case study's A/B test is conclusive.

At each look (daily by default: day 1 is the day of a case study's first session; or
``looks=[1,7,14,21]`` / ``looks=[2025-06-08,...]``) the naive and the PPI++ effect of every case
study (or ``case_study=NAME``) with the fixed-horizon 95% Wald interval (what a daily dashboard
shows: acting on the first day it excludes 0 inflates false positives) and an anytime-valid
asymptotic confidence sequence (Waudby-Smith et al. 2024; for PPI++ Kilian, Cortinovis & Caron
2025), valid uniformly over looks: the test may stop the first day the sequence excludes 0. The
PPI++ lambda at a look uses only the data up to it; variances are cluster-robust by user as in
``infer``. Sessions need ``started_at`` (ISO 8601 or epoch seconds); a rating counts from the
session's start; sessions after the last look are left out.

Predictions are honest: out-of-fold for the model's training sessions, the fold models' mean
otherwise (train one on sessions before the test with ``pulse-ml train trained_before=DATE`` or
``exclude_case_studies=[...]``). ``ppi.predictions=in_sample`` is refused.

Writes monitor.json, monitor.csv (one row per case study x look x estimator) and monitor.png to
``output`` and logs them to MLflow experiment pulse-infer.

Examples:
    pulse-ml monitor
    pulse-ml monitor case_study=plan target_look=21
    pulse-ml monitor looks=[7,14,21] clusters=none model_uri=models:/pulse-satisfaction/3
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from pulse_ml import settings as shared
from pulse_ml.config import Node, choice, flag, names, number
from pulse_ml.errors import PulseError
from pulse_ml.inference.effects import CLUSTER_MODES
from pulse_ml.inference.honest import PREDICTION_MODES, honest_data
from pulse_ml.inference.monitor import (
    LAMBDA_RULES,
    Monitoring,
    MonitorSettings,
    monitor,
    parse_looks,
    printable,
    stop_lines,
)
from pulse_ml.report.html import run_identity
from pulse_ml.report.tables import say, text_table
from pulse_ml.sessions.case_studies import CaseStudy
from pulse_ml.sessions.readers import read_frame

IN_SAMPLE_REFUSED = (
    "pulse-ml monitor: ppi.predictions=in_sample is refused. In-sample predictions come from a "
    "model fitted on the very ratings being monitored, so the PPI++ rectifier is overfit and "
    "neither the intervals nor the confidence sequences are valid at any look. Use "
    "ppi.predictions=crossfit (out-of-fold predictions for the model's training sessions), or "
    "train a model on sessions before the test (`pulse-ml train trained_before=YYYY-MM-DD` or "
    "`exclude_case_studies=[...]`).")
FILES = ("monitor.json", "monitor.csv", "monitor.png")


@dataclass(frozen=True)
class MonitorJob:
    """Typed settings of ``pulse-ml monitor``."""

    model_uri: str
    data_path: str
    settings: MonitorSettings
    case_studies: dict[str, CaseStudy]
    only: list[str] | None
    output: Path
    log_mlflow: bool


def settings_from_config(cfg: Node) -> MonitorJob:
    """Read the composed config once (every number and choice checked here)."""
    v = "monitor"
    if choice(cfg, "ppi.predictions", v, PREDICTION_MODES) == "in_sample":
        raise PulseError(IN_SAMPLE_REFUSED)
    target_labels = number(cfg, "target_labels", v, 0, None, open_interval=True,
                           optional=True)
    settings = MonitorSettings(
        alpha=number(cfg, "alpha", v, 0, 1, open_interval=True),
        clusters=choice(cfg, "clusters", v, CLUSTER_MODES) == "user_id",
        looks=parse_looks(cfg.get("looks")),
        target_look=number(cfg, "target_look", v, 1, None, integer=True, optional=True),
        target_labels=target_labels,
        lambda_rule=choice(cfg, "lambda_rule", v, LAMBDA_RULES),
        min_units_per_arm=number(cfg, "min_units_per_arm", v, 2, None, integer=True),
        check_id_order=flag(cfg, "check_id_order", v, True))
    return MonitorJob(
        model_uri=str(cfg.model_uri), data_path=str(cfg.data.path), settings=settings,
        case_studies=shared.case_study_config(cfg), only=names(cfg.get("case_study")),
        output=Path(str(cfg.output)), log_mlflow=flag(cfg, "log_mlflow", v))


def _records(frame: pd.DataFrame) -> list[dict]:
    """Rows as JSON-ready dicts (NaN/NA -> null)."""
    plain = frame.astype(object)
    return plain.where(frame.notna(), None).to_dict(orient="records")


def _atomic(path: Path, write: Callable[[Path], None]) -> Path:
    """Write to a temporary name beside ``path``; the caller moves it in place."""
    tmp = path.with_name(f".{path.stem}.tmp-{os.getpid()}{path.suffix}")
    write(tmp)
    return tmp


def write_outputs(job: MonitorJob, result: Monitoring, meta: dict) -> list[Path]:
    """monitor.json, monitor.csv and monitor.png, each written atomically (temp + rename)."""
    from pulse_ml.report.plots import monitor_plot

    out = job.output
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise PulseError(f"pulse-ml monitor: output={out}: cannot create the directory "
                         f"({exc}). Pass a writable folder.") from None
    paths = [out / name for name in FILES]
    doc = {**meta, "stops": _records(result.stops), "rows": _records(result.frame)}
    title = (f"Monitoring {Path(job.data_path).name} with {meta['model']} (version "
             f"{meta['model_version']}, {meta['model_family']}); alpha {job.settings.alpha}")
    temps = [
        _atomic(paths[0], lambda p: p.write_text(json.dumps(doc, indent=2, default=str) + "\n",
                                                 encoding="utf-8")),
        _atomic(paths[1], lambda p: result.frame.to_csv(p, index=False)),
        _atomic(paths[2], lambda p: monitor_plot(result.frame, result.stops, p, title)),
    ]
    for tmp, path in zip(temps, paths, strict=True):
        os.replace(tmp, path)
    return paths


def log_run(job: MonitorJob, result: Monitoring, files: list[Path], version, meta) -> str:
    """Log the monitoring to experiment pulse-infer; returns the run id."""
    from pulse_ml.registry import runs

    metrics: dict[str, float] = {}
    for name, t_star in result.target_labels.items():
        metrics[f"{name}.target_labels"] = t_star
    for row in result.stops[result.stops["band"] == "sequence"].itertuples(index=False):
        key = f"{row.case_study}.{row.estimator}"
        metrics[f"{key}.conclusive"] = float(row.conclusive)
        if row.conclusive:
            metrics[f"{key}.stop_day"] = float(row.day)
            metrics[f"{key}.stop_labels"] = float(row.n_labeled)
    last = result.frame.groupby(["case_study", "estimator"], sort=False).tail(1)
    for row in last.itertuples(index=False):
        key = f"{row.case_study}.{row.estimator}"
        for col in ("effect", "ci_lower", "ci_upper", "cs_lower", "cs_upper"):
            value = getattr(row, col)
            if np.isfinite(value):
                metrics[f"{key}.last_{col}"] = float(value)
    s = job.settings
    return runs.log_inference_run(
        "monitor",
        tags={"kind": "monitor", "mode": "crossfit", "model_uri": job.model_uri,
              "model_version": "" if version is None else str(version.version),
              "model_family": meta["model_family"]},
        params={"data_path": job.data_path, "alpha": s.alpha,
                "clusters": "user_id" if s.clusters else "none", "looks": s.looks.describe(),
                "target_look": s.target_look, "target_labels": s.target_labels,
                "lambda_rule": s.lambda_rule, "min_units_per_arm": s.min_units_per_arm,
                "case_studies": ",".join(result.target_labels),
                "n_labeled_oof": meta["n_labeled_with_oof"]},
        metrics=metrics, files=files)


def run(cfg: Node) -> Monitoring:
    """Entry point of ``pulse-ml monitor``."""
    return run_settings(settings_from_config(cfg))


def run_settings(job: MonitorJob) -> Monitoring:
    """Monitor with typed settings: every check runs before anything is written or logged."""
    from pulse_ml.registry import models

    models.require_model(job.model_uri)  # "no model" is said before any data is read
    raw = read_frame(job.data_path)  # bad files fail before the model loads
    ensemble, version = models.load_model(job.model_uri)
    data = honest_data(raw, job.data_path, ensemble, job.case_studies, job.only, "crossfit")
    table = data.table
    result = monitor(table, data.predictions, job.settings)
    meta = {"model": job.model_uri,
            "model_version": None if version is None else str(version.version),
            "model_family": ensemble.family, "feature_set": ensemble.features.name,
            "mode": "crossfit", "data": job.data_path, "alpha": job.settings.alpha,
            "clusters": "user_id" if job.settings.clusters else "none",
            "looks": job.settings.looks.describe(), "target_look": job.settings.target_look,
            "target_labels": result.target_labels, "lambda_rule": job.settings.lambda_rule,
            "min_units_per_arm": job.settings.min_units_per_arm,
            "n_labeled_with_oof": data.n_with_oof,
            "first_day": {s.name: str(d.date()) for s, d in
                          zip(result.data.studies, result.data.first_day, strict=True)},
            "notes": [*table.notes, *data.notes, *result.notes], **run_identity(version, raw)}
    files = write_outputs(job, result, meta)
    run_id = log_run(job, result, files, version, meta) if job.log_mlflow else None
    say(f"model {job.model_uri} (version {meta['model_version']}, {ensemble.family}, features "
          f"'{ensemble.features.name}'); honest predictions ({data.n_with_oof} labeled sessions "
          f"got their out-of-fold prediction); alpha {job.settings.alpha}, clusters "
          f"{meta['clusters']}, looks {meta['looks']}")
    for study, first in zip(result.data.studies, result.data.first_day, strict=True):
        say(f"\n== {study.name}: {study.treatment} - {study.control}; day 1 = {first.date()}; "
              f"sequence tightest at {result.target_labels[study.name]:.0f} labels")
        say(text_table(printable(result.frame, study.name)))
        for line in stop_lines(result.stops, result.frame, study.name):
            say(line)
    for note in meta["notes"]:
        say(f"note: {note}")
    level = f"{100 * (1 - job.settings.alpha):g}%"
    say(f"\nCI = fixed {level} interval (valid at one pre-planned look); CS = {level} "
          "confidence sequence (valid at every look at once)")
    say(f"written to {job.output}: " + ", ".join(f.name for f in files)
          + (f"\nMLflow run {run_id} in experiment pulse-infer" if run_id else ""))
    return result
