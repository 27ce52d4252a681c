"""Random halves by partial sort equal the halves of ranking every draw (same seed, same mask)."""

from __future__ import annotations

import numpy as np
import pytest

from pulse_ml.stats import half_moments as hm


def _ranked(rng: np.random.Generator, strata, replications: int, share: float):
    """The definition: per stratum, units whose draw ranks below floor(share * units)."""
    mask = np.zeros((replications, strata.size), dtype=bool)
    for s in np.unique(strata):
        idx = np.flatnonzero(strata == s)
        ranks = rng.random((replications, idx.size)).argsort(axis=1).argsort(axis=1)
        mask[:, idx] = ranks < int(share * idx.size)
    return mask


@pytest.mark.parametrize("units,replications,share", [
    (1, 5, 0.5), (2, 7, 0.5), (9, 100, 0.5), (1_000, 300, 0.5), (5_000, 40, 0.3)])
@pytest.mark.parametrize("block", [997, 1 << 22])  # many blocks of replications, or one
def test_random_halves_equal_ranking_every_draw(units, replications, share, block,
                                                monkeypatch):
    strata = np.random.default_rng(1).integers(0, 4, units)
    monkeypatch.setattr(hm, "_DRAWS", block)
    got = hm.random_halves(np.random.default_rng(3), strata, replications, share)
    np.testing.assert_array_equal(got, _ranked(np.random.default_rng(3), strata, replications,
                                               share))
    per_stratum = [got[:, strata == s].sum(axis=1) for s in np.unique(strata)]
    assert all((c == int(share * (strata == s).sum())).all()
               for c, s in zip(per_stratum, np.unique(strata), strict=True))


def test_smallest_ranks_tied_rows_like_argsort():
    draws = np.random.default_rng(0).integers(0, 4, (200, 30)).astype(float)  # many ties
    for k in (0, 1, 15, 29, 30):
        expected = draws.argsort(axis=1).argsort(axis=1) < k
        np.testing.assert_array_equal(hm._smallest(draws, k), expected)
