"""End-to-end benchmark of ``pulse-ml monitor``: the product path's time and demo stopping days.

Run: ``PYTHONPATH=. python perf/monitor_e2e_bench.py [seeds] [effect_scale] [signal]``
(default 20, 1, 1.0; ``signal`` is the simulator's feature signal, 3 gives honest r ~0.7).

1. Time of the product path for 10^6 sessions x 30 daily looks (4 case studies, ISO 8601
   ``started_at`` strings, 100,000 users): the contract's ``started_at`` parsing inside
   ``validate_frame``, and :func:`pulse_ml.inference.monitor.monitor` (calendar, arrays, one
   ``monitor_effect`` call for all case studies, clustered).
2. Median stopping day of the four demo case studies, naive vs PPI++ sequence: per seed the
   default demo (``pulse-ml simulate``, 21 days; true effects times ``effect_scale``), a fixed
   LightGBM fitted as a 5-fold cross-fit ensemble (folds by user, as ``train``), honest
   predictions (out-of-fold for the labeled sessions) and the monitor defaults (daily looks,
   clusters by user, joint lambda, t* at day 21). A replication that never stops counts as
   day 22 in the median; the planner's median (:func:`plan_monitoring` with the observed
   within-arm rating s.d. and honest r, 1/21 of each arm's sessions per day, the population
   effect) is printed beside. Labeled sessions have more user messages than unlabeled ones,
   so their effect can differ from the population effect the planner is given.
"""

from __future__ import annotations

import sys
import time
from dataclasses import replace

import numpy as np
import pandas as pd

DAYS = 21
PARAMS = {"n_estimators": 200, "learning_rate": 0.03, "num_leaves": 8, "min_child_samples": 40}


def _timing(repeats: int = 3) -> list[str]:
    from pulse_ml.inference.monitor import MonitorSettings, monitor
    from pulse_ml.sessions.feature_sets import FeatureSet, FeatureSpec
    from pulse_ml.sessions.table import validate_frame

    rng = np.random.default_rng(0)
    n, looks = 10**6, 30
    study = rng.integers(0, 4, n)
    labeled = rng.random(n) < 0.1
    seconds = rng.integers(0, looks * 86_400, n)
    stamps = pd.Timestamp("2025-06-02", tz="UTC") + pd.to_timedelta(seconds, unit="s")
    frame = pd.DataFrame({
        "session_id": np.char.add("s", np.arange(n).astype(str)),
        "user_id": np.char.add("u", rng.integers(0, 100_000, n).astype(str)),
        "case_study": np.array(["a", "b", "c", "d"], dtype=object)[study],
        "condition": np.where(rng.random(n) < 0.5, "control", "treatment"),
        "rating": np.where(labeled, rng.integers(1, 6, n).astype(float), np.nan),
        "x": rng.normal(4.0, 0.6, n),
        "started_at": stamps.strftime("%Y-%m-%dT%H:%M:%SZ"),
    })
    features = FeatureSet("x", (FeatureSpec("x", "numeric"),))
    now = pd.Timestamp("2026-01-01", tz="UTC")
    lines = ["| step | best (s) | median (s) |", "|---|---|---|"]
    table = None
    for name in ("validate_frame (parses started_at)", "monitor (30 looks, 4 case studies)"):
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            if table is None or name.startswith("validate"):
                table = validate_frame(frame, "bench.csv", features, {})
            else:
                monitor(table, table.frame["x"].to_numpy(), MonitorSettings(), now=now)
            times.append(time.perf_counter() - t0)
        lines.append(f"| {name} | {min(times):.2f} | {float(np.median(times)):.2f} |")
    return lines


