"""Paired comparison of two predictors' out-of-fold tables (same sessions, users resampled).

The out-of-fold table of a family run or a registered version has one row per training session
(``session_id``, ``rating``, ``prediction``, ``fold``, and ``user_id`` for runs logged since the
paired comparison exists). Two tables trained on the same data fingerprint hold the same
sessions; :func:`compare_oof` joins them on ``session_id`` and calls
:func:`pulse_ml.stats.paired.paired_bootstrap` with the users as resampling units.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from pulse_ml import keys
from pulse_ml.errors import PulseError
from pulse_ml.stats.paired import PairedComparison, paired_bootstrap

# Without user ids a paired bootstrap resamples sessions, which ignores the clustering of a
# user's sessions: its 95% interval covered ~0.84 in tests/stats/test_paired.py.
NO_USERS_NOTE = "sessions resampled: no user ids; interval may be too narrow"


@dataclass(frozen=True)
class PairedSettings:
    """How to bootstrap a paired difference: resamples, error level, seed."""

    n_boot: int = 2000
    alpha: float = 0.05
    seed: int = 0


def difference(paired: PairedComparison, objective: str) -> tuple[str, float, float, float]:
    """``(label, value, lower, upper)`` of the difference ``objective`` is judged on.

    Δr for ``cv_pearson``, ΔMSE otherwise.
    """
    if objective == keys.CV_PEARSON:
        return "Δr", paired.delta_r, paired.r_ci_lower, paired.r_ci_upper
    return "ΔMSE", paired.delta_mse, paired.mse_ci_lower, paired.mse_ci_upper


def paired_sentence(paired: PairedComparison, objective: str, versus: str) -> str:
    """``ΔMSE (new - champion v3) = -0.012, 95% interval [-0.034, +0.009] over 412 users``."""
    label, value, lo, hi = difference(paired, objective)
    level = round(100 * (1 - paired.alpha))
    return (f"{label} (new - {versus}) = {value:+.4f}, {level}% interval [{lo:+.4f}, {hi:+.4f}] "
            f"over {paired.n_groups} users ({paired.n_sessions} sessions)")


def with_users(oof: pd.DataFrame, frame: pd.DataFrame) -> pd.DataFrame:
    """The OOF table with the ``user_id`` of each session from ``frame`` (for the artifact)."""
    out = oof.copy()
    if "user_id" in frame.columns:
        users = pd.Series(frame["user_id"].astype(str).to_numpy(),
                          index=frame["session_id"].astype(str))
        out["user_id"] = out["session_id"].astype(str).map(users).to_numpy()
    return out


def has_users(new: pd.DataFrame, ref: pd.DataFrame,
              users: Mapping[str, str] | pd.Series | None = None) -> bool:
    """Whether :func:`compare_oof` can resample users (else it resamples sessions)."""
    return users is not None or "user_id" in new.columns or "user_id" in ref.columns


def compare_oof(new: pd.DataFrame, ref: pd.DataFrame,
                users: Mapping[str, str] | pd.Series | None = None,
                settings: PairedSettings = PairedSettings(),
                require_users: bool = False) -> PairedComparison:
    """Difference new - reference in out-of-fold MSE, MAE and r on their common sessions.

    Args:
        new: OOF table of the new predictor (session_id, rating, prediction[, user_id]).
        ref: OOF table of the reference predictor (e.g. the champion).
        users: session_id -> user_id; default the ``user_id`` column of ``new`` (or ``ref``);
            without any, sessions are resampled one by one (see :data:`NO_USERS_NOTE`; check
            with :func:`has_users`).
        settings: Bootstrap settings.
        require_users: Refuse to resample sessions when no user ids are known.

    Returns:
        The :class:`~pulse_ml.stats.paired.PairedComparison`.

    Raises:
        PulseError: the tables share no session, or share sessions with different ratings
            (they were not trained on the same data), or ``require_users`` without user ids.
    """
    if require_users and not has_users(new, ref, users):
        raise PulseError("the out-of-fold tables have no user_id column (runs logged before "
                         "user ids were kept) and no session -> user mapping was given: a "
                         "bootstrap over sessions would ignore the clustering of users. Retrain "
                         "the models, or give the session table that holds their user_id.")
    a = new.assign(session_id=new["session_id"].astype(str))
    b = ref.assign(session_id=ref["session_id"].astype(str))
    both = a.merge(b[["session_id", "rating", "prediction"]], on="session_id", how="inner",
                   suffixes=("", "_ref"), validate="one_to_one")
    if len(both) < 2:
        raise PulseError("the two models share fewer than 2 training sessions: a paired "
                         "comparison needs models trained on the same data (fingerprint).")
    if not np.allclose(both["rating"].to_numpy(float), both["rating_ref"].to_numpy(float)):
        raise PulseError("the two models' training sessions have different ratings: they were "
                         "not trained on the same data, so their errors cannot be paired.")
    if users is not None:
        lookup = pd.Series(users) if not isinstance(users, pd.Series) else users
        groups = both["session_id"].map(lookup.astype(str)).fillna(both["session_id"])
    else:
        source = a if "user_id" in a.columns else b if "user_id" in b.columns else None
        if source is None:
            groups = both["session_id"]
        else:
            lookup = pd.Series(source["user_id"].astype(str).to_numpy(),
                               index=source["session_id"])
            groups = both["session_id"].map(lookup).fillna(both["session_id"])
    return paired_bootstrap(both["rating"].to_numpy(float), both["prediction"].to_numpy(float),
                            both["prediction_ref"].to_numpy(float), groups.to_numpy(),
                            n_boot=settings.n_boot, alpha=settings.alpha, seed=settings.seed)
