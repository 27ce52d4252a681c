"""Active PPI++: sessions asked to rate with a known probability ``request_prob`` (pi).

A rated session of a case study asked by probability carries the weight ``1 / (pi r)`` in the
weighted PPI++ estimator of :func:`pulse_ml.stats.effect_engine.solve`
(``mu(lam) = ybar_w + lam (mean of f over ALL sessions - fbar_w)``, Hajek-normalized): the rated
sessions are a pi-sampled subset of all sessions, thinned by non-response ``r`` (asked but not
answered). The table does not say who was asked, only who answered, so ``r(x)`` is estimated by
maximum likelihood from ``P(rated | x) = pi(x) r(x)`` with ``r`` logistic in the features
(``pi`` known), cross-fitted with folds that keep a user's sessions together: no session's
weight comes from a model that saw it. Inverse probability weighting with known design
probabilities is Zrnic & Candès' active inference; the response model is the usual two-phase
(design x response) weighting of survey sampling.

References:
    T. Zrnic, E. J. Candès. Active statistical inference. ICML 2024.
    C.-E. Särndal, B. Swensson, J. Wretman. Model Assisted Survey Sampling, ch. 15 (two-phase
    sampling, response homogeneity), 1992.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from pulse_ml.errors import PulseError
from pulse_ml.inference.arm_data import ArmData
from pulse_ml.sessions.case_studies import CaseStudy
from pulse_ml.sessions.request_prob import REQUEST_PROB
from pulse_ml.sessions.table import SessionTable

__all__ = ["active_arms", "active_weights", "features_matter", "fit_response", "response_design",
           "response_probability"]

RESPONSE_CLIP = 0.05  # estimated response rates below 5% are clipped (weights stay bounded)
# One-sided 1% test of "everyone asked answered": rated count vs the sum of request_prob (its
# Poisson-binomial s.d.). Above it r = 1: a response model fitted at the boundary r <= 1 finds
# feature "effects" in noise (ConvAI2 replay: +13% width with no non-response at all).
NO_RESPONSE_Z = -2.326


def fit_response(x: NDArray, rated: NDArray, pi: NDArray, c: float) -> NDArray:
    """Coefficients (intercept first) of the logistic response model under P = pi r.

    Args:
        x: Features (n, p), standardized (ranks); p = 0 fits one response rate.
        rated: Whether each session has a rating.
        pi: The probability each session was asked.
        c: Inverse L2 strength on the slopes (the intercept is not penalized).

    Returns:
        The maximum-penalized-likelihood coefficients, shape (p + 1,).
    """
    from scipy.optimize import minimize
    from scipy.special import expit
    from threadpoolctl import threadpool_limits

    xi = np.column_stack([np.ones(len(x)), x])
    share = float(np.clip(rated.mean() / max(pi.mean(), 1e-12), 0.05, 0.95))
    b0 = np.zeros(xi.shape[1])
    b0[0] = np.log(share / (1.0 - share))
    pen = np.r_[0.0, np.full(x.shape[1], 1.0 / c)]

    def loss(b: NDArray) -> tuple[float, NDArray]:
        r = expit(xi @ b)
        p = np.clip(pi * r, 1e-12, 1.0 - 1e-12)
        nll = -(rated * np.log(p) + (~rated) * np.log1p(-p)).sum()
        g_eta = np.where(rated, 1.0 - r, -pi * r * (1.0 - r) / (1.0 - p))
        return (nll + 0.5 * (pen * b * b).sum()) / len(x), (-(xi.T @ g_eta) + pen * b) / len(x)

    # one BLAS thread: a multi-threaded BLAS makes each small L-BFGS step ~10x slower on a
    # loaded machine (the monitor's per-look fits and infer's cross-fitting alike)
    with threadpool_limits(limits=1, user_api="blas"):
        return minimize(loss, b0, jac=True, method="L-BFGS-B").x


def _log_lik(x: NDArray, rated: NDArray, pi: NDArray, beta: NDArray) -> float:
    from scipy.special import expit

    r = expit(beta[0] + x @ beta[1:])
    p = np.clip(pi * r, 1e-12, 1.0 - 1e-12)
    return float((rated * np.log(p) + (~rated) * np.log1p(-p)).sum())


def features_matter(x: NDArray, rated: NDArray, pi: NDArray, level: float = 0.01) -> bool:
    """Likelihood-ratio test: does answering depend on the features (vs one response rate)?

    Without evidence of it, a constant response rate is used: a constant cancels in the
    Hajek-normalized weights, so no noise of a feature model enters them. Level 1%: with no
    non-response the constraint ``r <= 1`` makes the statistic larger than chi-square (a
    feature region without a rating raises the likelihood), and a false alarm costs width
    (USS replay: +6.5% at 5%).
    """
    from scipy.stats import chi2

    if x.shape[1] == 0:
        return False
    full = fit_response(x, rated, pi, c=1e6)
    const = fit_response(x[:, :0], rated, pi, c=1e6)
    stat = 2.0 * (_log_lik(x, rated, pi, full) - _log_lik(x[:, :0], rated, pi, const))
    return bool(chi2.sf(max(stat, 0.0), x.shape[1]) < level)


def response_probability(x: NDArray, rated: NDArray, pi: NDArray, groups: NDArray,
                         *, folds: int = 5, seed: int = 0, c: float = 1.0) -> NDArray:
    """Cross-fitted P(answered | asked, x), from who rated and the known asking probabilities.

    Args:
        x: Feature matrix of every session, shape (n, p) (numeric; categories one-hot); each
            column enters as its ranks (robust to heavy tails).
        rated: Whether each session has a rating, shape (n,).
        pi: The probability each session was asked (``request_prob``), shape (n,).
        groups: User codes: folds keep a user's sessions together.
        folds: Cross-fitting folds (fewer when there are fewer users).
        seed: Seed of the fold assignment.
        c: Inverse L2 strength of the logistic model (on standardized features).

    Returns:
        The response probability of every session, clipped to [:data:`RESPONSE_CLIP`, 1]; 1
        when the rated count is not significantly below the expected asks
        (:data:`NO_RESPONSE_Z`); one rate for all when a likelihood-ratio test
        (:func:`features_matter`, on the whole case study) finds no dependence on the features.
    """
    from scipy.special import expit
    from scipy.stats import rankdata
    from sklearn.model_selection import GroupKFold

    x = np.asarray(x, float)
    x = x[:, x.std(axis=0) > 0]
    # ranks scaled to unit variance: a heavy-tailed count cannot push a few sessions' response
    # rate to the clip (their weights would dominate the interval)
    x = (rankdata(x, axis=0) / len(x) - 0.5) * np.sqrt(12.0)
    rated = np.asarray(rated, bool)
    expected = float(pi.sum())  # asked on average; without non-response all of them answer
    z = (rated.sum() - expected) / np.sqrt(max(float((pi * (1 - pi)).sum()), 1e-12))
    if z > NO_RESPONSE_Z:  # no evidence that anyone asked did not answer: r = 1
        return np.ones(len(x))
    if not features_matter(x, rated, pi):  # one response rate: a constant cancels in the
        b0 = fit_response(x[:, :0], rated, pi, c=1.0)[0]  # (Hajek-normalized) weights
        return np.full(len(x), np.clip(expit(b0), RESPONSE_CLIP, 1.0))
    k = min(folds, np.unique(groups).size)
    out = np.empty(len(x))
    if k < 2:
        raise PulseError("request_prob: the response model needs sessions of at least 2 users")
    perm = np.random.default_rng(seed).permutation(np.unique(groups))
    shuffled = pd.Series(np.arange(perm.size), index=perm).reindex(groups).to_numpy()
    for train, test in GroupKFold(k).split(x, rated, shuffled):
        beta = fit_response(x[train], rated[train], pi[train], c)
        out[test] = expit(beta[0] + x[test] @ beta[1:])
    return np.clip(out, RESPONSE_CLIP, 1.0)


def active_weights(x: NDArray, rated: NDArray, pi: NDArray, groups: NDArray, *,
                   seed: int = 0) -> tuple[NDArray, NDArray]:
    """Weights ``1 / (pi r_hat)`` of the rated sessions (in order) and every session's r_hat."""
    r_hat = response_probability(x, rated, pi, groups, seed=seed)
    return 1.0 / (pi[rated] * r_hat[rated]), r_hat


