"""Judge, labeler and discovery end to end: stub server + a real MLflow sqlite store."""

import json
import re

import numpy as np
import pandas as pd
import pytest
from llm_stub import (
    DISCOVERY_ANSWER,
    FAILURE_ANSWER,
    SENTIMENT_ANSWER,
    Reply,
    prompt_kind,
)
from sklearn.model_selection import KFold

EXPECTED_KEYS = {"cv_mse", "cv_mae", "cv_pearson", "cv_spearman", "cv_mse_std", "cv_mae_std",
                 "cv_pearson_std", "n_sessions", "n_missing", "cost_usd", "tokens_in",
                 "tokens_out"}


def _table(tmp_path, n_labeled=25, n_unlabeled=3):
    rng = np.random.default_rng(5)
    rows = []
    for i in range(n_labeled + n_unlabeled):
        score = int(rng.integers(1, 6))
        rating = float(np.clip(score + rng.choice([-1, 0, 0, 1]), 1, 5)) if i < n_labeled \
            else np.nan
        transcript = [{"role": "user", "text": f"please help SCORE={score} id{i}"},
                      {"role": "agent", "text": "done " * (2000 if i == 0 else 3)}]
        if i == 3:
            transcript[0]["text"] = f"GARBAGE id{i}"
        rows.append({"session_id": f"s{i}", "rating": rating,
                     "transcript": json.dumps(transcript)})
    frame = pd.DataFrame(rows)
    path = tmp_path / "sessions.parquet"
    frame.to_parquet(path)
    return frame, path


def _judge_responder(request, n):
    prompt = request["messages"][-1]["content"]
    if "GARBAGE" in prompt:
        return Reply(text="The user seems satisfied overall.")
    score = int(re.search(r"SCORE=(\d)", prompt).group(1))
    return Reply(text=f'```json\n{{"binary_satisfied": {str(score > 3).lower()}, '
                      f'"likert_score": {score}, "explanation": "x"}}\n```')


def _manual_metrics(y, pred):
    folds = list(KFold(5, shuffle=True, random_state=42).split(y))

    def m(yy, pp):
        ok = ~np.isnan(pp)
        yy, pp = yy[ok], pp[ok]
        return (np.mean((pp - yy) ** 2), np.mean(np.abs(pp - yy)), np.corrcoef(yy, pp)[0, 1])

    pooled = m(y, pred)
    per = np.array([m(y[t], pred[t]) for _, t in folds])
    return pooled, per.std(axis=0)


def test_judge_metrics_and_mlflow_run(stub_server, make_cfg, mlflow_store, tmp_path):
    import mlflow

    from pulse_ml.jobs.judge import JudgeSettings, judge

    stub_server.responder = _judge_responder
    frame, path = _table(tmp_path)
    cfg = make_cfg(name="stubjudge", max_input_tokens=600, retries=1)
    s = JudgeSettings(data_path=path, judge=cfg, output=tmp_path / "out",
                      cache_dir=tmp_path / "cache", progress=False)
    result = judge(s)
    assert stub_server.calls == 24 + 2  # 25 labeled, the garbage one asked twice
    # the long conversation was cut to the token budget, keeping start and end
    long_prompt = next(p for p in stub_server.prompts if "id0" in p)
    assert "characters omitted" in long_prompt and len(long_prompt) <= 4 * 600 + 50
    labeled = frame[frame["rating"].notna()]
    scores = labeled["transcript"].str.extract(r"SCORE=(\d)")[0].astype(float).to_numpy().copy()
    scores[3] = np.nan
    (mse, mae, r), (mse_sd, mae_sd, r_sd) = _manual_metrics(labeled["rating"].to_numpy(), scores)
    m = result.metrics
    assert m["cv_mse"] == pytest.approx(mse) and m["cv_mae"] == pytest.approx(mae)
    assert m["cv_pearson"] == pytest.approx(r)
    assert m["cv_mse_std"] == pytest.approx(mse_sd) and m["cv_pearson_std"] == pytest.approx(r_sd)
    assert m["cv_mae_std"] == pytest.approx(mae_sd)
    assert m["n_missing"] == 1 and m["n_sessions"] == 25

    exp = mlflow.get_experiment_by_name("pulse-train")
    runs = mlflow.search_runs([exp.experiment_id])
    assert len(runs) == 1
    run = runs.iloc[0]
    assert run["tags.kind"] == "llm_judge" and run["tags.judge"] == "stubjudge"
    assert run["params.model"] == "openai/stub-model"
    logged = {c[len("metrics."):] for c in runs.columns if c.startswith("metrics.")}
    assert EXPECTED_KEYS <= logged
    assert run["metrics.cv_mse"] == pytest.approx(mse)
    artifacts = [a.path for a in mlflow.MlflowClient().list_artifacts(run["run_id"])]
    assert "judgments.csv" in artifacts
    csv = pd.read_csv(result.csv_path)
    assert csv.loc[csv["session_id"] == "s3", "error"].str.startswith("InvalidAnswer").all()

    stub_server.reset_counters()  # a rerun is served from the cache (the garbage one is retried)
    judge(s)
    assert stub_server.calls == 2


