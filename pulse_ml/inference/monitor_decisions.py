"""The decision at every look of ``monitor``: the rule on the PPI++ confidence sequence.

At each look of a case study (its first treatment; the monitor compares two arms):

* **invalid** when the sample-ratio check fails at that look: units per arm (users when no
  user has sessions in both arms, else sessions) against the declared ``split`` (or equal
  shares), chi-square p below 0.001 / (number of looks), Bonferroni over the looks, so a correct
  experiment is flagged at some look with probability at most 0.001;
* **ship** when the rating's PPI++ confidence sequence is above the bound (0 for superiority,
  ``-margin`` for non-inferiority) AND every guardrail's confidence sequence is on the good side
  of its margin (``infer``'s rule, an intersection-union test: each sequence at the unadjusted
  level);
* **do_not_ship** when the rating sequence is below the bound or a guardrail's sequence is
  entirely beyond its margin;
* **keep_collecting** otherwise (and before the burn-in look, when there is no sequence yet).

The sequences are valid at every look at once, so acting at the first conclusive look keeps
the error level. A guardrail's sequence (:mod:`pulse_ml.stats.sequential.guardrail_cs`) uses
all sessions (fully observed), cluster-robust by user; its target (sessions at which it is
tightest) is the rating sequence's target times the sessions per label up to the burn-in look,
so later data never move it either.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from pulse_ml.stats.decision_stats import SRM_ALPHA, srm_test
from pulse_ml.stats.sequential.guardrail_cs import GuardrailSequence, guardrail_sequence


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


def guardrail_sequences(result, sessions: pd.DataFrame | None, g: int, n_looks: int,
                        alpha: float) -> list[tuple[object, GuardrailSequence]]:
    """The confidence sequence of every guardrail of case study ``g`` (none without a table).

    The target: the rating sequence's t* (labels) times sessions per label up to the
    burn-in look (data that later looks never change).
    """
    data, study = result.data, result.data.studies[g]
    if sessions is None or not study.guardrails:
        return []
    mask = data.group == g
    k0 = int(result.result.burn_in_look[g])
    seen = data.look[mask] <= k0
    labels = max(int((data.labeled[mask] & seen).sum()), 1)
    t_star = result.target_labels[study.name] * int(seen.sum()) / labels
    rows = data.rows[mask]
    out = []
    for guard in study.guardrails:
        values = pd.to_numeric(sessions[guard.column].iloc[rows], errors="coerce")
        out.append((guard, guardrail_sequence(
            values.to_numpy(float), data.arm[mask], data.look[mask],
            None if data.users is None else data.users[mask], n_looks, t_star, alpha,
            guard.relative)))
    return out


def _guard_state(seqs, k: int) -> tuple[list[str], list[str], list[str]]:
    """Guardrails shown non-inferior, conclusively worse, and open at look ``k``."""
    ok, bad, open_ = [], [], []
    for guard, seq in seqs:
        sign = -1.0 if guard.better == "lower" else 1.0
        lo, hi = sorted((sign * seq.lower[k], sign * seq.upper[k]))
        if lo > -guard.margin:
            ok.append(guard.column)
        elif hi < -guard.margin:
            bad.append(guard.column)
        else:
            open_.append(guard.column)
    return ok, bad, open_


def look_decisions(result, sessions: pd.DataFrame | None = None,
                   alpha: float = 0.05) -> pd.DataFrame:
    """The rule at every look of every monitored case study.

    Args:
        result: The :class:`pulse_ml.inference.monitor.Monitoring` of ``monitor``.
        sessions: The session table's frame (the guardrail columns); ``None`` = no guardrail
            sequences, and a case study with guardrails is then never shipped.
        alpha: Level of the guardrail sequences (the monitor's).

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
        seqs = guardrail_sequences(result, sessions, g, n_looks, alpha)
        split = study.split
        shares = None if not split else [split[study.control], split[study.treatment]]
        bound = 0.0 if study.rule == "superiority" else -float(study.margin or 0.0)
        level = SRM_ALPHA / max(n_looks, 1)
        for k, row in enumerate(aug.itertuples(index=False)):
            srm = srm_test(counts[k], shares, alpha=level)
            lo, hi = row.cs_lower, row.cs_upper
            g_ok, g_bad, g_open = _guard_state(seqs, k)
            if study.guardrails and not seqs:
                g_open = [guard.column for guard in study.guardrails]
            if srm.flagged:
                decision = "invalid"
                reason = (f"sample-ratio mismatch: {unit}s per arm {counts[k, 0]:,} / "
                          f"{counts[k, 1]:,} (p = {srm.p_value:.2g} < {level:.2g})")
            elif g_bad:
                decision = "do_not_ship"
                reason = f"guardrail sequence(s) beyond their margin: {', '.join(g_bad)}"
            elif not (np.isfinite(lo) and np.isfinite(hi)):
                decision, reason = "keep_collecting", "no sequence yet (before the burn-in)"
            elif hi < bound:
                decision, reason = "do_not_ship", f"the PPI++ sequence is below {bound:g}"
            elif lo > bound and not g_open:
                decision, reason = "ship", f"the PPI++ sequence is above {bound:g}"
                if g_ok:
                    reason += f"; guardrail(s) non-inferior: {', '.join(g_ok)}"
            elif lo > bound:
                decision = "keep_collecting"
                reason = (f"the PPI++ sequence is above {bound:g}; guardrail(s) not yet shown "
                          f"non-inferior: {', '.join(g_open)}")
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
