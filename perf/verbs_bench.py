"""Whole verbs side by side in one run: CPU seconds and peak memory, pulse_ml vs its floors.

Run: ``nice -n 10 /work/venv/bin/python perf/verbs_bench.py [--rows 1000000] [--workdir DIR
[--reuse]] [--baseline SRC_DIR] [--only score,infer,monitor,audit,help]``

Issue 25's targets, each a ratio measured in one run (CPU seconds: user + system time of the
verb's process and its threads, from ``os.wait4``, so other jobs on shared cores move them
less than wall time; peak = the process's ``ru_maxrss``):

* ``infer``, ``monitor`` and ``audit`` (``case_study=plan``, default replications) on the table
  <= 1.5x ``score`` on the same table, peak <= 1.2 GB at 10^6 sessions;
* every verb's ``--help`` <= 0.3 s CPU (``score``, ``infer``, ``monitor``, ``audit``, ``train``);
* ``infer`` on a demo-sized table (``--rows 36000``, the default demo's size) <= 6 s CPU;
* ``score`` at 10^4 rows <= 2x its floor (``--only score,floor``): ``score floor`` is a plain
  process that reads the table's feature columns with pandas, unpickles the registered
  ensemble's ``ensemble.joblib`` straight from the artifact folder (no MLflow), runs each fold
  model's own ``predict`` and writes ``session_id, prediction`` as Parquet.

Setup (once per ``--workdir``; ``--reuse`` skips it): the table is simulated with the demo's
case studies (``pulse-ml simulate``'s settings with ``n_labeled = 5,000`` and unlabeled sessions
up to ``--rows``; ISO ``started_at``, the free-text ``user_text`` column) and written as Parquet
(100k-row row groups); a quick model is registered with ``pulse-ml train`` (1 trial, 5 folds).

``--baseline SRC_DIR`` (e.g. ``git archive <commit> | tar -x -C SRC_DIR``) runs every command a
second time with that source tree first on ``PYTHONPATH``, interleaved with this tree's run:
the before/after table of ``perf/README.md``.
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

GEN = r"""
import json, sys, time
from dataclasses import replace
from pathlib import Path
import pyarrow as pa
import pyarrow.parquet as pq
from pulse_ml.config import compose
from pulse_ml.settings import simulator_settings
from pulse_ml.simulate.generator import simulate
out = Path(sys.argv[1]); rows, labeled = int(sys.argv[2]), int(sys.argv[3])
base = simulator_settings(compose("simulate", []))
settings = replace(base, n_labeled=labeled, unlabeled_ratio=rows / labeled - 1.0,
                   mc_sessions=20_000)
t0 = time.perf_counter()
sessions = simulate(settings).sessions
pq.write_table(pa.Table.from_pandas(sessions, preserve_index=False), out,
               row_group_size=100_000)
print(json.dumps({"rows": len(sessions), "labeled": int(sessions["rating"].notna().sum()),
                  "in_case_studies": int((sessions["case_study"] != "").sum()),
                  "seconds": time.perf_counter() - t0}))
"""

FLOOR = r"""
import sys
from pathlib import Path
import joblib
import numpy as np
import pandas as pd
from pulse_ml.models.preprocess import feature_frame
table, artifact, out = sys.argv[1:4]
Path(out).parent.mkdir(parents=True, exist_ok=True)
ensemble = joblib.load(artifact)
frame = pd.read_parquet(table, columns=["session_id", *ensemble.features.input_names])
X = feature_frame(frame, ensemble.features)
preds = np.mean([model.predict(X) for model in ensemble.models], axis=0)
pd.DataFrame({"session_id": frame["session_id"], "prediction": preds}).to_parquet(out)
"""

HELP_VERBS = ("score", "infer", "monitor", "audit", "train")
AUDIT_STUDY = "plan"  # audit's case study (its default replications: 1,000 splits, 200 hidings)


def newest_ensemble(workdir: Path) -> Path:
    """The ``ensemble.joblib`` of the newest model logged in ``workdir``'s store."""
    found = sorted(workdir.glob("mlruns/**/ensemble.joblib"), key=lambda p: p.stat().st_mtime)
    if not found:
        sys.exit(f"no ensemble.joblib under {workdir / 'mlruns'}")
    return found[-1]


def run_measured(cmd: list[str], env: dict[str, str], cwd: Path) -> dict:
    """Run ``cmd``; its CPU seconds (user + sys, all threads), wall seconds and peak RSS (MB)."""
    t0 = time.perf_counter()
    with open(cwd / "last_stdout.txt", "w") as out, open(cwd / "last_stderr.txt", "w") as err:
        proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=out, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        sys.exit(f"failed ({proc.returncode}): {' '.join(cmd)}\n"
                 + (cwd / "last_stderr.txt").read_text()[-3000:])
    return {"cpu": usage.ru_utime + usage.ru_stime, "wall": time.perf_counter() - t0,
            "peak_mb": usage.ru_maxrss / 1024}


