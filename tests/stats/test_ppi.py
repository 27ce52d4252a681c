"""pulse_ml.stats.ppi equals ppi_py 0.2.3 (the oracle, imported only here) to 1e-10."""

import importlib
import json
import warnings

import numpy as np
import pytest

from pulse_ml.errors import PulseError
from pulse_ml.stats.ppi import (
    classical_mean_ci,
    ppi_mean,
    ppi_mean_ci,
    ppi_mean_pointestimate,
    ppi_power_tuned_lambda,
)
from tests.conftest import needs_shared, shared_path

TOL = 1e-10
DATA_DIR = shared_path("data/real/ppi-datasets")
REFERENCE = DATA_DIR / "reference_ppi_py_0.2.3.json"


@pytest.fixture(scope="module")
def ppi_py():
    # ppi_py calls warnings.simplefilter("ignore") on import: keep that inside this block.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return importlib.import_module("ppi_py")


def _load_cases():
    if not REFERENCE.is_file():
        return []
    return json.loads(REFERENCE.read_text())["cases"]


def _split(case):
    name = case["dataset"].split(".npz")[0]
    data = np.load(DATA_DIR / f"{name}.npz")
    if "Y_labeled" in data:  # ballots: fixed split
        return data["Y_labeled"], data["Yhat_labeled"], data["Yhat_unlabeled"]
    idx = np.load(DATA_DIR / "reference_splits.npz")[f"{name}_seed{case['seed']}"]
    lab, unl = idx[: case["n_labeled"]], idx[case["n_labeled"] :]
    return data["Y"][lab], data["Yhat"][lab], data["Yhat"][unl]


CASES = _load_cases()
needs_data = needs_shared("data/real/ppi-datasets/reference_ppi_py_0.2.3.json")


@needs_data
@pytest.mark.parametrize(
    "case",
    CASES,
    ids=[
        c["dataset"].split(".npz")[0] + str(c.get("seed", "")) + f"_n{c['n_labeled']}"
        for c in CASES
    ],
)
def test_stats_ppi_real_datasets_match_reference_and_live_ppi_py(case, ppi_py):
    y, f, fu = _split(case)
    assert y.size == case["n_labeled"] and fu.size == case["N_unlabeled"]
    alpha = case["alpha"]
    ours = {
        "ppi_pp_ci": ppi_mean_ci(y, f, fu, alpha=alpha),
        "ppi_pp_point": ppi_mean_pointestimate(y, f, fu),
        "ppi_lam1_ci": ppi_mean_ci(y, f, fu, alpha=alpha, lam=1),
        "ppi_lam1_point": ppi_mean_pointestimate(y, f, fu, lam=1),
        "classical_ci": classical_mean_ci(y, alpha=alpha),
    }
    live = {
        "ppi_pp_ci": ppi_py.ppi_mean_ci(y, f, fu, alpha=alpha),
        "ppi_pp_point": ppi_py.ppi_mean_pointestimate(y, f, fu),
        "ppi_lam1_ci": ppi_py.ppi_mean_ci(y, f, fu, alpha=alpha, lam=1),
        "ppi_lam1_point": ppi_py.ppi_mean_pointestimate(y, f, fu, lam=1),
        "classical_ci": ppi_py.classical_mean_ci(y, alpha=alpha),
    }
    for key, value in ours.items():
        ref = np.ravel(np.asarray(case[key], dtype=float))
        np.testing.assert_allclose(np.ravel(value), ref, rtol=0, atol=TOL, err_msg=key)
        np.testing.assert_allclose(
            np.ravel(value),
            np.ravel(np.asarray(live[key], dtype=float)),
            rtol=0,
            atol=TOL,
            err_msg=key,
        )
    assert np.mean(y) == pytest.approx(case["labeled_mean"], abs=TOL)


@needs_data
def test_stats_ppi_real_data_tuned_interval_not_wider_than_classical():
    for case in CASES:
        y, f, fu = _split(case)
        lo, hi = ppi_mean_ci(y, f, fu, alpha=case["alpha"])
        clo, chi = classical_mean_ci(y, alpha=case["alpha"])
        assert hi - lo <= chi - clo + 1e-12


