"""compare_oof resamples users when it knows them, and says (or refuses) when it does not."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pulse_ml.errors import PulseError
from pulse_ml.training.paired import PairedSettings, compare_oof, has_users


def _tables():
    """120 users x 4 sessions; both predictors' errors share a per-user part (clustering)."""
    rng = np.random.default_rng(5)
    users = np.repeat(np.arange(120), 4)
    y = rng.integers(1, 6, users.size).astype(float)
    shared = rng.normal(0, 0.8, 120)[users]
    sid = [f"s{i}" for i in range(users.size)]
    new = pd.DataFrame({"session_id": sid, "rating": y,
                        "prediction": y + shared + rng.normal(0, 0.3, users.size)})
    ref = pd.DataFrame({"session_id": sid, "rating": y,
                        "prediction": y + 0.5 * shared + rng.normal(0, 0.3, users.size)})
    return new, ref, pd.Series([f"u{u}" for u in users], index=sid)


def test_users_from_a_mapping_or_the_tables_else_sessions():
    new, ref, users = _tables()
    settings = PairedSettings(n_boot=1000, seed=0)
    assert not has_users(new, ref) and has_users(new, ref, users)
    by_users = compare_oof(new, ref, users, settings)
    from_column = compare_oof(new.assign(user_id=users.to_numpy()), ref, settings=settings)
    by_sessions = compare_oof(new, ref, settings=settings)
    assert by_users.n_groups == from_column.n_groups == 120 and by_sessions.n_groups == 480
    assert by_users.mse_ci_lower == pytest.approx(from_column.mse_ci_lower)
    # the user-level part of the error makes the session bootstrap too narrow (this seeded
    # draw: the user interval is 1.63 times as wide)
    width = by_users.mse_ci_upper - by_users.mse_ci_lower
    assert width > 1.3 * (by_sessions.mse_ci_upper - by_sessions.mse_ci_lower)
    with pytest.raises(PulseError, match="no user_id column"):
        compare_oof(new, ref, settings=settings, require_users=True)
