"""Compare every tuned model family and LLM-judge baseline logged in experiment pulse-train.

Prints a table in the style of the paper's Table 2 (out-of-fold MSE / MAE / Pearson r, each
± its std over the CV folds, trials, tuning time), the expected CI reduction each predictor
would give an experiment (``1 - sqrt(1 - r^2 N/(n+N))``, at its training data's N/n and at
``ci_reduction.unlabeled_ratio``), and — for every family trained on the same labeled
sessions as the ``reference`` (default: the champion; any feature set) — the paired difference
in out-of-fold MSE and r on those sessions with a ``1 - paired.alpha`` interval from a
bootstrap over users. Runs whose folds were grouped otherwise than the reference's
(``cv.group_by``) are not paired; runs logged without user ids take them from their training
table (or ``users_from``), else their sessions are resampled and the row says so. Writes
comparison.{md,csv,png} and paired.{csv,png} to ``output`` (all at once; a paired.csv of an
earlier call is removed when nothing is paired).

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
from pulse_ml.errors import DataError, PulseError
from pulse_ml.names import file_part, write_csv
from pulse_ml.registry import keys
from pulse_ml.report.tables import markdown_table, say, text_table
from pulse_ml.stats.paired import expected_ci_reduction_at_ratio
from pulse_ml.training.paired import NO_USERS_NOTE, PairedSettings

_COLS = ["name", "kind", "features", "seed", "mse", "mse_std", "mae", "mae_std", "r", "r_std",
         "ci_red_%", "ci_red_ref_%", "trials", "time_s", "objective", "cv_group_by", "version",
         "run_id"]
_HIDDEN = ["data", "labels"]
GROUP_KEYS = {"family": "name", "features": "features", "seed": "seed"}
KINDS = {keys.KIND_FAMILY: "model", keys.KIND_JUDGE: "llm judge"}


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
    users_from: str | None = None  # a session table with session_id, user_id (old runs)


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
        ci_ratio=number(cfg, "ci_reduction.unlabeled_ratio", "compare", 0, None),
        users_from=text(cfg, "users_from"))


def _tag(key: str) -> str:
    return f"tags.{key}"


def _metric(key: str) -> str:
    return f"metrics.{key}"


def comparison_frame(runs: pd.DataFrame, latest_only: bool = True,
                     ci_ratio: float = 20.0, keep: tuple[str, ...] = ()) -> pd.DataFrame:
    """Turn ``mlflow.search_runs`` output into the comparison table (pure).

    ``ci_red_%`` is the expected CI reduction at the run's own training data (N/n of its table;
    empty when unknown, e.g. for judges), ``ci_red_ref_%`` at ``N/n = ci_ratio`` for every row.
    ``latest_only`` keeps the latest run per (name, kind, features, seed, data, objective, CV
    grouping) and every run in ``keep`` (the reference's run, so an older version can still be
    paired).
    """
    def col(name):
        return runs[name] if name in runs else pd.Series([None] * len(runs), index=runs.index)

    kind = col(_tag(keys.KIND))
    family = kind == keys.KIND_FAMILY
    name = col(_tag(keys.FAMILY)).where(family, col(_tag(keys.JUDGE)))
    r = pd.to_numeric(col(_metric(keys.CV_PEARSON)), errors="coerce")
    n_lab = pd.to_numeric(col(_metric(keys.N_LABELED)), errors="coerce")
    n_unl = pd.to_numeric(col(_metric(keys.N_UNLABELED)), errors="coerce")
    ratio = (n_unl / n_lab).where(n_lab > 0)
    own = pd.Series(np.where(ratio.notna() & r.notna(), 100 * expected_ci_reduction_at_ratio(
        r.fillna(0).to_numpy(float), ratio.fillna(0).to_numpy(float)), np.nan),
        index=runs.index)
    seed = col(_tag(keys.SEED)).fillna(col(f"params.{keys.SEED}")).fillna("")
    # runs tagged since the grouping decides pairing; older family runs have the param
    grouping = col(_tag(keys.CV_GROUP_BY)).fillna(col(f"params.{keys.CV_GROUP_BY_PARAM}"))
    out = pd.DataFrame({
        "name": name, "kind": kind.map(KINDS),
        "features": col(_tag(keys.FEATURE_SET)).fillna("raw conversation"),
        "seed": seed.astype(str).where(family, ""),
        "mse": col(_metric(keys.CV_MSE)), "mse_std": col(_metric(f"{keys.CV_MSE}_std")),
        "mae": col(_metric(keys.CV_MAE)), "mae_std": col(_metric(f"{keys.CV_MAE}_std")),
        "r": r, "r_std": col(_metric(f"{keys.CV_PEARSON}_std")),
        "ci_red_%": own,
        "ci_red_ref_%": 100 * expected_ci_reduction_at_ratio(r.fillna(0).to_numpy(float),
                                                             ci_ratio),
        "trials": col(_metric(keys.N_TRIALS)).astype("Int64"),
        "time_s": col(_metric(keys.TUNING_TIME)),
        "objective": col(_tag(keys.OBJECTIVE)).where(family, None).fillna(""),
        "cv_group_by": grouping.where(family, None).fillna(""),
        "version": col(_tag(keys.REGISTERED_VERSION)).fillna("-").replace("", "-"),
        "run_id": runs["run_id"], "start": runs["start_time"],
        "data": col(_tag(keys.DATA_FINGERPRINT)).fillna(""),
        "labels": col(_tag(keys.LABEL_FINGERPRINT)).fillna(""),
    })
    out = out.sort_values("start", ascending=False)
    if latest_only:
        first = ~out.duplicated(["name", "kind", "features", "seed", "data", "objective",
                                 "cv_group_by"])
        out = out[first | out["run_id"].isin(keep)]
    out = out.sort_values(["kind", "mse"], ascending=[False, True])
    return out[[*_COLS, *_HIDDEN]].reset_index(drop=True)


def ablation_frame(table: pd.DataFrame, group_by: list[str]) -> pd.DataFrame:
    """Mean ± sd over the runs of each group (pure); model rows only.

    Args:
        table: :func:`comparison_frame` output (``latest_only`` keeps one run per seed).
        group_by: Keys among ``family``, ``features``, ``seed``.

    Returns:
        One row per group: the keys, ``runs``, ``seeds``, ``families``, ``feature_sets``,
        ``datasets`` (data fingerprints pooled), then ``<metric>_mean`` and
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
                    "feature_sets": grp["features"].nunique(),
                    "datasets": grp["data"].nunique() if "data" in grp else 1})
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


