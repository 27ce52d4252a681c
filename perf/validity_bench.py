"""Validity benchmark: coverage tables of compare_arms and flag rates of the audits.

The same seeded designs as tests/stats (``tests/stats/validity_sims.py``) with more
replications; each row shows the corrected defaults next to the legacy formulas (ddof 0,
normal quantile, per-arm lambda) that issue 15 measured. Monte-Carlo s.d. of a coverage near
0.95 is sqrt(0.0475 / R) (0.0011 at R = 40,000; 0.0022 at 10,000).

Usage (from the repository root; ``--quick`` about 10 minutes on 2 cores, of which the audit
section 7 and the shared-users planner 1.5; full size about 4x)::

    PYTHONPATH=. python perf/validity_bench.py [--quick] [--only SECTION ...]
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "stats"))

import audit_sims  # noqa: E402
import validity_sims as sims  # noqa: E402

from pulse_ml.inference.propensity import crossfit_propensity  # noqa: E402
from pulse_ml.stats.arm_batch import compare_batch  # noqa: E402
from pulse_ml.stats.arm_effect import compare_arms  # noqa: E402
from pulse_ml.stats.arm_inputs import Arm  # noqa: E402
from pulse_ml.stats.consistency import labeled_unlabeled_consistency  # noqa: E402
from pulse_ml.stats.half_checks import audit_halves  # noqa: E402
from pulse_ml.stats.power import labels_needed, planned_power  # noqa: E402
from pulse_ml.stats.split_half import split_half_audit  # noqa: E402

LEGACY = {"small_sample": False, "lam_mode": "per_arm"}


def _batched(make, reps, chunk):
    """Run compare_batch (defaults and legacy) on ``reps`` data sets in chunks."""
    out = {"default": [], "legacy": []}
    tau = None
    for i, start in enumerate(range(0, reps, chunk)):
        arms, kw, tau = make(min(chunk, reps - start), i)
        out["default"].append(compare_batch(*arms, **kw))
        out["legacy"].append(compare_batch(*arms, **kw, **LEGACY))
    return out, tau


def _cover(parts, tau):
    nv = np.concatenate([(p.naive_lower <= tau) & (tau <= p.naive_upper) for p in parts])
    au = np.concatenate([(p.aug_lower <= tau) & (tau <= p.aug_upper) for p in parts])
    return nv.mean(), au.mean()


def _cat(parts, name):
    return np.concatenate([getattr(p, name) for p in parts])


def small_samples(scale):
    """Coverage and CI reduction at n = 10, 20, 30 labels per arm."""
    print("\n## Small samples (i.i.d. sessions, N = 10 n unlabeled per arm)\n")
    print("| n | rho | naive cov | aug cov | legacy naive | legacy aug | reported gain % "
          "| real gain % | legacy reported % |")
    print("|---|---|---|---|---|---|---|---|---|")
    reps = 40_000 // scale
    for n in (10, 20, 30):
        for rho in (0.0, 0.5):
            res, tau = _batched(
                lambda r, i, n=n, rho=rho: sims.iid(r, n, 10 * n, rho, 1000 * n + i), reps, 10_000)
            d, leg = res["default"], res["legacy"]
            real = 100 * (1 - _cat(d, "aug_effect").std() / _cat(d, "naive_effect").std())
            print(f"| {n} | {rho} | {_cover(d, tau)[0]:.4f} | {_cover(d, tau)[1]:.4f} | "
                  f"{_cover(leg, tau)[0]:.4f} | {_cover(leg, tau)[1]:.4f} | "
                  f"{np.mean(_cat(d, 'ci_reduction_pct')):+.2f} | {real:+.2f} | "
                  f"{np.mean(_cat(leg, 'ci_reduction_pct')):+.2f} |")


def few_unlabeled(scale):
    """Coverage with 1-20 unlabeled sessions per arm, clustered."""
    print("\n## Few unlabeled sessions per arm, clustered (40 users x 3 labels per arm)\n")
    print("| N | naive cov | aug cov | legacy aug cov | mean lambda | gain % |")
    print("|---|---|---|---|---|---|")
    reps = 20_000 // scale
    for big_n in (1, 2, 3, 5, 20):
        res, tau = _batched(lambda r, i, big_n=big_n: sims.few_unlabeled(r, big_n, 50 * big_n + i),
                            reps, 5_000)
        d, leg = res["default"], res["legacy"]
        print(f"| {big_n} | {_cover(d, tau)[0]:.4f} | {_cover(d, tau)[1]:.4f} | "
              f"{_cover(leg, tau)[1]:.4f} | {_cat(d, 'lam').mean():.3f} | "
              f"{np.mean(_cat(d, 'ci_reduction_pct')):+.2f} |")


def heavy_tailed(scale):
    """Coverage and joint vs per-arm lambda with heavy-tailed users."""
    print("\n## Heavy-tailed users (Pareto sessions per user, t(3) effects), users in both "
          "arms\n")
    print("| design seed | naive cov | aug cov | legacy aug | joint: in-sample wider | "
          "per-arm: in-sample wider | per-arm worst gain % | mean gain joint / per-arm % |")
    print("|---|---|---|---|---|---|---|---|")
    reps = 10_000 // scale
    for seed in range(3):
        arms, kw, tau = sims.heavy_tailed(reps, seed)
        d = compare_batch(*arms, **kw)
        pa = compare_batch(*arms, **kw, lam_mode="per_arm")
        leg = compare_batch(*arms, **kw, **LEGACY)
        w_joint = np.mean(d.aug_se_in_sample > d.naive_se * (1 + 1e-12))
        w_arm = np.mean(pa.aug_se_in_sample > pa.naive_se * (1 + 1e-12))
        print(f"| {seed} | {_cover([d], tau)[0]:.4f} | {_cover([d], tau)[1]:.4f} | "
              f"{_cover([leg], tau)[1]:.4f} | {w_joint:.3f} | {w_arm:.3f} | "
              f"{np.min(pa.ci_reduction_pct):+.1f} | {np.mean(d.ci_reduction_pct):+.1f} / "
              f"{np.mean(pa.ci_reduction_pct):+.1f} |")


def paper_scale(scale):
    """Coverage at the paper's scale with 1-5 star ratings."""
    print("\n## Paper scale (1-5 stars, mean ~4.1, r ~ 0.3, N = 20 n)\n")
    print("| n per arm | naive cov | aug cov | legacy aug | gain % |")
    print("|---|---|---|---|---|")
    reps = 10_000 // scale
    for n in (100, 200, 400):
        res, tau = _batched(lambda r, i, n=n: sims.paper_scale(r, 7 * n + i, n=n, big_n=20 * n),
                            reps, 1_000)
        d, leg = res["default"], res["legacy"]
        print(f"| {n} | {_cover(d, tau)[0]:.4f} | {_cover(d, tau)[1]:.4f} | "
              f"{_cover(leg, tau)[1]:.4f} | {np.mean(_cat(d, 'ci_reduction_pct')):+.2f} |")


