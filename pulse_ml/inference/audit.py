"""Audits on the user's own data: a split-half audit that can fail, and a consistency check.

**Split-half audit** (:func:`split_half`): users are split at random into two independent
halves many times; on one half the method under audit (its labels and its users' unlabeled
sessions), on the other an independent naive estimate; a valid interval method passes
``|D_A - D_B| <= t sqrt(se_A^2 + se_B^2)`` in about 1 - alpha of the splits
(:func:`pulse_ml.stats.split_half_audit`, with a Monte-Carlo error and a verdict).

**Labeled-vs-unlabeled consistency check** (:func:`audit`, formerly "calibrated coverage"). It
is not a coverage check: for nested estimates its yardstick is a difference of two noisy
variance estimates, so it passes i.i.d. intervals on clustered data and leaky predictions; it
does react when labeled sessions are predicted differently from unlabeled ones.

Each replication hides the labels of a random share h of the labeled sessions of a case study
(of its users, all their labels at once, when intervals are cluster-robust),
recomputes the naive and the augmented interval on the remaining labels (hidden sessions join the
unlabeled pool), and records the augmented/naive width ratio and two kinds of coverage:

* raw: does the interval cover the same estimator's all-labels estimate (or a known true effect)?
  The all-labels estimate shares the kept labels, so a valid interval covers it more often than
  1 - alpha: about 2*Phi(z/sqrt(h)) - 1 (0.994 for h = 0.5, alpha = 0.05), reported beside it.
* calibrated: is |estimate - all-labels estimate| <= z * sqrt(se^2 - se_all^2)? For nested
  estimates the difference has that variance (Hausman), so valid standard errors give about
  1 - alpha here: the number to compare with the nominal level. Predictions are
the honest ones: a session that was in the model's training data keeps its out-of-fold prediction
whether its label is hidden or not, so no replication sees a prediction fitted on its label.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.stats import norm

from pulse_ml.inference.effects import InferenceSettings, arm_data, compare
from pulse_ml.sessions.case_studies import CaseStudy
from pulse_ml.sessions.table import SessionTable


@dataclass(frozen=True)
class AuditResult:
    """Empirical coverage and widths over the replications."""

    case_study: str
    replications: int
    hide_share: float
    reference: float
    reference_kind: str
    coverage_naive: float
    coverage_augmented: float
    expected_coverage: float | None
    calibrated_coverage_naive: float | None
    calibrated_coverage_augmented: float | None
    mean_width_naive: float
    mean_width_augmented: float
    mean_width_ratio: float
    per_replication: pd.DataFrame


def audit(table: SessionTable, preds: np.ndarray, study: CaseStudy,
          settings: InferenceSettings, replications: int = 200, hide_share: float = 0.5,
          seed: int = 0, reference: float | None = None, progress: bool = True) -> AuditResult:
    """Run the label-hiding audit for one case study (see module docstring)."""
    from tqdm.auto import tqdm

    codes = pd.factorize(table.frame["user_id"])[0]
    full = compare(arm_data(table, preds, study, study.control, codes),
                   arm_data(table, preds, study, study.treatment, codes), settings)
    ref_kind = "true effect" if reference is not None else "all-labels estimate"
    ref_n = float(reference) if reference is not None else full.naive.effect
    ref_a = float(reference) if reference is not None else full.augmented.effect
    frame = table.frame
    in_study = (frame["case_study"] == study.name).to_numpy() & table.labeled
    # The unit that is hidden is the unit the variance treats as independent: the user when
    # intervals are cluster-robust (all of a user's labels at once), else the session.
    unit = codes if settings.clusters else np.arange(len(frame))
    candidates = np.unique(unit[in_study])
    rng = np.random.default_rng(seed)
    rows = []
    for r in tqdm(range(replications), desc=f"audit {study.name}", disable=not progress):
        chosen = rng.choice(candidates, int(round(hide_share * len(candidates))), replace=False)
        hidden = in_study & np.isin(unit, chosen)
        c = compare(arm_data(table, preds, study, study.control, codes, hidden),
                    arm_data(table, preds, study, study.treatment, codes, hidden), settings)
        rows.append({
            "replication": r,
            "naive_effect": c.naive.effect, "naive_lo": c.naive.ci_lower,
            "naive_hi": c.naive.ci_upper, "naive_se": c.naive.se,
            "aug_effect": c.augmented.effect, "aug_lo": c.augmented.ci_lower,
            "aug_hi": c.augmented.ci_upper, "aug_se": c.augmented.se,
        })
    per = pd.DataFrame(rows)
    w_n = per["naive_hi"] - per["naive_lo"]
    w_a = per["aug_hi"] - per["aug_lo"]
    z = float(norm.ppf(1 - settings.alpha / 2))
    calibrated = {}
    for key, est in (("naive", full.naive), ("aug", full.augmented)):
        spread = np.sqrt(np.clip(per[f"{key}_se"] ** 2 - est.se**2, 0.0, None))
        calibrated[key] = float((np.abs(per[f"{key}_effect"] - est.effect) <= z * spread).mean())
    nested = reference is None
    return AuditResult(
        case_study=study.name, replications=replications, hide_share=hide_share,
        reference=ref_a, reference_kind=ref_kind,
        coverage_naive=float(((per["naive_lo"] <= ref_n) & (ref_n <= per["naive_hi"])).mean()),
        coverage_augmented=float(((per["aug_lo"] <= ref_a) & (ref_a <= per["aug_hi"])).mean()),
        expected_coverage=float(2 * norm.cdf(z / np.sqrt(hide_share)) - 1) if nested else None,
        calibrated_coverage_naive=calibrated["naive"],
        calibrated_coverage_augmented=calibrated["aug"],
        mean_width_naive=float(w_n.mean()), mean_width_augmented=float(w_a.mean()),
        mean_width_ratio=float((w_a / w_n).mean()), per_replication=per)


def split_half(table: SessionTable, preds: np.ndarray, study: CaseStudy,
               settings: InferenceSettings, replications: int = 1000, seed: int = 0) -> dict:
    """Split-half audits of the augmented and the naive intervals of one case study.

    Returns:
        ``{"augmented": SplitHalfAudit, "naive": SplitHalfAudit}``.
    """
    from pulse_ml.stats import split_half_audit

    codes = pd.factorize(table.frame["user_id"])[0]
    control = arm_data(table, preds, study, study.control, codes)
    treatment = arm_data(table, preds, study, study.treatment, codes)
    return {method: split_half_audit(control, treatment, clusters=settings.clusters,
                                     method=method, alpha=settings.alpha,
                                     replications=replications, seed=seed)
            for method in ("augmented", "naive")}
