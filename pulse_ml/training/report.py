"""The text of a train call (pure formatting): its summary and the run's/version's description.

``pulse-ml train`` prints :func:`summary` and writes :func:`describe` into the MLflow run and
the model version; :class:`TrainResult` is what one train call produced.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np
import pandas as pd

from pulse_ml import keys
from pulse_ml.redact import redact_uri
from pulse_ml.report.tables import address_lines, text_table, unbroken, wrap_lines
from pulse_ml.stats.paired import PairedComparison
from pulse_ml.training.family import FamilyFit
from pulse_ml.training.metrics import CVMetrics
from pulse_ml.training.paired import difference, paired_sentence
from pulse_ml.training.tuning import TuningSettings


@dataclass(frozen=True)
class TrainResult:
    """What one ``train`` call produced."""

    family: str
    feature_set: str
    run_id: str
    best_params: dict
    metrics: CVMetrics
    n_trials: int
    seconds: float
    version: str | None
    promoted: bool
    promotion_reason: str
    data_fingerprint: str
    rule: str = "significant"
    candidate: bool = False
    paired: PairedComparison | None = None
    champion_version: str | None = None
    n_labeled: int = 0
    n_unlabeled: int = 0
    ci_reduction: float = float("nan")
    ci_reduction_ref: float = float("nan")
    ci_ratio_ref: float = 20.0
    study_name: str = ""
    storage: str | None = None
    run_url: str = ""
    objective: str = keys.CV_MSE
    selection_free: CVMetrics | None = None  # each fold by the trial best on the other folds


def describe(result: TrainResult, fit: FamilyFit, data_name: str, tuning: TuningSettings,
             registered: str) -> str:
    """The run's and the version's description (Markdown)."""
    m = result.metrics
    states = pd.Series([t.state.name for t in fit.trials]).value_counts().to_dict()
    lines = [
        f"**{result.family}** on feature set `{result.feature_set}` "
        f"({len(fit.features.names)} features): {result.n_labeled:,} labeled sessions of "
        f"`{data_name}` (fingerprint `{result.data_fingerprint[:12]}`), "
        f"{tuning.n_splits}-fold CV {'grouped by user' if tuning.group_by_user else 'by session'}"
        f", seed {tuning.seed}.",
        f"- Optuna ({tuning.sampler} sampler, pruner {tuning.pruner_used}): "
        f"{len(fit.trials)} trial(s) in this run ({states.get('PRUNED', 0)} pruned, "
        f"{states.get('FAIL', 0)} failed; {fit.n_trials_total} in the study), best trial "
        f"{fit.best_number}; study `{result.study_name}`.",
        f"- Out-of-fold: MSE {m.mse:.4f} ± {np.std(m.fold_mse):.4f}, MAE {m.mae:.4f}, "
        f"r {m.pearson:.4f} ± {np.std(m.fold_pearson):.4f} (± = sd over folds).",
    ]
    if result.selection_free is not None:
        lines.append(f"- {_selection_free_sentence(result.selection_free, m)}.")
    if result.paired is not None:
        p = result.paired
        lines.append(f"- vs champion v{result.champion_version} on the same sessions: ΔMSE "
                     f"{p.delta_mse:+.4f} [{p.mse_ci_lower:+.4f}, {p.mse_ci_upper:+.4f}], Δr "
                     f"{p.delta_r:+.4f} [{p.r_ci_lower:+.4f}, {p.r_ci_upper:+.4f}] "
                     f"({round(100 * (1 - p.alpha))}% user bootstrap, {p.n_groups} users).")
    lines += [
        f"- Expected CI reduction with this predictor: {100 * result.ci_reduction:.1f}% at this "
        f"data's N/n = {result.n_unlabeled / max(result.n_labeled, 1):.1f}; "
        f"{100 * result.ci_reduction_ref:.1f}% at N/n = {result.ci_ratio_ref:g}.",
        f"- Promotion (rule `{result.rule}`): "
        f"{'**promoted**' if result.promoted else 'kept'} — {result.promotion_reason}.",
        f"- Registered: {registered}.",
    ]
    return "\n".join(lines)


def _selection_free_sentence(free: CVMetrics, best: CVMetrics) -> str:
    """The selection-free out-of-fold metrics beside the best trial's (which chose them)."""
    same = free.mse == best.mse and free.pearson == best.pearson
    return (f"selection-free out-of-fold (each fold by the trial best on the other folds; the "
            f"champion comparison uses these): MSE {free.mse:.4f}, MAE {free.mae:.4f}, r "
            f"{free.pearson:.4f} " + ("(every fold chose the best trial)" if same else
                                      f"(the best trial's own {best.mse:.4f}, {best.mae:.4f}, "
                                      f"{best.pearson:.4f} were chosen on these folds: "
                                      "optimistic)"))


