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
    _quad,
    _ratio,
    _welch_df,
    p_value,
    quantile,
)
from pulse_ml.stats.lambda_noise import NoiseSums, lambda_noise_sums

__all__ = ["MIN_TUNE_CLUSTERS", "EngineResult", "p_value", "quantile", "solve"]

MIN_TUNE_CLUSTERS = 4  # a tuned lambda costs up to 2 df of the labeled clusters (see solve)
_I = cm.RAW_INDEX
_L = cm.LIN_INDEX
_K = len(cm.LIN)
SHRINK_GRID = np.linspace(0.0, 1.0, 21)  # shares of the tuned lambdas tried (see solve)

Array = NDArray[np.float64]


def _arm_vectors(
    mom: Moments, a: int, weighted: bool, small_sample: bool, clustered: bool, cr2: bool = False
) -> dict[str, Array]:
    """Influence coefficient vectors (over both arms' linear sums) and scalars of arm ``a``."""
    tot = mom.tot[:, a, :]
    r = tot.shape[0]
    n, w_sum, n_unl = tot[:, _I["m"]], tot[:, _I["sw"]], tot[:, _I["mu"]]
    big_m = n + n_unl
    ybar = _ratio(tot[:, _I["swy"]], w_sum)
    fbar_w = _ratio(tot[:, _I["swf"]], w_sum)
    fu_bar = _ratio(tot[:, _I["su"]], n_unl)
    f_all = _ratio(tot[:, _I["sf"]] + tot[:, _I["su"]], big_m)
    g_lab, g_unl, g_all = mom.g_lab[:, a], mom.g_unl[:, a], mom.g_all[:, a]
    if cr2:  # the CR2 factors are in the Gram matrix already
        k_lab = k_unl = k_all = np.ones(r)
    elif small_sample:
        k_lab, k_unl, k_all = _cr(g_lab, 1.0), _cr(g_unl, 1.0), _cr(g_all, 1.0)
    elif clustered:
        k_lab = k_unl = k_all = _cr(g_lab, 1.0)
    else:
        k_lab = k_unl = k_all = np.ones(r)
    o = a * _K
    vec_a, vec_b, vec_u = np.zeros((r, 2 * _K)), np.zeros((r, 2 * _K)), np.zeros((r, 2 * _K))
    vec_a[:, o + _L["swy"]] = _ratio(1.0, w_sum)
    vec_a[:, o + _L["sw"]] = -_ratio(ybar, w_sum)
    vec_b[:, o + _L["swf"]] = _ratio(1.0, w_sum)
    vec_b[:, o + _L["sw"]] = -_ratio(fbar_w, w_sum)
    if weighted:  # all-session mean of f: centered at the pooled mean, no floor needed
        for col in ("sf", "su"):
            vec_u[:, o + _L[col]] = _ratio(1.0, big_m)
        for col in ("m", "mu"):
            vec_u[:, o + _L[col]] = -_ratio(f_all, big_m)
        k_second, shift = k_all, f_all - fbar_w
    else:
        vec_u[:, o + _L["su"]] = _ratio(1.0, n_unl)
        vec_u[:, o + _L["mu"]] = -_ratio(fu_bar, n_unl)
        k_second, shift = k_unl, fu_bar - fbar_w
    alpha = np.sqrt(k_lab)[:, None] * vec_a
    delta = -np.sqrt(k_lab)[:, None] * vec_b + np.sqrt(k_second)[:, None] * vec_u
    floor = np.zeros(r)
    if small_sample and not weighted:
        floor = _pooled_floor(mom, a, k_unl * _quad(vec_u, mom.gram, vec_u), clustered)
    sy, syy = tot[:, _I["sy"]], tot[:, _I["syy"]]
    rating_var = _ratio(syy - _ratio(sy**2, n), n - 1.0)
    return {
        "alpha": alpha, "delta": delta, "floor": floor, "ybar": ybar, "shift": shift,
        "n": n, "n_unl": n_unl, "g_lab": g_lab, "g_unl": g_unl, "rating_var": rating_var,
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
    gram = mom.gram
    arms = [_arm_vectors(mom, a, weighted, small_sample, clustered, cr2) for a in (0, 1)]
    c, t = arms
    r = c["alpha"].shape[0]
    ub = []
    for arm in arms:
        can = (arm["n_unl"] > 0) & (arm["n"] > 0)
        if small_sample:
            can &= arm["g_lab"] >= MIN_TUNE_CLUSTERS
        ub.append(can.astype(float))
    # share of the control's variance estimated from the labeled clusters (1 without floor)
    s_dd = np.stack([_quad(arm["delta"], gram, arm["delta"]) for arm in arms], 1)
    floors = np.stack([arm["floor"] for arm in arms], 1)
    h_full = _ratio(s_dd, s_dd + floors)
    g_lab = np.stack([c["g_lab"], t["g_lab"]], axis=1)
    g_eff, g_eff_effect = _effective_clusters(mom, kish)
    cap = np.minimum(mom.g_lab_union, g_eff_effect) - 2.0

    vecs = np.stack([c["alpha"], c["delta"], t["alpha"], t["delta"]], axis=1)
    basis = np.einsum("rak,rkl,rbl->rab", vecs, gram, vecs)  # 4 x 4 Gram of the influence parts
    cc = _quad(c["delta"], gram, c["delta"]) + c["floor"]
    tt = _quad(t["delta"], gram, t["delta"]) + t["floor"]
    tc = -_quad(t["delta"], gram, c["delta"])

    def evaluate(lam: Array, frac: Array, noise_var: Array, rows: NDArray[np.intp]
                 ) -> dict[str, Array]:
        """Printed variances and df of M candidate lambdas (``rows``: their data sets).

        A lambda shrunk to ``frac`` of the tuned one carries ``frac`` of its in-sample optimism
        (first order), so the inflation and the df loss use ``h * frac``; ``noise_var`` is the
        lambda-noise variance at that share.
        """
        m = rows.size
        lost = np.where(lam > 0, h_full[rows] * frac[:, None], 0.0)
        infl = np.ones((m, 2))
        if small_sample:
            gl = g_lab[rows]
            infl = np.where(lam > 0, _ratio(gl - 1.0, gl - 1.0 - 2.0 * lost), 1.0)
        # psi_a = alpha_a + lam_a delta_a in the basis (alpha_c, delta_c, alpha_t, delta_t)
        zeros, ones = np.zeros(m), np.ones(m)
        psi0 = [np.stack([ones, lam[:, 0], zeros, zeros], 1),
                np.stack([zeros, zeros, ones, lam[:, 1]], 1)]
        psi = [np.sqrt(infl[:, a])[:, None] * psi0[a] for a in (0, 1)]
        bas = basis[rows]
        floor_part = lam**2 * floors[rows]
        v_arm = np.stack([_quad(psi[a], bas, psi[a]) for a in (0, 1)], 1) + infl * floor_part
        d_aug, d0 = psi[1] - psi[0], psi0[1] - psi0[0]
        noise_var = noise_var * infl.mean(axis=1)
        out = {"lam": lam, "lost": lost, "v_arm": v_arm, "shrink": frac,
               "v": _quad(d_aug, bas, d_aug) + (infl * floor_part).sum(axis=1) + noise_var,
               "v_in": _quad(d0, bas, d0) + floor_part.sum(axis=1), "noise_var": noise_var}
        out["df"] = (_welch_df(v_arm, g_eff[rows] - 1.0 - lost, cap[rows] - lost.sum(axis=1))
                     if small_sample else np.full(m, np.inf))
        return out

    def box() -> Array:
        """Joint lambdas minimizing the in-sample variance of the effect."""
        r_vec = t["alpha"] - c["alpha"]
        s = {"rt": _quad(t["delta"], gram, r_vec), "rc": -_quad(c["delta"], gram, r_vec),
             "tt": tt, "cc": cc, "tc": tc}
        lam_t, lam_c = _box_ls(s, ub[1], ub[0])
        return np.stack([lam_c, lam_t], axis=1)

    def noise_sums(lam: Array, mode: str) -> NoiseSums | None:
        """Lambda-noise sums at the fitted lambdas (control first), or None without ``lab_z``.

        ``mode``: "joint" (two lambdas, one least squares on the effect), "per_arm" (each arm
        its own) or "common" (one lambda for both arms).
        """
        if lab_z is None or not small_sample:
            return None
        al_c, de_c, al_t, de_t = c["alpha"], c["delta"], t["alpha"], t["delta"]
        grad = np.stack([-c["shift"], t["shift"]], axis=1)
        ubs = np.stack(ub, axis=1)
        if mode == "common":
            d = de_t - de_c
            effect = np.stack([al_t - al_c, d], axis=1)
            resid = (al_t - al_c + lam[:, :1] * d)[:, None]
            a_mat = (tt + cc + 2 * tc)[:, None, None]
            free = (lam[:, :1] > 1e-9) & (lam[:, :1] < ubs.min(axis=1, keepdims=True) - 1e-9)
            return lambda_noise_sums(lab_z, effect, d[:, None], resid, lam[:, :1], a_mat, free,
                                     grad.sum(axis=1, keepdims=True))
        effect = np.stack([al_t - al_c, -de_c, de_t], axis=1)
        if mode == "joint":
            dirs = effect[:, 1:]
            resid = al_t - al_c - lam[:, :1] * de_c + lam[:, 1:] * de_t
            resid = np.stack([resid, resid], axis=1)
            a_mat = np.stack([np.stack([cc, tc], -1), np.stack([tc, tt], -1)], -2)
        else:
            dirs = np.stack([de_c, de_t], axis=1)
            resid = np.stack([al_c + lam[:, :1] * de_c, al_t + lam[:, 1:] * de_t], axis=1)
            a_mat = np.stack([np.stack([cc, 0 * cc], -1), np.stack([0 * tt, tt], -1)], -2)
        free = (lam > 1e-9) & (lam < ubs - 1e-9)
        return lambda_noise_sums(lab_z, effect, dirs, resid, lam, a_mat, free, grad)

    def common() -> Array:
        """One lambda for both arms minimizing the in-sample variance of the effect."""
        r_vec = t["alpha"] - c["alpha"]
        b = _quad(t["delta"], gram, r_vec) - _quad(c["delta"], gram, r_vec)
        lam = _clip_min(b, tt + cc + 2 * tc, np.minimum(ub[0], ub[1]))
        return np.stack([lam, lam], axis=1)

    def noise_at(noise: NoiseSums | None, frac: float) -> Array:
        return np.zeros(r) if noise is None else np.maximum(noise.extra(frac), 0.0)

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
        lams, fracs, noise_vars = [], [], []
        grid = SHRINK_GRID[:, None]  # all shares at once: (len(SHRINK_GRID), R) per family
        for lam_star, mode in ((box(), "joint"), (common(), "common")):
            noise = noise_sums(lam_star, mode)
            lams.append((grid[:, :, None] * lam_star[None]).reshape(-1, 2))
            fracs.append(np.repeat(SHRINK_GRID, r))
            noise_vars.append(np.zeros(grid.size * r) if noise is None
                              else np.maximum(noise.extra(grid), 0.0).ravel())
        n_cand = 2 * SHRINK_GRID.size
        cand = evaluate(np.concatenate(lams), np.concatenate(fracs), np.concatenate(noise_vars),
                        np.tile(every, n_cand))
        width = (quantile(alpha, cand["df"])
                 * np.sqrt(np.maximum(cand["v"], 0.0))).reshape(n_cand, r)
        idx = np.argmin(width, axis=0) * r + every  # first minimum: ties keep the smaller lambda
        pick = {k: v[idx] for k, v in cand.items()}
    else:
        if lam_mode == "joint":
            lam, mode = box(), "joint"
        elif not (small_sample or clustered or weighted):  # ppi_py's pooled-variance lambda
            lam = np.stack([_ppi_py_lambda(mom, a) * ub[a] for a in (0, 1)], axis=1)
            mode = "per_arm"
        else:
            lam = np.stack([
                _clip_min(_quad(arm["delta"], gram, arm["alpha"]),
                          _quad(arm["delta"], gram, arm["delta"]) + arm["floor"], ub[a])
                for a, arm in enumerate(arms)
            ], axis=1)
            mode = "per_arm"
        pick = evaluate(lam, np.ones(r), noise_at(noise_sums(lam, mode), 1.0), every)
    lam, lost, v_aug_arm, v_aug, v_in = (pick[k] for k in ("lam", "lost", "v_arm", "v", "v_in"))
    v_naive_arm = np.stack([_quad(arm["alpha"], gram, arm["alpha"]) for arm in arms], 1)
    dn = t["alpha"] - c["alpha"]
    v_naive = _quad(dn, gram, dn)
    mean_naive = np.stack([c["ybar"], t["ybar"]], 1)
    mean_aug = mean_naive + lam * np.stack([c["shift"], t["shift"]], 1)
    df_naive = (_welch_df(v_naive_arm, g_eff - 1.0, cap) if small_sample
                else np.full(r, np.inf))
    df_aug = pick["df"]
    return EngineResult(
        naive_effect=mean_naive[:, 1] - mean_naive[:, 0],
        naive_se=np.sqrt(np.maximum(v_naive, 0.0)),
        naive_df=df_naive,
        aug_effect=mean_aug[:, 1] - mean_aug[:, 0],
        aug_se=np.sqrt(np.maximum(v_aug, 0.0)),
        aug_df=df_aug,
        aug_se_in_sample=np.sqrt(np.maximum(v_in, 0.0)),
        mean_naive=mean_naive,
        mean_aug=mean_aug,
        se_naive_arm=np.sqrt(np.maximum(v_naive_arm, 0.0)),
        se_aug_arm=np.sqrt(np.maximum(v_aug_arm, 0.0)),
        lam=lam,
        n_lab=np.stack([c["n"], t["n"]], 1),
        n_unl=np.stack([c["n_unl"], t["n_unl"]], 1),
        g_lab=np.stack([c["g_lab"], t["g_lab"]], 1),
        g_unl=np.stack([c["g_unl"], t["g_unl"]], 1),
        g_lab_union=mom.g_lab_union,
        g_any=mom.g_any,
        rating_var=np.stack([c["rating_var"], t["rating_var"]], 1),
        tuned=lost,
        pooled_floor=np.stack([c["floor"], t["floor"]], 1),
        shrink=np.asarray(pick["shrink"], dtype=float),
        lambda_noise_var=pick["noise_var"],
        g_eff=g_eff,
        pred_shift=np.stack([c["shift"], t["shift"]], 1),
        pred_shift_se=np.sqrt(np.maximum(s_dd, 0.0)),
    )
