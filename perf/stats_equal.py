"""Equality check across two trees: every number of ``compare_arms`` and ``compare_batch``.

For refactors of the statistics that must not move a number (issue 25, fixed cost): dump the
outputs of many seeded random designs in each tree, then compare the dumps.

Run (each tree on its own ``PYTHONPATH``)::

    PYTHONPATH=/tmp/before python perf/stats_equal.py dump /tmp/before.pkl
    PYTHONPATH=. python perf/stats_equal.py dump /tmp/after.pkl
    python perf/stats_equal.py compare /tmp/before.pkl /tmp/after.pkl

Designs (seed 12345, 200 by default: 2,968 comparisons): 3-59 labeled and 1-399
unlabeled sessions per arm, 2-119 users, correlation -0.2..0.99, a label shift in a third
of them, half-star ratings in 30%; cluster ids none, integer codes, strings, sparse
integers, labeled-only or unlabeled-only; each with and without weights under 7 option sets
(small-sample rules, lambda mode, CR2, lambda noise) and, for every other design,
5-replication batches. Refusals must be the same message; numbers equal to ``--tol``
(default 1e-12) relative to ``max(1, |value|)`` (percentages such as ``ci_reduction_pct``
as fractions: 100x a difference of two width ratios).
"""

from __future__ import annotations

import argparse
import dataclasses
import pickle

import numpy as np

from pulse_ml.errors import PulseError
from pulse_ml.stats.arm_batch import compare_batch
from pulse_ml.stats.arm_effect import compare_arms
from pulse_ml.stats.arm_inputs import Arm

OPTIONS = [{}, {"small_sample": False}, {"lam_mode": "per_arm"},
           {"small_sample": False, "lam_mode": "per_arm"}, {"cr2": False},
           {"lambda_noise": False}, {"cr2": False, "lambda_noise": False}]


def _plain(obj):
    if dataclasses.is_dataclass(obj):
        return {f.name: _plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, tuple):
        return tuple(_plain(x) for x in obj)
    return obj.copy() if isinstance(obj, np.ndarray) else obj


def _design(rng):
    n_c, n_t = rng.integers(3, 60, size=2)
    big_c, big_t = rng.integers(1, 400, size=2)
    n_users, rho = int(rng.integers(2, 120)), rng.uniform(-0.2, 0.99)
    shift = rng.choice([0.0, 0.0, 0.7])

    def values(n, big_n, mu):
        x = rng.normal(size=n + big_n)
        seen = x.copy()
        seen[:n] += shift
        f = seen + rng.normal(scale=rng.uniform(0.1, 2), size=n + big_n)
        y = mu + rho * x + rng.normal(size=n + big_n)
        y = np.round(y * 2) / 2 if rng.random() < 0.3 else y
        return y[:n], f[:n], f[n:]

    vals = (values(n_c, big_c, 3.0), values(n_t, big_t, 3.1))
    ids = [rng.integers(0, n_users, size=s) for s in (n_c, big_c, n_t, big_t)]
    weights = (rng.uniform(0.5, 3, n_c), rng.uniform(0.5, 3, n_t))
    return vals, ids, weights, rng.choice(["none", "int", "str", "lab_only", "offset",
                                           "unl_only"])


def _ids(kind, codes, labeled):
    if kind == "none" or (kind == "unl_only" and labeled) or (kind == "lab_only" and not labeled):
        return None
    if kind == "str":
        return np.array([f"u{v}" for v in codes], dtype=object)
    return codes * 1000 + 7 if kind == "offset" else codes


def dump(path: str, designs: int) -> None:
    rng, out = np.random.default_rng(12345), {}
    for rep in range(designs):
        vals, ids, weights, kind = _design(rng)
        for opts in OPTIONS:
            for weighted in (False, True):
                alpha = float(rng.choice([0.05, 0.1, 0.01]))
                arms = [Arm(*vals[a], _ids(kind, ids[2 * a], True),
                            _ids(kind, ids[2 * a + 1], False), weights[a] if weighted else None)
                        for a in (0, 1)]
                key = (rep, str(kind), weighted, tuple(sorted(opts.items())), alpha)
                try:
                    out[key] = _plain(compare_arms(*arms, alpha, **opts))
                except (PulseError, ValueError) as err:
                    out[key] = ("error", type(err).__name__, str(err))
        if kind in ("int", "none") and rep % 2 == 0:
            def batch(a):
                return np.stack([a + rng.normal(scale=0.1, size=a.size) for _ in range(5)])
            arms = [Arm(*(batch(v) for v in vals[a]), _ids(kind, ids[2 * a], True),
                        _ids(kind, ids[2 * a + 1], False)) for a in (0, 1)]
            for opts in OPTIONS[:3] + [{"cr2": False}]:
                out[("batch", rep, str(kind), tuple(sorted(opts.items())))] = _plain(
                    compare_batch(*arms, 0.05, **opts))
    with open(path, "wb") as fh:
        pickle.dump(out, fh)
    print(f"{len(out)} comparisons written to {path}")


def compare(path_a: str, path_b: str, tol: float) -> None:
    with open(path_a, "rb") as fa, open(path_b, "rb") as fb:
        a, b = pickle.load(fa), pickle.load(fb)  # noqa: S301 (our own dumps)
    assert a.keys() == b.keys(), "different designs"
    worst: dict[str, float] = {}

    def walk(x, y, name):
        if isinstance(x, dict):
            assert x.keys() == y.keys(), name
            for k in x:
                walk(x[k], y[k], k)
        elif isinstance(x, tuple) and x and x[0] == "error":
            assert x == y, (x, y)
        elif isinstance(x, tuple):
            for u, v in zip(x, y, strict=True):
                walk(u, v, name)
        elif x is None or isinstance(x, (str, bool)):
            assert x == y, (name, x, y)
        else:
            u, v = np.asarray(x, float), np.asarray(y, float)
            assert u.shape == v.shape and np.array_equal(np.isfinite(u), np.isfinite(v)), name
            fin = np.isfinite(u)
            assert np.array_equal(u[~fin], v[~fin], equal_nan=True), name
            diff = np.abs(u[fin] - v[fin]) / np.maximum(1.0, np.abs(u[fin]))
            if name.endswith("_pct"):  # percentages: compared as the fractions they are
                diff = diff / 100.0
            worst[name] = max(worst.get(name, 0.0), float(diff.max(initial=0.0)))

    for key in a:
        walk(a[key], b[key], str(key))
    top = sorted(worst.items(), key=lambda kv: -kv[1])[:5]
    print(f"{len(a)} comparisons; largest relative differences: "
          + ", ".join(f"{k} {v:.1e}" for k, v in top))
    bad = {k: v for k, v in worst.items() if v > tol}
    if bad:
        raise SystemExit(f"NOT equal to {tol:g}: {bad}")
    print(f"equal to {tol:g}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("dump")
    d.add_argument("path")
    d.add_argument("--designs", type=int, default=200)
    c = sub.add_parser("compare")
    c.add_argument("before")
    c.add_argument("after")
    c.add_argument("--tol", type=float, default=1e-12)
    args = parser.parse_args()
    if args.cmd == "dump":
        dump(args.path, args.designs)
    else:
        compare(args.before, args.after, args.tol)


if __name__ == "__main__":
    main()
