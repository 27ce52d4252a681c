"""Inputs of an arm comparison: the arm type, value vectors, weights and shared cluster codes."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray

from pulse_ml.errors import PulseError
from pulse_ml.stats.ppi import as_vector, normalize_weights

__all__ = ["Arm", "cluster_codes"]


@dataclass(frozen=True)
class Arm:
    """One arm of an A/B comparison: its labeled and unlabeled sessions.

    The one arm type of the comparisons (:func:`~pulse_ml.stats.arm_effect.compare_arms`,
    :func:`~pulse_ml.stats.arm_batch.compare_batch`), randomization inference and the audits
    (:mod:`~pulse_ml.stats.split_half`, :mod:`~pulse_ml.stats.half_checks`,
    :mod:`~pulse_ml.stats.consistency`).

    Attributes:
        y: Ratings of the labeled sessions, shape (n,) (``compare_batch``: (R, n)).
        f: Honest (out-of-fold) predictions of the labeled sessions, shape as ``y``.
        f_unl: Predictions of the unlabeled sessions, shape (N,) (``compare_batch``: (R, N)).
        users: User ids of the labeled sessions, shape (n,): the variance clusters of the
            comparisons, the randomized units of randomization inference, the split units of
            the audits (which need them). ``None``: every session is its own cluster.
        users_unl: User ids of the unlabeled sessions, shape (N,); ``None``: one cluster per
            session.
        w: Weights of the labeled sessions (e.g. inverse labeling propensities: shift-aware
            PPI++); ``None``: all 1. Randomization inference does not use them.
    """

    y: ArrayLike
    f: ArrayLike
    f_unl: ArrayLike
    users: ArrayLike | None = None
    users_unl: ArrayLike | None = None
    w: ArrayLike | None = None


def arm_arrays(
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
        if k.dtype.kind not in "iub" and pd.isna(k).any():
            raise PulseError(f"{names[i]}: cluster ids (user_id) must not be missing")
    codes: list[NDArray[np.intp] | None] = [None] * len(keys)
    n_codes = 0
    if given:
        dense = _dense_codes([k for _, k in given])
        if dense is not None:  # already codes (``infer`` factorizes user_id once per table)
            n_codes = dense
            for i, k in given:
                codes[i] = k.astype(np.intp, copy=False)
        else:
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


def _dense_codes(arrays: list[NDArray]) -> int | None:
    """``max + 1`` when integer ids are already small non-negative codes, else ``None``.

    Such ids are used as cluster codes as they are (clusters in id order; ids that no sample
    uses are empty clusters, which every sum skips), saving a hash factorization of every
    session. "Small" is at most twice the number of sessions plus 1,024, so arrays sized by the
    code count stay bounded by the data.
    """
    if not all(a.dtype.kind in "iu" for a in arrays):
        return None
    sizes = [a.size for a in arrays if a.size]
    if not sizes:
        return None
    # One pass per array: seen as unsigned (two's complement), a negative id is at least
    # 2^(bits - 1), so it fails the bound when the bound is capped there.
    bound = 2 * sum(sizes) + 1024
    hi = -1
    for a in arrays:
        if a.size:
            limit = min(bound, 2 ** (8 * a.itemsize - 1)) if a.dtype.kind == "i" else bound
            top = int(np.maximum.reduce(a.view(a.dtype.str.replace("i", "u"))))
            if top >= limit:
                return None
            hi = max(hi, top)
    return hi + 1


def weights_or_ones(w: ArrayLike | None, size: int, name: str) -> NDArray[np.float64]:
    out = normalize_weights(w, size, name)
    return np.ones(size) if out is None else out
