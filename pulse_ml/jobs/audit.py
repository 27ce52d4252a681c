"""Check that the intervals hold on your own data: a split-half audit that can fail.

For ``case_study=NAME``: ``split_half.replications`` times (seeded) the case study's users are
split into two independent halves; the augmented (PPI++) interval on one half and the naive one
on the other must agree within their combined interval about 1 - alpha of the time. The pass
rate, its Monte-Carlo error and a verdict (valid / too narrow / inconclusive) are printed, for
the augmented and the naive method. Then the labeled-vs-unlabeled consistency check: R times
(``replications``) it hides ``hide_share`` of the labels and compares with the all-labels
estimate (it reacts to a labeled/unlabeled prediction shift; it is not a coverage check).
Writes audit_<name>.csv/json to ``output``.

Example:
    pulse-ml audit case_study=plan split_half.replications=2000
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from pulse_ml import settings as shared
from pulse_ml.config import Node, choice, flag, number, require
from pulse_ml.errors import PulseError
from pulse_ml.inference.effects import CLUSTER_MODES, InferenceSettings
from pulse_ml.inference.honest import PREDICTION_MODES, honest_data
from pulse_ml.report.html import run_identity
from pulse_ml.report.tables import say
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
    split_half_replications: int
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
        split_half_replications=number(cfg, "split_half.replications", "audit", 10, None,
                                       integer=True),
        settings=InferenceSettings(
            alpha=number(cfg, "alpha", "audit", 0, 1, open_interval=True),
            clusters=choice(cfg, "clusters", "audit", CLUSTER_MODES) == "user_id", seed=seed),
        case_studies=shared.case_study_config(cfg), output=Path(str(cfg.output)),
        progress=flag(cfg, "progress", "audit", True),
        log_mlflow=flag(cfg, "log_mlflow", "audit", True))


def _verdict_sentence(a) -> str:
    if a.verdict == "valid":
        return "the augmented intervals look valid on this data (" + a.reason + ")."
    if a.verdict == "too narrow":
        return ("the augmented intervals are TOO NARROW on this data (" + a.reason + "); do not "
                "trust them: check the label shift, the predictions mode and clusters=user_id.")
    return "inconclusive at this number of labels or splits (" + a.reason + ")."


def run(cfg: Node):
    """Entry point of ``pulse-ml audit``."""
    from pulse_ml.inference.audit import audit, split_half
    from pulse_ml.registry import models

    job = settings_from_config(cfg)
    name, mode, settings = job.case_study, job.mode, job.settings
    models.require_model(job.model_uri)  # "no model" is said before any data is read
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
    study = table.case_study(name)
    halves = split_half(table, preds, study, settings, job.split_half_replications, job.seed)
    res = audit(table, preds, study, settings, job.replications, job.hide_share, job.seed,
                reference, job.progress)
    from pulse_ml.report.atomic import staged_outputs

    out = job.output
    split = {m: {k: v for k, v in asdict(a).items() if k != "per_replication"}
             for m, a in halves.items()}
    summary = {k: v for k, v in asdict(res).items() if k != "per_replication"}
    with staged_outputs(out) as stage:  # both files or neither; earlier ones stay otherwise
        res.per_replication.to_csv(stage / f"audit_{name}.csv", index=False)
        (stage / f"audit_{name}.json").write_text(json.dumps(
            {**summary, "mode": mode, "split_half": split, **run_identity(version, raw),
             "verdict": halves["augmented"].verdict}, indent=2, default=str))
    nominal = 1 - settings.alpha
    for note in notes:
        say(f"note: {note}")
    unit = "users" if settings.clusters else "sessions"
    say(f"audit of '{name}' ({mode} predictions, {unit} as independent units)")
    say(f"1. split-half audit: {halves['augmented'].replications} random splits of the {unit} "
          "into two halves;")
    say("   passes when the two halves' estimates differ by no more than their intervals allow "
        f"(a valid method passes ~{nominal:.0%} of splits)")
    for method, a in halves.items():
        say(f"   {method:9s} pass rate {a.rate:.3f} ± {a.mc_se:.3f} (Monte-Carlo s.e.)  "
              f"-> {a.verdict}")
    say(f"   verdict: {_verdict_sentence(halves['augmented'])}")
    say("2. labeled-vs-unlabeled consistency (hide labels, compare with all labels; "
          "not a coverage check):")
    say(f"   {res.replications} replications hiding {res.hide_share:.0%} of the labels; "
          f"reference = {res.reference_kind}")
    expected = (f"(a valid interval: ~{res.expected_coverage:.3f})"
                if res.expected_coverage is not None else f"(nominal {nominal:.2f})")
    mc = np.sqrt(max(res.coverage_augmented * (1 - res.coverage_augmented), 1e-12)
                 / res.replications)
    say(f"   raw coverage         naive {res.coverage_naive:.3f}   augmented "
          f"{res.coverage_augmented:.3f} ± {mc:.3f}  {expected}")
    say(f"   calibrated coverage  naive {res.calibrated_coverage_naive:.3f}   augmented "
          f"{res.calibrated_coverage_augmented:.3f}   (nominal {nominal:.2f})")
    say(f"   mean CI width        naive {res.mean_width_naive:.4f}   augmented "
          f"{res.mean_width_augmented:.4f}   ratio {res.mean_width_ratio:.3f}")
    if res.calibrated_coverage_augmented < min(nominal, res.calibrated_coverage_naive) - 0.05:
        say("   warning: labeled sessions look different from unlabeled ones to the predictor "
            "(the consistency check falls short); check label_shift.csv from pulse-ml infer.")
    if mode == "in_sample":
        say("   warning: in_sample predictions leak labels; this audit cannot vouch for them.")
    say(f"written: {out / f'audit_{name}.json'}, {out / f'audit_{name}.csv'}")
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
    say(f"MLflow run {run_id} in experiment pulse-infer: {runs.run_link(run_id)}"
          + (f"\n{hint}" if hint else ""))
