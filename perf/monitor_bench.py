"""Benchmark of anytime-valid monitoring: speed, and type-I error / power by simulation.

Run: ``PYTHONPATH=. python perf/monitor_bench.py [replications]`` (default 4000 per setting).

1. Time of :func:`pulse_ml.stats.sequential.monitor.monitor_effect` for 10^6 sessions x 30
   looks, i.i.d. and clustered (100,000 users, users in both arms).
2. Type-I error (no effect) and power (an effect) of the naive and the PPI++ effect, for the
   fixed 95% Wald interval looked at every day for 21 days ("peeking"), the same interval looked
   at once on the last day, and the anytime-valid sequence; median stopping day of the sequence
   beside the planner's prediction (:func:`plan_monitoring`). Replications run in batches of
   1000 (seeded), and the table gives each rate's Monte-Carlo standard error.
"""

from __future__ import annotations

import sys
import time

import numpy as np

from pulse_ml.stats.sequential.monitor import monitor_effect
from pulse_ml.stats.sequential.planning import plan_monitoring
from pulse_ml.stats.sequential.simulation import simulate_monitoring

DAYS = 21
BATCH = 1000
STARS = (0.10, 0.08, 0.15, 0.27, 0.40)  # control's 1..5 star shares in the heavy-tailed settings
SIGNAL = 0.8  # share of the latent rating the predictor sees (rho ~ 0.82 with the stars)
SETTINGS = [  # (name, simulation settings, effects on the latent scale)
    ("i.i.d. sessions", {"n_users": None}, (0.0, 0.35)),
    ("100 users, both arms", {"n_users": 100, "randomize": "session"}, (0.0, 0.35)),
    ("100 users, one arm each", {"n_users": 100, "randomize": "user"}, (0.0, 0.35)),
    # stress: too few users for the asymptotics (documented limitation)
    ("30 users, user sd 0.8, both arms", {"n_users": 30, "user_sd": 0.8}, (0.0,)),
    # a few raters give most ratings: 150 users of Pareto(1.1) activity, skewed stars (warned:
    # < 40 effective labeled users per arm); replications with an arm under 10 labeled users
    # (refused by monitor) are left out
    ("150 users, Pareto(1.1) activity, both arms",
     {"n_users": 150, "activity": 1.1, "star_probs": STARS}, (0.0,)),
    ("150 users, Pareto(1.1) activity, one arm each",
     {"n_users": 150, "activity": 1.1, "star_probs": STARS, "randomize": "user"}, (0.0,)),
]


def _timing(repeats: int = 5) -> list[str]:
    rng = np.random.default_rng(0)
    n, looks = 10**6, 30
    arm = rng.integers(0, 2, n)
    labeled = rng.random(n) < 0.1
    rating = np.where(labeled, rng.integers(1, 6, n).astype(float), np.nan)
    prediction = rng.normal(4.0, 0.6, n)
    look = rng.integers(0, looks, n)
    users = rng.integers(0, 100_000, n)
    lines = ["| mode | best (s) | median (s) |", "|---|---|---|"]
    for name, u in (("i.i.d.", None), ("clustered, 100k users", users)):
        monitor_effect(arm, labeled, rating, prediction, look, looks, users=u)  # warm-up
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            monitor_effect(arm, labeled, rating, prediction, look, looks, users=u)
            times.append(time.perf_counter() - t0)
        lines.append(f"| {name} | {min(times):.3f} | {float(np.median(times)):.3f} |")
    return lines


def _population(effect: float, signal: float) -> tuple[float, float]:
    """Within-arm sd and rating-prediction correlation of the simulated sessions (large sample)."""
    big, _ = simulate_monitoring(
        1,
        n_days=20,
        labeled_per_day=5000,
        unlabeled_per_day=0,
        effect=effect,
        signal=signal,
        seed=99,
    )
    var, rho = [], []
    for a in (0, 1):
        m = big["arm"] == a
        var.append(big["rating"][m].var())
        rho.append(np.corrcoef(big["rating"][m], big["prediction"][m])[0, 1])
    return float(np.sqrt(np.mean(var))), float(np.mean(rho))


def _monitorable(data: dict, reps: int, n_users: int) -> tuple[dict, int]:
    """Keep the replications whose arms both have >= 10 labeled users (the monitor's burn-in)."""
    g, u = data["group"], data["users"] % n_users
    ok = np.ones(reps, dtype=bool)
    for a in (0, 1):
        m = data["labeled"] & (data["arm"] == a)
        cnt = np.bincount(g[m] * n_users + u[m], minlength=reps * n_users)
        ok &= (cnt.reshape(reps, n_users) > 0).sum(axis=1) >= 10
    rows = ok[g]
    out = {k: (v[rows] if v is not None else None) for k, v in data.items()}
    out["group"] = (np.cumsum(ok) - 1)[out["group"]]
    return out, int(ok.sum())


