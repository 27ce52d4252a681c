"""Naive vs prediction-powered (PPI++) effect with CIs (95% at alpha=0.05) per case study.

Loads the registered model (``model_uri``, default the ``champion``) and the session table;
labeled sessions that were in the model's training data get their out-of-fold prediction
(honest, cross-fitted), all other sessions the mean of the fold models. For each case study
(configured in conf/catalog/case_studies/ or found in the data with exactly two conditions) it
reports the naive difference of labeled means (permutation p-value) and the PPI++ effect (the
two arms' lambdas chosen jointly to minimize the effect's variance, then shrunk to the narrowest
printed interval, never wider than naive; cluster-robust by user), the
CI reduction, the feature comparison per arm and the labeled-vs-unlabeled shift. Writes
effects.{json,csv,md}, forest.png, features.csv, label_shift.csv and report.html to ``output``
and logs everything to MLflow experiment pulse-infer. In effects.csv/.json the PPI++ rows
keep ``estimator = augmented`` (the value scripts and the MLflow metric names read); the
terminal, effects.md, report.html and forest.png say PPI++.

First it prints the decision of each case study and treatment (``ship``, ``do_not_ship``,
``keep_collecting``, ``invalid``; sample-ratio and rating-rate checks, guardrails,
non-inferiority, Holm over several treatments, as the case study declares them, or
``declare.<name>.<key>=...``; see docs/decisions.md), also in decisions.json, the run's tags
and report.html's cards.

``inference=randomization`` adds, beside the asymptotic interval, an exact randomization test
and interval per case study: the randomized units (users when the case study declares
``randomization_unit: user`` or no user has sessions in both arms, else sessions) are
re-randomized ``randomization.n_permutations`` times (all assignments when fewer), the whole
analysis, PPI++ lambdas included, recomputed each time, and the interval collects the constant
effects not rejected. ``infer`` suggests it when fewer than 30 effective (Kish) users per arm
gave the ratings.

``ppi.predictions=in_sample`` reproduces the paper (labeled sessions predicted by a model that
was trained on them): its intervals are too narrow and NOT valid.

Examples:
    pulse-ml infer
    pulse-ml infer case_studies=[plan] clusters=none
    pulse-ml infer 'declare.plan.decision={rule: non_inferiority, margin: 0.1}'
    pulse-ml infer case_studies=[plan] inference=randomization randomization.n_permutations=5000
    pulse-ml infer model_uri=models:/pulse-satisfaction/3 data.path=my_sessions.parquet
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from pulse_ml import keys
from pulse_ml import settings as shared
from pulse_ml.config import Node, choice, flag
from pulse_ml.errors import PulseError
from pulse_ml.inference.decisions import (
    RULE_TEXT,
    check_guardrail_columns,
    decide_all,
    decision_lines,
    decision_tags,
    json_safe,
)
from pulse_ml.inference.effects import (
    CLUSTER_MODES,
    CaseStudyResult,
    InferenceSettings,
    analyse,
    effects_frame,
)
from pulse_ml.inference.honest import PREDICTION_MODES, honest_data
from pulse_ml.inference.randomization import INFERENCE_MODES, RandomizationSettings
from pulse_ml.names import write_csv
from pulse_ml.report.tables import estimator_label, level_pct, markdown_table, say, text_table
from pulse_ml.sessions.case_studies import CaseStudy, check_selected
from pulse_ml.sessions.readers import (
    FREE_TEXT,
    is_simulated,
    load_ground_truth,
    read_frame,
    with_free_text,
)

IN_SAMPLE_WARNING = ("WARNING: ppi.predictions=in_sample: these intervals are too narrow and NOT "
                     "valid. The labeled sessions were predicted by a model trained on them (the "
                     "paper's procedure), so the rectifier is overfit. Use the default "
                     "ppi.predictions=crossfit for decisions.")


@dataclass(frozen=True)
class InferJob:
    """Typed settings of ``pulse-ml infer``."""

    model_uri: str
    data_path: str
    mode: str
    settings: InferenceSettings
    output: Path
    log_mlflow: bool
    case_studies: dict[str, CaseStudy]
    only: list[str] | None
    print_table: bool = True  # pipeline prints it once, in its summary
    inference: str = "asymptotic"
    run: shared.RunLabels = shared.RunLabels()  # experiment, run_name, tags


def settings_from_config(cfg: Node) -> InferJob:
    """Read the composed config once."""
    mode = choice(cfg, "ppi.predictions", "infer", PREDICTION_MODES)
    clusters = choice(cfg, "clusters", "infer", CLUSTER_MODES)
    alpha = shared.bounded(cfg, "infer", "alpha")
    permutations = shared.bounded(cfg, "infer", "permutations")
    seed = shared.bounded(cfg, "infer", "seed")
    reweight = flag(cfg, "reweight", "infer", False)
    inference = choice(cfg, "inference", "infer", INFERENCE_MODES)
    rand = None
    if inference != "asymptotic":
        if reweight:
            raise PulseError(f"pulse-ml infer: inference={inference} cannot be combined with "
                             "reweight=true (the labeling-propensity model would have to be "
                             "refitted under every re-randomization). Run one of them: "
                             "reweight=false, or inference=asymptotic.")
        rand = RandomizationSettings(
            n_permutations=shared.bounded(cfg, "infer", "randomization.n_permutations"),
            seed=shared.bounded(cfg, "infer", "randomization.seed"),
            statistic=choice(cfg, "randomization.statistic", "infer", {
                "studentized": "effect / its s.e. (default)", "effect": "the raw effect"}))
    return InferJob(
        model_uri=str(cfg.model_uri), data_path=str(cfg.data.path), mode=mode,
        settings=InferenceSettings(alpha=alpha, clusters=clusters == "user_id",
                                   n_permutations=permutations, seed=seed, reweight=reweight,
                                   randomization=rand),
        output=Path(str(cfg.output)), log_mlflow=flag(cfg, "log_mlflow", "infer"),
        case_studies=shared.case_study_config(cfg), only=shared.selected_case_studies(cfg),
        inference=inference, run=shared.run_labels(cfg, "infer"))


def json_records(frame: pd.DataFrame) -> list[dict]:
    """Rows as JSON-ready dicts; a value that does not apply (NaN) becomes ``null``."""
    return [{k: None if isinstance(v, float) and v != v else v for k, v in row.items()}
            for row in frame.to_dict(orient="records")]


def write_outputs(job: InferJob, effects: pd.DataFrame, results: list[CaseStudyResult],
                  meta: dict, truth: dict[str, float],
                  lineage: dict | None = None,
                  decisions: list[dict] | None = None) -> list[Path]:
    """Write effects.*, decisions.json, forest.png, the shift tables and report.html, or none."""
    from pulse_ml.env.atomic import staged_outputs
    from pulse_ml.report.html import inference_report
    from pulse_ml.report.plots import forest_plot

    names = ("effects.json", "effects.csv", "effects.md", "decisions.json", "forest.png",
             "features.csv", "label_shift.csv", "prediction_shift.csv", "report.html")
    with staged_outputs(job.output) as out:
        (out / "decisions.json").write_text(json.dumps(
            {"rule": RULE_TEXT, "alpha": job.settings.alpha,
             "decisions": json_safe(decisions or [])}, indent=2, default=str))
        write_csv(effects, out / "effects.csv")
        (out / "effects.json").write_text(json.dumps(
            {**meta, "effects": json_records(effects)}, indent=2, default=str))
        header = f"# Effects ({meta['mode']} predictions, model {meta['model']})\n\n"
        if job.mode == "in_sample":
            header += f"> {IN_SAMPLE_WARNING}\n\n"
        shown = effects.assign(estimator=[estimator_label(e) for e in effects["estimator"]])
        (out / "effects.md").write_text(header + markdown_table(shown, 4) + "\n")
        forest_plot(effects, out / "forest.png", truth or None,
                    title=f"Effects in {Path(job.data_path).name} (treatment − control)",
                    subtitle=f"model {meta['model']} (v{meta[keys.MODEL_VERSION]}, "
                             f"{meta[keys.MODEL_FAMILY]}), {job.mode} predictions",
                    invalid=job.mode == "in_sample", alpha=job.settings.alpha)
        feats = pd.concat([r.features for r in results], ignore_index=True)
        write_csv(feats, out / "features.csv")
        shifts = [r.shift for r in results if len(r.shift)]
        shift = pd.concat(shifts, ignore_index=True) if shifts else pd.DataFrame()
        write_csv(shift, out / "label_shift.csv")
        pred_shift = pd.concat([r.prediction_shift for r in results
                                if r.prediction_shift is not None], ignore_index=True)
        write_csv(pred_shift, out / "prediction_shift.csv")
        warnings = [f"{name}: {w}" for name, ws in (meta.get("warnings") or {}).items()
                    for w in ws]  # the same warnings the terminal prints and effects.json keeps
        inference_report(out / "report.html", effects, meta, lineage or {}, out / "forest.png",
                         feats, shift, warnings=warnings, valid=job.mode != "in_sample",
                         invalid_reason=IN_SAMPLE_WARNING, results_root=job.output.parent,
                         decisions=decisions or [], rule=RULE_TEXT)
    return [job.output / n for n in names]


def log_run(job: InferJob, effects: pd.DataFrame, files: list[Path], version, meta,
            raw: pd.DataFrame | None = None, decisions: list[dict] | None = None) -> str:
    """Log the inference to experiment pulse-infer; returns the run id.

    The run is tagged with and linked to the model version it used (its logged model is a
    run input) and has the session table as a dataset input (context ``inference``).
    """
    from pulse_ml.registry import runs
    from pulse_ml.registry.analysis import dataset_input

    metrics = {}
    several = effects.groupby(["case_study", "estimator"])["treatment"].transform("size") > 1
    for row, multi in zip(effects.itertuples(index=False), several, strict=True):
        key = (f"{row.case_study}.{row.treatment}" if multi else row.case_study) + \
            f".{row.estimator}"
        metrics.update({f"{key}.effect": row.effect, f"{key}.ci_lower": row.ci_lower,
                        f"{key}.ci_upper": row.ci_upper})
        if row.estimator == "augmented":
            metrics[key.rsplit(".", 1)[0] + ".ci_reduction_pct"] = row.ci_reduction_pct
    return runs.log_inference_run(
        f"infer-{job.mode}",
        tags={keys.KIND: keys.KIND_INFERENCE, keys.MODE: job.mode, keys.MODEL_URI: job.model_uri,
              keys.VALID_INTERVALS: str(bool(meta[keys.VALID_INTERVALS])).lower(),
              **decision_tags(decisions or []),
              keys.MODEL_VERSION: "" if version is None else str(version.version),
              keys.MODEL_FAMILY: "" if version is None
              else (version.tags or {}).get(keys.FAMILY, "")},
        params={"data_path": job.data_path, "alpha": job.settings.alpha,
                "clusters": job.settings.clusters, "mode": job.mode,
                "n_labeled_oof": meta["n_labeled_with_oof"]},
        metrics=metrics, files=files, model_version=version,
        dataset=None if raw is None else dataset_input(raw, job.data_path,
                                                       meta.get(keys.DATA_FINGERPRINT)),
        description=(f"{job.mode} PPI++ vs naive effects of {effects['case_study'].nunique()} "
                     f"case stud{'y' if effects['case_study'].nunique() == 1 else 'ies'} with "
                     f"model `{job.model_uri}` (version {meta[keys.MODEL_VERSION]}, "
                     f"{meta[keys.MODEL_FAMILY]}, features `{meta[keys.FEATURE_SET]}`) on "
                     f"`{Path(job.data_path).name}`"
                     + ("; intervals NOT valid (in-sample predictions)"
                        if job.mode == "in_sample" else "") + "."), labels=job.run)


def shift_warnings(shifted: list) -> list[str]:
    """One warning per case study and feature, naming the levels of a categorical feature.

    A categorical feature is tested level by level (the share of sessions at each level), so
    one that shifts shows two or more levels with opposite signs: they are one line.
    """
    grouped: dict[tuple[str, str], list] = {}
    for name, row in shifted:
        grouped.setdefault((name, row.feature), []).append(row)
    lines = []
    for (name, feature), rows in grouped.items():
        levels = [r for r in rows if isinstance(r.level, str)]
        what = (f"'{feature}' (rank-biserial {rows[0].rank_biserial:+.2f})" if not levels else
                f"'{feature}' (share of sessions at each level, rank-biserial: "
                + ", ".join(f"{r.level} {r.rank_biserial:+.2f}" for r in levels) + ")")
        lines.append(f"warning: {name}: labeled sessions differ from unlabeled ones in {what}; "
                     "PPI assumes they are alike — see label_shift.csv, or correct it with "
                     "reweight=true.")
    return lines


def printable(effects: pd.DataFrame, truth: dict[str, float],
              alpha: float | None = None, inference: str = "both") -> pd.DataFrame:
    """The terminal view (fits 100 columns): effect [CI] per estimator, CI reduction, p, labels.

    Every column is in ``effects.csv``; the CI reduction is blank on naive rows (it does not
    apply, NaN in the files) and labels read ``control/treatment``. With simulated data the
    true effect and whether the interval covers it are shown beside. The header names the
    interval level of ``alpha`` (0.1 -> "90% CI"; default: the frame's own ``attrs["alpha"]``).
    When the frame has randomization results they replace the labels column (the randomization
    interval and p-value ``p_rand``); ``inference="randomization"`` also drops the asymptotic p.
    """
    if alpha is None:
        alpha = effects.attrs.get("alpha", 0.05)
    several = effects.groupby(["case_study", "estimator"])["case_study"].transform("size") > 1
    view = pd.DataFrame({  # several treatments: case_study/treatment
        "case_study": effects["case_study"].where(
            ~several, effects["case_study"] + "/" + effects["treatment"].astype(str)),
        "estimator": [estimator_label(e) for e in effects["estimator"]],
        f"effect [{level_pct(alpha)}% CI]": [f"{e:+.3f} [{lo:+.3f}, {hi:+.3f}]" for e, lo, hi in
                            zip(effects["effect"], effects["ci_lower"], effects["ci_upper"],
                                strict=True)],
        "ci_red_%": effects["ci_reduction_pct"],  # blank (NaN) on naive rows
        "p": effects["p_value"],
        "labels": [f"{c}/{t}" for c, t in zip(effects["n_labeled_control"],
                                              effects["n_labeled_treatment"], strict=True)],
    })
    if "p_value_randomization" in effects and effects["p_value_randomization"].notna().any():
        view = view.drop(columns=["labels"] + (["p"] if inference == "randomization" else []))
        ends = zip(effects["ci_lower_randomization"], effects["ci_upper_randomization"],
                   strict=True)
        view[f"randomization {level_pct(alpha)}% CI"] = [f"[{lo:+.3f}, {hi:+.3f}]"
                                                         for lo, hi in ends]
        view["p_rand"] = effects["p_value_randomization"]
    if truth:
        true = effects["case_study"].map(truth)
        view["truth"] = true
        view["covers"] = (effects["ci_lower"] <= true) & (true <= effects["ci_upper"])
    return view


def _label(result: CaseStudyResult, results: list[CaseStudyResult]) -> str:
    """The case study's name, with ``/treatment`` when it has several treatments."""
    several = sum(r.study.name == result.study.name for r in results) > 1
    return f"{result.study.name}/{result.study.treatment}" if several else result.study.name


def run(cfg: Node) -> pd.DataFrame:
    """Entry point of ``pulse-ml infer``."""
    return run_settings(settings_from_config(cfg))


def run_settings(job: InferJob) -> pd.DataFrame:
    """Infer with typed settings (``pipeline`` calls this directly)."""
    from pulse_ml.env.locations import check_outputs
    from pulse_ml.registry.analysis import open_model, run_line
    from pulse_ml.registry.lookup import require_model
    from pulse_ml.registry.store import store_locations
    from pulse_ml.report.html import run_identity

    check_outputs("infer", [("output", job.output, "folder")], [("data.path", job.data_path)],
                  store_locations())
    require_model(job.model_uri)  # "no model" is said before any data is read
    # bad files fail before the model loads; free text is read once the model says
    raw = read_frame(job.data_path, skip=FREE_TEXT)
    check_selected(raw, job.data_path, job.only, job.case_studies)  # as do misspelled names
    # a read-only store fails before the model loads, not after the work
    model = open_model(job.model_uri, write_store=job.log_mlflow)
    ensemble, version = model.ensemble, model.version
    raw = with_free_text(raw, job.data_path, ensemble.features.of_kind("text"))
    data = honest_data(raw, job.data_path, ensemble, job.case_studies, job.only, job.mode,
                       case_study_rows=True)  # the analyses read no other session's prediction
    table, preds, n_oof = data.table, data.predictions, data.n_with_oof
    honesty_notes = list(data.notes)
    if not table.case_studies:
        raise PulseError(f"{job.data_path}: no two-arm case study in column 'case_study'. Fill "
                         "case_study/condition for the sessions of each A/B test.")
    check_guardrail_columns(table, table.case_studies)  # before any analysis
    results = [analyse(table, preds, variant, job.settings) for study in table.case_studies
               for variant in study.variants()]
    effects = effects_frame(results)
    decisions = decide_all(table, [(r.study, r.comparison) for r in results],
                           job.settings.alpha, valid=job.mode == "crossfit")
    effects.attrs["decisions"] = decisions  # pipeline prints them first
    truth = load_ground_truth(job.data_path)
    meta = {**model.meta(), "mode": job.mode, "alpha": job.settings.alpha,
            "inference": job.inference,
            "randomization": {_label(r, results): {
                "unit": r.randomization.unit, "n_assignments": r.randomization.n_assignments,
                "exhaustive": r.randomization.exhaustive,
                "statistic": r.randomization.statistic, "note": " ".join(r.notes)}
                for r in results if r.randomization is not None} or None,
            "clusters": "user_id" if job.settings.clusters else "none",
            "data": job.data_path, "n_labeled_with_oof": n_oof,
            "n_labeled_without_oof": int(table.labeled.sum()) - n_oof
            if job.mode == "crossfit" else None,
            "notes": list(table.notes) + honesty_notes, "true_effects": truth or None,
            "warnings": {_label(r, results): list(r.comparison.warnings) for r in results
                         if r.comparison.warnings},
            keys.VALID_INTERVALS: job.mode == "crossfit",  # in-sample intervals are not valid
            **run_identity(version, raw, ensemble.features.names)}
    tags = model.version_tags
    lineage = {keys.MODEL_URI: job.model_uri, "version": meta[keys.MODEL_VERSION],
               "family": model.family, keys.FEATURE_SET: model.feature_set,
               keys.DATA_FINGERPRINT: tags.get(keys.DATA_FINGERPRINT, ""),
               **{k: tags[k] for k in (keys.CV_MSE, keys.CV_MAE, keys.CV_PEARSON) if k in tags},
               **({keys.GIT_COMMIT: commit} if (commit := model.git_commit) else {})}
    files = write_outputs(job, effects, results, meta, truth, lineage, decisions)
    run_id = (log_run(job, effects, files, version, meta, raw, decisions) if job.log_mlflow
              else None)
    if job.print_table:
        for line in decision_lines(decisions):
            say(line)
    say(f"{model.describe()}; {job.mode} predictions ({n_oof} labeled sessions got "
        "their out-of-fold prediction)")
    if job.print_table:
        say(text_table(printable(effects, truth, job.settings.alpha, job.inference), digits=3))
    for note in (*table.notes, *honesty_notes):
        say(f"note: {note}")
    for r in results:
        for note in r.notes:
            say(f"note: {_label(r, results)}: {note}")
    if job.settings.reweight:
        say("note: reweight=true: labeled sessions are weighted by 1 / P(labeled | features, arm) "
            "(cross-fitted, users kept together), so both the naive and the PPI++ effect "
            "correct a labeled-vs-unlabeled shift; see prediction_shift.csv.")
    for r in results:
        for warning in r.comparison.warnings:
            say(f"warning: {_label(r, results)}: {warning}")
    # Feature-level shifts are named where the predictions shift enough to matter (the
    # comparison's own consequence-driven flag), not at a fixed rank-biserial.
    shifted = [(r.study.name, row) for r in results if len(r.shift) and r.comparison.shift_flagged
               for row in r.shift[r.shift["large"]].itertuples(index=False)]
    if shifted and is_simulated(job.data_path):  # the simulator makes this shift on purpose
        cols = sorted({row.feature for _, row in shifted})
        say(f"note: as in the paper, rated demo sessions have more user messages, so "
            f"{len(shifted)} case stud{'y shows' if len(shifted) == 1 else 'ies show'} a "
            f"labeled-vs-unlabeled shift in {', '.join(cols)} (expected; see label_shift.csv).")
    else:
        for line in shift_warnings(shifted):
            say(line)
    say(f"written to {job.output}: " + ", ".join(f.name for f in files))
    if run_id:
        say(run_line(run_id))
    if job.mode == "in_sample":  # once, last, on the warning stream (its first line says it all)
        say(IN_SAMPLE_WARNING, file=sys.stderr)
    return effects
