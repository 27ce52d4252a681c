"""Per-cluster sums of each sample of a two-arm comparison, read once and shared.

An arm has two samples, its labeled and its unlabeled sessions. Every clustered statistic of
:mod:`pulse_ml.stats.cluster_moments` (moments, Gram matrix, cluster counts) and of
:mod:`pulse_ml.stats.cluster_lin` (lambda-noise sums, effective cluster counts) is a function of
each sample's per-cluster sums, so :func:`arm_samples` computes them once per comparison: one
count and one weighted ``np.bincount`` per unlabeled sample (the sums of squares only as a
total), and the labeled columns over the clusters that hold a label.

A sample is kept in one of two layouts (same numbers up to floating-point summation order):

* **touched**: sums over the clusters the sample touches, in code order (``rank`` maps a code to
  its row); for samples with fewer sessions than codes (labeled samples);
* **dense**: sums over all codes, untouched clusters holding zeros; for samples with at least
  as many sessions as codes (a big unlabeled sample). Zero rows add nothing to a Gram block, so
  products with other samples need no intersection of clusters or gather of ranks.

Unlabeled predictions are centered block by block while they are summed (``unl_shift``), so
callers pass them as they are.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

__all__ = ["ArmSamples", "Sample", "arm_samples", "bincount", "lab_columns", "leverage_scale",
           "unlabeled_sample"]

Array = NDArray[np.float64]

class _once:
    """``functools.cached_property`` without its lock.

    Python < 3.12 takes an RLock on every first access (~1 us, about ten times per comparison);
    a sample is not shared between threads while its properties are first computed.
    """

    def __init__(self, fn):
        self.fn, self.name, self.__doc__ = fn, fn.__name__, fn.__doc__

    def __get__(self, obj, owner=None):
        if obj is None:
            return self
        value = obj.__dict__[self.name] = self.fn(obj)  # later reads: the instance dict
        return value


DENSE_SHARE = 1.0  # a sample with >= DENSE_SHARE * n_codes sessions is summed over all codes
N_LAB_COLS = 9  # lab_columns: m, sw, swy, swf, sf, sww, sy, syy, sf^2 (RAW[:9])


def bincount(codes: NDArray[np.intp], values: Array, n_codes: int) -> Array:
    """Per-code sums of ``values`` of shape (R, n) -> (R, n_codes)."""
    r = values.shape[0]
    if r == 1:  # one data set (compare_arms): no offset codes to build
        return np.bincount(codes, weights=values[0], minlength=n_codes)[None, :n_codes]
    flat = (codes[None, :] + n_codes * np.arange(r)[:, None]).ravel()
    return np.bincount(flat, weights=values.ravel(), minlength=r * n_codes).reshape(r, n_codes)


def lab_columns(y: Array, f: Array, w: Array) -> list[Array]:
    """The labeled sessions' columns of :data:`~pulse_ml.stats.cluster_moments.RAW` (RAW[:9])."""
    return [np.ones_like(y), w, w * y, w * f, f, w * w, y, y * y, f * f]


def leverage_scale(sums: Array, col: int) -> Array:
    """CR2 factors ``1 / sqrt(1 - h_g)`` of a sample's clusters, shape (R, G).

    ``h_g`` is the cluster's share of the sample's column ``col`` (labeled: weights, the hat
    value of a weighted mean; unlabeled: sessions). A cluster holding the whole sample gets 0,
    like the CR1 factor of a single cluster (the variance floor then takes over). Clusters the
    sample does not touch (dense layout) have ``h_g = 0``: factor 1 on zero sums.
    """
    part = sums[..., col]
    h = part / np.maximum(np.add.reduce(part, axis=-1, keepdims=True), 1e-300)
    return np.where(h < 1.0 - 1e-9, 1.0 / np.sqrt(np.maximum(1.0 - h, 1e-300)), 0.0)


