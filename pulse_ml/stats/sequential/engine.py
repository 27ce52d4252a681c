"""Per-look sums and estimates, i.i.d. and cluster-robust, for every look in one pass."""

from __future__ import annotations

import numpy as np
import pandas as pd
from numpy.typing import NDArray

F64 = NDArray[np.float64]


def _iid_sums(
    grp: NDArray[np.int64],
    lk: NDArray[np.int64],
    arm: NDArray[np.int64],
    lab: NDArray[np.bool_],
    y: F64,
    f: F64,
    n_groups: int,
    n_looks: int,
) -> dict[str, F64]:
    """Cumulative per-arm sums at every look, shape (n_groups * n_looks, 2)."""
    idx = (grp * n_looks + lk) * 2 + arm
    size = n_groups * n_looks * 2

    def cum(w: F64 | None) -> F64:
        s = np.bincount(idx, weights=w, minlength=size).astype(np.float64)
        return s.reshape(n_groups, n_looks, 2).cumsum(axis=1).reshape(-1, 2)

    fl = np.where(lab, f, 0.0)
    fu = f - fl
    out = {
        "n": cum(lab.astype(np.float64)),
        "N": cum((~lab).astype(np.float64)),
        "sy": cum(y),
        "syy": cum(y * y),
        "sf": cum(fl),
        "sff": cum(fl * fl),
        "syf": cum(y * fl),
        "su": cum(fu),
        "suu": cum(fu * fu),
    }
    return out


def _iid_estimates(s: dict[str, F64]) -> dict[str, F64]:
    n, big_n = s["n"], s["N"]
    with np.errstate(divide="ignore", invalid="ignore"):
        ybar, fbar, ubar = s["sy"] / n, s["sf"] / n, s["su"] / big_n
        vy = np.maximum(s["syy"] / n - ybar**2, 0.0)
        vf = np.maximum(s["sff"] / n - fbar**2, 0.0)
        cyf = s["syf"] / n - ybar * fbar
        vu = np.maximum(s["suu"] / big_n - ubar**2, 0.0)
        tot = n + big_n
        var1 = (s["sff"] + s["suu"] - (s["sf"] + s["su"]) ** 2 / tot) / (tot - 1.0)
        lam = cyf / ((1.0 + n / big_n) * var1)
        ok = (big_n > 0) & (var1 > 0) & np.isfinite(lam)
        lam = np.where(ok, np.clip(lam, 0.0, 1.0), 0.0)
        unl_term = np.where(big_n > 0, lam**2 * vu / big_n, 0.0)
        var_aug = np.maximum(vy - 2.0 * lam * cyf + lam**2 * vf, 0.0) / n + unl_term
        mu_aug = ybar + np.where(lam > 0, lam * (ubar - fbar), 0.0)
    return {
        "naive_effect": ybar[:, 1] - ybar[:, 0],
        "naive_var": vy[:, 0] / n[:, 0] + vy[:, 1] / n[:, 1],
        "aug_effect": mu_aug[:, 1] - mu_aug[:, 0],
        "aug_var": var_aug[:, 0] + var_aug[:, 1],
        "lam": lam,
        "n": n,
        "N": big_n,
        "arm_units": n,
        "valid": (n[:, 0] >= 2) & (n[:, 1] >= 2),
    }


