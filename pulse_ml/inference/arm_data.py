"""One arm of a case study as the analyses take it: its arrays and the table rows behind them.

Apart from ``effects.py`` so that randomization inference (which ``effects`` calls) and the
effects share the type without an import loop.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

import numpy as np
import pandas as pd

from pulse_ml.sessions.case_studies import CaseStudy
from pulse_ml.sessions.table import SessionTable
from pulse_ml.stats.arm_inputs import Arm


@dataclass(frozen=True)
class ArmData:
    """One arm of a case study: its arrays and the table rows behind them.

    Attributes:
        arm: Ratings, predictions and user codes (always given) of its labeled and unlabeled
            sessions, weights when reweighted.
        rows: Table rows of the labeled sessions (the feature tests).
        rows_unl: Table rows of the unlabeled sessions.
    """

    arm: Arm
    rows: pd.DataFrame
    rows_unl: pd.DataFrame


def arm_data(table: SessionTable, preds: np.ndarray, study: CaseStudy, condition: str,
             user_codes: np.ndarray, hidden: np.ndarray | None = None) -> ArmData:
    """Split one arm into labeled and unlabeled parts (``hidden`` labels count as unlabeled)."""
    frame = table.frame
    arm = ((frame["case_study"] == study.name) & (frame["condition"] == condition)).to_numpy()
    lab = table.labeled if hidden is None else table.labeled & ~hidden
    m_l, m_u = arm & lab, arm & ~lab
    return ArmData(
        Arm(y=frame["rating"].to_numpy(float)[m_l], f=preds[m_l], f_unl=preds[m_u],
            users=user_codes[m_l], users_unl=user_codes[m_u]),
        rows=frame.loc[m_l], rows_unl=frame.loc[m_u])


_CODES: dict[int, tuple[weakref.ref, np.ndarray]] = {}


def user_codes(table: SessionTable) -> np.ndarray:
    """Integer codes of the table's ``user_id`` (``pd.factorize``), computed once per table.

    Every case study of a table is analysed with the same codes; factorizing 10^6 string ids
    costs about a second, so the codes of the last table seen are kept (one entry, dropped
    with the table's frame). Dense codes also let the clustered statistics skip their own
    factorization (:func:`pulse_ml.stats.arm_inputs.cluster_codes`).
    """
    frame = table.frame
    hit = _CODES.get(id(frame))
    if hit is not None and hit[0]() is frame:
        return hit[1]
    codes = pd.factorize(frame["user_id"])[0]
    _CODES.clear()
    _CODES[id(frame)] = (weakref.ref(frame), codes)
    return codes
