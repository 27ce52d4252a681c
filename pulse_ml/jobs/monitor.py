"""Anytime-valid monitoring: the first day each case study's A/B test is conclusive.

At each look (daily by default: day 1 is the day of a case study's first session; or
``looks=[1,7,14,21]`` / ``looks=[2025-06-08,...]``) the naive and the PPI++ effect of every case
study (or ``case_study=NAME``) with the fixed 95% interval (``infer``'s interval on the data so
far; what a daily dashboard shows: acting on the first day it excludes 0 inflates false
positives) and an anytime-valid asymptotic confidence sequence (Waudby-Smith et al. 2024; for
PPI++ Kilian, Cortinovis & Caron 2025), valid uniformly over looks: the test may stop the first
day the sequence excludes 0. The PPI++ lambda at a look uses only the data up to it; variances
are cluster-robust by user as in ``infer``. The sequence is tightest at the labels expected by
``horizon_days`` (21; from the label rate up to the burn-in look, so re-runs never redraw
earlier days) or at ``target_labels``. A case study asked to rate by varying ``request_prob``
(``pulse-ml request``) is monitored by active PPI++ (naive = inverse-probability weighted):
every rated session weighs 1/(request_prob x response rate), the response rate of a look's
sessions estimated from earlier looks only, so no weight changes after it is seen
(pulse_ml/inference/monitor_active.py; ``seed`` splits the first look's cross-fitting folds).
Intervals start once each arm has ``min_units_per_arm`` labeled users. The sequence's
boundary is on the t scale of each look (df from the effective number of labeled users), and
fewer than 40 effective (Kish) labeled users per arm by the last look (below the checked
validity) gives a warning, as does a PPI++ effect shifted by labels that drift in time (a
labeling rate that changes while the predictions move). Sessions need
``started_at`` (ISO 8601 or epoch seconds); a rating counts from the session's start; sessions
after the last look are left out.

Predictions are honest: out-of-fold for the model's training sessions, the fold models' mean
otherwise (train one on sessions before the test with ``pulse-ml train trained_before=DATE`` or
``exclude_case_studies=[...]``). ``ppi.predictions=in_sample`` is refused.

At every look the decision of ``infer``'s rule (ship / do_not_ship / keep_collecting / invalid),
with a confidence sequence per declared guardrail (ship needs all of them non-inferior). A case
study with several treatments is refused (the sequences are not Holm-adjusted over variants).

Writes monitor.json, monitor.csv (one row per case study x look x estimator) and monitor.png to
``output`` and logs them to MLflow experiment pulse-infer.

Examples:
    pulse-ml monitor
    pulse-ml monitor case_study=plan horizon_days=28
    pulse-ml monitor looks=[7,14,21] clusters=none model_uri=models:/pulse-satisfaction/3
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from pulse_ml import keys
from pulse_ml import settings as shared
from pulse_ml.config import Node, choice, flag, names
from pulse_ml.errors import PulseError
from pulse_ml.inference.effects import CLUSTER_MODES
from pulse_ml.inference.honest import PREDICTION_MODES, honest_data
from pulse_ml.inference.monitor import LAMBDA_RULES, Monitoring, MonitorSettings, monitor
from pulse_ml.inference.monitor_looks import parse_looks
from pulse_ml.inference.monitor_text import printable, stop_lines
from pulse_ml.names import write_csv
from pulse_ml.report.html import run_identity
from pulse_ml.report.tables import say, text_table
from pulse_ml.sessions.case_studies import CaseStudy, check_selected
from pulse_ml.sessions.readers import FREE_TEXT, read_frame, with_free_text

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
    run: shared.RunLabels = shared.RunLabels()  # experiment, run_name, tags


def settings_from_config(cfg: Node) -> MonitorJob:
    """Read the composed config once (every number and choice checked here)."""
    v = "monitor"
    if choice(cfg, "ppi.predictions", v, PREDICTION_MODES) == "in_sample":
        raise PulseError(IN_SAMPLE_REFUSED)
    target_labels = shared.bounded(cfg, v, "target_labels")
    settings = MonitorSettings(
        alpha=shared.bounded(cfg, v, "alpha"),
        clusters=choice(cfg, "clusters", v, CLUSTER_MODES) == "user_id",
        looks=parse_looks(cfg.get("looks")),
        horizon_days=shared.bounded(cfg, v, "horizon_days"),
        target_labels=target_labels,
        lambda_rule=choice(cfg, "lambda_rule", v, LAMBDA_RULES),
        min_units_per_arm=shared.bounded(cfg, v, "min_units_per_arm"),
        check_id_order=flag(cfg, "check_id_order", v, True),
        seed=shared.bounded(cfg, v, "seed"))
    return MonitorJob(
        model_uri=str(cfg.model_uri), data_path=str(cfg.data.path), settings=settings,
        case_studies=shared.case_study_config(cfg),
        only=names(cfg.get(shared.CASE_STUDY_KEYS[v])),
        output=Path(str(cfg.output)), log_mlflow=flag(cfg, "log_mlflow", v),
        run=shared.run_labels(cfg, v))


def _records(frame: pd.DataFrame) -> list[dict]:
    """Rows as JSON-ready dicts (NaN/NA -> null)."""
    plain = frame.astype(object)
    return plain.where(frame.notna(), None).to_dict(orient="records")


def write_outputs(job: MonitorJob, result: Monitoring, meta: dict) -> list[Path]:
    """monitor.json, monitor.csv and monitor.png: all three or none (staged, then renamed).

    A failure (full disk, Ctrl-C) leaves no temporary file and the earlier three unchanged.
    """
    from pulse_ml.env.atomic import staged_outputs
    from pulse_ml.report.plots import monitor_plot

    out = job.output
    paths = [out / name for name in FILES]
    doc = {**meta, "stops": _records(result.stops), "rows": _records(result.frame)}
    title = (f"Monitoring {Path(job.data_path).name} with {meta['model']} (version "
             f"{meta[keys.MODEL_VERSION]}, {meta[keys.MODEL_FAMILY]}); alpha {job.settings.alpha}")
    with staged_outputs(out) as stage:
        (stage / FILES[0]).write_text(json.dumps(doc, indent=2, default=str) + "\n",
                                      encoding="utf-8")
        write_csv(result.frame, stage / FILES[1])
        monitor_plot(result.frame, result.stops, stage / FILES[2], title)
    return paths


def log_run(job: MonitorJob, result: Monitoring, files: list[Path], version, meta,
            raw: pd.DataFrame | None = None) -> str:
    """Log the monitoring to experiment pulse-infer; returns the run id.

    As ``infer``: the run is tagged with and linked to the model version it used (its logged
    model is a run input), has the session table as a dataset input and a description.
    """
    from pulse_ml.registry import runs
    from pulse_ml.registry.analysis import dataset_input

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
        tags={keys.KIND: keys.KIND_MONITOR, keys.MODE: "crossfit",
              keys.VALID_INTERVALS: "true",  # in-sample predictions are refused (above)
              keys.MODEL_URI: job.model_uri,
              keys.MODEL_VERSION: "" if version is None else str(version.version),
              keys.MODEL_FAMILY: meta[keys.MODEL_FAMILY]},
        params={"data_path": job.data_path, "alpha": s.alpha,
                "clusters": "user_id" if s.clusters else "none", "looks": s.looks.describe(),
                "horizon_days": s.horizon_days, "target_labels": s.target_labels,
                "lambda_rule": s.lambda_rule, "min_units_per_arm": s.min_units_per_arm,
                "seed": s.seed,
                "case_studies": ",".join(result.target_labels),
                "n_labeled_oof": meta["n_labeled_with_oof"]},
        metrics=metrics, files=files, model_version=version,
        dataset=None if raw is None else dataset_input(raw, job.data_path),
        description=_description(result, meta, job), labels=job.run)


def _description(result: Monitoring, meta: dict, job: MonitorJob) -> str:
    """The run's description: what was monitored and the first conclusive day of each test."""
    lines = [f"Anytime-valid monitoring (naive vs PPI++ confidence sequences, alpha "
             f"{job.settings.alpha}) of {len(result.targets)} case stud"
             f"{'y' if len(result.targets) == 1 else 'ies'} with model `{job.model_uri}` "
             f"(version {meta[keys.MODEL_VERSION]}, {meta[keys.MODEL_FAMILY]}) on "
             f"`{Path(job.data_path).name}`, looks {meta['looks']}."]
    for name, target in result.targets.items():
        lines.append(f"- {name}: " + "; ".join(stop_lines(result.stops, result.frame, name))
                     + f". {target}.")
    return "\n".join(lines)