@dataclass(frozen=True)
class Sample:
    """Per-cluster sums of one sample.

    Attributes:
        present: Clusters the sample touches, shape (n_codes,).
        sums: Per-cluster sums, shape (R, G, C): G = touched clusters in code order, or all
            codes when ``dense``. Labeled: the 9 :func:`lab_columns`; unlabeled: (count, sum of
            predictions).
        tot: Totals of the sample's RAW columns, shape (R, 9) labeled or (R, 3) unlabeled
            (count, sum, sum of squares).
        dense: Whether ``sums`` runs over all codes.
        rank: Touched layout: the row of each code's cluster in ``sums`` (valid where
            ``present``); ``None`` when dense.
    """

    present: NDArray[np.bool_]
    sums: Array
    tot: Array
    dense: bool
    rank: NDArray[np.intp] | None = None  # touched layout: row of each code (where present)

    @_once
    def codes(self) -> NDArray[np.intp]:
        """Codes of the touched clusters, in code order (computed once)."""
        return np.flatnonzero(self.present)

    @_once
    def touched(self) -> Array:
        """Sums of the touched clusters, in code order (the sums themselves when not dense)."""
        return self.sums[:, self.codes] if self.dense else self.sums

    @_once
    def lin_cr2(self) -> Array:
        """The linear sums times each cluster's CR2 factor (computed once, shared).

        Labeled: LIN[:6], factors by weights; unlabeled: count and sum, factors by sessions
        (:func:`leverage_scale`). Used by the moments and the lambda-noise sums.
        """
        labeled = self.sums.shape[-1] == N_LAB_COLS
        scale = leverage_scale(self.sums, 1 if labeled else 0)
        return self.sums[..., : 6 if labeled else 2] * scale[..., None]

    def rows(self, codes: NDArray[np.intp], sums: Array | None = None) -> Array:
        """Sums (or ``sums``, laid out as they are) of the given touched clusters."""
        sums = self.sums if sums is None else sums
        return sums[:, codes] if self.dense else sums[:, self.rank[codes]]


# lab_columns as products of (1, w, y, f): 1*1, w*1, w*y, w*f, 1*f, w*w, 1*y, y*y, f*f (exact)
_LEFT = np.array([0, 1, 1, 1, 0, 1, 0, 2, 3])
_RIGHT = np.array([0, 0, 2, 3, 3, 1, 2, 2, 3])


def labeled_sample(codes: NDArray[np.intp], y: Array, f: Array, w: Array, n_codes: int
                   ) -> Sample:
    """The labeled sessions' :func:`lab_columns` per cluster (values of shape (R, n)).

    All columns (and replications) in one ``np.bincount``: each cluster's sums add its
    sessions in the same order as one bincount per column, so the values are the same.
    """
    count = np.bincount(codes, minlength=n_codes)
    present = count > 0
    rank = None
    if codes.size >= DENSE_SHARE * n_codes:
        keys, k = codes, n_codes
    else:
        rank = np.cumsum(present) - 1
        k = int(rank[-1]) + 1
        keys = rank[codes]
    r = y.shape[0]
    base = np.empty((r, 4, y.shape[1]))  # (1, w, y, f)
    base[:, 0], base[:, 1], base[:, 2], base[:, 3] = 1.0, w, y, f
    cols = base[:, _LEFT] * base[:, _RIGHT]  # (R, 9, n)
    flat = (keys + k * np.arange(r * N_LAB_COLS)[:, None]).ravel()
    sums = np.bincount(flat, weights=cols.ravel(), minlength=r * N_LAB_COLS * k)
    sums = sums.reshape(r, N_LAB_COLS, k)
    return Sample(present, np.ascontiguousarray(sums.transpose(0, 2, 1)),
                  np.add.reduce(sums, axis=-1), rank is None, rank)


_SPAN = 1 << 18  # fewest values per block of a centered pass over unlabeled predictions