def test_extract_with_labeler_and_discovery(stub_server, make_cfg, mlflow_store, tmp_path):
    import mlflow

    from pulse_ml.jobs.discover import DiscoverSettings, discover
    from pulse_ml.jobs.extract import ExtractSettings, extract

    def responder(request, n):
        prompt = request["messages"][-1]["content"]
        kind = prompt_kind(prompt)
        if kind == "failure" and "BROKEN" in prompt:
            return Reply(status=500)
        return Reply(text={"sentiment": SENTIMENT_ANSWER, "failure": FAILURE_ANSWER,
                           "discovery": DISCOVERY_ANSWER}[kind])

    stub_server.responder = responder
    events = tmp_path / "events"
    events.mkdir()
    for i, text in enumerate(["add a csv export", "BROKEN please", "thanks, now push"]):
        (events / f"sess{i}.json").write_text(json.dumps([
            {"id": 0, "source": "user", "action": "message", "args": {"content": text}},
            {"id": 1, "source": "agent", "action": "run", "args": {"command": "git push"}},
        ]))
    s = ExtractSettings(input=str(events), out=tmp_path / "t.parquet",
                        labeler=make_cfg(name="stublabeler", retries=1),
                        cache_dir=tmp_path / "cache", progress=False)
    result = extract(s)
    table = pd.read_parquet(tmp_path / "t.parquet").set_index("session_id")
    assert list(table["user_sentiment"]) == ["positive"] * 3
    assert list(table["task_category"]) == ["implement_features"] * 3
    assert table.loc["sess0", "scope_creep"] == 1
    assert table.loc["sess0", "insufficient_testing"] == 0
    assert np.isnan(table.loc["sess1", "scope_creep"])
    assert "failure_modes: InternalServerError 500" in table.loc["sess1", "label_errors"]
    assert table.loc["sess0", "label_errors"] == ""
    assert result.usage.missing == 1
    runs = mlflow.search_runs([mlflow.get_experiment_by_name("pulse-judge").experiment_id])
    assert list(runs["tags.mlflow.runName"]) == ["label-stublabeler"]
    assert runs.iloc[0]["metrics.n_missing"] == 1

    d = DiscoverSettings(data_path=tmp_path / "t.parquet", models=(
        make_cfg(name="m1"), make_cfg(name="m2", model="openai/other")), n_conversations=2,
        seed=1, output=tmp_path / "disc", cache_dir=tmp_path / "cache", progress=False)
    res = discover(d)
    top = res.ranked.iloc[0]
    assert set(res.ranked["key"]) == {"frustration", "git_push"}
    assert top["n_conversations"] == 2 and top["n_models"] == 2
    assert json.loads(res.json_path.read_text())["features"][0]["n_models"] == 2
    assert "| 1 |" in res.markdown_path.read_text()
    runs = mlflow.search_runs([mlflow.get_experiment_by_name("pulse-judge").experiment_id])
    assert len(runs) == 2
