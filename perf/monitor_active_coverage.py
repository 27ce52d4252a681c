"""Time-uniform coverage of `monitor`'s active PPI++ sequences (request_prob), seeded.

Run: nice -n 10 /work/venv/bin/python perf/monitor_active_coverage.py --reps 2000
Strong predictor, few labels (no lambda-noise term needed?): add --strength 1.5 --budget 0.03
Drift check: --strength 1.5 --drift 0.6 --response-trend 5 --weights predictable (and without
--drift; and --ask-trend 2.3 instead of --response-trend)

The design of tests/support/monitor_active_sim.py: ~1000 users with Pareto session counts
(~5,600 sessions), randomized by user, skewed 1-5 stars, a treatment effect larger on hard
sessions, hard sessions asked ~2.5x as often (pi ~ sqrt(expected squared error) at a 15%
budget), ~26% of the asked not answering depending on the features, 10 looks (and 21 with
--looks 21). Prints, with Monte-Carlo s.e., the share of data sets whose sequence covers the
true arm difference at EVERY look (and the all-label effect of the sessions seen by each look),
the last look's fixed-interval coverage, the mean last-look effect error and the sequence's
width, for the predictable weights 1/(pi r) and, as checks that the coverage can fail, with the
weights dropped (every rated session alike) and with 1/pi only (no response model); and with
the true response rate (oracle), which separates the response model's error from the rest.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

here = Path(__file__).resolve().parents[1] / "tests"
sys.path.insert(0, str(here / "support"))
from monitor_active_sim import one_replication, true_effect  # noqa: E402

from pulse_ml.stats.sequential.small_sample import DRIFT_WARN_SE  # noqa: E402


def _share(x: pd.Series) -> str:
    c = float(x.mean())
    return f"{c:.4f} ± {np.sqrt(c * (1 - c) / len(x)):.4f}"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reps", type=int, default=2000)
    p.add_argument("--check-reps", type=int, default=300, help="replications of the checks")
    p.add_argument("--looks", type=int, default=10)
    p.add_argument("--strength", type=float, default=0.0,
                   help="predictor strength (1.5: correlation ~0.79 with the stars)")
    p.add_argument("--budget", type=float, default=0.15, help="expected share asked")
    p.add_argument("--weights", default="predictable,oracle,uniform,pi_only",
                   help="comma-separated weight variants to run")
    p.add_argument("--drift", type=float, default=0.0,
                   help="treatment predictions rise by this many stars over the test")
    p.add_argument("--ask-trend", type=float, default=0.0, help="request_prob x exp(-a(t-1/2))")
    p.add_argument("--response-trend", type=float, default=0.0,
                   help="logit of answering falls by this over the test")
    args = p.parse_args(argv)
    print(f"true arm difference {true_effect():.4f}; looks {args.looks}; strength "
          f"{args.strength}; budget {args.budget}; drift {args.drift}; ask trend "
          f"{args.ask_trend}; response trend {args.response_trend}")
    kw = dict(looks=args.looks, strength=args.strength, budget=args.budget, drift=args.drift,
              ask_trend=args.ask_trend, response_trend=args.response_trend)
    for weights in args.weights.split(","):
        reps = args.reps if weights in ("predictable", "oracle") else args.check_reps
        t0 = time.process_time()
        df = pd.DataFrame([one_replication(s, weights, **kw) for s in range(reps)])
        cpu = time.process_time() - t0
        print(f"weights={weights} ({reps} reps, {df['sessions'].mean():.0f} sessions, "
              f"{df['rated'].mean():.0f} rated on average; {cpu / reps:.2f} CPU s per rep):")
        for name in ("naive", "augmented"):
            err = df[f"{name}_error_last"]
            print(f"  {name:9s} sequence covers at every look {_share(df[f'{name}_covers_all'])}"
                  f" (all-label effect {_share(df[f'{name}_covers_all_allabel'])}); last fixed"
                  f" interval {_share(df[f'{name}_ci_covers_last'])}; last error "
                  f"{err.mean():+.4f} ± {err.std() / np.sqrt(len(err)):.4f}; last sequence "
                  f"width {df[f'{name}_width_last'].mean():.3f}; last lambda (treatment) "
                  f"{df[f'{name}_lambda_last'].mean():.2f}")
        sh, win = df["augmented_shift_se_last"], df["augmented_window_error_last"]
        print(f"  drift check: warns (|time_shift| >= {DRIFT_WARN_SE} se) in "
              f"{_share(sh.abs() >= DRIFT_WARN_SE)}; time_shift {sh.mean():+.2f} se (5-95%: "
              f"{sh.quantile(0.05):+.2f} to {sh.quantile(0.95):+.2f}), "
              f"{df['augmented_shift_last'].mean():+.4f}; PPI++ window effect error "
              f"{win.mean():+.4f} ± {win.std() / np.sqrt(len(win)):.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