def _champion() -> str | None:
    """The champion's version number (for the chart's mark), or None."""
    from pulse_ml.registry.models import champion_version

    mv = champion_version()
    return None if mv is None else str(mv.version)


class _Users:
    """session_id -> user_id from a session table: ``users_from``, else a run's training data.

    For out-of-fold tables logged before they carried ``user_id``. Each file is read once.
    """

    def __init__(self, users_from: str | None):
        self.users_from = users_from
        self.read: dict[str, pd.Series | None] = {}

    def _from_file(self, path: str, strict: bool) -> pd.Series | None:
        from pulse_ml.sessions.readers import read_frame

        if path not in self.read:
            try:
                frame = read_frame(path)
            except DataError:
                if strict:
                    raise
                frame = None
            if frame is not None and not {"session_id", "user_id"} <= set(frame.columns):
                if strict:
                    raise DataError(path, ["users_from: the table has no session_id and "
                                           "user_id columns (all rows). Give the session "
                                           "table the models were trained on."])
                frame = None
            self.read[path] = None if frame is None else pd.Series(
                frame["user_id"].astype(str).to_numpy(),
                index=frame["session_id"].astype(str)).groupby(level=0).first()
        return self.read[path]

    def lookup(self, *run_ids: str) -> pd.Series | None:
        """The mapping for a pair of runs, or None when no table is found."""
        from pulse_ml.registry import runs as registry_runs

        if self.users_from:
            return self._from_file(self.users_from, strict=True)
        for run_id in run_ids:
            source = registry_runs.training_source(run_id)
            if source and Path(source).is_file():
                found = self._from_file(source, strict=False)
                if found is not None:
                    return found
        return None


