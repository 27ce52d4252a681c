"""Check that the intervals hold on your own data: a split-half audit that can fail.

For ``case_study=NAME``: ``split_half.replications`` times (seeded) the case study's users are
split into two independent halves. Variance check: the PPI++ estimate on one half and
on the other (the analysis' lambda held fixed) must agree within their combined interval about
1 - alpha of the time (pass rate, Monte-Carlo error, verdict; the same for the naive method).
Bias check: the PPI++ and the naive estimate of the same halves must not differ by more
than the half-sample s.e. of that gap allows (predictions fitted on the labels, or a
labeled/unlabeled shift). Either flag (each at half the level) makes the verdict valid / too
narrow / inconclusive; a small study is told which check still works and how many labeled
users the other needs. Then the
labeled-vs-unlabeled consistency check: R times (``replications``) it hides ``hide_share`` of the
labels and compares with the all-labels estimate. It reacts to a labeled/unlabeled prediction
shift (PPI++ rate clearly below the naive one); it is not a coverage check and its rates are
not compared with the nominal level. Writes audit_<name>.json (both checks) and
audit_<name>.csv (the split-half replications) to ``output``; a name that is not a plain
ASCII word (``/``, ``..``, spaces, emoji) appears there as a slug + short hash and verbatim
inside the JSON. A case study asked by varying ``request_prob`` is audited as ``infer``
analyses it: weights 1 / (request_prob x cross-fitted response rate), reused by every half and
hiding (perf/audit_active.py: the checks keep their rate under weights).

Example:
    pulse-ml audit case_study=plan split_half.replications=2000
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

import pandas as pd

from pulse_ml import settings as shared
from pulse_ml.config import Node, choice, flag, require
from pulse_ml.errors import PulseError
from pulse_ml.inference.effects import CLUSTER_MODES, InferenceSettings
from pulse_ml.inference.honest import PREDICTION_MODES, honest_data
from pulse_ml.names import file_part, write_csv
from pulse_ml.report.html import run_identity
from pulse_ml.report.tables import estimator_label, say
from pulse_ml.sessions.case_studies import CaseStudy, check_selected
from pulse_ml.sessions.readers import (
    FREE_TEXT,
    ground_truth_path,
    load_ground_truth,
    read_frame,
    with_free_text,
)

REFERENCES = {"auto": "check against the true effect when the table has a ground-truth file",
              "truth": "require the true effect (<table>.ground_truth.json or ground_truth.json)",
              "none": "no check against a true effect"}


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
    run: shared.RunLabels = shared.RunLabels()  # experiment, run_name, tags


def settings_from_config(cfg: Node) -> AuditSettings:
    """Read the composed config once (every number and choice checked here)."""
    seed = shared.bounded(cfg, "audit", "seed")
    return AuditSettings(
        case_study=shared.audit_case_study(cfg),
        model_uri=str(require(cfg, "model_uri", "audit")),
        data_path=str(cfg.data.path),
        mode=choice(cfg, "ppi.predictions", "audit", PREDICTION_MODES),
        reference=choice(cfg, "reference", "audit", REFERENCES),
        hide_share=shared.bounded(cfg, "audit", "hide_share"),
        replications=shared.bounded(cfg, "audit", "replications"), seed=seed,
        split_half_replications=shared.bounded(cfg, "audit", "split_half.replications"),
        settings=InferenceSettings(
            alpha=shared.bounded(cfg, "audit", "alpha"),
            clusters=choice(cfg, "clusters", "audit", CLUSTER_MODES) == "user_id", seed=seed),
        case_studies=shared.case_study_config(cfg), output=Path(str(cfg.output)),
        progress=flag(cfg, "progress", "audit", True),
        log_mlflow=flag(cfg, "log_mlflow", "audit", True), run=shared.run_labels(cfg, "audit"))


def _verdict_sentence(a) -> str:
    if a.verdict == "valid":
        return "the PPI++ intervals look valid on this data (" + a.reason + ")."
    if a.verdict == "too narrow":
        return ("the PPI++ intervals are TOO NARROW on this data (" + a.reason + "); do not "
                "trust them: check the label shift, the predictions mode and clusters=user_id.")
    return "inconclusive at this number of labels or splits (" + a.reason + ")."


def run(cfg: Node):
    """Entry point of ``pulse-ml audit``."""
    from pulse_ml.env.locations import check_outputs
    from pulse_ml.inference.audit import consistency, split_half
    from pulse_ml.registry.analysis import open_model
    from pulse_ml.registry.lookup import require_model
    from pulse_ml.registry.store import store_locations

    job = settings_from_config(cfg)
    check_outputs("audit", [("output", job.output, "folder")], [("data.path", job.data_path)],
                  store_locations())
    name, mode, settings = job.case_study, job.mode, job.settings
    require_model(job.model_uri)  # "no model" is said before any data is read
    raw = read_frame(job.data_path, skip=FREE_TEXT)  # text: once the model says
    check_selected(raw, job.data_path, [name], job.case_studies, "case_study")  # before the model
    model = open_model(job.model_uri)
    version = model.version
    raw = with_free_text(raw, job.data_path, model.ensemble.features.of_kind("text"))
    data = honest_data(raw, job.data_path, model.ensemble, job.case_studies, [name], mode,
                       case_study_rows=True)  # its checks read no other session's prediction
    table, preds, notes = data.table, data.predictions, data.notes
    study = table.case_study(name)
    truth = _truth_check(job, table, preds, study)
    pairs = {t: (split_half(table, preds, study, settings, job.split_half_replications,
                            job.seed, treatment=t),
                 consistency(table, preds, study, settings, job.replications, job.hide_share,
                             job.seed, treatment=t))
             for t in study.all_treatments}  # several variants: each against the control
    from pulse_ml.env.atomic import staged_outputs

    out = job.output
    several = len(pairs) > 1
    parts = {t: _pair_summary(result, check) for t, (result, check) in pairs.items()}
    first = parts[study.treatment]
    verdict = max((p["verdict"] for p in parts.values()), key=VERDICT_ORDER.index)
    summary = {"case_study": name, "mode": mode, "verdict": verdict,
               "verdict_reason": first["verdict_reason"] if not several else "; ".join(
                   f"{t} vs {study.control}: {p['verdict']} ({p['verdict_reason']})"
                   for t, p in parts.items())}
    if several:
        summary["treatments"] = parts  # one entry per treatment vs the control
    else:
        summary.update({k: v for k, v in first.items()
                        if k in ("split_half", "consistency", "request_prob")})
    summary["truth"] = truth
    per = pd.concat([a.per_replication.assign(method=m, **({"treatment": t} if several else {}))
                     for t, (result, _) in pairs.items() for m, a in result.audits.items()],
                    ignore_index=True)
    stem = f"audit_{file_part(name)}"  # a slug + hash for names unfit for a file name
    with staged_outputs(out) as stage:  # both files or neither; earlier ones stay otherwise
        write_csv(per, stage / f"{stem}.csv")
        (stage / f"{stem}.json").write_text(json.dumps(
            {**summary, **run_identity(version, raw, model.ensemble.features.names)}, indent=2,
            default=str))
    asked = [n for result, _ in pairs.values() for n in result.notes]
    for note in (*notes, *dict.fromkeys(asked)):  # a variant's control note once
        say(f"note: {note}")
    unit = "users" if settings.clusters else "sessions"
    say(f"audit of '{name}' ({mode} predictions, {unit} as independent units)")
    for t, (result, check) in pairs.items():
        if several:
            say(f"\n== {t} vs {study.control}")
        _say_pair(result, check, settings.alpha, unit)
    if several:
        say(f"\nverdict over the {len(pairs)} treatments (the worst): {verdict}")
    if truth is not None:
        say(f"3. against the true effect {truth['effect']:+.4f} ({Path(truth['source']).name}; "
            "one dataset: a yes/no, not a coverage rate):")
        for method in ("naive", "augmented"):
            t = truth[method]
            say(f"   {estimator_label(method):9s} {t['effect']:+.4f} [{t['ci_lower']:+.4f}, "
                f"{t['ci_upper']:+.4f}]  covers the true effect: {'yes' if t['covers'] else 'NO'}")
    if mode == "in_sample":
        say("   warning: in_sample predictions leak labels; this audit cannot vouch for them.")
    say(f"written: {out / f'{stem}.json'}, {out / f'{stem}.csv'}")
    if job.log_mlflow:
        _log_run(job, pairs, verdict, [out / f"{stem}.json", out / f"{stem}.csv"],
                 version, raw)
    return summary


VERDICT_ORDER = ("valid", "inconclusive", "too narrow")  # the worst verdict is the last


def _pair_summary(result, check) -> dict:
    """The audit of one treatment against the control, JSON-ready."""
    split = {m: {k: v for k, v in asdict(a).items() if k != "per_replication"}
             for m, a in result.audits.items()}
    split["bias"] = None if result.bias is None else asdict(result.bias)
    split["checks"] = list(result.checks)
    cons = {k: v for k, v in asdict(check).items()
            if k not in ("per_replication", "case_study")}
    out = {"verdict": result.verdict, "verdict_reason": result.reason, "split_half": split,
           "consistency": cons}
    if result.notes:  # asked by request_prob: asked, answered and weights per arm
        out["request_prob"] = list(result.notes)
    return out


def _say_pair(result, check, alpha: float, unit: str) -> None:
    """The terminal lines of the split-half audit and consistency check of one pair."""
    halves, nominal = result.audits, 1 - alpha
    say(f"1. split-half audit: {halves['augmented'].requested} random splits of the {unit} "
        "into two halves;")
    say("   variance check: the same method on both halves passes when the two estimates differ "
        "by no more")
    say(f"   than their intervals allow (a valid method passes ~{nominal:.0%} of splits)")
    for method, a in halves.items():
        say(f"   {estimator_label(method):9s} pass rate {a.rate:.3f} ± {a.mc_se:.3f} "
            f"(Monte-Carlo s.e.)  -> {a.verdict}")
    for line in result.checks:
        say(f"   - {line}")
    say(f"   verdict: {_verdict_sentence(result)}")
    say("2. labeled-vs-unlabeled consistency check (not a coverage check; its rates are not "
        "compared")
    say(f"   with {nominal:.0%}): {check.replications} replications hiding "
        f"{check.hide_share:.0%} of the labeled {unit}, nested estimates vs all labels")
    say(f"   agreement rate       naive {check.consistency_rate_naive:.3f}   PPI++ "
        f"{check.consistency_rate_augmented:.3f} ± {check.consistency_mc_se:.3f}   "
        f"(gap {check.consistency_gap:+.3f})")
    say(f"   mean s.e. ratio      PPI++ / naive {check.mean_se_ratio:.3f}")
    if check.consistency_gap > max(0.05, 2 * check.consistency_mc_se):
        say("   warning: labeled sessions look different from unlabeled ones to the predictor "
            "(PPI++ agreement well below naive); check label_shift.csv and "
            "prediction_shift.csv from pulse-ml infer, or try infer reweight=true.")


def _truth_check(job: AuditSettings, table, preds, study) -> dict | None:
    """The full-data intervals against the table's true effect (``reference``), or None.

    Raises:
        PulseError: ``reference=truth`` and no ground-truth file names this case study.
    """
    if job.reference == "none":
        return None
    effects = load_ground_truth(job.data_path)
    if study.name not in effects:
        if job.reference == "truth":
            raise PulseError(
                f"reference=truth: no true effect for case study '{study.name}' beside "
                f"{job.data_path} (looked for {Path(job.data_path).stem}.ground_truth.json and "
                "ground_truth.json). Use reference=auto or reference=none.")
        return None
    from pulse_ml.inference.effects import analyse

    comparison = analyse(table, preds, study, job.settings).comparison
    true = effects[study.name]
    out = {"effect": true, "source": str(ground_truth_path(job.data_path))}
    for method in ("naive", "augmented"):
        est = getattr(comparison, method)
        out[method] = {"effect": est.effect, "ci_lower": est.ci_lower, "ci_upper": est.ci_upper,
                       "covers": bool(est.ci_lower <= true <= est.ci_upper)}
    return out


def _log_run(job: AuditSettings, pairs: dict, verdict: str, files: list[Path], version,
             raw) -> None:
    """An ``audit-<case study>`` run in pulse-infer, tagged with and linked to the model.

    Metrics: ``split_half_rate_<method>``, ``split_half_mc_se_<method>`` (variance check),
    ``split_half_bias_gap``, ``split_half_bias_se``, ``split_half_bias_p_value`` and the
    consistency check's ``consistency_rate_naive``, ``consistency_rate_augmented``,
    ``consistency_mc_se``, ``consistency_gap``, ``mean_se_ratio``; with several treatments each
    prefixed ``<treatment>.``; tag ``verdict`` (the worst over the treatments).
    """
    from pulse_ml import keys
    from pulse_ml.registry import runs
    from pulse_ml.registry.analysis import dataset_input, run_line

    metrics: dict[str, float] = {}
    for t, (result, check) in pairs.items():
        pre = f"{t}." if len(pairs) > 1 else ""
        metrics.update({f"{pre}split_half_{k}_{m}": float(getattr(a, k))
                        for m, a in result.audits.items() for k in ("rate", "mc_se")})
        if result.bias is not None:
            metrics.update({f"{pre}split_half_bias_{k}": float(getattr(result.bias, k))
                            for k in ("gap", "se", "p_value")})
        metrics.update({f"{pre}{k}": float(getattr(check, k)) for k in (
            "consistency_rate_naive", "consistency_rate_augmented", "consistency_mc_se",
            "consistency_gap", "mean_se_ratio")})
    run_id = runs.log_inference_run(
        f"audit-{job.case_study}",
        tags={keys.KIND: keys.KIND_AUDIT, keys.CASE_STUDY: job.case_study, keys.MODE: job.mode,
              keys.MODEL_URI: job.model_uri, keys.VERDICT: verdict},
        params={"data_path": job.data_path, "replications": job.replications,
                "split_half_replications": job.split_half_replications,
                "hide_share": job.hide_share, "seed": job.seed,
                "alpha": job.settings.alpha, "clusters": job.settings.clusters},
        metrics=metrics, files=files, model_version=version,
        dataset=dataset_input(raw, job.data_path),
        description=(f"Split-half audit of case study `{job.case_study}` "
                     f"({job.split_half_replications} splits; verdict "
                     f"{verdict}) and labeled-vs-unlabeled consistency check "
                     f"({job.replications} hidings), {job.mode} predictions, model "
                     f"`{job.model_uri}`."), labels=job.run)
    say(run_line(run_id))
