"""Labeled-vs-unlabeled consistency check (formerly called "calibrated coverage").

Hide a share of the labeled units, let their predictions join the unlabeled pool and
compare the nested estimates, ``|D_sub - D_all| <= z sqrt(se_sub^2 - se_all^2)`` (Hausman). For
the naive estimator this is nearly a tautology whatever variance formula is used: nested
estimates share their labels, so it cannot see dependence between users. What it does react to
is a shift between the predictions of labeled and unlabeled sessions (hidden labeled sessions
then do not look like the unlabeled ones) -- including the shift that predictions fitted on the
labels create when the hidden sessions keep them.

Replications hide whole units, so each is one mask product
(:mod:`~pulse_ml.stats.half_moments`), all solved in one vectorized pass.

References:
    J. A. Hausman. Specification tests in econometrics. Econometrica 46(6), 1978.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from pulse_ml.stats import effect_engine as engine
from pulse_ml.stats.arm_inputs import Arm
from pulse_ml.stats.half_moments import masked, prepare_arms, split_units, unit_diffs

__all__ = ["ConsistencyCheck", "labeled_unlabeled_consistency"]


@dataclass(frozen=True)
class ConsistencyCheck:
    """Result of :func:`labeled_unlabeled_consistency`.

    Attributes:
        rate_naive: Share of replications with ``|D_sub - D_all| <= q sqrt(se_sub^2 - se_all^2)``
            for the naive estimator (close to 1 - alpha almost whatever its variance formula).
        rate_augmented: The same for the augmented estimator; clearly below 1 - alpha when
            hidden labeled sessions' predictions do not behave like the unlabeled ones.
        mc_se_augmented: Monte-Carlo standard error of ``rate_augmented``.
        hide_share: Share of labeled units hidden per replication.
        replications: Replications run.
        per_replication: Columns naive_effect, naive_se, aug_effect, aug_se.
    """

    rate_naive: float
    rate_augmented: float
    mc_se_augmented: float
    hide_share: float
    replications: int
    per_replication: pd.DataFrame



def labeled_unlabeled_consistency(
    control: Arm,
    treatment: Arm,
    *,
    clusters: bool = True,
    alpha: float = 0.05,
    replications: int = 200,
    hide_share: float = 0.5,
    seed: int = 0,
    small_sample: bool = True,
    lam_mode: str = "joint",
) -> ConsistencyCheck:
    """Labeled-vs-unlabeled consistency check (the former "calibrated coverage").

    Args:
        control: Control arm (user ids required).
        treatment: Treatment arm.
        clusters: Hide whole users (True) or single sessions.
        alpha: Level of the intervals.
        replications: Random hidings.
        hide_share: Share of labeled units hidden per replication, in (0, 1).
        seed: Seed of the hidings.
        small_sample: As in :func:`~pulse_ml.stats.arm_effect.compare_arms`.
        lam_mode: As in :func:`~pulse_ml.stats.arm_effect.compare_arms`.

    Returns:
        The pass rates of the nested (Hausman-type) comparison; see the module docstring for
        what they can and cannot detect.
    """
    if not 0.0 < hide_share < 1.0:
        raise ValueError(f"hide_share must be in (0, 1), got {hide_share}")
    arms, _ = prepare_arms(control, treatment)
    weighted = any(not np.all(arm["w"] == 1.0) for arm in arms)
    unit_l, _, strata = split_units(arms, clusters)
    base, diff = unit_diffs(arms, clusters, unit_l, None, strata.size, "hide")
    rng = np.random.default_rng(seed)
    labeled = np.flatnonzero(strata > 0)
    n_hide = int(round(hide_share * labeled.size))
    kept = np.ones((replications, strata.size), dtype=bool)
    ranks = rng.random((replications, labeled.size)).argsort(axis=1).argsort(axis=1)
    kept[:, labeled] = ranks >= n_hide
    kw = {"weighted": weighted, "small_sample": small_sample, "lam_mode": lam_mode,
          "clustered": clusters, "alpha": alpha}
    full = engine.solve(masked(base, diff, np.ones((1, strata.size), dtype=bool)), **kw)
    sub = engine.solve(masked(base, diff, kept), **kw)
    rates = {}
    for key, eff, se, df in (("naive", "naive_effect", "naive_se", "naive_df"),
                             ("aug", "aug_effect", "aug_se", "aug_df")):
        spread = np.sqrt(np.clip(getattr(sub, se) ** 2 - getattr(full, se)[0] ** 2, 0, None))
        q = engine.quantile(alpha, getattr(sub, df))
        rates[key] = np.abs(getattr(sub, eff) - getattr(full, eff)[0]) <= q * spread
    rate_a = float(rates["aug"].mean())
    return ConsistencyCheck(
        rate_naive=float(rates["naive"].mean()), rate_augmented=rate_a,
        mc_se_augmented=float(np.sqrt(rate_a * (1 - rate_a) / replications)),
        hide_share=hide_share, replications=replications,
        per_replication=pd.DataFrame({"naive_effect": sub.naive_effect,
                                      "naive_se": sub.naive_se, "aug_effect": sub.aug_effect,
                                      "aug_se": sub.aug_se}),
    )