def _run(reps: int, effect: float, setting: dict, seed: int) -> dict[str, np.ndarray]:
    """Per replication: ever outside (peeking, sequence), last-look outside, stopping day."""
    out: dict[str, list[np.ndarray]] = {}
    true_effect = 0.0
    for b in range(0, reps, BATCH):
        r = min(BATCH, reps - b)
        data, true_effect = simulate_monitoring(
            r, n_days=DAYS, effect=effect, signal=SIGNAL, seed=seed + b, **setting
        )
        if setting.get("activity") is not None:
            data, r = _monitorable(data, r, setting["n_users"])
        res = monitor_effect(
            data["arm"],
            data["labeled"],
            data["rating"],
            data["prediction"],
            data["look"],
            DAYS,
            users=data["users"],
            groups=data["group"],
            horizon=DAYS,  # the monitor job's default target: a 21-day planned horizon
        )
        tab = res.table
        for est in ("naive", "augmented"):
            sub = tab[tab.estimator == est]
            for band, lo, hi in (("peek", "ci_lower", "ci_upper"), ("seq", "cs_lower", "cs_upper")):
                wrong = ((sub[lo] > true_effect) | (sub[hi] < true_effect)).to_numpy()
                zero = ((sub[lo] > 0) | (sub[hi] < 0)).to_numpy().reshape(r, DAYS)
                out.setdefault(f"{est}_{band}_miss", []).append(wrong.reshape(r, DAYS).any(1))
                out.setdefault(f"{est}_{band}_zero", []).append(zero.any(1))
                out.setdefault(f"{est}_{band}_last", []).append(zero[:, -1])
                day = np.where(zero.any(1), zero.argmax(1) + 1, DAYS + 1)
                out.setdefault(f"{est}_{band}_day", []).append(day)
    return {k: np.concatenate(v) for k, v in out.items()} | {"true": np.array(true_effect)}


def _rate(x: np.ndarray) -> str:
    p = float(np.mean(x))
    return f"{100 * p:.1f} ± {100 * np.sqrt(p * (1 - p) / x.size):.1f}"


def main() -> None:
    """Print the timing and the type-I / power tables as markdown."""
    reps = int(sys.argv[1]) if len(sys.argv) > 1 else 4000
    print("## Time for 10^6 sessions x 30 looks\n")
    print("\n".join(_timing()))
    print(f"\n## Type-I error and power, {reps} replications, {DAYS} daily looks, alpha = 5%\n")
    print("10 labeled + 100 unlabeled sessions per arm per day, 1-5 star ratings; % ± MC s.e.\n")
    print(
        "| setting | effect | estimator | peeking daily (fixed CI) | fixed CI, last day only | "
        "sequence | sequence median day (plan) | time-uniform coverage (sequence) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for name, setting, effects in SETTINGS:
        for effect in effects:
            t0 = time.perf_counter()
            res = _run(reps, effect, setting, seed=1000 + 17 * len(name) + int(100 * effect))
            plan = None
            if effect != 0 and setting["n_users"] is None:
                sd, rho = _population(effect, SIGNAL)
                plan = plan_monitoring(float(res["true"]), sd, rho, 10, 100, max_days=DAYS)
            for est in ("naive", "augmented"):
                day = res[f"{est}_seq_day"]
                med = float(np.median(day))
                med_s = f"{med:.0f}" if med <= DAYS else f"> {DAYS}"
                if plan is not None:
                    pm = getattr(plan, est).median_day
                    med_s += f" ({pm if pm is not None else f'> {DAYS}'})"
                cover = 100 - 100 * float(np.mean(res[f"{est}_seq_miss"]))
                print(
                    f"| {name} | {float(res['true']):.3f} | {est} | "
                    f"{_rate(res[f'{est}_peek_zero'])} | {_rate(res[f'{est}_peek_last'])} | "
                    f"{_rate(res[f'{est}_seq_zero'])} | {med_s if effect else '-'} | "
                    f"{cover:.1f} |"
                )
            print(
                f"<!-- {name}, effect {effect}: {time.perf_counter() - t0:.1f} s -->",
                file=sys.stderr,
            )
    print(
        "\nUnder effect 0 the columns are type-I errors (rejections of 0); under the effect "
        "they are powers. Coverage: share of replications whose sequence contains the true "
        "effect at all 21 looks."
    )


if __name__ == "__main__":
    main()
