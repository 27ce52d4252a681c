"""The decision rule: from checks, a success interval and guardrail intervals to one word.

The rule (its exact wording is :data:`RULE_TEXT`):

1. **invalid** when the sample-ratio check fails (sessions per arm vs the declared ``split``,
   or equal shares, chi-square p < 0.001) or the intervals are not valid (in-sample
   predictions): no decision is made.
2. **ship** when the rating effect (PPI++) clears its bound, Holm-adjusted over the case
   study's treatments (superiority: the interval is above 0; non-inferiority: above
   ``-margin``), AND every guardrail is non-inferior (its interval is on the good side of its
   margin, at the unadjusted level: all must pass, so the false-ship rate is at most alpha/2
   whatever the number of guardrails, an intersection-union test).
3. **do_not_ship** when the rating effect is conclusively on the wrong side (superiority: the
   interval is below 0; non-inferiority: below ``-margin``) or a guardrail is conclusively
   worse than its margin.
4. **keep_collecting** otherwise, with the days more needed at the current rate when the
   estimates point to ship (intervals shrink as 1/sqrt(n)).

All bounds are checked with two-sided ``1 - alpha`` intervals (one-sided tests at alpha / 2),
as the printed intervals are.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy import stats

from pulse_ml.stats.decision_stats import holm

DECISIONS = ("ship", "do_not_ship", "keep_collecting", "invalid")
RULE_TEXT = (
    "invalid if the sessions per arm do not match the declared split (chi-square p < 0.001) or "
    "the intervals are not valid; else ship if the PPI++ rating effect's interval "
    "(Holm-adjusted over the treatments) is above 0 (superiority) or above -margin "
    "(non-inferiority) AND every guardrail's interval is on the good side of its margin; "
    "do_not_ship if the rating interval is entirely on the wrong side of that bound or a "
    "guardrail's interval is entirely beyond its margin; keep_collecting otherwise.")
MAX_DAYS = 365.0


@dataclass(frozen=True)
class Success:
    """The rating effect of one treatment, as the rule reads it."""

    effect: float
    se: float
    df: float
    bound: float  # 0 (superiority) or -margin (non-inferiority)


@dataclass(frozen=True)
class GuardrailCheck:
    """One guardrail's interval against its margin (lower-is-better metrics are negated)."""

    column: str
    good_side: float  # effect signed so that larger is better
    se: float
    bound: float      # -margin on the signed scale


@dataclass
class Verdict:
    """The rule's outcome for one treatment."""

    decision: str
    reasons: list[str] = field(default_factory=list)
    level: float = 0.05  # two-sided level of the rating interval (Holm)
    holm_p: float = float("nan")
    ci: tuple[float, float] = (float("nan"), float("nan"))
    guardrail_passed: dict[str, bool | None] = field(default_factory=dict)
    expected_days: float | None = None


def _q(level: float, df: float) -> float:
    return float(stats.t.ppf(1 - level / 2, df)) if np.isfinite(df) else float(
        stats.norm.ppf(1 - level / 2))


def success_p(s: Success) -> float:
    """One-sided p-value of ``H0: effect <= bound`` (t(df) reference)."""
    if not s.se > 0:
        return 0.0 if s.effect > s.bound else 1.0
    t = (s.effect - s.bound) / s.se
    return float(stats.t.sf(t, s.df) if np.isfinite(s.df) else stats.norm.sf(t))


