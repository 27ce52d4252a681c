"""Wall time and peak memory of `pulse-ml score` on 10^6 sessions: chunks vs one chunk.

Run: /work/venv/bin/python perf/score_bench.py [--rows 1000000] [--labeled 5000]
     [--model lightgbm] [--chunk 100000] [--workdir DIR [--reuse]] [--only N,...]
     [--baseline SRC_DIR] [--repeat K]

``--baseline SRC_DIR`` (a checkout of an older pulse_ml, e.g. ``git archive <commit> | tar -x``)
adds "chunked BASE": the default fast path of that code, run in the same way; ``--repeat K``
interleaves K rounds of every configuration (on shared CPUs, compare runs of one round and
the best of each configuration, not numbers from different moments).

1. Generates a session table with the demo simulator (vectorized; ``n_labeled`` rated sessions
   plus unlabeled ones up to ``--rows``) and writes it as Parquet (100k-row row groups and one
   single row group, pyarrow's default for 1M rows) and as CSV.
2. Trains and registers a quick model (1 Optuna trial, 5-fold cross-fit) in a temporary MLflow
   sqlite store with ``pulse-ml train``.
3. Scores each input in a fresh subprocess: ``score_file`` with ``--chunk`` rows per chunk,
   ``score_file`` in one chunk, and the plain in-memory path (``read_parquet`` +
   ``honest_predict`` + ``to_parquet``). Peak RSS is measured for the scoring step only (the
   kernel's high-water mark is reset after the model is loaded: ``/proc/self/clear_refs``), plus
   the process-wide ``ru_maxrss``, the CPU time of the scoring step (``time.process_time``, all
   threads: less sensitive than wall time to other jobs on shared cores) and, with
   ``--tracemalloc``, the peak of Python/numpy
   allocations (tracemalloc does not see pyarrow's allocator and slows the run).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CHILD = r"""
import json, os, resource, sys, time
mode, src, out = sys.argv[1:4]
chunk, trace = int(sys.argv[4]), sys.argv[5] == "1"
from pulse_ml import keys
from pulse_ml.registry import models as mlflow_io
from pulse_ml.registry import store as tracking
from pulse_ml.inference.scoring import ScoreSettings, score_file
import pandas as pd

def rss_kb(key):
    for line in open("/proc/self/status"):
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return 0

tracking.setup(keys.INFER_EXPERIMENT)
ensemble, _ = mlflow_io.load_registered("models:/pulse-satisfaction@champion")
base = rss_kb("VmRSS")
try:
    with open("/proc/self/clear_refs", "w") as fh:   # reset VmHWM to the current RSS
        fh.write("5")
    reset = True
except OSError:
    reset = False
if trace:
    import tracemalloc
    tracemalloc.start()
t0, c0 = time.perf_counter(), time.process_time()
if mode == "memory":
    frame = pd.read_parquet(src) if src.endswith(".parquet") else pd.read_csv(src)
    preds, used = ensemble.honest_predict(frame)
    pd.DataFrame({"session_id": frame["session_id"].astype(str), "prediction": preds,
                  "honest": used.astype("int8")}).to_parquet(out, index=False)
    n = len(frame)
else:
    fast = mode == "stream"   # "stream_old": the plain CrossFitEnsemble.predict path
    n = score_file(ensemble, src, out,
                   ScoreSettings(chunk_size=chunk, progress=False, fast=fast)).n_rows
