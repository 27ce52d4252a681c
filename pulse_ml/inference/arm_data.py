"""One arm of a case study as the analyses take it: its arrays and the table rows behind them.

Apart from ``effects.py`` so that randomization inference (which ``effects`` calls) and the
effects share the type without an import loop.
"""

from __future__ import annotations

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
