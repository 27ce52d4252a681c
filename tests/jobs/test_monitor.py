"""``pulse-ml monitor`` end to end on simulated data with started_at, and every bad input.

One model is trained per module (a real sqlite MLflow store); each bad input runs the real CLI
in a subprocess and must exit 2 with one message, no traceback, no file and no MLflow run.
"""

from __future__ import annotations

import json

import mlflow
import numpy as np
import pandas as pd
import pytest
from model_home import model_home

from pulse_ml.config import compose
from pulse_ml.jobs import infer, monitor, train
from pulse_ml.registry.runs import logged_model_id
from pulse_ml.report.plots import pyplot

FRAME_COLUMNS = ["case_study", "look", "day", "at", "estimator", "n_labeled", "n_unlabeled",
                 "effect", "se", "df", "ci_lower", "ci_upper", "cs_lower", "cs_upper",
                 "lambda_control", "lambda_treatment", "eff_units_control",
                 "eff_units_treatment", "time_shift"]


@pytest.fixture(scope="module")
def home(tmp_path_factory, mlflow_template, small_demo):
    """A project root with a champion trained on the small demo table (once per module)."""
    with model_home(tmp_path_factory.mktemp("monitor-home"), mlflow_template) as root:
        fast = [f"data.path={small_demo}", "tuning.n_trials=1", "progress=false",
                "model=lightgbm"]
        train.run(compose("train", fast))  # version 1, the champion
        # version 2: blind to claude4_vs_gpt5 (its sessions may be renamed without a leak)
        train.run(compose("train", [*fast, "promote=never", "register=always",
                                    "exclude_case_studies=[claude4_vs_gpt5]"]))
        yield root


def _infer_runs() -> pd.DataFrame:
    exp = mlflow.MlflowClient().get_experiment_by_name("pulse-infer")
    return pd.DataFrame() if exp is None else mlflow.search_runs([exp.experiment_id])


def test_monitor_writes_files_plot_and_logs_the_run(home, small_demo, tmp_path, capsys):
    out = tmp_path / "out"
    res = monitor.run(compose("monitor", [f"data.path={small_demo}", f"output={out}"]))
    printed = capsys.readouterr().out
    frame = pd.read_csv(out / "monitor.csv")
    assert list(frame.columns) == FRAME_COLUMNS
    assert set(frame["case_study"]) == {"plan", "claude4_vs_gpt5"}
    assert set(frame["estimator"]) == {"naive", "augmented"}
    assert frame.groupby("case_study")["day"].max().to_dict() == {"plan": 21,
                                                                  "claude4_vs_gpt5": 21}
    assert len(frame) == 2 * 21 * 2 and not any(out.glob(".*tmp*"))
    meta = json.loads((out / "monitor.json").read_text())
    assert meta["model_version"] == "1" and meta["mode"] == "crossfit"
    assert meta["first_day"] == {"plan": "2025-06-02", "claude4_vs_gpt5": "2025-06-02"}
    assert len(meta["rows"]) == len(frame) and len(meta["stops"]) == 2 * 2 * 2
    assert meta["looks"] == "daily"
    # t*: 21 planned days at the label rate up to each case study's burn-in look
    burn_in = frame[frame["ci_lower"].notna()].groupby("case_study").head(1).set_index(
        "case_study")
    for study in ("plan", "claude4_vs_gpt5"):
        rate = burn_in.loc[study, "n_labeled"] / burn_in.loc[study, "day"]
        assert meta["target_labels"][study] == pytest.approx(21 * rate)
        assert "planned horizon of 21 days" in meta["targets"][study]
    assert printed.count("planned horizon of 21") == 2
    assert meta["horizon_days"] == 21
    image = pyplot().imread(out / "monitor.png")
    assert image.shape[0] > 400 and image.shape[1] > 800 and image.std() > 0.05
    runs = _infer_runs()
    assert len(runs) == 1 and runs["tags.kind"][0] == "monitor"
    assert runs["tags.model_version"][0] == "1"
    assert runs["tags.valid_intervals"][0] == "true"  # in-sample predictions are refused
    client = mlflow.MlflowClient()
    # as infer: linked to the model version, the session table as dataset input, a description
    run = client.get_run(runs["run_id"][0])
    mv = client.get_model_version("pulse-satisfaction", "1")
    assert [m.model_id for m in run.inputs.model_inputs] == [logged_model_id(mv)]
    (ds,) = run.inputs.dataset_inputs
    assert {t.key: t.value for t in ds.tags}["mlflow.data.context"] == "inference"
    assert ds.dataset.source.find(str(small_demo)) >= 0
    note = run.data.tags["mlflow.note.content"]
    assert "Anytime-valid monitoring" in note and "version 1" in note
    assert "- plan: naive sequence: " in note
    exp_id = run.info.experiment_id
    assert f"/#/experiments/{exp_id}/runs/{run.info.run_id}" in printed
    files = {a.path for a in client.list_artifacts(runs["run_id"][0])}
    assert files == {"monitor.json", "monitor.csv", "monitor.png"}
    metrics = client.get_run(runs["run_id"][0]).data.metrics
    assert metrics["plan.naive.conclusive"] in (0.0, 1.0)
    assert metrics["plan.target_labels"] == pytest.approx(res.target_labels["plan"])
    # The last look's fixed intervals are infer's, both estimators (same engine; the looks'
    # cumulative sums give CR1 and no lambda-noise term, which move the ends by a fraction of a
    # percent of the width here; tests/inference/test_monitor.py checks equality to 1e-9 under
    # the looks' rules).
    effects = infer.run(compose("infer", [f"data.path={small_demo}", "permutations=200",
                                          f"output={tmp_path / 'infer'}", "log_mlflow=false"]))
    for study in ("plan", "claude4_vs_gpt5"):
        for est in ("naive", "augmented"):
            mine = frame[(frame["case_study"] == study) & (frame["estimator"] == est)].iloc[-1]
            ref = effects[(effects["case_study"] == study) & (effects["estimator"] == est)]
            width = float(ref["ci_upper"].iloc[0] - ref["ci_lower"].iloc[0])
            for col in ("effect", "ci_lower", "ci_upper"):
                assert mine[col] == pytest.approx(float(ref[col].iloc[0]), abs=0.01 * width), col
            for col in ("lambda_control", "lambda_treatment"):
                assert mine[col] == pytest.approx(float(ref[col].iloc[0]), abs=0.05), col


