"""Effect of a design change (treatment - control) with naive and prediction-powered intervals.

Each arm a in {control, treatment} has n_a labeled sessions (ratings Y, predictions f, optional
weights w) and N_a unlabeled sessions (predictions f~). Per arm the PPI++ estimate is

    mu_a(lam) = mean_w(Y) + lam * (mean(f~) - mean_w(f)),

and with weights (shift-aware PPI++, labels missing at random given features, w = 1 / labeling
propensity) the prediction mean runs over ALL sessions of the arm: ``mean_w(Y) + lam *
(mean(f, f~) - mean_w(f))``. The effect is ``Delta = mu_t - mu_c``; the naive effect is lam = 0.

Variance: the estimate is linear, so it is the sum over clusters g (users; one session each
without user ids) of per-cluster influence sums ``psi_g = alpha_g + lam delta_g``; a user seen in
both arms contributes ``psi_t,g - psi_c,g`` to the effect, so shared users give the effect's
variance a covariance term. Defaults (``small_sample=True, lam_mode="joint"``), details in
:func:`pulse_ml.stats.effect_engine.solve`:

* (lam_c, lam_t) jointly minimize the effect's variance over [0, 1]^2 (bounded 2x2 least squares
  on the influence sums), so the in-sample augmented variance is never above the naive one;
* CR1 factors count LABELED users only (unlabeled sessions never change the naive s.e.), ddof = 1
  for singleton clusters; the unlabeled mean's variance is at least its value from the pooled
  (labeled + unlabeled) predictions, so a handful of unlabeled sessions cannot fake precision;
* a tuned lambda inflates its arm's variance by ``(G_L - 1)/(G_L - 3)`` and costs one df;
  t quantiles with Welch-Satterthwaite df from the labeled cluster counts;
* both lambdas are then shrunk by the common share (``lambda_shrink``) that minimizes the
  printed width, inflation and df loss included (a shrunk lambda pays proportionally less), so
  the printed augmented interval is never wider than the naive one and a useless predictor
  gets lambda ~ 0.

``small_sample=False, lam_mode="per_arm"`` without clusters or weights reproduces two
``ppi_py.ppi_mean_ci(..., lam=None)`` and ``classical_mean_ci`` calls exactly (ddof 0, normal
quantile, ppi_py's pooled-variance lambda): the oracle the formulas are tested against.

With honest (cross-fitted) predictions of correlation rho the width ratio cannot beat about
``sqrt(1 - rho^2 N/(n+N))`` (:func:`theoretical_width_ratio`).

References:
    A. N. Angelopoulos, S. Bates, C. Fannjiang, M. I. Jordan, T. Zrnic. Prediction-powered
    inference. Science 382(6671), 2023.
    A. N. Angelopoulos, J. C. Duchi, T. Zrnic. PPI++: Efficient prediction-powered inference.
    arXiv:2311.01453, 2023.
    T. Zrnic, E. J. Candes. Cross-prediction-powered inference. PNAS 121(15), 2024.
    A. C. Cameron, D. L. Miller. A practitioner's guide to cluster-robust inference. Journal of
    Human Resources 50(2), 2015.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from pulse_ml.stats import arm_notes
from pulse_ml.stats import effect_engine as engine
from pulse_ml.stats.arm_inputs import Arm, arm_arrays, cluster_codes, weights_or_ones
from pulse_ml.stats.arm_notes import (
    MIN_LABELS,
    MIN_UNLABELED,
    MIN_UNLABELED_USERS,
    SHIFT_NOTE_SE,
    SHIFT_NOTE_Z,
    refuse_arm,
    refuse_degenerate,
)
from pulse_ml.stats.cluster_lin import kish_sums, labeled_cluster_lin
from pulse_ml.stats.cluster_moments import session_moments
from pulse_ml.stats.cluster_samples import arm_samples
from pulse_ml.stats.ppi import ppi_mean, z_two_sided

__all__ = [
    "MIN_LABELS",
    "MIN_UNLABELED",
    "MIN_UNLABELED_USERS",
    "ArmComparison",
    "Estimate",
    "compare_arms",
    "theoretical_width_ratio",
]

LAM_MODES = ("joint", "per_arm")


@dataclass(frozen=True)
class Estimate:
    """An effect estimate (treatment - control) with its two-sided interval.

    Attributes:
        effect: Point estimate of treatment mean - control mean.
        ci_lower: Lower end of the interval.
        ci_upper: Upper end of the interval.
        se: Standard error of the effect.
        p_value: Two-sided p-value of "no effect" (t(df) reference).
        df: Degrees of freedom of the t quantile (``inf`` = normal quantile).
    """

    effect: float
    ci_lower: float
    ci_upper: float
    se: float
    p_value: float
    df: float = float("inf")

    @property
    def width(self) -> float:
        """Interval width ``ci_upper - ci_lower``."""
        return self.ci_upper - self.ci_lower


@dataclass(frozen=True)
class ArmComparison:
    """Naive and prediction-powered comparison of two arms.

    Attributes:
        naive: Difference of labeled means with its interval.
        augmented: PPI++ effect with its interval.
        ci_reduction_pct: ``100 * (1 - width_augmented / width_naive)`` (negative = wider).
        lambda_control: Lambda used in the control arm.
        lambda_treatment: Lambda used in the treatment arm.
        mean_control_naive: Labeled mean rating of the control arm.
        mean_treatment_naive: Labeled mean rating of the treatment arm.
        mean_control_augmented: PPI++ mean of the control arm.
        mean_treatment_augmented: PPI++ mean of the treatment arm.
        se_control_naive: Standard error of the control labeled mean.
        se_treatment_naive: Standard error of the treatment labeled mean.
        se_control_augmented: Standard error of the control PPI++ mean.
        se_treatment_augmented: Standard error of the treatment PPI++ mean.
        n_control: Labeled control sessions.
        n_treatment: Labeled treatment sessions.
        n_unlabeled_control: Unlabeled control sessions.
        n_unlabeled_treatment: Unlabeled treatment sessions.
        n_clusters: Number of clusters (users) with a session in either arm; ``None`` without
            clustering.
        alpha: Error level of the intervals.
        n_labeled_clusters: Users with a labeled session in either arm (the count behind the
            CR1 factors and dfs); ``None`` without clustering.
        warnings: Plain-language notes on small samples, few unlabeled sessions or an
            augmented interval wider than the naive one (empty when nothing to say).
        small_sample: Whether the small-sample rules were applied.
        lam_mode: ``"joint"`` or ``"per_arm"``.
        weighted: Whether labeled sessions were weighted (shift-aware PPI++).
        lambda_shrink: Share of the variance-minimizing lambdas that was used (the share that
            minimizes the printed width, tuning inflation and df loss included; 0 = naive).
        prediction_shift: Per arm (control, treatment), unlabeled (weighted: all-session) minus
            labeled mean prediction: the difference lambda multiplies.
        shift_flagged: The shift is at least :data:`SHIFT_NOTE_SE` naive s.e. of the effect and
            :data:`SHIFT_NOTE_Z` of its own s.e. in an arm (a warning says so): the
            consequence-driven label-shift flag.
        effective_users: Kish effective numbers of labeled users per arm (clustered only).
    """

    naive: Estimate
    augmented: Estimate
    ci_reduction_pct: float
    lambda_control: float
    lambda_treatment: float
    mean_control_naive: float
    mean_treatment_naive: float
    mean_control_augmented: float
    mean_treatment_augmented: float
    se_control_naive: float
    se_treatment_naive: float
    se_control_augmented: float
    se_treatment_augmented: float
    n_control: int
    n_treatment: int
    n_unlabeled_control: int
    n_unlabeled_treatment: int
    n_clusters: int | None
    alpha: float
    n_labeled_clusters: int | None = None
    warnings: tuple[str, ...] = ()
    small_sample: bool = True
    lam_mode: str = "joint"
    weighted: bool = False
    lambda_shrink: float = 1.0
    prediction_shift: tuple[float, float] = (0.0, 0.0)
    shift_flagged: bool = False
    effective_users: tuple[float, float] | None = None


def theoretical_width_ratio(
    rho: float | NDArray[np.float64], n: float, N: float
) -> float | NDArray[np.float64]:
    """Best achievable width ratio augmented/naive for predictions of correlation ``rho``.

    ``sqrt(1 - rho^2 * N / (n + N))`` (optimal lambda, Var(f) = Var(f~); PPI++, ADZ 2023).

    Args:
        rho: Correlation between rating and honest prediction (scalar or array).
        n: Labeled sessions per arm.
        N: Unlabeled sessions per arm.

    Returns:
        The ratio, same shape as ``rho``.
    """
    return np.sqrt(1.0 - np.square(rho) * N / (n + N))


def _estimate(effect: float, se: float, q: float, df: float = float("inf"),
              p: float | None = None) -> Estimate:
    if p is None:
        p = float(engine.p_value(np.array([effect]), np.array([se]), np.array([df]))[0])
    return Estimate(float(effect), float(effect - q * se), float(effect + q * se), float(se),
                    p, float(df))


def _legacy_iid(yc, fc, fuc, yt, ft, fut, alpha: float) -> ArmComparison:
    """Two ppi_py ``ppi_mean_ci(lam=None)`` / ``classical_mean_ci`` calls combined (ddof 0, z)."""
    z = z_two_sided(alpha)
    pc, pt = ppi_mean(yc, fc, fuc), ppi_mean(yt, ft, fut)
    se_nc, se_nt = yc.std() / np.sqrt(yc.size), yt.std() / np.sqrt(yt.size)
    se_naive, se_aug = float(np.hypot(se_nc, se_nt)), float(np.hypot(pc.se, pt.se))
    m_nc, m_nt = float(yc.mean()), float(yt.mean())
    reduction = 100.0 * (1.0 - se_aug / se_naive) if se_naive > 0 else float("nan")
    return ArmComparison(
        naive=_estimate(m_nt - m_nc, se_naive, z),
        augmented=_estimate(pt.estimate - pc.estimate, se_aug, z),
        ci_reduction_pct=float(reduction), lambda_control=float(pc.lam),
        lambda_treatment=float(pt.lam), mean_control_naive=m_nc, mean_treatment_naive=m_nt,
        mean_control_augmented=float(pc.estimate), mean_treatment_augmented=float(pt.estimate),
        se_control_naive=float(se_nc), se_treatment_naive=float(se_nt),
        se_control_augmented=float(pc.se), se_treatment_augmented=float(pt.se),
        n_control=int(yc.size), n_treatment=int(yt.size), n_unlabeled_control=int(fuc.size),
        n_unlabeled_treatment=int(fut.size), n_clusters=None, alpha=float(alpha),
        small_sample=False, lam_mode="per_arm",
    )


def compare_arms(
    control: Arm,
    treatment: Arm,
    alpha: float = 0.05,
    *,
    small_sample: bool = True,
    lam_mode: str = "joint",
    cr2: bool = True,
    lambda_noise: bool = True,
) -> ArmComparison:
    """Compare treatment with control: naive and PPI++ effect with intervals.

    Formulas: see the module docstring and :func:`pulse_ml.stats.effect_engine.solve`. When an
    arm has user ids (``users`` or ``users_unl``) the variances are cluster-robust by user;
    samples without ids are one cluster per session. Integer user codes are much faster than
    strings to factorize. Weights (``w``, e.g. inverse labeling propensities from
    :func:`pulse_ml.inference.propensity.crossfit_propensity`) switch to shift-aware PPI++ (see
    module docstring); missing weights of the other arm are 1.

    Args:
        control: The control arm: labeled ratings and predictions (n_c,), unlabeled
            predictions (N_c,), optional user ids and weights.
        treatment: The treatment arm (user ids share one id space with the control's).
        alpha: Error level of the two-sided intervals.
        small_sample: Apply the small-sample rules (default). ``False`` gives the asymptotic
            formulas (ddof 0, normal quantiles); with ``lam_mode="per_arm"`` and neither
            users nor weights they equal ppi_py exactly.
        lam_mode: ``"joint"`` (default) or ``"per_arm"`` lambda choice.
        cr2: With the small-sample rules, CR2 (leverage-scaled) cluster sums instead of CR1's
            common factor (equal for i.i.d. unweighted sessions). ``False`` gives the cumulative
            per-look numbers of :mod:`pulse_ml.stats.sequential`.
        lambda_noise: With the small-sample rules, add the tuned lambdas' own noise to the
            variance (:mod:`pulse_ml.stats.lambda_noise`).

    Returns:
        The comparison; effects are treatment - control. ``warnings`` says when a sample is
        small, an arm has few unlabeled sessions or the augmented interval came out wider.

    Raises:
        PulseError: An arm's ratings all equal, or (clustered) its labeled sessions come from a
            single user.
    """
    if lam_mode not in LAM_MODES:
        raise ValueError(f"lam_mode must be one of {LAM_MODES}, got {lam_mode!r}")
    z_two_sided(alpha)  # validates alpha
    yc, fc, fuc = arm_arrays(control.y, control.f, control.f_unl, "c")
    yt, ft, fut = arm_arrays(treatment.y, treatment.f, treatment.f_unl, "t")
    keys = [control.users, control.users_unl, treatment.users, treatment.users_unl]
    clustered = any(k is not None for k in keys)
    weighted = control.w is not None or treatment.w is not None
    names = ["clusters_c", "clusters_unl_c", "clusters_t", "clusters_unl_t"]
    sizes = [yc.size, fuc.size, yt.size, fut.size]
    # Unlabeled samples without cluster ids are one cluster per session: session_moments
    # takes them in two passes without codes (an arange of 10^6 codes costs more than that).
    singleton = (control.users_unl is None, treatment.users_unl is None)
    code_sizes = [0 if single else n for single, n in
                  zip((False, singleton[0], False, singleton[1]), sizes, strict=True)]
    (cl_c, cu_c, cl_t, cu_t), n_codes = cluster_codes(keys, code_sizes, names)
    refuse_arm(yc, cl_c, control.users, "control")
    refuse_arm(yt, cl_t, treatment.users, "treatment")
    if not (small_sample or clustered or weighted) and lam_mode == "per_arm":
        return _legacy_iid(yc, fc, fuc, yt, ft, fut, alpha)
    wc = weights_or_ones(control.w, yc.size, "w_c")
    wt = weights_or_ones(treatment.w, yt.size, "w_t")
    # Center by constants common to both arms: effects are unchanged, sums lose cancellation.
    n_both = float(yc.size + yt.size)  # the pooled means without concatenated copies
    cy = float((np.add.reduce(yc) + np.add.reduce(yt)) / n_both)
    cf = float((np.add.reduce(fc) + np.add.reduce(ft)) / n_both)
    # The unlabeled predictions stay as they are: their sums take cf off block by block.
    arms = [(cl, (y - cy)[None], (f - cf)[None], w[None], cu, fu[None])
            for cl, y, f, w, cu, fu in ((cl_c, yc, fc, wc, cu_c, fuc),
                                        (cl_t, yt, ft, wt, cu_t, fut))]
    cr2 = cr2 and small_sample
    sums = arm_samples(arms, n_codes, singleton, unl_shift=cf)  # each sample read once
    res = engine.solve(
        session_moments(arms, n_codes, singleton, unl_shift=cf, cr2=cr2, prepared=sums),
        weighted=weighted, small_sample=small_sample, lam_mode=lam_mode, clustered=clustered,
        alpha=alpha, cr2=cr2,
        lab_z=(labeled_cluster_lin(arms, n_codes, singleton, cr2=cr2, prepared=sums)
               if small_sample and lambda_noise else None),
        kish=kish_sums(arms, n_codes, prepared=sums) if cr2 else None)
    refuse_degenerate(res, clustered)
    # naive and augmented side by side: one quantile and one p-value call
    eff = np.array([res.naive_effect[0], res.aug_effect[0]])
    se, df = np.array([res.naive_se[0], res.aug_se[0]]), np.array([res.naive_df[0], res.aug_df[0]])
    q, p = engine.quantile(alpha, df), engine.p_value(eff, se, df)
    naive, augmented = (_estimate(eff[i], se[i], q[i], df[i], float(p[i])) for i in (0, 1))
    reduction = (100.0 * (1.0 - augmented.width / naive.width) if naive.width > 0
                 else float("nan"))
    notes = arm_notes.notes(res, clustered, small_sample)
    shift = res.pred_shift[0]
    z_shift = np.abs(shift) / np.maximum(res.pred_shift_se[0], 1e-300)
    flagged = bool(small_sample and np.logical_or.reduce(
        (z_shift >= SHIFT_NOTE_Z) & (np.abs(shift) >= SHIFT_NOTE_SE * res.naive_se[0])))
    if flagged:
        v_aug, v_noise = res.aug_se[0] ** 2, res.lambda_noise_var[0]
        cost = 100.0 * (np.sqrt(v_aug / max(v_aug - v_noise, 1e-300)) - 1.0) if v_aug else 0.0
        common = res.lam[0, 0] > 0 and np.isclose(res.lam[0, 0], res.lam[0, 1])
        how = ("one common lambda for both arms, which cancels a shift the arms share"
               if common else "lambdas whose own noise from that shift is in the interval")
        notes.append(
            f"raters differ from non-raters in what the model sees: unlabeled minus labeled "
            f"mean prediction is {shift[0]:+.3f} (control) and {shift[1]:+.3f} (treatment), "
            f"up to {np.abs(shift).max() / res.naive_se[0]:.1f}x the effect's naive s.e. The "
            f"PPI++ interval uses {how} (+{cost:.1f}% s.e.); if who rates depends on the "
            "features, reweight=true corrects the estimate itself.")
    if reduction < -1e-9:
        notes.append(f"the PPI++ interval is {-reduction:.1f}% wider than the naive one: "
                     "with these labels, tuning lambda costs more than the predictions give; "
                     "report the naive interval.")
    lam, m_aug = res.lam[0], res.mean_aug[0] + cy
    se_n, se_a = res.se_naive_arm[0], res.se_aug_arm[0]
    return ArmComparison(
        naive=naive, augmented=augmented, ci_reduction_pct=float(reduction),
        lambda_control=float(lam[0]), lambda_treatment=float(lam[1]),
        mean_control_naive=float(yc @ wc / wc.sum()),
        mean_treatment_naive=float(yt @ wt / wt.sum()),
        mean_control_augmented=float(m_aug[0]), mean_treatment_augmented=float(m_aug[1]),
        se_control_naive=float(se_n[0]), se_treatment_naive=float(se_n[1]),
        se_control_augmented=float(se_a[0]), se_treatment_augmented=float(se_a[1]),
        n_control=int(yc.size), n_treatment=int(yt.size), n_unlabeled_control=int(fuc.size),
        n_unlabeled_treatment=int(fut.size),
        n_clusters=int(res.g_any[0]) if clustered else None, alpha=float(alpha),
        n_labeled_clusters=int(res.g_lab_union[0]) if clustered else None,
        warnings=tuple(notes), small_sample=bool(small_sample), lam_mode=lam_mode,
        weighted=weighted, lambda_shrink=float(res.shrink[0]),
        prediction_shift=(float(shift[0]), float(shift[1])), shift_flagged=flagged,
        effective_users=(float(res.g_eff[0, 0]), float(res.g_eff[0, 1])) if clustered else None,
    )


