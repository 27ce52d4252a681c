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

import pandas as pd

from pulse_ml import keys
from pulse_ml.config import Node, flag, names, number, text
from pulse_ml.errors import DataError, PulseError
from pulse_ml.names import file_part, write_csv
from pulse_ml.registry.run_table import HIDDEN, comparison_frame, tag_column
from pulse_ml.report.comparison import (
    EXPECTED,
    ablation_notes,
    ablation_view,
    expected_ref,
    paired_view,
    plot_subtitle,
    shared_values,
    terminal_view,
)
from pulse_ml.report.tables import fitted_table, markdown_table, say, text_table
from pulse_ml.training.comparison import ablation_frame, significance, with_paired
from pulse_ml.training.paired import NO_USERS_NOTE, PairedSettings

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
    users_from: str | None = None  # a session table with session_id, user_id (old runs)
    experiment: str = keys.TRAIN_EXPERIMENT  # where train (experiment=...) logged the runs


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
        users_from=text(cfg, "users_from"),
        experiment=text(cfg, "experiment") or keys.TRAIN_EXPERIMENT)


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
    from pulse_ml.training.paired import compare_oof, has_users
    from pulse_ml.training.promotion_rule import grouping_problem

    label, ref_run, ref_fp, ref_labels = reference
    ref_oof = registry_runs.run_oof(ref_run) if ref_run else None
    if ref_oof is None:
        return pd.DataFrame(), []
    ref_rows = table[table["run_id"] == ref_run]
    ref_group = (str(ref_rows[keys.CV_GROUP_BY].iloc[0]) or None) if len(ref_rows) else None
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


def _ablation(job: CompareSettings, table: pd.DataFrame) -> pd.DataFrame:
    """``group_by=...``: the ablation table, its files and notes."""
    from pulse_ml.env.atomic import staged_outputs
    from pulse_ml.report.plots import ablation_plot

    out = job.output
    ablation = ablation_frame(table, job.group_by)
    stem = "ablation_" + file_part("_".join(job.group_by))
    view = ablation_view(ablation, job.group_by, job.ci_ratio)
    with staged_outputs(out) as stage:  # all three files or none
        write_csv(ablation, stage / f"{stem}.csv")
        (stage / f"{stem}.md").write_text(markdown_table(view) + "\n")
        ablation_plot(ablation, stage / f"{stem}.png", job.group_by)
    say(f"ablation by {', '.join(job.group_by)}: mean ± sd over the runs of each group "
        f"(seeds); {EXPECTED} = expected CI reduction at the data's N/n, "
        f"{expected_ref(job.ci_ratio)} at N/n = {job.ci_ratio:g} (MAE: {stem}.md)")
    say(text_table(ablation_view(ablation, job.group_by, job.ci_ratio, terminal=True)))
    for note in ablation_notes(ablation, job.group_by):
        say(note)
    say(f"\nwritten: {out / f'{stem}.md'}, {out / f'{stem}.csv'}, {out / f'{stem}.png'}")
    return ablation


def run(cfg: Node) -> pd.DataFrame:
    """Entry point of ``pulse-ml compare`` (only reads the store: a read-only one is fine)."""
    from pulse_ml.env.atomic import staged_outputs
    from pulse_ml.env.dbprobe import sqlite_file
    from pulse_ml.env.locations import check_outputs
    from pulse_ml.registry import runs as registry_runs
    from pulse_ml.registry import store as tracking
    from pulse_ml.report.plots import comparison_plot, paired_plot

    job = settings_from_config(cfg)
    check_outputs("compare", [("output", job.output, "folder")], [("users_from", job.users_from)],
                  tracking.store_locations())
    none = PulseError(f"no finished model-family or LLM-judge runs in experiment "
                      f"'{job.experiment}' at {tracking.tracking_uri()}. Run "
                      "`pulse-ml train` (or `pulse-ml judge`) first.")
    uri = tracking.tracking_uri()
    if (db := sqlite_file(uri)) is not None and not db.is_file():
        raise none  # reading must not create an empty store
    runs = registry_runs.finished_runs(experiment=job.experiment)
    if job.data_fingerprint and len(runs):
        fp = runs[tag_column(keys.DATA_FINGERPRINT)].astype(str)
        judges = runs[tag_column(keys.KIND)] == keys.KIND_JUDGE  # judges have no feature data
        runs = runs[fp.str.startswith(job.data_fingerprint) | judges]
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
    table = with_paired(table, paired, reference[1] if reference else None)
    shown = table.drop(columns=["run_id", *HIDDEN])
    if shown["seed"].nunique() <= 1:
        shown = shown.drop(columns=["seed"])
    level = round(100 * (1 - job.paired.alpha))
    written = [out / "comparison.md", out / "comparison.csv", out / "comparison.png"]
    # a paired table of an earlier call would describe other runs: removed with the swap
    stale = ("paired.csv", "paired.png") if paired.empty else ()
    with staged_outputs(out, discard=stale) as stage:  # every file of this call or none
        write_csv(table.drop(columns=HIDDEN), stage / "comparison.csv")
        readable = shown.rename(columns={"ci_red_%": EXPECTED,  # expected, not measured
                                          "ci_red_ref_%": "expected_ci_red_ref_%"})
        (stage / "comparison.md").write_text(markdown_table(readable, digits_of={"time_s": 1})
                                             + "\n")
        comparison_plot(table, stage / "comparison.png", _champion(),
                        subtitle=plot_subtitle(table, reference[0] if reference else None))
        if not paired.empty:
            write_csv(paired.assign(significant=significance(paired)), stage / "paired.csv")
            paired_plot(paired, stage / "paired.png", reference[0], level)
            written += [out / "paired.csv", out / "paired.png"]
    ref = expected_ref(job.ci_ratio)
    printed, left_out = fitted_table(terminal_view(shown, job.ci_ratio), [ref, "version"],
                                     digits_of={EXPECTED: 1, ref: 1})
    say(printed)
    if left_out:
        say(f"({', '.join(left_out)} left out to fit 100 columns: see comparison.md)")
    common = shared_values(shown[["features"]])
    say(f"({'every row: ' + common + '; ' if common else ''}the full table, with ± std over "
        "folds, MAE and timings: comparison.md / .csv)")
    say(f"{EXPECTED} = expected CI reduction 1 - sqrt(1 - r² N/(n+N)) at the training data's "
        f"N/n, {ref} the same at N/n = {job.ci_ratio:g} (comparison.csv: ci_red_%, "
        "ci_red_ref_%).")
    if not paired.empty:
        units = ("users" if (paired["resampled"] == "users").all() else
                 "sessions" if (paired["resampled"] == "sessions").all() else "users/sessions")
        shared = shared_values(paired)
        say(f"\npaired with {reference[0]} on the same sessions ({level}% intervals, "
            f"bootstrap over {int(paired['n_groups'].max())} {units}, "
            f"{job.paired.n_boot} resamples; new - reference; significant on each run's "
            f"objective{'; every row: ' + shared if shared else ''}):")
        say(text_table(paired_view(paired, significance(paired), level)))
        for row in paired[paired["note"] != ""].itertuples(index=False):
            say(f"note: {row.label}: {row.note}")
    elif reference is not None and not skipped:
        say(f"\n(no other family on the data of {reference[0]} to pair with)")
    for line in skipped:
        say(f"note: {line}")
    say("\nwritten: " + ", ".join(str(p) for p in written))
    return table