def test_model_trained_before_the_test(home, small_demo, tmp_path):
    """train trained_before + exclude: monitored sessions are predicted by a model blind to them."""
    cut = "2025-06-09"
    fit = train.run(compose("train", [f"data.path={small_demo}", "tuning.n_trials=1",
                                      "progress=false", "model=lightgbm", "promote=never",
                                      "register=always",
                                      f"trained_before={cut}",
                                      "exclude_case_studies=[claude4_vs_gpt5]"]))
    frame = pd.read_parquet(small_demo)
    before = (frame["started_at"] < pd.Timestamp(cut, tz="UTC")) & frame["rating"].notna()
    trained = before & (frame["case_study"] != "claude4_vs_gpt5")
    res = monitor.run(compose("monitor", [f"data.path={small_demo}", f"output={tmp_path}",
                                          f"model_uri=models:/pulse-satisfaction/{fit.version}",
                                          "case_study=claude4_vs_gpt5", "log_mlflow=false"]))
    meta = json.loads((tmp_path / "monitor.json").read_text())
    assert meta["n_labeled_with_oof"] == int(trained.sum())
    assert set(res.frame["case_study"]) == {"claude4_vs_gpt5"}


def test_cli_one_case_study_prints_a_table_that_fits(home, small_demo, tmp_path, cli):
    res = cli("monitor", f"data.path={small_demo}", "case_study=plan", "looks=[3,7,14,21]",
              "horizon_days=21", "clusters=none", f"output={tmp_path}", "log_mlflow=false")
    assert res.returncode == 0, res.stderr
    assert "== plan: show-plan - no-plan; day 1 = 2025-06-02" in res.stdout
    assert "naive sequence: " in res.stdout and "PPI++ sequence: " in res.stdout
    lines = res.stdout.split("== plan")[1].splitlines()
    assert lines[1].startswith("sequence tightest at ")  # the target, said before the table
    start = next(i for i, line in enumerate(lines) if line.startswith("day "))
    table = lines[start:start + 6]
    assert table[0].split()[:3] == ["day", "labels", "unlabeled"]
    assert [int(line.split()[0]) for line in table[2:]] == [3, 7, 14, 21]
    assert max(len(line) for line in table) <= 100
    frame = pd.read_csv(tmp_path / "monitor.csv")
    assert frame["day"].tolist() == [3, 3, 7, 7, 14, 14, 21, 21]


