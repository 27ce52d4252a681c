"""Inference end to end from the registry, and every bad input it must refuse clearly."""

from __future__ import annotations

import json

import mlflow
import numpy as np
import pandas as pd
import pytest

from pulse_ml import keys
from pulse_ml.config import compose
from pulse_ml.jobs import infer
from pulse_ml.stats.arm_effect import compare_arms
from pulse_ml.stats.arm_inputs import Arm


@pytest.fixture
def registered(trained_home):
    """A champion trained on the small demo table."""
    return trained_home("tuning.n_trials=3", "progress=false", "model=lightgbm")


def _infer(small_demo, *overrides):
    return infer.run(compose("infer", [f"data.path={small_demo}", "permutations=2000",
                                       *overrides]))


def test_infer_from_champion_writes_results_and_logs(small_demo, pulse_home, registered):
    effects = _infer(small_demo)
    assert set(effects["case_study"]) == {"plan", "claude4_vs_gpt5"}
    assert list(effects.columns) == infer.effects_frame([]).columns.tolist()
    out = pulse_home / "results" / "infer"
    for name in ("effects.json", "effects.csv", "effects.md", "forest.png", "features.csv",
                 "label_shift.csv"):
        assert (out / name).is_file(), name
    meta = json.loads((out / "effects.json").read_text())
    assert meta["model_version"] == registered.version and meta["valid_intervals"]
    # The CI reduction does not apply to naive rows: null in JSON, blank in CSV and Markdown.
    red = {r["estimator"]: r["ci_reduction_pct"] for r in meta["effects"]}
    assert red["naive"] is None and isinstance(red["augmented"], float)
    csv = pd.read_csv(out / "effects.csv")
    assert csv.loc[csv["estimator"] == "naive", "ci_reduction_pct"].isna().all()
    assert csv.loc[csv["estimator"] == "augmented", "ci_reduction_pct"].notna().all()
    md = [line.split("|") for line in (out / "effects.md").read_text().splitlines()
          if line.startswith("| ")]
    col = [c.strip() for c in md[0]].index("ci_reduction_pct")
    assert {r[col].strip() for r in md[1:] if r[4].strip() == "naive"} == {""}
    assert meta["n_labeled_with_oof"] == int(pd.read_parquet(small_demo)["rating"].notna().sum())
    exp = mlflow.MlflowClient().get_experiment_by_name("pulse-infer")
    runs = mlflow.search_runs([exp.experiment_id])
    assert len(runs) == 1 and runs["tags.model_version"][0] == registered.version
    assert runs[f"tags.{keys.VALID_INTERVALS}"][0] == "true"  # a tag to filter on
    feats = pd.read_csv(out / "features.csv")
    assert {"feature", "p_value", "q_value"} <= set(feats.columns)


def test_augmented_interval_uses_out_of_fold_predictions(small_demo, pulse_home, registered):
    """Recompute one case study by hand from the OOF artifact of the registered run."""
    effects = _infer(small_demo, "case_studies=[plan]", "clusters=none")
    client = mlflow.MlflowClient()
    oof = pd.read_csv(client.download_artifacts(registered.run_id, "oof_predictions.csv"))
    model = mlflow.pyfunc.load_model("models:/pulse-satisfaction@champion")
    frame = pd.read_parquet(small_demo)
    preds = np.asarray(model.predict(frame), float)
    lookup = dict(zip(oof["session_id"], oof["prediction"], strict=True))
    labeled = frame["rating"].notna().to_numpy()
    honest = np.where(labeled, frame["session_id"].map(lookup).to_numpy(float), preds)
    arm = {}
    for cond in ("no-plan", "show-plan"):
        m = ((frame["case_study"] == "plan") & (frame["condition"] == cond)).to_numpy()
        arm[cond] = (frame["rating"].to_numpy()[m & labeled], honest[m & labeled],
                     honest[m & ~labeled])
    expected = compare_arms(Arm(*arm["no-plan"]), Arm(*arm["show-plan"]), alpha=0.05)
    aug = effects[effects["estimator"] == "augmented"].iloc[0]
    assert aug["effect"] == pytest.approx(expected.augmented.effect, abs=1e-9)
    assert aug["ci_lower"] == pytest.approx(expected.augmented.ci_lower, abs=1e-9)
    naive = effects[effects["estimator"] == "naive"].iloc[0]
    assert naive["ci_upper"] == pytest.approx(expected.naive.ci_upper, abs=1e-9)


def test_in_sample_mode_says_intervals_are_not_valid(small_demo, pulse_home, registered, cli):
    res = cli("infer", f"data.path={small_demo}", "ppi.predictions=in_sample",
              "permutations=500")
    assert res.returncode == 0, res.stderr
    # once (it was printed twice, as a 254-character line), on stderr, wrapped
    assert res.stderr.count("NOT valid") == 1 and "NOT valid" not in res.stdout, res.stderr
    assert "WARNING: ppi.predictions=in_sample" in res.stderr
    assert max(len(line) for line in res.stderr.splitlines()) <= 100
    exp = mlflow.MlflowClient().get_experiment_by_name(keys.INFER_EXPERIMENT)
    (tags,) = [r.data.tags for r in mlflow.MlflowClient().search_runs([exp.experiment_id])]
    assert tags[keys.MODE] == "in_sample" and tags[keys.VALID_INTERVALS] == "false"


def test_missing_alias_is_a_clear_error(small_demo, pulse_home, cli):
    res = cli("infer", f"data.path={small_demo}")
    assert res.returncode == 2
    assert "cannot load model 'models:/pulse-satisfaction@champion'" in res.stderr
    assert "Traceback" not in res.stderr


