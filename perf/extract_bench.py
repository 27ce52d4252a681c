"""Extraction speed (sessions/s) on synthetic OpenHands V0 event streams.

Writes a few thousand ``events/<session_id>.json`` files (user messages, agent ``run`` actions
with and without git, ``run`` observations) plus ``ratings.csv`` into a temp dir, then times
``pulse_ml.jobs.extract.extract``.

    python perf/extract_bench.py [--sessions 3000]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

COMMANDS = ["ls -la", "pytest -q", "cd repo && git status", "git add -A && git commit -m 'wip'",
            "git push origin feature", "git pull --rebase", "echo 'git push' > notes.txt",
            "python main.py | tee out.log", "git -C repo reset --hard HEAD~1", "make build"]


def write_sessions(root: Path, n: int, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    events_dir = root / "events"
    events_dir.mkdir(parents=True)
    rows = []
    for s in range(n):
        events, i = [], 0
        for seg in range(int(rng.integers(1, 15))):
            text = f"segment {seg}: please do task {rng.integers(1000)}"
            events.append({"id": i, "source": "user", "action": "message",
                           "args": {"content": text}, "message": text})
            i += 1
            for _ in range(int(rng.integers(1, 5))):
                cmd = COMMANDS[int(rng.integers(len(COMMANDS)))]
                events.append({"id": i, "source": "agent", "action": "run",
                               "args": {"command": cmd}, "message": f"Running {cmd}"})
                events.append({"id": i + 1, "source": "agent", "observation": "run",
                               "content": "ok\n" * 20, "cause": i,
                               "extras": {"command": cmd, "metadata": {"exit_code": 0}}})
                i += 2
            events.append({"id": i, "source": "agent", "action": "message",
                           "args": {"content": "Done."}})
            i += 1
            if rng.random() < 0.1:
                rows.append((f"s{s:05d}", seg + 1, int(rng.integers(1, 6))))
        (events_dir / f"s{s:05d}.json").write_text(json.dumps(events))
    pd.DataFrame(rows, columns=["session_id", "segment", "rating"]).to_csv(
        root / "ratings.csv", index=False)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sessions", type=int, default=3000)
    args = parser.parse_args()
    from pulse_ml.jobs.extract import ExtractSettings, extract

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        t0 = time.perf_counter()
        write_sessions(root, args.sessions)
        size = sum(p.stat().st_size for p in (root / "events").iterdir()) / 1e6
        t1 = time.perf_counter()
        res = extract(ExtractSettings(input=str(root / "events"), out=root / "t.parquet",
                                      ratings=root / "ratings.csv", progress=False))
        elapsed = time.perf_counter() - t1
        print(f"generated {args.sessions} sessions ({size:.1f} MB) in {t1 - t0:.1f} s")
        print(f"extracted {len(res.frame)} sessions in {elapsed:.2f} s -> "
              f"{len(res.frame) / elapsed:.0f} sessions/s "
              f"(git push in {int(res.frame['git_push'].sum())}, "
              f"labeled {int(res.frame['rating'].notna().sum())})")


if __name__ == "__main__":
    main()
