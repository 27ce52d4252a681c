"""Check that the intervals hold on your own data: hide labels many times and measure coverage.

For ``case_study=NAME``: R times (``replications``, seeded) hides the labels of ``hide_share`` of
the case study's labeled sessions, recomputes the naive and PPI++ intervals on the rest with the
honest (cross-fitted) predictions, and reports how often each interval covers the reference
(the all-labels naive estimate, or with ``reference=truth`` the true effect of simulated data) and
the mean width ratio augmented/naive. Writes audit_<name>.csv/json to ``output``.

Example:
    pulse-ml audit case_study=plan replications=500
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from pulse_ml import settings as shared
from pulse_ml.config import Node, choice, flag, number, require
from pulse_ml.errors import PulseError
from pulse_ml.inference.effects import CLUSTER_MODES, InferenceSettings
from pulse_ml.inference.honest import PREDICTION_MODES, honest_data
from pulse_ml.sessions.case_studies import CaseStudy
from pulse_ml.sessions.readers import load_ground_truth, read_frame

REFERENCES = {"all_labels": "the estimate with every label",
              "truth": "ground_truth.json of simulated data"}


@dataclass(frozen=True)
class AuditSettings:
    """Typed settings of ``pulse-ml audit``."""

    case_study: str
    model_uri: str
    data_path: str
    mode: str
    reference: str
    hide_share: float
    replications: int
    seed: int
    settings: InferenceSettings
    case_studies: dict[str, CaseStudy]
    output: Path
    progress: bool
    log_mlflow: bool = True


def settings_from_config(cfg: Node) -> AuditSettings:
    """Read the composed config once (every number and choice checked here)."""
    if cfg.get("case_study") in (None, "", "???"):
        raise PulseError("pulse-ml audit: name the case study to audit, e.g. "
                         "`pulse-ml audit case_study=plan`.")
    seed = number(cfg, "seed", "audit", integer=True)
    return AuditSettings(
        case_study=str(cfg.case_study), model_uri=str(require(cfg, "model_uri", "audit")),
        data_path=str(cfg.data.path),
        mode=choice(cfg, "ppi.predictions", "audit", PREDICTION_MODES),
        reference=choice(cfg, "reference", "audit", REFERENCES),
        hide_share=number(cfg, "hide_share", "audit", 0, 1, open_interval=True),
        replications=number(cfg, "replications", "audit", 1, None, integer=True), seed=seed,
        settings=InferenceSettings(
            alpha=number(cfg, "alpha", "audit", 0, 1, open_interval=True),
            clusters=choice(cfg, "clusters", "audit", CLUSTER_MODES) == "user_id", seed=seed),
        case_studies=shared.case_study_config(cfg), output=Path(str(cfg.output)),
        progress=flag(cfg, "progress", "audit", True),
        log_mlflow=flag(cfg, "log_mlflow", "audit", True))


def run(cfg: Node):
    """Entry point of ``pulse-ml audit``."""
    from pulse_ml.inference.audit import audit
    from pulse_ml.registry import models

    job = settings_from_config(cfg)
    name, mode, settings = job.case_study, job.mode, job.settings
    raw = read_frame(job.data_path)
    ensemble, version = models.load_model(job.model_uri)
    data = honest_data(raw, job.data_path, ensemble, job.case_studies, [name], mode)
    table, preds, notes = data.table, data.predictions, data.notes
    reference = None
    if job.reference == "truth":
        truth = load_ground_truth(job.data_path)
        if name not in truth:
            raise PulseError(f"reference=truth: no ground_truth.json with case study '{name}' "
                             f"next to {job.data_path}. Use reference=all_labels.")
        reference = truth[name]
    res = audit(table, preds, table.case_study(name), settings, job.replications,
                job.hide_share, job.seed, reference, job.progress)
    out = job.output
    out.mkdir(parents=True, exist_ok=True)
    res.per_replication.to_csv(out / f"audit_{name}.csv", index=False)
    summary = {k: v for k, v in asdict(res).items() if k != "per_replication"}
    (out / f"audit_{name}.json").write_text(json.dumps({**summary, "mode": mode}, indent=2))
    nominal = 1 - settings.alpha
    for note in notes:
        print(f"note: {note}")
    print(f"audit of '{name}': {res.replications} replications hiding {res.hide_share:.0%} of "
          f"its labels ({mode} predictions); reference = {res.reference_kind}")
    expected = (f"   (a valid interval: ~{res.expected_coverage:.3f})"
                if res.expected_coverage is not None else f"   (nominal {nominal:.2f})")
    print(f"  raw coverage         naive {res.coverage_naive:.3f}   augmented "
          f"{res.coverage_augmented:.3f}{expected}")
    print(f"  calibrated coverage  naive {res.calibrated_coverage_naive:.3f}   augmented "
          f"{res.calibrated_coverage_augmented:.3f}   (nominal {nominal:.2f})")
    print(f"  mean CI width        naive {res.mean_width_naive:.4f}   augmented "
          f"{res.mean_width_augmented:.4f}   ratio {res.mean_width_ratio:.3f}")
    if reference is not None:
        print("  note: every replication re-uses one data set, so coverage of the true effect "
              "is one sample's story; the calibrated coverage checks the method.")
    if res.calibrated_coverage_naive < nominal - 0.1:
        print("  warning: even the naive intervals under-cover when labels are hidden: a few "
              "users with many sessions may dominate this case study (cluster-robust variances "
              "are unreliable then); read its intervals with care.")
    if res.calibrated_coverage_augmented < min(nominal, res.calibrated_coverage_naive) - 0.05:
        print("  warning: the augmented intervals are too narrow on this data; check the label "
              "shift (label_shift.csv from pulse-ml infer) and the predictions mode.")
    if mode == "in_sample":
        print("  warning: in_sample predictions leak labels; this audit cannot vouch for them.")
    print(f"written: {out / f'audit_{name}.json'}, {out / f'audit_{name}.csv'}")
    if job.log_mlflow:
        _log_run(job, summary, [out / f"audit_{name}.json", out / f"audit_{name}.csv"],
                 version, raw)
    return res


def _log_run(job: AuditSettings, summary: dict, files: list[Path], version, raw) -> None:
    """An ``audit-<case study>`` run in pulse-infer, tagged with and linked to the model."""
    from pulse_ml.registry import links, runs
    from pulse_ml.sessions.fingerprint import data_fingerprint

    metrics = {k: float(v) for k, v in summary.items()
               if isinstance(v, int | float) and not isinstance(v, bool)}
    run_id = runs.log_inference_run(
        f"audit-{job.case_study}",
        tags={"kind": "audit", "case_study": job.case_study, "mode": job.mode,
              "model_uri": job.model_uri},
        params={"data_path": job.data_path, "replications": job.replications,
                "hide_share": job.hide_share, "reference": job.reference, "seed": job.seed,
                "alpha": job.settings.alpha, "clusters": job.settings.clusters},
        metrics=metrics, files=files, model_version=version,
        dataset={"frame": raw, "source": job.data_path, "name": Path(job.data_path).stem,
                 "fingerprint": data_fingerprint(raw, list(raw.columns))},
        description=(f"Coverage audit of case study `{job.case_study}` ({job.replications} "
                     f"replications, {job.mode} predictions) with model `{job.model_uri}`."))
    hint = links.ui_hint_once()
    print(f"MLflow run {run_id} in experiment pulse-infer: {runs.run_link(run_id)}"
          + (f"\n{hint}" if hint else ""))