def unlabeled_sample(codes: NDArray[np.intp], fu: Array, n_codes: int, shift: float = 0.0
                     ) -> Sample:
    """Session count and sum of ``fu - shift`` per cluster; the sum of squares as a total.

    ``fu - shift`` (centering against cancellation) is formed a block of sessions at a time
    and each block's per-cluster sums and sum of squares are added up: no full-size centered
    copy is written and read back (at 10^6 sessions that costs as much as a bincount). A block
    holds at least 4x as many sessions as there are clusters, so adding its sums costs little;
    a sample of up to :data:`_SPAN` sessions is one block.
    """
    count = np.bincount(codes, minlength=n_codes)
    present = count > 0
    dense = codes.size >= DENSE_SHARE * n_codes
    rank = None if dense else np.cumsum(present) - 1
    k = n_codes if dense else (int(rank[-1]) + 1 if n_codes else 0)
    keys = codes if dense else rank[codes]
    r, n = fu.shape
    span = max(_SPAN, 4 * k)
    if n <= span:  # one block
        d = fu - shift
        su, squares = bincount(keys, d, k), np.einsum("rn,rn->r", d, d)
    else:
        su, squares = np.zeros((r, k)), np.zeros(r)
        for start in range(0, n, span):
            d = fu[:, start : start + span] - shift
            su += bincount(keys[start : start + span], d, k)
            squares += np.einsum("rn,rn->r", d, d)  # numpy's SIMD loop: no BLAS wake-up
    m = count.astype(float) if dense else count[present].astype(float)
    sums, tot = np.empty((r, k, 2)), np.empty((r, 3))  # filled in place: no stacking calls
    sums[..., 0], sums[..., 1] = m, su
    tot[:, 0], tot[:, 1], tot[:, 2] = np.add.reduce(m), np.add.reduce(su, axis=-1), squares
    return Sample(present, sums, tot, dense, rank)


@dataclass(frozen=True)
class ArmSamples:
    """The four samples of a comparison, on codes renumbered when a sample is singleton.

    Attributes:
        arms: The arms as :func:`~pulse_ml.stats.cluster_moments.session_moments` takes them,
            their codes renumbered ``0..n_codes-1`` when a singleton sample's codes were dropped.
        n_codes: Number of codes of ``arms``.
        samples: Labeled control, unlabeled control, labeled treatment, unlabeled treatment;
            ``None`` for a singleton unlabeled sample (its sessions are their own clusters).
    """

    arms: list[tuple]
    n_codes: int
    samples: list[Sample | None]

    @_once
    def labeled(self) -> tuple[NDArray[np.intp], NDArray[np.intp]]:
        """Codes with a label in either arm and each code's row among them (``rank``)."""
        present = self.samples[0].present | self.samples[2].present
        return np.flatnonzero(present), np.cumsum(present) - 1


def arm_samples(arms: list[tuple], n_codes: int,
                singleton_unl: tuple[bool, bool] = (False, False),
                unl_shift: float = 0.0) -> ArmSamples:
    """Per-cluster sums of every sample of two arms (arguments as ``session_moments``)."""
    if any(singleton_unl):  # the other samples' codes, renumbered 0..k-1 (same clusters)
        used = np.zeros(n_codes, dtype=bool)  # codes in use, marked without a sort
        for a, arm in enumerate(arms):
            used[arm[0]] = True
            if not singleton_unl[a]:
                used[arm[4]] = True
        # the rank of each code among the used ones (np.unique's order)
        if not np.logical_and.reduce(used):
            rank = np.cumsum(used) - 1
            n_codes = int(rank[-1]) + 1
            arms = [(rank[cl], y, f, w, cu if singleton_unl[a] else rank[cu], fu)
                    for a, (cl, y, f, w, cu, fu) in enumerate(arms)]
    samples: list[Sample | None] = []
    for a, (cl, y, f, w, cu, fu) in enumerate(arms):
        samples.append(labeled_sample(cl, y, f, w, n_codes))
        samples.append(None if singleton_unl[a] else unlabeled_sample(cu, fu, n_codes,
                                                                      unl_shift))
    return ArmSamples(arms, n_codes, samples)
