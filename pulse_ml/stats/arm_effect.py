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

from dataclasses import dataclass, fields

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray

from pulse_ml.errors import PulseError
from pulse_ml.stats import effect_engine as engine
from pulse_ml.stats.cluster_moments import kish_sums, labeled_cluster_lin, session_moments
from pulse_ml.stats.ppi import as_vector, normalize_weights, ppi_mean, z_two_sided

__all__ = [
    "MIN_LABELS",
    "MIN_UNLABELED",
    "MIN_UNLABELED_USERS",
    "ArmComparison",
    "BatchComparison",
    "Estimate",
    "compare_arms",
    "compare_batch",
    "cluster_codes",
    "theoretical_width_ratio",
]

MIN_LABELS = 30  # below this many labeled sessions (or users) per arm: a small-sample warning
MIN_UNLABELED = 10  # below this many unlabeled sessions per arm: a warning
MIN_UNLABELED_USERS = 5  # clustered: below this many unlabeled users per arm: a warning
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


def _estimate(effect: float, se: float, q: float, df: float = float("inf")) -> Estimate:
    p = float(engine.p_value(np.array([effect]), np.array([se]), np.array([df]))[0])
    return Estimate(float(effect), float(effect - q * se), float(effect + q * se), float(se),
                    p, float(df))