def setup(workdir: Path, rows: int, labeled: int, env: dict[str, str]) -> Path:
    """Simulate the table and register a quick model (skipped with ``--reuse``)."""
    table = workdir / "sessions.parquet"
    proc = subprocess.run([sys.executable, "-c", GEN, str(table), str(rows), str(labeled)],
                          env=env, cwd=workdir, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"generation failed:\n{proc.stderr}")
    info = json.loads(proc.stdout.strip().splitlines()[-1])
    print(f"simulated {info['rows']:,} sessions ({info['labeled']:,} labeled, "
          f"{info['in_case_studies']:,} in case studies) in {info['seconds']:.0f} s")
    t0 = time.perf_counter()
    run_measured([sys.executable, "-m", "pulse_ml", "train", f"data.path={table}",
                  "model=lightgbm", "tuning.n_trials=1", "progress=false"], env, workdir)
    print(f"registered a 1-trial lightgbm model in {time.perf_counter() - t0:.0f} s")
    return table


def commands(table: Path, out: Path, only: set[str]) -> list[tuple[str, list[str]]]:
    """The measured commands (name, argv) in their order."""
    py = [sys.executable, "-m", "pulse_ml"]
    cmds = []
    if "score" in only:
        cmds.append(("score", [*py, "score", f"data.path={table}",
                               f"out={out / 'score.parquet'}", "progress=false"]))
    if "floor" in only:
        artifact = newest_ensemble(table.parent)
        cmds.append(("score floor", [sys.executable, "-c", FLOOR, str(table), str(artifact),
                                     str(out / "floor.parquet")]))
    if "infer" in only:
        cmds.append(("infer", [*py, "infer", f"data.path={table}", f"output={out / 'infer'}"]))
    if "monitor" in only:
        cmds.append(("monitor", [*py, "monitor", f"data.path={table}",
                                 f"output={out / 'monitor'}"]))
    if "audit" in only:
        cmds.append(("audit", [*py, "audit", f"data.path={table}", f"case_study={AUDIT_STUDY}",
                               f"output={out / 'audit'}", "progress=false"]))
    if "help" in only:
        cmds += [(f"{verb} --help", [*py, verb, "--help"]) for verb in HELP_VERBS]
    return cmds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--labeled", type=int, default=5_000)
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--reuse", action="store_true")
    parser.add_argument("--baseline", type=Path, default=None)
    parser.add_argument("--only", default="score,infer,monitor,audit,help")
    parser.add_argument("--repeat", type=int, default=1, help="rounds (best CPU is kept)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        workdir = (args.workdir or Path(tmp)).resolve()
        (workdir / "mlruns").mkdir(parents=True, exist_ok=True)
        here = Path(__file__).resolve().parent.parent
        env = {**os.environ, "PULSE_HOME": str(workdir), "MLFLOW_DISABLE_TELEMETRY": "true",
               "MLFLOW_TRACKING_URI": f"sqlite:///{workdir / 'mlruns' / 'mlflow.db'}",
               "PYTHONPATH": str(here)}
        table = workdir / "sessions.parquet"
        if not (args.reuse and table.is_file()):
            table = setup(workdir, args.rows, args.labeled, env)
        trees = [("now", env)]
        if args.baseline is not None:
            trees.insert(0, ("before", {**env, "PYTHONPATH": str(args.baseline.resolve())}))
        results: dict[tuple[str, str], dict] = {}
        for _ in range(args.repeat):
            for name, cmd in commands(table, workdir / "out", set(args.only.split(","))):
                for tree, tree_env in trees:
                    r = run_measured(cmd, tree_env, workdir)
                    best = results.get((tree, name))
                    if best is None or r["cpu"] < best["cpu"]:
                        results[(tree, name)] = r
        load = os.getloadavg()[0]
        print(f"\n{args.rows:,} rows; load average {load:.1f} on {os.cpu_count()} cores; "
              f"CPU s = user + sys of the verb's process (best of {args.repeat})\n")
        head = "| command | " + " | ".join(f"{t} CPU s | {t} peak MB" for t, _ in trees)
        print(head + " | " + " | ".join(f"{t} / score" for t, _ in trees) + " |")
        print("|---" * (1 + 3 * len(trees)) + "|")
        names = list(dict.fromkeys(n for _, n in results))
        for name in names:
            cells = []
            for tree, _ in trees:
                r = results[(tree, name)]
                cells.append(f"{r['cpu']:.2f} | {r['peak_mb']:.0f}")
            ratios = []
            for tree, _ in trees:
                score = results.get((tree, "score"))
                floor = results.get((tree, "score floor"))
                if name == "score" and floor is not None:  # score against its floor
                    ratios.append(f"{score['cpu'] / floor['cpu']:.2f}x floor")
                else:
                    ratios.append("" if score is None or "help" in name
                                  else f"{results[(tree, name)]['cpu'] / score['cpu']:.2f}x")
            print(f"| {name} | " + " | ".join(cells) + " | " + " | ".join(ratios) + " |")


if __name__ == "__main__":
    main()
