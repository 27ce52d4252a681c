"""Per-cluster sums beyond the additive moments: the lambda-noise and Kish inputs.

:mod:`pulse_ml.stats.cluster_moments` reduces every cluster to sums over clusters; the lambda
noise of :mod:`pulse_ml.stats.lambda_noise` needs products of a cluster's own sums, and the
effective cluster counts need the unscaled ``sum_g sww_g^2`` when the Gram matrix is CR2-scaled.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from pulse_ml.stats.cluster_moments import (
    _N_LIN_LAB,
    LIN,
    _bincount,
    _lab_columns,
    _leverage_scale,
)

__all__ = ["kish_sums", "labeled_cluster_lin"]

Array = NDArray[np.float64]


def labeled_cluster_lin(arms: list[tuple], n_codes: int,
                        singleton_unl: tuple[bool, bool] = (False, False),
                        cr2: bool = False) -> Array:
    """Per-cluster :data:`LIN` sums of both arms for every cluster with a labeled session.

    The lambda-noise term of :func:`pulse_ml.stats.effect_engine.solve` needs the influence of
    each such cluster on the fitted lambdas, a product of two of its linear sums, which the Gram
    matrix cannot give. Unlabeled sessions of those clusters are included; clusters without a
    label (and singleton unlabeled samples) move lambda only through the unlabeled mean's
    variance, an O(n / N) effect that is left out.

    Args:
        arms: As in :func:`session_moments` (the same centered values).
        n_codes: Number of cluster codes shared by the arms.
        singleton_unl: As in :func:`session_moments` (those unlabeled samples are skipped).
        cr2: Scale each sample's sums by the CR2 factors, as :func:`session_moments` does.

    Returns:
        Sums of shape (R, G_L, 2 * len(LIN)), clusters in code order.
    """
    present = np.zeros(n_codes, dtype=bool)
    for arm in arms:
        present[arm[0]] = True
    rank = np.cumsum(present) - 1
    k = int(present.sum())
    r = arms[0][1].shape[0]
    out = np.zeros((r, k, 2 * len(LIN)))
    for a, (cl, y, f, w, cu, fu) in enumerate(arms):
        o = a * len(LIN)
        block = out[:, :, o : o + _N_LIN_LAB]
        for j, col in enumerate(_lab_columns(y, f, w)[:_N_LIN_LAB]):
            block[..., j] = _bincount(rank[cl], np.broadcast_to(col, y.shape), k)
        if cr2:
            block *= _leverage_scale(block, 1)[..., None]
        if singleton_unl[a] or cu.size == 0:
            continue
        keep = present[cu]
        if not keep.any():
            continue
        codes, vals = rank[cu[keep]], fu[:, keep]
        block = out[:, :, o + _N_LIN_LAB : o + _N_LIN_LAB + 2]
        block[..., 0] = _bincount(codes, np.ones_like(vals), k)
        block[..., 1] = _bincount(codes, vals, k)
        if cr2:
            h = block[..., 0] / cu.size
            block *= np.where(h < 1.0 - 1e-9, 1.0 / np.sqrt(np.maximum(1.0 - h, 1e-300)),
                              0.0)[..., None]
    return out


def kish_sums(arms: list[tuple], n_codes: int) -> Array:
    """Unscaled ``sum_g sww_g^2`` per arm and ``sum_g sww_c,g sww_t,g``, shape (R, 3).

    The effective numbers of labeled clusters (the dfs) of
    :func:`pulse_ml.stats.effect_engine.solve` come from these; with ``cr2=True`` the Gram
    matrix no longer holds them.
    """
    sww = [_bincount(cl, np.broadcast_to(w * w, y.shape), n_codes)
           for cl, y, _, w, _, _ in arms]
    return np.stack([np.einsum("rg,rg->r", sww[0], sww[0]), np.einsum("rg,rg->r", sww[1], sww[1]),
                     np.einsum("rg,rg->r", sww[0], sww[1])], axis=-1)
