"""Seeded A/B tests for the decision rule: skewed stars, users with many sessions, a cost.

Ratings are stars from a standard-normal latent (shares 10/8/15/27/40 % at the null, as in
:mod:`tests.stats.realistic_sims`); a treatment shifts the latent by ``d``, set so that the mean
rating moves by the wanted number of stars. Every arm has users with Pareto-many sessions
(heavy-tailed activity, intra-user correlation 0.15 in the latent and 0.3 in the log-cost),
nested in the arm (users were randomized). The prediction is ``E[stars | x]`` plus noise (the
treatment's shift is not in it: the rectifier has to correct it). The demo's size is 175 rated
sessions per arm and 20 unrated per rated one.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import brentq
from scipy.stats import norm

from pulse_ml.inference.decision_rule import GuardrailCheck, Success, decide
from pulse_ml.stats.arm_batch import compare_batch
from pulse_ml.stats.arm_inputs import Arm
from pulse_ml.stats.decision_stats import cluster_mean_diff

STAR_SHARES = np.array([0.10, 0.08, 0.15, 0.27, 0.40])
CUTS = norm.ppf(np.cumsum(STAR_SHARES)[:-1])
ALPHA = 0.05
ICC = 0.15
COST_ICC = 0.3
COST_SD = 0.6


def mean_stars(shift: float) -> float:
    """Population mean rating when the latent is N(shift, 1)."""
    return float(1.0 + norm.sf(CUTS - shift).sum())


def latent_shift(effect: float) -> float:
    """The latent shift that moves the mean rating by ``effect`` stars."""
    base = mean_stars(0.0)
    return float(brentq(lambda d: mean_stars(d) - base - effect, -3.0, 3.0))


def _users(rng: np.random.Generator, size: int, offset: int) -> np.ndarray:
    counts = np.minimum(1 + np.floor(rng.pareto(1.3, size) * 2).astype(int), 100)
    ids = np.repeat(np.arange(counts.size), counts)[:size] + offset
    rng.shuffle(ids)
    return ids


def arm(rng: np.random.Generator, reps: int, n: int, big_n: int, effect: float = 0.0,
        cost_ratio: float = 1.0, offset: int = 0, signal: float = 0.3,
        pred_noise: float = 0.3) -> tuple[Arm, np.ndarray, np.ndarray]:
    """One arm of ``reps`` experiments: its :class:`Arm` (values (reps, n)), its costs
    (reps, n + big_n) and user ids of all its sessions (labeled first)."""
    size = n + big_n
    ids = _users(rng, size, offset)
    codes = np.unique(ids, return_inverse=True)[1]
    g = codes.max() + 1
    u = rng.normal(size=(reps, g))[:, codes]
    x = rng.normal(size=(reps, size))
    noise = np.sqrt(1.0 - signal - ICC)
    z = np.sqrt(signal) * x + np.sqrt(ICC) * u + noise * rng.normal(size=(reps, size))
    y = 1.0 + np.searchsorted(CUTS, z + latent_shift(effect)).astype(float)
    grid = np.linspace(-5, 5, 2001)
    sd = np.sqrt(1.0 - signal)
    means = 1.0 + norm.sf((CUTS[None, :] - np.sqrt(signal) * grid[:, None]) / sd).sum(1)
    f = np.interp(x, grid, means) + pred_noise * rng.normal(size=(reps, size))
    cu = rng.normal(size=(reps, g))[:, codes]
    log_cost = (np.sqrt(COST_ICC) * cu + np.sqrt(1 - COST_ICC) * rng.normal(size=(reps, size)))
    cost = 0.4 * cost_ratio * np.exp(COST_SD * log_cost - COST_SD ** 2 / 2)
    return (Arm(y=y[:, :n], f=f[:, :n], f_unl=f[:, n:], users=ids[:n], users_unl=ids[n:]),
            cost, ids)


def mc_se(rate: float, reps: int) -> float:
    """Monte Carlo standard error of a rejection rate."""
    return float(np.sqrt(max(rate * (1 - rate), 1e-12) / reps))


def ship_rates(batch, bound: float, guards=None) -> dict[str, float]:
    """Share of experiments the rule ships, per estimator (guards: per rep, its checks)."""
    out = {}
    for name, eff, se, df in (
            ("naive", batch.naive_effect, batch.naive_se, batch.result.naive_df),
            ("augmented", batch.aug_effect, batch.aug_se, batch.result.aug_df)):
        ships = [decide([Success(e, s, d, bound)], [[] if guards is None else guards[i]],
                        ALPHA, None, [])[0].decision == "ship"
                 for i, (e, s, d) in enumerate(zip(eff, se, df, strict=True))]
        out[name] = float(np.mean(ships))
    return out


def cost_guards(cost_c, ids_c, cost_t, ids_t, margin: float = 0.05) -> list:
    """Per experiment, the relative cost guardrail (lower is better) at ``margin``."""
    out = []
    for i in range(cost_c.shape[0]):
        d = cluster_mean_diff(cost_c[i], ids_c, cost_t[i], ids_t, relative=True)
        out.append([GuardrailCheck("cost_usd", -d.effect, d.se, -margin)])
    return out


def _table(reps: int = 2000) -> None:
    """Print the ship rates of the rule's designs (``python tests/inference/decision_sims.py``)."""
    rows = []
    rng = np.random.default_rng(1)
    for label, n, big_n, effect, ratio, bound in (
            ("NI at margin 0.1 (false ship)", 175, 3500, -0.1, 1.0, -0.1),
            ("equal, superiority (false ship)", 175, 3500, 0.0, 1.0, 0.0),
            ("rating at -0.1, cost -20%, NI+guard (false)", 175, 3500, -0.1, 0.8, -0.1),
            ("equal, cost +5%, NI+guard (false)", 175, 3500, 0.0, 1.05, -0.1),
            ("cheaper model, NI 0.15 + guard, demo size", 175, 3500, 0.0, 0.8, -0.15),
            ("cheaper model, superiority + guard, demo", 175, 3500, 0.0, 0.8, 0.0),
            ("cheaper model, NI 0.15 + guard, n=2000", 2000, 8000, 0.0, 0.8, -0.15),
            ("cheaper model, superiority + guard, 2000", 2000, 8000, 0.0, 0.8, 0.0)):
        r = reps if n < 1000 else reps // 5
        c, cc, ic = arm(rng, r, n, big_n)
        t, ct, it = arm(rng, r, n, big_n, effect=effect, cost_ratio=ratio, offset=10**7)
        guards = cost_guards(cc, ic, ct, it) if ratio != 1.0 else None
        rates = ship_rates(compare_batch(c, t), bound, guards)
        rows.append((label, r, rates["naive"], rates["augmented"]))
    c, _, _ = arm(rng, reps, 175, 3500)
    batches = [compare_batch(c, arm(rng, reps, 175, 3500, offset=(j + 1) * 10**7)[0])
               for j in range(3)]
    for holm_on in (True, False):
        any_ship = []
        for i in range(reps):
            succ = [Success(b.aug_effect[i], b.aug_se[i], b.result.aug_df[i], 0.0)
                    for b in batches]
            verdicts = (decide(succ, [[]] * 3, ALPHA, None, []) if holm_on else
                        [decide([x], [[]], ALPHA, None, [])[0] for x in succ])
            any_ship.append(any(v.decision == "ship" for v in verdicts))
        rate = float(np.mean(any_ship))
        rows.append((f"3 null variants, FWER ({'Holm' if holm_on else 'unadjusted'})", reps,
                     float("nan"), rate))
    print(f"{'design':<46} {'reps':>5} {'naive':>13} {'PPI++':>13}")
    for label, r, a, b in rows:
        print(f"{label:<46} {r:>5} {a:>6.3f}±{mc_se(a, r):.3f} {b:>6.3f}±{mc_se(b, r):.3f}")


if __name__ == "__main__":
    _table()
