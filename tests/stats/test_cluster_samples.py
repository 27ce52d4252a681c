"""One pass per sample (``cluster_samples``): the all-code layout gives the same numbers.

``compare_arms`` reads each sample's per-cluster sums once (:func:`arm_samples`, shared by the
moments and the lambda-noise sums) and keeps a big unlabeled sample over all codes. Every printed
number must equal the touched-cluster layout (``DENSE_SHARE = inf``: the layout every sample had
before the one-pass change) to 1e-12, on designs with the edge cases of real tables; the
lambda-noise sums must equal an independent per-code oracle.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from pulse_ml.errors import PulseError
from pulse_ml.stats import cluster_samples
from pulse_ml.stats.arm_effect import compare_arms
from pulse_ml.stats.arm_inputs import Arm
from pulse_ml.stats.cluster_lin import labeled_cluster_lin
from pulse_ml.stats.cluster_moments import LIN, RAW_INDEX, cluster_sums

DESIGNS = {  # name: (labeled per arm, unlabeled per arm, users in the id space, options)
    "users in both arms": (200, 6_000, 600, {}),
    "users split by arm": (150, 4_000, 300, {"split": True}),
    "singleton clusters": (120, 3_000, 2_000, {}),  # most users have one session per arm
    "one unlabeled user": (120, 2_000, 150, {"one_unl_user": True}),
    "one unlabeled session": (100, 1, 60, {}),
    "unlabeled without ids": (100, 3_000, 80, {"no_unl_ids": True}),
    "weighted": (150, 4_000, 400, {"weights": True}),
    "one labeled user": (50, 2_000, 100, {"one_lab_user": True}),
}


def _arms(seed: int, n: int, big_n: int, users: int, opts: dict) -> list[Arm]:
    rng = np.random.default_rng(seed)
    out = []
    for a, shift in enumerate((0.0, 0.3)):
        x = rng.normal(size=n + big_n)
        y = np.clip(np.round(3.5 + shift + x + rng.normal(size=n + big_n)), 1, 5)
        f = 3.5 + 0.8 * x + 0.4 * rng.normal(size=n + big_n)
        lo = a * users if opts.get("split") else 0
        u = rng.integers(lo, lo + users, n + big_n)
        if opts.get("one_unl_user"):
            u[n:] = lo + 1
        if opts.get("one_lab_user") and a == 1:
            u[:n] = lo
        w = rng.uniform(0.5, 2.0, n) if opts.get("weights") else None
        out.append(Arm(y[:n], f[:n], f[n:], users=u[:n],
                       users_unl=None if opts.get("no_unl_ids") else u[n:], w=w))
    return out


def _flat(result) -> dict:
    """Every number of a comparison (nested dataclasses and tuples flattened)."""
    out = {}

    def walk(value, key):
        if dataclasses.is_dataclass(value):
            for f in dataclasses.fields(value):
                walk(getattr(value, f.name), f"{key}.{f.name}")
        elif isinstance(value, tuple):
            for i, v in enumerate(value):
                walk(v, f"{key}[{i}]")
        else:
            out[key] = value

    walk(result, "")
    return out


def _run(arms: list[Arm], opts: dict):
    try:
        return _flat(compare_arms(*arms, **opts))
    except PulseError as err:
        return str(err)


@pytest.mark.parametrize("design", list(DESIGNS))
@pytest.mark.parametrize("opts", [{}, {"cr2": False}, {"lambda_noise": False},
                                  {"lam_mode": "per_arm"}, {"small_sample": False}],
                         ids=["default", "cr1", "no-noise", "per-arm", "asymptotic"])
def test_all_code_layout_equals_touched_layout(design, opts, monkeypatch):
    n, big_n, users, how = DESIGNS[design]
    for seed in range(3):
        arms = _arms(seed, n, big_n, users, how)
        fast = _run(arms, opts)
        with monkeypatch.context() as patch:
            patch.setattr(cluster_samples, "DENSE_SHARE", float("inf"))
            touched = _run(arms, opts)
        if isinstance(touched, str):  # a refusal: the same one
            assert fast == touched
            continue
        assert fast.keys() == touched.keys()
        for key, value in touched.items():
            if isinstance(value, float):
                assert fast[key] == pytest.approx(value, rel=1e-12, abs=1e-12, nan_ok=True), key
            else:
                assert fast[key] == value, key


def test_designs_use_the_all_code_layout():
    # the equality above is only a test if the default run takes the dense path
    n, big_n, users, how = DESIGNS["users in both arms"]
    arm = _arms(0, n, big_n, users, how)[0]
    sample = cluster_samples.unlabeled_sample(np.asarray(arm.users_unl), np.asarray(
        arm.f_unl)[None], users)
    assert sample.dense and sample.sums.shape[1] == users


@pytest.mark.parametrize("n_unl", [0, 1, 5_000])
def test_lambda_noise_sums_equal_per_code_oracle(n_unl):
    rng = np.random.default_rng(4)
    n, n_codes, r = 80, 500, 2
    arms = []
    for _ in range(2):
        arms.append((rng.integers(0, n_codes, n), rng.normal(size=(r, n)),
                     rng.normal(size=(r, n)), rng.uniform(0.5, 2, (r, n)),
                     rng.integers(0, n_codes, n_unl), rng.normal(size=(r, n_unl))))
    got = labeled_cluster_lin(arms, n_codes)
    labeled = np.unique(np.concatenate([arm[0] for arm in arms]))
    cols = [RAW_INDEX[c] for c in LIN]
    oracle = np.concatenate([cluster_sums(*arm, n_codes)[:, labeled][..., cols]
                             for arm in arms], axis=-1)
    np.testing.assert_allclose(got, oracle, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("design", ["users in both arms", "singleton clusters",
                                    "one unlabeled user", "weighted"])
def test_centering_block_by_block_equals_one_block(design, monkeypatch):
    # big samples are centered and summed in blocks (no full-size centered copy): the
    # numbers must not depend on the block size
    n, big_n, users, how = DESIGNS[design]
    arms = _arms(7, n, big_n, users, how)
    one = _flat(compare_arms(*arms))
    monkeypatch.setattr(cluster_samples, "_SPAN", 97)
    blocks = _flat(compare_arms(*arms))
    for key, value in one.items():
        if isinstance(value, float):
            assert blocks[key] == pytest.approx(value, rel=1e-12, abs=1e-12, nan_ok=True), key
        else:
            assert blocks[key] == value, key