def decide(successes: list[Success], guardrails: list[list[GuardrailCheck]], alpha: float,
           days_elapsed: float | None, invalid: list[str]) -> list[Verdict]:
    """Apply the rule to the k treatments of one case study.

    Args:
        successes: The rating effect per treatment.
        guardrails: Per treatment, its guardrail checks.
        alpha: Two-sided error level of the intervals (one-sided tests at ``alpha / 2``).
        days_elapsed: Days the experiment ran (``None``: unknown, no days estimate).
        invalid: Reasons making every decision ``invalid`` (empty = valid).

    Returns:
        One verdict per treatment.
    """
    p = np.array([success_p(s) for s in successes])
    adjusted, rejected, levels = holm(p, alpha / 2)
    out = []
    for i, s in enumerate(successes):
        level = float(2 * levels[i])
        q = _q(level, s.df)
        ci = (s.effect - q * s.se, s.effect + q * s.se)
        v = Verdict("keep_collecting", level=level, holm_p=float(adjusted[i]), ci=ci)
        what = "above 0" if s.bound == 0 else f"above -{-s.bound:g} stars (the margin)"
        k_note = f" (Holm-adjusted over {len(successes)} treatments)" if len(successes) > 1 else ""
        g_ok, g_bad, g_open, g_none, needs = [], [], [], [], []
        for g in guardrails[i]:
            if not (np.isfinite(g.good_side) and np.isfinite(g.se)):
                v.guardrail_passed[g.column] = None
                g_none.append(g.column)
                continue
            qg = _q(alpha, float("inf"))
            lo, hi = g.good_side - qg * g.se, g.good_side + qg * g.se
            passed = lo > g.bound
            worse = hi < g.bound
            v.guardrail_passed[g.column] = True if passed else (False if worse else None)
            (g_ok if passed else g_bad if worse else g_open).append(g.column)
            if not passed and not worse:
                needs.append((f"the {g.column} estimate", _factor(g.good_side - g.bound, g.se,
                                                                  qg)))
        if invalid:
            v.decision, v.reasons = "invalid", list(invalid)
            out.append(v)
            continue
        if rejected[i]:
            v.reasons.append(f"the rating effect's interval{k_note} is {what}")
        elif ci[1] < s.bound:
            v.reasons.append(f"the rating effect's interval{k_note} is entirely below "
                             f"{'0' if s.bound == 0 else f'-{-s.bound:g} stars (the margin)'}")
        else:
            v.reasons.append(f"the rating effect's interval{k_note} [{ci[0]:+.3f}, "
                             f"{ci[1]:+.3f}] still includes {s.bound:g}")
            needs.append(("the rating effect", _factor(s.effect - s.bound, s.se, q)))
        if g_bad:
            v.reasons.append(f"guardrail(s) conclusively worse than their margin: "
                             f"{', '.join(g_bad)}")
        if g_open:
            v.reasons.append(f"guardrail(s) not yet shown non-inferior: {', '.join(g_open)}")
        if g_ok:
            v.reasons.append(f"guardrail(s) non-inferior: {', '.join(g_ok)}")
        if g_none:
            v.reasons.append(f"guardrail(s) that cannot be checked (no value in an arm, or a "
                             f"relative change of a zero mean): {', '.join(g_none)}")
        if g_bad or (not rejected[i] and ci[1] < s.bound):
            v.decision = "do_not_ship"
        elif rejected[i] and not g_open and not g_none:
            v.decision = "ship"
        else:
            stuck = [what for what, f in needs if not np.isfinite(f)]
            v.expected_days = None if stuck else _days([f for _, f in needs], days_elapsed)
            if stuck:
                v.reasons.append(f"{' and '.join(stuck)} {'is' if len(stuck) == 1 else 'are'} "
                                 "on the wrong side of the bound: more data is not expected "
                                 "to make it ship")
            elif v.expected_days is not None:
                v.reasons.append(
                    f"at the current estimates about {v.expected_days:.0f} more day(s) would "
                    "be needed" if v.expected_days < MAX_DAYS else
                    "at the current estimates more than a year more would be needed")
        out.append(v)
    return out


def _factor(distance: float, se: float, q: float) -> float:
    """How many times the data is needed for ``q * se`` to shrink below ``distance``."""
    if distance <= 0 or not se > 0:
        return float("inf")
    return max((q * se / distance) ** 2, 1.0)


def _days(factors: list[float], days_elapsed: float | None) -> float | None:
    """More days for every pending bound at the current rate (``None`` when unreachable)."""
    if days_elapsed is None or not days_elapsed > 0 or not factors:
        return None
    worst = max(factors)
    if not np.isfinite(worst):
        return None
    return float(min(days_elapsed * (worst - 1.0), MAX_DAYS))