def _cluster_sums(
    grp: NDArray[np.int64],
    users: NDArray[np.int64],
    lk: NDArray[np.int64],
    arm: NDArray[np.int64],
    lab: NDArray[np.bool_],
    y: F64,
    f: F64,
    n_groups: int,
    n_looks: int,
) -> dict[str, F64]:
    """Per-look Gram matrices of per-user sums, arm totals, users per arm and labeled users.

    Sessions are sorted by (group, look, user) and summed per cell; a loop over the (group,
    look) segments keeps each user's running 10-vector (both arms) and adds
    ``x_new x_new^T - x_old x_old^T`` of the users seen in the segment to the Gram matrix.
    """
    if n_groups > 1:  # one cluster per (group, user)
        cl = pd.factorize(grp * (int(users.max()) + 1) + users)[0].astype(np.int64)
    else:
        cl = users
    n_cl = int(cl.max()) + 1
    key = (grp * n_looks + lk) * n_cl + cl
    order = np.argsort(key)
    key = key[order]
    arm_s, lab_s = arm[order], lab[order]
    q = np.empty((key.size, 5))
    q[:, 0] = lab_s
    q[:, 1] = np.where(lab_s, y[order], 0.0)
    f_s = f[order]
    q[:, 2] = np.where(lab_s, f_s, 0.0)
    q[:, 3] = ~lab_s
    q[:, 4] = f_s - q[:, 2]
    is_t = arm_s[:, None].astype(np.float64)
    x = np.concatenate([q * (1.0 - is_t), q * is_t], axis=1)
    del q
    starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
    cell = np.add.reduceat(x, starts, axis=0)
    del x
    cell_key = key[starts]
    cell_cl = cell_key % n_cl
    seg = cell_key // n_cl  # group * n_looks + look, non-decreasing
    bounds = np.flatnonzero(np.r_[True, seg[1:] != seg[:-1], True])
    n_seg = n_groups * n_looks
    running = np.zeros((n_cl, 10))
    old = np.empty((cell.shape[0], 10))
    gram = np.zeros((n_seg, 10, 10))
    for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
        u = cell_cl[lo:hi]
        xo = running[u]
        xn = xo + cell[lo:hi]
        running[u] = xn
        old[lo:hi] = xo
        gram[seg[lo]] = xn.T @ xn - xo.T @ xo
    seg_ids = seg[bounds[:-1]]

    def per_look(counts: F64) -> F64:
        s = np.zeros((n_seg,) + counts.shape[1:])
        s[seg_ids] = np.add.reduceat(counts, bounds[:-1], axis=0)
        return s.reshape((n_groups, n_looks) + counts.shape[1:]).cumsum(axis=1).reshape(s.shape)

    def became(*cols: int) -> NDArray[np.bool_]:
        had = sum(old[:, c] for c in cols) > 0
        return ~had & (sum(old[:, c] + cell[:, c] for c in cols) > 0)

    flags = np.column_stack([became(0, 3), became(5, 8), became(0), became(5)])
    counts = per_look(flags.astype(np.float64))
    return {
        "gram": gram.reshape(n_groups, n_looks, 10, 10).cumsum(axis=1).reshape(n_seg, 10, 10),
        "totals": per_look(cell),
        "g": counts[:, :2],
        "labeled_users": counts[:, 2:],
    }


def _div(a: F64, b: F64) -> F64:
    return np.divide(a, b, out=np.zeros_like(a, dtype=np.float64), where=b > 0)


def _box_minimize(quu: F64, qup: F64, quq: F64, qpp: F64, qqq: F64, qpq: F64) -> tuple[F64, F64]:
    """Minimize ``V(a, b) = quu + 2a qup + 2b quq + a^2 qpp + b^2 qqq + 2ab qpq`` on [0, 1]^2."""

    def value(a: F64, b: F64) -> F64:
        return quu + 2 * a * qup + 2 * b * quq + a * a * qpp + b * b * qqq + 2 * a * b * qpq

    zero, one = np.zeros_like(quu), np.ones_like(quu)
    cands = [
        (zero, np.clip(_div(-quq, qqq), 0, 1)),
        (one, np.clip(_div(-(quq + qpq), qqq), 0, 1)),
        (np.clip(_div(-qup, qpp), 0, 1), zero),
        (np.clip(_div(-(qup + qpq), qpp), 0, 1), one),
    ]
    det = qpp * qqq - qpq**2
    inner_ok = det > 1e-12 * qpp * qqq
    a_i = _div(quq * qpq - qup * qqq, np.where(inner_ok, det, 0.0))
    b_i = _div(qup * qpq - quq * qpp, np.where(inner_ok, det, 0.0))
    inside = inner_ok & (a_i >= 0) & (a_i <= 1) & (b_i >= 0) & (b_i <= 1)
    cands.append((np.where(inside, a_i, 0.0), np.where(inside, b_i, 0.0)))
    values = np.stack([value(a, b) for a, b in cands])
    best = np.argmin(values, axis=0)
    a_all = np.stack([a for a, _ in cands])
    b_all = np.stack([b for _, b in cands])
    cols = np.arange(quu.size)
    return a_all[best, cols], b_all[best, cols]


