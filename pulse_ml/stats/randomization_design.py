"""Per-unit moments for randomization inference: every re-randomization is a 0/1 mask product.

The effect engine (:mod:`pulse_ml.stats.effect_engine`) reads only sums over clusters
(:class:`~pulse_ml.stats.cluster_moments.Moments`). When whole units (users, or sessions) are
re-assigned to arms and the units are the variance clusters, every field of the moments of an
assignment ``z`` (1 = treatment) is

    sum over treated units of the unit's moments placed in the treatment slot
    + sum over control units of the same moments placed in the control slot,

so with ``X`` = the units' moments in the treatment layout, the treated part is ``z @ X`` and the
control part ``(1 @ X - z @ X)`` moved to the control layout. Under the hypothesis of a constant
effect ``tau`` the ratings of units observed in treatment become ``y - tau``; the moments are
polynomials of degree 2 in ``tau`` (sums, and products of two sums), so
``X(tau) = A + tau B + tau^2 C`` with ``B = C = 0`` for units observed in control, and one matrix
product ``z @ [A | B | C]`` serves every ``tau``.

The layout (which flat columns belong to which arm, which are arm-free) is read off
:func:`~pulse_ml.stats.cluster_moments.per_cluster` itself on a probe, so the engine's fields can
change without this module knowing them (only their additivity over clusters is assumed).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from itertools import combinations

import numpy as np
from numpy.typing import NDArray

from pulse_ml.errors import PulseError
from pulse_ml.stats import cluster_moments as cm
from pulse_ml.stats.arm_inputs import Arm, cluster_codes
from pulse_ml.stats.ppi import as_vector

__all__ = ["Prepared", "UnitDesign", "assignment_products", "prepare", "unit_design"]

Array = NDArray[np.float64]
_I = cm.RAW_INDEX
_CELLS = 4_000_000  # mask cells per matrix product (memory bound)
_UNIT_CHUNK = 20_000  # units per per_cluster call


def _flat(raw: Array, arm: int) -> Array:
    """Flat moments of each unit alone, its raw sums (G, 12) placed in ``arm``: (G, FLAT)."""
    sums = np.zeros((1, raw.shape[0], 2, raw.shape[1]))
    sums[0, :, arm, :] = raw
    return cm.per_cluster(sums).flat()[0]


@lru_cache(maxsize=1)
def _layout() -> tuple[NDArray[np.intp], NDArray[np.intp], NDArray[np.intp], NDArray[np.intp]]:
    """Where each arm's moments sit in the flat layout (read off a probe).

    Returns:
        ``(own_t, shared, own_c, source_t)``: flat columns of the treatment arm, arm-free ones,
        control columns and, for each control column, the treatment column of the same value.
    """
    rng = np.random.default_rng(20260101)
    raw = rng.uniform(0.5, 2.0, (16, len(cm.RAW)))
    raw[:5, :9] = 0.0  # unlabeled-only units
    raw[5:9, 9:] = 0.0  # labeled-only units
    f_t, f_c = _flat(raw, 1), _flat(raw, 0)
    nz_t, nz_c = np.any(f_t != 0, axis=0), np.any(f_c != 0, axis=0)
    shared = np.flatnonzero(nz_t & nz_c & np.all(f_t == f_c, axis=0))
    own_t = np.flatnonzero(nz_t & ~np.isin(np.arange(f_t.shape[1]), shared))
    own_c = np.flatnonzero(nz_c & ~np.isin(np.arange(f_c.shape[1]), shared))
    source = np.empty(own_c.size, dtype=np.intp)
    for i, k in enumerate(own_c):
        match = own_t[np.all(f_t[:, own_t] == f_c[:, [k]], axis=0)]
        if match.size == 0:
            raise RuntimeError("cluster moments are not symmetric in the arms")
        source[i] = match[0]
    return own_t, shared, own_c, source


def _shifted(raw: Array, tau: float) -> Array:
    """Raw sums after ``y -> y - tau`` (only the rating sums move)."""
    out = raw.copy()
    out[:, _I["swy"]] -= tau * raw[:, _I["sw"]]
    out[:, _I["sy"]] -= tau * raw[:, _I["m"]]
    out[:, _I["syy"]] += -2.0 * tau * raw[:, _I["sy"]] + tau**2 * raw[:, _I["m"]]
    return out


def _unique_columns(x: Array) -> tuple[NDArray[np.intp], NDArray[np.intp], Array]:
    """Nonzero columns of ``x`` up to sign: ``(kept, representative of each, sign)``.

    Returns the kept columns, and for every column of ``x`` the index into ``kept`` (-1 = zero
    column) and the sign. Identical columns (a Gram matrix is symmetric) cost one product.
    """
    n_col = x.shape[1]
    rep, sign = np.full(n_col, -1, dtype=np.intp), np.zeros(n_col)
    nonzero = np.flatnonzero(np.any(x != 0, axis=0))
    key = np.random.default_rng(1).standard_normal(x.shape[0]) @ x
    kept: list[int] = []
    by_key: dict[float, list[int]] = {}
    for j in nonzero:
        found = False
        for k in by_key.get(abs(float(key[j])), []):
            for s in (1.0, -1.0):
                if np.array_equal(x[:, j], s * x[:, kept[k]]):
                    rep[j], sign[j], found = k, s, True
                    break
            if found:
                break
        if not found:
            by_key.setdefault(abs(float(key[j])), []).append(len(kept))
            rep[j], sign[j] = len(kept), 1.0
            kept.append(int(j))
    return np.asarray(kept, dtype=np.intp), rep, sign


@dataclass(frozen=True)
class UnitDesign:
    """Per-unit moments of a case study, polynomial in the hypothesized effect.

    Attributes:
        groups: Per group of units (units with labeled sessions, units without):
            ``(slice of units, kept columns (G_k, C_k), representative map, signs)``; the
            columns are those of ``[A | B | C]`` (3 x FLAT) in the treatment layout.
            Units are stored labeled first (the order of :attr:`treated`).
        totals: ``1 @ [A | B | C]`` over all units, shape (3 * FLAT,).
        treated: Observed assignment (1 = treatment), shape (G,).
        labeled: Whether each unit has a labeled session, shape (G,).
    """

    groups: tuple[tuple[slice, Array, NDArray[np.intp], Array], ...]
    totals: Array
    treated: NDArray[np.float64]
    labeled: NDArray[np.bool_]

    @property
    def n_units(self) -> int:
        """Number of randomized units G."""
        return int(self.treated.size)

    def products(self, masks: NDArray[np.float64]) -> Array:
        """``masks @ [A | B | C]`` for assignments of shape (R, G): (R, 3 * FLAT)."""
        out = np.zeros((masks.shape[0], self.totals.size))
        for idx, cols, rep, sign in self.groups:
            if not cols.shape[0] or not cols.shape[1]:
                continue
            part = masks[:, idx] @ cols
            used = rep >= 0
            out[:, used] += part[:, rep[used]] * sign[used]
        return out

    def flat_moments(self, products: Array, taus: Array) -> Array:
        """Flat engine moments, shape (k, R, FLAT), of R assignments at k effects ``taus``.

        Args:
            products: :meth:`products` of the assignments, shape (R, 3 * FLAT).
            taus: Hypothesized constant effects, shape (k,).
        """
        own_t, shared, own_c, source = _layout()
        size = products.shape[1] // 3
        tau = np.asarray(taus, float)[:, None, None]
        t_part = (products[None, :, :size] + tau * products[None, :, size : 2 * size]
                  + tau**2 * products[None, :, 2 * size :])
        tot = self.totals
        s_all = (tot[:size] + tau[:, :, 0] * tot[size : 2 * size]
                 + tau[:, :, 0] ** 2 * tot[2 * size :])  # (k, FLAT)
        flat = np.zeros(t_part.shape)
        flat[:, :, own_t] = t_part[:, :, own_t]
        flat[:, :, shared] = s_all[:, None, shared]
        flat[:, :, own_c] = s_all[:, None, source] - t_part[:, :, source]
        return flat


def unit_design(raw: Array, treated: NDArray[np.bool_]) -> UnitDesign:
    """Per-unit moments from per-unit raw sums.

    Args:
        raw: Per-unit :data:`~pulse_ml.stats.cluster_moments.RAW` sums (unweighted, ratings and
            predictions centered by constants), shape (G, 12).
        treated: Observed arm of each unit (True = treatment), shape (G,).

    Returns:
        The design (kept columns of ``[A | B | C]`` per group of units).
    """
    treated = np.asarray(treated, bool)
    labeled = raw[:, _I["m"]] > 0
    order = np.concatenate([np.flatnonzero(labeled), np.flatnonzero(~labeled)])
    raw, treated, labeled = raw[order], treated[order], labeled[order]
    size = cm.FLAT_SIZE
    shift = treated & labeled  # only rated sessions of treated units move with tau
    groups = []
    totals = np.zeros(3 * size)
    n_lab = int(labeled.sum())
    for idx in (slice(0, n_lab), slice(n_lab, labeled.size)):
        units = np.arange(labeled.size)[idx]
        x = np.zeros((units.size, 3 * size))
        for start in range(0, units.size, _UNIT_CHUNK):
            sl = units[start : start + _UNIT_CHUNK]
            rows = slice(start, start + sl.size)
            x[rows, :size] = _flat(raw[sl], 1)
            moving = np.flatnonzero(shift[sl])
            if moving.size:
                r = raw[sl[moving]]
                up, down = _flat(_shifted(r, 1.0), 1), _flat(_shifted(r, -1.0), 1)
                base = x[rows, :size][moving]
                x[start + moving, size : 2 * size] = (up - down) / 2.0
                x[start + moving, 2 * size :] = (up + down) / 2.0 - base
        totals += x.sum(axis=0)
        kept, rep, sign = _unique_columns(x)
        groups.append((idx, np.ascontiguousarray(x[:, kept]), rep, sign))
    return UnitDesign(tuple(groups), totals, treated.astype(float), labeled)


def assignment_products(design: UnitDesign, n_permutations: int, seed: int,
                        max_exhaustive: int) -> tuple[Array, bool]:
    """``masks @ [A | B | C]`` of the observed assignment (row 0) and those it is compared with.

    Complete randomization with the observed number of treated units: when there are at most
    ``max_exhaustive + 1`` such assignments, all of them (except the observed one) are listed
    (exact p-values); otherwise ``n_permutations`` random permutations of the observed one
    (``Generator.permuted`` row by row, in chunks that bound memory).

    Returns:
        ``(products of shape (R + 1, 3 * FLAT), exhaustive)``.
    """
    treated = design.treated
    g, n_t = treated.size, int(treated.sum())
    parts = [design.products(treated[None, :])]
    few = math.lgamma(g + 1) - math.lgamma(n_t + 1) - math.lgamma(g - n_t + 1) < 40
    if few and math.comb(g, n_t) - 1 <= max_exhaustive:
        rows = np.zeros((math.comb(g, n_t), g))
        for i, chosen in enumerate(combinations(range(g), n_t)):
            rows[i, list(chosen)] = 1.0
        rows = rows[np.any(rows != treated[None, :], axis=1)]
        parts.append(design.products(rows))
        return np.vstack(parts), True
    rng = np.random.default_rng(seed)
    step = max(1, _CELLS // g)
    for start in range(0, n_permutations, step):
        b = min(step, n_permutations - start)
        parts.append(design.products(_complete_masks(rng, b, g, n_t).astype(float)))
    return np.vstack(parts), False


def _complete_masks(rng: np.random.Generator, b: int, g: int, n_t: int) -> NDArray[np.bool_]:
    """``b`` uniformly random subsets of size ``n_t`` of ``g`` units, as boolean rows.

    Bernoulli draws (one byte each, the fastest numpy generator) whose count is then corrected
    by dropping (adding) uniformly chosen selected (unselected) units: the procedure is
    exchangeable in the units and always returns ``n_t`` of them, so every subset of that size
    is equally likely, as under ``Generator.permuted`` at a fraction of its cost.
    """
    base = np.arange(g) < n_t
    if g <= 4096:  # few units: Fisher-Yates per row is cheap
        return rng.permuted(np.broadcast_to(base, (b, g)), axis=1)
    threshold = int(np.clip(round(256 * n_t / g), 1, 255))
    rows = rng.integers(0, 256, (b, g), dtype=np.uint8) < threshold
    counts = rows.sum(axis=1)
    for i in np.flatnonzero(counts != n_t):
        extra = int(counts[i]) - n_t
        pool = np.flatnonzero(rows[i] if extra > 0 else ~rows[i])
        rows[i, rng.choice(pool, abs(extra), replace=False)] = extra < 0
    return rows


@dataclass(frozen=True)
class Prepared:
    """A case study ready for re-randomization: per-unit moments and the assignment products.

    Attributes:
        design: Per-unit moments (:class:`~pulse_ml.stats.randomization_design.UnitDesign`).
        products: ``masks @ [A | B | C]``, observed assignment first, shape (R + 1, 3 FLAT).
        clustered: Units are users (else sessions).
        exhaustive: The R assignments are all other assignments.
        n_units: Units observed in (control, treatment).
    """

    design: UnitDesign
    products: NDArray[np.float64]
    clustered: bool
    exhaustive: bool
    n_units: tuple[int, int]


def prepare(
    control: Arm,
    treatment: Arm,
    *,
    n_permutations: int = 2000,
    seed: int = 0,
    max_exhaustive: int | None = None,
) -> Prepared:
    """Per-unit moments and assignment products of a case study.

    Arguments as :func:`pulse_ml.stats.randomization.randomization_inference`.

    Returns:
        The prepared case study.

    Raises:
        PulseError: A unit with sessions in both arms, or an arm with fewer than 2 labeled
            units.
    """
    if n_permutations < 1:
        raise ValueError(f"n_permutations must be >= 1, got {n_permutations}")
    yc, fc, yt, ft = (as_vector(v, n) for v, n in ((control.y, "y_c"), (control.f, "f_c"),
                                                    (treatment.y, "y_t"), (treatment.f, "f_t")))
    fuc, fut = as_vector(control.f_unl, "f_unl_c"), as_vector(treatment.f_unl, "f_unl_t")
    keys = [control.users, control.users_unl, treatment.users, treatment.users_unl]
    clustered = any(k is not None for k in keys)
    (cl_c, cu_c, cl_t, cu_t), n_codes = cluster_codes(
        keys, [yc.size, fuc.size, yt.size, fut.size],
        ["units_c", "units_unl_c", "units_t", "units_unl_t"])
    in_c, in_t = np.zeros(n_codes, bool), np.zeros(n_codes, bool)
    in_c[np.concatenate([cl_c, cu_c])] = True
    in_t[np.concatenate([cl_t, cu_t])] = True
    if np.any(in_c & in_t):
        raise PulseError(f"{int(np.sum(in_c & in_t))} randomized unit(s) have sessions in both "
                         "arms, so the units were not randomized as declared.")
    for name, cl in (("control", cl_c), ("treatment", cl_t)):
        if np.unique(cl).size < 2:
            raise PulseError(f"{name} arm: {np.unique(cl).size} labeled "
                             f"{'user' if clustered else 'session'}(s); randomization inference "
                             "needs at least 2 per arm.")
    cy, cf = float(np.concatenate([yc, yt]).mean()), float(np.concatenate([fc, ft]).mean())
    y, f = np.concatenate([yc, yt]) - cy, np.concatenate([fc, ft]) - cf
    raw = cm.cluster_sums(np.concatenate([cl_c, cl_t]), y[None], f[None], np.ones((1, y.size)),
                          np.concatenate([cu_c, cu_t]), np.concatenate([fuc, fut])[None] - cf,
                          n_codes)[0]
    design = unit_design(raw, in_t)
    products, exhaustive = assignment_products(
        design, n_permutations, seed,
        n_permutations if max_exhaustive is None else max_exhaustive)
    return Prepared(design, products, clustered, exhaustive, (int(in_c.sum()), int(in_t.sum())))
