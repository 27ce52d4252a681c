"""Coverage of active PPI++ in the seeded simulation of tests/support/active_sim.py.

Run: nice -n 10 /work/venv/bin/python perf/active_coverage.py --reps 1000

Heteroscedastic errors, ~25% feature-dependent non-response among the asked, users in both
arms, Pareto sessions per user, skewed 1-5 stars, pi ~ sqrt(expected error) at a 10% budget
(clipped at budget / 4). Prints coverage of the all-label effect with Monte-Carlo s.e. for the
active naive (IPW) and active PPI++ intervals, their widths, and the same draws asked uniformly
(analysed with the same non-response correction), plus the arm-mean bias with and without the
response model.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "support"))
from active_sim import one_replication  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reps", type=int, default=1000)
    args = p.parse_args(argv)
    for label, kw in (("active", {}), ("uniform", {"active": False}),
                      ("active, weights 1/pi only", {"correct_response": False})):
        df = pd.DataFrame([one_replication(s, **kw) for s in range(args.reps)])
        print(f"{label} ({args.reps} reps, {df['rated'].mean():.0f} rated on average):")
        for name in ("naive", "ppi"):
            c = df[f"{name}_covers"].mean()
            print(f"  {name:5s} coverage {c:.3f} ± {np.sqrt(c * (1 - c) / len(df)):.3f}  "
                  f"mean width {df[f'{name}_width'].mean():.3f}")
        err = df["ppi_control_mean_error"]
        print(f"  control-arm mean bias {err.mean():+.4f} ± {err.std() / np.sqrt(len(err)):.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
