"""The decision at every look of ``monitor``: the rule on the PPI++ confidence sequence.

At each look of a case study (its first treatment; the monitor compares two arms):

* **invalid** when the sample-ratio check fails at that look: units per arm (users when no
  user has sessions in both arms, else sessions) against the declared ``split`` (or equal
  shares), chi-square p below 0.001 / (number of looks), Bonferroni over the looks, so a correct
  experiment is flagged at some look with probability at most 0.001;
* **ship** when the confidence sequence is above the bound (0 for superiority, ``-margin`` for
  non-inferiority) and the case study declares no guardrail;
* **do_not_ship** when the sequence is below the bound;
* **keep_collecting** otherwise (and before the burn-in look, when there is no sequence yet).

The sequences are valid at every look at once, so acting at the first conclusive look keeps
the error level. Guardrails have no confidence sequence here: a case study with guardrails is
never shipped by the monitor (its reason says so); ``infer`` checks them at the planned end.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from pulse_ml.stats.decision_stats import SRM_ALPHA, srm_test


def _units_by_look(data, g: int, n_looks: int) -> tuple[np.ndarray, str]:
    """Per look (rows) and arm (columns): units visible by then, and the unit counted."""
    mask = data.group == g
    arm, look = data.arm[mask], data.look[mask]
    counts = np.zeros((n_looks, 2), dtype=np.int64)
    users = None if data.users is None else data.users[mask]
    shared = users is not None and bool(np.intersect1d(users[arm == 0], users[arm == 1]).size)
    unit = "session" if users is None or shared else "user"
    for a in (0, 1):
        if unit == "user":
            frame = pd.DataFrame({"u": users[arm == a], "k": look[arm == a]})
            first = frame.groupby("u")["k"].min().to_numpy()
        else:
            first = look[arm == a]
        counts[:, a] = np.cumsum(np.bincount(first.astype(np.int64), minlength=n_looks)[:n_looks])
    return counts, unit


def look_decisions(result) -> pd.DataFrame:
    """The rule at every look of every monitored case study.

    Args:
        result: The :class:`pulse_ml.inference.monitor.Monitoring` of ``monitor``.

    Returns:
        One row per case study and look: ``case_study, look, day, decision, srm_p_value,
        bound, reason``.
    """
    data, frame = result.data, result.frame
    rows = []
    for g, study in enumerate(data.studies):
        aug = frame[(frame["case_study"] == study.name) & (frame["estimator"] == "augmented")]
        aug = aug.sort_values("look")
        n_looks = len(aug)
        counts, unit = _units_by_look(data, g, n_looks)
        split = study.split
        shares = None if not split else [split[study.control], split[study.treatment]]
        bound = 0.0 if study.rule == "superiority" else -float(study.margin or 0.0)
        level = SRM_ALPHA / max(n_looks, 1)
        for k, row in enumerate(aug.itertuples(index=False)):
            srm = srm_test(counts[k], shares, alpha=level)
            lo, hi = row.cs_lower, row.cs_upper
            if srm.flagged:
                decision = "invalid"
                reason = (f"sample-ratio mismatch: {unit}s per arm {counts[k, 0]:,} / "
                          f"{counts[k, 1]:,} (p = {srm.p_value:.2g} < {level:.2g})")
            elif not (np.isfinite(lo) and np.isfinite(hi)):
                decision, reason = "keep_collecting", "no sequence yet (before the burn-in)"
            elif lo > bound and study.guardrails:
                decision = "keep_collecting"
                reason = (f"the rating sequence is above {bound:g}; guardrails are not "
                          "monitored (check them with infer)")
            elif lo > bound:
                decision, reason = "ship", f"the PPI++ sequence is above {bound:g}"
            elif hi < bound:
                decision, reason = "do_not_ship", f"the PPI++ sequence is below {bound:g}"
            else:
                decision, reason = "keep_collecting", f"the PPI++ sequence includes {bound:g}"
            rows.append({"case_study": study.name, "look": int(row.look), "day": int(row.day),
                         "decision": decision, "srm_p_value": srm.p_value, "bound": bound,
                         "reason": reason})
    return pd.DataFrame(rows, columns=["case_study", "look", "day", "decision", "srm_p_value",
                                       "bound", "reason"])


def decision_line(decisions: pd.DataFrame, case_study: str) -> str:
    """One sentence: each run of looks with its decision (``keep_collecting days 1-8, ...``)."""
    sub = decisions[decisions["case_study"] == case_study]
    if sub.empty:
        return ""
    parts, start = [], 0
    values, days = sub["decision"].tolist(), sub["day"].tolist()
    for i in range(1, len(values) + 1):
        if i == len(values) or values[i] != values[start]:
            span = (f"day {days[start]}" if i - 1 == start else
                    f"days {days[start]}-{days[i - 1]}")
            parts.append(f"{values[start]} {span}")
            start = i
    rule = "non-inferiority" if float(sub["bound"].iloc[0]) < 0 else "superiority"
    return f"decision at each look ({rule}, PPI++ sequence): " + ", ".join(parts)
