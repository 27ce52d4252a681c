"""The drift check of the weighted (active PPI++) monitor: window effects and the time shift.

The weighted analogue of :func:`~pulse_ml.stats.sequential.small_sample.within_window_effects`.
Known weights ``w = 1 / (pi r)`` correct a labeling rate that changes in time only if they are
right in every look window: the rated sessions of window j then weigh ``W_j = sum R w`` ~ ``N_j``
(its sessions). The response rate ``r`` of a window is predicted from EARLIER windows, so when
answering falls or rises over the test in a way the features do not explain (a prompt that wears
off), ``W_j`` drifts away from ``N_j``; if the predictions also move between windows and the
ratings do not (a predictor that drifts in one arm), the active PPI++ rectifier
``lam (mean f of all sessions - weighted mean f of the rated)`` carries a first-order bias.

* ``window_effect``: every window's psi terms with its rated weights rescaled to its sessions,
  ``est_j = mean_j g + sum_j R w (y - g) / W_j`` (Hajek within the window, unbiased when the
  weights are right up to a factor per window), windows weighted by their sessions ``N_j``
  (windows without a rating left out). With ``W_j = N_j`` in every window it is exactly the
  printed effect (the running mean of psi).
* ``time_shift``: ``sum_arms +/- lam sum_j (N_j / N - W_j / W) mean_j f`` (the look's lambda,
  0 for naive): the part of the rectifier from rated weight and sessions falling in different
  windows. Exactly 0 when ``W_j`` is proportional to ``N_j``; with right weights it is noise
  of the window weights times the movement of the window means of the predictions (small); when
  the weights lag in time and the predictions drift it measures most of the bias the drift adds
  (+0.053 of +0.070 in the simulation of docs/monitoring.md; ``lam`` is the look's, while each
  window's psi used its own earlier-look ``a`` and ``lam``).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

F64 = NDArray[np.float64]

__all__ = ["weighted_window_effects"]


def weighted_window_effects(grp: NDArray[np.int64], arm: NDArray[np.int64],
                            lk: NDArray[np.int64], rw: F64, f: F64,
                            psi: tuple[F64, F64], fit: tuple[F64, F64], lam: F64,
                            n_groups: int, n_looks: int) -> tuple[F64, F64, F64]:
    """Window-weighted naive and PPI++ effects and the PPI++ time shift at every look.

    Args:
        grp: Group code per session.
        arm: 0 control, 1 treatment.
        lk: First look (0-based) at which each session is visible (its window).
        rw: ``R w`` per session (the weight where rated, 0 otherwise).
        f: Predictions.
        psi: The naive and the PPI++ psi term per session.
        fit: The naive and the PPI++ ``g(f)`` per session (psi's fitted part).
        lam: The PPI++ slope per (group * n_looks + look, arm) (the table's lambda).
        n_groups: Number of groups.
        n_looks: Number of looks.

    Returns:
        ``(naive, augmented, time_shift)``, shape (n_groups * n_looks,) each, treatment -
        control (NaN where an arm has no rated window yet).
    """
    n_seg = n_groups * n_looks
    idx = (grp * n_looks + lk) * 2 + arm

    def window(v: F64) -> F64:  # per (group, window, arm) sums
        return np.bincount(idx, weights=v, minlength=n_seg * 2).reshape(n_groups, n_looks, 2)

    def cum(v: F64) -> F64:
        return np.cumsum(v, axis=1)

    n_j = window(np.ones_like(f))
    w_j = window(rw)
    sf_j = window(f)
    has = w_j > 0
    n_has = cum(np.where(has, n_j, 0.0))
    out = []
    with np.errstate(invalid="ignore", divide="ignore"):
        for p, g in zip(psi, fit, strict=True):
            sg_j, sp_j = window(g), window(p)
            part = np.where(has, sg_j + (sp_j - sg_j) * n_j / np.where(has, w_j, 1.0), 0.0)
            est = (cum(part) / n_has).reshape(n_seg, 2)
            out.append(est[:, 1] - est[:, 0])
        fbar_j = np.where(n_j > 0, sf_j / np.where(n_j > 0, n_j, 1.0), 0.0)
        between = cum(sf_j) / cum(n_j) - cum(w_j * fbar_j) / cum(w_j)
    between = np.where(np.isfinite(between), between, 0.0).reshape(n_seg, 2) * lam
    return out[0], out[1], between[:, 1] - between[:, 0]