def paired_frame(table: pd.DataFrame, reference, settings: PairedSettings,
                 users_from: str | None = None) -> tuple[pd.DataFrame, list[str]]:
    """Paired differences vs the reference for every model row on the reference's sessions.

    A row qualifies with the reference's data fingerprint, or with its label fingerprint (the
    same sessions and ratings under another feature set), and folds grouped like the
    reference's (``cv_group_by``; a row or reference of unknown grouping is paired with a note
    and no significance claim). Users come from the OOF tables, else from the runs' training
    table (or ``users_from``); without any, sessions are resampled and ``note`` says so.

    Returns:
        ``(paired, skipped)``: one row per paired run (with ``resampled``: users/sessions,
        ``objective`` and ``note``), and one line per run left out because of its folds.
    """
    from pulse_ml.registry import runs as registry_runs
    from pulse_ml.registry.promotion import grouping_problem
    from pulse_ml.training.paired import compare_oof, has_users

    label, ref_run, ref_fp, ref_labels = reference
    ref_oof = registry_runs.run_oof(ref_run) if ref_run else None
    if ref_oof is None:
        return pd.DataFrame(), []
    ref_rows = table[table["run_id"] == ref_run]
    ref_group = (str(ref_rows["cv_group_by"].iloc[0]) or None) if len(ref_rows) else None
    users = _Users(users_from)
    rows, skipped = [], []
    on_sessions = (table["data"] == ref_fp) | (
        (table["labels"] == ref_labels) if ref_labels else False)
    same = table[(table["kind"] == "model") & on_sessions]
    for row in same.itertuples(index=False):
        if row.run_id == ref_run:
            continue
        what = f"{row.name} ({row.features}, seed {row.seed})"
        folds = grouping_problem(row.cv_group_by or None, ref_group, label)
        if folds is not None and row.cv_group_by and ref_group:
            skipped.append(f"{what}: not paired, {folds}")
            continue
        oof = registry_runs.run_oof(row.run_id)
        if oof is None:
            continue
        mapping = None if has_users(oof, ref_oof) else users.lookup(row.run_id, ref_run)
        p = compare_oof(oof, ref_oof, mapping, settings=settings)
        by_users = has_users(oof, ref_oof, mapping)
        notes = [] if by_users else [NO_USERS_NOTE]
        if folds is not None:
            notes.append("CV grouping unknown: no significance claim")
        stats = {("boot_seed" if k == "seed" else k): v for k, v in p.as_dict().items()}
        rows.append({**stats, "label": what, "name": row.name, "features": row.features,
                     "seed": row.seed, "version": row.version, "vs": label,
                     "objective": row.objective or keys.CV_MSE,
                     "resampled": "users" if by_users else "sessions",
                     "note": "; ".join(notes), "run_id": row.run_id})
    return pd.DataFrame(rows), skipped


