"""Labeling propensity for shift-aware PPI++, and a labeled-vs-unlabeled prediction diagnostic.

Which sessions get rated is not random (the paper saw more user messages among raters,
rank-biserial 0.32). If rating depends only on the features X (missing at random given X), the
arm's mean rating is recovered by weighting each labeled session by 1 / P(labeled | X) and taking
the prediction mean over all sessions (:func:`pulse_ml.stats.arm_effect.compare_arms` with
the arms' weights ``w``). :func:`pulse_ml.inference.propensity.crossfit_propensity` (a model
fit, so outside this pure package) estimates P(labeled | X) by logistic regression, out of fold
(each session's propensity comes from a model that did not see it, as the predictions do),
seeded, and clipped away from 0 so no single session dominates.

The variance of the weighted estimate treats the weights as fixed. For inverse-probability
weighting with a logistic propensity this is conservative -- estimating the propensity removes
variance (Lunceford & Davidian 2004; Hirano, Imbens & Ridder 2003); the seeded simulation in
``tests/stats/test_propensity.py`` checks coverage with cross-fitted propensities.

:func:`prediction_shift` compares the predictions of labeled and unlabeled sessions of an arm
(standardized mean difference and rank-biserial correlation): a large value says the labeled
sessions are not like the others and reweighting is worth trying.

References:
    A. N. Angelopoulos, S. Bates, C. Fannjiang, M. I. Jordan, T. Zrnic. Prediction-powered
    inference. Science 382(6671), 2023 (covariate shift).
    J. K. Lunceford, M. Davidian. Stratification and weighting via the propensity score in
    estimation of causal treatment effects. Statistics in Medicine 23(19), 2004.
    K. Hirano, G. W. Imbens, G. Ridder. Efficient estimation of average treatment effects using
    the estimated propensity score. Econometrica 71(4), 2003.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from pulse_ml.errors import PulseError

__all__ = [
    "PredictionShift",
    "inverse_propensity_weights",
    "prediction_shift",
]


def inverse_propensity_weights(propensity: ArrayLike, labeled: ArrayLike) -> NDArray[np.float64]:
    """Weights ``1 / propensity`` of the labeled sessions, in their order.

    Args:
        propensity: P(labeled | features) of every session, shape (n,).
        labeled: Whether each session has a rating, shape (n,).

    Returns:
        Weights of the labeled sessions, shape (n_labeled,).
    """
    p, lab = np.asarray(propensity, dtype=np.float64), np.asarray(labeled, dtype=bool)
    if p.shape != lab.shape or not ((p > 0) & (p <= 1)).all():
        raise PulseError("propensity: need one propensity in (0, 1] per session")
    return 1.0 / p[lab]


@dataclass(frozen=True)
class PredictionShift:
    """Predictions of labeled vs unlabeled sessions of one arm.

    Attributes:
        smd: Standardized mean difference ``(mean_l - mean_u) / sqrt((var_l + var_u) / 2)``.
        rank_biserial: ``2 U / (n_l n_u) - 1`` of the Mann-Whitney U of the labeled sample
            (> 0: labeled sessions have higher predictions).
        p_value: Two-sided Mann-Whitney p-value.
        mean_labeled: Mean prediction of the labeled sessions.
        mean_unlabeled: Mean prediction of the unlabeled sessions.
        n_labeled: Labeled sessions.
        n_unlabeled: Unlabeled sessions.
    """

    smd: float
    rank_biserial: float
    p_value: float
    mean_labeled: float
    mean_unlabeled: float
    n_labeled: int
    n_unlabeled: int


def prediction_shift(f_labeled: ArrayLike, f_unlabeled: ArrayLike) -> PredictionShift:
    """Compare the predictions of an arm's labeled and unlabeled sessions.

    Under random labeling both are draws of the same distribution (smd and rank-biserial near
    0); PPI++ without weights assumes exactly that.

    Args:
        f_labeled: Predictions of the labeled sessions (>= 2).
        f_unlabeled: Predictions of the unlabeled sessions (>= 2).

    Returns:
        The shift statistics.
    """
    fl, fu = np.asarray(f_labeled, dtype=np.float64), np.asarray(f_unlabeled, dtype=np.float64)
    if fl.size < 2 or fu.size < 2:
        raise PulseError("prediction shift: need at least 2 labeled and 2 unlabeled sessions")
    pooled = np.sqrt((fl.var(ddof=1) + fu.var(ddof=1)) / 2.0)
    diff = fl.mean() - fu.mean()
    smd = diff / pooled if pooled > 0 else 0.0
    if np.ptp(np.concatenate([fl, fu])) == 0:
        rbc, p = 0.0, 1.0
    else:
        from scipy import stats  # on use: importing scipy.stats costs ~1 s

        res = stats.mannwhitneyu(fl, fu, alternative="two-sided")
        rbc, p = 2.0 * res.statistic / (fl.size * fu.size) - 1.0, res.pvalue
    return PredictionShift(float(smd), float(rbc), float(p), float(fl.mean()), float(fu.mean()),
                           int(fl.size), int(fu.size))
