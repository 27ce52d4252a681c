"""No library warnings on the demo's stderr (issue 24, "noise").

``train`` with one trial and ``infer`` on the small demo write nothing from a library to stderr
(scikit-learn's "groups parameter is ignored by KFold", pandas/pyspark FutureWarnings, MLflow's
or LiteLLM's notices); pulse-ml's own warnings are printed once, at most 100 columns wide.
"""

from __future__ import annotations

import re
import warnings

import numpy as np
import pandas as pd

from pulse_ml.jobs.infer import shift_warnings
from pulse_ml.training.folds import make_folds

# What a library's warning looks like on stderr: "UserWarning: ...", "warnings.warn(",
# "WARNING mlflow...", LiteLLM's cost-map notice.
LIBRARY_WARNING = re.compile(r"Warning\b|warnings\.warn|^WARNING |^\d{4}/\d\d/\d\d .* WARNING|"
                             r"LiteLLM|cost map|site-packages", re.M)


def library_lines(stderr: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if LIBRARY_WARNING.search(ln)]


def test_train_and_infer_on_the_demo_print_no_library_warning(small_demo, pulse_home, cli):
    # every user one session, as in the USS example: user-grouped CV falls back to KFold
    # (which printed scikit-learn's "groups parameter is ignored by KFold" per trial and fold)
    table = pd.read_parquet(small_demo)
    path = pulse_home / "one_session_users.parquet"
    table.assign(user_id="u-" + table["session_id"].astype(str)).to_parquet(path, index=False)
    res = cli("train", f"data.path={path}", "model=lightgbm", "tuning.n_trials=1",
              "progress=false")
    assert res.returncode == 0, res.stdout + res.stderr
    assert library_lines(res.stderr) == [], res.stderr
    res = cli("infer", f"data.path={path}", "permutations=200", f"output={pulse_home / 'inf'}")
    assert res.returncode == 0, res.stdout + res.stderr
    assert library_lines(res.stderr) == [], res.stderr


def test_folds_without_repeated_users_give_kfold_no_groups():
    users = np.arange(50).astype(str)  # every user one session (the USS example)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        folds = make_folds(50, 5, 0, groups=users)
    assert sorted(np.bincount(folds)) == [10] * 5


def test_a_shifted_categorical_feature_is_one_warning_naming_its_levels():
    shift = pd.DataFrame({"feature": ["profile_guess", "profile_guess", "user_message_count"],
                          "level": ["match", "none", None],
                          "rank_biserial": [0.41, -0.62, 0.27]})
    rows = [("bots", row) for row in shift.itertuples(index=False)]
    lines = shift_warnings(rows)
    assert len(lines) == 2
    assert "'profile_guess' (share of sessions at each level, rank-biserial: match +0.41, " \
           "none -0.62)" in lines[0]
    assert "'user_message_count' (rank-biserial +0.27)" in lines[1]
