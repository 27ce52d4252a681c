"""What each user's earlier ratings (the ``user_history`` kind) add: r, CI reduction, cost.

1. **ConvAI2** (real volunteers; 593 rated chats, 789 users): ``pulse-ml train`` (one family,
   ``--trials`` TPE trials, 5 folds grouped by user, seed 42) with
   ``examples/convai2/features_text.yaml`` and with ``features_history.yaml`` (the same plus
   ``user_history``), then ``pulse-ml infer`` of each version: the out-of-fold r and the
   PPI++ CI reduction of both case studies, before/after.
2. **Demo** simulated with ConvAI2's rater habit (``users.user_sd=0.5``): the paper features
   (``all``) and ``all_history``, train + infer, before/after.
3. **Cost**: 5-fold cross-fit time of the same family and parameters on the demo's paper
   features with and without ``user_history`` (the kind's columns are computed once per table,
   at load; the ratio is the model's extra columns plus that pass), median of ``--repeat``.

Run (from the repository root; about 10-20 minutes on 2 busy cores):
    python perf/history_bench.py     # PULSE_SHARED_DIR=/work/shared in a git worktree
    python perf/history_bench.py --trials 5 --family lightgbm --out /tmp/history_bench.md
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "perf"))
SHARED = Path(os.environ.get("PULSE_SHARED_DIR", REPO.parent / "shared")) / "data" / "real"


def convai2(table: Path, family: str, trials: int) -> list[dict]:
    """Train and infer with and without user_history; one row per feature set."""
    sets = [str(REPO / "examples" / "convai2" / f"{n}.yaml")
            for n in ("features_text", "features_history")]
    studies = f"case_study_dirs=[{REPO / 'examples' / 'convai2' / 'case_study'}]"
    rows = before_after(table, family, trials, sets, [studies])
    # + isotonic recalibration as a tuned step (kept by Optuna only where CV says so)
    tuned = before_after(table, family, trials, sets[1:], [studies], [RECAL])
    return rows + [{**row, "features": row["features"] + " + recalibrate"} for row in tuned]


def demo(family: str, trials: int, user_sd: float) -> list[dict]:
    """The demo simulated with ConvAI2's rater habit: paper features with/without history."""
    from _common import demo_data, fresh_home

    home = fresh_home("history-demo-")
    table = demo_data(home, f"users.user_sd={user_sd}")
    return before_after(table, family, trials, ["all", "all_history"], [])


RECAL = "+model.search_space.recalibrate={type:categorical,choices:[none,isotonic]}"


def before_after(table: Path, family: str, trials: int, sets: list[str],
                 extra: list[str], train_extra: tuple[str, ...] | list[str] = ()) -> list[dict]:
    """``train`` then ``infer`` of each feature set: r, CI reductions, training seconds."""
    from pulse_ml.config import compose
    from pulse_ml.jobs import infer, train

    rows = []
    for features in sets:
        name = Path(features).stem
        start = time.perf_counter()
        fit = train.run(compose("train", [
            f"data.path={table}", f"model={family}", f"tuning.n_trials={trials}",
            f"features={features}", "cv.group_by=user_id", "register=always",
            "progress=false", *train_extra]))
        seconds = time.perf_counter() - start
        effects = infer.run(compose("infer", [
            f"data.path={table}", f"model_uri=models:/pulse-satisfaction/{fit.version}",
            *extra, "permutations=200"]))
        aug = effects[effects["ci_reduction_pct"].notna()]
        row = {"features": name, "r": fit.metrics.pearson, "mse": fit.metrics.mse,
               "train_s": seconds}
        if train_extra:
            row["recalibrate"] = fit.best_params.get("recalibrate", "none")
        for rec in aug.itertuples():
            row[f"{rec.case_study} CI red %"] = rec.ci_reduction_pct
            row[f"{rec.case_study} effect"] = (f"{rec.effect:+.3f} [{rec.ci_lower:+.3f}, "
                                               f"{rec.ci_upper:+.3f}]")
        rows.append(row)
    return rows


