"""Active vs uniform rating requests: replays on real data (every session rated) and the demo.

Run: nice -n 10 /work/venv/bin/python perf/active_replay.py --data uss --seeds 300
     (--data uss | convai2 | demo; --budget; --train-share; --nonresponse 0.2;
      --asking active: ask by the error model even where request's gate would not)

1. The data set's rated sessions are split by user: ``--train-share`` of the users train and
   register a model with ``pulse-ml train`` (its version carries the error model, learned inside
   the CV folds), the others are the replay sessions, all rated.
2. Replay sessions get the champion's prediction and its expected squared error; per arm of each
   case study, ``pi ~ sqrt(error)`` at ``--budget`` (clipped at budget / 4, as ``request``),
   or uniform when ``request``'s gate (:func:`pulse_ml.inference.requests.asking_gate`) says so.
3. Per seed: asks are drawn with pi (active) and with the budget (uniform, the same expected
   count); optionally ``--nonresponse`` of the asked do not answer, more often when the model's
   first feature is low. The other ratings are hidden. Active: weights 1 / (pi r_hat) (r_hat
   cross-fitted as ``infer`` does); uniform: today's estimator. Both on ``compare_arms``.
4. Prints per case study: coverage of the all-label effect (the replay sessions' mean difference)
   with Monte-Carlo s.e., mean widths, and the labels saved at equal width
   ``1 - (W_active / W_uniform)^2`` (width ~ 1 / sqrt(labels); MC s.e. from the paired draws),
   with the error model's own prediction of that saving, and the same for the oracle ``orc``
   (pi from the replay sessions' TRUE centred residuals ``(y - lam f - m_arm)^2``, through the
   same weighted estimator: the ceiling any error model could reach on these sessions).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
REAL = Path(os.environ.get("PULSE_SHARED_DIR", "/work/shared")) / "data" / "real"


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def table_of(data: str, home: Path) -> tuple[pd.DataFrame, Path, list[Path]]:
    """(all rated sessions, feature-set file, case-study files)."""
    if data == "uss":
        prep = _load("uss_prepare", ROOT / "examples/uss/prepare.py")
        table = prep.build_table(REAL / "uss-user-satisfaction-simulation")
        feats = home / "uss_text.yaml"
        feats.write_text("name: uss_text\ncolumns:\n  corpus: {kind: categorical}\n"
                         "  user_message_count: {kind: count}\n  system_message_count: "
                         "{kind: count}\n  user_text: {kind: text}\n")
        studies = sorted((ROOT / "examples/uss/case_study").glob("*.yaml"))
    elif data == "convai2":
        prep = _load("convai2_prepare", ROOT / "examples/convai2/prepare.py")
        src = REAL / "convai2-wild-evaluation" / "data_volunteers.json"
        pairs = [("Bot 002", "Bot 006"), ("Bot 009", "Bot 011")]
        table = prep.build_table(prep.read_chats(src, None, 0), pairs,
                                 prep.load_lexicon(prep.DEFAULT_LEXICON))
        feats = ROOT / "examples/convai2/features.yaml"
        studies = sorted((ROOT / "examples/convai2/case_study").glob("*.yaml"))
    else:
        from pulse_ml.config import compose
        from pulse_ml.jobs import simulate

        out = home / "demo"
        simulate.run(compose("simulate", [f"out={out}"]))
        table = pd.read_parquet(out / "sessions.parquet")
        truth = out / "ground_truth.json"
        feats = ROOT / "conf/features/all.yaml"
        studies = []
        del truth
    return table[table["rating"].notna()].reset_index(drop=True), feats, studies


def train(table: pd.DataFrame, feats: Path, home: Path, model: str):
    from pulse_ml.config import compose
    from pulse_ml.jobs import train as train_job
    from pulse_ml.registry import models

    path = home / "train.parquet"
    table.to_parquet(path, index=False)
    res = train_job.run(compose("train", [f"data.path={path}", f"features={feats}",
                                          f"model={model}", "tuning.n_trials=4",
                                          "progress=false"]))
    ensemble, _ = models.load_registered(f"models:/pulse-satisfaction/{res.version}")
    return ensemble


KINDS = ("act", "uni", "uniw", "orc")  # by the error model, uniform, uniform weighted, oracle


def _saved(active: dict, uniform: dict) -> str:
    """Labels saved at equal width ``1 - (mean W_a / mean W_u)^2`` ± MC s.e. (paired draws).

    Both askings use the same seeds (the same uniform numbers u), so the s.e. comes from the
    per-seed pairs (delta method on the ratio of the two means), not from two independent
    samples: identical askings give exactly 0 ± 0.
    """
    seeds = sorted(set(active) & set(uniform))
    wa = np.array([active[s][1] for s in seeds])
    wu = np.array([uniform[s][1] for s in seeds])
    ratio = wa.mean() / wu.mean()
    se_ratio = ratio * np.std(wa / wa.mean() - wu / wu.mean(), ddof=1) / np.sqrt(len(seeds))
    return f"{100 * (1 - ratio**2):.1f}±{100 * 2 * ratio * se_ratio:.1f}"


def split_and_train(args, prefix: str):
    """A fresh store, the data set split by user (``--train-share``), a model on the train part.

    Returns:
        The table, the boolean mask of its training rows, and the trained ensemble.
    """
    home = Path(tempfile.mkdtemp(prefix=prefix))
    os.environ["PULSE_HOME"] = str(home)
    os.environ["MLFLOW_TRACKING_URI"] = f"sqlite:///{home / 'mlruns' / 'mlflow.db'}"
    (home / "mlruns").mkdir(parents=True)
    table, feats, _ = table_of(args.data, home)
    rng = np.random.default_rng(args.split_seed)
    users = table["user_id"].astype(str).unique()
    train_users = set(rng.choice(users, int(args.train_share * users.size), replace=False))
    in_train = table["user_id"].astype(str).isin(train_users).to_numpy()
    return table, in_train, train(table[in_train], feats, home, args.model)


def replay(args) -> None:
    from pulse_ml.inference.active import active_weights
    from pulse_ml.stats.active_design import scale_to_budget, width_ratio
    from pulse_ml.stats.arm_effect import compare_arms
    from pulse_ml.stats.arm_inputs import Arm

    table, in_train, ensemble = split_and_train(args, "active_replay_")
    err = ensemble.error_model
    rest = table[~in_train & (table["case_study"].astype(str) != "")].reset_index(drop=True)
    f = ensemble.predict(rest)
    e2 = err.predict(rest, f, candidate=True)
    from pulse_ml.inference.requests import asking_gate

    gate = asking_gate(err, args.budget, args.asking)  # as `request` (auto: the gate decides)
    if not gate.active:
        e2 = np.full(e2.size, err.mean_sq)
    y = rest["rating"].to_numpy(float)
    rho = float(np.corrcoef(f, y)[0, 1])
    codes = pd.factorize(rest["user_id"].astype(str))[0]
    num = rest[ensemble.features.of_kind("count", "numeric", "flag")].to_numpy(float)
    print(f"{args.data}: {len(table)} rated sessions, {in_train.sum()} train, {len(rest)} replay;"
          f" replay r = {rho:.3f}; error model {err.choice} ({err.gain_pct:+.1f}% OOF MSE vs "
          f"constant); budget {args.budget}, non-response {args.nonresponse}\n"
          f"request would choose: {gate.reason}")
    rows = []
    for study, sub in rest.groupby("case_study"):
        conds = sorted(sub["condition"].unique())
        if len(conds) != 2:
            continue
        m = (rest["case_study"] == study).to_numpy()
        treated = (rest["condition"] == conds[1]).to_numpy()
        arm_code = treated[m].astype(int)
        pi = scale_to_budget(e2[m], arm_code, np.array([args.budget] * 2), args.budget / 4)
        truth = y[m & treated].mean() - y[m & ~treated].mean()
        x = np.column_stack([num[m], treated[m]])
        predicted = width_ratio(e2[m], pi, args.budget)
        varying = bool(np.ptp(pi) > 1e-12 * pi.max())  # as infer's active_arms
        # the oracle: pi from the TRUE centred PPI++ residuals of these sessions (per arm)
        d = y[m] - err.lam * f[m]
        d = d - np.array([d[arm_code == t].mean() for t in (0, 1)])[arm_code]
        pi_orc = scale_to_budget(d**2, arm_code, np.array([args.budget] * 2), args.budget / 4)
        res = {f"{k}_{e}": {} for k in KINDS for e in ("naive", "ppi")}
        for seed in range(args.seeds):
            r = np.random.default_rng(1000 + seed)
            answers = np.ones(m.sum(), bool)
            if args.nonresponse > 0:  # fewer answers where the first feature is low
                z = (x[:, 0] - x[:, 0].mean()) / (x[:, 0].std() or 1.0)
                p_ans = 1.0 / (1.0 + np.exp(-(np.log((1 - args.nonresponse)
                                                     / args.nonresponse) + 0.8 * z)))
                answers = r.random(m.sum()) < p_ans
            u = r.random(m.sum())
            uniform = np.full(m.sum(), args.budget)
            for kind, p in (("act", pi), ("uni", uniform), ("uniw", uniform), ("orc", pi_orc)):
                rated = (u < p) & answers
                w = None
                # as infer: uniform asking is today's estimator; "uniw" = uniform asking
                # through the weighted engine (weights 1/(pi r_hat)), to separate the engine's
                # own cost from the gain of asking by the error model
                weighted = ((kind == "act" and varying) or kind in ("uniw", "orc")
                            or args.nonresponse > 0)
                if weighted:
                    w_lab, _ = active_weights(x, rated, p, codes[m], seed=seed)
                arms = []
                for t in (0, 1):
                    a = arm_code == t
                    lab, unl = a & rated, a & ~rated
                    if weighted:
                        w = np.zeros(rated.size)
                        w[rated] = w_lab
                        w = w[lab]
                    arms.append(Arm(y=y[m][lab], f=f[m][lab], f_unl=f[m][unl],
                                    users=codes[m][lab], users_unl=codes[m][unl], w=w))
                try:
                    c = compare_arms(arms[0], arms[1])
                except Exception:  # noqa: BLE001 - a draw with too few labels: counted
                    continue
                for name, est in (("naive", c.naive), ("ppi", c.augmented)):
                    res[f"{kind}_{name}"][seed] = (est.ci_lower <= truth <= est.ci_upper,
                                                   est.ci_upper - est.ci_lower, est.effect)
        row = {"case_study": study, "sessions": int(m.sum())}
        for k, v in res.items():
            arr = np.array(list(v.values()), dtype=float)
            cov = arr[:, 0].mean()
            row[f"{k}_cov"] = f"{cov:.3f}±{np.sqrt(cov * (1 - cov) / len(arr)):.3f}"
            row[f"{k}_width"] = arr[:, 1].mean()
            row[f"{k}_n"] = len(arr)
            row[f"{k}_sd"] = arr[:, 2].std(ddof=1)  # the estimates' own spread over draws
        row["saved_pct"] = _saved(res["act_ppi"], res["uni_ppi"])
        row["oracle_saved_pct"] = _saved(res["orc_ppi"], res["uni_ppi"])
        row["predicted_saved_pct"] = round(100 * (1 - predicted**2), 1)
        rows.append(row)
    out = pd.DataFrame(rows)
    with pd.option_context("display.width", 100, "display.max_columns", None):
        for _, r in out.iterrows():
            print(f"\n{r['case_study']} ({r['sessions']} sessions, {args.seeds} seeds)")
            for k in (f"{k}_{e}" for e in ("ppi", "naive") for k in KINDS):
                print(f"  {k:10s} coverage {r[k + '_cov']}  mean width {r[k + '_width']:.3f}"
                      f"  3.92 x sd of the estimates {3.92 * r[k + '_sd']:.3f}"
                      f"  (draws {r[k + '_n']})")
            print(f"  oracle (pi from the true residuals) saves {r['oracle_saved_pct']}%")
            print(f"  labels saved at equal width (PPI++): {r['saved_pct']}% "
                  f"(error model predicted {r['predicted_saved_pct']}%)")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", choices=("uss", "convai2", "demo"), default="uss")
    p.add_argument("--seeds", type=int, default=300)
    p.add_argument("--budget", type=float, default=0.1)
    p.add_argument("--train-share", type=float, default=0.4)
    p.add_argument("--split-seed", type=int, default=0)
    p.add_argument("--nonresponse", type=float, default=0.0)
    p.add_argument("--model", default="hist_gb")
    p.add_argument("--asking", choices=("auto", "active"), default="auto",
                   help="auto: request's gate decides; active: the error model whatever it says")
    replay(p.parse_args(argv))
    return 0


if __name__ == "__main__":
    sys.exit(main())
