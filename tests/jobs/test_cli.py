"""The `pulse-ml` command: help, unknown verbs and overrides, multirun."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from pulse_ml.cli import VERBS


def test_console_script_help_lists_every_verb():
    exe = Path(sys.executable).with_name("pulse-ml")
    assert exe.is_file(), "the pulse-ml console script is not installed next to python"
    res = subprocess.run([str(exe), "--help"], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0
    for verb in VERBS:
        assert f"  {verb}" in res.stdout


def test_help_imports_no_heavy_library():
    """--help stays fast because nothing heavy is imported on its path."""
    code = ("import sys; from pulse_ml.cli import main; main(['--help']); "
            "heavy = [m for m in ('mlflow', 'sklearn', 'optuna', 'litellm', 'pandas', "
            "'lightgbm', 'hydra') if m in sys.modules]; print('HEAVY', heavy)")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60)
    assert res.returncode == 0 and "HEAVY []" in res.stdout, res.stdout + res.stderr


def test_every_verb_has_help_and_a_composable_config(cli):
    from pulse_ml.config_check import defaults_of, group_options

    for verb in VERBS:
        res = cli(verb, "--help")
        assert res.returncode == 0, (verb, res.stderr)
        assert f"pulse-ml {verb}:" in res.stdout and "composed config" in res.stdout
        wide = [line for line in res.stdout.splitlines() if len(line) > 100]
        assert wide == [], (verb, wide)
        lines = res.stdout.splitlines()
        for group, default in defaults_of(verb).items():  # each group lists all its options
            listed = [line for line in lines if line.startswith(f"  {group}: ")]
            assert listed, (verb, group)
            shown = {o.strip().rstrip("*") for o in listed[0].split(": ", 1)[1].split(",")}
            assert shown == set(group_options(group)), (verb, group, shown)
            assert default == "None" or f"{default}*" in listed[0]


def test_type_error_is_reported_before_heavy_imports():
    """A mistyped number is refused by the pre-Hydra check: no Hydra, MLflow or pandas."""
    code = ("import sys; from pulse_ml.cli import main\n"
            "try:\n    main(['train', 'tuning.n_trials=five'])\n"
            "except SystemExit as e:\n    print('EXIT', e.code)\n"
            "heavy = [m for m in ('mlflow', 'sklearn', 'optuna', 'pandas', 'hydra', 'omegaconf')"
            " if m in sys.modules]; print('HEAVY', heavy)")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60)
    assert "EXIT 2" in res.stdout and "HEAVY []" in res.stdout, res.stdout + res.stderr
    assert "tuning.n_trials='five' is not a whole number (default" in res.stderr
    assert "[0, inf]" not in res.stderr


def test_n_trials_range_says_at_least_one_for_a_new_study(pulse_home, cli):
    res = cli("train", "tuning.n_trials=-1")
    assert res.returncode == 2 and "tuning.n_trials=-1 is out of range" in res.stderr
    assert "[1, inf]" in res.stderr, res.stderr


def test_sweep_checks_every_combination_before_the_first_run(small_demo, pulse_home, cli):
    for bad, message in (("tuning.n_trials=1,five", "tuning.n_trials='five' is not"),
                         ("model=mean,lightgbn", "Did you mean model=lightgbm?"),
                         ("cv.n_splits=2,1", "cv.n_splits=1 is out of range")):
        res = cli("train", "-m", f"data.path={small_demo}", "progress=false", "model=mean",
                  bad)
        assert res.returncode == 2 and message in res.stderr, (bad, res.stderr)
        assert "[1/2]" not in res.stdout, bad  # nothing ran


def test_no_registered_model_is_said_before_the_data_is_read(pulse_home, cli, tmp_path):
    """infer/audit/monitor look the champion up first: the absent table is never reached."""
    absent = tmp_path / "absent.parquet"
    for verb, extra in (("infer", []), ("audit", ["case_study=plan"]), ("monitor", [])):
        res = cli(verb, f"data.path={absent}", *extra)
        assert res.returncode == 2, (verb, res.stderr)
        assert "no model is registered" in res.stderr, (verb, res.stderr)
        assert "absent.parquet" not in res.stderr and "Traceback" not in res.stderr


def test_unknown_verb_and_override(cli):
    res = cli("trian")
    assert res.returncode == 2 and "unknown verb 'trian'" in res.stderr
    res = cli("validate", "no_such_key=1")
    assert res.returncode == 2 and "cannot compose the config" in res.stderr
    assert "Traceback" not in res.stderr


def test_multirun_runs_each_combination(small_demo, pulse_home, cli):
    res = cli("validate", "-m", f"data.path={small_demo}", "features=user,no_llm")
    assert res.returncode == 0, res.stderr
    assert "[1/2]" in res.stdout and "[2/2]" in res.stdout
    assert "feature set 'user'" in res.stdout and "feature set 'no_llm'" in res.stdout


def test_configs_ship_inside_the_package():
    """A regular (non-editable) install finds the configs as package data (pulse_ml/_conf)."""
    import tomllib

    repo = Path(__file__).resolve().parents[2]
    packaged = repo / "pulse_ml" / "_conf"
    for name in ("train.yaml", "infer.yaml", "features/all.yaml", "model/lightgbm.yaml"):
        assert (packaged / name).read_text() == (repo / "conf" / name).read_text()
    data = tomllib.loads((repo / "pyproject.toml").read_text())
    assert "_conf/**/*.yaml" in data["tool"]["setuptools"]["package-data"]["pulse_ml"]


@pytest.mark.parametrize("verb,override,message", [
    ("train", "tuning.n_trials=abc", "tuning.n_trials='abc' is not a whole number"),
    ("judge", "judge.concurrency=abc", "judge.concurrency='abc' is not a whole number"),
    ("simulate", "events=no_way", "events='no_way' is not true or false"),
    ("train", "seed=abc", "seed='abc' is not a whole number"),
    ("train", "cv.n_splits=1", "cv.n_splits=1 is out of range"),
    ("infer", "alpha=2", "alpha=2 is out of range"),
    ("plan", "effect=big", "effect='big' is not a number"),
])
def test_bad_numbers_name_the_key_exit_2(verb, override, message, pulse_home, cli):
    res = cli(verb, override)
    assert res.returncode == 2, res.stderr
    assert message in res.stderr and "Traceback" not in res.stderr
    assert "failed unexpectedly" not in res.stderr


def test_debug_keeps_the_cause_chain(small_demo, pulse_home, cli):
    res = cli("train", f"data.path={small_demo}", "model=mean", "tuning.n_trials=1",
              "progress=false", "+model.estimator.not_a_param=1",
              env={"PULSE_DEBUG": "1"})
    assert res.returncode == 2
    assert "Traceback" in res.stderr and "not_a_param" in res.stderr


@pytest.mark.parametrize("args,hint", [
    (["trian"], "Did you mean 'train'?"),
    (["train", "model=lightgbn"], "Did you mean model=lightgbm?"),
    (["train", "tuning.ntrials=5"], "Did you mean tuning.n_trials?"),
])
def test_typos_get_did_you_mean(args, hint, pulse_home, cli):
    res = cli(*args)
    assert res.returncode == 2 and hint in res.stderr and "Traceback" not in res.stderr
    if "model=" in args[-1]:
        assert "Available options in 'model'" in res.stderr  # Hydra's list is kept


def test_every_verb_fits_100_columns_on_the_demo(small_demo, pulse_home, cli, tmp_path):
    """pipeline, train, infer, compare, audit and plan print nothing wider than 100 columns.

    The pipeline runs with its progress output on (into a pipe, ``COLUMNS=100``: its bars'
    frames, split at ``\\r``, count too) and alpha 0.1, so its tables and footnote must say
    90%. Per family one paired line and the study's name once; one name for the estimator.
    """
    own = tmp_path / "pipeline_home"  # its own store: its versions do not enter `compare` below
    (own / "mlruns").mkdir(parents=True)
    res = cli("pipeline", f"data.path={small_demo}", "families=[mean,lightgbm]",
              "tuning.n_trials=2", "promotion.n_boot=200", "promotion.alpha=0.1",
              "infer.alpha=0.1", f"infer.output={own / 'pipe'}",
              env={"PULSE_HOME": str(own), "COLUMNS": "100",
                   "MLFLOW_TRACKING_URI": f"sqlite:///{own / 'mlruns' / 'mlflow.db'}"})
    assert res.returncode == 0, res.stderr
    assert "== summary" in res.stdout and (own / "pipe" / "effects.csv").is_file()
    assert res.stdout.index("== decisions") < res.stdout.index("== summary")  # decisions first
    lines = (res.stdout + res.stderr).splitlines()
    assert [line for line in lines if len(line) > 100 and " " in line.strip()] == []
    assert "tuning lightgbm" in res.stderr  # the bars were drawn (and measured above)
    text = " ".join(res.stdout.split())  # footnotes wrap at 100 columns
    assert "effect [90% CI]" in text and "(90% user bootstrap)" in text
    assert "95%" not in text
    family = text[text.index("train lightgbm"):text.index("== infer")]
    assert family.count("ΔMSE (new - champion)") == 1 and family.count("study_name=") == 1
    study = family.split("study_name=")[1].split()[0]
    assert family.count(study) == 1
    assert "expected_ci_red_%" in text and " PPI++ " in text and " augmented " not in text
    out = res.stdout.splitlines()
    heads = [i for i, line in enumerate(out) if line.startswith("family") and "time_s" in line]
    assert len(heads) == 2  # one train table per family: seconds with one decimal
    for i in heads:
        at = out[i].split().index("time_s")
        assert re.fullmatch(r"\d+\.\d", out[i + 2].split()[at]), out[i + 2]
    runs = [
        ("train", f"data.path={small_demo}", "model=lightgbm", "tuning.n_trials=2"),
        ("infer", f"data.path={small_demo}", "permutations=200"),
        ("compare",),
        ("audit", "case_study=plan", f"data.path={small_demo}", "replications=20",
         "split_half.replications=50", "progress=false"),
        ("plan", "effect=0.2"),
    ]
    for args in runs:
        res = cli(*args)
        assert res.returncode == 0, (args, res.stderr)
        lines = (res.stdout + res.stderr).splitlines()
        # a path or URL longer than the terminal stands alone on its line, unbroken
        wide = [line for line in lines if len(line) > 100 and " " in line.strip()]
        assert wide == [], (args[0], wide[:3])
        assert "Created version" not in res.stderr


def test_a_fresh_home_without_a_tracking_uri_creates_its_store(small_demo, tmp_path):
    """The README's path: no MLFLOW_TRACKING_URI, no mlruns/ yet; the default store is made."""
    import os

    home = tmp_path / "fresh"
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    env["PULSE_HOME"] = str(home)
    res = subprocess.run([sys.executable, "-m", "pulse_ml", "train", f"data.path={small_demo}",
                          "model=mean", "progress=false"], capture_output=True, text=True,
                         env=env, timeout=300)
    assert res.returncode == 0, res.stderr
    assert (home / "mlruns" / "mlflow.db").is_file()