def test_case_study_missing_from_data(small_demo, pulse_home, registered, cli):
    res = cli("infer", f"data.path={small_demo}", "case_studies=[memory]")
    assert res.returncode == 2 and "'memory' not in the data" in res.stderr
    assert "Traceback" not in res.stderr


def test_arm_without_labels(small_demo, pulse_home, registered, cli, tmp_path):
    frame = pd.read_parquet(small_demo)
    arm = (frame["case_study"] == "plan") & (frame["condition"] == "show-plan")
    frame.loc[arm, "rating"] = np.nan
    frame.loc[arm, "n_ratings"] = 0
    path = tmp_path / "nolabels.parquet"
    frame.to_parquet(path)
    res = cli("infer", f"data.path={path}")
    assert res.returncode == 2
    assert "treatment arm 'show-plan' has 0 labeled session(s)" in res.stderr


def test_table_lacking_model_features(small_demo, pulse_home, registered, cli, tmp_path):
    frame = pd.read_parquet(small_demo).drop(columns=["git_push"])
    path = tmp_path / "nogit.csv"
    frame.to_csv(path, index=False)
    res = cli("infer", f"data.path={path}")
    assert res.returncode == 2 and "git_push" in res.stderr and "lacks" in res.stderr


def test_model_without_oof_predictions(small_demo, pulse_home, cli):
    from sklearn.dummy import DummyRegressor

    from pulse_ml.registry import store as tracking

    tracking.setup(keys.TRAIN_EXPERIMENT)
    with mlflow.start_run():
        mlflow.sklearn.log_model(DummyRegressor().fit([[0.0]], [4.0]), name="model",
                                 registered_model_name="pulse-satisfaction")
    res = cli("infer", f"data.path={small_demo}", "model_uri=models:/pulse-satisfaction/1")
    assert res.returncode == 2
    assert "no out-of-fold predictions" in res.stderr and "honest" in res.stderr


def test_audit_and_plan(small_demo, pulse_home, registered, cli):
    res = cli("audit", "case_study=plan", f"data.path={small_demo}", "replications=60",
              "progress=false")
    assert res.returncode == 0, res.stderr
    report = json.loads((pulse_home / "results" / "audit" / "audit_plan.json").read_text())
    assert report["consistency"]["replications"] == 60
    assert report["verdict"] in ("valid", "inconclusive", "too narrow")
    assert 0.5 < report["consistency"]["mean_se_ratio"] <= 1.05
    plan = cli("plan", "effect=0.2")
    assert plan.returncode == 0, plan.stderr
    assert "naive A/B test" in plan.stdout and "with PPI++" in plan.stdout
    missing = cli("audit", f"data.path={small_demo}")
    assert missing.returncode == 2 and "case_study=" in missing.stderr


# The pipeline end to end (train the families, register, infer): tests/jobs/test_cli.py
# test_every_verb_fits_100_columns_on_the_demo runs it once for both checks.


def test_reweight_writes_prediction_shift_and_changes_the_estimate(small_demo, pulse_home,
                                                                   registered):
    plain = _infer(small_demo, "case_studies=[plan]")
    weighted = _infer(small_demo, "case_studies=[plan]", "reweight=true")
    out = pulse_home / "results" / "infer"
    shift = pd.read_csv(out / "prediction_shift.csv")
    assert set(shift["arm"]) == {"control", "treatment"}
    assert {"smd", "rank_biserial", "mean_labeled", "mean_unlabeled"} <= set(shift.columns)
    a = plain.set_index("estimator")["effect"]
    b = weighted.set_index("estimator")["effect"]
    assert not np.isclose(a["augmented"], b["augmented"])
    assert np.isfinite(weighted[["ci_lower", "ci_upper"]].to_numpy(float)).all()


def test_plan_estimates_the_users_design_effect(small_demo, pulse_home, registered, cli):
    res = cli("plan", "effect=0.2", "design_effect=estimate", f"data.path={small_demo}")
    assert res.returncode == 0, res.stderr
    assert "estimated from" in res.stdout and "ICC" in res.stdout
    given = cli("plan", "effect=0.2", "design_effect=2")
    n_given = int(given.stdout.split("naive A/B test :")[1].split()[0].replace(",", ""))
    n_est = int(res.stdout.split("naive A/B test :")[1].split()[0].replace(",", ""))
    assert n_given > n_est  # a design effect of 2 needs more labels than the estimated one


def test_interval_warnings_reach_report_html(small_demo, pulse_home, registered, tmp_path):
    """A small arm's warning is printed, kept in effects.json and shown on report.html."""
    import html

    frame = pd.read_parquet(small_demo)
    arm = (frame["case_study"] == "plan") & (frame["condition"] == "show-plan")
    rated = frame.index[arm & frame["rating"].notna()]
    frame.loc[rated[20:], "rating"] = np.nan  # 20 labeled sessions left (< 30): a warning
    frame.loc[rated[20:], "n_ratings"] = 0
    path = tmp_path / "few.parquet"
    frame.to_parquet(path)
    out = tmp_path / "infer"
    _infer(path, f"output={out}", "case_studies=[plan]")
    warnings = json.loads((out / "effects.json").read_text())["warnings"]["plan"]
    assert any("treatment arm" in w for w in warnings)
    page = html.unescape((out / "report.html").read_text())
    for w in warnings:
        assert f'class="warning">plan: {w}' in page
