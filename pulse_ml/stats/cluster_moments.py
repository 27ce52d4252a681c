"""Additive per-cluster statistics of a two-arm comparison (inputs of the effect engine).

Each estimate, variance, lambda and df of :mod:`pulse_ml.stats.effect_engine` is a function of a
few sums over clusters g (users, or single sessions) of per-cluster quantities: the raw sums
:data:`RAW` per arm (counts, sums of weights, weighted ratings and predictions, squares), the
Gram matrix ``sum_g z_g z_g^T`` of the per-cluster linear sums :data:`LIN` of both arms (users in
both arms give cross-arm entries), cluster counts and the pieces of a one-way ANOVA of the
predictions. Because they are sums over clusters:

* moments of disjoint sets of clusters add (:meth:`Moments.__add__`);
* when an audit switches whole clusters between two states (labels in or out of a half,
  hidden or not) every statistic is ``state0 + mask @ (state1 - state0)``: one matrix product
  gives all replications (:meth:`Moments.flat` / :meth:`Moments.unflat`).

:func:`session_moments` builds them for a batch of data sets of one design (values of shape
(R, n)) touching only the nonzero blocks; :func:`per_cluster` keeps the cluster axis (audits).
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np
from numpy.typing import NDArray

from pulse_ml.stats.cluster_samples import (
    ArmSamples,
    Sample,
    arm_samples,
    bincount,
    lab_columns,
)

__all__ = ["FLAT_SIZE", "LIN", "RAW", "Moments", "cluster_sums", "per_cluster", "session_moments"]

RAW = ("m", "sw", "swy", "swf", "sf", "sww", "sy", "syy", "sff", "mu", "su", "suu")
RAW_INDEX = {name: i for i, name in enumerate(RAW)}
LIN = ("m", "sw", "swy", "swf", "sf", "sww", "mu", "su")  # per-cluster sums entering linearly
LIN_INDEX = {name: i for i, name in enumerate(LIN)}
_N_LAB = 9  # RAW[:9] come from labeled sessions, RAW[9:] from unlabeled ones
_N_LIN_LAB = 6  # LIN[:6] = RAW[:6] are labeled, LIN[6:] = RAW[9:11] unlabeled
_CHUNK = 4_000_000  # values per chunk of replications (memory bound)

Array = NDArray[np.float64]


@dataclass(frozen=True)
class Moments:
    """Sufficient statistics; every field has the same leading axes (e.g. (R,) or (R, G)).

    Attributes:
        tot: Sums of :data:`RAW` per arm, trailing shape (2, 12).
        gram: ``sum_g z_g z_g^T`` of :data:`LIN` for both arms stacked, trailing (16, 16).
        g_lab: Clusters with a labeled session, per arm, trailing (2,).
        g_unl: Clusters with an unlabeled session, per arm, trailing (2,).
        g_all: Clusters with any session, per arm, trailing (2,).
        g_lab_union: Clusters with a labeled session in either arm, trailing ().
        g_any: Clusters with any session in either arm, trailing ().
        t2_over_m: ``sum_g T_g^2 / M_g`` (T_g, M_g: sum and count of ALL predictions of g in the
            arm), per arm, trailing (2,).
        m2: ``sum_g M_g^2`` per arm, trailing (2,).
        mu2: ``sum_g (unlabeled sessions of g)^2`` per arm, trailing (2,).
    """

    tot: Array
    gram: Array
    g_lab: Array
    g_unl: Array
    g_all: Array
    g_lab_union: Array
    g_any: Array
    t2_over_m: Array
    m2: Array
    mu2: Array

    _TRAIL = {"tot": (2, len(RAW)), "gram": (2 * len(LIN),) * 2, "g_lab_union": (), "g_any": ()}

    def __add__(self, other: Moments) -> Moments:
        """Moments of the union of two disjoint sets of clusters (broadcasting)."""
        return Moments(*(getattr(self, f.name) + getattr(other, f.name) for f in fields(self)))

    def sum(self, axis: int) -> Moments:
        """Sum over one leading axis (e.g. the cluster axis)."""
        return Moments(*(getattr(self, f.name).sum(axis=axis) for f in fields(self)))

    def flat(self) -> Array:
        """All fields side by side: leading axes + (:data:`FLAT_SIZE`,)."""
        lead = self.g_any.shape
        return np.concatenate(
            [getattr(self, f.name).reshape(*lead, -1) for f in fields(self)], axis=-1)

    @classmethod
    def unflat(cls, flat: Array) -> Moments:
        """Inverse of :meth:`flat`."""
        lead, out, start = flat.shape[:-1], [], 0
        for f in fields(cls):
            trail = cls._TRAIL.get(f.name, (2,))
            size = int(np.prod(trail)) if trail else 1
            out.append(flat[..., start : start + size].reshape(*lead, *trail))
            start += size
        return cls(*out)

    @classmethod
    def concat(cls, parts: list[Moments]) -> Moments:
        """Stack batches along the first axis."""
        return cls(*(np.concatenate([getattr(p, f.name) for p in parts]) for f in fields(cls)))


FLAT_SIZE = sum(int(np.prod(Moments._TRAIL.get(f.name, (2,)))) for f in fields(Moments))


def _unl_columns(fu: Array) -> list[Array | None]:
    return [None, fu, fu * fu]  # None: the session count (np.bincount without weights)


def cluster_sums(
    codes_l: NDArray[np.intp],
    y: Array,
    f: Array,
    w: Array,
    codes_u: NDArray[np.intp],
    fu: Array,
    n_codes: int,
) -> Array:
    """Dense per-cluster :data:`RAW` sums of one arm, shape (R, G, 12).

    Args:
        codes_l: Cluster code of each labeled session, shape (n,).
        y: Ratings, shape (R, n).
        f: Predictions of the labeled sessions, shape (R, n).
        w: Labeled weights, shape (R, n) (ones when unweighted).
        codes_u: Cluster code of each unlabeled session, shape (N,).
        fu: Predictions of the unlabeled sessions, shape (R, N).
        n_codes: Number of cluster codes G.

    Returns:
        The sums in the order of :data:`RAW`.
    """
    cols = [bincount(codes_l, v, n_codes) for v in lab_columns(y, f, w)]
    cols += [bincount(codes_u, np.ones_like(fu) if v is None else v, n_codes)
             for v in _unl_columns(fu)]
    return np.stack(cols, axis=-1)


def per_cluster(sums: Array) -> Moments:
    """Moments of each cluster separately from dense sums of both arms, shape (S, G, 2, 12).

    Returns:
        Moments with leading axes (S, G); ``.sum(1)`` gives the moments of all clusters.
    """
    s, g = sums.shape[:2]
    lin = sums[..., [RAW_INDEX[c] for c in LIN]].reshape(s, g, 2 * len(LIN))
    m, mu = sums[..., RAW_INDEX["m"]], sums[..., RAW_INDEX["mu"]]
    big_m = m + mu
    total_f = sums[..., RAW_INDEX["sf"]] + sums[..., RAW_INDEX["su"]]
    return Moments(
        tot=sums,
        gram=lin[..., :, None] * lin[..., None, :],
        g_lab=(m > 0).astype(float),
        g_unl=(mu > 0).astype(float),
        g_all=(big_m > 0).astype(float),
        g_lab_union=(m > 0).any(axis=-1).astype(float),
        g_any=(big_m > 0).any(axis=-1).astype(float),
        t2_over_m=np.divide(total_f**2, big_m, out=np.zeros_like(big_m), where=big_m > 0),
        m2=big_m**2,
        mu2=mu**2,
    )


_BLOCK = 1 << 15  # values per block of a singleton sample (cache-resident temporaries)


def _singleton_moments(fu: Array, shift: float = 0.0) -> tuple[Array, Array]:
    """Unlabeled sample whose sessions are their own clusters: ``(sums, gram block)``.

    Every cluster holds one session, so the per-cluster sums are the columns themselves and
    ``sum_g z_g z_g^T`` of ``(mu, su) = (1, f)`` is ``[[N, sum f], [sum f, sum f^2]]`` with
    ``f = fu - shift`` (centering against cancellation). One pass over ``fu`` in blocks: the
    centered block stays in cache, no bincount, cluster ranks or full-size temporaries.
    """
    r, n = fu.shape
    s1, s2 = np.zeros(r), np.zeros(r)
    for start in range(0, n, _BLOCK):
        d = fu[:, start : start + _BLOCK] - shift
        s1 += d.sum(axis=1)
        s2 += np.einsum("ij,ij->i", d, d)  # numpy's SIMD loop: no BLAS thread wake-up
    sums = np.stack([np.full(r, float(n)), s1, s2], axis=-1)  # (R, 3): m, su, suu
    gram = np.stack([np.stack([sums[:, 0], s1], -1), np.stack([s1, s2], -1)], -2)
    return sums, gram


def _cross(sp: Sample, zp: Array, sq: Sample, zq: Array) -> Array | None:
    """``sum_g z_p,g z_q,g^T`` over the clusters both samples touch, shape (R, c_p, c_q)."""
    if sp.dense and sq.dense:  # untouched clusters hold zeros: no intersection needed
        return np.matmul(zp.transpose(0, 2, 1), zq)
    if sq.dense:
        return np.matmul(zp.transpose(0, 2, 1), zq[:, sp.codes])
    if sp.dense:
        return np.matmul(zp[:, sq.codes].transpose(0, 2, 1), zq)
    both = np.flatnonzero(sp.present & sq.present)
    if both.size == 0:
        return None
    return np.matmul(zp[:, sp.rank[both]].transpose(0, 2, 1), zq[:, sq.rank[both]])


def _arm_anova(lab: Sample, unl: Sample, r: int) -> dict[str, Array | float]:
    """Cluster counts and one-way ANOVA pieces of an arm's labeled + unlabeled sessions."""
    sf = RAW_INDEX["sf"]
    lab_sums = lab.touched  # touched clusters only (also of a dense labeled sample)
    if unl.dense:  # the labeled clusters added into the all-code arrays
        total, count = unl.sums[..., 1].copy(), unl.sums[0, :, 0].copy()
        codes_l = lab.codes
        total[:, codes_l] += lab_sums[..., sf]
        count[codes_l] += lab_sums[0, :, 0]
        k = int(np.count_nonzero(count))
    else:
        union = lab.present | unl.present
        rank = np.cumsum(union) - 1
        pos_l, pos_u = rank[lab.present], rank[unl.present]
        k = int(np.count_nonzero(union))
        total, count = np.zeros((r, k)), np.zeros(k)
        total[:, pos_l] += lab_sums[..., sf]
        total[:, pos_u] += unl.sums[..., 1]
        count[pos_l] += lab_sums[0, :, 0]
        count[pos_u] += unl.sums[0, :, 0]
    count_u = unl.sums[0, :, 0]
    return {"g_lab": lab.codes.size, "g_unl": int(np.count_nonzero(count_u)), "g_all": k,
            "t2": np.einsum("rg,rg->r", total / np.maximum(count, 1.0), total),
            "m2": np.add.reduce(count * count),  # integers: exact
            "mu2": np.add.reduce(count_u * count_u)}