@pytest.mark.parametrize("n,N", [(5, 7), (50, 400), (300, 20000)])
@pytest.mark.parametrize("lam", [None, 1.0, 0.5, 0.0])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("alpha", [0.05, 0.1])
def test_stats_ppi_random_data_match_ppi_py(n, N, lam, weighted, alpha, ppi_py):
    rng = np.random.default_rng(n * 31 + N)
    y = rng.normal(3.0, 1.0, n)
    f = 0.7 * y + rng.normal(0.4, 0.8, n)
    fu = rng.normal(2.5, 1.1, N)
    w = rng.uniform(0.1, 3.0, n) if weighted else None
    wu = rng.uniform(0.1, 3.0, N) if weighted else None
    ci = ppi_mean_ci(y, f, fu, alpha=alpha, lam=lam, w=w, w_unlabeled=wu)
    ref_ci = ppi_py.ppi_mean_ci(y, f, fu, alpha=alpha, lam=lam, w=w, w_unlabeled=wu)
    np.testing.assert_allclose(ci, np.ravel(ref_ci), rtol=0, atol=TOL)
    pt = ppi_mean_pointestimate(y, f, fu, lam=lam, w=w, w_unlabeled=wu)
    ref_pt = ppi_py.ppi_mean_pointestimate(y, f, fu, lam=lam, w=w, w_unlabeled=wu)
    assert pt == pytest.approx(float(np.ravel(ref_pt)[0]), abs=TOL)
    c = classical_mean_ci(y, alpha=alpha, w=w)
    np.testing.assert_allclose(c, np.ravel(ppi_py.classical_mean_ci(y, w=w, alpha=alpha)), atol=TOL)


def test_stats_ppi_lambda_matches_ppi_py_internal_and_clips(ppi_py):
    rng = np.random.default_rng(0)
    y = rng.normal(size=200)
    for slope, expect in ((0.9, None), (-0.9, 0.0), (5.0, None)):
        f = slope * y + rng.normal(size=200)
        fu = slope * rng.normal(size=2000) + rng.normal(size=2000)
        lam = ppi_power_tuned_lambda(y, f, fu)
        assert 0.0 <= lam <= 1.0
        if expect is not None:
            assert lam == expect
        # the oracle's lambda: the interval with lam=None equals the one with our lambda
        np.testing.assert_allclose(
            np.ravel(ppi_py.ppi_mean_ci(y, f, fu, alpha=0.05)),
            np.ravel(ppi_py.ppi_mean_ci(y, f, fu, alpha=0.05, lam=lam)),
            atol=TOL,
        )
    # unclipped value for a good predictor: Cov(Y, f) / ((1 + n/N) Var(pooled f))
    f = 0.5 * y + 0.1 * rng.normal(size=200)
    fu = 0.5 * rng.normal(size=2000)
    pooled = np.concatenate([f, fu])
    expected = np.cov(y, f, ddof=0)[0, 1] / ((1 + 200 / 2000) * pooled.var(ddof=1))
    assert ppi_power_tuned_lambda(y, f, fu) == pytest.approx(min(1.0, expected), abs=1e-12)


def test_stats_ppi_se_formula_and_degenerate_predictions():
    rng = np.random.default_rng(1)
    y, f, fu = rng.normal(size=50), rng.normal(size=50), rng.normal(size=500)
    res = ppi_mean(y, f, fu, lam=0.3)
    expected = np.sqrt(np.var(y - 0.3 * f) / 50 + 0.09 * np.var(fu) / 500)
    assert res.se == pytest.approx(expected, rel=1e-12)
    const = ppi_mean(y, np.ones(50), np.ones(500))
    assert const.lam == 0.0
    assert const.estimate == pytest.approx(y.mean())


def test_stats_ppi_bad_inputs_raise_clear_errors():
    with pytest.raises(PulseError, match="Y: need at least 2"):
        ppi_mean_ci([1.0], [1.0], [1.0, 2.0])
    with pytest.raises(ValueError, match="Yhat has 2"):
        ppi_mean_ci([1.0, 2.0, 3.0], [1.0, 2.0], [1.0])
    with pytest.raises(PulseError, match="NaN"):
        ppi_mean_ci([1.0, np.nan], [1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="alpha"):
        ppi_mean_ci([1.0, 2.0], [1.0, 2.0], [1.0], alpha=1.5)
    with pytest.raises(PulseError, match="w: weights"):
        ppi_mean_ci([1.0, 2.0], [1.0, 2.0], [1.0], w=[-1.0, 2.0])