AUDIT_CASES = [
    ("valid: naive, cluster-robust", {}, "naive"),
    ("valid: augmented, cluster-robust", {}, "augmented"),
    ("valid: augmented, session-randomized", {"by_user": False}, "augmented"),
    ("valid: augmented, 60 users", {"n_users": 60}, "augmented"),
    ("valid: strong predictor r 0.85, heavy-tailed users", {"strong": {"n_users": 300}},
     "augmented"),
    ("valid: strong predictor, 1 session per user, ~30 labels/arm",
     {"strong": {"n_users": 1000, "cap": 1, "rate_users": 1.0, "rate_sessions": 0.06}},
     "augmented"),
    ("invalid: naive i.i.d. on clustered", {}, "naive_iid"),
    ("invalid: augmented i.i.d. on clustered", {}, "augmented_iid"),
    ("invalid: augmented i.i.d., true coverage 0.83", {"sd_u": 0.7}, "augmented_iid"),
    ("invalid: naive i.i.d., icc 0.5", {"sd_u": 1.4}, "naive_iid"),
    ("invalid: in-sample predictions (leak 0.8)", {"leak": 0.8, "tau": 0.5, "by_user": False},
     "augmented"),
    ("invalid: in-sample predictions (leak 0.5)", {"leak": 0.5, "tau": 0.5}, "augmented"),
]


def audits(scale):
    """Flag rates of `pulse-ml audit`'s verdict (variance + bias check) and the classic check."""
    print("\n## Audits: share of data sets flagged (100 data sets x 1000 splits)\n")
    print("| analysis | true coverage | flagged 'too narrow' (MC s.e.) | valid | variance-check "
          "rate | classic check flagged (method on A vs naive on B) | consistency rate "
          "(augmented / naive; not coverage) |")
    print("|---|---|---|---|---|---|---|")
    datasets = 100 // scale
    for label, design, method in AUDIT_CASES:
        covered, rates, verdicts, classic, old_a, old_n = [], [], [], [], [], []
        for d in range(datasets):
            if "strong" in design:
                (c, t), tau = audit_sims.strong_predictor(20_000 + d, **design["strong"])
            else:
                (c, t), tau = sims.audit_dataset(20_000 + d, **design)
            audit = audit_halves(c, t, method=method, replications=1000, seed=d)
            verdicts.append(audit.verdict)
            rates.append(audit.variance.rate)
            classic.append(split_half_audit(c, t, method=method, replications=1000,
                                            seed=d).verdict == "too narrow")
            clustered = not method.endswith("iid")
            arms = (c, t) if clustered else (Arm(c.y, c.f, c.f_unl), Arm(t.y, t.f, t.f_unl))
            cmp = compare_arms(*arms)
            est = cmp.naive if method.startswith("naive") else cmp.augmented
            covered.append(est.ci_lower <= tau <= est.ci_upper)
            old = labeled_unlabeled_consistency(c, t, clusters=clustered, replications=200,
                                                seed=d)
            old_a.append(old.rate_augmented)
            old_n.append(old.rate_naive)
        v = np.array(verdicts)
        flagged = np.mean(v == "too narrow")
        print(f"| {label} | {np.mean(covered):.2f} | {flagged:.2f} "
              f"({np.sqrt(flagged * (1 - flagged) / datasets):.2f}) | {np.mean(v == 'valid'):.2f} "
              f"| {np.nanmean(rates):.3f} | {np.mean(classic):.2f} | "
              f"{np.mean(old_a):.3f} / {np.mean(old_n):.3f} |")


