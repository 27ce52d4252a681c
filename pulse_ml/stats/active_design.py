"""Active asking: request probabilities from predicted squared errors, and their expected gain.

Asking session i with ``pi_i ~ sqrt(E[e_i^2 | x_i])`` minimizes the variance of the inverse-
probability-weighted (active) PPI++ mean at a fixed expected number of requests (Zrnic & Candès
2024, Thm. on the optimal sampling rule); ``pi`` is scaled per group (arm, or arm x day) so that
its mean is the group's budget, and clipped to ``[min_prob, 1]`` so that every weight is at most
``1 / min_prob``.

Width against uniform asking at the same budget ``b`` (the label part of the variance of an
arm's mean, PPI++ at lambda ~ 1; the population part is the same for both):
``sum e_i^2 (1/pi_i - 1)`` vs ``sum e_i^2 (1/b - 1)``; its square root is the expected width
ratio, and ``1 - ratio^2`` the share of labels saved at equal width.

References:
    T. Zrnic, E. J. Candès. Active statistical inference. ICML 2024.
    A. N. Angelopoulos et al. Cost-optimal active AI model evaluation. 2025.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = ["scale_to_budget", "width_ratio", "labels_saved"]

Array = NDArray[np.float64]


def scale_to_budget(err2: ArrayLike, groups: ArrayLike, budgets: ArrayLike,
                    min_prob: ArrayLike, iterations: int = 60) -> Array:
    """``pi = clip(c_g sqrt(err2), min_prob_g, 1)`` with ``mean(pi) = budget_g`` per group.

    Args:
        err2: Predicted squared error per session (> 0), shape (n,).
        groups: Group code per session, integers 0..G-1, shape (n,).
        budgets: Mean request probability per group, in (0, 1], shape (G,).
        min_prob: Lowest probability per group, shape (G,) (or a scalar), at most the budget.
        iterations: Bisection steps (60: machine precision on the scale).

    Returns:
        The request probability of every session. A group whose budget is 1 gets 1 everywhere.
    """
    s = np.sqrt(np.maximum(np.asarray(err2, float), 1e-300))
    g = np.asarray(groups, dtype=np.intp)
    b = np.asarray(budgets, float)
    lo_p = np.broadcast_to(np.asarray(min_prob, float), b.shape)[g]
    n_g = np.bincount(g, minlength=b.size).astype(float)
    s_min = np.full(b.size, np.inf)
    np.minimum.at(s_min, g, s)
    lo, hi = np.zeros(b.size), 1.0 / np.where(np.isfinite(s_min), s_min, 1.0)
    for _ in range(iterations):  # mean of clip(c s) grows with c: bisection per group at once
        mid = 0.5 * (lo + hi)
        mean = np.bincount(g, np.clip(mid[g] * s, lo_p, 1.0), minlength=b.size) / np.maximum(
            n_g, 1.0)
        low = mean < b
        lo, hi = np.where(low, mid, lo), np.where(low, hi, mid)
    return np.clip(hi[g] * s, lo_p, 1.0)


def width_ratio(err2: ArrayLike, pi: ArrayLike, budget: float | None = None) -> float:
    """Expected width of active PPI++ over uniform asking at the same mean probability."""
    e2, p = np.asarray(err2, float), np.asarray(pi, float)
    b = float(p.mean()) if budget is None else budget
    uniform = float(e2.sum() * (1.0 / b - 1.0))
    if uniform <= 0:
        return 1.0
    return float(np.sqrt((e2 * (1.0 / p - 1.0)).sum() / uniform))


def labels_saved(ratio: float) -> float:
    """Share of labels saved at equal width for a width ratio (variance ~ 1 / labels)."""
    return 1.0 - ratio**2


def honest_width_ratio(err_pred: ArrayLike, resid2: ArrayLike, budget: float,
                       min_share: float = 0.25) -> float:
    """Width ratio active / uniform at ``budget``, judged on residuals the error model never saw.

    Args:
        err_pred: Out-of-fold predicted squared errors (the error model's honest ones).
        resid2: The realized squared out-of-fold residuals of the same sessions.
        budget: Mean request probability.
        min_share: Floor of pi as a share of the budget (``request``'s default 1/4).

    Returns:
        ``sqrt(sum r2 (1/pi - 1) / sum r2 (1/b - 1))`` with ``pi`` from ``err_pred``.
    """
    e = np.asarray(err_pred, float)
    pi = scale_to_budget(e, np.zeros(e.size, dtype=np.intp), np.array([budget]),
                         min_share * budget)
    return width_ratio(resid2, pi, budget)
