"""The vectorized engine: batch == one-at-a-time, sparse moments == dense, box least squares."""

from dataclasses import replace

import numpy as np
import pytest

from pulse_ml.stats import cluster_moments as cm
from pulse_ml.stats.arm_batch import compare_batch
from pulse_ml.stats.arm_effect import compare_arms
from pulse_ml.stats.arm_inputs import Arm
from pulse_ml.stats.effect_engine import _box_ls


def _shared_users(rng, reps):
    """Users in both arms, some only unlabeled, uneven sizes."""
    users = rng.integers(0, 40, 300)
    arm, lab = rng.integers(0, 2, 300), rng.random(300) < 0.3
    u = rng.normal(size=(reps, 40))[:, users]
    y = 3 + 0.2 * arm + u + rng.normal(size=(reps, 300))
    f = u + 0.5 * rng.normal(size=(reps, 300))
    w = rng.uniform(0.5, 3.0, 300)
    arms, kw, ws = [], {}, {}
    for a, name in ((0, "c"), (1, "t")):
        m_l, m_u = (arm == a) & lab, (arm == a) & ~lab
        arms += [y[:, m_l], f[:, m_l], f[:, m_u]]
        kw[f"clusters_{name}"], kw[f"clusters_unl_{name}"] = users[m_l], users[m_u]
        ws[f"w_{name}"] = w[m_l]
    return arms, kw, ws


@pytest.mark.parametrize(
    "opts",
    [{}, {"lam_mode": "per_arm"}, {"small_sample": False}, {"weights": True},
     {"clusters": False}, {"clusters": False, "small_sample": False, "lam_mode": "per_arm"}],
)
def test_stats_engine_batch_equals_compare_arms_row_by_row(opts):
    rng = np.random.default_rng(7)
    arms, kw, ws = _shared_users(rng, 5)
    opts = dict(opts)
    if not opts.pop("clusters", True):
        kw = {}
    if opts.pop("weights", False):
        kw = {**kw, **ws}
    pair = [Arm(*arms[3 * a : 3 * a + 3], users=kw.get(f"clusters_{s}"),
                users_unl=kw.get(f"clusters_unl_{s}"), w=kw.get(f"w_{s}"))
            for a, s in enumerate("ct")]
    batch = compare_batch(*pair, **opts)
    for r in range(5):
        one = compare_arms(*[replace(a, y=a.y[r], f=a.f[r], f_unl=a.f_unl[r]) for a in pair],
                           **opts)
        for est, lo, hi, eff in ((one.naive, batch.naive_lower, batch.naive_upper,
                                  batch.naive_effect),
                                 (one.augmented, batch.aug_lower, batch.aug_upper,
                                  batch.aug_effect)):
            assert est.effect == pytest.approx(eff[r], abs=1e-10)
            assert est.ci_lower == pytest.approx(lo[r], abs=1e-10)
            assert est.ci_upper == pytest.approx(hi[r], abs=1e-10)
        assert one.lambda_control == pytest.approx(batch.lam[r, 0], abs=1e-10)
        assert one.ci_reduction_pct == pytest.approx(batch.ci_reduction_pct[r], abs=1e-8)


def test_stats_engine_sparse_moments_equal_dense_per_cluster_sums():
    rng = np.random.default_rng(8)
    arms, kw, ws = _shared_users(rng, 3)
    codes = [kw["clusters_c"], kw["clusters_unl_c"], kw["clusters_t"], kw["clusters_unl_t"]]
    n_codes = 40
    per_arm = []
    for a in (0, 1):
        y, f, fu = arms[3 * a : 3 * a + 3]
        w = np.broadcast_to(ws["w_c" if a == 0 else "w_t"], y.shape)
        per_arm.append((codes[2 * a], y, f, w, codes[2 * a + 1], fu))
    sparse = cm.session_moments(per_arm, n_codes)
    dense = cm.per_cluster(np.stack([cm.cluster_sums(*arm, n_codes) for arm in per_arm], 2))
    np.testing.assert_allclose(sparse.flat(), dense.sum(1).flat(), rtol=1e-12, atol=1e-9)
    # flat/unflat round trip and additivity over disjoint cluster sets
    back = cm.Moments.unflat(sparse.flat())
    np.testing.assert_array_equal(back.gram, sparse.gram)
    first = cm.Moments.unflat(dense.flat()[:, :20].sum(1))
    rest = cm.Moments.unflat(dense.flat()[:, 20:].sum(1))
    np.testing.assert_allclose((first + rest).flat(), sparse.flat(), rtol=1e-12, atol=1e-9)


def test_stats_engine_box_least_squares_matches_grid_search():
    rng = np.random.default_rng(9)
    m = 400
    a = rng.normal(size=(m, 3, 3))
    gram = np.einsum("rik,rjk->rij", a, a)  # random PSD 3x3: (r, x_t, x_c)
    s = {"rt": gram[:, 0, 1], "rc": gram[:, 0, 2], "tt": gram[:, 1, 1], "cc": gram[:, 2, 2],
         "tc": gram[:, 1, 2]}
    ub_t = np.where(rng.random(m) < 0.2, 0.0, 1.0)
    ub_c = np.ones(m)
    lt, lc = _box_ls(s, ub_t, ub_c)

    def q(lt, lc):
        return (gram[:, 0, 0] + 2 * lt * s["rt"] + 2 * lc * s["rc"] + lt**2 * s["tt"]
                + 2 * lt * lc * s["tc"] + lc**2 * s["cc"])

    grid = np.linspace(0, 1, 201)
    best = np.full(m, np.inf)
    for g_t in grid:
        for g_c in grid:
            best = np.minimum(best, q(np.minimum(g_t, ub_t), g_c))
    assert np.all((lt >= 0) & (lt <= ub_t) & (lc >= 0) & (lc <= 1))
    assert np.all(q(lt, lc) <= best + 1e-12)
    assert np.all(q(lt, lc) <= gram[:, 0, 0] + 1e-12)  # (0, 0) is feasible
