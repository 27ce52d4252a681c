"""Wall time of `pulse-ml request` on 10^6 sessions (target: <= 20 s on 2 cores).

Run: nice -n 10 /work/venv/bin/python perf/request_bench.py [--rows 1000000] [--model lightgbm]

Simulates the demo table, trains and registers a quick model (1 Optuna trial, 5-fold
cross-fit, with its error model) in a temporary store, tiles the demo sessions to ``--rows``
rows (new ids) as Parquet, then times the whole command in a fresh process (``pulse-ml request
... log_mlflow=false``, so the time is the chunked predictions, the error model, the budget
scaling, the draw and the CSV) and, separately, the same with the MLflow run (the 10^6-row
CSV logged as its artifact). CPU seconds (all threads) are printed beside the wall time: on
shared cores they are the load-independent number.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import demo_data, fresh_home  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--model", default="lightgbm")
    args = p.parse_args(argv)
    import numpy as np
    import pandas as pd

    from pulse_ml.config import compose
    from pulse_ml.jobs import train

    home = fresh_home("request_bench_")
    demo = demo_data(home)
    train.run(compose("train", [f"data.path={demo}", f"model={args.model}",
                                "tuning.n_trials=1", "progress=false"]))
    base = pd.read_parquet(demo)
    reps = int(np.ceil(args.rows / len(base)))
    big = pd.concat([base] * reps, ignore_index=True).iloc[:args.rows]
    big["session_id"] = [f"r{i:07d}" for i in range(len(big))]
    big["rating"] = np.nan
    path = home / "big.parquet"
    big.to_parquet(path, index=False, row_group_size=100_000)
    import resource

    for log in ("false", "true"):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        res = subprocess.run([sys.executable, "-m", "pulse_ml", "request", f"data.path={path}",
                              f"out={home / f'requests_{log}.csv'}", "progress=false",
                              f"log_mlflow={log}"], capture_output=True, text=True,
                             env=os.environ.copy())
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        if res.returncode != 0:
            print(res.stderr)
            return 1
        line = next(ln for ln in res.stdout.splitlines() if "sessions in" in ln)
        print(f"log_mlflow={log}: {args.rows:,} sessions, process wall {wall:.1f} s, CPU "
              f"{cpu:.1f} s (all threads; load average {os.getloadavg()[0]:.1f}); "
              f"job says: {line.strip()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
