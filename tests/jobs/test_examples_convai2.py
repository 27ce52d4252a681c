"""The ConvAI2 worked example (examples/convai2/): prepare -> train -> infer -> audit.

The end-to-end test runs on a 500-chat subsample of the real wild-evaluation data in
<repo>/../shared (skipped when that folder is absent); the prepare.py unit tests use a tiny
hand-written dialogue file and always run.
"""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import mlflow
import numpy as np
import pandas as pd
import pytest
import yaml

from tests.conftest import needs_shared, shared_path

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "convai2"
DATA_FILE = "data/real/convai2-wild-evaluation/data_volunteers.json"
DATA = shared_path(DATA_FILE)


def _load_prepare():
    spec = importlib.util.spec_from_file_location("convai2_prepare", EXAMPLE / "prepare.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


prepare = _load_prepare()


def _turn(i, who, text, score=None):
    sender = "participant1" if who == "Human" else "participant2"
    return {"id": i, "sender": sender, "text": text, "evaluation_score": score,
            "sender_class": who}


def _chat(user, bot, turns, rating, guess):
    return {"dialog": turns, "start_time": "2018-11-01 10:00:00.000000",
            "end_time": "2018-11-01 10:03:00", "bot_profile": [], "user_profile": [],
            "eval_score": rating, "profile_match": guess,
            "participant1_id": {"class": "User", "user_id": user},
            "participant2_id": {"class": "Bot", "user_id": bot}}


TINY = [
    _chat("User 1", "Bot A", [
        _turn(0, "Human", "hi there, you are great :)"),
        _turn(1, "Bot", "hello how are you", 1),
        _turn(2, "Human", "good thanks lol"),
        _turn(3, "Bot", "Hello how are you ", 0),
        _turn(4, "Bot", "i like dogs", 1),
    ], 4, 1),
    _chat("User 2", "Bot B", [
        _turn(0, "Human", "this is boring and stupid"),
        _turn(1, "Bot", "ok"),
    ], None, ""),
    _chat("User 2", "Bot C", [], None, 0),
]


def test_prepare_features_on_a_tiny_file(tmp_path):
    src = tmp_path / "tiny.json"
    src.write_text(json.dumps(TINY))
    out = tmp_path / "tiny.csv"
    assert prepare.main(["--input", str(src), "--out", str(out), "--pairs", "Bot A:Bot B"]) == 0
    t = pd.read_csv(out, keep_default_na=False).set_index("session_id")
    a, b, c = t.loc["convai2-0000"], t.loc["convai2-0001"], t.loc["convai2-0002"]
    assert (a["condition"], a["user_id"], a["case_study"]) == ("Bot A", "User 1", "bota_vs_botb")
    assert b["case_study"] == "bota_vs_botb" and c["case_study"] == ""
    assert (a["user_message_count"], a["bot_message_count"]) == (2, 3)
    assert (a["thumbs_up"], a["thumbs_down"]) == (2, 1)
    assert a["bot_repeat_share"] == pytest.approx(1 / 3)  # "Hello how are you " repeats
    assert a["mean_user_words"] == pytest.approx((6 + 3) / 2)
    assert float(a["rating"]) == 4 and a["n_ratings"] == 1 and b["rating"] == ""
    assert (a["profile_guess"], b["profile_guess"], c["profile_guess"]) == (
        "match", "none", "mismatch")
    # great, :), good, thanks, lol -> 5 positive, 0 negative; boring, stupid -> 2 negative
    assert a["user_sentiment_score"] == pytest.approx(5 / 6) and a["user_sentiment"] == "positive"
    assert b["user_sentiment_score"] == pytest.approx(-2 / 3) and b["user_sentiment"] == "negative"
    assert c["user_message_count"] == 0 and c["mean_user_words"] == 0
    assert c["user_sentiment"] == "neutral" and a["duration_min"] == pytest.approx(3.0)


def test_prepare_refuses_overlapping_pairs(tmp_path):
    with pytest.raises(ValueError, match="Bot 002 appear"):
        prepare.parse_pairs("Bot 002:Bot 006,Bot 002:Bot 009")
    src = tmp_path / "tiny.json"
    src.write_text(json.dumps(TINY))
    res = subprocess.run([sys.executable, str(EXAMPLE / "prepare.py"), "--input", str(src),
                          "--out", str(tmp_path / "x.csv"), "--pairs", "Bot A:Bot B,Bot B:Bot C"],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 2 and "disjoint" in res.stderr and "Traceback" not in res.stderr


def test_feature_set_matches_prepare_output(tmp_path):
    src = tmp_path / "tiny.json"
    src.write_text(json.dumps(TINY))
    table = prepare.build_table(prepare.read_chats(src, None, 0), [("Bot A", "Bot B")],
                                prepare.load_lexicon(prepare.DEFAULT_LEXICON))
    columns = yaml.safe_load((EXAMPLE / "features.yaml").read_text())["columns"]
    assert set(columns) <= set(table.columns)
    for study in (EXAMPLE / "case_study").glob("*.yaml"):
        node = yaml.safe_load(study.read_text())
        assert node["name"] == study.stem == prepare.case_study_name(node["control"],
                                                                     node["treatment"])


@needs_shared(DATA_FILE)
@pytest.mark.parametrize(("feature_file", "feature_set"), [
    ("features.yaml", "convai2"),
    ("features_text.yaml", "convai2_text"),  # + user_text, bot_text as text columns
])
def test_convai2_example_end_to_end_on_a_subsample(pulse_home, cli, tmp_path, feature_file,
                                                   feature_set):
    sessions = tmp_path / "convai2_sub.parquet"
    res = subprocess.run([sys.executable, str(EXAMPLE / "prepare.py"), "--sample", "500",
                          "--seed", "0", "--input", str(DATA), "--out", str(sessions)],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    table = pd.read_parquet(sessions)
    assert len(table) == 500 and table["session_id"].is_unique
    rated = table["rating"].dropna()
    assert rated.between(1, 5).all() and 0.4 < len(rated) / len(table) < 0.7
    bots_per_study = table[table["case_study"] != ""].groupby("case_study")["condition"].unique()
    assert {k: sorted(v) for k, v in bots_per_study.items()} == {
        "bot002_vs_bot006": ["Bot 002", "Bot 006"], "bot009_vs_bot011": ["Bot 009", "Bot 011"]}
    assert table.groupby("condition")["case_study"].nunique().max() == 1  # one study per chat

    features = EXAMPLE / feature_file
    text_columns = [c for c, spec in yaml.safe_load(features.read_text())["columns"].items()
                    if spec.get("kind") == "text"]
    if feature_set == "convai2_text":
        assert text_columns == ["user_text", "bot_text"]
        for col in text_columns:  # prepare writes each side's messages as strings
            assert table[col].map(lambda v: isinstance(v, str)).all()
            assert table[col].str.len().gt(0).mean() > 0.5
    studies = EXAMPLE / "case_study"
    res = cli("train", f"data.path={sessions}", f"features={features}", "model=lightgbm",
              "tuning.n_trials=2", "progress=false")
    assert res.returncode == 0, res.stderr
    run = mlflow.search_runs(experiment_names=["pulse-train"],
                             filter_string="tags.kind = 'family'")
    assert len(run) == 1 and np.isfinite(run["metrics.cv_pearson"][0])
    assert run["tags.feature_set"][0] == feature_set

    res = cli("infer", f"data.path={sessions}", f"case_study_dirs=['{studies}']",
              "permutations=500")
    assert res.returncode == 0, res.stderr
    effects = pd.read_csv(pulse_home / "results" / "infer" / "effects.csv")
    assert set(effects["case_study"]) == {"bot002_vs_bot006", "bot009_vs_bot011"}
    first = effects[effects["case_study"] == "bot002_vs_bot006"].iloc[0]
    assert (first["control"], first["treatment"]) == ("Bot 002", "Bot 006")
    assert np.isfinite(effects[["effect", "ci_lower", "ci_upper"]].to_numpy(float)).all()
    # a shifted feature is one warning per case study (a categorical one names its levels)
    warned = re.findall(r"warning: (\S+): labeled sessions differ from unlabeled ones in "
                        r"'(\w+)'", " ".join(res.stdout.split()))
    assert len(warned) == len(set(warned)), warned

    res = cli("audit", f"data.path={sessions}", f"case_study_dirs=['{studies}']",
              "case_study=bot002_vs_bot006", "replications=30", "progress=false")
    assert res.returncode == 0, res.stderr
    audit = json.loads((pulse_home / "results" / "audit" / "audit_bot002_vs_bot006.json")
                       .read_text())
    cons = audit["consistency"]
    assert cons["replications"] == 30
    assert 0 <= cons["consistency_rate_naive"] <= 1 and 0 <= cons["consistency_rate_augmented"] <= 1
    assert cons["mean_se_ratio"] > 0
