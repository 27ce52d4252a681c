"""Benchmark: the audit's split-half checks on a case study of the 10^6-session demo's shape.

Run: nice -n 10 python perf/audit_bench.py [--users 60000] [--labeled 350] [--sessions 70000]

Synthetic arms shaped like the ``plan`` case study of ``perf/verbs_bench.py --rows 1000000``
(70,000 sessions of 60,064 users, 350 of them labeled by 350 users): ``audit_halves`` for the
augmented and the naive method with the ``audit`` verb's default 1,000 splits. Prints the CPU
seconds of this process and the peak of numpy's allocations (``tracemalloc``), the part of the
verb's time and memory that the split-half statistics add to reading and predicting.
"""

from __future__ import annotations

import argparse
import time
import tracemalloc

import numpy as np

from pulse_ml.stats.arm_inputs import Arm
from pulse_ml.stats.half_checks import audit_halves


def _arm(rng: np.random.Generator, labeled: int, sessions: int, users: int) -> Arm:
    u = rng.integers(0, users, sessions)
    x = rng.normal(size=sessions)
    y, f = np.clip(np.round(3.5 + x + rng.normal(size=sessions)), 1, 5), 3.5 + x
    return Arm(y[:labeled], f[:labeled], f[labeled:], users=u[:labeled], users_unl=u[labeled:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=60_000)
    parser.add_argument("--labeled", type=int, default=350)
    parser.add_argument("--sessions", type=int, default=70_000)
    parser.add_argument("--replications", type=int, default=1_000)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    arms = [_arm(rng, args.labeled // 2, args.sessions // 2, args.users) for _ in range(2)]
    tracemalloc.start()
    t0 = time.process_time()
    for method in ("augmented", "naive"):
        audit_halves(*arms, method=method, replications=args.replications, seed=0)
    _, peak = tracemalloc.get_traced_memory()
    print(f"{args.sessions:,} sessions, {args.users:,} users, {args.labeled} labeled, "
          f"{args.replications} splits x 2 methods: {time.process_time() - t0:.1f} s CPU, "
          f"traced peak {peak / 2**20:.0f} MB")


if __name__ == "__main__":
    main()
