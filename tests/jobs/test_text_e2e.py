"""The text feature kind end to end: train, infer, score and the pyfunc in a fresh process."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import mlflow
import numpy as np
import pandas as pd
import pytest

from pulse_ml.config import compose
from pulse_ml.errors import PulseError
from pulse_ml.jobs import infer, score, train


@pytest.fixture(scope="module")
def text_demo(tmp_path_factory):
    """A small simulated table whose templated user text carries a clear (synthetic) signal."""
    from pulse_ml.simulate.generator import simulate
    from pulse_ml.simulate.spec import CaseStudySpec, SimulateSettings

    settings = SimulateSettings(
        seed=11, n_labeled=500, unlabeled_ratio=2.0, labeled_per_arm=80, min_labeled_per_arm=40,
        mc_sessions=20_000, text_signal=1.5,
        case_studies=(CaseStudySpec("plan", "no-plan", "show-plan", 0.031),))
    out = tmp_path_factory.mktemp("text_demo") / "sessions.parquet"
    simulate(settings).sessions.to_parquet(out, index=False)
    return out


def _train(path, *overrides):
    return train.run(compose("train", [f"data.path={path}", "tuning.n_trials=2",
                                       "progress=false", "model=lightgbm", *overrides]))


def test_text_model_train_infer_score_and_pyfunc(text_demo, pulse_home, tmp_path):
    base = _train(text_demo, "register=false")
    with_text = _train(text_demo, "features=all_text")
    # 500 labeled sessions: the s.e. of an out-of-fold r is about (1 - r^2)/sqrt(500) < 0.045,
    # and the synthetic text lifts r by ~0.2 (text alone reaches r ~ 0.5 at text_signal=1.5),
    # so a gain of 0.08 fails only if the text were not used (or leaked into nothing).
    print("oof r without / with text:", base.metrics.pearson, with_text.metrics.pearson)
    assert with_text.metrics.pearson > base.metrics.pearson + 0.08, (
        base.metrics.pearson, with_text.metrics.pearson)
    assert with_text.promoted and (pulse_home / ".cache" / "text").is_dir()
    assert any(k.startswith("features__text_user_text__") for k in with_text.best_params)

    effects = infer.run(compose("infer", [f"data.path={text_demo}", "permutations=500"]))
    assert list(effects["case_study"].unique()) == ["plan"]
    feats = pd.read_csv(pulse_home / "results" / "infer" / "features.csv")
    assert "user_text (words)" in set(feats["feature"])

    out = tmp_path / "pred.parquet"
    score.run(compose("score", [f"data.path={text_demo}", f"out={out}", "progress=false"]))
    scored = pd.read_parquet(out)
    assert len(scored) == len(pd.read_parquet(text_demo)) and scored["prediction"].notna().all()

    no_text = tmp_path / "no_text.parquet"
    pd.read_parquet(text_demo).drop(columns=["user_text"]).to_parquet(no_text, index=False)
    with pytest.raises(PulseError, match="missing column.*'user_text'"):
        score.run(compose("score", [f"data.path={no_text}", f"out={tmp_path / 'x.parquet'}",
                                    "progress=false"]))

    # The registered pyfunc in a fresh process: signature has the text column, same predictions.
    code = (
        "import json, sys, mlflow, pandas as pd\n"
        "m = mlflow.pyfunc.load_model('models:/pulse-satisfaction@champion')\n"
        "frame = pd.read_parquet(sys.argv[1]).head(40)\n"
        "schema = {c.name: str(c.type) for c in m.metadata.get_input_schema().inputs}\n"
        "print(json.dumps({'schema': schema, 'pred': [float(v) for v in m.predict(frame)]}))\n")
    done = subprocess.run([sys.executable, "-c", code, str(text_demo)], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["schema"]["user_text"].endswith("string")
    model = mlflow.pyfunc.load_model("models:/pulse-satisfaction@champion")
    want = model.predict(pd.read_parquet(text_demo).head(40))
    np.testing.assert_allclose(got["pred"], np.asarray(want, float), rtol=1e-9)
    reqs = (mlflow.artifacts.download_artifacts(f"models:/pulse-satisfaction/{with_text.version}")
            + "/requirements.txt")
    assert "vaderSentiment" in Path(reqs).read_text()


def test_bad_text_input_is_a_note_or_exit_2(text_demo, tmp_path, pulse_home, cli):
    frame = pd.read_parquet(text_demo).head(300)
    csv = tmp_path / "missing.csv"
    frame.assign(user_text=frame["user_text"].where(np.arange(300) % 50 != 3)).to_csv(
        csv, index=False)
    done = cli("validate", "features=all_text", f"data.path={csv}")
    assert done.returncode == 0, done.stderr
    assert "column 'user_text': 6 of 300 session(s) have no text" in done.stdout

    bad = frame.assign(user_text=frame["user_text"].astype(object))
    bad.loc[4, "user_text"] = 42
    bad.loc[9, "user_text"] = ["a", "list"]
    jsonl = tmp_path / "bad.jsonl"
    bad.to_json(jsonl, orient="records", lines=True, date_format="iso")
    done = cli("validate", "features=all_text", f"data.path={jsonl}")
    assert done.returncode == 2, done.stdout + done.stderr
    err = done.stderr
    assert "column 'user_text': values that are not text" in err
    sid = frame["session_id"]
    assert f"row 5 (session_id={sid[4]})" in err and f"row 10 (session_id={sid[9]})" in err
    assert "Traceback" not in err
