"""An LLM judge's score as a feature: `judge sessions=all table_out=...`, then `train` on it."""

from __future__ import annotations

import re

import mlflow
import numpy as np
import pandas as pd
import pytest
from llm_stub import Reply, StubLLMServer

GARBAGE = {"s_lab_3", "s_lab_17", "s_unl_5"}  # their answers never parse: filled + flagged


def _responder(request, n):
    prompt = request["messages"][-1]["content"]
    if "GARBAGE" in prompt:
        return Reply(text="The user seems satisfied overall.")
    score = int(re.search(r"SCORE=(\d)", prompt).group(1))
    return Reply(text=f'{{"binary_satisfied": {str(score > 3).lower()}, '
                      f'"likert_score": {score}, "explanation": "x"}}')


@pytest.fixture
def stub():
    with StubLLMServer(responder=_responder) as server:
        yield server


def _table(small_demo, tmp_path):
    """100 labeled + 40 unlabeled demo sessions with a transcript naming the judge's score.

    A labeled session's score is its rounded rating (the judge is nearly right); an unlabeled
    one's is seeded noise. Three transcripts are garbage, so their calls fail.
    """
    demo = pd.read_parquet(small_demo)
    rng = np.random.default_rng(3)
    lab = demo[demo["rating"].notna()].iloc[:100].copy()
    unl = demo[demo["rating"].isna()].iloc[:40].copy()
    lab["session_id"] = [f"s_lab_{i}" for i in range(len(lab))]
    unl["session_id"] = [f"s_unl_{i}" for i in range(len(unl))]
    frame = pd.concat([lab, unl], ignore_index=True)
    score = np.where(frame["rating"].notna(), np.round(frame["rating"].fillna(3)),
                     rng.integers(1, 6, len(frame))).astype(int)
    frame["transcript"] = [
        f'[{{"role": "user", "text": "{"GARBAGE" if sid in GARBAGE else f"SCORE={s}"} {sid}"}}]'
        for sid, s in zip(frame["session_id"], score, strict=True)]
    path = tmp_path / "sessions.parquet"
    frame.to_parquet(path, index=False)
    return frame, score, path


def test_judge_score_as_a_feature_then_train(stub, small_demo, pulse_home, tmp_path, cli):
    frame, score, path = _table(small_demo, tmp_path)
    out = tmp_path / "judged.csv"
    res = cli("judge", f"data.path={path}", f"judge.api_base={stub.url}", "judge.retries=0",
              "sessions=all", f"table_out={out}", "progress=false",
              f"output={tmp_path / 'judge'}", f"cache_dir={tmp_path / 'cache'}")
    assert res.returncode == 0, res.stderr[-3000:]
    assert stub.calls == len(frame)  # every session was judged, the unlabeled ones too

    judged = pd.read_csv(out)
    assert list(judged["session_id"]) == list(frame["session_id"])  # input table, same order
    assert set(frame.columns) <= set(judged.columns)
    missing = judged["session_id"].isin(GARBAGE).to_numpy()
    assert judged["judge_local_missing"].tolist() == missing.astype(int).tolist()
    fallback = score[~missing].mean()
    expected = np.where(missing, fallback, score)
    np.testing.assert_allclose(judged["judge_local"].to_numpy(), expected)
    assert f"filled 3 of {len(frame)} session(s)" in res.stdout, res.stdout
    assert f"{fallback:.3f}" in res.stdout
    # the metrics are still over the labeled sessions only (2 of the 100 failed)
    run = mlflow.search_runs(experiment_names=["pulse-train"]).iloc[0]
    assert run["metrics.n_sessions"] == 100 and run["metrics.n_missing"] == 2
    assert run["metrics.n_filled"] == 3 and run["params.sessions"] == "all"

    res = cli("train", f"data.path={out}", "features=all_judge", "tuning.n_trials=1",
              "progress=false", "register=false", "model=ordinal_logit")
    assert res.returncode == 0, res.stderr[-3000:]
    runs = mlflow.search_runs(experiment_names=["pulse-train"],
                              filter_string="tags.feature_set = 'all_judge'")
    assert len(runs) == 1, res.stdout
    # The judge column is the rounded rating (r = 0.96 with it). Measured on this table
    # (ordinal_logit, 1 trial): out-of-fold r = 0.47 with features=all, 0.90 with all_judge.
    # The s.e. of r at n = 100 is ~(1 - r^2)/10: ~0.08 at 0.47, ~0.02 at 0.90, so 0.75 sits
    # > 3 s.e. from both: it fails if the judge column were dropped or mangled.
    r = runs.iloc[0]["metrics.cv_pearson"]
    assert r > 0.75, r
