"""The USS example on a subsample: text raises out-of-fold r, and infer runs on its case study.

Needs the USS dialogues in ``../shared/data/real/uss-user-satisfaction-simulation`` (beside
the checkout, or under ``$PULSE_SHARED_DIR``); skips with the reason when they are absent.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

from pulse_ml.config import compose
from pulse_ml.errors import PulseError
from pulse_ml.jobs import audit, infer, train
from tests.conftest import needs_shared, shared_path

ROOT = Path(__file__).resolve().parents[2]
USS = shared_path("data/real/uss-user-satisfaction-simulation")

pytestmark = needs_shared("data/real/uss-user-satisfaction-simulation/SGD.txt")


def _prepare():
    spec = importlib.util.spec_from_file_location("uss_prepare", ROOT / "examples/uss/prepare.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_uss_subsample_text_raises_r_and_infer_runs(pulse_home, tmp_path):
    table = _prepare().build_table(USS, corpora=("SGD", "MWOZ"))
    rng = np.random.default_rng(0)
    table = table.iloc[np.sort(rng.choice(len(table), 900, replace=False))].reset_index(drop=True)
    keep = rng.random(len(table)) < 0.6  # 60% keep their label, the rest are unlabeled
    table.loc[~keep, "rating"] = np.nan
    path = tmp_path / "uss.parquet"
    table.to_parquet(path, index=False)
    text = tmp_path / "text.yaml"  # the default text encoding (TF-IDF + VADER, stacked)
    text.write_text("name: uss_sub\ncolumns:\n  corpus: {kind: categorical}\n"
                    "  user_message_count: {kind: count}\n  user_text: {kind: text}\n")
    common = [f"data.path={path}", "tuning.n_trials=2", "progress=false", "model=hist_gb",
              "cv.group_by=none"]
    base = train.run(compose("train", [*common, "register=false",
                                       f"features={ROOT}/examples/uss/features_no_text.yaml"]))
    with_text = train.run(compose("train", [*common, f"features={text}"]))
    # ~540 labeled dialogues: s.e. of r ~ 0.04; offline on all 3,500 dialogues r was 0.19
    # without text and 0.34 with TF-IDF, so +0.05 fails only if the text adds nothing.
    assert with_text.metrics.pearson > base.metrics.pearson + 0.05, (
        base.metrics.pearson, with_text.metrics.pearson)
    effects = infer.run(compose("infer", [f"data.path={path}", "permutations=500",
                                          f"case_study_dirs=[{ROOT}/examples/uss/case_study]",
                                          "case_studies=[sgd_vs_mwoz]"]))
    assert set(effects["case_study"]) == {"sgd_vs_mwoz"}


def test_uss_audit_reference_truth_reads_the_hidden_labels(pulse_home, tmp_path):
    prepare = _prepare()
    table = prepare.build_table(USS, corpora=("SGD", "MWOZ"), label_share=0.4, seed=3)
    rng = np.random.default_rng(1)
    table = table.iloc[np.sort(rng.choice(len(table), 800, replace=False))].reset_index(drop=True)
    path = tmp_path / "uss_40pct.parquet"
    truth_path = prepare.write_table(table, path)
    assert truth_path == tmp_path / "uss_40pct.ground_truth.json"  # never read for other tables
    effects = json.loads(truth_path.read_text())["effects"]
    assert set(effects) == {"sgd_vs_mwoz"}  # ReDial and CCPE are not in this table
    hidden = table["rating_hidden"].to_numpy(float)
    cond = table["condition"].to_numpy()
    want = hidden[cond == "SGD"].mean() - hidden[cond == "MWOZ"].mean()
    assert effects["sgd_vs_mwoz"]["effect"] == pytest.approx(want, abs=1e-12)
    labeled = table["rating"].notna().to_numpy()
    all_labels = (table["rating"][labeled & (cond == "SGD")].mean()
                  - table["rating"][labeled & (cond == "MWOZ")].mean())
    assert abs(want - all_labels) > 1e-3  # so a reference read from the labels would show

    train.run(compose("train", [f"data.path={path}", "tuning.n_trials=2", "progress=false",
                                "model=hist_gb", "cv.group_by=none", "register=always",
                                f"features={ROOT}/examples/uss/features_no_text.yaml"]))
    res = audit.run(compose("audit", [
        f"data.path={path}", "case_study=sgd_vs_mwoz", "reference=truth", "replications=40",
        "split_half.replications=40", "progress=false", "log_mlflow=false",
        f"case_study_dirs=[{ROOT}/examples/uss/case_study]", f"output={tmp_path / 'audit'}"]))
    truth = res["truth"]
    assert truth["effect"] == pytest.approx(want, abs=1e-12)
    assert Path(truth["source"]) == truth_path
    for method in ("naive", "augmented"):
        t = truth[method]
        assert t["covers"] == (t["ci_lower"] <= want <= t["ci_upper"])
    saved = json.loads((tmp_path / "audit" / "audit_sgd_vs_mwoz.json").read_text())
    assert saved["truth"]["effect"] == pytest.approx(want, abs=1e-12)
    # another table in the same folder does not pick up this table's truth
    other = tmp_path / "other.parquet"
    table.to_parquet(other)
    with pytest.raises(PulseError, match="reference=truth: no true effect"):
        audit.run(compose("audit", [
            f"data.path={other}", "case_study=sgd_vs_mwoz", "reference=truth",
            f"case_study_dirs=[{ROOT}/examples/uss/case_study]", "log_mlflow=false"]))
