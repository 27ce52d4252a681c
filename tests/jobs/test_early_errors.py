"""Every value check before any data is read or any model loaded (issue 24, "late errors").

A bad range is refused right after the config is composed: the proof is the import log of the
subprocess (``PYTHONPROFILEIMPORTTIME``), which shows that neither pandas, scipy nor MLflow was
imported, while ``data.path`` names a file that does not exist and the store has no model. A
misspelled case study is refused right after the table is read, before the model loads, with
the closest name.
"""

from __future__ import annotations

import re

import pandas as pd
import pytest

HEAVY = ("pandas", "numpy", "scipy", "mlflow", "sklearn", "pyarrow")


def _imported(stderr: str) -> set[str]:
    """Top-level packages in a ``-X importtime`` log."""
    return {m.group(1).split(".")[0] for m in
            re.finditer(r"^import time:\s+\d+ \|\s+\d+ \|\s*(\S+)", stderr, re.M)}


def _error_lines(stderr: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if not ln.startswith("import time:")]


@pytest.mark.parametrize(("verb", "override", "text"), [
    ("infer", "alpha=1.5", "infer: alpha=1.5 is out of range; use a value in (0, 1)"),
    ("infer", "permutations=0", "infer: permutations=0 is out of range; use a value in [1, inf]"),
    ("monitor", "alpha=0", "monitor: alpha=0 is out of range"),
    ("monitor", "min_units_per_arm=1", "monitor: min_units_per_arm=1 is out of range"),
    ("audit", "replications=0", "audit: replications=0 is out of range"),
    ("audit", "hide_share=1", "audit: hide_share=1 is out of range"),
    ("audit", "alpha=0.05", "name the case study to audit"),  # case_study=??? is required
    ("pipeline", "infer.alpha=2", "pipeline: infer.alpha=2 is out of range"),
    # the word of a choice setting (settings_choices), with the closest word
    ("infer", "inference=asymptotc", "infer: inference=asymptotc is not an option. Did you mean "
     "asymptotic?"),
    ("monitor", "lambda_rule=jont", "monitor: lambda_rule=jont is not an option. Did you mean "
     "joint?"),
    ("pipeline", "tuning.pruner=medain", "pipeline: tuning.pruner=medain is not an option. Did "
     "you mean median?"),
    ("score", "engine=sprak", "score: engine=sprak is not an option. Did you mean spark?"),
    # run labels (conf/tracking/run.yaml): a tag pulse-ml's lookups read, a tags value
    ("train", "tags.kind=x", "train: tags.kind: pulse-ml sets the tag 'kind' itself"),
    ("infer", "tags=5", "infer: tags='5' is not a mapping"),
])
def test_a_bad_value_is_refused_before_any_heavy_import(verb, override, text, pulse_home,
                                                         tmp_path, cli):
    missing = tmp_path / "nowhere" / "huge.parquet"  # never opened: no such file
    args = [f"data.path={missing}", override]
    if verb == "audit" and not override.startswith("alpha"):
        args.append("case_study=plan")
    res = cli(verb, *args, env={"PYTHONPROFILEIMPORTTIME": "1"})
    lines = _error_lines(res.stderr)
    assert res.returncode == 2, res.stderr[-2000:]
    assert len(lines) == 1 and text in lines[0], lines
    assert "Traceback" not in res.stderr and "no such file" not in res.stderr
    assert not set(HEAVY) & _imported(res.stderr), set(HEAVY) & _imported(res.stderr)


def test_a_missing_case_study_folder_is_refused_before_any_heavy_import(pulse_home, tmp_path,
                                                                        cli):
    res = cli("infer", f"case_study_dirs=[{tmp_path / 'mine'}]",
              env={"PYTHONPROFILEIMPORTTIME": "1"})
    assert res.returncode == 2
    assert _error_lines(res.stderr) == [f"error: case-study folder {tmp_path / 'mine'} does not "
                                        "exist."]
    assert not set(HEAVY) & _imported(res.stderr)


@pytest.fixture
def registered(trained_home):
    """A champion trained on the small demo table."""
    return trained_home("tuning.n_trials=3", "progress=false", "model=lightgbm")


@pytest.mark.parametrize(("verb", "override", "setting"), [
    ("infer", "case_studies=[plan,memry]", "case_studies"),
    ("monitor", "case_study=memry", "case_study"),
    ("audit", "case_study=memry", "case_study"),
])
def test_a_misspelled_case_study_is_a_setting_error_with_did_you_mean(
        verb, override, setting, small_demo, tmp_path, pulse_home, registered, cli):
    table = pd.read_parquet(small_demo)
    table["case_study"] = table["case_study"].replace({"claude4_vs_gpt5": "memory"})
    path = tmp_path / "t.parquet"
    table.to_parquet(path, index=False)
    res = cli(verb, f"data.path={path}", override, "log_mlflow=false")
    assert res.returncode == 2, res.stderr[-2000:]
    lines = _error_lines(res.stderr)
    assert len(lines) == 1, lines
    assert "case study 'memry' not in the data" in lines[0]
    assert "did you mean 'memory'?" in lines[0] and f"`{setting}`" in lines[0]
    assert "problem(s) found" not in res.stderr  # a setting, not a data problem
    assert "Traceback" not in res.stderr
