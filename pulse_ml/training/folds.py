"""Cross-validation folds, shared by the trainer and the LLM-judge baselines.

Both read the same ``cv`` config (``n_splits``, ``seed``, ``group_by``), so a judge's fold stds
are computed on exactly the folds the model families were scored on.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from sklearn.model_selection import GroupKFold, KFold

from pulse_ml.errors import PulseError


@dataclass(frozen=True)
class FoldSettings:
    """The ``cv`` config: number of folds, their seed, whether a user's sessions stay together."""

    n_splits: int = 5
    seed: int = 42
    group_by_user: bool = True


def make_folds(n: int, n_splits: int, seed: int, groups=None) -> np.ndarray:
    """Fold index per row: shuffled K folds with a fixed seed (the paper: 5 folds, seed 42).

    With ``groups`` (user ids) all sessions of a user fall in the same fold
    (``GroupKFold(shuffle=True)``), so no out-of-fold prediction comes from a model that saw
    another session of the same user — the cross-fitting unit matches the cluster-robust
    intervals. Without groups, or when every group has one session, it is a plain ``KFold``.
    """
    if n < n_splits:
        raise PulseError(f"only {n} labeled sessions: need at least cv.n_splits={n_splits} to "
                         "cross-validate. Collect more ratings or lower cv.n_splits.")
    grouped = groups is not None and pd.Series(groups).nunique() < n
    if grouped and pd.Series(groups).nunique() < n_splits:
        raise PulseError(f"only {pd.Series(groups).nunique()} users among the labeled sessions:"
                         f" need at least cv.n_splits={n_splits} for user-grouped folds. Lower "
                         "cv.n_splits or use cv.group_by=none.")
    splitter = (GroupKFold(n_splits, shuffle=True, random_state=seed) if grouped
                else KFold(n_splits, shuffle=True, random_state=seed))
    folds = np.empty(n, dtype=int)
    # groups only to GroupKFold: KFold ignores them, and says so in a warning (the USS example)
    for k, (_, test) in enumerate(splitter.split(np.zeros(n),
                                                 groups=groups if grouped else None)):
        folds[test] = k
    return folds


