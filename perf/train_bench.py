"""Tune all 4 families x 30 trials x 5 folds on the default demo data: time, memory, r.

Run: python perf/train_bench.py [--trials 30]
Targets (issue): <= 5 min on 2 cores; best out-of-fold r >= 0.9 x the generator's Bayes rho.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import demo_data, fresh_home, peak_rss_mb  # noqa: E402

PAPER = {"ordinal_logit": (1.39, 1.07, 0.24), "hist_gb": (1.44, 1.03, 0.27),
         "random_forest": (1.44, 1.02, 0.29)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--trials", type=int, default=30)
    args = parser.parse_args()
    home = fresh_home("pulse-train-bench-")
    path = demo_data(home)
    truth = json.loads(path.with_name("ground_truth.json").read_text())

    from pulse_ml.config import compose
    from pulse_ml.jobs import train

    rows = []
    start = time.perf_counter()
    for family in ("ordinal_logit", "random_forest", "hist_gb", "lightgbm"):
        t0 = time.perf_counter()
        res = train.run(compose("train", [f"model={family}", f"data.path={path}",
                                          f"tuning.n_trials={args.trials}", "progress=false"]))
        rows.append((family, res.metrics, time.perf_counter() - t0))
    total = time.perf_counter() - start
    print(f"\n4 families x {args.trials} trials x 5 folds: {total:.1f} s wall, peak RSS "
          f"{peak_rss_mb():.0f} MB (target <= 300 s)")
    rho = truth["bayes_rho"]
    print(f"{'family':<14} {'mse':>6} {'mae':>6} {'r':>6} {'r/rho':>6} {'time_s':>7}   paper "
          "(mse / mae / r)")
    for family, m, sec in rows:
        paper = PAPER.get(family)
        ref = f"{paper[0]:.2f} / {paper[1]:.2f} / {paper[2]:.2f}" if paper else "-"
        print(f"{family:<14} {m.mse:6.3f} {m.mae:6.3f} {m.pearson:6.3f} {m.pearson / rho:6.2f} "
              f"{sec:7.1f}   {ref}")
    best = max(m.pearson for _, m, _ in rows)
    print(f"best r {best:.3f} vs Bayes rho {rho:.3f}: ratio {best / rho:.2f} (target >= 0.90)")


if __name__ == "__main__":
    main()
