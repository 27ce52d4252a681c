"""Per-look moments of an A/B test, for every look in one pass, fed to the effect engine.

The numbers at a look are those of :func:`pulse_ml.stats.arm_effect.compare_arms` on the
sessions visible by then, because they are computed by the same code: this module only builds,
for every (group, look), the additive statistics :class:`~pulse_ml.stats.cluster_moments.Moments`
of the sessions with ``look <= k`` and hands the whole batch (leading axis ``groups x looks``) to
:func:`pulse_ml.stats.effect_engine.solve`.

Most statistics are sums over sessions (cumulated per look by ``bincount`` and ``cumsum``). The
others are sums over clusters of a function of the cluster's running sums (the Gram matrix of the
per-cluster linear sums, cluster counts, the pieces of the prediction ANOVA): sessions are sorted
into (group, look, cluster) cells, each cell's cluster has a running 10-vector
``x = (n, sum y, sum f, N, sum f~)`` of both arms, and every (group, look) segment adds
``phi(x_new) - phi(x_old)`` of the clusters it touches (``x x^T`` for the Gram matrix). Few large
segments (a live test) run a loop with one matrix product per look; many small ones (seeded
simulations: replications x looks) take ``x_old`` from a cumulative sum per cluster and all
products at once. Without users every session is its own cluster (``x_old = 0``), and every
term is a plain per-session sum.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from pulse_ml.stats import cluster_moments as cm
from pulse_ml.stats.cluster_moments import Moments

F64 = NDArray[np.float64]

# Column of the running 10-vector (n, sy, sf, N, su per arm) behind each LIN entry of an arm:
# m, sw, swy, swf, sf, sww, mu, su (unit weights: sw = sww = m, swy = sy, swf = sf).
_LIN_FROM_X = np.array([0, 0, 1, 2, 2, 0, 3, 4])
_LIN16 = np.r_[_LIN_FROM_X, _LIN_FROM_X + 5]
_CHUNK = 200_000  # cells per block of the Gram products (memory bound)
assert cm.LIN == ("m", "sw", "swy", "swf", "sf", "sww", "mu", "su")


def _phi(x: F64) -> F64:
    """Per-cluster nonlinear terms: g_lab, g_unl, g_all, t2_over_m, m2, mu2 (x2), union, any."""
    out = np.empty((x.shape[0], 14))
    for a in (0, 1):
        o = 5 * a
        n, sf, big_n, su = x[:, o], x[:, o + 2], x[:, o + 3], x[:, o + 4]
        big_m = n + big_n
        out[:, a] = n > 0
        out[:, 2 + a] = big_n > 0
        out[:, 4 + a] = big_m > 0
        out[:, 6 + a] = np.divide((sf + su) ** 2, big_m, out=np.zeros_like(sf), where=big_m > 0)
        out[:, 8 + a] = big_m**2
        out[:, 10 + a] = big_n**2
    out[:, 12] = (x[:, 0] + x[:, 5]) > 0
    out[:, 13] = (x[:, 0] + x[:, 3] + x[:, 5] + x[:, 8]) > 0
    return out


def _singleton_moments(tot: F64, syf: F64, n_groups: int, n_looks: int) -> Moments:
    """Every session its own cluster: each per-cluster term is a per-session sum.

    ``tot`` holds them all but ``sum y f`` (``syf``, shape (n_seg, 2)).
    """
    i = cm.RAW_INDEX
    n_seg = n_groups * n_looks
    gram10 = np.zeros((n_seg, 10, 10))
    for a in (0, 1):
        t, o = tot[:, a, :], 5 * a
        # x = (1, y, f, 0, 0) labeled, (0, 0, 0, 1, f~) unlabeled: products are raw sums
        for (r, c), name in {(0, 0): "m", (0, 1): "sy", (0, 2): "sf", (1, 1): "syy",
                             (2, 2): "sff", (3, 3): "mu", (3, 4): "su",
                             (4, 4): "suu"}.items():
            gram10[:, o + r, o + c] = gram10[:, o + c, o + r] = t[:, i[name]]
        gram10[:, o + 1, o + 2] = gram10[:, o + 2, o + 1] = syf[:, a]
    m, mu = tot[..., i["m"]], tot[..., i["mu"]]
    return Moments(
        tot=tot,
        gram=gram10[:, _LIN16[:, None], _LIN16[None, :]],
        g_lab=m, g_unl=mu, g_all=m + mu, g_lab_union=m.sum(axis=1), g_any=(m + mu).sum(axis=1),
        t2_over_m=tot[..., i["sff"]] + tot[..., i["suu"]], m2=m + mu, mu2=mu,
    )


def look_moments(
    grp: NDArray[np.int64],
    clusters: NDArray[np.int64] | None,
    lk: NDArray[np.int64],
    arm: NDArray[np.int64],
    lab: NDArray[np.bool_],
    y: F64,
    f: F64,
    n_groups: int,
    n_looks: int,
) -> Moments:
    """Moments of the sessions visible at every look, leading axis ``n_groups * n_looks``.

    Args:
        grp: Group (case study, replication) code per session, 0..n_groups-1.
        clusters: Cluster (user) codes per session, 0-based; ``None`` = each session its own.
        lk: First look (0-based) at which each session is visible.
        arm: 0 control, 1 treatment.
        lab: Labeled sessions.
        y: Ratings (0 where unlabeled).
        f: Predictions.
        n_groups: Number of groups.
        n_looks: Number of looks.

    Returns:
        Cumulative moments: row ``g * n_looks + k`` holds the sessions of group g with look <= k.
    """
    n_seg = n_groups * n_looks
    seg = grp * n_looks + lk
    # Raw per-arm totals (RAW order), unit weights.
    fl = np.where(lab, f, 0.0)
    fu = f - fl
    yl = np.where(lab, y, 0.0)
    labf, unlf = lab.astype(np.float64), (~lab).astype(np.float64)
    raw = {"m": labf, "sw": labf, "swy": yl, "swf": fl, "sf": fl, "sww": labf, "sy": yl,
           "syy": yl * yl, "sff": fl * fl, "mu": unlf, "su": fu, "suu": fu * fu}
    idx = seg * 2 + arm
    tot = np.stack([np.bincount(idx, weights=raw[name], minlength=n_seg * 2)
                    for name in cm.RAW], axis=-1).reshape(n_groups, n_looks, 2, len(cm.RAW))
    tot = tot.cumsum(axis=1).reshape(n_seg, 2, len(cm.RAW))
    if clusters is None:
        syf = np.bincount(idx, weights=yl * fl, minlength=n_seg * 2).reshape(n_groups, n_looks, 2)
        return _singleton_moments(tot, syf.cumsum(axis=1).reshape(n_seg, 2), n_groups, n_looks)
    # Per (look, cluster) cell: the 10-vector (n, sy, sf, N, su) of each arm.
    n_cl = int(clusters.max()) + 1 if clusters.size else 1
    cl = clusters if n_groups == 1 else grp * n_cl + clusters  # one cluster per (group, user)
    n_cl = int(cl.max()) + 1 if cl.size else 1
    cell_key, inv = np.unique(seg * n_cl + cl, return_inverse=True)
    cell = np.empty((cell_key.size, 10))
    by_arm = inv * 2 + arm
    for j, v in enumerate((labf, yl, fl, unlf, fu)):
        cell[:, [j, 5 + j]] = np.bincount(by_arm, weights=v,
                                          minlength=2 * cell_key.size).reshape(-1, 2)
    cell_seg, cell_cl = cell_key // n_cl, cell_key % n_cl
    bounds = np.flatnonzero(np.r_[True, cell_seg[1:] != cell_seg[:-1]])
    seg_ids = cell_seg[bounds]
    edges = np.r_[bounds, cell.shape[0]]
    gram10 = np.zeros((n_seg, 10, 10))
    nonlin = np.zeros((n_seg, 14))
    if cell.shape[0] >= 256 * bounds.size:  # few large segments: a loop over them
        if n_cl > 2 * cell.shape[0]:
            cell_cl = np.unique(cell_cl, return_inverse=True)[1]
        running = np.zeros((int(cell_cl.max()) + 1, 10))
        for k, s in enumerate(seg_ids):
            lo, hi = edges[k], edges[k + 1]
            u = cell_cl[lo:hi]
            xo = running[u]
            xn = xo + cell[lo:hi]
            running[u] = xn
            gram10[s] = xn.T @ xn - xo.T @ xo
            nonlin[s] = (_phi(xn) - _phi(xo)).sum(axis=0)
    elif cell.shape[0]:  # many small segments (simulations): every cell at once
        # a cluster's sums before the segment: running sum over its earlier cells
        by_cl = np.argsort(cell_cl, kind="stable")  # cells stay in look order within a cluster
        run = np.cumsum(cell[by_cl], axis=0)
        first = np.flatnonzero(np.r_[True, cell_cl[by_cl][1:] != cell_cl[by_cl][:-1]])
        base = np.repeat(run[first] - cell[by_cl][first], np.diff(np.r_[first, by_cl.size]),
                         axis=0)
        old = np.empty_like(cell)
        old[by_cl] = run - cell[by_cl] - base
        new = old + cell
        nonlin[seg_ids] = np.add.reduceat(_phi(new) - _phi(old), bounds, axis=0)
        iu, ju = np.triu_indices(10)
        upper = np.zeros((seg_ids.size, iu.size))
        step = max(1, int(bounds.size * _CHUNK / cell.shape[0]))
        for b0 in range(0, bounds.size, step):  # whole segments per chunk (bounded memory)
            b1 = min(b0 + step, bounds.size)
            lo, hi = edges[b0], edges[b1]
            prod = new[lo:hi, iu] * new[lo:hi, ju] - old[lo:hi, iu] * old[lo:hi, ju]
            upper[b0:b1] = np.add.reduceat(prod, bounds[b0:b1] - lo, axis=0)
        gram10[seg_ids[:, None], iu[None, :], ju[None, :]] = upper
        gram10[seg_ids[:, None], ju[None, :], iu[None, :]] = upper
    gram10 = gram10.reshape(n_groups, n_looks, 10, 10).cumsum(axis=1).reshape(n_seg, 10, 10)
    nonlin = nonlin.reshape(n_groups, n_looks, 14).cumsum(axis=1).reshape(n_seg, 14)
    return Moments(
        tot=tot,
        gram=gram10[:, _LIN16[:, None], _LIN16[None, :]],
        g_lab=nonlin[:, 0:2],
        g_unl=nonlin[:, 2:4],
        g_all=nonlin[:, 4:6],
        g_lab_union=nonlin[:, 12],
        g_any=nonlin[:, 13],
        t2_over_m=nonlin[:, 6:8],
        m2=nonlin[:, 8:10],
        mu2=nonlin[:, 10:12],
    )
