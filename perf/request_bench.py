"""Wall time of `pulse-ml request` on 10^6 sessions (target: <= 20 s on 2 cores).

Run: nice -n 10 /work/venv/bin/python perf/request_bench.py [--rows 1000000] [--model lightgbm]
     [--home DIR (reuse a home made by an earlier run: its model and big.parquet)] [--profile]

Simulates the demo table, trains and registers a quick model (1 Optuna trial, 5-fold
cross-fit, with its error model) in a temporary store, tiles the demo sessions to ``--rows``
rows (new ids) as Parquet, then times the whole command in a fresh process (``pulse-ml request
... log_mlflow=false``, so the time is the chunked predictions, the error model, the budget
scaling, the draw and the CSV) and, separately, the same with the MLflow run (the 10^6-row
CSV logged as its artifact), each with ``request.asking=active`` (the slow path: every
session predicted by the ensemble and the error model) and once with the default ``auto``.
CPU seconds (all threads) and the peak RSS of the process are
printed beside the wall time: on shared cores CPU seconds are the load-independent number.
``--profile`` also writes ``request.prof`` (cProfile of the first command) into the home.
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
    p.add_argument("--home", default=None)
    p.add_argument("--profile", action="store_true")
    args = p.parse_args(argv)
    home = _prepare(args) if args.home is None else _reuse(Path(args.home))
    path = home / "big.parquet"
    print(f"home {home}")
    # active: every session through the ensemble and the error model (the slow path); auto:
    # the default, uniform when the gate declines (the demo's error model: no predictions)
    for asking, log in (("active", "false"), ("active", "true"), ("auto", "false")):
        prof = (["-m", "cProfile", "-o", str(home / "request.prof")]
                if args.profile and log == "false" and asking == "active" else [])
        cmd = [sys.executable, *prof, "-m", "pulse_ml", "request", f"data.path={path}",
               f"out={home / f'requests_{log}.csv'}", "progress=false", f"log_mlflow={log}",
               f"request.asking={asking}"]
        wall, cpu, rss, res = _timed(cmd)
        if res.returncode != 0:
            print(res.stderr)
            return 1
        line = next(ln for ln in res.stdout.splitlines() if "sessions in" in ln)
        print(f"asking={asking} log_mlflow={log}: {args.rows:,} sessions, process wall "
              f"{wall:.1f} s, CPU "
              f"{cpu:.1f} s (all threads), peak RSS {rss:.0f} MB (load average "
              f"{os.getloadavg()[0]:.1f}); job says: {line.strip()}")
    return 0


def _prepare(args) -> Path:
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
    big.to_parquet(home / "big.parquet", index=False, row_group_size=100_000)
    return home


def _reuse(home: Path) -> Path:
    os.environ["PULSE_HOME"] = str(home)
    os.environ["MLFLOW_TRACKING_URI"] = f"sqlite:///{home / 'mlruns' / 'mlflow.db'}"
    return home


def _timed(cmd: list[str]):
    """(wall s, CPU s of the child, its peak RSS in MB, the completed process)."""
    import tempfile

    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, env=os.environ.copy())
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        res = subprocess.CompletedProcess(cmd, proc.returncode, out.read(), err.read())
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, res


if __name__ == "__main__":
    sys.exit(main())
