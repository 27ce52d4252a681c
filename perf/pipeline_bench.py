"""`pulse-ml pipeline` wall time, and CI reductions next to their honest limit.

For each case study: the reported honest CI reduction, the limit 1 - sqrt(1 - rho^2 N/(n+N))
(per arm with the honest out-of-fold rho of the champion, averaged over the two arms), and the
in-sample (paper) mode's reduction beside them.

Run: python perf/pipeline_bench.py [--trials 20] [--signal 1.0]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import demo_data, fresh_home, peak_rss_mb  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--signal", type=float, default=1.0)
    args = parser.parse_args()
    home = fresh_home("pulse-pipeline-bench-")
    path = demo_data(home, f"signal={args.signal}")

    import numpy as np

    from pulse_ml.config import compose
    from pulse_ml.jobs import infer, pipeline
    from pulse_ml.registry import models as mlflow_io
    from pulse_ml.stats.arm_effect import theoretical_width_ratio
    from pulse_ml.training.metrics import pearson

    t0 = time.perf_counter()
    out = pipeline.run(compose("pipeline", [f"data.path={path}",
                                            f"tuning.n_trials={args.trials}",
                                            "progress=false"]))
    wall = time.perf_counter() - t0
    honest = out["effects"]
    leaky = infer.run(compose("infer", [f"data.path={path}", "ppi.predictions=in_sample",
                                        f"output={home / 'results' / 'in_sample'}",
                                        "log_mlflow=false", "permutations=1000"]))
    ensemble, _ = mlflow_io.load_registered("models:/pulse-satisfaction@champion")
    rho = pearson(ensemble.oof["rating"].to_numpy(), ensemble.oof["prediction"].to_numpy())
    print(f"\npipeline wall time {wall:.1f} s (4 families x {args.trials} trials + infer), "
          f"peak RSS {peak_rss_mb():.0f} MB; champion {ensemble.family}, honest r {rho:.3f}")
    print(f"{'case study':<22} {'honest %':>9} {'limit %':>8} {'in-sample %':>12}")
    for name in dict.fromkeys(honest["case_study"]):
        h = honest[(honest.case_study == name) & (honest.estimator == "augmented")].iloc[0]
        s = leaky[(leaky.case_study == name) & (leaky.estimator == "augmented")].iloc[0]
        ratios = [theoretical_width_ratio(rho, h[f"n_labeled_{a}"], h[f"n_unlabeled_{a}"])
                  for a in ("control", "treatment")]
        limit = 100 * (1 - float(np.mean(ratios)))
        print(f"{name:<22} {h.ci_reduction_pct:9.1f} {limit:8.1f} {s.ci_reduction_pct:12.1f}")

    # The paper's untuned forest (400 fully grown trees): honest vs in-sample reductions.
    from pulse_ml.jobs import train

    paper = train.run(compose("train", [f"data.path={path}", "model=random_forest_paper",
                                        "promote=never", "register=always", "progress=false"]))
    uri = f"models:/pulse-satisfaction/{paper.version}"
    modes = {}
    for mode in ("crossfit", "in_sample"):
        modes[mode] = infer.run(compose("infer", [
            f"data.path={path}", f"model_uri={uri}", f"ppi.predictions={mode}",
            f"output={home / 'results' / f'paper_rf_{mode}'}", "log_mlflow=false",
            "permutations=1000"]))
    print(f"\npaper's forest (untuned, honest r {paper.metrics.pearson:.3f}): CI reduction %")
    print(f"{'case study':<22} {'honest %':>9} {'in-sample (paper) %':>20}")
    for name in dict.fromkeys(honest["case_study"]):
        vals = [modes[m][(modes[m].case_study == name) & (modes[m].estimator == "augmented")]
                .iloc[0].ci_reduction_pct for m in ("crossfit", "in_sample")]
        print(f"{name:<22} {vals[0]:9.1f} {vals[1]:20.1f}")


if __name__ == "__main__":
    main()
