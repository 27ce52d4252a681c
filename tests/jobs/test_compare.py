"""pulse-ml compare on a real sqlite store: users, fold grouping, references, staged outputs."""

from __future__ import annotations

import shutil
from pathlib import Path
from urllib.parse import unquote, urlparse

import mlflow
import pandas as pd

from pulse_ml.config import compose
from pulse_ml.jobs import compare, train

FAST = ["tuning.n_trials=1", "progress=false", "model=ordinal_logit"]


def _train(data: Path, *overrides):
    return train.run(compose("train", [f"data.path={data}", *FAST, *overrides]))


def _compare(*overrides):
    return compare.run(compose("compare", list(overrides)))


def _drop_user_ids(run_id: str) -> None:
    """Rewrite a run's OOF artifact as runs logged before user ids were kept."""
    uri = mlflow.MlflowClient().get_run(run_id).info.artifact_uri
    path = Path(unquote(urlparse(uri).path)) / "oof_predictions.csv"
    pd.read_csv(path).drop(columns=["user_id"]).to_csv(path, index=False)


def test_pairing_users_folds_references_and_stale_outputs(small_demo, pulse_home, tmp_path,
                                                          capsys, cli, immutable):
    data = tmp_path / "sessions.parquet"
    shutil.copy(small_demo, data)
    v1 = _train(data)                                            # champion, folds by user
    v2 = _train(data, "register=always")                         # same key: the latest run
    _train(data, "cv.group_by=none", "register=never")           # sessions split over folds
    pearson = _train(data, "objective=cv_pearson", "seed=1", "register=never")
    assert v1.version == "1" and v2.version == "2" and v1.promoted
    out = pulse_home / "results" / "compare"
    capsys.readouterr()

    # reference=1: the older run of the same (family, features, seed, data) stays in the table
    table = _compare("reference=1")
    text = capsys.readouterr().out
    assert v1.run_id in set(table["run_id"]) and v2.run_id in set(table["run_id"])
    paired = pd.read_csv(out / "paired.csv")
    assert set(paired["run_id"]) == {v2.run_id, pearson.run_id}  # not the session-split run
    flat = " ".join(text.split())  # say() wraps long lines at 100 columns
    assert ("note: ordinal_logit (all, seed 42): not paired, the folds were grouped differently "
            "(cv.group_by=none for the new model, user_id for v1)") in flat
    assert (paired["resampled"] == "users").all()
    assert (paired["n_groups"] < paired["n_sessions"]).all()
    by_run = paired.set_index("run_id")
    assert by_run.loc[pearson.run_id, "significant"].endswith("(Δr)")  # its objective
    assert by_run.loc[v2.run_id, "significant"] == "no (ΔMSE)"  # the same model: Δ = 0
    head = text.split("the full table")[0]  # the columns the legend explains
    assert "expected_ci_red_%" in head and "at_N/n=20" in head
    wide = [line for line in text.splitlines() if len(line) > 100 and " " in line.strip()]
    assert wide == [], text  # the paired table too

    # runs logged before user ids: users come from their training table ...
    for run in (v1, v2, pearson):
        _drop_user_ids(run.run_id)
    _compare()
    again = pd.read_csv(out / "paired.csv")
    assert (again["resampled"] == "users").all()
    assert list(again["n_groups"]) == list(paired.set_index("run_id").loc[
        again["run_id"], "n_groups"])
    # ... and without it the sessions are resampled, and every row says so
    data.unlink()
    _compare()
    text = capsys.readouterr().out
    alone = pd.read_csv(out / "paired.csv")
    assert (alone["resampled"] == "sessions").all()
    assert (alone["n_groups"] == alone["n_sessions"]).all()
    assert alone["note"].str.contains("interval may be too narrow").all()
    assert "sessions resampled: no user ids" in " ".join(text.split())

    # no pairing this time: the paired files of the last call are gone, the rest is rewritten
    _compare("reference=none")
    assert not (out / "paired.csv").exists() and not (out / "paired.png").exists()
    assert (out / "comparison.csv").is_file()

    # compare only reads: a read-only store is fine
    store = pulse_home / "mlruns"
    with immutable(store / "mlflow.db", store):
        res = cli("compare", f"output={tmp_path / 'ro'}", "reference=none")
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "ro" / "comparison.csv").is_file()


def test_ablation_by_family_notes_pooled_data(small_demo, pulse_home, capsys):
    _train(small_demo, "model=mean", "register=never")
    _train(small_demo, "model=mean", "register=never", "exclude_case_studies=[plan]")
    capsys.readouterr()
    ablation = _compare("group_by=family")
    text = capsys.readouterr().out
    assert list(ablation["family"]) == ["mean"] and int(ablation["datasets"].iloc[0]) == 2
    assert "rows pool runs on 2 different training data" in " ".join(text.split())
    one = _compare("group_by=family", f"data_fingerprint={_fp(pulse_home)}")
    assert int(one["datasets"].iloc[0]) == 1
    assert "different training data" not in capsys.readouterr().out


def _fp(pulse_home: Path) -> str:
    """The data fingerprint of the first family run (a prefix is enough)."""
    runs = mlflow.search_runs(search_all_experiments=True, filter_string="tags.kind = 'family'",
                              order_by=["attributes.start_time ASC"])
    return str(runs["tags.data_fingerprint"].iloc[0])[:12]
