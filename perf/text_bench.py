"""Out-of-fold r of the `text` feature kind on two real rating datasets (USS and ConvAI2).

For each feature set (structured columns only, each text encoder alone, the default
``{kind: text}``, all encoders combined) and each model family (the ``conf/model`` defaults,
untuned, as ``pulse-ml train`` builds them with ``build_pipeline``), the 5 fold models are fitted
with ``fit_crossfit`` on the labeled sessions and the out-of-fold Pearson r / MSE are reported,
with the fit time per fold (cold = text caches cleared first, so it includes encoding the texts)
and the peak memory of the process. ``--trials N`` also runs an Optuna study of N trials (the
pulse ``CVObjective``, TPE seed 42) per family with and without text, to measure the tuning cost.

* USS (Sun et al. 2021): 3,500 dialogues of SGD, MultiWOZ, ReDial, CCPE; rating = dialogue-level
  satisfaction averaged over 3-7 annotators; structured features = corpus + number of user
  turns; text = the user turns. Plain shuffled 5-fold CV (one dialogue per user).
* ConvAI2 wild evaluation: 593 rated chats; structured features = examples/convai2/features.yaml;
  text = the volunteer's messages (and the bot's); folds grouped by user, as `pulse-ml train`.

Run (about 25 minutes on 2 busy cores; pass the data folders when ../shared is elsewhere):
    python perf/text_bench.py
    python perf/text_bench.py --uss-families lightgbm --datasets uss --trials 10 \
        --sets "structured only,default" --out /tmp/text_bench.md
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import resource
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
SHARED = REPO.parent / "shared" / "data" / "real"

TEXT_ALONE = {  # one encoder at a time
    "vader (lexicon)": {"encoders": "vader"},
    "tfidf stack": {"encoders": "stack", "stack_on": "tfidf"},
    "hashing stack": {"encoders": "stack", "stack_on": "hashing"},
    "wordllama stack": {"encoders": "stack", "stack_on": "wordllama"},
}
TEXT_COMBINED = {
    "default {kind: text}": {},
    "tfidf stack + vader columns": {"encoders": "stack+vader", "stack_on": "tfidf"},
    "combined": {"encoders": "stack+vader", "stack_on": "tfidf+wordllama+vader"},
    "combined, stack_alpha tuned": {
        "encoders": "stack+vader", "stack_on": "tfidf+wordllama+vader",
        "search_space": {"stack_alpha": {"type": "float", "low": 0.3, "high": 30.0,
                                         "log": True}}},
}


def peak_rss_mb() -> float:
    """Peak resident memory of this process (MB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _load_module(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def uss_table(folder: Path) -> pd.DataFrame:
    """The USS session table (examples/uss/prepare.py), all labels."""
    prepare = _load_module(REPO / "examples" / "uss" / "prepare.py", "uss_prepare")
    return prepare.build_table(folder)


def convai2_table(path: Path) -> pd.DataFrame:
    """The ConvAI2 session table of examples/convai2/prepare.py plus user_text / bot_text."""
    prepare = _load_module(REPO / "examples" / "convai2" / "prepare.py", "convai2_prepare")
    chats = prepare.read_chats(path, None, 0)
    table = prepare.build_table(chats, prepare.parse_pairs(prepare.DEFAULT_PAIRS),
                                prepare.load_lexicon(prepare.DEFAULT_LEXICON))
    turns = prepare.explode_turns(chats)
    for side, mask in (("user_text", turns["is_user"]), ("bot_text", ~turns["is_user"])):
        joined = turns[mask].groupby("row")["text"].agg("\n".join)
        table[side] = joined.reindex(range(len(table))).fillna("").to_numpy()
    return table


def model_specs(families: list[str]) -> dict:
    """Model families as `pulse-ml train` composes them (seed 42)."""
    from pulse_ml.config import compose
    from pulse_ml.jobs.train import model_spec

    return {f: model_spec(compose("train", [f"model={f}"])) for f in families}


def feature_sets(base: dict, text_cols: list[str]) -> dict:
    """Name -> FeatureSet for the structured set, each encoder alone, and combined."""
    from pulse_ml.sessions.feature_sets import feature_set_from_mapping

    def fs(name, cols):
        return feature_set_from_mapping({"name": name, "columns": cols})

    main = text_cols[0]
    out = {"structured only": fs("structured", base)}
    for label, opts in TEXT_ALONE.items():
        out[f"{label} alone"] = fs(label, {main: {"kind": "text", **opts}})
    for label, opts in TEXT_ALONE.items():
        out[f"structured + {label}"] = fs(label, {**base, main: {"kind": "text", **opts}})
    for label, opts in TEXT_COMBINED.items():
        out[f"structured + {label}"] = fs(label, {**base, main: {"kind": "text", **opts}})
    for extra in text_cols[1:]:
        for label in ("default {kind: text}", "combined"):
            opts = {**TEXT_ALONE, **TEXT_COMBINED}[label]
            out[f"structured + {label} ({main} + {extra})"] = fs(
                f"{label}2", {**base, main: {"kind": "text", **opts},
                              extra: {"kind": "text", **opts}})
    return out


def evaluate(frame: pd.DataFrame, y: np.ndarray, folds: np.ndarray, sets: dict, specs: dict,
             trials: int, count_cache: tuple[bool, ...] = (True,)) -> list[dict]:
    """Per (feature set, family): a cold cross-fit with the family's defaults, then tuning.

    The cold fit clears the text caches first, so its time per fold includes encoding the
    texts; the Optuna study (the pulse ``CVObjective``, objective ``cv_mse``, median pruning,
    TPE seed 42, as ``pulse-ml train``) starts from cleared caches as well. Its first trial
    encodes the texts (VADER, WordLlama, the n-gram counts) and fits each fold's text
    sub-model; later trials reuse them (memoised by content) and refit the structured model
    only. ``count_cache`` = (False, True) runs each text set both without and with the stored
    n-gram counts (``pulse_ml.models.text_tfidf.USE_COUNT_CACHE``), in the same process.
    """
    import optuna
    from threadpoolctl import threadpool_limits

    from pulse_ml.models import text_cache, text_tfidf
    from pulse_ml.models.crossfit import fit_crossfit
    from pulse_ml.models.factory import build_pipeline
    from pulse_ml.sessions.text_options import text_search_space
    from pulse_ml.training.metrics import cv_metrics
    from pulse_ml.training.tuning import CVObjective

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    rows = []
    k = len(np.unique(folds))
    runs = [(label, fs, family, spec, cache) for label, fs in sets.items()
            for family, spec in specs.items()
            for cache in (count_cache if fs.of_kind("text") else [True])]
    for label, fs, family, spec, cache in runs:
        text_tfidf.USE_COUNT_CACHE = cache
        if len(count_cache) > 1 and fs.of_kind("text"):
            family = f"{family} (count cache {'on' if cache else 'off'})"
        text_cache.clear_text_caches()
        t0 = time.perf_counter()
        with threadpool_limits(limits=1):
            ens = fit_crossfit(lambda spec=spec, fs=fs: build_pipeline(spec, fs), frame, y,
                               folds, fs, family)
        cold = (time.perf_counter() - t0) / k
        m = cv_metrics(y, ens.oof["prediction"].to_numpy(), folds)
        row = {"feature set": label, "family": family, "r default": m.pearson,
               "s/fold cold": cold, "r tuned": np.nan, "mse tuned": np.nan,
               "tuning s": np.nan, "1st trial s": np.nan, "later trials s": np.nan}
        if trials and spec.search_space:
            text_cache.clear_text_caches()
            tuned = dataclasses.replace(spec, search_space=spec.search_space
                                        + text_search_space(fs))
            objective = CVObjective(frame, y, folds, tuned, fs, "cv_mse", prune=True)
            study = optuna.create_study(direction="minimize",
                                        sampler=optuna.samplers.TPESampler(seed=42),
                                        pruner=optuna.pruners.MedianPruner(5, 1))
            t0 = time.perf_counter()
            study.optimize(objective, n_trials=trials)
            best = study.best_trial.user_attrs["metrics"]
            spans = [t.duration.total_seconds() for t in study.trials if t.duration]
            row.update({"r tuned": best["cv_pearson"], "mse tuned": study.best_value,
                        "tuning s": time.perf_counter() - t0, "1st trial s": spans[0],
                        "later trials s": sum(spans[1:])})
        rows.append(row)
        print(f"  {label:45s} {family:14s} r={row['r default']:.3f} "
              f"tuned={row['r tuned']:.3f} cold {cold:.2f}s/fold "
              f"tuning {row['tuning s']:.1f}s", flush=True)
    return rows


USS_STUDIES = (("sgd_vs_mwoz", "SGD", "MWOZ"), ("redial_vs_ccpe", "ReDial", "CCPE"))
SPARSE_PARAMS = {"n_estimators": 200, "learning_rate": 0.03, "num_leaves": 8,
                 "min_child_samples": 20}


def sparse_labels_ppi(table: pd.DataFrame, sets: dict, spec, share: float, reps: int
                      ) -> list[dict]:
    """USS with a seeded ``share`` of labels: honest PPI++ CI reduction and coverage.

    Per replication r (seed r), ``examples/uss/prepare.py``'s :func:`label_mask` keeps a share
    of each corpus labeled; the cross-fit ensemble (5 folds, seed 42) of ``spec`` with
    ``SPARSE_PARAMS`` gives out-of-fold predictions for the labeled and the fold-model mean for
    the unlabeled dialogues; ``compare_arms`` gives the naive and the PPI++ effect per case
    study. Coverage is against the effect on all labels (treatment - control mean rating of
    every dialogue). With ``reps`` replications x 2 case studies the Monte-Carlo error of a
    coverage near 0.95 is about sqrt(0.95 * 0.05 / (2 * reps)) (0.022 for 50).
    """
    from threadpoolctl import threadpool_limits

    from pulse_ml.models.crossfit import fit_crossfit
    from pulse_ml.models.factory import build_pipeline
    from pulse_ml.stats.arm_effect import compare_arms
    from pulse_ml.stats.arm_inputs import Arm
    from pulse_ml.training.metrics import pearson
    from pulse_ml.training.tuning import make_folds

    prepare = _load_module(REPO / "examples" / "uss" / "prepare.py", "uss_prepare")
    y_all = table["rating"].to_numpy(float)
    cond = table["condition"].to_numpy()
    truth = {name: y_all[cond == t].mean() - y_all[cond == c].mean()
             for name, c, t in USS_STUDIES}
    rows = []
    for label, fs in sets.items():
        t0 = time.perf_counter()
        acc = {"r": [], "reduction": [], "cover_naive": [], "cover_aug": []}
        for rep in range(reps):
            keep = prepare.label_mask(table["corpus"], share, rep)
            lab = table[keep].reset_index(drop=True)
            unl = table[~keep].reset_index(drop=True)
            y = lab["rating"].to_numpy(float)
            folds = make_folds(len(y), 5, 42)
            with threadpool_limits(limits=1):
                ens = fit_crossfit(lambda fs=fs: build_pipeline(spec, fs, SPARSE_PARAMS), lab,
                                   y, folds, fs, spec.name)
                f_unl = ens.predict(unl)
            f_lab = ens.oof["prediction"].to_numpy()
            acc["r"].append(pearson(y, f_lab))
            for name, c, t in USS_STUDIES:
                lc, lt = lab["condition"].eq(c).to_numpy(), lab["condition"].eq(t).to_numpy()
                uc, ut = unl["condition"].eq(c).to_numpy(), unl["condition"].eq(t).to_numpy()
                res = compare_arms(Arm(y[lc], f_lab[lc], f_unl[uc]),
                                   Arm(y[lt], f_lab[lt], f_unl[ut]))
                acc["reduction"].append(1.0 - res.augmented.width / res.naive.width)
                acc["cover_naive"].append(res.naive.ci_lower <= truth[name]
                                          <= res.naive.ci_upper)
                acc["cover_aug"].append(res.augmented.ci_lower <= truth[name]
                                        <= res.augmented.ci_upper)
        rows.append({"feature set": label, "reps": reps, "OOF r": np.mean(acc["r"]),
                     "CI reduction": np.mean(acc["reduction"]),
                     "coverage naive": np.mean(acc["cover_naive"]),
                     "coverage PPI++": np.mean(acc["cover_aug"]),
                     "s/rep": (time.perf_counter() - t0) / reps})
        print(f"  10% labels {label:40s} r={rows[-1]['OOF r']:.3f} "
              f"reduction={rows[-1]['CI reduction']:.3f} "
              f"coverage={rows[-1]['coverage PPI++']:.3f}", flush=True)
    return rows


def markdown(rows: list[dict], columns: list[str], fmt: dict) -> str:
    """A markdown table of ``rows``."""
    head = "| " + " | ".join(columns) + " |\n|" + "---|" * len(columns) + "\n"
    body = ""
    for row in rows:
        body += "| " + " | ".join(fmt.get(c, "{}").format(row[c]) for c in columns) + " |\n"
    return head + body


def main(argv: list[str] | None = None) -> int:
    """Entry point; prints markdown tables (and writes them to --out)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--uss", type=Path, default=SHARED / "uss-user-satisfaction-simulation")
    parser.add_argument("--convai2", type=Path,
                        default=SHARED / "convai2-wild-evaluation" / "data_volunteers.json")
    parser.add_argument("--uss-families", default="lightgbm,hist_gb")
    parser.add_argument("--convai2-families", default="lightgbm,hist_gb,random_forest")
    parser.add_argument("--trials", type=int, default=20,
                        help="Optuna trials per (feature set, family); 0 = defaults only")
    parser.add_argument("--datasets", default="uss,convai2")
    parser.add_argument("--sets", default="",
                        help="only feature sets whose name contains one of these (comma list)")
    parser.add_argument("--out", type=Path, default=None, help="write the tables here")
    parser.add_argument("--sparse-reps", type=int, default=40,
                        help="USS replications with 10%% of the labels (0 = skip)")
    parser.add_argument("--sparse-share", type=float, default=0.1)
    parser.add_argument("--count-cache", choices=("on", "off", "both"), default="on",
                        help="TF-IDF from stored n-gram counts (both = each text set twice, "
                        "off then on, to measure what it saves)")
    parser.add_argument("--sparse-only", action="store_true",
                        help="USS: skip the all-label table, run only the sparse-label PPI++")
    args = parser.parse_args(argv)

    from pulse_ml.training.tuning import make_folds

    report = []
    for name in [d.strip() for d in args.datasets.split(",") if d.strip()]:
        t0 = time.perf_counter()
        if name == "uss":
            if not (args.uss / "SGD.txt").is_file():
                print(f"error: USS files not found in {args.uss} (pass --uss)", file=sys.stderr)
                return 2
            table = uss_table(args.uss)
            base = {"corpus": {"kind": "categorical"}, "user_message_count": {"kind": "count"}}
            texts = ["user_text"]
            groups = None
        elif name == "convai2":
            if not args.convai2.is_file():
                print(f"error: {args.convai2} not found (pass --convai2)", file=sys.stderr)
                return 2
            table = convai2_table(args.convai2)
            base = yaml.safe_load((REPO / "examples" / "convai2" / "features.yaml").read_text(
                encoding="utf-8"))["columns"]
            texts = ["user_text", "bot_text"]
            groups = "user_id"
        else:
            print(f"error: unknown dataset {name!r} (use uss, convai2)", file=sys.stderr)
            return 2
        families = args.uss_families if name == "uss" else args.convai2_families
        specs = model_specs([f.strip() for f in families.split(",") if f.strip()])
        labeled = table[table["rating"].notna()].reset_index(drop=True)
        y = labeled["rating"].to_numpy(float)
        folds = make_folds(len(y), 5, 42, None if groups is None else labeled[groups])
        print(f"{name}: {len(y)} labeled sessions, "
              f"{len(np.unique(labeled['user_id']))} users", flush=True)
        sets = feature_sets(base, texts)
        if args.sets:
            wanted = [w.strip() for w in args.sets.split(",") if w.strip()]
            sets = {k: v for k, v in sets.items() if any(w in k for w in wanted)}
        if args.sparse_only and name == "uss":
            rows = []
        else:
            cache = {"on": (True,), "off": (False,), "both": (False, True)}[args.count_cache]
            rows = evaluate(labeled, y, folds, sets, specs, args.trials, cache)
        if rows:
            report.append(f"### {name} ({len(y)} labeled, 5-fold OOF"
                          f"{', grouped by user' if groups else ''}; r default = conf/model "
                          f"defaults, r tuned = best of {args.trials} Optuna trials on cv_mse)\n")
            report.append(markdown(rows, ["feature set", "family", "r default", "r tuned",
                                          "mse tuned", "s/fold cold", "tuning s",
                                          "1st trial s", "later trials s"],
                                   {"r default": "{:.3f}", "r tuned": "{:.3f}",
                                    "mse tuned": "{:.3f}", "s/fold cold": "{:.2f}",
                                    "tuning s": "{:.1f}", "1st trial s": "{:.1f}",
                                    "later trials s": "{:.1f}"}))
            frame_rows = pd.DataFrame(rows)
            col = "r tuned" if args.trials else "r default"
            best = (frame_rows.groupby("feature set", sort=False)[col].max()
                    .rename("best r over families").reset_index())
            report.append("\n" + markdown(best.to_dict("records"),
                                          ["feature set", "best r over families"],
                                          {"best r over families": "{:.3f}"}))
        if name == "uss" and args.sparse_reps:
            pick = {k: sets[k] for k in ("structured only", "structured + default {kind: text}",
                                         "structured + combined") if k in sets}
            spec = model_specs(["lightgbm"])["lightgbm"]
            srows = sparse_labels_ppi(table, pick, spec, args.sparse_share, args.sparse_reps)
            report.append(f"\nUSS with {args.sparse_share:.0%} of the labels (seeded per "
                          f"replication), lightgbm {SPARSE_PARAMS}, honest cross-fit PPI++ "
                          "per case study (sgd_vs_mwoz, redial_vs_ccpe), coverage of the "
                          "all-label effect:\n")
            report.append(markdown(srows, ["feature set", "reps", "OOF r", "CI reduction",
                                           "coverage naive", "coverage PPI++", "s/rep"],
                                   {"OOF r": "{:.3f}", "CI reduction": "{:.1%}",
                                    "coverage naive": "{:.3f}", "coverage PPI++": "{:.3f}",
                                    "s/rep": "{:.1f}"}))
        report.append(f"\n{name}: {time.perf_counter() - t0:.0f} s in all; peak RSS of the "
                      f"process so far {peak_rss_mb():.0f} MB.\n")
    text = "\n".join(report)
    print("\n" + text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