def response_design(table: SessionTable, in_study: NDArray, treated: NDArray) -> NDArray:
    """The response model's features of the rows ``in_study`` (file order), and the arm.

    Args:
        table: The session table.
        in_study: Rows of the case study.
        treated: Per row of the case study, whether it is in the treatment arm.

    Returns:
        Numeric, count, flag and numeric features with categories one-hot, then the arm (0/1).
    """
    cols = table.features.of_kind("categorical", "count", "flag", "numeric")
    sub = table.frame.loc[in_study, cols]
    x = pd.get_dummies(sub, columns=table.features.of_kind("categorical"), dtype=float)
    return np.column_stack([x.to_numpy(float), treated.astype(float)])


def active_arms(table: SessionTable, study: CaseStudy, control: ArmData, treatment: ArmData,
                codes: NDArray, seed: int) -> tuple[ArmData, ArmData, tuple[str, ...]] | None:
    """Arms weighted by ``1 / (request_prob r_hat)``, and per-arm notes; None when uniform.

    A case study whose ``request_prob`` is the same for every session of each arm was asked
    uniformly: it is analysed exactly as a table without the column (None).
    """
    frame = table.frame
    rows = [((frame["case_study"] == study.name) & (frame["condition"] == cond)).to_numpy()
            for cond in (study.control, study.treatment)]
    pi_all = frame[REQUEST_PROB].to_numpy(float)
    if all(np.ptp(pi_all[m]) <= 1e-12 * pi_all[m].max() for m in rows):
        return None
    in_study = rows[0] | rows[1]
    pi, rated = pi_all[in_study], table.labeled[in_study]
    x = response_design(table, in_study, rows[1][in_study])
    try:
        _, r_hat = active_weights(x, rated, pi, codes[in_study], seed=seed)
    except (PulseError, ValueError) as exc:
        raise PulseError(f"{table.path}: case study '{study.name}': request_prob: {exc}. Leave "
                         "it out with case_studies=[...].") from exc
    out, notes = [], []
    for role, cond, mask, arm in (("control", study.control, rows[0], control),
                                  ("treatment", study.treatment, rows[1], treatment)):
        local = mask[in_study]
        lab = rated & local
        w = 1.0 / (pi[lab] * r_hat[lab])
        out.append(replace(arm, arm=replace(arm.arm, w=w)))
        asked = float(pi[local].sum())
        answered = int(lab.sum())
        notes.append(f"{role} arm '{cond}': asked by request_prob, {answered} rated of "
                     f"~{asked:.0f} expected asked (sum of request_prob); estimated response "
                     f"{100 * float(np.mean(r_hat[local])):.0f}% (cross-fitted by user), "
                     f"weights 1/(request_prob x response) from {w.min():.1f} to {w.max():.1f}")
    return out[0], out[1], tuple(notes)