def summary(result: TrainResult, model_name: str, version_url: str | None = None,
            ui_hint: str | None = None) -> str:
    """The end-of-run summary: metrics, the paired comparison, promotion, where to look.

    Each fact once: the paired comparison on its own line (the promotion line refers to it), the
    study's name once (in the command that adds trials to it), addresses and the UI command
    never broken across lines.

    Args:
        result: What the train call produced.
        model_name: The registered model's name.
        version_url: The UI address of the registered version (None: none registered).
        ui_hint: How to start the UI (printed once per process; None: not again).
    """
    m = result.metrics
    row = pd.DataFrame([{  # the words of the pipeline's table: r, champion
        "family": result.family, "features": result.feature_set, "trials": result.n_trials,
        keys.CV_MSE: m.mse, keys.CV_MAE: m.mae, "r": m.pearson,
        "r_std": float(np.std(m.fold_pearson)), "time_s": result.seconds,
        "version": result.version or "-", "champion": "yes" if result.promoted else "no",
    }])
    params = ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                       for k, v in result.best_params.items())
    lines = [text_table(row, digits_of={"time_s": 1}), "",
             f"best params: {params or '(none: no search space)'}"]
    if result.selection_free is not None:
        lines.append(_selection_free_sentence(result.selection_free, m))
    reason = result.promotion_reason
    if result.paired is not None:  # the difference the decision used first (the objective)
        p = result.paired
        other = (f"ΔMSE = {p.delta_mse:+.4f} [{p.mse_ci_lower:+.4f}, {p.mse_ci_upper:+.4f}]"
                 if result.objective == keys.CV_PEARSON else
                 f"Δr = {p.delta_r:+.4f} [{p.r_ci_lower:+.4f}, {p.r_ci_upper:+.4f}]")
        lines.append(f"vs champion v{result.champion_version}: "
                     f"{paired_sentence(p, result.objective, 'champion')}; {other}")
        reason = _without_paired(reason, p, result.objective)
    lines.append(f"expected CI reduction with this predictor: {100 * result.ci_reduction:.1f}% "
                 f"at this data's N/n = {result.n_unlabeled / max(result.n_labeled, 1):.1f} "
                 f"({result.n_labeled:,} labeled, {result.n_unlabeled:,} unlabeled); "
                 f"{100 * result.ci_reduction_ref:.1f}% at N/n = {result.ci_ratio_ref:g}")
    lines.append(f"champion (rule {result.rule}): "
                 f"{'yes, the new champion' if result.promoted else 'no'} — {reason}")
    if result.storage:
        lines.append(study_line(result.study_name, result.storage))
    if result.version:
        lines.append(address_lines(f"registered: version {result.version} of {model_name}"
                                   + (":" if version_url else ""), version_url or ""))
    lines.append(address_lines("MLflow run:", result.run_url))
    if ui_hint:
        lines.append(unbroken(ui_hint))
    return wrap_lines("\n".join(line.rstrip() for line in lines))


def _without_paired(reason: str, paired: PairedComparison, objective: str) -> str:
    """The promotion reason with its paired sentence (printed on the line above) named only."""
    import re

    head, tail = paired_sentence(paired, objective, "\0").split("\0")
    label = difference(paired, objective)[0]
    return re.sub(re.escape(head) + r".*?" + re.escape(tail),
                  lambda _: f"the {label} interval above", reason, count=1)


def study_line(name: str, storage: str) -> str:
    """How to add trials to the study, its name said once.

    With ``tuning.storage=auto`` the journal file is named after the study; another storage is
    part of the command.
    """
    folder, file = os.path.split(storage)
    safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in name)
    if file == f"{safe}.journal" and os.path.basename(folder) == "optuna":  # storage=auto
        return (f"study: add trials with {unbroken(f'tuning.study_name={name}')} (journal in "
                f"{redact_uri(folder)}/)")
    command = f"tuning.storage={redact_uri(storage)} tuning.study_name={name}"
    return f"study: add trials with {unbroken(command)}"
