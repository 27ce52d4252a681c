"""Per-cluster sums beyond the additive moments: the lambda-noise and Kish inputs.

:mod:`pulse_ml.stats.cluster_moments` reduces every cluster to sums over clusters; the lambda
noise of :mod:`pulse_ml.stats.lambda_noise` needs products of a cluster's own sums, and the
effective cluster counts need the unscaled ``sum_g sww_g^2`` when the Gram matrix is CR2-scaled.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from pulse_ml.stats.cluster_moments import _N_LIN_LAB, LIN
from pulse_ml.stats.cluster_samples import ArmSamples, Sample, arm_samples, labeled_sample

__all__ = ["kish_sums", "labeled_cluster_lin"]

Array = NDArray[np.float64]
_SW, _SWW, _SY = 1, 5, 6  # columns of lab_columns: sum w, sum w^2, sum y


def labeled_cluster_lin(arms: list[tuple], n_codes: int,
                        singleton_unl: tuple[bool, bool] = (False, False),
                        cr2: bool = False, prepared: ArmSamples | None = None) -> Array:
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
        prepared: The arms' per-cluster sums
            (:func:`~pulse_ml.stats.cluster_samples.arm_samples`), shared with
            :func:`session_moments`; computed here when ``None``.

    Returns:
        Sums of shape (R, G_L, 2 * len(LIN)), clusters in code order.
    """
    prep = prepared if prepared is not None else arm_samples(arms, n_codes, singleton_unl)
    samples = prep.samples
    codes, rank = prep.labeled
    r = prep.arms[0][1].shape[0]
    # clusters on the last axis in memory: the lambda-noise einsum then loops along them
    out = np.zeros((r, 2 * len(LIN), codes.size)).transpose(0, 2, 1)
    for a in (0, 1):
        o, lab, unl = a * len(LIN), samples[2 * a], samples[2 * a + 1]
        block = out[:, :, o : o + _N_LIN_LAB]
        # CR2 factors within each sample, as the moments' (shared: Sample.lin_cr2)
        block[:, rank[lab.codes]] = (lab.rows(lab.codes, lab.lin_cr2) if cr2
                                     else lab.touched[..., :_N_LIN_LAB])
        if unl is None or not np.logical_or.reduce(unl.present):
            continue
        block = out[:, :, o + _N_LIN_LAB : o + _N_LIN_LAB + 2]
        src = unl.lin_cr2 if cr2 else unl.sums
        if unl.dense:
            block[...] = src[:, codes]
        else:
            hit = unl.present[codes]
            block[:, hit] = unl.rows(codes[hit], src)
    return out


def _icc(sums: Array, y: Array) -> Array:
    """Intra-user correlation of the ratings of one sample (moment estimator, clipped to [0, 1]).

    ``E sum_g (S_g - n_g ybar)^2 ~ s^2 (n + rho (sum_g n_g^2 - n))`` with ``S_g`` the user's
    rating sum; 0 when every user has one rating. ``sums``: the sample's per-cluster
    :func:`~pulse_ml.stats.cluster_samples.lab_columns` sums (R, G, 9) of the clusters it
    touches; ``y``: its ratings (R, n).
    """
    n = float(y.shape[1])
    counts = sums[0, :, 0]
    excess = float(np.add.reduce(counts * counts)) - n  # integer squares: exact in any order
    if n < 3 or excess <= 0:
        return np.zeros(y.shape[0])
    ybar = np.add.reduce(y, axis=1, keepdims=True) / n
    dev = y - ybar
    q = np.add.reduce((sums[..., _SY] - counts * ybar) ** 2, axis=1)
    s2 = np.einsum("rn,rn->r", dev, dev) / (n - 1.0)
    rho = np.divide(q / np.maximum(s2, 1e-300) - n, excess)
    return np.minimum(np.maximum(np.where(s2 > 0, rho, 0.0), 0.0), 1.0)  # clip to [0, 1]


def kish_sums(arms: list[tuple], n_codes: int, prepared: ArmSamples | None = None) -> Array:
    """Effective numbers of labeled clusters per arm and of the effect, shape (R, 3).

    The dfs of :func:`pulse_ml.stats.effect_engine.solve` (Bell-McCaffrey under a working
    model): with variance shares ``v_g``, ``G* = (sum_g v_g)^2 / sum_g v_g^2``. The working model
    is a user random effect with the ratings' intra-user correlation ``rho`` (:func:`_icc`), so
    ``v_g = sum w^2 + rho ((sum w)^2 - sum w^2)`` within an arm: a heavy rater weighs more than
    their session count when their ratings move together (``rho = 0`` is Kish's count). The
    effect's ``v_g = v_c,g / W_c^2 + v_t,g / W_t^2`` counts a user with labels in both arms once.
    Computed from the unscaled per-cluster sums of the labeled samples, which a CR2-scaled Gram
    matrix no longer holds. ``prepared``: the arms' per-cluster sums
    (:func:`~.cluster_samples.arm_samples`); without it the labeled samples are summed here.
    """
    if prepared is None:  # the labeled samples alone (compare_batch)
        samples: list[Sample | None] = []
        for cl, y, f, w, _, _ in arms:
            samples += [labeled_sample(cl, y, f, w, n_codes), None]
        prepared = ArmSamples(arms, n_codes, samples)
    # only labeled clusters carry shares: numbered 0..G_L-1 (arrays sized by the labels)
    codes, rank = prepared.labeled
    r = arms[0][1].shape[0]
    shares = np.zeros((3, r, codes.size))  # control, treatment, effect
    for a in (0, 1):
        lab = prepared.samples[2 * a]
        sums = lab.touched  # (R, G_a, 9), the arm's clusters in code order
        sq = sums[..., _SWW]
        icc = _icc(sums, prepared.arms[a][1])
        shares[a][:, rank[lab.codes]] = sq + icc[:, None] * (sums[..., _SW] ** 2 - sq)
        w2 = lab.tot[:, _SW][:, None] ** 2
        shares[2] += np.divide(shares[a], w2, out=np.zeros_like(shares[a]), where=w2 > 0)
    # G* = (sum_g v_g)^2 / sum_g v_g^2 of the three at once
    num = np.add.reduce(shares, axis=-1) ** 2
    den = np.einsum("arg,arg->ar", shares, shares)
    return np.divide(num, den, out=np.zeros_like(num), where=den > 0).T
