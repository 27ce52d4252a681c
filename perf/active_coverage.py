"""Coverage of active PPI++ in the seeded simulation of tests/support/active_sim.py.

Run: OMP_NUM_THREADS=1 nice -n 10 /work/venv/bin/python perf/active_coverage.py --reps 2000

Users with Pareto-many sessions, each session in either arm (users in both arms), skewed 1-5
stars, heteroscedastic errors, pi ~ sqrt(expected squared error) clipped at budget / 4, and
feature-dependent non-response among the asked (``response=0.88``: ~20% do not answer;
``0.8``: ~27%). Two designs:

* ``budget 0.1``: the effect is the same on every session; the selection bias of the rated
  sessions is nearly the same in both arms, so even dropping the weights barely moves the
  effect's coverage (the arm means are what the weights correct there);
* ``budget 0.4, heterogeneous``: the treatment helps the "hard" sessions (asked ~1.7x as
  often) by one more latent star, so the rated sessions' effect is not the all-label one
  unless they are weighted: dropping the weights is a real shortfall.

Prints, per design and weighting, coverage of the all-label effect with Monte-Carlo s.e. for
the active naive (IPW) and active PPI++ intervals, mean widths, the control arm's PPI++ mean
coverage and bias (± MC s.e.). Weightings: ``active`` = 1 / (pi r_hat) (infer's), ``pi`` = 1 /
pi alone, ``none`` = the weights dropped, ``uniform`` = the same draws asked uniformly.
The all-label effect is the finite-population one (every session of this data set rated), so
intervals built for new users over-cover it when a large share is rated (budget 0.4).

Measured (2000 reps per row, MC s.e. <= 0.005 near 0.95; OMP_NUM_THREADS=1, 2 shared cores at
load average 5-10, ~4.5 min for the two budget-0.1 x 4 + het. 1.0 x 4 rows, 1.3 min for het. 1.5):

    design                        weights  naive cov.     PPI++ cov.     PPI++ w.  ctrl-mean bias
    budget 0.1, 20% non-response  active   0.962 ± 0.004  0.959 ± 0.004  0.594  +0.024 ± 0.002
    budget 0.1, 20% non-response  uniform  0.962 ± 0.004  0.967 ± 0.004  0.594  +0.026 ± 0.002
    budget 0.1, 20% non-response  pi       0.959 ± 0.004  0.957 ± 0.005  0.559  +0.047 ± 0.002
    budget 0.1, 20% non-response  none     0.964 ± 0.004  0.961 ± 0.004  0.590  +0.022 ± 0.002
    budget 0.1, 27% non-response  active   0.960 ± 0.004  0.966 ± 0.004  0.679  +0.011 ± 0.003
    budget 0.1, 27% non-response  uniform  0.960 ± 0.004  0.962 ± 0.004  0.692  +0.013 ± 0.003
    budget 0.1, 27% non-response  pi       0.956 ± 0.005  0.961 ± 0.004  0.587  +0.066 ± 0.002
    budget 0.1, 27% non-response  none     0.959 ± 0.004  0.963 ± 0.004  0.620  +0.040 ± 0.002
    budget 0.4, 20%, het. 1.0     active   0.985 ± 0.003  0.987 ± 0.003  0.302  +0.003 ± 0.001
    budget 0.4, 20%, het. 1.0     uniform  0.987 ± 0.003  0.987 ± 0.003  0.305  +0.003 ± 0.001
    budget 0.4, 20%, het. 1.0     pi       0.975 ± 0.003  0.980 ± 0.003  0.285  +0.049 ± 0.001
    budget 0.4, 20%, het. 1.0     none     0.905 ± 0.007  0.927 ± 0.006  0.295  +0.015 ± 0.001
    budget 0.4, 20%, het. 1.5     active   0.988 ± 0.002  0.987 ± 0.003  0.301  +0.003 ± 0.001
    budget 0.4, 20%, het. 1.5     uniform  0.983 ± 0.003  0.986 ± 0.003  0.302  +0.004 ± 0.001
    budget 0.4, 20%, het. 1.5     pi       0.971 ± 0.004  0.973 ± 0.004  0.284  +0.049 ± 0.001
    budget 0.4, 20%, het. 1.5     none     0.804 ± 0.009  0.852 ± 0.008  0.291  +0.014 ± 0.001

The residual control-mean bias at budget 0.1 (uniform asking too) is the response model's
gates: a feature model is used in ~45% of those data sets, r = 1 in ~21%. ``--no-gates``
(budget 0.1, 20% non-response, 1000 reps): control-mean bias +0.003 ± 0.003 instead of +0.024
± 0.003, effect coverage 0.961 / 0.970 (PPI++ / naive), PPI++ width +3.4% (0.613 vs 0.592).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "support"))
from active_sim import one_replication  # noqa: E402

DESIGNS = {
    "budget 0.1, 27% non-response": {"response": 0.8},
    "budget 0.1, 20% non-response": {"response": 0.88},
    "budget 0.4, 20% non-response, effect_hard 1.0": {"response": 0.88, "budget": 0.4,
                                                       "effect_hard": 1.0},
    "budget 0.4, 20% non-response, effect_hard 1.5": {"response": 0.88, "budget": 0.4,
                                                       "effect_hard": 1.5},
}
WEIGHTS = {"active": {}, "uniform": {"active": False}, "pi": {"weights": "pi"},
           "none": {"weights": "none"}}


def _se(p: float, n: int) -> float:
    return float(np.sqrt(p * (1 - p) / n))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reps", type=int, default=2000)
    p.add_argument("--designs", nargs="*", default=list(DESIGNS), choices=list(DESIGNS))
    p.add_argument("--weights", nargs="*", default=list(WEIGHTS), choices=list(WEIGHTS))
    p.add_argument("--no-gates", action="store_true",
                   help="always fit the feature response model (no r = 1 test, no LR test): "
                        "what the gates cost in arm-mean bias and buy in width")
    args = p.parse_args(argv)
    if args.no_gates:
        import pulse_ml.inference.active as active

        active.NO_RESPONSE_Z = float("inf")
        active.features_matter = lambda *a, **k: True
    n = args.reps
    print("design | weights | rated | naive cov. | PPI++ cov. | naive width | PPI++ width | "
          "control mean cov. | control mean bias")
    for design in args.designs:
        for weights in args.weights:
            kw = {**DESIGNS[design], **WEIGHTS[weights]}
            df = pd.DataFrame([one_replication(s, **kw) for s in range(n)])
            cov = {k: df[f"{k}_covers"].mean() for k in ("naive", "ppi", "ppi_control_mean")}
            err = df["ppi_control_mean_error"]
            print(f"{design} | {weights} | {df['rated'].mean():.0f} | "
                  f"{cov['naive']:.3f} ± {_se(cov['naive'], n):.3f} | "
                  f"{cov['ppi']:.3f} ± {_se(cov['ppi'], n):.3f} | "
                  f"{df['naive_width'].mean():.3f} | {df['ppi_width'].mean():.3f} | "
                  f"{cov['ppi_control_mean']:.3f} ± {_se(cov['ppi_control_mean'], n):.3f} | "
                  f"{err.mean():+.4f} ± {err.std() / np.sqrt(n):.4f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