def check_monitorable(table) -> None:
    """Refuse case studies with several treatments, and bad guardrail columns (exit 2).

    The monitor's sequences compare two arms; with several variants the decision needs Holm
    over the treatments at every look, which the monitor does not do yet.
    """
    from pulse_ml.inference.decisions import check_guardrail_columns

    several = [s for s in table.case_studies if len(s.all_treatments) > 1]
    if several:
        s = several[0]
        raise PulseError(
            f"{table.path}: case study '{s.name}' declares {len(s.all_treatments)} treatments "
            f"({', '.join(s.all_treatments)}); pulse-ml monitor compares one treatment with "
            "the control (its sequences are not Holm-adjusted over several variants). Use "
            "`pulse-ml infer` (Holm over the treatments), or monitor one variant with "
            f"declare.{s.name}.treatment=VARIANT (its error level is then per variant, not "
            f"over the family), or leave it out with case_study=NAME.")
    check_guardrail_columns(table, table.case_studies)


def run(cfg: Node) -> Monitoring:
    """Entry point of ``pulse-ml monitor``."""
    return run_settings(settings_from_config(cfg))


def run_settings(job: MonitorJob) -> Monitoring:
    """Monitor with typed settings: every check runs before anything is written or logged."""
    from pulse_ml.env.locations import check_outputs
    from pulse_ml.inference.monitor_decisions import decision_line, look_decisions
    from pulse_ml.registry.analysis import open_model, run_line
    from pulse_ml.registry.lookup import require_model
    from pulse_ml.registry.store import store_locations

    check_outputs("monitor", [("output", job.output, "folder")], [("data.path", job.data_path)],
                  store_locations())
    require_model(job.model_uri)  # "no model" is said before any data is read
    # bad files fail before the model loads; free text is read once the model says
    raw = read_frame(job.data_path, skip=FREE_TEXT)
    check_selected(raw, job.data_path, job.only, job.case_studies, "case_study")  # and names
    # a read-only store fails before the model loads, not after the work
    model = open_model(job.model_uri, write_store=job.log_mlflow)
    ensemble, version = model.ensemble, model.version
    raw = with_free_text(raw, job.data_path, ensemble.features.of_kind("text"))
    data = honest_data(raw, job.data_path, ensemble, job.case_studies, job.only, "crossfit",
                       case_study_rows=True)  # the sequences read the case studies' rows only
    table = data.table
    check_monitorable(table)
    result = monitor(table, data.predictions, job.settings)
    decisions = look_decisions(result, table.frame, job.settings.alpha)
    meta = {**model.meta(), "mode": "crossfit", "data": job.data_path, "alpha": job.settings.alpha,
            "clusters": "user_id" if job.settings.clusters else "none",
            "looks": job.settings.looks.describe(), "horizon_days": job.settings.horizon_days,
            "target_labels": result.target_labels, "targets": result.targets,
            "lambda_rule": job.settings.lambda_rule,
            "min_units_per_arm": job.settings.min_units_per_arm,
            "n_labeled_with_oof": data.n_with_oof,
            "first_day": {s.name: str(d.date()) for s, d in
                          zip(result.data.studies, result.data.first_day, strict=True)},
            "notes": [*table.notes, *data.notes, *result.notes],
            "warnings": list(result.warnings),
            **run_identity(version, raw, ensemble.features.names),
            "decisions": decisions.to_dict(orient="records")}
    files = write_outputs(job, result, meta)
    run_id = log_run(job, result, files, version, meta, raw) if job.log_mlflow else None
    say(f"{model.describe()}; honest predictions ({data.n_with_oof} labeled sessions "
          f"got their out-of-fold prediction); alpha {job.settings.alpha}, clusters "
          f"{meta['clusters']}, looks {meta['looks']}")
    for study, first in zip(result.data.studies, result.data.first_day, strict=True):
        say(f"\n== {study.name}: {study.treatment} - {study.control}; day 1 = {first.date()}")
        say(result.targets[study.name])
        say(text_table(printable(result.frame, study.name)))
        for line in stop_lines(result.stops, result.frame, study.name):
            say(line)
        say(decision_line(decisions, study.name))
    for note in meta["notes"]:
        say(f"note: {note}")
    for warning in result.warnings:
        say(f"warning: {warning}")
    level = f"{100 * (1 - job.settings.alpha):g}%"
    say(f"\nCI = fixed {level} interval (valid at one pre-planned look); CS = {level} "
          "confidence sequence (valid at every look at once)")
    say(f"written to {job.output}: " + ", ".join(f.name for f in files))
    if run_id:
        say(run_line(run_id))
    return result
