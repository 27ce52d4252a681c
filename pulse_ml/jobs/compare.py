"""Compare every tuned model family and LLM-judge baseline logged in experiment pulse-train.

Prints a table in the style of the paper's Table 2 (out-of-fold MSE / MAE / Pearson r, each
± its std over the CV folds, trials, tuning time), the expected CI reduction each predictor
would give an experiment (``1 - sqrt(1 - r^2 N/(n+N))``, at its training data's N/n and at
``ci_reduction.unlabeled_ratio``), and — for every family trained on the same labeled
sessions as the ``reference`` (default: the champion; any feature set) — the paired difference
in out-of-fold MSE and r on those sessions with a 95% interval from a bootstrap over users.
Writes comparison.{md,csv,png} and paired.{csv,png} to ``output``.

``group_by=features`` (or ``family``, ``seed``, or a list such as ``[family,features]``)
prints an ablation table instead: one row per group, mean ± sd over its runs (the seeds of a
sweep), written as ablation_<keys>.{md,csv,png}.

Examples:
    pulse-ml train -m model=ordinal_logit,random_forest,hist_gb,lightgbm && pulse-ml compare
    pulse-ml train -m features=user,agent,progression,all seed=0,1,2,3,4
    pulse-ml compare group_by=features
    pulse-ml compare reference=3          # pair every family with version 3 instead
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from pulse_ml.config import Node, flag, names, number, text
from pulse_ml.errors import PulseError
from pulse_ml.report.tables import markdown_table, say, text_table
from pulse_ml.stats.paired import expected_ci_reduction_at_ratio
from pulse_ml.training.paired import PairedSettings

_COLS = ["name", "kind", "features", "seed", "mse", "mse_std", "mae", "mae_std", "r", "r_std",
         "ci_red_%", "ci_red_ref_%", "trials", "time_s", "version", "run_id"]
GROUP_KEYS = {"family": "name", "features": "features", "seed": "seed"}


@dataclass(frozen=True)
class CompareSettings:
    """Typed settings of ``pulse-ml compare``."""

    output: Path
    latest_only: bool
    data_fingerprint: str | None
    group_by: list[str] | None
    reference: str | None
    paired: PairedSettings
    ci_ratio: float


def settings_from_config(cfg: Node) -> CompareSettings:
    """Read the composed config once (every number and choice checked here)."""
    group_by = names(cfg.get("group_by")) if cfg.get("group_by") not in (None, "none") else None
    for key in group_by or []:
        if key not in GROUP_KEYS:
            raise PulseError(f"pulse-ml compare: group_by={key} is not an option; use "
                             f"{', '.join(GROUP_KEYS)} (or a list, e.g. group_by=[family,"
                             "features]).")
    reference = text(cfg, "reference", "champion")
    return CompareSettings(
        output=Path(str(cfg.output)), latest_only=flag(cfg, "latest_only", "compare", True),
        data_fingerprint=text(cfg, "data_fingerprint"), group_by=group_by,
        reference=reference,
        paired=PairedSettings(
            n_boot=number(cfg, "paired.n_boot", "compare", 100, None, integer=True),
            alpha=number(cfg, "paired.alpha", "compare", 0, 0.5, open_interval=True),
            seed=number(cfg, "paired.seed", "compare", integer=True)),
        ci_ratio=number(cfg, "ci_reduction.unlabeled_ratio", "compare", 0, None))


def comparison_frame(runs: pd.DataFrame, latest_only: bool = True,
                     ci_ratio: float = 20.0) -> pd.DataFrame:
    """Turn ``mlflow.search_runs`` output into the comparison table (pure).

    ``ci_red_%`` is the expected CI reduction at the run's own training data (N/n of its table;
    empty when unknown, e.g. for judges), ``ci_red_ref_%`` at ``N/n = ci_ratio`` for every row.
    """
    def col(name):
        return runs[name] if name in runs else pd.Series([None] * len(runs), index=runs.index)

    kind = col("tags.kind")
    name = col("tags.family").where(kind == "family", col("tags.judge"))
    r = pd.to_numeric(col("metrics.cv_pearson"), errors="coerce")
    n_lab = pd.to_numeric(col("metrics.n_labeled"), errors="coerce")
    n_unl = pd.to_numeric(col("metrics.n_unlabeled"), errors="coerce")
    ratio = (n_unl / n_lab).where(n_lab > 0)
    own = pd.Series(np.where(ratio.notna() & r.notna(), 100 * expected_ci_reduction_at_ratio(
        r.fillna(0).to_numpy(float), ratio.fillna(0).to_numpy(float)), np.nan),
        index=runs.index)
    seed = col("tags.seed").fillna(col("params.seed")).fillna("")
    out = pd.DataFrame({
        "name": name, "kind": kind.map({"family": "model", "llm_judge": "llm judge"}),
        "features": col("tags.feature_set").fillna("raw conversation"),
        "seed": seed.astype(str).where(kind == "family", ""),
        "mse": col("metrics.cv_mse"), "mse_std": col("metrics.cv_mse_std"),
        "mae": col("metrics.cv_mae"), "mae_std": col("metrics.cv_mae_std"),
        "r": r, "r_std": col("metrics.cv_pearson_std"),
        "ci_red_%": own,
        "ci_red_ref_%": 100 * expected_ci_reduction_at_ratio(r.fillna(0).to_numpy(float),
                                                             ci_ratio),
        "trials": col("metrics.n_trials").astype("Int64"), "time_s": col("metrics.tuning_time_s"),
        "version": col("tags.registered_version").fillna("-").replace("", "-"),
        "run_id": runs["run_id"], "start": runs["start_time"],
        "data": col("tags.data_fingerprint").fillna(""),
        "labels": col("tags.label_fingerprint").fillna(""),
    })
    out = out.sort_values("start", ascending=False)
    if latest_only:
        out = out.drop_duplicates(["name", "kind", "features", "seed", "data"])
    out = out.sort_values(["kind", "mse"], ascending=[False, True])
    return out[[*_COLS, "data", "labels"]].reset_index(drop=True)


def ablation_frame(table: pd.DataFrame, group_by: list[str]) -> pd.DataFrame:
    """Mean ± sd over the runs of each group (pure); model rows only.

    Args:
        table: :func:`comparison_frame` output (``latest_only`` keeps one run per seed).
        group_by: Keys among ``family``, ``features``, ``seed``.

    Returns:
        One row per group: the keys, ``runs``, ``seeds``, then ``<metric>_mean`` and
        ``<metric>_sd`` (sample sd, ddof = 1; NaN for a single run) for mse, mae, r and the
        expected CI reductions, sorted by mean MSE.
    """
    models = table[table["kind"] == "model"].rename(columns={"name": "family"})
    if models.empty:
        raise PulseError("no model-family runs to group: run `pulse-ml train` first.")
    metrics = {"mse": "mse", "mae": "mae", "r": "r", "ci_red": "ci_red_%",
               "ci_red_ref": "ci_red_ref_%"}
    rows = []
    for key, grp in models.groupby(group_by, sort=False, dropna=False):
        values = key if isinstance(key, tuple) else (key,)
        row = dict(zip(group_by, values, strict=True))
        row.update({"runs": len(grp), "seeds": grp["seed"].nunique(),
                    "families": grp["family"].nunique(),
                    "feature_sets": grp["features"].nunique()})
        for out, src in metrics.items():
            x = pd.to_numeric(grp[src], errors="coerce")
            row[f"{out}_mean"] = float(x.mean())
            row[f"{out}_sd"] = float(x.std(ddof=1)) if x.notna().sum() > 1 else float("nan")
        rows.append(row)
    return pd.DataFrame(rows).sort_values("mse_mean").reset_index(drop=True)


def ablation_view(ablation: pd.DataFrame, group_by: list[str]) -> pd.DataFrame:
    """The printed ablation table: ``mean ± sd`` strings."""
    def pm(mean, sd, digits):
        return (f"{mean:.{digits}f}" if not np.isfinite(sd) else
                f"{mean:.{digits}f} ± {sd:.{digits}f}") if np.isfinite(mean) else "-"

    view = ablation[[*group_by, "runs", "seeds"]].copy()
    for key, label, digits in (("mse", "mse", 4), ("mae", "mae", 4), ("r", "r", 4),
                               ("ci_red", "ci_red_%", 2), ("ci_red_ref", "ci_red_ref_%", 2)):
        view[label] = [pm(m, s, digits) for m, s in zip(ablation[f"{key}_mean"],
                                                        ablation[f"{key}_sd"], strict=True)]
    return view


def _reference(reference: str | None):
    """``(label, run_id, data fingerprint, label fingerprint)`` of the reference, or None."""
    from pulse_ml.registry.models import reference_version

    return reference_version(reference)


def paired_frame(table: pd.DataFrame, reference, settings: PairedSettings) -> pd.DataFrame:
    """Paired differences vs the reference for every model row on the reference's sessions.

    A row qualifies with the reference's data fingerprint, or with its label fingerprint (the
    same sessions and ratings under another feature set).
    """
    from pulse_ml.registry import runs as registry_runs
    from pulse_ml.training.paired import compare_oof

    label, ref_run, ref_fp, ref_labels = reference
    ref_oof = registry_runs.run_oof(ref_run) if ref_run else None
    if ref_oof is None:
        return pd.DataFrame()
    rows = []
    on_sessions = (table["data"] == ref_fp) | (
        (table["labels"] == ref_labels) if ref_labels else False)
    same = table[(table["kind"] == "model") & on_sessions]
    for row in same.itertuples(index=False):
        if row.run_id == ref_run:
            continue
        oof = registry_runs.run_oof(row.run_id)
        if oof is None:
            continue
        p = compare_oof(oof, ref_oof, settings=settings)
        stats = {("boot_seed" if k == "seed" else k): v for k, v in p.as_dict().items()}
        rows.append({**stats, "label": f"{row.name} ({row.features}, seed {row.seed})",
                     "name": row.name, "features": row.features, "seed": row.seed,
                     "version": row.version, "vs": label, "run_id": row.run_id})
    return pd.DataFrame(rows)


def _with_paired(table: pd.DataFrame, paired: pd.DataFrame, ref_run: str | None) -> pd.DataFrame:
    """Columns d_mse, d_mse_ci, d_r: the paired difference with the reference, per row."""
    out = table.copy()
    out["d_mse"], out["d_mse_ci"], out["d_r"] = np.nan, "", np.nan
    out.loc[out["run_id"] == ref_run, "d_mse_ci"] = "reference"
    if paired.empty:
        return out
    by_run = paired.set_index("run_id")
    hit = out["run_id"].isin(by_run.index)
    p = by_run.reindex(out.loc[hit, "run_id"])
    out.loc[hit, "d_mse"] = p["delta_mse"].to_numpy()
    out.loc[hit, "d_r"] = p["delta_r"].to_numpy()
    out.loc[hit, "d_mse_ci"] = [f"[{lo:+.3f}, {hi:+.3f}]" for lo, hi in zip(
        p["mse_ci_lower"], p["mse_ci_upper"], strict=True)]
    return out


def _terminal_view(shown: pd.DataFrame) -> pd.DataFrame:
    """The columns that fit 100 columns: name, features, scores, CI reduction, the pairing."""
    view = pd.DataFrame({"name": shown["name"], "features": shown["features"]})
    view["mse"] = [f"{m:.3f}±{s:.3f}" if pd.notna(s) else f"{m:.3f}"
                   for m, s in zip(shown["mse"], shown["mse_std"], strict=True)]
    view["r"] = [f"{m:.3f}±{s:.3f}" if pd.notna(s) else f"{m:.3f}"
                 for m, s in zip(shown["r"], shown["r_std"], strict=True)]
    for col in ("ci_red_%", "version", "d_mse", "d_mse_ci"):
        if col in shown:
            view[col] = shown[col]
    return view


def run(cfg: Node) -> pd.DataFrame:
    """Entry point of ``pulse-ml compare``."""
    from pulse_ml.registry import runs as registry_runs
    from pulse_ml.registry import store as tracking
    from pulse_ml.report.plots import ablation_plot, comparison_plot, paired_plot

    job = settings_from_config(cfg)
    runs = registry_runs.finished_runs()
    if job.data_fingerprint and len(runs):
        same = runs["tags.data_fingerprint"].astype(str).str.startswith(job.data_fingerprint)
        runs = runs[same | (runs["tags.kind"] == "llm_judge")]  # judges have no feature data
    if runs.empty:
        raise PulseError(f"no finished model-family or LLM-judge runs in experiment "
                         f"'{tracking.TRAIN_EXPERIMENT}' at {tracking.tracking_uri()}. Run "
                         "`pulse-ml train` (or `pulse-ml judge`) first.")
    table = comparison_frame(runs, job.latest_only, job.ci_ratio)
    from pulse_ml.report.atomic import staged_outputs

    out = job.output
    if job.group_by:
        ablation = ablation_frame(table, job.group_by)
        stem = "ablation_" + "_".join(job.group_by)
        view = ablation_view(ablation, job.group_by)
        with staged_outputs(out) as stage:  # all three files or none
            ablation.to_csv(stage / f"{stem}.csv", index=False)
            (stage / f"{stem}.md").write_text(markdown_table(view) + "\n")
            ablation_plot(ablation, stage / f"{stem}.png", job.group_by)
        say(f"ablation by {', '.join(job.group_by)}: mean ± sd over the runs of each group "
              f"(seeds); expected CI reduction at the data's N/n and at N/n = "
              f"{job.ci_ratio:g}")
        say(text_table(view))
        pooled = [k for k, c in (("family", "families"), ("features", "feature_sets"))
                  if k not in job.group_by and (ablation[c] > 1).any()]
        if pooled:
            say(f"note: rows pool runs of several {' and '.join(pooled)}; add them to "
                  f"group_by (e.g. group_by=[{','.join([*pooled, *job.group_by])}]) to "
                  "separate them.")
        say("note: the sd over seeds measures tuning/estimator randomness on fixed folds; "
              "the paired interval of `pulse-ml compare` measures the data's noise.")
        say(f"\nwritten: {out / f'{stem}.md'}, {out / f'{stem}.csv'}, {out / f'{stem}.png'}")
        return ablation
    reference = _reference(job.reference)
    paired = (paired_frame(table, reference, job.paired) if reference is not None
              else pd.DataFrame())
    table = _with_paired(table, paired, reference[1] if reference else None)
    shown = table.drop(columns=["run_id", "data", "labels"])
    if shown["seed"].nunique() <= 1:
        shown = shown.drop(columns=["seed"])
    with staged_outputs(out) as stage:  # all three files or none
        table.drop(columns=["data", "labels"]).to_csv(stage / "comparison.csv", index=False)
        (stage / "comparison.md").write_text(markdown_table(shown) + "\n")
        champ = reference[0].split(" v")[-1] if reference and "champion" in reference[0] \
            else None
        comparison_plot(table, stage / "comparison.png", champ,
                        subtitle=_plot_subtitle(table, reference))
    say(text_table(_terminal_view(shown)))
    say("(the full table, with ± std over folds, MAE and timings: comparison.md / .csv)")
    say(f"ci_red_% = expected CI reduction 1 - sqrt(1 - r² N/(n+N)) at the training data's "
          f"N/n; ci_red_ref_% at N/n = {job.ci_ratio:g}.")
    written = [out / "comparison.md", out / "comparison.csv", out / "comparison.png"]
    if not paired.empty:
        paired.to_csv(out / "paired.csv", index=False)
        paired_plot(paired, out / "paired.png", reference[0])
        written += [out / "paired.csv", out / "paired.png"]
        level = round(100 * (1 - job.paired.alpha))
        say(f"\npaired with {reference[0]} on the same sessions ({level}% intervals, "
              f"bootstrap over {int(paired['n_groups'].iloc[0])} users, "
              f"{job.paired.n_boot} resamples; new - reference):")
        view = paired[["name", "features", "seed", "version", "delta_mse", "mse_ci_lower",
                       "mse_ci_upper", "delta_r", "r_ci_lower", "r_ci_upper"]].copy()
        view["significant"] = np.where(view["mse_ci_upper"] < 0, "better",
                                       np.where(view["mse_ci_lower"] > 0, "worse", "no"))
        say(text_table(view, digits=4))
    elif reference is not None:
        say(f"\n(no other family on the data of {reference[0]} to pair with)")
    say("\nwritten: " + ", ".join(str(p) for p in written))
    return table


def _plot_subtitle(table: pd.DataFrame, reference) -> str:
    """The chart's second title line: which data (fingerprints) and which reference model."""
    data = sorted({str(d)[:10] for d in table["data"] if str(d)}) or ["unrecorded"]
    return (f"data fingerprint {', '.join(data[:3])}{' …' if len(data) > 3 else ''}; "
            f"reference {reference[0] if reference else 'none'}")
