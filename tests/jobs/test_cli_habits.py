"""Habits of the ecosystem (issue 24): --version, `help <verb>`, Hydra's --cfg/--info forms,
and `pulse-ml promote` alone listing the registered versions."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import pulse_ml

HEAVY = "('mlflow', 'sklearn', 'optuna', 'litellm', 'pandas', 'lightgbm', 'hydra', 'omegaconf')"


def _in_process(args: list[str]) -> subprocess.CompletedProcess:
    """Run ``main(args)`` in a fresh interpreter and report the heavy modules it imported."""
    code = (f"import sys; from pulse_ml.cli import main\n"
            f"try:\n    main({args!r})\nexcept SystemExit as e:\n    print('EXIT', e.code)\n"
            f"print('HEAVY', [m for m in {HEAVY} if m in sys.modules])")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)


def test_version_prints_the_package_version_without_heavy_imports(cli):
    expected = f"pulse-ml {pulse_ml.__version__}"
    for flag in ("--version", "-V"):
        res = cli(flag)
        assert res.returncode == 0 and res.stdout.strip() == expected, res.stdout + res.stderr
    exe = Path(sys.executable).with_name("pulse-ml")  # the console script
    res = subprocess.run([str(exe), "--version"], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0 and res.stdout.strip() == expected
    res = _in_process(["--version"])
    assert expected in res.stdout and "HEAVY []" in res.stdout, res.stdout + res.stderr
    assert "EXIT" not in res.stdout  # returned normally: exit 0


def test_help_verb_is_the_verbs_help(cli):
    res = cli("help", "promote")
    assert res.returncode == 0, res.stderr
    assert res.stdout == cli("promote", "--help").stdout
    assert "pulse-ml promote:" in res.stdout
    typo = cli("help", "trian")
    assert typo.returncode == 2 and "Did you mean 'train'?" in typo.stderr
    unknown = cli("help", "frobnicate")
    assert unknown.returncode == 2 and "unknown verb 'frobnicate'" in unknown.stderr
    assert "Traceback" not in typo.stderr + unknown.stderr
    assert cli("help").stdout == cli("--help").stdout  # `help` alone: the usage
    assert "pulse-ml help <verb>" in cli("--help").stdout


def test_cfg_job_and_all_print_the_composed_config(cli):
    plain = cli("train", "--cfg", "model=mean")
    assert plain.returncode == 0, plain.stderr
    assert "name: mean" in plain.stdout
    for form in (["--cfg", "job"], ["--cfg=job"], ["-c", "job"], ["--cfg", "all"],
                 ["--info", "config"]):
        res = cli("train", *form, "model=mean")
        assert res.returncode == 0, (form, res.stderr)
        assert res.stdout == plain.stdout, form


@pytest.mark.parametrize("form,message", [
    (["--cfg", "hydra"], "no hydra config to print"),
    (["--cfg", "jbo"], "Did you mean --cfg job?"),
    (["--info", "serchpath"], "Did you mean --info searchpath?"),
])
def test_unsupported_forms_are_one_line_exit_2(form, message, cli):
    res = cli("train", *form)
    assert res.returncode == 2, res.stdout + res.stderr
    assert message in res.stderr and "--cfg job" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and "Traceback" not in res.stderr
    assert res.stdout == ""


def test_info_shows_search_path_and_the_groups_of_help_without_hydra(cli):
    from pulse_ml.env.paths import conf_dir

    res = cli("train", "--info")
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert f"config directory: {conf_dir()}" in lines
    assert f"  main    {conf_dir().as_uri()}" in lines and "  hydra   pkg://hydra.conf" in lines
    assert "defaults list: features: all, model: random_forest" in res.stdout
    assert [line for line in lines if len(line) > 100] == []
    help_lines = cli("train", "--help").stdout.splitlines()  # the same groups block as --help
    start = help_lines.index("config groups (group=option, or group=path/to/file.yaml):")
    end = help_lines.index("  (* = default)", start)
    block = help_lines[start:end + 1]
    assert lines[lines.index(block[0]):lines.index(block[0]) + len(block)] == block
    assert cli("train", "-i").stdout == res.stdout == cli("train", "--info", "searchpath").stdout
    fast = _in_process(["train", "--info"])  # read with plain YAML: Hydra is not imported
    assert "HEAVY []" in fast.stdout and "EXIT" not in fast.stdout, fast.stdout + fast.stderr
    typo = cli("train", "--info", "model=lightgbn")  # overrides are still checked
    assert typo.returncode == 2 and "Did you mean model=lightgbm?" in typo.stderr


def test_promote_alone_lists_versions_and_changes_nothing(trained_home, pulse_home, cli):
    import mlflow

    trained = trained_home("progress=false", "model=mean")
    client = mlflow.MlflowClient()
    first = client.get_model_version("pulse-satisfaction", trained.version)
    # a second version of the same model, registered without pulse's tags (as by hand in MLflow)
    second = client.create_model_version("pulse-satisfaction", first.source, first.run_id)
    res = cli("promote")
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    # a path longer than the terminal stands alone on its line, unbroken (as in test_cli.py)
    assert [line for line in lines if len(line) > 100 and " " in line.strip()] == []
    header = next(line for line in lines if line.startswith("version"))
    for column in ("family", "feature set", "cv_mse", "cv_pearson", "alias", "created (UTC)"):
        assert column in header, column
    rows = {line.split()[0]: line for line in lines[lines.index(header) + 2:]
            if line.split() and line.split()[0].isdigit()}
    assert set(rows) == {trained.version, str(second.version)}
    row = rows[trained.version]
    assert "mean" in row and "all" in row and "champion" in row
    assert f"{float(first.tags['cv_mse']):.4f}" in row
    assert "champion" not in rows[str(second.version)]  # no tags: blank cells, not "nan"
    assert "nan" not in rows[str(second.version)].lower()
    assert "2 registered versions" in res.stdout and "promote version=N" in res.stdout
    champ = client.get_model_version_by_alias("pulse-satisfaction", "champion")
    assert str(champ.version) == trained.version  # listing moved nothing
    moved = cli("promote", f"version={second.version}")  # with a version: as before
    assert moved.returncode == 0, moved.stderr
    after = cli("promote").stdout.splitlines()
    marked = [line.split()[0] for line in after if line.rstrip().split()[-3:-2] == ["champion"]]
    assert marked == [str(second.version)], after


def test_promote_alone_without_versions_says_so(pulse_home, cli, tmp_path):
    res = cli("promote")
    assert res.returncode == 0, res.stderr
    assert "no version of pulse-satisfaction is registered" in res.stdout
    assert "pulse-ml train" in res.stdout
    absent = tmp_path / "nowhere" / "mlflow.db"  # no store yet: said, and none is created
    res = cli("promote", env={"MLFLOW_TRACKING_URI": f"sqlite:///{absent}",
                              "PULSE_HOME": str(tmp_path / "nowhere")})
    assert res.returncode == 0 and "is registered" in res.stdout, res.stderr
    assert not absent.exists()


def test_verb_help_and_cfg_import_no_hydra_and_overrides_still_compose():
    """``<verb> --help`` and ``--cfg`` read the packaged YAML (no Hydra: issue 25's 0.3 s)."""
    for args in (["train", "--help"], ["infer", "--cfg"], ["monitor", "-h"]):
        res = _in_process(args)
        assert "HEAVY []" in res.stdout and "EXIT" not in res.stdout, res.stdout + res.stderr
        assert "data:\n  path: " in res.stdout, args
    res = _in_process(["train", "model=lightgbm", "--help"])  # an override: Hydra composes
    assert "EXIT" not in res.stdout and "'hydra'" in res.stdout, res.stdout + res.stderr
    assert "_target_: lightgbm.LGBMRegressor" in res.stdout
