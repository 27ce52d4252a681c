"""The audit's two checks on independent halves: a variance check and a bias check.

Why the classic split-half check (:func:`pulse_ml.stats.split_half.split_half_audit`: the
method on half A against a *naive* estimate on half B) flags valid strong-predictor analyses:
its pass rate is computed over splits of ONE data set, and given the data ``D_A - D_B`` is not
centred at 0 but near ``m = D_aug - D_naive`` of the full data. Under a valid analysis ``m`` is
noise of variance about ``Var(naive) - Var(aug)`` (Hausman), i.e. a share ``~rho^2`` of the
naive variance: with a strong predictor (r ~ 0.85) a data set where the two estimates happen to
differ by 2 of their s.e. has a pass rate of ~0.85 whatever the number of splits, and the
binomial test over splits (whose error is that of the splits only) calls it "too narrow". No
tolerance fixes that: the data-level spread of the rate grows with rho. (A second, smaller
cause: the naive half B is a small-sample interval of its own.)

A third cause: each half tunes its own lambda on half the labels, so the half estimates move
with lambda's noise in a way the tuned-lambda variance allows only on average, and the pass
rate still varies between data sets with the offset removed (strong-predictor simulations of
``tests/stats/audit_sims.py``: s.d. of the like-with-like rate over data sets 0.023-0.029 with a
lambda per half, 0.008-0.012 with the full data's lambda held fixed).

The fix separates what the classic check mixes and holds lambda fixed:

* **Variance check** (like with like): the method on half A against the SAME method on half B
  (halves share no user, and no unlabeled session either), both with the analysis' own
  lambdas of the full data held fixed (:func:`full_lambda`; the engine is called once, for
  lambda only). Each half is then a linear estimator ``ybar_w + lam (mean f_unl - fbar_w)``
  whose cluster-robust (CR1, clusters = users, or sessions for ``*_iid`` methods) variance
  and ``t(G - 1)`` are computed here from per-cluster sums -- the audit does not rely on the
  exact variance formulas of the engine, only on its clusters and lambda. By symmetry
  ``E[D_A - D_B | data] = 0``, and over random splits ``D_A - D_B`` varies like two
  independent replications of the analysis, so a valid clustering passes ``|D_A - D_B| <= t
  sqrt(se_A^2 + se_B^2)`` in about 1 - alpha of the splits on every data set; intervals whose
  clusters are wrong (i.i.d. intervals on clustered data) fail. Verdict: the one-sided
  binomial test of :func:`pulse_ml.stats.split_half.verdict`. A callable method runs as is on
  both halves (its own lambda per half).
* **Bias check** (Hausman with an empirical variance): the gap ``c = D_method - D_naive`` on the
  same half; ``gap = mean over splits of (c_A + c_B) / 2`` and its variance is estimated by the
  random-groups (half-sample) estimator ``mean of ((c_A - c_B) / 2)^2`` -- for a linear
  statistic and balanced random halves exactly the ddof-1 variance of the full-data gap, and it
  uses no variance formula at all (a too-narrow s.e. cannot make it lenient). A method whose
  estimate is pulled away from the naive one (predictions fitted on the labels they rectify, a
  labeled/unlabeled prediction shift) fails ``|gap| <= t_{df} se``; df = labeled units of the
  smaller arm - 1. It sees a bias about as well as the data see the effect itself: a leak that
  pulls the estimate 80% of the way to arm-blind predictions is seen when the effect is.

Each check runs at half the level (Bonferroni); either flag makes "too narrow". With fewer than
``min_units`` labeled users per arm in a half the variance check cannot tell; the bias check
still runs from :data:`MIN_BIAS_UNITS` labeled users per arm, and :attr:`HalvesAudit.checks`
says which check remains meaningful, what gap it can see and how many labeled users the other
needs.

References:
    J. A. Hausman. Specification tests in econometrics. Econometrica 46(6), 1978.
    K. M. Wolter. Introduction to Variance Estimation, 2nd ed. Springer, 2007 (random groups
    and half-samples).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from numpy.typing import NDArray
from scipy.stats import t as student_t

from pulse_ml.stats import cluster_moments as cm
from pulse_ml.stats import effect_engine as engine
from pulse_ml.stats import half_moments as hm
from pulse_ml.stats import split_half as sh
from pulse_ml.stats.arm_inputs import Arm
from pulse_ml.stats.ppi import z_two_sided

__all__ = ["BiasCheck", "HalvesAudit", "audit_halves"]

MIN_BIAS_UNITS = 4  # labeled units per arm for the bias check (two per half, df >= 3)


@dataclass(frozen=True)
class BiasCheck:
    """The augmented-vs-naive gap against its half-sample standard error.

    Attributes:
        gap: Mean over splits of ``(c_A + c_B) / 2``, ``c = D_method - D_naive`` on a half.
        se: Half-sample standard error of ``gap`` (``sqrt(mean ((c_A - c_B) / 2)^2)``).
        df: Degrees of freedom of its t reference (labeled units of the smaller arm - 1).
        p_value: Two-sided p-value of ``gap / se``.
        flagged: ``p_value < level``.
        detectable: Gap the check sees with 80% power at ``level``.
        level: Level of the check.
    """

    gap: float
    se: float
    df: float
    p_value: float
    flagged: bool
    detectable: float
    level: float


@dataclass(frozen=True)
class HalvesAudit:
    """Result of :func:`audit_halves`.

    Attributes:
        variance: The like-with-like split-half check (:class:`SplitHalfAudit`; half B runs the
            same method; per_replication also has gap_a, gap_b = method - naive per half).
        bias: The bias check (None for the naive method or when it cannot run).
        verdict: ``"valid"``, ``"too narrow"`` or ``"inconclusive"``.
        reason: One sentence behind the verdict.
        checks: One sentence per check: what it can tell on this study (and, when it cannot,
            how many labeled users it needs).
    """

    variance: sh.SplitHalfAudit
    bias: BiasCheck | None
    verdict: str
    reason: str
    checks: tuple[str, ...]


def _units(arms: list[dict], clusters: bool) -> tuple[list, list, NDArray[np.intp]]:
    """Split units: users (strata: where they have labels), or every session (by arm, labeled)."""
    if clusters:
        return hm.split_units(arms, True)
    sizes = [arms[0]["y"].size, arms[1]["y"].size, arms[0]["fu"].size, arms[1]["fu"].size]
    starts = np.concatenate([[0], np.cumsum(sizes)])
    codes = [starts[i] + np.arange(sizes[i]) for i in range(4)]
    strata = np.repeat(np.arange(1, 5, dtype=np.intp), sizes)
    return codes[:2], codes[2:], strata


def _builtin_halves(arms, clustered, mask, units, opts) -> list[dict]:
    """Engine results of both halves (each half tunes its own lambda): the callable path."""
    base, diff = hm.unit_diffs(arms, clustered, units[0], units[1], mask.shape[1], "sessions")
    out = []
    for half in (mask, ~mask):
        res = engine.solve(hm.masked(base, diff, half), clustered=clustered, **opts)
        ok = (res.g_lab >= 2).all(axis=1) & (res.rating_var > 0).all(axis=1)
        out.append({"aug": (res.aug_effect, res.aug_se, res.aug_df),
                    "naive": (res.naive_effect, res.naive_se, res.naive_df), "ok": ok})
    return out


def full_lambda(arms: list[dict], clustered: bool, units: tuple, n_units: int,
                opts: dict) -> NDArray[np.float64]:
    """The analysis' own lambdas (control, treatment) on all the data (engine, one solve).

    All units in = all sessions in: their moments directly (``units``, ``n_units`` unused).
    """
    del units, n_units
    lab_codes, unl_codes, n_codes = hm.variance_codes(arms, clustered)
    data = [(cl, arm["y"][None], arm["f"][None], arm["w"][None], cu, arm["fu"][None])
            for arm, cl, cu in zip(arms, lab_codes, unl_codes, strict=True)]
    res = engine.solve(cm.session_moments(data, n_codes), clustered=clustered, **opts)
    return res.lam[0]


def _per_unit(z: NDArray, unit_of: NDArray, n_units: int) -> NDArray:
    """Sums over the variance clusters of each split unit: (clusters, k) -> (units, k)."""
    keep = unit_of >= 0
    per = np.zeros((n_units, z.shape[1]))
    np.add.at(per, unit_of[keep], z[keep])
    return per


def _fixed_lambda_halves(arms: list[dict], clustered: bool, mask: NDArray[np.bool_],
                         units: tuple, lam: NDArray, weighted: bool) -> list[dict]:
    """Both halves of every split with the full data's lambdas held fixed (linear estimators).

    Per arm ``mu = A/B + lam C/E`` with ``A = sum w (y - lam f)``, ``B = sum w`` over labeled
    sessions and ``(C, E)`` = (sum, count) of the unlabeled predictions (weighted: of all the
    arm's predictions); its cluster-robust variance ``G/(G-1) sum_g psi_g^2`` (G: labeled
    clusters of the half, psi_g over both arms) and ``t(G_arm - 1)``, the smaller arm's.
    Per-cluster totals and their outer products add over the split units, so every half is a
    few matrix products.
    """
    lab_codes, unl_codes, n_codes = hm.variance_codes(arms, clustered)
    unit_of = np.full(n_codes, -1)
    for codes, unit in zip(lab_codes + unl_codes, list(units[0]) + list(units[1]), strict=True):
        unit_of[codes] = unit
    n_units = mask.shape[1]
    z, has = [], np.zeros((n_codes, 2))
    for a, arm in enumerate(arms):
        y, f, w, fu = arm["y"], arm["f"], arm["w"], arm["fu"]
        zero, one = np.zeros(fu.size), np.ones(fu.size)
        values = np.concatenate([
            np.column_stack([w * (y - lam[a] * f), w, f * weighted, np.full(y.size, weighted,
                                                                            float), w * y]),
            np.column_stack([zero, zero, fu, one, zero])])
        codes = np.concatenate([lab_codes[a], unl_codes[a]])
        z.append(np.stack([np.bincount(codes, v, n_codes) for v in values.T], axis=1))
        has[lab_codes[a], a] = 1.0
    z8 = np.concatenate([z[0][:, :4], z[1][:, :4]], axis=1)  # (A, B, C, E) of both arms
    cols = [_per_unit(z[a], unit_of, n_units) for a in (0, 1)]
    gram8 = _per_unit((z8[:, :, None] * z8[:, None, :]).reshape(n_codes, 64), unit_of, n_units)
    cnts = _per_unit(np.column_stack([has, has.max(axis=1)]), unit_of, n_units)
    per_unit = np.concatenate([cols[0], cols[1], gram8, cnts], axis=1)
    # Half A's sums (B's: the rest); units without a label multiply only their nonzero columns
    labeled, rest = np.flatnonzero(cnts[:, 2] > 0), np.flatnonzero(cnts[:, 2] == 0)
    nonzero = np.flatnonzero(np.any(per_unit[rest] != 0, axis=0))
    half_a = hm.mask_products(mask, per_unit[labeled], labeled)
    half_a[:, nonzero] += hm.mask_products(mask, per_unit[rest][:, nonzero], rest)
    out = []
    for sums in (half_a, per_unit.sum(axis=0) - half_a):
        tot = [sums[:, :5], sums[:, 5:10]]
        gram = sums[:, 10:74].reshape(-1, 8, 8)
        counts = sums[:, 74:]
        g_arm, g = counts[:, :2], counts[:, 2]
        b = np.zeros((mask.shape[0], 8))
        est, est0 = np.zeros(mask.shape[0]), np.zeros(mask.shape[0])
        ok = (g_arm >= 2).all(axis=1)
        for a, sign in ((0, -1.0), (1, 1.0)):
            t = tot[a]
            big_a, big_b, big_c, big_e, a0 = (t[:, j] for j in range(5))
            mu1 = np.divide(big_a, big_b, out=np.zeros_like(big_a), where=big_b > 0)
            mu2 = np.divide(big_c, big_e, out=np.zeros_like(big_c), where=big_e > 0)
            ok &= (big_b > 0) & ((big_e > 0) | (lam[a] == 0))
            inv_b = np.divide(1.0, big_b, out=np.zeros_like(big_b), where=big_b > 0)
            inv_e = np.divide(1.0, big_e, out=np.zeros_like(big_e), where=big_e > 0)
            o = 4 * a
            b[:, o], b[:, o + 1] = sign * inv_b, -sign * mu1 * inv_b
            b[:, o + 2], b[:, o + 3] = sign * lam[a] * inv_e, -sign * lam[a] * mu2 * inv_e
            est += sign * (mu1 + lam[a] * mu2)
            est0 += sign * np.divide(a0, big_b, out=np.zeros_like(a0), where=big_b > 0)
        var = np.einsum("rk,rkl,rl->r", b, gram, b) * np.divide(
            g, g - 1.0, out=np.zeros_like(g), where=g > 1)
        df = np.maximum(g_arm.min(axis=1) - 1.0, 1.0)
        out.append({"method": (est, np.sqrt(np.maximum(var, 0.0)), df),
                    "naive": (est0, None, None), "ok": ok & (var > 0)})
    return out


def _passes(a: tuple, b: tuple, alpha: float) -> NDArray[np.bool_]:
    """``|D_A - D_B| <= t_{df} sqrt(se_A^2 + se_B^2)`` with Welch-Satterthwaite df."""
    (d_a, se_a, df_a), (d_b, se_b, df_b) = a, b
    var = se_a**2 + se_b**2
    den = np.divide(se_a**4, df_a, out=np.zeros_like(se_a), where=np.isfinite(df_a)) + \
        np.divide(se_b**4, df_b, out=np.zeros_like(se_b), where=np.isfinite(df_b))
    df = np.divide(var**2, den, out=np.full_like(var, np.inf), where=den > 0)
    return np.abs(d_a - d_b) <= student_t.ppf(1 - alpha / 2, df) * np.sqrt(var)


def _bias(c_a: NDArray, c_b: NDArray, df: float, level: float) -> BiasCheck:
    gap = float(np.mean((c_a + c_b) / 2.0))
    se = float(np.sqrt(np.mean(((c_a - c_b) / 2.0) ** 2)))
    if not se > 0:  # the method equals naive on every half (lambda 0): nothing to test
        return BiasCheck(gap, se, df, 1.0, False, float("nan"), level)
    p = float(2.0 * student_t.sf(abs(gap) / se, df))
    detectable = float((student_t.ppf(1 - level / 2, df) + student_t.ppf(0.8, df)) * se)
    return BiasCheck(gap, se, df, p, p < level, detectable, level)


def audit_halves(
    control: Arm,
    treatment: Arm,
    *,
    clusters: bool = True,
    method: sh.Method = "augmented",
    alpha: float = 0.05,
    replications: int = 1000,
    seed: int = 0,
    tolerance: float = 0.02,
    small_sample: bool = True,
    lam_mode: str = "joint",
    min_units: int = 10,
    level: float = 0.05,
) -> HalvesAudit:
    """Variance check and bias check of an analysis on random halves (module docstring).

    Args:
        control: Control arm (:class:`~pulse_ml.stats.arm_inputs.Arm`, user ids required).
        treatment: Treatment arm; user ids shared with the control arm.
        clusters: Split users (True) or single sessions (False; unlabeled sessions are split
            too, so the halves are independent).
        method: A name of :data:`~pulse_ml.stats.split_half.METHODS` or a callable
            ``method(control_half, treatment_half) -> (effect, se[, df])`` (run on both halves).
        alpha: Level of the audited intervals.
        replications: Random splits (equal halves, balanced within strata).
        seed: Seed of the splits.
        tolerance: Allowed shortfall of the variance check's pass rate below 1 - alpha.
        small_sample: Small-sample rules of the built-in methods.
        lam_mode: Lambda choice of the built-in augmented methods.
        min_units: Fewest labeled units per arm and half for a conclusive variance check.
        level: Overall level; each check runs at ``level / 2``.

    Returns:
        The audit.

    Raises:
        ValueError: Unknown method, or a cluster-robust method with ``clusters=False``.
    """
    z_two_sided(alpha)
    if isinstance(method, str) and method not in sh.METHODS:
        raise ValueError(f"method must be one of {sorted(sh.METHODS)} or a callable, got "
                         f"{method!r}")
    arms, shift = hm.prepare_arms(control, treatment)
    weighted = any(not np.all(arm["w"] == 1.0) for arm in arms)
    unit_l, unit_u, strata = _units(arms, clusters)
    units = (unit_l, unit_u)
    mask = hm.random_halves(np.random.default_rng(seed), strata, replications)
    naive_opts = {"weighted": weighted, "small_sample": True, "alpha": alpha}
    checks_pre: list[str] = []
    if callable(method):
        name, is_naive = getattr(method, "__name__", "callable"), False
        halves = _builtin_halves(arms, clusters, mask, units, naive_opts)
        for half, m in zip(halves, (mask, ~mask), strict=True):
            d, se, df, ok = sh.callable_half(method, arms, shift, m, units, True)
            half["method"], half["ok"] = (d, se, df), half["ok"] & ok
    else:
        name = method
        augmented, clustered = sh.METHODS[method]
        clustered = clusters if clustered is None else clustered
        if clustered and not clusters:
            raise ValueError(f"method {method!r} is cluster-robust: audit it with clusters=True "
                             "(a session split would put one user's labels in both halves)")
        is_naive = not augmented
        lam = np.zeros(2)
        if augmented:
            lam = full_lambda(arms, clustered, units, strata.size, {
                **naive_opts, "small_sample": small_sample, "lam_mode": lam_mode})
            if not lam.any():
                checks_pre.append("bias check: the analysis uses lambda = 0 on these data (its "
                                  "PPI++ estimate is the naive one): no bias from the "
                                  "predictions to check")
                is_naive = True
        halves = _fixed_lambda_halves(arms, clustered, mask, units, lam, weighted)
    a, b = halves
    ok = a["ok"] & b["ok"] & (a["method"][1] > 0) & (b["method"][1] > 0)
    passed = _passes(a["method"], b["method"], alpha) & ok
    total, k = int(ok.sum()), int(passed.sum())
    units_half = tuple(int(min(mask[:, np.unique(u)].sum(axis=1).min(),
                               (~mask[:, np.unique(u)]).sum(axis=1).min())) for u in unit_l)
    labeled = tuple(int(np.unique(u).size) for u in unit_l)
    label, p, reason = sh.verdict(k, total, alpha, tolerance, level / 2)
    kind = "users" if clusters else "sessions"
    checks = []
    if min(units_half) < min_units:
        label = "inconclusive"
        need = max(0, 2 * min_units - min(labeled))
        reason = (f"only {min(units_half)} labeled {kind} per arm in a half (< {min_units}): "
                  "too few for the variance check to tell")
        checks.append(f"variance check (same method on both halves): not meaningful with "
                      f"{min(labeled)} labeled {kind} in the smaller arm; it needs >= "
                      f"{2 * min_units} per arm ({need} more)")
    else:
        checks.append(f"variance check (same method on both halves): pass rate {k / total:.3f}"
                      f" over {total} splits -> {label}" if total else
                      "variance check: no split had two usable halves")
    rate = k / total if total else float("nan")
    gap_a = a["method"][0] - a["naive"][0]
    gap_b = b["method"][0] - b["naive"][0]
    variance = sh.SplitHalfAudit(
        method=name, clusters=clusters, rate=rate,
        mc_se=float(np.sqrt(rate * (1 - rate) / total)) if total else float("nan"),
        verdict=label, reason=reason, target=1.0 - alpha - tolerance, p_value=p,
        replications=total, requested=replications, units_per_half=units_half, alpha=alpha,
        tolerance=tolerance,
        per_replication=pd.DataFrame({
            "delta_a": a["method"][0], "se_a": a["method"][1], "df_a": a["method"][2],
            "delta_b": b["method"][0], "se_b": b["method"][1], "df_b": b["method"][2],
            "gap_a": gap_a, "gap_b": gap_b, "passed": passed}),
        share=0.5, level=level / 2)
    bias = None
    if is_naive:
        pass
    elif min(labeled) < MIN_BIAS_UNITS or total == 0:
        checks.append(f"bias check (method vs naive on the same half): not meaningful with "
                      f"{min(labeled)} labeled {kind} in the smaller arm; it needs >= "
                      f"{MIN_BIAS_UNITS}")
    else:
        bias = _bias(gap_a[ok], gap_b[ok], float(min(labeled) - 1), level / 2)
        checks.append(
            f"bias check (method vs naive on the same half, half-sample s.e., df "
            f"{bias.df:g}): gap {bias.gap:+.4f} ± {bias.se:.4f} (p = {bias.p_value:.2g}); it "
            f"sees a gap of {bias.detectable:.3g} or more with 80% power")
    verdict_, why = _combine(variance, bias)
    return HalvesAudit(variance, bias, verdict_, why, tuple(checks + checks_pre))


def _combine(variance: sh.SplitHalfAudit, bias: BiasCheck | None) -> tuple[str, str]:
    """Either check flagged -> too narrow; the variance check valid and no bias -> valid."""
    flags = []
    if variance.verdict == "too narrow":
        flags.append("variance check: " + variance.reason)
    if bias is not None and bias.flagged:
        flags.append(f"bias check: the estimate differs from the naive one on the same users "
                     f"by {bias.gap:+.4f} (half-sample s.e. {bias.se:.4f}, p = "
                     f"{bias.p_value:.2g}): predictions fitted on these labels, or labeled "
                     "sessions predicted differently from unlabeled ones")
    if flags:
        return "too narrow", "; ".join(flags)
    if variance.verdict == "valid":
        return "valid", "variance check: " + variance.reason + (
            "" if bias is None else f"; bias check: gap {bias.gap:+.4f} within its s.e. "
            f"{bias.se:.4f}")
    tail = ("" if bias is None else f"; the bias check ran and found no bias (it sees gaps of "
            f"{bias.detectable:.3g} or more)" if math.isfinite(bias.detectable) else "")
    return "inconclusive", "variance check: " + variance.reason + tail
