"""Calibration figures of a session table (pure; used by the job's table and by the tests)."""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.stats import rankdata

from pulse_ml.simulate.paper import FLAG_COLUMNS


def rank_biserial(x: np.ndarray, y: np.ndarray) -> float:
    """Rank-biserial correlation ``2 * P(X > Y) + P(X = Y) - 1`` (Mann-Whitney, ties = 1/2)."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    ranks = rankdata(np.concatenate([x, y]))
    u = ranks[: len(x)].sum() - len(x) * (len(x) + 1) / 2
    return float(2 * u / (len(x) * len(y)) - 1)


def calibration_figures(sessions: pd.DataFrame) -> dict[str, float]:
    """Figures comparable to the paper's reference numbers.

    Args:
        sessions: A session table (contract columns).

    Returns:
        Figure name -> value (labeled per arm as ``labeled[<case study>/<condition>]``).
    """
    labeled = sessions["rating"].notna()
    msgs = sessions["user_message_count"].to_numpy()
    per_user = sessions.groupby("user_id").size()
    raters = sessions[labeled].groupby("user_id").size()
    out = {
        "mean_rating": float(sessions.loc[labeled, "rating"].mean()),
        "n_labeled": float(labeled.sum()),
        "unlabeled_per_labeled": float((~labeled).sum() / max(labeled.sum(), 1)),
        "median_user_messages": float(np.median(msgs)),
        "rank_biserial_messages": rank_biserial(msgs[labeled.to_numpy()],
                                                msgs[~labeled.to_numpy()]),
        "share_users_multiple_sessions": float((per_user > 1).mean()),
        "share_raters_multiple_sessions": float((raters > 1).mean()) if len(raters) else 0.0,
        "n_users": float(len(per_user)),
        "n_raters": float(len(raters)),
        "git_push": float(sessions["git_push"].mean()),
        "git_commit": float(sessions["git_commit"].mean()),
        "git_pull": float(sessions["git_pull"].mean()),
        "git_reset": float(sessions["git_reset"].mean()),
        "git_rebase": float(sessions["git_rebase"].mean()),
    }
    for column in FLAG_COLUMNS:
        out[column] = float(sessions[column].mean())
    in_cs = sessions[labeled & (sessions["case_study"] != "")]
    for (cs, cond), n in in_cs.groupby(["case_study", "condition"]).size().items():
        out[f"labeled[{cs}/{cond}]"] = float(n)
    return out
