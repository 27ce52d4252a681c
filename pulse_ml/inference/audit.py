"""Audits on the user's own data: a split-half audit that can fail, and a consistency check.

**Split-half audit** (:func:`split_half`, the verdict): users are split at random into two
independent halves many times; on one half the method under audit (its labels and its users'
unlabeled sessions), on the other an independent naive estimate; a valid interval method passes
``|D_A - D_B| <= t sqrt(se_A^2 + se_B^2)`` in about 1 - alpha of the splits
(:func:`pulse_ml.stats.split_half_audit`, with a Monte-Carlo error and a verdict). The augmented
method is audited twice, with equal halves and with half A = 30% of the users (see
:data:`AUGMENTED_SHARES`), each at half the level; either flag makes the verdict.

**Labeled-vs-unlabeled consistency check** (:func:`consistency`, formerly "calibrated
coverage"): hides a share of the labeled units (users when intervals are cluster-robust) and
compares the nested estimates with the all-labels ones
(:func:`pulse_ml.stats.labeled_unlabeled_consistency`, the one implementation). It is **not** a
coverage check and its rate is not to be compared with the nominal level: for nested estimates
its yardstick is a difference of two noisy variance estimates, so it passes i.i.d. intervals on
clustered data and leaky predictions and reads valid clustered intervals low. It does react
when labeled sessions are predicted differently from unlabeled ones: a naive rate clearly above
the augmented one points there. Predictions are the honest ones: a session keeps its
out-of-fold prediction whether its label is hidden or not.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from pulse_ml.inference.effects import InferenceSettings, arm_data
from pulse_ml.sessions.case_studies import CaseStudy
from pulse_ml.sessions.table import SessionTable


@dataclass(frozen=True)
class ConsistencyResult:
    """The labeled-vs-unlabeled consistency check of one case study (not a coverage).

    Attributes:
        case_study: Case study name.
        replications: Label hidings run.
        hide_share: Share of the labeled units hidden per replication.
        consistency_rate_naive: Share of hidings whose naive estimate agrees with the
            all-labels one (close to 1 - alpha almost whatever the variance formula).
        consistency_rate_augmented: The same for the augmented estimate.
        consistency_mc_se: Monte-Carlo standard error of the augmented rate.
        consistency_gap: ``rate_naive - rate_augmented``; clearly positive when hidden labeled
            sessions' predictions do not behave like the unlabeled ones.
        mean_se_ratio: Mean augmented / naive standard error over the hidings.
        per_replication: naive_effect, naive_se, aug_effect, aug_se per hiding.
    """

    case_study: str
    replications: int
    hide_share: float
    consistency_rate_naive: float
    consistency_rate_augmented: float
    consistency_mc_se: float
    consistency_gap: float
    mean_se_ratio: float
    per_replication: pd.DataFrame


def _arms(table: SessionTable, preds: np.ndarray, study: CaseStudy):
    codes = pd.factorize(table.frame["user_id"])[0]
    return (arm_data(table, preds, study, study.control, codes),
            arm_data(table, preds, study, study.treatment, codes))


def consistency(table: SessionTable, preds: np.ndarray, study: CaseStudy,
                settings: InferenceSettings, replications: int = 200, hide_share: float = 0.5,
                seed: int = 0) -> ConsistencyResult:
    """Labeled-vs-unlabeled consistency check of one case study (see module docstring)."""
    from pulse_ml.stats import labeled_unlabeled_consistency

    control, treatment = _arms(table, preds, study)
    check = labeled_unlabeled_consistency(
        control, treatment, clusters=settings.clusters, alpha=settings.alpha,
        replications=replications, hide_share=hide_share, seed=seed)
    per = check.per_replication
    se_a, se_n = per["aug_se"].to_numpy(float), per["naive_se"].to_numpy(float)
    ratio = np.divide(se_a, se_n, out=np.full(se_n.size, np.nan), where=se_n > 0)
    return ConsistencyResult(
        case_study=study.name, replications=check.replications, hide_share=hide_share,
        consistency_rate_naive=check.rate_naive, consistency_rate_augmented=check.rate_augmented,
        consistency_mc_se=check.mc_se_augmented,
        consistency_gap=check.rate_naive - check.rate_augmented,
        mean_se_ratio=float(np.nanmean(ratio)) if np.isfinite(ratio).any() else float("nan"),
        per_replication=per)


# Half-A shares of the two augmented split-half audits: equal halves see bias (leaky
# predictions) best, a small A (30% of the users) sees too-narrow variances best. Each is tested
# at half the level (Bonferroni), so the combined false-alarm rate stays that of one audit.
AUGMENTED_SHARES = {"augmented": 0.5, "augmented_small_a": 0.3}


@dataclass(frozen=True)
class SplitHalfResult:
    """Split-half audits of one case study and their combined verdict.

    Attributes:
        audits: ``augmented`` (equal halves), ``augmented_small_a`` (half A = 30% of the users)
            and ``naive`` (equal halves) :class:`~pulse_ml.stats.split_half.SplitHalfAudit`.
        verdict: ``"too narrow"`` if either augmented audit rejects at half the level,
            ``"valid"`` if both say valid, else ``"inconclusive"``.
        reason: One sentence behind the verdict.
    """

    audits: dict
    verdict: str
    reason: str


def combined_verdict(audits: list) -> tuple[str, str]:
    """Verdict of several audits of one method, each run at its share of the level."""
    flagged = [a for a in audits if a.verdict == "too narrow"]
    if flagged:
        return "too narrow", "; ".join(f"half A = {a.share:.0%} of the units: {a.reason}"
                                       for a in flagged)
    if all(a.verdict == "valid" for a in audits):
        return "valid", "; ".join(f"half A = {a.share:.0%}: {a.reason}" for a in audits)
    return "inconclusive", "; ".join(f"half A = {a.share:.0%}: {a.reason}" for a in audits
                                     if a.verdict == "inconclusive")


def split_half(table: SessionTable, preds: np.ndarray, study: CaseStudy,
               settings: InferenceSettings, replications: int = 1000, seed: int = 0,
               level: float = 0.05) -> SplitHalfResult:
    """Split-half audits of the augmented (two shares) and the naive intervals of one study."""
    from pulse_ml.stats import split_half_audit

    control, treatment = _arms(table, preds, study)
    kw = {"clusters": settings.clusters, "alpha": settings.alpha, "replications": replications,
          "seed": seed}
    audits = {name: split_half_audit(control, treatment, method="augmented", share=share,
                                     level=level / len(AUGMENTED_SHARES), **kw)
              for name, share in AUGMENTED_SHARES.items()}
    audits["naive"] = split_half_audit(control, treatment, method="naive", level=level, **kw)
    label, reason = combined_verdict([audits[name] for name in AUGMENTED_SHARES])
    return SplitHalfResult(audits, label, reason)