def _cluster_estimates(s: dict[str, F64], lambda_rule: str) -> dict[str, F64]:
    # CR1 counts labeled users only: they carry the variance (as compare_arms does)
    tot, gram, g = s["totals"], s["gram"], s["labeled_users"]
    n_rows = tot.shape[0]
    w_a, w_d, means = [], [], []
    with np.errstate(divide="ignore", invalid="ignore"):
        for a in (0, 1):
            o = 5 * a
            n, sy, sf, big_n, su = (tot[:, o + j] for j in range(5))
            ybar, fbar, ubar = sy / n, sf / n, _div(su, big_n)
            wa = np.zeros((n_rows, 10))
            wa[:, o + 1], wa[:, o] = 1.0 / n, -ybar / n
            wd = np.zeros((n_rows, 10))
            has_u = big_n > 0
            wd[:, o + 4] = _div(np.ones(n_rows), big_n)
            wd[:, o + 3] = -_div(ubar, big_n)
            wd[:, o + 2] = np.where(has_u, -1.0 / n, 0.0)
            wd[:, o] = np.where(has_u, fbar / n, 0.0)
            w_a.append(np.nan_to_num(wa, nan=0.0, posinf=0.0, neginf=0.0))
            w_d.append(np.nan_to_num(wd, nan=0.0, posinf=0.0, neginf=0.0))
            means.append((ybar, ubar - fbar))
        scale = np.sqrt(_div(g, g - 1.0))

    def quad(u: F64, v: F64) -> F64:
        return np.einsum("li,lij,lj->l", u, gram, v)

    u = scale[:, 1:2] * w_a[1] - scale[:, 0:1] * w_a[0]
    p = scale[:, 1:2] * w_d[1]
    q = -scale[:, 0:1] * w_d[0]
    if lambda_rule == "joint":
        lam_t, lam_c = _box_minimize(
            quad(u, u), quad(u, p), quad(u, q), quad(p, p), quad(q, q), quad(p, q)
        )
    else:
        lam_c = np.clip(_div(-quad(w_a[0], w_d[0]), quad(w_d[0], w_d[0])), 0.0, 1.0)
        lam_t = np.clip(_div(-quad(w_a[1], w_d[1]), quad(w_d[1], w_d[1])), 0.0, 1.0)
    psi = u + lam_t[:, None] * p + lam_c[:, None] * q
    (yc, gap_c), (yt, gap_t) = means
    n = tot[:, [0, 5]]
    big_n = tot[:, [3, 8]]
    with np.errstate(invalid="ignore"):
        aug = (yt + np.where(lam_t > 0, lam_t * gap_t, 0.0)) - (
            yc + np.where(lam_c > 0, lam_c * gap_c, 0.0)
        )
    return {
        "naive_effect": yt - yc,
        "naive_var": np.maximum(quad(u, u), 0.0),
        "aug_effect": aug,
        "aug_var": np.maximum(quad(psi, psi), 0.0),
        "lam": np.column_stack([lam_c, lam_t]),
        "n": n,
        "N": big_n,
        "arm_units": s["labeled_users"],
        "valid": (n[:, 0] >= 2) & (n[:, 1] >= 2) & (g[:, 0] >= 2) & (g[:, 1] >= 2),
    }