def cost(family: str, repeat: int) -> dict:
    """Median 5-fold cross-fit seconds on the demo with and without user_history."""
    import yaml
    from _common import demo_data, fresh_home

    from pulse_ml.config import compose
    from pulse_ml.jobs import train
    from pulse_ml.models.crossfit import fit_crossfit
    from pulse_ml.models.factory import build_pipeline
    from pulse_ml.sessions.feature_sets import feature_set_from_mapping
    from pulse_ml.sessions.table import load_sessions
    from pulse_ml.training.family import training_data
    from pulse_ml.training.folds import make_folds

    home = fresh_home("history-cost-")
    data = demo_data(home)
    spec = train.model_spec(compose("train", [f"model={family}"]))
    base = yaml.safe_load((REPO / "conf" / "features" / "all.yaml").read_text())
    hist = yaml.safe_load((REPO / "conf" / "features" / "all_history.yaml").read_text())
    out = {}
    for label, node in (("without", base), ("with", hist)):
        features = feature_set_from_mapping(node)
        times = []
        for _ in range(repeat):
            start = time.perf_counter()
            table = load_sessions(data, features)  # history columns computed here, once
            labeled, y = training_data(table)
            folds = make_folds(len(y), 5, 42, labeled["user_id"].to_numpy())
            fit_crossfit(lambda f=features: build_pipeline(spec, f), labeled, y, folds,
                         features, spec.name)
            times.append(time.perf_counter() - start)
        out[label] = float(np.median(times))
        out[f"n_{label}"] = len(y)
    out["ratio"] = out["with"] / out["without"]
    return out


def _markdown(frame: pd.DataFrame) -> str:
    """A plain Markdown table (no tabulate dependency)."""
    cells = [[f"{v:.3f}" if isinstance(v, float) else str(v) for v in row]
             for row in frame.itertuples(index=False)]
    head = "| " + " | ".join(frame.columns) + " |"
    rule = "|" + "---|" * len(frame.columns)
    return "\n".join([head, rule, *("| " + " | ".join(c) + " |" for c in cells)])


def main() -> None:
    """Run both parts and print (and optionally write) Markdown tables."""
    from _common import fresh_home

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--convai2", type=Path, default=SHARED / "convai2-wild-evaluation"
                    / "data_volunteers.json")
    ap.add_argument("--family", default="random_forest")
    ap.add_argument("--trials", type=int, default=15)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--skip-convai2", action="store_true")
    ap.add_argument("--skip-demo", action="store_true")
    ap.add_argument("--skip-cost", action="store_true")
    ap.add_argument("--user-sd", type=float, default=0.5, help="the demo's rater habit")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    lines = []
    if not args.skip_convai2:
        home = fresh_home("history-convai2-")
        table = home / "convai2_sessions.parquet"
        import subprocess

        subprocess.run([sys.executable, str(REPO / "examples" / "convai2" / "prepare.py"),
                        "--input", str(args.convai2), "--out", str(table)], check=True,
                       capture_output=True)
        rows = convai2(table, args.family, args.trials)
        lines += [f"ConvAI2 ({args.family}, {args.trials} trials, folds grouped by user):", "",
                  _markdown(pd.DataFrame(rows)), ""]
    if not args.skip_demo:
        rows = demo(args.family, args.trials, args.user_sd)
        lines += [f"demo (users.user_sd={args.user_sd}, {args.family}, {args.trials} trials):", "",
                  _markdown(pd.DataFrame(rows)), ""]
    c = None if args.skip_cost else cost(args.family, args.repeat)
    if c is not None:
        lines += [f"cost ({args.family}, demo, {c['n_with']} labeled, median of "
                  f"{args.repeat}): {c['without']:.2f} s without, {c['with']:.2f} s with "
                  f"user_history (ratio {c['ratio']:.2f})"]
    text = "\n".join(lines)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