def significance(paired: pd.DataFrame) -> list[str]:
    """``better``/``worse``/``no`` per row on the row's objective: Δr for cv_pearson, else ΔMSE.

    A row whose folds are of unknown grouping gets ``no claim``.
    """
    out = []
    for row in paired.itertuples(index=False):
        if "grouping unknown" in str(getattr(row, "note", "")):
            out.append("no claim")
            continue
        if row.objective == keys.CV_PEARSON:
            verdict = ("better" if row.r_ci_lower > 0 else "worse" if row.r_ci_upper < 0
                       else "no")
            out.append(f"{verdict} (Δr)")
        else:
            verdict = ("better" if row.mse_ci_upper < 0 else "worse" if row.mse_ci_lower > 0
                       else "no")
            out.append(f"{verdict} (ΔMSE)")
    return out


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
    """The columns that fit 100 columns: name, features, scores, both CI reductions, ΔMSE.

    The paired intervals follow in their own table; MSE's ± std is in comparison.md.
    """
    view = pd.DataFrame({"name": shown["name"], "features": shown["features"]})
    view["mse"] = shown["mse"]
    view["r"] = [f"{m:.3f}±{s:.3f}" if pd.notna(s) else f"{m:.3f}"
                 for m, s in zip(shown["r"], shown["r_std"], strict=True)]
    for col in ("ci_red_%", "ci_red_ref_%", "version"):
        if col in shown:
            view[col] = shown[col]
    if "cv_group_by" in shown and shown.loc[shown["kind"] == "model", "cv_group_by"].nunique() > 1:
        view["folds"] = shown["cv_group_by"]  # runs that differ only in cv.group_by
    if "d_mse" in shown:
        view["d_mse"] = ["reference" if ci == "reference" else
                         (f"{d:+.3f}" if pd.notna(d) else "")
                         for d, ci in zip(shown["d_mse"], shown["d_mse_ci"], strict=True)]
    return view


def _ablation(job: CompareSettings, table: pd.DataFrame) -> pd.DataFrame:
    """``group_by=...``: the ablation table, its files and notes."""
    from pulse_ml.env.atomic import staged_outputs
    from pulse_ml.report.plots import ablation_plot

    out = job.output
    ablation = ablation_frame(table, job.group_by)
    stem = "ablation_" + file_part("_".join(job.group_by))
    view = ablation_view(ablation, job.group_by)
    with staged_outputs(out) as stage:  # all three files or none
        write_csv(ablation, stage / f"{stem}.csv")
        (stage / f"{stem}.md").write_text(markdown_table(view) + "\n")
        ablation_plot(ablation, stage / f"{stem}.png", job.group_by)
    say(f"ablation by {', '.join(job.group_by)}: mean ± sd over the runs of each group "
        f"(seeds); expected CI reduction at the data's N/n and at N/n = "
        f"{job.ci_ratio:g}")
    say(text_table(view))
    for note in ablation_notes(ablation, job.group_by):
        say(note)
    say(f"\nwritten: {out / f'{stem}.md'}, {out / f'{stem}.csv'}, {out / f'{stem}.png'}")
    return ablation


def ablation_notes(ablation: pd.DataFrame, group_by: list[str]) -> list[str]:
    """What the rows pool: several families, feature sets or data fingerprints (pure)."""
    notes = []
    pooled = [k for k, c in (("family", "families"), ("features", "feature_sets"))
              if k not in group_by and (ablation[c] > 1).any()]
    if pooled:
        notes.append(f"note: rows pool runs of several {' and '.join(pooled)}; add them to "
                     f"group_by (e.g. group_by=[{','.join([*pooled, *group_by])}]) to "
                     "separate them.")
    if "datasets" in ablation and (ablation["datasets"] > 1).any():
        notes.append(f"note: rows pool runs on {int(ablation['datasets'].max())} different "
                     "training data (data fingerprints): their sd mixes data changes with "
                     "seeds; pass data_fingerprint=<prefix> to keep one.")
    notes.append("note: the sd over seeds measures tuning/estimator randomness on fixed folds; "
                 "the paired interval of `pulse-ml compare` measures the data's noise.")
    return notes


