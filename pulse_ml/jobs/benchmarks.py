"""Human effect per task type (Delta_H) vs benchmark deltas (Delta_B), as the paper's Table 3.

Each comparison (conf/catalog/task_benchmarks/<name>.yaml: the paper's claude37_vs_claude4 and
claude4_vs_gpt5 are shipped) lists task types with a benchmark delta and the session-table
categories (column ``category_column``, default task_category) that make up its human subset.

source=model (default): for each task type, the PPI++ effect between the case study's two arms on
that subset, with honest (cross-fitted) predictions of the registered model ``model_uri``; in
stars and in % of the control mean (Delta_H, as the paper). Task types with fewer than
``min_labeled`` labeled sessions in an arm (paper: 35) or no mapped category are skipped with a
note. source=paper: Delta_H is the table's own printed column (no model, no data).

Either way it reports Pearson r(Delta_H, Delta_B) with a seeded bootstrap CI over task types,
always also for the table's own columns, beside the value the paper prints (0.66 / -0.18; the
text says -0.11 for claude4_vs_gpt5), and says when they differ. Writes deltas.csv,
categories.csv (source=model), correlation.{csv,json}, benchmarks.md and scatter.png to
``output``.

Examples:
    pulse-ml benchmarks source=paper
    pulse-ml benchmarks comparisons=[claude4_vs_gpt5] min_labeled=35
    pulse-ml benchmarks comparisons=[my_benchmarks.yaml] category_column=task_type
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from pulse_ml import keys
from pulse_ml.config import Node, choice, names, number
from pulse_ml.errors import PulseError
from pulse_ml.inference.effects import CLUSTER_MODES, InferenceSettings
from pulse_ml.inference.task_deltas import (
    BenchmarkComparison,
    category_effects,
    correlate,
    correlation_sentences,
    human_deltas,
    load_comparisons,
    paper_deltas,
)
from pulse_ml.names import write_csv
from pulse_ml.report.plots import task_delta_scatter
from pulse_ml.report.tables import markdown_table, text_table


@dataclass(frozen=True)
class BenchmarksJob:
    """Typed settings of ``pulse-ml benchmarks``."""

    source: str
    comparisons: tuple[str, ...] | None
    model_uri: str
    data_path: str
    category_column: str
    min_labeled: int
    settings: InferenceSettings
    n_boot: int
    seed: int
    output: Path
    case_study_dirs: tuple[str, ...] = ()


def settings_from_config(cfg: Node) -> BenchmarksJob:
    """Read the composed config once."""
    source = choice(cfg, "source", "benchmarks",
                    {"model": "Delta_H from the session table",
                     "paper": "Table 3's own Delta_H column"})
    clusters = choice(cfg, "clusters", "benchmarks", CLUSTER_MODES)
    min_labeled = number(cfg, "min_labeled", "benchmarks", 2, None, integer=True)
    n_boot = number(cfg, "bootstrap.n", "benchmarks", 100, None, integer=True)
    seed = number(cfg, "bootstrap.seed", "benchmarks", integer=True)
    selected = names(cfg.get("comparisons"))
    comparisons = None if selected is None else tuple(selected)
    return BenchmarksJob(
        source=source, comparisons=comparisons, model_uri=str(cfg.model_uri),
        data_path=str(cfg.data.path), category_column=str(cfg.category_column),
        min_labeled=min_labeled,
        settings=InferenceSettings(alpha=number(cfg, "alpha", "benchmarks", 0, 1,
                                                open_interval=True),
                                   clusters=clusters == "user_id", n_permutations=0, seed=seed),
        n_boot=n_boot, seed=seed, output=Path(str(cfg.output)),
        case_study_dirs=tuple(str(d) for d in (cfg.get("case_study_dirs") or [])))


def _model_deltas(job: BenchmarksJob, comparisons: list[BenchmarkComparison]):
    """Delta_H per row (and per category) from the session table and the registered model."""
    from pulse_ml.inference.honest import honest_data
    from pulse_ml.registry.analysis import open_model
    from pulse_ml.sessions.case_studies import load_configured
    from pulse_ml.sessions.readers import read_frame

    raw = read_frame(job.data_path)
    if job.category_column not in raw.columns:
        raise PulseError(f"{job.data_path}: column '{job.category_column}' (category_column) is "
                         f"missing. Columns: {', '.join(map(str, raw.columns[:15]))}. Set "
                         "category_column=<column> or add the column.")
    in_data = set(raw["case_study"].dropna().astype(str)) if "case_study" in raw else set()
    notes, wanted = [], []
    for comp in comparisons:
        if comp.case_study in in_data:
            wanted.append(comp)
        elif job.comparisons is not None:
            raise PulseError(f"{job.data_path}: column 'case_study' has no session of case "
                             f"study '{comp.case_study}' (comparison '{comp.name}'); present: "
                             f"{', '.join(sorted(in_data)) or 'none'}. Pick another comparison "
                             "or use source=paper.")
        else:
            notes.append(f"comparison '{comp.name}' skipped: case study '{comp.case_study}' "
                         "is not in the data.")
    if not wanted:
        raise PulseError(f"{job.data_path}: none of the comparisons' case studies "
                         f"({', '.join(c.case_study for c in comparisons)}) is in column "
                         "'case_study'. Use source=paper to correlate the paper's own columns.")
    model = open_model(job.model_uri)
    data = honest_data(raw, job.data_path, model.ensemble, load_configured(job.case_study_dirs),
                       [c.case_study for c in wanted])
    table, preds = data.table, data.predictions
    deltas, cats = [], []
    for comp in wanted:
        study = table.case_study(comp.case_study)
        deltas.append(human_deltas(comp, table, preds, study, job.category_column,
                                   job.min_labeled, job.settings))
        cat = category_effects(table, preds, study, job.category_column, job.min_labeled,
                               job.settings)
        cat.insert(0, "comparison", comp.name)
        cats.append(cat)
    meta = {"model": model.uri, keys.MODEL_FAMILY: model.family,
            keys.MODEL_VERSION: model.version_number}
    notes = [*notes, *table.notes, *data.notes]
    return wanted, deltas, pd.concat(cats, ignore_index=True), notes, meta


def _write(job: BenchmarksJob, deltas: pd.DataFrame, cats: pd.DataFrame | None,
           corr: pd.DataFrame, lines: list[str], notes: list[str], meta: dict) -> list[Path]:
    from pulse_ml.env.atomic import staged_outputs

    out = job.output
    names = ["deltas.csv", "correlation.csv", "correlation.json", "benchmarks.md", "scatter.png"]
    if cats is not None:
        names.insert(1, "categories.csv")
    md = [f"# Human Delta_H vs benchmark Delta_B (source={job.source})", ""]
    md += [f"- {line}" for line in lines] + [""]
    md += [markdown_table(_view(deltas), 2), "", markdown_table(corr, 3)]
    if cats is not None:
        md += ["", "## Effect per category", "", markdown_table(cats, 3)]
    md += [""] + [f"> note: {n}" for n in notes]
    with staged_outputs(out) as stage:  # every file complete, or none (earlier ones kept)
        write_csv(deltas, stage / "deltas.csv")
        write_csv(corr, stage / "correlation.csv")
        (stage / "correlation.json").write_text(json.dumps(
            {**meta, "summary": lines, "notes": notes,
             "correlations": corr.to_dict(orient="records")}, indent=2, default=str))
        if cats is not None:
            write_csv(cats, stage / "categories.csv")
        (stage / "benchmarks.md").write_text("\n".join(md) + "\n")
        task_delta_scatter(deltas, corr, stage / "scatter.png", _subtitle(job, meta))
    return [out / n for n in names]


def _view(deltas: pd.DataFrame) -> pd.DataFrame:
    cols = ["comparison", "task_type", "benchmark", "categories", "delta_b", "delta_h_paper",
            "delta_h", "delta_h_ci_lower", "delta_h_ci_upper", "effect", "n_labeled_control",
            "n_labeled_treatment", "used", "note"]
    view = deltas[cols].rename(columns={"delta_h_paper": "dH_paper", "delta_h": "dH",
                                        "delta_h_ci_lower": "dH_lo", "delta_h_ci_upper": "dH_hi",
                                        "delta_b": "dB", "n_labeled_control": "n_c",
                                        "n_labeled_treatment": "n_t"})
    if (deltas["source"] == "paper").all():
        view = view.drop(columns=["dH_lo", "dH_hi", "effect", "n_c", "n_t", "categories"])
    return view


def run(cfg) -> pd.DataFrame:
    """Entry point of ``pulse-ml benchmarks``; returns the correlation table."""
    job = settings_from_config(cfg)
    comparisons = load_comparisons(job.comparisons)
    alpha = job.settings.alpha
    corr_rows = [correlate(paper_deltas(c), c, "paper", job.n_boot, alpha, job.seed)
                 for c in comparisons]
    notes: list[str] = []
    cats = None
    meta: dict = {"source": job.source}
    if job.source == "paper":
        frames = [paper_deltas(c) for c in comparisons]
    else:
        wanted, frames, cats, notes, info = _model_deltas(job, comparisons)
        meta.update(info)
        corr_rows += [correlate(d, c, "model", job.n_boot, alpha, job.seed)
                      for c, d in zip(wanted, frames, strict=True)]
        for d in frames:
            for row in d[~d["used"].astype(bool)].itertuples(index=False):
                notes.append(f"{row.comparison}: '{row.task_type}' skipped: {row.note}.")
    deltas = pd.concat(frames, ignore_index=True)
    deltas.insert(1, "source", job.source)
    corr = pd.DataFrame(corr_rows)
    lines = correlation_sentences(corr_rows)
    files = _write(job, deltas, cats, corr, lines, notes, meta)
    print(text_table(_view(deltas), digits=2))
    print()
    print(text_table(corr, digits=3))
    print()
    for line in lines:
        print(line)
    for note in notes:
        print(f"note: {note}")
    print(f"\nwritten to {job.output}: " + ", ".join(f.name for f in files))
    return corr


def _subtitle(job: BenchmarksJob, meta: dict) -> str:
    """The scatter's title: the data and model its Delta_H come from."""
    if meta.get("model"):
        return (f"Delta_H from {Path(job.data_path).name}, model {meta['model']} (version "
                f"{meta.get(keys.MODEL_VERSION)}, {meta.get(keys.MODEL_FAMILY)}), PPI++")
    return f"Delta_H from {job.source} (no session data or model)"
