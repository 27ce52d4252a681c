"""Small-sample parts of the confidence sequence: effective users, t boundary, time-drift check.

Three pieces that :func:`~pulse_ml.stats.sequential.monitor.monitor_effect` adds on top of the
effect engine's numbers (the engine itself is shared with ``infer`` and not changed here):

* :func:`effective_units`: Kish's effective number of labeled users per arm,
  ``(sum_g n_g)^2 / sum_g n_g^2`` with ``n_g`` the labels of user g (= labeled sessions without
  users). A few very active raters make it much smaller than the count of labeled users.
* :func:`t_multiplier`: the Gaussian-mixture multiplier ``m`` moved to the t scale of each
  look, ``t_df^{-1}(Phi(m))``, with the engine's degrees of freedom (effective labeled users
  minus the lambda tuning, Welch-combined over arms).
* :func:`within_window_effects`: the naive and PPI++ effects with every look window weighted
  by its sessions (a within-window comparison), the check for a labeling rate that changes
  over time together with a prediction shift.

Why the t boundary (measured; 1-5 stars P = .10/.08/.15/.27/.40, 150 users with Pareto(1.1)
activity, 21 daily looks, 2000 replications). The mixture boundary assumes a Gaussian
studentized process. With users of heavy-tailed activity the cluster-robust se is computed
from few effective users (Kish 6-16 per arm): randomized by user, the empirical variance of the
effect was 1.3-1.9 times the mean CR1 variance (naive and PPI++ alike, so not the lambda), and
``|effect/se| > 2.8`` happened in 3.5-5% of data sets at a look instead of the normal 0.5%; with
users in both arms the variance was right (ratio 1.0-1.1) but the tails were still 2.5 times
too heavy. The sequence crossed mostly at looks 3-6, where the effective users are fewest. The
t boundary uses the engine's df (Bell-McCaffrey-type: effective users), so it widens exactly
there and costs almost nothing with many effective users (df of hundreds). A leverage (CR2)
rescaling of the variance was measured too (``kappa = (G*/(G*-1)) / (G/(G-1))`` per arm): it
helps less (PPI++ 9.0 -> 6.5% randomized by user) and belongs in the engine that ``infer``
shares, where the lead engineer adds CR2; this module would then double-count it.

The drift check. PPI++ takes ``mean(Y_L) + lam (mean f_U - mean f_L)``; its rectifier is
unbiased only if labeled sessions are a random sample of the arm's sessions. When the labeling
rate changes over time and the predictions move over time in a way the ratings do not (a
predictor that drifts in one arm), labeled sessions come from other days than unlabeled ones,
and ``lam (mean f_U - mean f_L)`` carries a bias of first order. Weighting each look window by
its share of the arm's sessions (labels missing at random within a window) removes it:
``sum_j N_j [mean(Y_L,j) + lam (mean f_U,j - mean f_L,j)] / sum_j N_j`` (the printed estimator
when the labeling rate is constant). The monitor shows the
printed effect (``infer``'s, unchanged) and warns with the difference in units of its se.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray
from scipy.special import ndtr, stdtrit

from pulse_ml.stats import cluster_moments as cm
from pulse_ml.stats.cluster_moments import Moments

F64 = NDArray[np.float64]

# Fewest effective (Kish) labeled users per arm at which the sequences were checked to keep
# alpha with heavy-tailed activity (tests/stats/test_sequential_heavy.py); the monitor warns
# below.
MIN_EFFECTIVE_UNITS = 40
# The drift check warns when weighting look windows by their sessions moves the PPI++ effect
# by at least this many of its standard errors (a bias of 0.5 se lifts a 5% two-sided test to
# about 8%; the window weighting alone moves it by < 0.1 se without drift, measured in the
# tests).
DRIFT_WARN_SE = 0.5


def effective_units(mom: Moments) -> F64:
    """Kish's effective number of labeled users (clusters) per arm, shape (R, 2).

    Args:
        mom: Moments of the sessions (any batch; unit weights).

    Returns:
        ``(sum_g n_g)^2 / sum_g n_g^2`` per arm, with ``n_g`` the labeled sessions of cluster g
        (0 where an arm has no label).
    """
    n = mom.tot[..., cm.RAW_INDEX["m"]]
    k = len(cm.LIN)
    o = cm.LIN_INDEX["m"]
    sq = np.stack([mom.gram[:, o, o], mom.gram[:, k + o, k + o]], axis=1)
    return np.divide(n**2, sq, out=np.zeros_like(n), where=sq > 0)


def t_multiplier(mult: F64, df: F64) -> F64:
    """The multiplier ``m`` on the t scale: ``t_df^{-1}(Phi(m))`` (``m`` where df is infinite).

    Args:
        mult: Gaussian-mixture multipliers (> 0).
        df: Degrees of freedom per look (NaN gives NaN).

    Returns:
        Multipliers with the same one-sided tail probability under t(df) as ``m`` under N(0, 1).
    """
    with np.errstate(invalid="ignore"):
        # t.isf(norm.sf(m), df) through scipy.special (no scipy.stats import): the upper
        # tail by symmetry, -stdtrit(df, q), keeps its precision for tiny q
        return np.where(np.isinf(df), mult, -stdtrit(df, ndtr(-mult)))


def within_window_effects(
    mom: Moments, n_groups: int, n_looks: int, lam: F64
) -> tuple[F64, F64, F64]:
    """Window-weighted effects at every look, and the time part of the PPI++ prediction shift.

    Window j of an arm (the sessions first visible at look j) gets the weight of its sessions
    ``N_j`` (labeled or not) if it has a label; its PPI++ part is
    ``mean(Y_L,j) + lam (mean f_U,j - mean f_L,j)`` with the look's lambda ``lam`` (0 for the
    rectifier of a window without unlabeled sessions). With a constant labeling rate this is
    exactly the printed estimator. The window sums are differences of the cumulative totals
    (no pass over the sessions).

    Args:
        mom: Cumulative moments per (group x look) (:func:`~.engine.look_moments`).
        n_groups: Number of groups.
        n_looks: Number of looks.
        lam: Lambdas per (group x look) and arm, shape (n_groups * n_looks, 2).

    Returns:
        ``(naive, augmented, time_shift)``, shape (n_groups * n_looks,) each: the window-weighted
        effects (treatment - control; NaN where an arm has no labeled window yet) and
        ``sum_a +/- lam_a sum_j (N_U,j / N_U - n_j / n) mean f_j``: the part of the PPI++
        effect's rectifier ``lam (mean f_U - mean f_L)`` that comes from labeled and unlabeled
        sessions falling in different windows (0 when the labeling rate is constant or the
        predictions do not move between windows). It is the PPI++ bias when the predictions
        drift over time and the ratings do not; its noise is small (window means of all
        sessions).
    """
    cum = mom.tot.reshape(n_groups, n_looks, 2, -1)
    win = np.diff(cum, axis=1, prepend=0.0)

    def part(name: str) -> F64:
        return win[..., cm.RAW_INDEX[name]]

    n, n_unl, sy, sfl = part("m"), part("mu"), part("sy"), part("sf")
    sf, big_n = sfl + part("su"), n + n_unl
    has, n_unl = n > 0, big_n - n
    w = np.where(has, big_n, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        ybar = np.where(has, sy / np.where(has, n, 1.0), 0.0)
        shift = np.where(has & (n_unl > 0), (sf - sfl) / np.where(n_unl > 0, n_unl, 1.0)
                         - sfl / np.where(has, n, 1.0), 0.0)
        tot_w = np.cumsum(w, axis=1)
        naive_arm = np.cumsum(w * ybar, axis=1) / tot_w
        shift_arm = np.cumsum(w * shift, axis=1) / tot_w
        fbar = np.where(big_n > 0, sf / np.where(big_n > 0, big_n, 1.0), 0.0)
        between = (np.cumsum(n_unl * fbar, axis=1) / np.cumsum(n_unl, axis=1)
                   - np.cumsum(n * fbar, axis=1) / np.cumsum(n, axis=1))
    between = np.where(np.isfinite(between), between, 0.0).reshape(-1, 2) * lam
    naive_arm = naive_arm.reshape(-1, 2)
    aug_arm = naive_arm + lam * shift_arm.reshape(-1, 2)
    return (naive_arm[:, 1] - naive_arm[:, 0], aug_arm[:, 1] - aug_arm[:, 0],
            between[:, 1] - between[:, 0])
