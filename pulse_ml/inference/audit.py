"""Audits on the user's own data: a split-half audit that can fail, and a consistency check.

**Split-half audit** (:func:`split_half`, the verdict; :func:`pulse_ml.stats.half_checks.
audit_halves`): users are split at random into two independent halves many times. The
*variance check* runs the method under audit on both halves (the analysis' lambda held fixed)
and a valid interval method passes ``|D_A - D_B| <= t sqrt(se_A^2 + se_B^2)`` in about 1 - alpha
of the splits; the *bias check* compares the augmented with the naive estimate on the same
halves against the half-sample s.e. of that gap. Each at half the level; either flag makes the
verdict. (The former check, augmented on one half against naive on the other, flagged valid
strong-predictor analyses in ~25% of data sets: see the half_checks module docstring.) With few
users the result says which check still tells something and how many labeled users the other
needs.

**Labeled-vs-unlabeled consistency check** (:func:`consistency`, formerly "calibrated coverage"):
hides a share of the labeled units (users when intervals are cluster-robust) and compares the
nested estimates with the all-labels ones
(:func:`pulse_ml.stats.consistency.labeled_unlabeled_consistency`, the one implementation). It is
**not** a coverage check and its rate is not to be compared with the nominal level: for nested
estimates its yardstick is a difference of two noisy variance estimates, so it passes i.i.d.
intervals on clustered data and leaky predictions and reads valid clustered intervals low. It does
react when labeled sessions are predicted differently from unlabeled ones: a naive rate clearly
above the augmented one points there. Predictions are the honest ones: a session keeps its
out-of-fold prediction whether its label is hidden or not.

**Asked by request_prob** (:func:`audit_arms`): a case study asked by varying probabilities is
audited with ``infer``'s weights ``1 / (request_prob x r_hat)`` (the active PPI++ estimator,
``r_hat`` the response model cross-fitted by user), fixed once and reused by every half and
hiding. Both checks are weighted already (the variance check's CR1 variance of the weighted
linear estimator, the bias check's gap); the seeded simulation of
tests/inference/test_audit_active.py (perf/audit_active.py for more data sets) shows that valid
weighted analyses keep the checks' rate and that i.i.d. intervals on clustered data and
in-sample predictions are still flagged.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from pulse_ml.inference.active import active_arms
from pulse_ml.inference.arm_data import arm_data, user_codes
from pulse_ml.inference.effects import InferenceSettings
from pulse_ml.sessions.case_studies import CaseStudy
from pulse_ml.sessions.request_prob import uses_request_prob
from pulse_ml.sessions.table import SessionTable
from pulse_ml.stats.arm_inputs import Arm


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


def audit_arms(table: SessionTable, preds: np.ndarray, study: CaseStudy,
               settings: InferenceSettings, treatment: str | None = None
               ) -> tuple[Arm, Arm, tuple[str, ...]]:
    """Control and treatment arms as ``infer`` analyses them, and notes on their weights.

    ``treatment``: one of several variants (default the first). A case study asked by varying
    ``request_prob`` gets infer's weights ``1 / (request_prob x r_hat)`` (the response model
    cross-fitted by user with ``settings.seed``, :func:`pulse_ml.inference.active.active_arms`);
    the halves and hidings then reuse them (the response model is not refitted per half).
    """
    pair = study if treatment in (None, study.treatment) else replace(
        study, treatment=treatment, treatments=(treatment,))
    codes = user_codes(table)
    control = arm_data(table, preds, pair, pair.control, codes)
    treated = arm_data(table, preds, pair, pair.treatment, codes)
    frame = table.frame
    if uses_request_prob(frame, (frame["case_study"] == study.name).to_numpy()):
        active = active_arms(table, pair, control, treated, codes, settings.seed)
        if active is not None:
            return active[0].arm, active[1].arm, active[2]
    return control.arm, treated.arm, ()


def consistency(table: SessionTable, preds: np.ndarray, study: CaseStudy,
                settings: InferenceSettings, replications: int = 200, hide_share: float = 0.5,
                seed: int = 0, treatment: str | None = None) -> ConsistencyResult:
    """Labeled-vs-unlabeled consistency check of one case study (see module docstring).

    ``treatment`` picks one of several variants (against the control); default the first.
    """
    from pulse_ml.stats.consistency import labeled_unlabeled_consistency

    control, treatment_arm, _ = audit_arms(table, preds, study, settings, treatment)
    check = labeled_unlabeled_consistency(
        control, treatment_arm, clusters=settings.clusters, alpha=settings.alpha,
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


@dataclass(frozen=True)
class SplitHalfResult:
    """Split-half audits of one case study and their combined verdict.

    Attributes:
        audits: ``augmented`` and ``naive`` variance checks
            (:class:`~pulse_ml.stats.split_half.SplitHalfAudit`, same method on both halves).
        verdict: The augmented audit's verdict (variance and bias check).
        reason: One sentence behind the verdict.
        bias: The augmented-vs-naive bias check (None when it could not run).
        checks: What each check can tell on this study (small studies: which still does and
            how many labeled users the other needs).
        notes: How the arms were weighted (a case study asked by ``request_prob``: asked,
            answered and the weights per arm); empty otherwise.
    """

    audits: dict
    verdict: str
    reason: str
    bias: object = None
    checks: tuple = ()
    notes: tuple = ()


def split_half(table: SessionTable, preds: np.ndarray, study: CaseStudy,
               settings: InferenceSettings, replications: int = 1000, seed: int = 0,
               level: float = 0.05, treatment: str | None = None) -> SplitHalfResult:
    """Variance and bias checks of the augmented intervals (the verdict) and of the naive ones.

    ``treatment`` picks one of several variants (against the control); default the first.
    """
    from pulse_ml.stats.half_checks import audit_halves

    control, treatment_arm, notes = audit_arms(table, preds, study, settings, treatment)
    kw = {"clusters": settings.clusters, "alpha": settings.alpha, "replications": replications,
          "seed": seed, "level": level}
    aug = audit_halves(control, treatment_arm, method="augmented", **kw)
    naive = audit_halves(control, treatment_arm, method="naive", **kw)
    return SplitHalfResult({"augmented": aug.variance, "naive": naive.variance}, aug.verdict,
                           aug.reason, aug.bias, aug.checks, notes)
