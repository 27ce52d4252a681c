"""A small paired comparison (80 users x 3 rated sessions) for tests of the train summary."""

from __future__ import annotations

import numpy as np

from pulse_ml.stats.paired import paired_bootstrap


def paired_sample(new_noise: float, seed: int = 3):
    """``paired_bootstrap`` of a new model (noise sd ``new_noise``) vs a reference (sd 1)."""
    rng = np.random.default_rng(seed)
    users = np.repeat(np.arange(80), 3)
    y = rng.integers(1, 6, users.size).astype(float)
    ref = y + rng.normal(0, 1.0, users.size)
    new = y + rng.normal(0, new_noise, users.size)
    return paired_bootstrap(y, new, ref, users, n_boot=200, seed=0)
