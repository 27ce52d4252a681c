"""Moments of random halves: every replication of an audit is one 0/1 mask product.

The audits (:mod:`~pulse_ml.stats.split_half`, :mod:`~pulse_ml.stats.half_checks`,
:mod:`~pulse_ml.stats.consistency`) switch whole units (users, or sessions) between two states
-- in the half or not, labels kept or hidden -- so every replication's statistics are
``state0 + mask @ (state1 - state0)`` over the units (the engine's
:class:`~pulse_ml.stats.cluster_moments.Moments` add over clusters) and all replications are
solved in one vectorized pass. Here: the two arms prepared once (:func:`prepare_arms`), the
units and their strata (:func:`split_units`), random balanced halves (:func:`random_halves`),
and the per-unit moment differences (:func:`unit_diffs`, :func:`masked`).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from pulse_ml.stats import cluster_moments as cm
from pulse_ml.stats.arm_inputs import Arm, cluster_codes

__all__ = ["mask_products", "masked", "prepare_arms", "random_halves", "split_units", "unit_diffs",
           "variance_codes"]


def _arrays(arm: Arm, name: str) -> tuple:
    if arm.users is None:
        raise ValueError(f"{name}: the audits split users: users (user ids of the labeled "
                         "sessions) and users_unl are required")
    y, f = np.asarray(arm.y, float), np.asarray(arm.f, float)
    f_unl = np.asarray(arm.f_unl, float)
    w = np.ones(y.size) if arm.w is None else np.asarray(arm.w, float)
    if not (y.size == f.size == w.size == np.asarray(arm.users).size):
        raise ValueError(f"{name}: y, f, users (and w) must have the same length")
    return y, f, w, np.asarray(arm.users), f_unl, np.asarray(arm.users_unl)


def prepare_arms(control: Arm, treatment: Arm) -> tuple[list[dict], tuple[float, float]]:
    """Both arms as centered arrays with shared integer user codes, and the centering constants.

    Returns:
        ``(arms, (cy, cf))``: per arm a dict of ``y``, ``f``, ``w``, ``fu`` (centered by the
        rating mean ``cy`` and prediction mean ``cf`` of the labeled sessions of both arms),
        ``user`` and ``user_unl`` codes.
    """
    arms = [_arrays(control, "control"), _arrays(treatment, "treatment")]
    keys = [arms[0][3], arms[0][5], arms[1][3], arms[1][5]]
    names = ["control.users", "control.users_unl", "treatment.users", "treatment.users_unl"]
    codes, n_users = cluster_codes(keys, [k.size for k in keys], names)
    cy = float(np.concatenate([arms[0][0], arms[1][0]]).mean())
    cf = float(np.concatenate([arms[0][1], arms[1][1]]).mean())
    out = []
    for a, (y, f, w, _, fu, _) in enumerate(arms):
        out.append({"y": y - cy, "f": f - cf, "w": w, "fu": fu - cf,
                    "user": codes[2 * a], "user_unl": codes[2 * a + 1]})
    del n_users
    return out, (cy, cf)


def variance_codes(arms: list[dict], clustered: bool) -> tuple[list, list, int]:
    """Cluster codes of the labeled and unlabeled sessions: users, or one per session."""
    if clustered:
        lab, unl = [arm["user"] for arm in arms], [arm["user_unl"] for arm in arms]
        return lab, unl, int(max(c.max(initial=-1) for c in lab + unl) + 1)
    sizes = [arms[0]["y"].size, arms[1]["y"].size, arms[0]["fu"].size, arms[1]["fu"].size]
    starts = np.concatenate([[0], np.cumsum(sizes)])
    codes = [starts[i] + np.arange(sizes[i]) for i in range(4)]
    return codes[:2], codes[2:], int(starts[-1])


def unit_diffs(arms: list[dict], clustered: bool, unit_l: list, unit_u: list | None,
                n_units: int, mode: str) -> tuple[cm.Moments, NDArray[np.float64]]:
    """Moments with every unit in state 0, and per-unit flat differences state 1 - state 0.

    Modes (state 1 = the unit is "in"): ``"labels"``: the unit's labels are in, unlabeled
    sessions always count; ``"sessions"``: the unit's labeled and unlabeled sessions are in;
    ``"hide"``: labels in, or hidden (their predictions join the unlabeled pool).

    Returns:
        ``(base, diff)`` with diff of shape (n_units, FLAT_SIZE): a replication with 0/1 unit mask M
        has moments ``base + M @ diff``.

    Raises:
        ValueError: If a variance cluster holds sessions of two units.
    """
    lab_codes, unl_codes, n_codes = variance_codes(arms, clustered)
    pairs = list(zip(lab_codes, unit_l, strict=True))
    if mode == "sessions":
        pairs += list(zip(unl_codes, unit_u, strict=True))
    codes = np.concatenate([c for c, _ in pairs])
    units = np.concatenate([u for _, u in pairs])
    varying, first = np.unique(codes, return_index=True)
    unit_of = np.full(n_codes, -1)
    unit_of[codes] = units
    if np.any(unit_of[codes] != units):
        raise ValueError("a variance cluster (user) has sessions in two split units: a "
                         "cluster-robust method needs the user split (clusters=True)")
    del first
    empty, none = np.zeros((1, 0)), np.zeros(0, np.intp)
    lab = np.stack([cm.cluster_sums(cl, arm["y"][None], arm["f"][None], arm["w"][None], none,
                                    empty, n_codes)[:, varying]
                    for arm, cl in zip(arms, lab_codes, strict=True)], axis=2)
    unl = np.stack([cm.cluster_sums(none, empty, empty, empty, cu, arm["fu"][None],
                                    n_codes)[:, varying]
                    for arm, cu in zip(arms, unl_codes, strict=True)], axis=2)
    state1 = lab + unl
    state0 = np.zeros_like(unl) if mode == "sessions" else unl.copy()
    base_unl = []
    for arm, cl, cu in zip(arms, lab_codes, unl_codes, strict=True):
        fu, cu_all = arm["fu"], cu
        if mode == "hide":
            fu, cu_all = np.concatenate([arm["fu"], arm["f"]]), np.concatenate([cu, cl])
        elif mode == "sessions":
            fu, cu_all = fu[:0], cu[:0]
        base_unl.append((none, empty, empty, empty, cu_all, fu[None]))
    if mode == "hide":
        for raw_l, raw_u in (("m", "mu"), ("sf", "su"), ("sff", "suu")):
            state0[..., cm.RAW_INDEX[raw_u]] += lab[..., cm.RAW_INDEX[raw_l]]
    order = np.argsort(unit_of[varying], kind="stable")
    sorted_units = unit_of[varying][order]
    diff = np.zeros((n_units, cm.FLAT_SIZE))
    step = max(1, 20_000)
    for i in range(0, varying.size, step):
        idx = order[i : i + step]
        part = cm.per_cluster(state1[:, idx]).flat()[0] - cm.per_cluster(state0[:, idx]).flat()[0]
        u = sorted_units[i : i + step]
        starts = np.flatnonzero(np.r_[True, u[1:] != u[:-1]])
        diff[u[starts]] += np.add.reduceat(part, starts, axis=0)
    return cm.session_moments(base_unl, n_codes), diff


_MASK_VALUES = 1 << 22  # mask entries cast to float at a time (bounded memory)


def mask_products(mask: NDArray[np.bool_], per_unit: NDArray[np.float64],
                  units: NDArray[np.intp] | None = None) -> NDArray[np.float64]:
    """``mask[:, units] @ per_unit`` (all units when ``None``), shape (R, k).

    The 0/1 mask is cast to float a block of replications at a time, so memory stays bounded
    (a float copy of 1,000 splits of 60,000 users is 480 MB) and the block is reused.
    """
    r = mask.shape[0]
    n_units = mask.shape[1] if units is None else units.size
    out = np.empty((r, per_unit.shape[1]))
    step = max(1, _MASK_VALUES // max(n_units, 1))
    for start in range(0, r, step):
        block = mask[start : start + step]
        out[start : start + step] = (block if units is None else block[:, units]).astype(
            float) @ per_unit
    return out


def masked(base: cm.Moments, diff: NDArray[np.float64], mask: NDArray[np.bool_]
           ) -> cm.Moments:
    """Moments of each replication: ``base + mask @ diff`` (mask: (R, units), True = in)."""
    return cm.Moments.unflat(base.flat() + mask_products(mask, diff))


_DRAWS = 1 << 22  # uniform draws per block of replications (bounded memory)


def random_halves(rng: np.random.Generator, strata: NDArray[np.intp], replications: int,
            share: float = 0.5) -> NDArray[np.bool_]:
    """Random halves of the units, balanced within each stratum: (R, units), True = half A.

    Half A gets ``floor(share * units)`` of each stratum (``share = 0.5``: equal halves): per
    replication the units with the smallest uniform draws. The draws are taken a block of
    replications at a time in the order of one ``rng.random((R, units))`` call per stratum, and
    a partial sort picks the smallest (:func:`_smallest`), so the halves are those of ranking
    all draws (``argsort().argsort() < k``) in time linear in the units and bounded memory.
    """
    mask = np.zeros((replications, strata.size), dtype=bool)
    for s in np.unique(strata):
        idx = np.flatnonzero(strata == s)
        k = int(share * idx.size)
        step = max(1, _DRAWS // max(idx.size, 1))
        for start in range(0, replications, step):
            draws = rng.random((min(step, replications - start), idx.size))
            mask[start : start + draws.shape[0], idx] = _smallest(draws, k)
    return mask


def _smallest(draws: NDArray[np.float64], k: int) -> NDArray[np.bool_]:
    """True for the ``k`` smallest draws of each row: ``draws.argsort().argsort() < k``.

    ``np.partition`` finds each row's k-th smallest value; a row where it ties with another
    draw (probability ~ units^2 / 2^53) is ranked by the two argsorts instead.
    """
    rows, n = draws.shape
    if k <= 0 or k >= n:
        return np.full((rows, n), k >= n and n > 0)
    kth = np.partition(draws, k - 1, axis=1)[:, k - 1 : k]
    out = draws <= kth
    ties = np.flatnonzero(np.count_nonzero(out, axis=1) != k)
    if ties.size:
        out[ties] = draws[ties].argsort(axis=1).argsort(axis=1) < k
    return out


def split_units(arms: list[dict], clusters: bool) -> tuple[list, list, NDArray[np.intp]]:
    """Split units of the labeled / unlabeled sessions per arm and their strata.

    Users (codes shared by the arms) stratified by where they have labels (none, control only,
    treatment only, both), so each half gets half of each arm's labeled users; or, without
    clusters, labeled sessions stratified by arm (unlabeled sessions belong to no unit).
    """
    if clusters:
        unit_l, unit_u = [arm["user"] for arm in arms], [arm["user_unl"] for arm in arms]
        n_units = int(max(c.max(initial=-1) for c in unit_l + unit_u) + 1)
        strata = np.zeros(n_units, dtype=np.intp)
        strata[unit_l[0]] = 1
        strata[unit_l[1]] |= 2
        return unit_l, unit_u, strata
    n_c, n_t = arms[0]["y"].size, arms[1]["y"].size
    strata = np.repeat(np.array([1, 2], dtype=np.intp), [n_c, n_t])
    return [np.arange(n_c), n_c + np.arange(n_t)], [None, None], strata