def shift(scale):
    """Coverage under feature-dependent labeling, with and without weights."""
    print("\n## Feature-dependent labeling: unweighted vs reweighted PPI++\n")
    reps, reps_cf = 3_000 // scale, 600 // scale
    cov = {"unweighted": [], "true propensity": [], "cross-fitted propensity": []}
    for r in range(reps):
        x, lab, arm, y, f, p, tau = sims.shifted_labeling(10_000 + r)
        c, t = arm == 0, arm == 1
        props = {"unweighted": None, "true propensity": p}
        if r < reps_cf:
            props["cross-fitted propensity"] = crossfit_propensity(x, lab, seed=r)
        for name, prop in props.items():
            w = (None, None) if prop is None else (1 / prop[c & lab], 1 / prop[t & lab])
            res = compare_arms(Arm(y[c & lab], f[c & lab], f[c & ~lab], w=w[0]),
                               Arm(y[t & lab], f[t & lab], f[t & ~lab], w=w[1]))
            cov[name].append((res.augmented.ci_lower <= tau <= res.augmented.ci_upper,
                              res.naive.ci_lower <= tau <= res.naive.ci_upper))
    print("| weights | replications | aug cov | naive cov |")
    print("|---|---|---|---|")
    for name, values in cov.items():
        arr = np.array(values, dtype=float)
        print(f"| {name} | {arr.shape[0]} | {arr[:, 0].mean():.4f} | {arr[:, 1].mean():.4f} |")


def planner(scale):
    """Planned vs simulated power for a clustered design."""
    print("\n## Planner: planned vs simulated power, users nested in arms (4 labels/user, "
          "icc 0.2, rho 0.6)\n")
    sys.path.insert(0, str(ROOT / "tests" / "stats"))
    from test_power import _clustered_power

    reps = 6_000 // scale
    print("| effect | estimator | n per arm | planned | simulated |")
    print("|---|---|---|---|---|")
    de = 1 + 3 * 0.2
    for effect in (0.3, 0.5):
        for big_n in (400, 4000):
            plan = labels_needed(effect, 1.0, rho=0.6, n_unlabeled=big_n, design_effect=de,
                                 labels_per_user=4)
            for name, n, rho in (("naive", plan.n_naive, 0.0), ("ppi", plan.n_ppi, 0.6)):
                n4 = 4 * math.ceil(n / 4)
                sim = _clustered_power(n4, effect, big_n, reps, n4, ppi=rho > 0)
                planned = planned_power(n4, effect, 1.0, rho, big_n, design_effect=de,
                                        labels_per_user=4)
                print(f"| {effect} (N={big_n}) | {name} | {n4} | {planned:.3f} | {sim:.3f} |")


def planner_shared(scale):
    """Planned vs simulated power with users in both arms (sessions randomized)."""
    from test_power import shared_users_powers

    print("\n## Planner: users in both arms (Pareto sessions, 1-5 stars, a quarter rated)\n")
    print("| structure seed | kappa | estimator | simulated (MC s.e.) | planned | pooled deff "
          "(old) | labels: planned / old |")
    print("|---|---|---|---|---|---|---|")
    reps = 6_000 // scale
    for seed in (10, 11):
        res = shared_users_powers(seed, reps=reps)
        for key in ("naive", "ppi"):
            sim, planned, old = res[key]
            n_new = res["plan"].n_naive if key == "naive" else res["plan"].n_ppi
            n_old = (res["pooled_plan"].n_naive if key == "naive"
                     else res["pooled_plan"].n_ppi)
            print(f"| {seed} | {res['design'].arm_correlation:.2f} | {key} | {sim:.3f} "
                  f"({np.sqrt(sim * (1 - sim) / reps):.3f}) | {planned:.3f} | {old:.3f} | "
                  f"{n_new} / {n_old} |")


SECTIONS = {"small": small_samples, "unlabeled": few_unlabeled, "heavy": heavy_tailed,
            "paper": paper_scale, "audit": audits, "shift": shift, "planner": planner,
            "planner_shared": planner_shared}


def main() -> None:
    """Print the tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="4x fewer replications")
    parser.add_argument("--only", nargs="*", choices=sorted(SECTIONS), help="sections to run")
    args = parser.parse_args()
    scale = 4 if args.quick else 1
    for name in args.only or SECTIONS:
        start = time.perf_counter()
        SECTIONS[name](scale)
        print(f"\n({name}: {time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
