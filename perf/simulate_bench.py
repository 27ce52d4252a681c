"""Time and peak memory of `pulse-ml simulate` on the default settings, without and with events.

Run: /work/venv/bin/python perf/simulate_bench.py [--repeat 3]
Each configuration runs in a fresh subprocess so peak RSS (ru_maxrss) is its own.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile

CHILD = r"""
import json, resource, sys, time, tempfile
from pathlib import Path
from pulse_ml.config import compose
from pulse_ml.settings import simulator_settings as settings_from_config
from pulse_ml.simulate.events import write_events
from pulse_ml.simulate.generator import simulate
events = sys.argv[1] == "1"
out = Path(sys.argv[2])
settings = settings_from_config(compose("simulate", []))
t0 = time.perf_counter()
result = simulate(settings)
t1 = time.perf_counter()
result.sessions.to_parquet(out / "sessions.parquet", index=False)
t2 = time.perf_counter()
n = write_events(result.sessions, out / "events", settings.seed) if events else 0
t3 = time.perf_counter()
print(json.dumps({"sessions": len(result.sessions), "generate_s": t1 - t0,
                  "parquet_s": t2 - t1, "events_s": t3 - t2, "event_files": n,
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    for events in (False, True):
        runs = []
        for _ in range(args.repeat):
            with tempfile.TemporaryDirectory() as tmp:
                proc = subprocess.run([sys.executable, "-c", CHILD, "1" if events else "0", tmp],
                                      capture_output=True, text=True, check=True)
                runs.append(json.loads(proc.stdout.strip().splitlines()[-1]))
        best = {k: min(r[k] for r in runs) for k in runs[0]}
        label = "default + events" if events else "default"
        print(f"{label:17s} sessions={best['sessions']} generate={best['generate_s']:.2f}s "
              f"parquet={best['parquet_s']:.2f}s events={best['events_s']:.2f}s "
              f"({best['event_files']} files) peak_rss={best['peak_rss_mb']:.0f} MB "
              f"(best of {args.repeat})")


if __name__ == "__main__":
    main()