def _one_chunk(arms: list[tuple], n_codes: int,
               singleton_unl: tuple[bool, bool] = (False, False),
               unl_shift: float = 0.0, cr2: bool = False,
               prepared: ArmSamples | None = None) -> Moments:
    prep = (prepared if prepared is not None
            else arm_samples(arms, n_codes, singleton_unl, unl_shift))
    arms, samples = prep.arms, prep.samples
    r = arms[0][1].shape[0]
    single = {}  # arm -> (sums (R, 3), gram (R, 2, 2)) of a singleton unlabeled sample
    tot = np.zeros((r, 2, len(RAW)))
    cols = []  # per sample: its columns in the Gram matrix
    for a in (0, 1):
        o = a * len(LIN)
        tot[:, a, :_N_LAB] = samples[2 * a].tot
        cols += [slice(o, o + _N_LIN_LAB), slice(o + _N_LIN_LAB, o + len(LIN))]
        if singleton_unl[a]:
            single[a] = _singleton_moments(arms[a][5], unl_shift)
            tot[:, a, _N_LAB:] = single[a][0]
        else:
            tot[:, a, _N_LAB:] = samples[2 * a + 1].tot
    gram = np.zeros((r, 2 * len(LIN), 2 * len(LIN)))
    for a, (_, block) in single.items():  # singleton clusters meet no other sample
        n_u = arms[a][5].shape[1]
        factor = (n_u / (n_u - 1.0) if n_u > 1 else 0.0) if cr2 else 1.0
        gram[:, cols[2 * a + 1], cols[2 * a + 1]] += factor * block
    lin = []  # per sample: per-cluster linear sums, CR2-scaled when asked
    for p, sample in enumerate(samples):
        if sample is None:
            lin.append(None)
            continue
        lin.append(sample.lin_cr2 if cr2 else sample.sums[..., : cols[p].stop - cols[p].start])
    for p, sample_p in enumerate(samples):
        for q in range(p, len(samples)):
            if sample_p is None or samples[q] is None:
                continue
            block = (np.matmul(lin[p].transpose(0, 2, 1), lin[p]) if q == p
                     else _cross(sample_p, lin[p], samples[q], lin[q]))
            if block is None:
                continue
            gram[:, cols[p], cols[q]] += block
            if q != p:
                gram[:, cols[q], cols[p]] += block.transpose(0, 2, 1)
    per_arm = {k: np.zeros((r, 2)) for k in ("g_lab", "g_unl", "g_all", "t2", "m2", "mu2")}
    extra_any = 0
    for a in (0, 1):
        lab = samples[2 * a]
        if a in single:  # labeled clusters as usual, plus N one-session clusters
            sums_u = single[a][0]
            n_u = int(arms[a][5].shape[1])
            count = lab.sums[0, :, 0]
            total = lab.sums[..., RAW_INDEX["sf"]]
            g_lab = int(lab.present.sum())
            per_arm["g_lab"][:, a], per_arm["g_unl"][:, a] = g_lab, n_u
            per_arm["g_all"][:, a] = g_lab + n_u
            per_arm["t2"][:, a] = (total**2 / np.maximum(count, 1.0)).sum(axis=1) + sums_u[:, 2]
            per_arm["m2"][:, a] = (count**2).sum() + n_u
            per_arm["mu2"][:, a] = n_u
            extra_any += n_u
            continue
        for key, value in _arm_anova(lab, samples[2 * a + 1], r).items():
            per_arm[key][:, a] = value
    lab_union = samples[0].present | samples[2].present
    any_union = lab_union.copy()
    for sample in (samples[1], samples[3]):
        if sample is not None:
            any_union |= sample.present
    return Moments(
        tot=tot, gram=gram, g_lab=per_arm["g_lab"], g_unl=per_arm["g_unl"],
        g_all=per_arm["g_all"], g_lab_union=np.full(r, float(np.count_nonzero(lab_union))),
        g_any=np.full(r, float(np.count_nonzero(any_union) + extra_any)), t2_over_m=per_arm["t2"],
        m2=per_arm["m2"], mu2=per_arm["mu2"],
    )


