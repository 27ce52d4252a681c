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
_EYE = (np.eye(1), np.eye(2))  # identity of fits with P = 1 or 2 lambdas


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


def lambda_noise_sums(z: Array, basis: Array, coef: Array, gram_a: Array,
                      free: NDArray[np.bool_], grad: Array, real: NDArray[np.bool_]
                      ) -> list[NoiseSums]:
    """Per-cluster delta-method sums of the lambda-noise term of F lambda fits at once.

    Every fit has ``P`` lambdas (a fit with fewer is padded: zero coefficients and gradients,
    coordinates not ``free`` and not ``real``). Its influence vectors over the ``K`` linear sums
    of a cluster are combinations of a few ``basis`` vectors (the arms' alpha and delta), so
    ``z`` is projected once onto the basis and the fits' projections are combinations of those:

    * ``coef``: shape (R, F, 2 + 2P, B), the coefficients on the basis of the effect's influence
      at lambda 0, of the fitted lambdas' part of it (``sum_p lam_p`` times the effect's change
      per unit of lambda p), of the directions ``d_p`` each lambda was fitted in (P) and of the
      residuals ``e_p`` each fit minimizes at the fitted lambdas (P; the same row twice for a
      joint fit);
    * ``gram_a``: normal-equation matrices ``A``, (R, F, P, P); ``free``: coordinates strictly
      inside their bounds, (R, F, P); ``grad``: ``dEffect / dlam_p`` (the prediction-mean
      differences, signed), (R, F, P);
    * ``real``: (F, P, P), the entries of ``A`` that belong to the fit (not padding): they
      alone set the scale of the ridge that keeps ``A`` invertible.

    Args:
        z: Per-cluster linear sums, shape (R, G, K), read once for all fits.
        basis: Influence vectors, shape (R, B, K).
        coef: The coefficients above.
        gram_a: The normal-equation matrices.
        free: The free coordinates.
        grad: The gradients.
        real: The fits' own entries of ``gram_a``.

    Returns:
        The sums of each fit, in order.
    """
    r, n_fit, n_rows, n_basis = coef.shape
    p = grad.shape[2]
    # clusters on the last axis: einsum's inner loops run along G (einsum, not matmul: BLAS
    # would wake threads that spin on CPU time)
    proj = np.einsum("rjb,rbg->rjg", coef.reshape(r, n_fit * n_rows, n_basis),
                     np.einsum("rgk,rbk->rbg", z, basis)).reshape(r, n_fit, n_rows, z.shape[1])
    d_g, e_g = proj[:, :, 2 : 2 + p], proj[:, :, 2 + p :]  # (R, F, P, G)
    eye = _EYE[p - 1]
    mask = free[..., :, None] & free[..., None, :]
    a_free = np.where(mask, gram_a, 0.0) + np.where(free[..., :, None], 0.0, eye)
    scale = np.maximum.reduce(np.where(real, np.abs(a_free), 0.0).reshape(r, n_fit, p * p),
                              axis=2)[..., None, None]
    a_free = a_free + 1e-12 * np.where(scale > 0, scale, 1.0) * eye
    c = np.linalg.solve(a_free, (grad * free)[..., None])[..., 0]  # A_f^{-1} grad_f
    kappa = -np.einsum("rfpg,rfp->rfg", d_g * e_g, c)
    # s1, s2, s3 in one pass: rows 0 and 1 of proj are r_g (effect at lambda 0) and fit_g
    sums = np.einsum("rfag,rfg->rfa", np.concatenate([proj[:, :, :2], kappa[:, :, None]],
                                                     axis=2), kappa)
    return [NoiseSums(s1=sums[:, f, 0], s2=sums[:, f, 1], s3=sums[:, f, 2])
            for f in range(n_fit)]
