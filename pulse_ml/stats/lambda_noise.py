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


def lambda_noise_sums(
    z: Array,
    effect_vecs: Array,
    dir_vecs: Array,
    resid_vecs: Array,
    lam: Array,
    gram_a: Array,
    free: NDArray[np.bool_],
    grad: Array,
) -> NoiseSums:
    """Per-cluster delta-method sums of the lambda-noise term.

    With ``K`` linear sums per cluster and ``P`` lambdas:

    Args:
        z: Per-cluster linear sums, shape (R, G, K).
        effect_vecs: Effect influence vectors, shape (R, 1 + P, K): at lambda 0 first, then the
            change per unit of each lambda.
        dir_vecs: Influence vectors ``d_p`` of the directions each lambda was fitted in, shape
            (R, P, K).
        resid_vecs: Influence vectors ``e_p`` of the residual each lambda's fit minimizes, at the
            fitted lambdas, shape (R, P, K) (the same row for a joint fit).
        lam: Fitted lambdas, shape (R, P).
        gram_a: Normal-equation matrices ``A``, shape (R, P, P).
        free: Coordinates strictly inside their bounds, shape (R, P).
        grad: ``dEffect / dlam_p`` (the prediction-mean differences, signed), shape (R, P).

    Returns:
        The sums.
    """
    p = lam.shape[1]
    eff = np.einsum("rgk,rjk->rgj", z, effect_vecs)  # (R, G, 1 + P)
    r_g, fit_g = eff[..., 0], np.einsum("rgp,rp->rg", eff[..., 1:], lam)
    d_g = np.einsum("rgk,rpk->rgp", z, dir_vecs)
    e_g = np.einsum("rgk,rpk->rgp", z, resid_vecs)
    eye = np.eye(p)[None]
    mask = free[:, :, None] & free[:, None, :]
    a_free = np.where(mask, gram_a, 0.0) + np.where(free[:, :, None], 0.0, eye)
    scale = np.abs(a_free).max(axis=(1, 2), keepdims=True)
    a_free = a_free + 1e-12 * np.where(scale > 0, scale, 1.0) * eye
    c = np.linalg.solve(a_free, (grad * free)[..., None])[..., 0]  # A_f^{-1} grad_f
    kappa = -np.einsum("rgp,rp->rg", d_g * e_g, c)
    return NoiseSums(s1=np.einsum("rg,rg->r", r_g, kappa),
                     s2=np.einsum("rg,rg->r", fit_g, kappa),
                     s3=np.einsum("rg,rg->r", kappa, kappa))