def session_moments(arms: list[tuple], n_codes: int,
                    singleton_unl: tuple[bool, bool] = (False, False),
                    unl_shift: float = 0.0, cr2: bool = False,
                    prepared: ArmSamples | None = None) -> Moments:
    """Moments of a batch of data sets sharing one design, from session-level arrays.

    Args:
        arms: Per arm (control first) ``(codes_l, y, f, w, codes_u, fu)``: cluster codes of the
            labeled (n,) and unlabeled (N,) sessions and values of shape (R, n) / (R, N).
        n_codes: Number of cluster codes shared by the arms.
        singleton_unl: Per arm, True when every unlabeled session is its own cluster and no
            other sample uses those codes (``cluster_codes`` with ``None`` for that sample):
            the unlabeled moments are then two passes over the predictions (same values as
            the general path up to floating-point summation order). ``codes_u`` is not read.
        unl_shift: Subtracted from every unlabeled prediction, block by block while summing
            (:func:`~pulse_ml.stats.cluster_samples.unlabeled_sample`), so callers need not
            make a centered copy of them.
        cr2: Scale each cluster's linear sums in the Gram matrix by its CR2 factor
            ``1 / sqrt(1 - h_g)`` within each sample (:func:`_leverage_scale`; Bell & McCaffrey
            2002): a cluster holding a large share of a sample's labels has a residual sum
            shrunk toward 0 by its own pull on the mean, which CR1's common factor does not
            undo. The Gram matrix is then no longer additive over clusters (audits keep
            ``cr2=False``); equal clusters get CR1's ``G / (G - 1)``.
        prepared: The per-cluster sums of these arms
            (:func:`~pulse_ml.stats.cluster_samples.arm_samples`), when the caller shares them
            with :func:`~pulse_ml.stats.cluster_lin.labeled_cluster_lin`; all replications in
            one chunk then.

    Returns:
        Moments with leading axis R (computed in chunks of replications to bound memory).
    """
    r = arms[0][1].shape[0]
    per_rep = sum(arm[1].shape[1] * _N_LAB + arm[5].shape[1] * 3 for arm in arms)
    step = max(1, _CHUNK // max(per_rep, 1))
    if r <= step or prepared is not None:
        return _one_chunk(arms, n_codes, singleton_unl, unl_shift, cr2, prepared)
    parts = []
    for start in range(0, r, step):
        sl = slice(start, start + step)
        parts.append(_one_chunk(
            [(cl, y[sl], f[sl], w[sl], cu, fu[sl]) for cl, y, f, w, cu, fu in arms], n_codes,
            singleton_unl, unl_shift, cr2))
    return Moments.concat(parts)