def _one_seed(seed: int, scale: float, base) -> tuple[pd.DataFrame, dict]:
    from threadpoolctl import threadpool_limits

    from pulse_ml.config import compose
    from pulse_ml.inference.monitor import MonitorSettings, monitor
    from pulse_ml.models.crossfit import fit_crossfit
    from pulse_ml.models.factory import build_pipeline, model_spec_from_mapping
    from pulse_ml.sessions.case_studies import load_configured
    from pulse_ml.sessions.table import validate_frame
    from pulse_ml.settings import feature_set
    from pulse_ml.simulate.generator import simulate
    from pulse_ml.training.folds import make_folds

    cases = tuple(replace(c, effect=c.effect * scale) for c in base.case_studies)
    result = simulate(replace(base, seed=seed, case_studies=cases))
    cfg = compose("train", ["model=lightgbm"])
    features = feature_set(cfg)
    spec = model_spec_from_mapping(cfg.model.to_dict())
    table = validate_frame(result.sessions, f"demo-{seed}", features, load_configured())
    lab = table.frame.loc[table.labeled].reset_index(drop=True)
    y = lab["rating"].to_numpy(float)
    folds = make_folds(len(y), 5, seed, lab["user_id"].to_numpy())
    with threadpool_limits(limits=1):
        ens = fit_crossfit(lambda: build_pipeline(spec, features, PARAMS), lab, y, folds,
                           features, "lightgbm")
        preds, _ = ens.honest_predict(table.frame)
    res = monitor(table, preds, MonitorSettings())
    rows = []
    for s in table.case_studies:
        stop = res.stops[(res.stops["case_study"] == s.name)].set_index(["estimator", "band"])
        day = {k: (int(stop.loc[k, "day"]) if bool(stop.loc[k, "conclusive"]) else DAYS + 1)
               for k in stop.index}
        rows.append({"case_study": s.name, "truth": result.ground_truth.effects[s.name]["effect"],
                     "naive_seq": day[("naive", "sequence")],
                     "ppi_seq": day[("augmented", "sequence")],
                     "naive_peek": day[("naive", "fixed")],
                     "ppi_peek": day[("augmented", "fixed")]})
    oof = ens.oof
    arms = lab[lab["case_study"] != ""].groupby(["case_study", "condition"])["rating"]
    stats = {"rho": float(np.corrcoef(oof["rating"], oof["prediction"])[0, 1]),
             "sd": float(np.sqrt(arms.var().mean()))}  # within-arm s.d., pooled
    return pd.DataFrame(rows), stats


def main() -> None:
    """Print the timing table and the demo stopping-day table as markdown."""
    from pulse_ml.config import compose
    from pulse_ml.settings import simulator_settings as settings_from_config
    from pulse_ml.stats.sequential.planning import plan_monitoring

    seeds = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    scale = float(sys.argv[2]) if len(sys.argv) > 2 else 1.0
    signal = float(sys.argv[3]) if len(sys.argv) > 3 else 1.0
    print("## Product path, 10^6 sessions x 30 daily looks\n")
    print("\n".join(_timing()))
    base = replace(settings_from_config(compose("simulate", [])), mc_sessions=20_000,
                   signal=signal)
    t0 = time.perf_counter()
    parts, rhos, sds = [], [], []
    for seed in range(seeds):
        frame, stats = _one_seed(seed, scale, base)
        parts.append(frame)
        rhos.append(stats["rho"])
        sds.append(stats["sd"])
    runs = pd.concat(parts, ignore_index=True)
    rho, sd = float(np.mean(rhos)), float(np.mean(sds))
    per_arm = base.labeled_per_arm / DAYS
    unl_per_arm = base.labeled_per_arm * base.unlabeled_ratio / DAYS
    print(f"\n## Demo case studies, {seeds} seeds, effects x {scale:g}, signal {signal:g}, "
          f"{DAYS} daily looks "
          f"({time.perf_counter() - t0:.0f} s)\n")
    print(f"honest r {rho:.3f} (mean over seeds), within-arm rating s.d. {sd:.3f}; "
          f"{per_arm:.1f} labeled + {unl_per_arm:.0f} unlabeled sessions per arm per day. "
          "Days: median over seeds "
          f"(22 = not conclusive by day {DAYS}); % = share conclusive by day {DAYS}.\n")
    print("| case study | true effect | naive sequence | PPI++ sequence | planner naive / PPI++ "
          "| naive fixed CI peeked daily | PPI++ fixed CI peeked daily |")
    print("|---|---|---|---|---|---|---|")
    for name, sub in runs.groupby("case_study", sort=False):
        truth = float(sub["truth"].mean())
        plan = plan_monitoring(truth, sd, rho, per_arm, unl_per_arm, max_days=DAYS)

        def cell(col: str, sub: pd.DataFrame = sub) -> str:
            med = float(np.median(sub[col]))
            share = 100 * float(np.mean(sub[col] <= DAYS))
            return f"{med:.0f} ({share:.0f}%)"

        plan_cell = " / ".join("-" if p.median_day is None else str(p.median_day)
                               for p in (plan.naive, plan.augmented))
        print(f"| {name} | {truth:+.3f} | {cell('naive_seq')} | {cell('ppi_seq')} | "
              f"{plan_cell} | {cell('naive_peek')} | {cell('ppi_peek')} |")


if __name__ == "__main__":
    main()
