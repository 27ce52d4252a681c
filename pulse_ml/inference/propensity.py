"""Labeling propensity P(labeled | features) for shift-aware PPI++ (``infer reweight=true``).

A model fit (scikit-learn logistic regression), so it lives here and not in the pure
:mod:`pulse_ml.stats`; the weights and the estimator are
:func:`pulse_ml.stats.propensity.inverse_propensity_weights` and
:func:`pulse_ml.stats.arm_effect.compare_arms` (see :mod:`pulse_ml.stats.propensity` for the
method and its references).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from pulse_ml.errors import PulseError

__all__ = ["crossfit_propensity"]


def crossfit_propensity(
    features: ArrayLike,
    labeled: ArrayLike,
    *,
    folds: int = 5,
    seed: int = 0,
    clip: float = 0.01,
    groups: ArrayLike | None = None,
    c: float = 1.0,
) -> NDArray[np.float64]:
    """Out-of-fold probability of being labeled: logistic regression on standardized features.

    Args:
        features: Feature matrix of every session (labeled and unlabeled), shape (n, p);
            numeric (one-hot encode categories first).
        labeled: Whether each session has a rating, shape (n,).
        folds: Cross-fitting folds K (>= 2).
        seed: Seed of the fold assignment.
        clip: Propensities are clipped to ``[clip, 1 - clip]`` (weights at most 1 / clip).
        groups: Optional user ids: folds keep a user's sessions together.
        c: Inverse regularization strength of the logistic regression.

    Returns:
        P(labeled | features) for every session, shape (n,).

    Raises:
        PulseError: If the inputs cannot give a propensity (no labeled or no unlabeled
            session, fewer sessions of a kind than folds, non-finite features).
    """
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import StratifiedGroupKFold, StratifiedKFold
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    x = np.asarray(features, dtype=np.float64)
    x = x[:, None] if x.ndim == 1 else x
    lab = np.asarray(labeled, dtype=bool)
    if x.ndim != 2 or x.shape[0] != lab.size:
        raise ValueError(f"features must have shape (n, p) with n = {lab.size}, got {x.shape}")
    if not np.isfinite(x).all():
        raise PulseError("propensity: features contain NaN or infinite values; impute them")
    if not 0.0 < clip < 0.5:
        raise PulseError(f"propensity: clip must be in (0, 0.5), got {clip}")
    n_lab = int(lab.sum())
    if min(n_lab, lab.size - n_lab) < folds or folds < 2:
        raise PulseError(f"propensity: need at least {max(folds, 2)} labeled and unlabeled "
                         f"sessions for {folds}-fold cross-fitting, got {n_lab} labeled and "
                         f"{lab.size - n_lab} unlabeled")
    if groups is None:
        splits = StratifiedKFold(folds, shuffle=True, random_state=seed).split(x, lab)
    else:
        splits = StratifiedGroupKFold(folds, shuffle=True, random_state=seed).split(
            x, lab, np.asarray(groups))
    out = np.empty(lab.size)
    for train, test in splits:
        model = make_pipeline(StandardScaler(),
                              LogisticRegression(C=c, solver="newton-cholesky", max_iter=200))
        model.fit(x[train], lab[train])
        out[test] = model.predict_proba(x[test])[:, 1]
    return np.clip(out, clip, 1.0 - clip)
