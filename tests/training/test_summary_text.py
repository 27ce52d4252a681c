"""The train summary says each thing once, fits 100 columns and never breaks a command or URL."""

from __future__ import annotations

from paired_sample import paired_sample

from pulse_ml.report.tables import say
from pulse_ml.training import promotion_rule
from pulse_ml.training.metrics import CVMetrics
from pulse_ml.training.report import TrainResult, study_line, summary

URL = ("http://127.0.0.1:5000/#/experiments/1/runs/7ad937df4f9b4a3fbc84d8b339daf00a"
       "?workflowType=machine_learning")
NAME = "random_forest-all-886b748e0b-7ad937df"
FOLDER = "/tmp/a/rather/long/project/home/that/a/newcomer/chose/for/the/demo/mlruns/optuna"


def _result(objective: str = "cv_mse") -> TrainResult:
    paired = paired_sample(1.0)
    champion = promotion_rule.Champion("1", "run", "fp", {objective: 1.5852}, "ordinal_logit",
                                       feature_set="all")
    decision = promotion_rule.decide("significant", objective, 1.5930, "fp", champion, paired)
    assert not decision.promote
    metrics = CVMetrics(1.593, 1.003, 0.315, 0.3, (1.5,) * 5, (1.0,) * 5, (0.3,) * 5)
    return TrainResult(
        family="random_forest", feature_set="all", run_id="r", best_params={"max_depth": 2},
        metrics=metrics, n_trials=20, seconds=252.0394, version=None, promoted=False,
        promotion_reason=f"{decision.reason}; not registered: not a promotion candidate "
                         "(register=candidates; register=always keeps a version of every model)",
        data_fingerprint="fp", paired=paired, champion_version="1", objective=objective,
        n_labeled=1747, n_unlabeled=34940, ci_reduction=0.046, ci_reduction_ref=0.046,
        study_name=NAME, storage=f"{FOLDER}/{NAME}.journal", run_url=URL)


def test_one_paired_line_one_study_name_and_one_decimal_seconds():
    result = _result()
    text = summary(result, "pulse-satisfaction", None, "(start the UI with: pulse-ml ui port=5000)")
    p = result.paired
    interval = f"[{p.mse_ci_lower:+.4f}, {p.mse_ci_upper:+.4f}]"
    assert text.count(interval) == 1  # was twice: the "vs champion" line and the promotion line
    assert " ".join(text.split()).count("ΔMSE (new - champion)") == 1
    assert "the ΔMSE interval above includes 0: not significantly better" in " ".join(
        text.split())
    assert text.count(NAME) == 1  # was three times
    assert f"tuning.study_name={NAME}" in text  # how to add trials, said once
    header, _, row = text.splitlines()[:3]
    assert header.split()[7] == "time_s" and row.split()[7] == "252.0"


def test_commands_and_addresses_stay_whole_on_their_own_lines():
    text = summary(_result(), "pulse-satisfaction", None,
                   "(start the UI with: pulse-ml ui port=5000)")
    lines = text.splitlines()
    assert URL in lines  # alone on its line, unbroken
    assert "(start the UI with: pulse-ml ui port=5000)" in lines
    assert all(len(line) <= 100 or " " not in line.strip() for line in lines), lines
    assert "\u00a0" not in text  # the no-break marks are printed as spaces


def test_a_command_is_never_split_by_the_line_wrapper(capsys):
    storage = "sqlite:///" + "/very/long" * 8 + "/optuna.db"
    line = study_line("lightgbm-all-886b748e0b", storage)
    say(line)
    out = capsys.readouterr().out
    command = f"tuning.storage={storage} tuning.study_name=lightgbm-all-886b748e0b"
    assert any(command in row for row in out.splitlines())  # on one line, not split


def test_a_study_in_a_given_storage_is_resumed_with_one_whole_command():
    from dataclasses import replace

    storage = "postgresql://pulse@db.example.org:5432/" + "optuna_studies_" * 4
    text = summary(replace(_result(), storage=storage), "pulse-satisfaction")
    command = f"tuning.storage={storage} tuning.study_name={NAME}"
    assert any(command in line for line in text.splitlines())
    assert text.count(NAME) == 1
