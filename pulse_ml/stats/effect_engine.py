"""Vectorized engine behind :func:`~pulse_ml.stats.arm_effect.compare_arms` and the audits.

Every number of an arm comparison is a function of the additive per-cluster statistics of
:mod:`pulse_ml.stats.cluster_moments` (totals, the Gram matrix of per-cluster sums, cluster
counts, an ANOVA of the predictions). :func:`solve` turns a batch of them (leading axis R:
replications of an audit or simulated data sets) into estimates, standard errors, degrees of
freedom and lambdas in one numpy pass.

Estimator (per arm; ``w`` = labeled weights, all 1 unless shift-aware):

* unweighted (PPI++ of ppi_py): ``mu(lam) = ybar_w + lam (mean f~ - fbar_w)``;
* weighted: ``mu(lam) = ybar_w + lam (mean of f over ALL sessions - fbar_w)``: the all-session
  mean of the predictions is unbiased for the arm's population when labels are missing at random
  given features, the unlabeled mean alone is not.

Influence contributions summed per cluster g give ``alpha_g + lam delta_g`` (labeled block scaled
by ``sqrt(kL)``, unlabeled block by ``sqrt(kU)``, see :func:`solve`); the effect's variance is
``sum_g (psi_t,g - psi_c,g)^2`` so a user seen in both arms contributes a covariance.

References:
    A. N. Angelopoulos, J. C. Duchi, T. Zrnic. PPI++: Efficient prediction-powered inference.
    arXiv:2311.01453, 2023.
    A. C. Cameron, D. L. Miller. A practitioner's guide to cluster-robust inference. Journal of
    Human Resources 50(2), 2015 (CR1 factor, t(G-1) reference).
    S. S. Lavenberg, P. D. Welch. A perspective on the use of control variables to increase the
    efficiency of Monte Carlo simulations. Management Science 27(3), 1981 (variance loss
    (n-2)/(n-3) and t(n-2) for one estimated control coefficient).
    B. L. Welch. The generalization of "Student's" problem when several different population
    variances are involved. Biometrika 34, 1947 (Satterthwaite-Welch df).
    R. M. Bell, D. F. McCaffrey. Bias reduction in standard errors for linear regression with
    multi-stage samples. Survey Methodology 28(2), 2002 (CR2, effective-cluster dfs).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from pulse_ml.stats import cluster_moments as cm
from pulse_ml.stats.cluster_moments import Moments
from pulse_ml.stats.engine_parts import (  # noqa: F401  (EngineResult, quantile, p_value)
    EngineResult,
    _box_ls,
    _clip_min,
    _cr,
    _effective_clusters,
    _pooled_floor,
    _ppi_py_lambda,
    _ratio,
    _welch_df,
    p_value,
    quantile,
    stack1,
)
from pulse_ml.stats.lambda_noise import NoiseSums, lambda_noise_sums

__all__ = ["MIN_TUNE_CLUSTERS", "EngineResult", "p_value", "quantile", "solve"]

MIN_TUNE_CLUSTERS = 4  # a tuned lambda costs up to 2 df of the labeled clusters (see solve)
_I = cm.RAW_INDEX
_L = cm.LIN_INDEX
_K = len(cm.LIN)
SHRINK_GRID = np.linspace(0.0, 1.0, 21)  # shares of the tuned lambdas tried (see solve)
_GRID_TWICE = np.concatenate([SHRINK_GRID, SHRINK_GRID])  # the shares of both families
_SIGN = np.array([-1.0, 1.0])  # an arm's sign in the effect (treatment - control)

Array = NDArray[np.float64]


_ARMS = np.arange(2)
_COL = {name: _ARMS * _K + i for name, i in _L.items()}  # each arm's column of a LIN sum
# rows of the quadratic-form matrix of solve (see _influence)
_AC, _DC, _AT, _DT, _DN = range(5)  # alpha_c, delta_c, alpha_t, delta_t, alpha_t - alpha_c
_U = np.array([5, 6])  # each arm's unlabeled-mean vector (the pooled floor's empirical variance)
_AA, _DD = np.array([_AC, _AT]), np.array([_DC, _DT])  # per arm (index arrays made once)
_REAL_ONE = np.array([[True, False], [False, False]])  # A of a one-lambda fit, padded to 2x2
# lambda-noise fits (see noise_sums) on the basis (alpha_c, alpha_t, delta_c, delta_t): rows
# effect at lambda 0, fitted part (lambdas filled in), directions (2), residuals (2)
_NAIVE = [-1.0, 1.0, 0.0, 0.0]
_COEF = {"joint": np.array([_NAIVE, [0] * 4, [0, 0, -1, 0], [0, 0, 0, 1], _NAIVE, _NAIVE]),
         "common": np.array([_NAIVE, [0] * 4, [0, 0, -1, 1], [0] * 4, _NAIVE, [0] * 4]),
         "per_arm": np.array([_NAIVE, [0] * 4, [0, 0, 1, 0], [0, 0, 0, 1], [1, 0, 0, 0],
                              [0, 1, 0, 0]], dtype=float)}


def _influence(
    mom: Moments, weighted: bool, small_sample: bool, clustered: bool, cr2: bool = False
) -> dict[str, Array]:
    """Influence vectors of both arms, their quadratic forms and per-arm scalars.

    Returns:
        ``alpha``, ``delta``: coefficient vectors over both arms' linear sums, shape (R, 2, 2K)
        (control first); ``quad``: the Gram-matrix quadratic forms of the vectors
        (alpha_c, delta_c, alpha_t, delta_t, alpha_t - alpha_c, unlabeled mean c, t), shape
        (R, 7, 7), all in one pair of matrix products; per-arm scalars of shape (R, 2).
    """
    tot = mom.tot
    r = tot.shape[0]
    n, w_sum, n_unl = tot[..., _I["m"]], tot[..., _I["sw"]], tot[..., _I["mu"]]
    big_m = n + n_unl
    ybar = _ratio(tot[..., _I["swy"]], w_sum)
    fbar_w = _ratio(tot[..., _I["swf"]], w_sum)
    fu_bar = _ratio(tot[..., _I["su"]], n_unl)
    f_all = _ratio(tot[..., _I["sf"]] + tot[..., _I["su"]], big_m)
    if cr2:  # the CR2 factors are in the Gram matrix already
        k_lab = k_unl = k_all = np.ones((r, 2))
    elif small_sample:
        k_lab, k_unl, k_all = _cr(mom.g_lab, 1.0), _cr(mom.g_unl, 1.0), _cr(mom.g_all, 1.0)
    elif clustered:
        k_lab = k_unl = k_all = _cr(mom.g_lab, 1.0)
    else:
        k_lab = k_unl = k_all = np.ones((r, 2))
    vec_a, vec_b, vec_u = np.zeros((3, r, 2, 2 * _K))
    inv_w = _ratio(1.0, w_sum)
    vec_a[:, _ARMS, _COL["swy"]] = inv_w
    vec_a[:, _ARMS, _COL["sw"]] = -_ratio(ybar, w_sum)
    vec_b[:, _ARMS, _COL["swf"]] = inv_w
    vec_b[:, _ARMS, _COL["sw"]] = -_ratio(fbar_w, w_sum)
    if weighted:  # all-session mean of f: centered at the pooled mean, no floor needed
        inv_m, minus = _ratio(1.0, big_m), -_ratio(f_all, big_m)
        vec_u[:, _ARMS, _COL["sf"]] = vec_u[:, _ARMS, _COL["su"]] = inv_m
        vec_u[:, _ARMS, _COL["m"]] = vec_u[:, _ARMS, _COL["mu"]] = minus
        k_second, shift = k_all, f_all - fbar_w
    else:
        vec_u[:, _ARMS, _COL["su"]] = _ratio(1.0, n_unl)
        vec_u[:, _ARMS, _COL["mu"]] = -_ratio(fu_bar, n_unl)
        k_second, shift = k_unl, fu_bar - fbar_w
    root = np.sqrt(k_lab)[..., None]
    alpha = root * vec_a
    delta = -root * vec_b + np.sqrt(k_second)[..., None] * vec_u
    vecs = np.empty((r, 7, 2 * _K))  # rows _AC, _DC, _AT, _DT, _DN, then _U
    vecs[:, 0:4:2], vecs[:, 1:4:2] = alpha, delta
    vecs[:, _DN], vecs[:, 5:] = alpha[:, 1] - alpha[:, 0], vec_u
    quad = np.matmul(np.matmul(vecs, mom.gram), vecs.transpose(0, 2, 1))
    floor = (_pooled_floor(mom, k_unl * quad[:, _U, _U], clustered)
             if small_sample and not weighted else np.zeros((r, 2)))
    sy, syy = tot[..., _I["sy"]], tot[..., _I["syy"]]
    return {
        "alpha": alpha, "delta": delta, "quad": quad, "floor": floor, "ybar": ybar,
        "shift": shift, "n": n, "n_unl": n_unl,
        "rating_var": _ratio(syy - _ratio(sy**2, n), n - 1.0),
    }


def solve(
    mom: Moments,
    weighted: bool = False,
    small_sample: bool = True,
    lam_mode: str = "joint",
    clustered: bool = True,
    alpha: float = 0.05,
    lab_z: Array | None = None,
    cr2: bool = False,
    kish: Array | None = None,
) -> EngineResult:
    """Estimates, standard errors, dfs and lambdas of a batch of comparisons.

    Args:
        mom: Moments of both arms (control = arm 0).
        weighted: Use the shift-aware (all-session prediction mean) estimator.
        small_sample: Apply the small-sample rules below (else: ddof 0 / CR1 with the labeled
            cluster count, normal quantiles, no floor, no tuning inflation).
        lam_mode: ``"joint"``: (lam_c, lam_t) minimize the effect's variance over [0, 1]^2;
            ``"per_arm"``: each arm minimizes its own variance (without small-sample rules,
            clusters or weights: ppi_py's pooled-variance lambda, as ``ppi_mean_ci``).
        clustered: Cluster codes are users (else each session is its own cluster; only changes
            the legacy factors and the pooled intra-user correlation, which is 0 then).
        alpha: Error level whose t quantile enters the width that chooses the lambda share.
        lab_z: Per-cluster linear sums of the clusters with a label
            (:func:`pulse_ml.stats.cluster_moments.labeled_cluster_lin`), shape (R, G_L, 16):
            with the small-sample rules, the tuned lambdas' own noise is added to the variance
            (:mod:`pulse_ml.stats.lambda_noise`). ``None`` leaves it out (audits, legacy).
        cr2: The Gram matrix carries CR2 factors (``session_moments(..., cr2=True)``), so the
            CR1 factors are not applied again.
        kish: Effective labeled cluster counts per arm and of the effect, shape (R, 3)
            (:func:`pulse_ml.stats.cluster_lin.kish_sums`: with the ratings' intra-user
            correlation); ``None`` takes Kish's counts from the (unscaled) Gram matrix.

    Returns:
        The batch of results. Rows where an arm cannot be estimated (fewer than 2 labeled
        clusters, ratings without variance) hold zeros; callers check ``g_lab`` and
        ``rating_var``.

    Notes:
        Small-sample rules (``small_sample=True``), G_L = labeled clusters of the arm:

        * labeled block ``x sqrt(G_L / (G_L - 1))`` (CR1 on labeled users only; for singleton
          clusters exactly ddof = 1), unlabeled block ``x sqrt(G_U / (G_U - 1))``;
        * the unlabeled mean's variance is at least its pooled-prediction value
          (:func:`_pooled_floor`), added as ``lam^2 * floor``;
        * a tuned lambda (> 0) multiplies the arm's augmented variance by
          ``(G_L - 1) / (G_L - 1 - 2 h)`` and lowers its df by ``h``, where
          ``h = s_dd / (s_dd + floor)`` is the share of the control term's variance that is
          estimated from the data (1 with many unlabeled sessions). At h = 1 this is
          Lavenberg & Welch's loss ``(n - 2)/(n - 3)`` of an estimated control coefficient times
          the residual ddof ``(n - 1)/(n - 2)``: the in-sample optimism of the fitted lambda plus
          the variance of lambda itself, each ``h/G`` to first order; with few unlabeled sessions
          lambda is shrunk by the floor and barely random, h ~ 0. Arms with fewer than
          :data:`MIN_TUNE_CLUSTERS` labeled clusters keep lambda = 0;
        * t quantiles: per-arm df ``G*_a - 1`` (naive) or ``G*_a - 1 - h`` (tuned), with G*
          the effective number of labeled clusters (:func:`_effective_clusters`; = n for i.i.d.
          sessions, so the naive interval is Welch's), combined by Welch-Satterthwaite over the
          arm variances and capped at ``G*_effect - 2 - sum h`` (a user with labels in both
          arms counts once).

        Lambda (joint mode with the small-sample rules): the box least squares gives the
        lambdas ``lam*`` that minimize the in-sample variance; the lambdas used are
        ``s * lam*`` with the share ``s`` in :data:`SHRINK_GRID` that minimizes the printed
        width ``t_df * se``, where a share ``s`` costs ``h s`` (inflation and df loss above use
        ``h s``: the in-sample optimism of a shrunk lambda is, to first order, ``s`` times that
        of the tuned one). ``s = 0`` is the naive interval, so the printed augmented interval is
        never wider than the naive one, and a useless predictor gets ``s ~ 0`` (the rule is about
        the positive-part ``1 - 1 / (G r^2)``). The in-sample variance at the lambdas used is
        never above the naive one either; :attr:`EngineResult.aug_se_in_sample` reports it.
        Other modes use ``s = 1``.
    """
    if lam_mode not in ("joint", "per_arm"):
        raise ValueError(f"lam_mode must be 'joint' or 'per_arm', got {lam_mode!r}")
    inf = _influence(mom, weighted, small_sample, clustered, cr2)
    alpha_v, delta_v, q, floors = inf["alpha"], inf["delta"], inf["quad"], inf["floor"]
    r = q.shape[0]
    ub = (inf["n_unl"] > 0) & (inf["n"] > 0)
    if small_sample:
        ub &= mom.g_lab >= MIN_TUNE_CLUSTERS
    ub = ub.astype(float)
    # share of the control's variance estimated from the labeled clusters (1 without floor)
    s_dd = q[:, _DD, _DD]
    h_full = _ratio(s_dd, s_dd + floors)
    g_lab = mom.g_lab
    g_eff, g_eff_effect = _effective_clusters(mom, kish)
    cap = np.minimum(mom.g_lab_union, g_eff_effect) - 2.0
    basis = q[:, :4, :4]  # quadratic forms of (alpha_c, delta_c, alpha_t, delta_t)
    cc, tt = s_dd[:, 0] + floors[:, 0], s_dd[:, 1] + floors[:, 1]
    tc = -q[:, _DT, _DC]

    def evaluate(lam: Array, frac: Array, noise_var: Array, rows: NDArray[np.intp]
                 ) -> dict[str, Array]:
        """Printed variances and df of M candidate lambdas (``rows``: their data sets).

        A lambda shrunk to ``frac`` of the tuned one carries ``frac`` of its in-sample optimism
        (first order), so the inflation and the df loss use ``h * frac``; ``noise_var`` is the
        lambda-noise variance at that share.
        """
        m = rows.size
        tuned = lam > 0
        lost = np.where(tuned, h_full[rows] * frac[:, None], 0.0)
        infl = np.ones((m, 2))
        if small_sample:
            gl = g_lab[rows]
            infl = np.where(tuned, _ratio(gl - 1.0, gl - 1.0 - 2.0 * lost), 1.0)
        # psi_a = alpha_a + lam_a delta_a in the basis (alpha_c, delta_c, alpha_t, delta_t);
        # rows of psi: psi_c, psi_t (inflated), their difference, the uninflated difference
        psi = np.zeros((m, 4, 4))
        psi[:, 3, 0], psi[:, 3, 2] = -1.0, 1.0
        psi[:, 3, 1], psi[:, 3, 3] = -lam[:, 0], lam[:, 1]
        psi[:, 0, :2] = -psi[:, 3, :2]
        psi[:, 1, 2:] = psi[:, 3, 2:]
        psi[:, :2] *= np.sqrt(infl)[..., None]
        psi[:, 2] = psi[:, 1] - psi[:, 0]
        # two steps: a three-operand einsum runs its inner loop along the 4-long axes
        forms = np.einsum("mil,mil->mi", np.matmul(psi, basis[rows]), psi)
        floor_part = lam**2 * floors[rows]
        v_arm = forms[:, :2] + infl * floor_part
        noise_var = noise_var * (np.add.reduce(infl, axis=1) / 2.0)
        out = {"lam": lam, "lost": lost, "v_arm": v_arm, "shrink": frac,
               "v": forms[:, 2] + np.add.reduce(infl * floor_part, axis=1) + noise_var,
               "v_in": forms[:, 3] + np.add.reduce(floor_part, axis=1), "noise_var": noise_var}
        cap_m = cap[rows] - np.add.reduce(lost, axis=1)
        out["df"] = (_welch_df(v_arm, g_eff[rows] - 1.0 - lost, cap_m)
                     if small_sample else np.full(m, np.inf))
        return out

    def box() -> Array:
        """Joint lambdas minimizing the in-sample variance of the effect."""
        s = {"rt": q[:, _DT, _DN], "rc": -q[:, _DC, _DN], "tt": tt, "cc": cc, "tc": tc}
        lam_t, lam_c = _box_ls(s, ub[:, 1], ub[:, 0])
        return stack1([lam_c, lam_t])

    def common() -> Array:
        """One lambda for both arms minimizing the in-sample variance of the effect."""
        b = q[:, _DT, _DN] - q[:, _DC, _DN]
        lam = _clip_min(b, tt + cc + 2 * tc, np.minimum(ub[:, 0], ub[:, 1]))
        return stack1([lam, lam])

    def noise_sums(fits: list[tuple[Array, str]]) -> list[NoiseSums | None]:
        """Lambda-noise sums at fitted lambdas (control first); None without ``lab_z``.

        ``fits``: (lambdas, mode) with mode "joint" (two lambdas, one least squares on the
        effect), "per_arm" (each arm its own) or "common" (one lambda for both arms).
        """
        if lab_z is None or not small_sample:
            return [None] * len(fits)
        grad, n_fit = inf["shift"] * _SIGN, len(fits)  # P = 2 lambdas per fit (common: padded)
        coef = np.empty((r, n_fit, 6, 4))  # on the basis (alpha_c, alpha_t, delta_c, delta_t)
        grads, a_mat = np.zeros((r, n_fit, 2)), np.zeros((r, n_fit, 2, 2))
        free, real = np.zeros((r, n_fit, 2), dtype=bool), np.ones((n_fit, 2, 2), dtype=bool)
        for i, (lam, mode) in enumerate(fits):
            coef[:, i] = _COEF[mode]
            coef[:, i, 1, 2:] = signed = lam * _SIGN  # the fitted part: -lam_c d_c + lam_t d_t
            if mode == "common":
                coef[:, i, 4, 2:] = signed
                grads[:, i, 0] = grad[:, 0] + grad[:, 1]
                a_mat[:, i, 0, 0] = tt + cc + 2 * tc
                free[:, i, 0] = (lam[:, 0] > 1e-9) & (lam[:, 0] < np.minimum(ub[:, 0], ub[:, 1])
                                                      - 1e-9)
                real[i] = _REAL_ONE
                continue
            if mode == "joint":
                coef[:, i, 4, 2:] = coef[:, i, 5, 2:] = signed
                a_mat[:, i, 0, 1] = a_mat[:, i, 1, 0] = tc
            else:
                coef[:, i, 4, 2], coef[:, i, 5, 3] = lam[:, 0], lam[:, 1]
            a_mat[:, i, 0, 0], a_mat[:, i, 1, 1] = cc, tt
            grads[:, i] = grad
            free[:, i] = (lam > 1e-9) & (lam < ub - 1e-9)
        basis = np.concatenate([alpha_v, delta_v], axis=1)
        return lambda_noise_sums(lab_z, basis, coef, a_mat, free, grads, real)

    every = np.arange(r)
    if lam_mode == "joint" and small_sample:
        # The printed width t_df * se includes the tuning inflation, the df loss and lambda's
        # own noise, all growing with lambda, so the tuned lambdas are shrunk by the factor in
        # SHRINK_GRID that minimizes that width: a weak predictor gets lambda ~ 0 and costs ~ 0
        # (positive-part James-Stein-like: the factor is about 1 - 1 / (G r^2)); frac = 0 is
        # the naive interval. Two families of candidates, the joint lambdas and one common
        # lambda: raters who differ from non-raters shift the labeled predictions against the
        # unlabeled ones in both arms alike, and a common lambda cancels that shift in the
        # effect, so its own noise stays second order where the joint pair pays it in full.
        stars = (box(), common())
        noises = noise_sums([(stars[0], "joint"), (stars[1], "common")])
        grid = SHRINK_GRID[:, None]  # all shares at once: (len(SHRINK_GRID), R) per family
        lams = np.concatenate([(grid[:, :, None] * s[None]).reshape(-1, 2) for s in stars])
        noise_vars = np.concatenate([np.zeros(grid.size * r) if noise is None
                                     else np.maximum(noise.extra(grid), 0.0).ravel()
                                     for noise in noises])
        n_cand = 2 * SHRINK_GRID.size
        cand = evaluate(lams, np.repeat(_GRID_TWICE, r), noise_vars,  # np.tile without wrappers
                        np.arange(n_cand * r) % r)
        width = (quantile(alpha, cand["df"])
                 * np.sqrt(np.maximum(cand["v"], 0.0))).reshape(n_cand, r)
        idx = np.argmin(width, axis=0) * r + every  # first minimum: ties keep the smaller lambda
        pick = {k: v[idx] for k, v in cand.items()}
    else:
        if lam_mode == "joint":
            lam, mode = box(), "joint"
        elif not (small_sample or clustered or weighted):  # ppi_py's pooled-variance lambda
            lam = np.stack([_ppi_py_lambda(mom, a) * ub[:, a] for a in (0, 1)], axis=1)
            mode = "per_arm"
        else:
            lam = _clip_min(q[:, _DD, _AA], s_dd + floors, ub)
            mode = "per_arm"
        noise = noise_sums([(lam, mode)])[0]
        pick = evaluate(lam, np.ones(r),
                        np.zeros(r) if noise is None else np.maximum(noise.extra(1.0), 0.0),
                        every)
    lam, lost, v_aug_arm, v_aug, v_in = (pick[k] for k in ("lam", "lost", "v_arm", "v", "v_in"))
    v_naive_arm = q[:, _AA, _AA]
    v_naive = q[:, _DN, _DN]
    mean_naive = inf["ybar"]
    mean_aug = mean_naive + lam * inf["shift"]
    df_naive = (_welch_df(v_naive_arm, g_eff - 1.0, cap) if small_sample
                else np.full(r, np.inf))
    return EngineResult(
        naive_effect=mean_naive[:, 1] - mean_naive[:, 0],
        naive_se=np.sqrt(np.maximum(v_naive, 0.0)),
        naive_df=df_naive,
        aug_effect=mean_aug[:, 1] - mean_aug[:, 0],
        aug_se=np.sqrt(np.maximum(v_aug, 0.0)),
        aug_df=pick["df"],
        aug_se_in_sample=np.sqrt(np.maximum(v_in, 0.0)),
        mean_naive=mean_naive,
        mean_aug=mean_aug,
        se_naive_arm=np.sqrt(np.maximum(v_naive_arm, 0.0)),
        se_aug_arm=np.sqrt(np.maximum(v_aug_arm, 0.0)),
        lam=lam,
        n_lab=inf["n"],
        n_unl=inf["n_unl"],
        g_lab=g_lab,
        g_unl=mom.g_unl,
        g_lab_union=mom.g_lab_union,
        g_any=mom.g_any,
        rating_var=inf["rating_var"],
        tuned=lost,
        pooled_floor=floors,
        shrink=np.asarray(pick["shrink"], dtype=float),
        lambda_noise_var=pick["noise_var"],
        g_eff=g_eff,
        pred_shift=inf["shift"],
        pred_shift_se=np.sqrt(np.maximum(s_dd, 0.0)),
    )
