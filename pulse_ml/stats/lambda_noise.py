"""The tuned lambda's own noise in the variance of a PPI++ effect.

Per arm the estimate is ``mu_a(lam) = ybar_a + lam_a D_a`` with ``D_a`` the difference between
the unlabeled (or all-session) and the labeled prediction means. With lambda estimated from the
same data, ``mu_a(lam_hat) = mu_a(lam) + (lam_hat_a - lam_a) D_a + ...``. Without label shift
``D_a`` is O(n^-1/2) and the extra term is second order (the tuning inflation of
:func:`pulse_ml.stats.effect_engine.solve` covers its in-sample optimism). When raters differ from
non-raters in something the predictor uses, ``D_a`` is O(1) and the term is first order: the
standardized shift of the predictions, squared, is the relative variance it adds (a shift of 0.6
s.d. adds 36%, coverage 0.91 instead of 0.95). The delta method adds it to the influence of each
cluster g:

    psi_g  ->  psi_g + sum_p (dEffect / dlam_p) IF_g(lam_p),
    IF_g(lam) = -A^{-1} d_g e_g          (M-estimator of a least-squares lambda),

where ``A`` is the normal-equation matrix of the lambda fit, ``d_g`` the cluster's influence in
the fitted directions and ``e_g`` its residual at the fitted lambda. Coordinates clipped at a
bound of the box are fixed (zero influence). For a lambda shrunk to the share ``s`` of the fitted
one the term scales with ``s``.

References:
    A. N. Angelopoulos, J. C. Duchi, T. Zrnic. PPI++: Efficient prediction-powered inference.
    arXiv:2311.01453, 2023 (lambda's estimation is asymptotically negligible only when the
    labeled and unlabeled predictions share one distribution).
    A. W. van der Vaart. Asymptotic Statistics, ch. 5 (influence functions of M-estimators).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

__all__ = ["NoiseSums", "lambda_noise_sums"]

Array = NDArray[np.float64]
_EYE = (np.eye(1)[None], np.eye(2)[None])  # identity of a fit with P = 1 or 2 lambdas


@dataclass(frozen=True)
class NoiseSums:
    """Sums giving the added variance ``2 s s1 + s^2 (2 s2 + s3)`` at a lambda share ``s``.

    Attributes:
        s1: ``sum_g r_g k_g`` (r_g: cluster's effect influence at lambda 0; k_g: its lambda-noise
            influence on the effect), shape (R,).
        s2: ``sum_g fit_g k_g`` (fit_g: the fitted lambdas' part of the influence), shape (R,).
        s3: ``sum_g k_g^2``, shape (R,).
    """

    s1: Array
    s2: Array
    s3: Array

    def extra(self, share: Array | float) -> Array:
        """Added variance at the lambda share(s) ``share`` (not clipped)."""
        return 2 * share * self.s1 + share**2 * (2 * self.s2 + self.s3)


def lambda_noise_sums(z: Array, fits: list[tuple]) -> list[NoiseSums]:
    """Per-cluster delta-method sums of the lambda-noise term of one or more lambda fits.

    Each fit is a tuple ``(effect_vecs, dir_vecs, resid_vecs, lam, gram_a, free, grad)``; with
    ``K`` linear sums per cluster and ``P`` lambdas of that fit:

    * ``effect_vecs``: effect influence vectors, shape (R, 1 + P, K): at lambda 0 first, then
      the change per unit of each lambda;
    * ``dir_vecs``: influence vectors ``d_p`` of the directions each lambda was fitted in,
      shape (R, P, K);
    * ``resid_vecs``: influence vectors ``e_p`` of the residual each lambda's fit minimizes, at
      the fitted lambdas, shape (R, P, K) (the same row for a joint fit);
    * ``lam``: fitted lambdas, shape (R, P); ``gram_a``: normal-equation matrices ``A``, shape
      (R, P, P); ``free``: coordinates strictly inside their bounds, shape (R, P);
    * ``grad``: ``dEffect / dlam_p`` (the prediction-mean differences, signed), shape (R, P).

    Args:
        z: Per-cluster linear sums, shape (R, G, K), read once for all fits.
        fits: The fits.

    Returns:
        The sums of each fit, in order.
    """
    vecs = [v for fit in fits for v in fit[:3]]
    # (R, G, sum of 1 + 3P); einsum, not matmul: BLAS would wake threads that spin on CPU time
    proj = np.einsum("rgk,rjk->rgj", z, np.concatenate(vecs, 1))
    out, start = [], 0
    for _, _, _, lam, gram_a, free, grad in fits:
        p = lam.shape[1]
        eff = proj[..., start : start + 1 + p]  # (R, G, 1 + P)
        d_g = proj[..., start + 1 + p : start + 1 + 2 * p]
        e_g = proj[..., start + 1 + 2 * p : start + 1 + 3 * p]
        start += 1 + 3 * p
        r_g, fit_g = eff[..., 0], np.einsum("rgp,rp->rg", eff[..., 1:], lam)
        eye = _EYE[p - 1] if p <= len(_EYE) else np.eye(p)[None]
        mask = free[:, :, None] & free[:, None, :]
        a_free = np.where(mask, gram_a, 0.0) + np.where(free[:, :, None], 0.0, eye)
        scale = np.maximum.reduce(np.abs(a_free).reshape(-1, p * p), axis=1)[:, None, None]
        a_free = a_free + 1e-12 * np.where(scale > 0, scale, 1.0) * eye
        rhs = grad * free
        c = (rhs / a_free[:, 0] if p == 1  # A_f^{-1} grad_f
             else np.linalg.solve(a_free, rhs[..., None])[..., 0])
        kappa = -np.einsum("rgp,rp->rg", d_g * e_g, c)
        sums = np.einsum("rag,rg->ra", np.concatenate(  # s1, s2, s3 in one pass
            [r_g[:, None], fit_g[:, None], kappa[:, None]], axis=1), kappa)
        out.append(NoiseSums(s1=sums[:, 0], s2=sums[:, 1], s3=sums[:, 2]))
    return out
