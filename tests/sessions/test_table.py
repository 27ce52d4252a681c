"""The session-table contract: every bad input gets one clear message and exit code 2."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pulse_ml.errors import DataError
from pulse_ml.sessions.feature_sets import FeatureSet, FeatureSpec
from pulse_ml.sessions.ratings import aggregate_ratings
from pulse_ml.sessions.table import load_sessions


@pytest.fixture(scope="module")
def base(small_demo) -> pd.DataFrame:
    return pd.read_parquet(small_demo)


def _write(frame: pd.DataFrame, tmp_path, name="t.csv"):
    path = tmp_path / name
    if name.endswith(".csv"):
        frame.to_csv(path, index=False)
    elif name.endswith(".jsonl"):
        frame.to_json(path, orient="records", lines=True, date_format="iso")
    else:
        frame.to_parquet(path, index=False)
    return path


def _first_labeled(frame, case=None, cond=None):
    m = frame["rating"].notna()
    if case:
        m &= (frame["case_study"] == case) & (frame["condition"] == cond)
    return frame.index[m][0]


def _renamed(f):
    return f.rename(columns={"user_sentiment": "sentiment"})


def _dropped(f):
    return f.drop(columns=["git_push"])


def _rating_out(f):
    f.loc[_first_labeled(f), "rating"] = 7.0
    return f


def _rating_text(f):
    f["rating"] = f["rating"].astype(object)
    f.loc[_first_labeled(f), "rating"] = "five"
    return f


def _nan_feature(f):
    f["insufficient_testing"] = f["insufficient_testing"].astype(float)
    f.loc[3, "insufficient_testing"] = np.nan
    return f


def _unknown_category(f):
    f.loc[5, "task_category"] = "cooking"
    return f


def _duplicate(f):
    f.loc[8, "session_id"] = f.loc[9, "session_id"]
    return f


def _flag_values(f):
    f.loc[2, "git_push"] = 2
    return f


def _negative_count(f):
    f.loc[4, "user_message_count"] = -3
    return f


def _arm_unlabeled(f):
    arm = (f["case_study"] == "plan") & (f["condition"] == "show-plan")
    f.loc[arm, "rating"] = np.nan
    return f


BAD = {
    "renamed column": (_renamed, ["column 'user_sentiment': missing",
                                  "rename it to 'user_sentiment'"]),
    "missing column": (_dropped, ["column 'git_push': missing"]),
    "rating outside [1, 5]": (_rating_out, ["column 'rating'", "outside [1, 5]", "row "]),
    "non-numeric rating": (_rating_text, ["column 'rating': non-numeric", "'five'"]),
    "NaN in a feature": (_nan_feature, ["column 'insufficient_testing': empty/NaN", "row 4"]),
    "unknown category": (_unknown_category, ["column 'task_category': unknown category",
                                             "'cooking'", "Allowed: fix_bugs"]),
    "duplicate session_id": (_duplicate, ["column 'session_id': duplicate ids"]),
    "flag with other values": (_flag_values, ["column 'git_push': a 0/1 flag", "'2'"]),
    "negative message count": (_negative_count, ["column 'user_message_count': negative",
                                                 "'-3'"]),
    "arm without labels": (_arm_unlabeled, ["case study 'plan', treatment arm 'show-plan' "
                                            "has 0 labeled"]),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_table_gets_one_clear_message(case, base, tmp_path, cli):
    mutate, expected = BAD[case]
    path = _write(mutate(base.copy()), tmp_path)
    res = cli("validate", f"data.path={path}")
    assert res.returncode == 2, res.stdout
    assert "Traceback" not in res.stderr
    assert str(path) in res.stderr
    for text in expected:
        assert text in res.stderr, (text, res.stderr)


@pytest.mark.parametrize("content,name,expected", [
    (b"", "empty.csv", "the file is empty"),
    (b"\x00\x01garbage\xff", "garbled.parquet", "cannot be read as parquet"),
    (b'{"session_id": "a", "rating": 4\n{broken', "garbled.jsonl", "cannot be read as jsonl"),
    (b"session_id,rating\n", "header_only.csv", "no rows"),
    (b"a,b\n1,2\n", "table.xlsx", "unsupported extension '.xlsx'"),
])
def test_unreadable_files(content, name, expected, tmp_path, cli):
    path = tmp_path / name
    path.write_bytes(content)
    res = cli("validate", f"data.path={path}")
    assert res.returncode == 2 and expected in res.stderr and "Traceback" not in res.stderr


def test_missing_file(tmp_path, cli):
    res = cli("validate", f"data.path={tmp_path / 'nope.parquet'}")
    assert res.returncode == 2 and "no such file" in res.stderr


def test_all_problems_reported_at_once(base, tmp_path):
    frame = _negative_count(_flag_values(_rating_out(base.copy())))
    with pytest.raises(DataError) as err:
        load_sessions(_write(frame, tmp_path), _all_features())
    assert len(err.value.problems) == 3


@pytest.mark.parametrize("fmt", ["t.csv", "t.jsonl", "t.parquet"])
def test_valid_table_summary_in_every_format(fmt, base, tmp_path, cli):
    path = _write(base, tmp_path, fmt)
    res = cli("validate", f"data.path={path}")
    assert res.returncode == 0, res.stderr
    text = " ".join(res.stdout.split())  # lines wrap at 100 columns, after a path of any length
    assert f"{len(base):,} sessions" in text
    assert "plan" in text and "show-plan" in text and "labeled" in text


def test_typed_table(base, tmp_path):
    table = load_sessions(_write(base, tmp_path), _all_features())
    assert table.frame["git_push"].dtype == np.int64
    assert table.frame["rating"].dtype == np.float64
    assert {s.name for s in table.case_studies} == {"plan", "claude4_vs_gpt5"}
    control, treatment = table.arm_counts(next(s for s in table.case_studies
                                               if s.name == "plan"))
    assert control.n_labeled > 0 and treatment.n_unlabeled > 0


def test_unconfigured_case_study_is_found_and_noted(base, tmp_path):
    frame = base.copy()
    m = frame["case_study"] == "plan"
    frame.loc[m, "case_study"] = "my_test"
    table = load_sessions(_write(frame, tmp_path), _all_features())
    study = next(s for s in table.case_studies if s.name == "my_test")
    assert (study.control, study.treatment) == ("no-plan", "show-plan")
    assert not study.configured and any("alphabetically first" in n for n in table.notes)


def test_aggregate_ratings():
    long = pd.DataFrame({"session_id": ["a", "a", "b", "c"], "segment": [1, 2, 1, 1],
                         "rating": [5, 4, 2, None]})
    out = aggregate_ratings(long)
    assert out.set_index("session_id")["rating"].to_dict() == {"a": 4.5, "b": 2.0}
    assert out.set_index("session_id")["n_ratings"].to_dict() == {"a": 2, "b": 1}
    with pytest.raises(DataError, match="not a number in"):
        aggregate_ratings(long.assign(rating=[5, 9, 1, 1]))


def _all_features() -> FeatureSet:
    from pulse_ml.config import compose
    from pulse_ml.settings import feature_set

    return feature_set(compose("validate"))


def test_feature_set_of_custom_kinds():
    fs = FeatureSet("x", (FeatureSpec("a", "numeric"), FeatureSpec("b", "flag")))
    assert fs.names == ["a", "b"] and fs.of_kind("flag") == ["b"]


def test_categories_match_ignoring_case_spaces_and_dashes_plus_aliases(base, tmp_path):
    from pulse_ml.sessions.feature_sets import feature_set_from_mapping
    from pulse_ml.sessions.table import validate_chunk

    fs = feature_set_from_mapping({"name": "t", "columns": {"task_category": {
        "kind": "categorical", "values": ["fix_bugs", "fix_failing_ci"],
        "aliases": {"Fix Failing Continuous Integration": "fix_failing_ci"}}}})
    frame = base.head(6).copy()
    frame["task_category"] = ["Fix Bugs", "FIX-BUGS", " fix_bugs ",
                              "Fix Failing Continuous Integration", "fix failing ci",
                              "fixfailing-continuous integration"]
    table = load_sessions(_write(frame, tmp_path), fs, {}, only=[])
    assert list(table.frame["task_category"]) == ["fix_bugs"] * 3 + ["fix_failing_ci"] * 3
    chunk = validate_chunk(frame[["session_id", "task_category"]], fs, "t.csv", 0, 1)
    assert list(chunk["task_category"]) == list(table.frame["task_category"])
    frame.loc[frame.index[0], "task_category"] = "Fix Bug"  # a real typo is still refused
    with pytest.raises(DataError, match=r"unknown category value\(s\) 'Fix Bug'"):
        load_sessions(_write(frame, tmp_path), fs, {}, only=[])


def test_alias_to_an_unknown_value_is_a_config_error():
    from pulse_ml.errors import PulseError
    from pulse_ml.sessions.feature_sets import feature_set_from_mapping

    with pytest.raises(PulseError, match="alias 'CI' points to 'ci'"):
        feature_set_from_mapping({"name": "t", "columns": {"task_category": {
            "kind": "categorical", "values": ["fix_failing_ci"], "aliases": {"CI": "ci"}}}})


def test_non_finite_counts_flags_and_long_values_are_reported(base, tmp_path):
    fs = FeatureSet("t", (FeatureSpec("user_message_count", "count"),
                          FeatureSpec("git_push", "flag"),
                          FeatureSpec("user_sentiment", "categorical",
                                      ("positive", "neutral", "negative"))))
    frame = base.head(10).copy()
    frame["user_message_count"] = frame["user_message_count"].astype(float)
    frame["git_push"] = frame["git_push"].astype(float)
    frame.loc[frame.index[1], "user_message_count"] = np.inf
    frame.loc[frame.index[2], "git_push"] = -np.inf
    frame.loc[frame.index[3], "user_sentiment"] = "y" * 5000
    with pytest.raises(DataError) as err:
        load_sessions(_write(frame, tmp_path, "t.parquet"), fs, {}, only=[])
    text = str(err.value)
    assert "'user_message_count': infinite values in 1 row(s): row 2" in text
    assert "'git_push': infinite values in 1 row(s): row 3" in text
    assert "(5000 characters)" in text and len(text) < 1500
