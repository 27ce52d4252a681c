"""Anytime-valid confidence sequences of a guardrail: a fully observed session metric.

A guardrail (cost, duration, errors, abandonment) has a value in every session, so its
sequence needs no ratings: at look k the treatment - control difference of the means of the
sessions visible by then (or the relative change ``mean_t / mean_c - 1``, delta method) with a
cluster-robust (CR1, by user) standard error, exactly ``infer``'s guardrail interval on the same
sessions (:func:`pulse_ml.stats.decision_stats.cluster_mean_diff`), and the Gaussian-mixture
asymptotic confidence sequence ``effect -/+ m(t) se`` of the rating sequences
(:func:`.boundary.cs_multiplier`; Waudby-Smith et al. 2024), on the t scale with the clusters
(users) seen minus one as degrees of freedom, as the rating sequences
(:func:`.small_sample.t_multiplier`). The clock ``t`` is the number of
sessions seen (both arms): fixed by the arrival process, proportional to the information when
the arms keep their shares. Its target ``t_star`` must not depend on later data (the caller
sets it from the data up to the burn-in look).

A relative change's sequence is built on ``log(mean_t / mean_c)`` (delta method, se
``se / (1 + effect)``) and mapped back: skewed metrics (cost) make the ratio's own normal
sequence too narrow on the low side (numbers below).

Measured (tests/stats/test_guardrail_cs.py, 1,000 seeded experiments, 21 daily looks, 60
users of Pareto 1.1 activity in both arms, log-normal cost exactly at the margin; the one-sided
rate in theory <= 2.5%): absolute difference 3.7% with the normal multiplier, 2.1% on the t
scale; relative change 8.0% on the ratio scale, 5.5% on the log scale, 3.5% on the log and t
scale (the method used).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from pulse_ml.stats.decision_stats import cluster_mean_diff
from pulse_ml.stats.sequential.boundary import cs_multiplier
from pulse_ml.stats.sequential.small_sample import t_multiplier

F64 = NDArray[np.float64]


@dataclass(frozen=True)
class GuardrailSequence:
    """A guardrail's numbers at every look (NaN before both arms have a value).

    Attributes:
        effect: ``mean_t - mean_c`` (or the relative change) of the sessions seen by each look.
        se: Its cluster-robust standard error.
        sessions: Sessions with a value seen by each look (both arms; the clock).
        lower: Lower end of the confidence sequence.
        upper: Upper end.
    """

    effect: F64
    se: F64
    sessions: F64
    lower: F64
    upper: F64


def guardrail_sequence(values: ArrayLike, arm: ArrayLike, look: ArrayLike,
                       users: ArrayLike | None, n_looks: int, t_star: float,
                       alpha: float = 0.05, relative: bool = False) -> GuardrailSequence:
    """The confidence sequence of one guardrail's difference over ``n_looks`` looks.

    Args:
        values: The metric per session (NaN = no value, left out as ``infer`` does).
        arm: 0 (control) or 1 (treatment) per session.
        look: First look (0-based) at which each session is visible.
        users: User code per session (``None``: each session its own cluster).
        n_looks: Number of looks.
        t_star: Sessions (both arms) at which the sequence is tightest, fixed in advance.
        alpha: Two-sided error level, uniformly over the looks.
        relative: Relative change of the control mean instead of the difference.

    Returns:
        Per-look effect, se, clock and sequence.
    """
    x = np.asarray(values, dtype=np.float64)
    a = np.asarray(arm, dtype=np.int64)
    k = np.asarray(look, dtype=np.int64)
    u = None if users is None else np.asarray(users, dtype=np.int64)
    ok = np.isfinite(x)
    effect, se, clock, df = (np.full(n_looks, np.nan) for _ in range(4))
    order = np.argsort(k, kind="stable")
    x, a, k, ok = x[order], a[order], k[order], ok[order]
    u = None if u is None else u[order]
    ends = np.searchsorted(k, np.arange(n_looks), side="right")
    for j, end in enumerate(ends):
        mc, mt = ok[:end] & (a[:end] == 0), ok[:end] & (a[:end] == 1)
        if mc.sum() < 2 or mt.sum() < 2:
            continue
        try:
            d = cluster_mean_diff(x[:end][mc], None if u is None else u[:end][mc],
                                  x[:end][mt], None if u is None else u[:end][mt],
                                  relative=relative)
        except ValueError:  # relative change of a zero control mean
            continue
        effect[j], se[j], clock[j] = d.effect, d.se, float(mc.sum() + mt.sum())
        df[j] = (end if u is None else np.unique(u[:end][ok[:end]]).size) - 1.0
    mult = t_multiplier(cs_multiplier(clock, t_star, alpha), df)
    if not relative:
        return GuardrailSequence(effect, se, clock, effect - mult * se, effect + mult * se)
    ratio = 1.0 + effect  # the sequence of log(mean_t / mean_c), mapped back
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        half = mult * se / ratio
        return GuardrailSequence(effect, se, clock, ratio * np.exp(-half) - 1.0,
                                 ratio * np.exp(half) - 1.0)