def run(cfg: Node) -> pd.DataFrame:
    """Entry point of ``pulse-ml compare`` (only reads the store: a read-only one is fine)."""
    from pulse_ml.env.atomic import staged_outputs
    from pulse_ml.env.locations import check_outputs
    from pulse_ml.registry import runs as registry_runs
    from pulse_ml.registry import store as tracking
    from pulse_ml.report.plots import comparison_plot, paired_plot

    job = settings_from_config(cfg)
    check_outputs("compare", [("output", job.output, "folder")], [("users_from", job.users_from)])
    none = PulseError(f"no finished model-family or LLM-judge runs in experiment "
                      f"'{tracking.TRAIN_EXPERIMENT}' at {tracking.tracking_uri()}. Run "
                      "`pulse-ml train` (or `pulse-ml judge`) first.")
    uri = tracking.tracking_uri()
    if uri.startswith("sqlite:///") and not Path(uri[len("sqlite:///"):]).is_file():
        raise none  # reading must not create an empty store
    runs = registry_runs.finished_runs()
    if job.data_fingerprint and len(runs):
        fp = runs[_tag(keys.DATA_FINGERPRINT)].astype(str)
        runs = runs[fp.str.startswith(job.data_fingerprint)
                    | (runs[_tag(keys.KIND)] == keys.KIND_JUDGE)]  # judges have no feature data
    if runs.empty:
        raise none
    reference = None if job.group_by else _reference(job.reference)
    keep = (reference[1],) if reference and reference[1] else ()
    table = comparison_frame(runs, job.latest_only, job.ci_ratio, keep)
    if job.group_by:
        return _ablation(job, table)
    out = job.output
    paired, skipped = (paired_frame(table, reference, job.paired, job.users_from)
                       if reference is not None else (pd.DataFrame(), []))
    table = _with_paired(table, paired, reference[1] if reference else None)
    shown = table.drop(columns=["run_id", *_HIDDEN])
    if shown["seed"].nunique() <= 1:
        shown = shown.drop(columns=["seed"])
    level = round(100 * (1 - job.paired.alpha))
    written = [out / "comparison.md", out / "comparison.csv", out / "comparison.png"]
    # a paired table of an earlier call would describe other runs: removed with the swap
    stale = ("paired.csv", "paired.png") if paired.empty else ()
    with staged_outputs(out, discard=stale) as stage:  # every file of this call or none
        write_csv(table.drop(columns=_HIDDEN), stage / "comparison.csv")
        (stage / "comparison.md").write_text(markdown_table(shown) + "\n")
        comparison_plot(table, stage / "comparison.png", _champion(),
                        subtitle=_plot_subtitle(table, reference))
        if not paired.empty:
            write_csv(paired.assign(significant=significance(paired)), stage / "paired.csv")
            paired_plot(paired, stage / "paired.png", reference[0], level)
            written += [out / "paired.csv", out / "paired.png"]
    say(text_table(_terminal_view(shown)))
    say("(the full table, with ± std over folds, MAE and timings: comparison.md / .csv)")
    say(f"ci_red_% = expected CI reduction 1 - sqrt(1 - r² N/(n+N)) at the training data's "
        f"N/n; ci_red_ref_% at N/n = {job.ci_ratio:g}.")
    if not paired.empty:
        units = ("users" if (paired["resampled"] == "users").all() else
                 "sessions" if (paired["resampled"] == "sessions").all() else "users/sessions")
        say(f"\npaired with {reference[0]} on the same sessions ({level}% intervals, "
            f"bootstrap over {int(paired['n_groups'].max())} {units}, "
            f"{job.paired.n_boot} resamples; new - reference; significant on each run's "
            "objective):")
        view = paired[["name", "features", "seed", "version", "delta_mse", "mse_ci_lower",
                       "mse_ci_upper", "delta_r", "r_ci_lower", "r_ci_upper"]].copy()
        view["significant"] = significance(paired)
        say(text_table(view, digits=4))
        for row in paired[paired["note"] != ""].itertuples(index=False):
            say(f"note: {row.label}: {row.note}")
    elif reference is not None and not skipped:
        say(f"\n(no other family on the data of {reference[0]} to pair with)")
    for line in skipped:
        say(f"note: {line}")
    say("\nwritten: " + ", ".join(str(p) for p in written))
    return table


def _plot_subtitle(table: pd.DataFrame, reference) -> str:
    """The chart's second title line: which data (fingerprints) and which reference model."""
    data = sorted({str(d)[:10] for d in table["data"] if str(d)}) or ["unrecorded"]
    return (f"data fingerprint {', '.join(data[:3])}{' …' if len(data) > 3 else ''}; "
            f"reference {reference[0] if reference else 'none'}")
