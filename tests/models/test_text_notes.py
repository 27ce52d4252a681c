"""Missing text is counted and said: in the whole-table check (train) and summed over chunks
(score). Real parts: the pulse pipeline builder, a cross-fit ensemble, the chunked scorer.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pulse_ml.inference.scoring import ScoreSettings, score_file
from pulse_ml.models import text_cache
from pulse_ml.models.crossfit import fit_crossfit
from pulse_ml.models.factory import build_pipeline, model_spec_from_mapping
from pulse_ml.sessions.feature_sets import feature_set_from_mapping
from pulse_ml.sessions.table import chunk_notes, load_sessions, note_lines, validate_chunk

RIDGE = model_spec_from_mapping({"name": "ridge", "scale": True,
                                 "estimator": {"_target_": "sklearn.linear_model.Ridge",
                                               "alpha": 1.0}})
FS = feature_set_from_mapping({"name": "t", "columns": {
    "x": {"kind": "numeric"}, "user_text": {"kind": "text", "encoders": "stack",
                                            "stack_on": "tfidf"}}})
WORDS = np.array(["great", "broken", "thanks", "slow", "fine", "again", "works", "no"])


@pytest.fixture(autouse=True)
def _fresh_caches():
    text_cache.clear_text_caches()
    yield
    text_cache.clear_text_caches()


def _table(n: int, missing: np.ndarray) -> pd.DataFrame:
    rng = np.random.default_rng(5)
    texts = pd.DataFrame(WORDS[rng.integers(0, len(WORDS), (n, 6))]).agg(" ".join, axis=1)
    return pd.DataFrame({
        "session_id": [f"s{i:03d}" for i in range(n)], "user_id": [f"u{i:03d}" for i in range(n)],
        "case_study": "", "condition": "a", "rating": rng.integers(1, 6, n).astype(float),
        "x": rng.normal(size=n), "user_text": texts.where(~missing, None)})


def test_train_table_notes_say_how_many_sessions_have_no_text(tmp_path):
    missing = np.zeros(60, dtype=bool)
    missing[[2, 30, 59]] = True
    path = tmp_path / "t.parquet"
    _table(60, missing).to_parquet(path, index=False)
    table = load_sessions(path, FS, {}, only=[])  # what `pulse-ml train` loads
    assert "column 'user_text': 3 of 60 session(s) have no text" in " ".join(table.notes)
    assert (table.frame["user_text"].iloc[[2, 30, 59]] == "").all()


def test_chunked_score_sums_the_missing_text_over_chunks(tmp_path):
    n = 100
    missing = np.zeros(n, dtype=bool)
    missing[[1, 2, 45, 46, 47, 99]] = True  # in chunks 1, 3 and 5 of 20 rows
    frame = _table(n, missing)
    train = frame.iloc[:80].assign(user_text=frame["user_text"].iloc[:80].fillna(""))
    folds = np.arange(80) % 4
    ens = fit_crossfit(lambda: build_pipeline(RIDGE, FS), train,
                       train["rating"].to_numpy(), folds, FS, "ridge")
    path = tmp_path / "score.parquet"
    frame.to_parquet(path, index=False)
    res = score_file(ens, path, tmp_path / "out.parquet",
                     ScoreSettings(chunk_size=20, progress=False))
    assert res.n_chunks == 5
    assert res.notes == ("column 'user_text': 6 of 100 session(s) have no text; they count as "
                         "empty text (no words).",)
    one = score_file(ens, path, tmp_path / "out2.parquet",
                     ScoreSettings(chunk_size=100, progress=False))
    assert one.n_chunks == 1 and one.notes == res.notes  # one chunk or five: the same count


def test_validate_chunk_adds_to_the_count_and_chunk_notes_skip_complete_columns():
    counts: dict[str, int] = {}
    for first in (0, 10):
        missing = np.zeros(10, dtype=bool)
        missing[first // 10] = True
        validate_chunk(_table(10, missing), FS, "f.parquet", first, first // 10 + 1, counts)
    assert counts == {"user_text": 2}
    assert chunk_notes({"user_text": 0}, 20) == ()
    assert chunk_notes({}, 20) == ()
    assert chunk_notes(counts, 20) == ("column 'user_text': 2 of 20 session(s) have no text; "
                                       "they count as empty text (no words).",)


def test_note_lines_print_nothing_without_notes(capsys):
    from pulse_ml.report.tables import say

    say(note_lines(()), end="")
    say(note_lines(("a", "b")), end="")
    assert capsys.readouterr().out == "note: a\nnote: b\n"