def _arm_arrays(
    y: ArrayLike, f: ArrayLike, f_unl: ArrayLike, arm: str
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    yv = as_vector(y, f"y_{arm}", min_size=2)
    fv = as_vector(f, f"f_{arm}", min_size=2)
    fu = as_vector(f_unl, f"f_unl_{arm}", min_size=1)
    if yv.size != fv.size:
        raise ValueError(f"y_{arm} has {yv.size} values but f_{arm} has {fv.size}")
    return yv, fv, fu


def cluster_codes(
    keys: list[ArrayLike | None], sizes: list[int], names: list[str]
) -> tuple[list[NDArray[np.intp]], int]:
    """Integer cluster codes for several samples sharing one id space; ``None`` = singletons.

    Args:
        keys: Cluster ids per sample (any hashable dtype) or ``None``.
        sizes: Length of each sample.
        names: Argument names for error messages.

    Returns:
        ``(codes per sample, number of codes)``.

    Raises:
        ValueError: If a key array has the wrong shape.
        PulseError: If an id is missing.
    """
    given = [(i, np.asarray(k)) for i, k in enumerate(keys) if k is not None]
    for i, k in given:
        if k.ndim != 1 or k.size != sizes[i]:
            raise ValueError(f"{names[i]} has shape {k.shape} but its sample has {sizes[i]} rows")
        if pd.isna(k).any():
            raise PulseError(f"{names[i]}: cluster ids (user_id) must not be missing")
    codes: list[NDArray[np.intp] | None] = [None] * len(keys)
    n_codes = 0
    if given:
        arrays = [k for _, k in given]
        if len({a.dtype.kind for a in arrays}) > 1:  # e.g. ints mixed with strings
            arrays = [a.astype(object) for a in arrays]
        joint, uniques = pd.factorize(np.concatenate(arrays))
        n_codes = len(uniques)
        start = 0
        for i, k in given:
            codes[i] = joint[start : start + k.size]
            start += k.size
    for i, c in enumerate(codes):
        if c is None:
            codes[i] = np.arange(n_codes, n_codes + sizes[i])
            n_codes += sizes[i]
    return [c for c in codes if c is not None], n_codes


def _weights(w: ArrayLike | None, size: int, name: str) -> NDArray[np.float64]:
    out = normalize_weights(w, size, name)
    return np.ones(size) if out is None else out


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


def _refuse(y: NDArray[np.float64], codes: NDArray[np.intp], keys: ArrayLike | None,
            arm: str) -> None:
    if np.ptp(y) == 0:
        raise PulseError(
            f"{arm} arm: all {y.size} labeled ratings equal {y[0]:g}, so their variance is 0 "
            "and no interval can be computed (it would have zero width). Collect more ratings "
            "in this arm or leave the case study out.")
    if keys is not None and np.unique(codes).size < 2:
        user = np.asarray(keys)[0]
        raise PulseError(
            f"{arm} arm: all {y.size} labeled sessions come from one user ({user!r}), so a "
            "cluster-robust interval is impossible: its variance comes from the labeled users, "
            "and unlabeled sessions of other users cannot replace them. Collect ratings from at "
            "least 2 users (30+ for reliable intervals) or use clusters=none and read the result "
            "as about that user.")


SHIFT_NOTE_SE = 0.5  # prediction shift (unlabeled - labeled) of this many naive s.e. ...
SHIFT_NOTE_Z = 3.0  # ... and this many of its own s.e. (not noise): a note
DEGENERATE = 1e-6  # effect s.e. below this share of the arms' s.e.: no variance information


def _refuse_degenerate(res: engine.EngineResult, clustered: bool) -> None:
    """Refuse an effect whose variance vanishes although each arm's mean varies.

    Users who rated both arms contribute their within-user difference; when every such
    difference is the same (e.g. two users, each one star happier in treatment) the
    cluster-robust variance is 0 and an interval would claim certainty from no information.
    """
    arms_se = float(np.hypot(*res.se_naive_arm[0]))
    for name, se in (("naive", res.naive_se[0]), ("augmented", res.aug_se[0])):
        if arms_se > 0 and se <= DEGENERATE * arms_se:
            who = (f"its {int(res.g_lab_union[0])} labeled users" if clustered
                   else "its labeled sessions")
            raise PulseError(
                f"the {name} effect's standard error is {se:.1e}, although each arm's mean "
                f"varies (s.e. {arms_se:.2g}): {who} rated both arms and all show the same "
                "within-user difference, so the data say nothing about how much the effect "
                "varies and any interval would have zero width. Collect ratings from more "
                "users (30+ for reliable intervals).")


def _notes(res: engine.EngineResult, clustered: bool, small_sample: bool) -> list[str]:
    notes = []
    unit = "users" if clustered else "sessions"
    for a, arm in enumerate(("control", "treatment")):
        n, g = int(res.n_lab[0, a]), int(res.g_lab[0, a])
        n_unl, g_unl = int(res.n_unl[0, a]), int(res.g_unl[0, a])
        g_eff = float(res.g_eff[0, a])
        if clustered and small_sample and g >= MIN_LABELS and g_eff < MIN_LABELS:
            notes.append(
                f"{arm} arm: {g} labeled users, but a few of them give most ratings: they count "
                f"as {g_eff:.1f} effective users (Kish). Intervals use CR2 and t({g_eff - 1:.0f})"
                " quantiles, but with so few effective users their coverage is only "
                "approximate; the randomization test (inference=randomization) stays exact.")
        if min(n, g) < MIN_LABELS:
            who = f"{n} labeled sessions" + (f" from {g} users" if clustered else "")
            fix = ("t quantiles and small-sample corrections are applied but coverage is only "
                   "approximate" if small_sample else
                   "normal quantiles with ddof 0 under-cover at this size; use small_sample=True")
            notes.append(f"{arm} arm: only {who} (< {MIN_LABELS}): {fix}.")
        if small_sample and g < engine.MIN_TUNE_CLUSTERS:
            notes.append(f"{arm} arm: {g} labeled {unit} are too few to tune lambda "
                         f"(< {engine.MIN_TUNE_CLUSTERS}); its augmented estimate is the naive "
                         "one.")
        few_users = clustered and g_unl < MIN_UNLABELED_USERS
        if n_unl < MIN_UNLABELED or few_users:
            src = f" from {g_unl} user(s)" if clustered else ""
            notes.append(
                f"{arm} arm: only {n_unl} unlabeled session(s){src}: the variance of their mean "
                "is taken from the pooled (labeled and unlabeled) predictions, so lambda stays "
                "small and the predictions can barely narrow the interval.")
    return notes


def compare_arms(
    y_c: ArrayLike,
    f_c: ArrayLike,
    f_unl_c: ArrayLike,
    y_t: ArrayLike,
    f_t: ArrayLike,
    f_unl_t: ArrayLike,
    alpha: float = 0.05,
    clusters_c: ArrayLike | None = None,
    clusters_t: ArrayLike | None = None,
    clusters_unl_c: ArrayLike | None = None,
    clusters_unl_t: ArrayLike | None = None,
    *,
    w_c: ArrayLike | None = None,
    w_t: ArrayLike | None = None,
    small_sample: bool = True,
    lam_mode: str = "joint",
    cr2: bool = True,
    lambda_noise: bool = True,
) -> ArmComparison:
    """Compare treatment with control: naive and PPI++ effect with intervals.

    Formulas: see the module docstring and :func:`pulse_ml.stats.effect_engine.solve`. When any
    cluster argument is given the variances are cluster-robust by user; samples whose cluster
    argument is ``None`` are one cluster per session. Integer cluster codes are much faster than
    strings to factorize.

    Args:
        y_c: Control ratings of labeled sessions, shape (n_c,).
        f_c: Predictions for those sessions (honest: out-of-fold), shape (n_c,).
        f_unl_c: Predictions for unlabeled control sessions, shape (N_c,).
        y_t: Treatment ratings, shape (n_t,).
        f_t: Predictions for labeled treatment sessions, shape (n_t,).
        f_unl_t: Predictions for unlabeled treatment sessions, shape (N_t,).
        alpha: Error level of the two-sided intervals.
        clusters_c: Cluster (user) ids of the labeled control sessions.
        clusters_t: Cluster ids of the labeled treatment sessions.
        clusters_unl_c: Cluster ids of the unlabeled control sessions.
        clusters_unl_t: Cluster ids of the unlabeled treatment sessions.
        w_c: Weights of the labeled control sessions (e.g. inverse labeling propensities from
            :func:`pulse_ml.stats.propensity.crossfit_propensity`); switches to shift-aware
            PPI++ (see module docstring). Missing weights of the other arm are 1.
        w_t: Weights of the labeled treatment sessions.
        small_sample: Apply the small-sample rules (default). ``False`` gives the asymptotic
            formulas (ddof 0, normal quantiles); with ``lam_mode="per_arm"`` and neither
            clusters nor weights they equal ppi_py exactly.
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
    yc, fc, fuc = _arm_arrays(y_c, f_c, f_unl_c, "c")
    yt, ft, fut = _arm_arrays(y_t, f_t, f_unl_t, "t")
    keys = [clusters_c, clusters_unl_c, clusters_t, clusters_unl_t]
    clustered = any(k is not None for k in keys)
    weighted = w_c is not None or w_t is not None
    names = ["clusters_c", "clusters_unl_c", "clusters_t", "clusters_unl_t"]
    sizes = [yc.size, fuc.size, yt.size, fut.size]
    # Unlabeled samples without cluster ids are one cluster per session: session_moments
    # takes them in two passes without codes (an arange of 10^6 codes costs more than that).
    singleton = (clusters_unl_c is None, clusters_unl_t is None)
    code_sizes = [0 if single else n for single, n in
                  zip((False, singleton[0], False, singleton[1]), sizes, strict=True)]
    (cl_c, cu_c, cl_t, cu_t), n_codes = cluster_codes(keys, code_sizes, names)
    _refuse(yc, cl_c, clusters_c, "control")
    _refuse(yt, cl_t, clusters_t, "treatment")
    if not (small_sample or clustered or weighted) and lam_mode == "per_arm":
        return _legacy_iid(yc, fc, fuc, yt, ft, fut, alpha)
    wc, wt = _weights(w_c, yc.size, "w_c"), _weights(w_t, yt.size, "w_t")
    # Center by constants common to both arms: effects are unchanged, sums lose cancellation.
    cy, cf = float(np.concatenate([yc, yt]).mean()), float(np.concatenate([fc, ft]).mean())
    arms = [
        (cl, (y - cy)[None], (f - cf)[None], w[None], cu, fu[None] if single else (fu - cf)[None])
        for cl, y, f, w, cu, fu, single in ((cl_c, yc, fc, wc, cu_c, fuc, singleton[0]),
                                            (cl_t, yt, ft, wt, cu_t, fut, singleton[1]))
    ]
    cr2 = cr2 and small_sample
    res = engine.solve(
        session_moments(arms, n_codes, singleton, unl_shift=cf, cr2=cr2),
        weighted=weighted, small_sample=small_sample, lam_mode=lam_mode, clustered=clustered,
        alpha=alpha, cr2=cr2,
        lab_z=(labeled_cluster_lin(arms, n_codes, singleton, cr2=cr2)
               if small_sample and lambda_noise else None),
        kish=kish_sums(arms, n_codes) if cr2 else None)
    _refuse_degenerate(res, clustered)
    q_n, q_a = engine.quantile(alpha, res.naive_df)[0], engine.quantile(alpha, res.aug_df)[0]
    naive = _estimate(res.naive_effect[0], res.naive_se[0], q_n, res.naive_df[0])
    augmented = _estimate(res.aug_effect[0], res.aug_se[0], q_a, res.aug_df[0])
    reduction = (100.0 * (1.0 - augmented.width / naive.width) if naive.width > 0
                 else float("nan"))
    notes = _notes(res, clustered, small_sample)
    shift = res.pred_shift[0]
    z_shift = np.abs(shift) / np.maximum(res.pred_shift_se[0], 1e-300)
    flagged = bool(small_sample and np.any((z_shift >= SHIFT_NOTE_Z)
                                           & (np.abs(shift) >= SHIFT_NOTE_SE * res.naive_se[0])))
    if flagged:
        noise = float(np.sqrt(res.lambda_noise_var[0]))
        notes.append(
            f"raters differ from non-raters in what the model sees: unlabeled minus labeled "
            f"mean prediction is {shift[0]:+.3f} (control) and {shift[1]:+.3f} (treatment), "
            f"up to {np.abs(shift).max() / res.naive_se[0]:.1f}x the effect's naive s.e. The "
            f"augmented interval includes lambda's own noise from that shift (s.e. "
            f"{noise:.3g}); if who rates depends on the features, reweight=true corrects the "
            "estimate itself.")
    if reduction < -1e-9:
        notes.append(f"the augmented interval is {-reduction:.1f}% wider than the naive one: "
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


@dataclass(frozen=True)
class BatchComparison:
    """Many comparisons of the same design at once (arrays of shape (R,), per arm (R, 2)).

    Attributes:
        naive_effect: Naive effects.
        naive_lower: Lower ends of the naive intervals.
        naive_upper: Upper ends of the naive intervals.
        naive_se: Naive standard errors.
        aug_effect: Augmented effects.
        aug_lower: Lower ends of the augmented intervals.
        aug_upper: Upper ends of the augmented intervals.
        aug_se: Augmented standard errors.
        aug_se_in_sample: Augmented s.e. before the lambda-tuning inflation.
        ci_reduction_pct: ``100 (1 - width_aug / width_naive)``.
        lam: Lambdas, control first, shape (R, 2).
        result: The full engine output.
    """

    naive_effect: NDArray[np.float64]
    naive_lower: NDArray[np.float64]
    naive_upper: NDArray[np.float64]
    naive_se: NDArray[np.float64]
    aug_effect: NDArray[np.float64]
    aug_lower: NDArray[np.float64]
    aug_upper: NDArray[np.float64]
    aug_se: NDArray[np.float64]
    aug_se_in_sample: NDArray[np.float64]
    ci_reduction_pct: NDArray[np.float64]
    lam: NDArray[np.float64]
    result: engine.EngineResult


def compare_batch(
    y_c: ArrayLike,
    f_c: ArrayLike,
    f_unl_c: ArrayLike,
    y_t: ArrayLike,
    f_t: ArrayLike,
    f_unl_t: ArrayLike,
    alpha: float = 0.05,
    clusters_c: ArrayLike | None = None,
    clusters_t: ArrayLike | None = None,
    clusters_unl_c: ArrayLike | None = None,
    clusters_unl_t: ArrayLike | None = None,
    *,
    w_c: ArrayLike | None = None,
    w_t: ArrayLike | None = None,
    small_sample: bool = True,
    lam_mode: str = "joint",
    cr2: bool = True,
    lambda_noise: bool = True,
) -> BatchComparison:
    """:func:`compare_arms` for R data sets of one design in one vectorized pass.

    The value arrays have shape (R, n) (a 1-D array is one data set); cluster ids are shared by
    the R data sets, shape (n,). No refusals or warnings: rows that :func:`compare_arms` would
    refuse come out as NaN or zero-width. Meant for simulations (coverage, power, benchmarks).

    Args:
        y_c: Control ratings, shape (R, n_c).
        f_c: Control predictions of labeled sessions, shape (R, n_c).
        f_unl_c: Control predictions of unlabeled sessions, shape (R, N_c).
        y_t: Treatment ratings, shape (R, n_t).
        f_t: Treatment predictions of labeled sessions, shape (R, n_t).
        f_unl_t: Treatment predictions of unlabeled sessions, shape (R, N_t).
        alpha: Error level.
        clusters_c: Cluster ids of the labeled control sessions, shape (n_c,).
        clusters_t: Cluster ids of the labeled treatment sessions.
        clusters_unl_c: Cluster ids of the unlabeled control sessions.
        clusters_unl_t: Cluster ids of the unlabeled treatment sessions.
        w_c: Labeled control weights, shape (R, n_c) or (n_c,).
        w_t: Labeled treatment weights.
        small_sample: As in :func:`compare_arms`.
        lam_mode: As in :func:`compare_arms`.
        cr2: As in :func:`compare_arms`.
        lambda_noise: As in :func:`compare_arms`.

    Returns:
        The batch of comparisons.
    """
    vals = [np.atleast_2d(np.asarray(v, dtype=np.float64)) for v in
            (y_c, f_c, f_unl_c, y_t, f_t, f_unl_t)]
    yc, fc, fuc, yt, ft, fut = vals
    keys = [clusters_c, clusters_unl_c, clusters_t, clusters_unl_t]
    names = ["clusters_c", "clusters_unl_c", "clusters_t", "clusters_unl_t"]
    sizes = [yc.shape[1], fuc.shape[1], yt.shape[1], fut.shape[1]]
    (cl_c, cu_c, cl_t, cu_t), n_codes = cluster_codes(keys, sizes, names)
    weighted = w_c is not None or w_t is not None
    wc = np.broadcast_to(np.ones(1) if w_c is None else np.asarray(w_c, float), yc.shape)
    wt = np.broadcast_to(np.ones(1) if w_t is None else np.asarray(w_t, float), yt.shape)
    cy = np.concatenate([yc, yt], axis=1).mean(axis=1, keepdims=True)
    cf = np.concatenate([fc, ft], axis=1).mean(axis=1, keepdims=True)
    arms = [(cl_c, yc - cy, fc - cf, wc, cu_c, fuc - cf),
            (cl_t, yt - cy, ft - cf, wt, cu_t, fut - cf)]
    res = _solve_in_chunks(arms, n_codes, cr2 and small_sample, lambda_noise and small_sample,
                           weighted=weighted, small_sample=small_sample, lam_mode=lam_mode,
                           clustered=any(k is not None for k in keys), alpha=alpha)
    q_n, q_a = engine.quantile(alpha, res.naive_df), engine.quantile(alpha, res.aug_df)
    w_n, w_a = 2 * q_n * res.naive_se, 2 * q_a * res.aug_se
    return BatchComparison(
        naive_effect=res.naive_effect, naive_lower=res.naive_effect - q_n * res.naive_se,
        naive_upper=res.naive_effect + q_n * res.naive_se, naive_se=res.naive_se,
        aug_effect=res.aug_effect, aug_lower=res.aug_effect - q_a * res.aug_se,
        aug_upper=res.aug_effect + q_a * res.aug_se, aug_se=res.aug_se,
        aug_se_in_sample=res.aug_se_in_sample,
        ci_reduction_pct=100.0 * (1.0 - np.divide(w_a, w_n, out=np.full_like(w_a, np.nan),
                                                  where=w_n > 0)),
        lam=res.lam, result=res,
    )


def _solve_in_chunks(arms: list[tuple], n_codes: int, cr2: bool, noise: bool,
                     **opts) -> engine.EngineResult:
    """:func:`engine.solve` over chunks of replications, concatenated.

    The per-cluster sums of the lambda-noise term take R x G_L x 16 values.
    """
    r = arms[0][1].shape[0]
    g_lab = np.unique(np.concatenate([arms[0][0], arms[1][0]])).size
    step = max(1, 2_000_000 // max(16 * g_lab, 1))
    parts = []
    for start in range(0, r, step):
        sub = [(cl, y[start:start + step], f[start:start + step], w[start:start + step], cu,
                fu[start:start + step]) for cl, y, f, w, cu, fu in arms]
        parts.append(engine.solve(
            session_moments(sub, n_codes, cr2=cr2), cr2=cr2,
            lab_z=labeled_cluster_lin(sub, n_codes, cr2=cr2) if noise else None,
            kish=kish_sums(sub, n_codes) if cr2 else None, **opts))
    if len(parts) == 1:
        return parts[0]
    return engine.EngineResult(*(np.concatenate([getattr(p, f.name) for p in parts])
                                 for f in fields(engine.EngineResult)))