wall, cpu = time.perf_counter() - t0, time.process_time() - c0
res = {"rows": n, "wall_s": wall, "cpu_s": cpu, "rss_before_mb": base / 1024,
       "peak_rss_scoring_mb": rss_kb("VmHWM") / 1024 if reset else None,
       "ru_maxrss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
if trace:
    res["tracemalloc_peak_mb"] = tracemalloc.get_traced_memory()[1] / 2**20
try:
    import psutil
    res["psutil_rss_mb"] = psutil.Process().memory_info().rss / 2**20
except ImportError:
    pass
print(json.dumps(res))
"""


GEN = r"""
import json, sys, time
from pathlib import Path
import pyarrow as pa
import pyarrow.parquet as pq
from pulse_ml.simulate.generator import simulate
from pulse_ml.simulate.spec import SimulateSettings
workdir = Path(sys.argv[1])
rows, labeled, seed = (int(a) for a in sys.argv[2:5])
t0 = time.perf_counter()
sessions = simulate(SimulateSettings(seed=seed, n_labeled=labeled,
                                     unlabeled_ratio=rows / labeled - 1.0,
                                     mc_sessions=20_000)).sessions
t1 = time.perf_counter()
table = pa.Table.from_pandas(sessions, preserve_index=False)
pq.write_table(table, workdir / "sessions.parquet", row_group_size=100_000)
pq.write_table(table, workdir / "sessions_one_row_group.parquet", row_group_size=len(sessions))
sessions.to_csv(workdir / "sessions.csv", index=False)
print(json.dumps({"rows": len(sessions), "labeled": int(sessions["rating"].notna().sum()),
                  "generate_s": t1 - t0, "write_s": time.perf_counter() - t1}))
"""


def generate(workdir: Path, rows: int, labeled: int, seed: int) -> dict[str, Path]:
    """Write the benchmark table as Parquet (two row-group layouts) and CSV.

    Runs in a subprocess: a big parent process would inflate the children's ``ru_maxrss`` (a
    forked child starts with the parent's resident pages).
    """
    proc = subprocess.run([sys.executable, "-c", GEN, str(workdir), str(rows), str(labeled),
                           str(seed)], capture_output=True, text=True, cwd=workdir)
    if proc.returncode != 0:
        sys.exit(f"generation failed:\n{proc.stderr}")
    info = json.loads(proc.stdout.strip().splitlines()[-1])
    paths = {"parquet_rg100k": workdir / "sessions.parquet",
             "parquet_1rg": workdir / "sessions_one_row_group.parquet",
             "csv": workdir / "sessions.csv"}
    print(f"generated {info['rows']:,} sessions ({info['labeled']:,} labeled) in "
          f"{info['generate_s']:.1f} s; files written in {info['write_s']:.1f} s (parquet "
          f"{paths['parquet_rg100k'].stat().st_size / 2**20:.0f} MB, csv "
          f"{paths['csv'].stat().st_size / 2**20:.0f} MB)")
    return paths


def train(workdir: Path, data: Path, model: str, env: dict[str, str]) -> None:
    """Register a quick model with ``pulse-ml train`` (1 trial, 5-fold cross-fit)."""
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "pulse_ml", "train", f"data.path={data}",
                           f"model={model}", "tuning.n_trials=1", "progress=false"],
                          env=env, capture_output=True, text=True, cwd=workdir)
    if proc.returncode != 0:
        sys.exit(f"training failed:\n{proc.stdout}\n{proc.stderr}")
    print(f"trained and registered {model} in {time.perf_counter() - t0:.1f} s")


def measure(mode: str, src: Path, out: Path, chunk: int, trace: bool,
            env: dict[str, str]) -> dict:
    """Score once in a fresh subprocess; returns its measurements."""
    # cwd = the table's folder: ``python -c`` puts the cwd first on sys.path, and a checkout's
    # pulse_ml there would shadow the PYTHONPATH of --baseline
    proc = subprocess.run([sys.executable, "-c", CHILD, mode, str(src), str(out), str(chunk),
                           "1" if trace else "0"], env=env, capture_output=True, text=True,
                          cwd=src.parent)
    if proc.returncode != 0:
        sys.exit(f"scoring failed ({mode} {src.name}):\n{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--labeled", type=int, default=5_000)
    parser.add_argument("--model", default="lightgbm")
    parser.add_argument("--chunk", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tracemalloc", action="store_true")
    parser.add_argument("--only", default=None,
                        help="comma-separated 1-based indices of the configurations to run")
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--baseline", type=Path, default=None,
                        help="source tree of an older pulse_ml to time as 'chunked BASE'")
    parser.add_argument("--repeat", type=int, default=1, help="rounds of every configuration")
    parser.add_argument("--reuse", action="store_true",
                        help="reuse the table and registered model of a previous --workdir run")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        workdir = (args.workdir or Path(tmp)).resolve()
        workdir.mkdir(parents=True, exist_ok=True)
        (workdir / "mlruns").mkdir(exist_ok=True)
        env = {**os.environ, "PULSE_HOME": str(workdir), "MLFLOW_DISABLE_TELEMETRY": "true",
               "MLFLOW_TRACKING_URI": f"sqlite:///{workdir / 'mlruns' / 'mlflow.db'}"}
        paths = {"parquet_rg100k": workdir / "sessions.parquet",
                 "parquet_1rg": workdir / "sessions_one_row_group.parquet",
                 "csv": workdir / "sessions.csv"}
        if not (args.reuse and all(p.is_file() for p in paths.values())
                and (workdir / "mlruns" / "mlflow.db").is_file()):
            paths = generate(workdir, args.rows, args.labeled, args.seed)
            train(workdir, paths["parquet_rg100k"], args.model, env)
        runs = [("parquet (100k row groups)", "chunked", paths["parquet_rg100k"], args.chunk),
                ("parquet (100k row groups)", "chunked OLD", paths["parquet_rg100k"], args.chunk),
                ("parquet (100k row groups)", "one chunk", paths["parquet_rg100k"], 10**9),
                ("parquet (100k row groups)", "in memory", paths["parquet_rg100k"], 0),
                ("parquet (1 row group)", "chunked", paths["parquet_1rg"], args.chunk),
                ("csv", "chunked", paths["csv"], args.chunk),
                ("csv", "one chunk", paths["csv"], 10**9)]
        print(f"\n{'input':27s} {'mode':11s} {'rows':>9s} {'wall s':>7s} {'cpu s':>6s} "
              f"{'rows/s':>9s} "
              f"{'peak RSS scoring MB':>20s} {'ru_maxrss MB':>13s}"
              + (f" {'tracemalloc MB':>15s}" if args.tracemalloc else ""))
        if args.only:
            runs = [runs[int(i) - 1] for i in args.only.split(",")]
        if args.baseline is not None:
            runs.insert(0, ("parquet (100k row groups)", "chunked BASE", paths["parquet_rg100k"],
                            args.chunk))
        base_env = (None if args.baseline is None else
                    {**env, "PYTHONPATH": str(args.baseline.resolve())})
        for label, mode, src, chunk in [run for _ in range(args.repeat) for run in runs]:
            kind = ("memory" if mode == "in memory" else
                    "stream_old" if mode.endswith("OLD") else "stream")
            r = measure(kind, src, workdir / "out.parquet", chunk, args.tracemalloc,
                        base_env if mode.endswith("BASE") else env)
            peak = r["peak_rss_scoring_mb"]
            print(f"{label:27s} {mode:11s} {r['rows']:9,d} {r['wall_s']:7.1f} {r['cpu_s']:6.1f} "
                  f"{r['rows'] / r['wall_s']:9,.0f} "
                  f"{'n/a' if peak is None else f'{peak:.0f}':>20s} {r['ru_maxrss_mb']:13.0f}"
                  + (f" {r['tracemalloc_peak_mb']:15.0f}" if args.tracemalloc else ""))
        print(f"\n(model {args.model}; RSS after loading the model ~{r['rss_before_mb']:.0f} MB; "
              f"chunked = chunk_size {args.chunk:,})")


if __name__ == "__main__":
    main()
