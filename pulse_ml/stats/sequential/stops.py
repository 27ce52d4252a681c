"""The first look at which each band of a monitoring table excludes 0."""

from __future__ import annotations

import numpy as np
import pandas as pd
from numpy.typing import NDArray

ESTIMATORS = ("naive", "augmented")


def _first_true(mask: NDArray[np.bool_]) -> tuple[NDArray[np.bool_], NDArray[np.int64]]:
    """Per row of a (groups, looks) mask: whether any is true and the first such column."""
    any_ = mask.any(axis=1)
    return any_, np.where(any_, np.argmax(mask, axis=1), -1)



def stops_table(
    table: pd.DataFrame, group_values: NDArray | None, n_groups: int, n_looks: int
) -> pd.DataFrame:
    """Per (group x) estimator x band ('sequence', 'fixed'): the first look excluding 0.

    Args:
        table: The monitoring table (rows group x look x estimator, estimators alternating).
        group_values: Group ids (None: one group, no ``group`` column).
        n_groups: Number of groups.
        n_looks: Looks per group.

    Returns:
        The ``stops`` frame of :class:`~pulse_ml.stats.sequential.monitor.MonitorResult`.
    """
    parts = []
    for e, name in enumerate(ESTIMATORS):
        sub = table.iloc[e::2]
        for band, lo_col, hi_col in (
            ("sequence", "cs_lower", "cs_upper"),
            ("fixed", "ci_lower", "ci_upper"),
        ):
            lo = sub[lo_col].to_numpy().reshape(n_groups, n_looks)
            hi = sub[hi_col].to_numpy().reshape(n_groups, n_looks)
            found, first = _first_true((lo > 0) | (hi < 0))
            rows = sub.iloc[np.where(found, first, 0) + np.arange(n_groups) * n_looks]
            df = pd.DataFrame(
                {
                    "estimator": name,
                    "band": band,
                    "conclusive": found,
                    "look": pd.array(np.where(found, first, 0), dtype="Int64"),
                    "n_labeled": pd.array(rows["n_labeled"].to_numpy(), dtype="Int64"),
                    "n_unlabeled": pd.array(rows["n_unlabeled"].to_numpy(), dtype="Int64"),
                    "effect": np.where(found, rows["effect"].to_numpy(), np.nan),
                    "lower": np.where(found, rows[lo_col].to_numpy(), np.nan),
                    "upper": np.where(found, rows[hi_col].to_numpy(), np.nan),
                }
            )
            df.loc[~found, ["look", "n_labeled", "n_unlabeled"]] = pd.NA
            if group_values is not None:
                df.insert(0, "group", group_values)
            parts.append(df)
    out = pd.concat(parts, ignore_index=True)
    if group_values is not None:
        out = out.sort_values("group", kind="stable")
    return out.reset_index(drop=True)
