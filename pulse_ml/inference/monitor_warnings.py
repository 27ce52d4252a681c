"""Warnings of ``pulse-ml monitor``: few effective raters, and labels that drift in time.

Both read the last look of each case study in the raw :class:`MonitorResult` table (the
statistics are in :mod:`pulse_ml.stats.sequential.small_sample`):

* few effective raters: an arm with fewer than :data:`MIN_EFFECTIVE_UNITS` effective (Kish)
  labeled users, ``(sum of per-user label counts)^2 / sum of squared counts``, at the last look.
  A handful of very active raters can hold most labels of 80 labeled users; the count of
  labeled users alone then overstates what the variance is estimated from.
* labels that drift in time: the PPI++ rectifier's time part (``time_shift``: labeled and
  unlabeled sessions from windows whose predictions differ; for case studies asked by
  request_prob, rated weight and sessions) of at least :data:`DRIFT_WARN_SE` standard errors of
  the effect.
* ``lambda_rule=joint`` on a case study asked by varying request_prob with users in both arms:
  its lambdas are each arm's own (the rule is not applied; the sequence stays valid).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from pulse_ml.inference.monitor_looks import DAY, MonitorData
from pulse_ml.stats.sequential.monitor import MonitorResult
from pulse_ml.stats.sequential.small_sample import DRIFT_WARN_SE, MIN_EFFECTIVE_UNITS


def _last_rows(result: MonitorResult, data: MonitorData, g: int) -> tuple[pd.Series, pd.Series,
                                                                         int]:
    """The naive and PPI++ rows of case study g's last own look, and its day."""
    k = len(data.cutoffs[g]) - 1
    i = (g * data.n_looks + k) * 2
    day = int(math.ceil((data.cutoffs[g][k] - data.first_day[g]) / DAY))
    return result.table.iloc[i], result.table.iloc[i + 1], day


def few_effective_users(result: MonitorResult, data: MonitorData, clusters: bool) -> list[str]:
    """Warn per case study with an arm under MIN_EFFECTIVE_UNITS effective labeled users."""
    unit = "users" if clusters else "sessions"
    out = []
    for g, study in enumerate(data.studies):
        row, _, day = _last_rows(result, data, g)
        few = [f"{role} {row[f'eff_units_{role}']:.1f} (of {int(row[f'units_{role}'])} labeled)"
               for role in ("control", "treatment")
               if row[f"eff_units_{role}"] < MIN_EFFECTIVE_UNITS]
        if few:
            out.append(
                f"case study '{study.name}': only {', '.join(few)} effective labeled {unit} by "
                f"the last look (day {day}; Kish: (sum of labels per user)^2 / sum of squares, "
                "small when a few raters give most ratings). With fewer than "
                f"{MIN_EFFECTIVE_UNITS} effective labeled users per arm the se rests on few "
                "raters: the sequences' t "
                "boundary widens (seeded null simulations with heavy-tailed activity stayed "
                "under alpha, pulse_ml/stats/sequential/small_sample.py), and a conclusion "
                "reflects what a few raters said. Read the first conclusive day with care, or "
                "collect ratings from more users.")
    return out


def time_drift(result: MonitorResult, data: MonitorData,
               weighted: tuple[int, ...] = ()) -> list[str]:
    """Warn per case study whose PPI++ effect carries a time shift of >= DRIFT_WARN_SE se.

    ``weighted``: case studies (indices) asked by varying request_prob, whose shift is the
    weighted analogue (:mod:`~pulse_ml.stats.sequential.weighted_windows`).
    """
    out = []
    for g, study in enumerate(data.studies):
        naive, aug, day = _last_rows(result, data, g)
        shift, se = float(aug["time_shift"]), float(aug["se"])
        if not (np.isfinite(shift) and np.isfinite(se) and se > 0):
            continue
        if abs(shift) >= DRIFT_WARN_SE * se and g in weighted:
            out.append(
                f"case study '{study.name}': the rated sessions' weights 1/(request_prob x "
                "response) did not keep pace with the sessions of each day while the "
                f"predictions moved between days: by day {day}, {shift:+.3f} of the active "
                f"PPI++ effect ({shift / se:+.1f} se) comes from rated weight and sessions "
                "falling on different days. The response rate of each day is predicted from "
                "earlier days, so answering that changed over the test (a prompt that wears "
                "off) is missed; if the predictor drifted and the ratings did not, the PPI++ "
                f"effect {aug['effect']:+.3f} is biased by about that much; each day's weights "
                f"scaled to its sessions read {aug['window_effect']:+.3f} (unbiased when a day's "
                f"weights are off by one factor; naive {naive['effect']:+.3f}, per day "
                f"{naive['window_effect']:+.3f}). Keep the rating prompt and its timing the "
                "same over the test.")
        elif abs(shift) >= DRIFT_WARN_SE * se:
            out.append(
                f"case study '{study.name}': the labeling rate changed over time while the "
                f"predictions moved between days: by day {day}, {shift:+.3f} of the PPI++ effect "
                f"({shift / se:+.1f} se) comes from labeled and unlabeled sessions falling on "
                "different days. If the predictor drifted in time and the ratings did not (a "
                "model that reacts to the treatment differently as the test goes on), the PPI++ "
                f"effect {aug['effect']:+.3f} is biased by about that much; the comparison "
                f"within days (each day weighted by its sessions) reads {aug['window_effect']:+.3f}"
                f" (naive {naive['effect']:+.3f}). Keep the labeling rate constant over the "
                "test, or rely on the naive sequence.")
    return out


def joint_lambda_not_applied(data: MonitorData, weighted: tuple[int, ...],
                             lambda_rule: str) -> list[str]:
    """Warn per case study asked by varying request_prob whose joint lambda rule is not used.

    The active PPI++ sequence fits each arm's lambda on the earlier looks of that arm
    (:mod:`pulse_ml.stats.sequential.weighted`); a joint fit with the cross term of users in
    both arms is not implemented. Without such users the two rules agree, so only case studies
    with users in both arms are named.
    """
    if lambda_rule != "joint" or data.users is None:
        return []
    out = []
    for g in weighted:
        m = data.group == g
        users, arm = data.users[m], data.arm[m]
        both = np.intersect1d(users[arm == 0], users[arm == 1]).size
        if both:
            out.append(
                f"case study '{data.studies[g].name}': lambda_rule=joint is not applied to a "
                f"case study asked by varying request_prob: {both} users have sessions in both "
                "arms, and each arm's lambda minimizes its own arm's variance (fitted on earlier "
                "looks), without the cross term of those users. The sequence stays valid (any "
                "lambda fixed from earlier looks keeps it so); it may be somewhat wider than a "
                "joint lambda would give. lambda_rule=arm states what is done.")
    return out