def _bad(frame: pd.DataFrame, kind: str) -> pd.DataFrame:
    frame = frame.copy()
    plan = frame["case_study"] == "plan"
    if kind == "no started_at":
        return frame.drop(columns="started_at")
    if kind == "empty started_at":
        frame["started_at"] = frame["started_at"].astype(object)
        frame.loc[frame.index[plan][2], "started_at"] = None
    elif kind == "future":
        frame.loc[frame.index[plan][0], "started_at"] = pd.Timestamp.now(tz="UTC") + pd.Timedelta(
            days=30)
    elif kind == "ids out of order":  # integer ids in time order, then two swapped times
        rows = frame.index[frame["case_study"] == "claude4_vs_gpt5"]
        order = rows[np.argsort(frame.loc[rows, "started_at"].to_numpy(), kind="stable")]
        frame.loc[order, "session_id"] = [str(i) for i in range(len(order))]
        frame.loc[[order[5], order[-5]], "started_at"] = frame.loc[[order[-5], order[5]],
                                                                   "started_at"].to_numpy()
    elif kind == "arm without labels":
        treated = plan & (frame["condition"] == "show-plan") & frame["rating"].notna()
        frame.loc[treated, "started_at"] = pd.Timestamp("2025-06-20", tz="UTC")
    return frame


BAD = {  # kind -> (overrides, expected fragments)
    "no started_at": ([], ["column 'started_at': missing", "Monitoring needs when each session "
                                                           "started"]),
    "empty started_at": ([], ["column 'started_at': empty values in monitored case study "
                              "'plan'", "row "]),
    "future": ([], ["column 'started_at': start times in the future", "session_id="]),
    "ids out of order": (["case_study=claude4_vs_gpt5", "model_uri=models:/pulse-satisfaction/2"],
                         ["session ids are integers", "session_id=6)", "check_id_order=false"]),
    "arm without labels": (["looks=[7,14]"], ["case study 'plan', treatment arm 'show-plan' has "
                                              "no labeled session by the last look (day 14)"]),
    "looks not increasing": (["looks=[7,3]"], ["looks=[7,3] must be increasing"]),
    "looks in the future": (["looks=[7,9999]"], ["looks in the future", "horizon_days"]),
    "in_sample": (["ppi.predictions=in_sample"], ["in_sample is refused",
                                                  "overfit"]),
}


@pytest.mark.parametrize("kind", list(BAD))
def test_bad_input_exit_2_one_message_nothing_written_or_logged(kind, home, small_demo,
                                                                tmp_path, cli):
    overrides, expected = BAD[kind]
    path = small_demo
    if kind in ("no started_at", "empty started_at", "future", "ids out of order",
                "arm without labels"):
        path = tmp_path / "sessions.parquet"
        _bad(pd.read_parquet(small_demo), kind).to_parquet(path, index=False)
    before = len(_infer_runs())
    out = tmp_path / "out"
    res = cli("monitor", f"data.path={path}", f"output={out}", *overrides)
    assert res.returncode == 2, (res.stdout, res.stderr)
    assert res.stderr.startswith("error: ") and "Traceback" not in res.stderr
    for text in expected:
        assert text in res.stderr, (text, res.stderr)
    assert not out.exists()
    assert len(_infer_runs()) == before


def test_plan_reports_days_to_a_conclusive_sequence(capsys):
    from pulse_ml.jobs import plan
    from pulse_ml.stats.sequential.planning import plan_monitoring

    base = ["effect=0.3", "rho=0.6", "sd=1.0"]
    plan.run(compose("plan", base))
    assert "monitored daily" not in capsys.readouterr().out  # unchanged without daily volumes
    plan.run(compose("plan", [*base, "daily_labeled=10", "daily_unlabeled=100", "days=21"]))
    text = capsys.readouterr().out
    expected = plan_monitoring(0.3, 1.0, 0.6, 10, 100, max_days=21)
    rows = {line.split()[0]: line.split() for line in text.splitlines()[-8:]
            if line.split()[:1] in (["naive"], ["PPI++"]) and len(line.split()) == 6}
    assert rows["naive"][1] == str(expected.naive.median_day)
    assert rows["PPI++"][1] == str(expected.augmented.median_day)
    assert expected.augmented.median_day < expected.naive.median_day
    assert f"{expected.peeking_type1:.1%}" in text
    assert np.isfinite(expected.variance_ratio)
