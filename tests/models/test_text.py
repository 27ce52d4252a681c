"""Text features: honesty (no leak through the text sub-model), signal, folds, persistence.

Real parts only: the pulse pipeline builder, scikit-learn, vaderSentiment and the WordLlama
weights shipped inside the ``wordllama`` package (tests needing those skip with a reason when
the package cannot be imported).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import joblib
import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone

from pulse_ml.errors import PulseError
from pulse_ml.models import text_cache
from pulse_ml.models.crossfit import fit_crossfit
from pulse_ml.models.factory import build_pipeline, model_spec_from_mapping
from pulse_ml.models.preprocess import feature_frame
from pulse_ml.models.text import TextFeatures
from pulse_ml.models.text_encoders import load_wordllama, vader_features, wordllama_features
from pulse_ml.models.text_packages import require_package, text_requirements
from pulse_ml.sessions.feature_sets import feature_set_from_mapping
from pulse_ml.sessions.text_column import check_text_column
from pulse_ml.sessions.text_options import text_search_space
from pulse_ml.stats.arm_effect import compare_arms
from pulse_ml.stats.arm_inputs import Arm
from pulse_ml.training.metrics import pearson
from tests.conftest import needs_shared, shared_path

REPO = Path(__file__).resolve().parents[2]
RIDGE = model_spec_from_mapping({"name": "ridge", "scale": True,
                                 "estimator": {"_target_": "sklearn.linear_model.Ridge",
                                               "alpha": 1.0}})
VOCAB = np.array([f"tok{i:04d}" for i in range(1500)])


def _has(module: str) -> bool:
    try:
        __import__(module)
    except ImportError:
        return False
    return True


needs_vader = pytest.mark.skipif(not _has("vaderSentiment"),
                                 reason="vaderSentiment not installed (a base dependency: "
                                        "pip install 'vaderSentiment>=3.3')")
needs_wordllama = pytest.mark.skipif(not _has("wordllama"),
                                     reason="wordllama not installed (pip install "
                                            "'pulse-ml[text]')")


@pytest.fixture(autouse=True)
def _fresh_caches():
    text_cache.clear_text_caches()
    yield
    text_cache.clear_text_caches()


def _noise_texts(rng: np.random.Generator, n: int, length: int = 25) -> list[str]:
    """Texts of random tokens, independent of everything else (pure noise)."""
    tokens = VOCAB[rng.integers(0, len(VOCAB), size=(n, length))]
    return pd.DataFrame(tokens).agg(" ".join, axis=1).tolist()


def _features(text_options: dict | None = None, with_x: bool = False):
    cols = {"x": {"kind": "numeric"}} if with_x else {}
    cols["user_text"] = {"kind": "text", **(text_options or {"encoders": "stack"})}
    return feature_set_from_mapping({"name": "t", "columns": cols})


def _folds(n: int, seed: int, k: int = 5) -> np.ndarray:
    return np.random.default_rng(seed).permutation(np.arange(n) % k)


def _oof(frame: pd.DataFrame, y: np.ndarray, fs, folds: np.ndarray) -> np.ndarray:
    X = feature_frame(frame, fs)
    oof = np.empty(len(y))
    for k in np.unique(folds):
        test = folds == k
        model = build_pipeline(RIDGE, fs).fit(X[~test], y[~test])
        oof[test] = model.predict(X[test])
    return oof


# --------------------------------------------------------------------------------------------
# Honesty
# --------------------------------------------------------------------------------------------


def _precomputed_stack(texts: list[str], y: np.ndarray) -> np.ndarray:
    """The leak to guard against: a text sub-model fitted on *all* labeled rows, its
    prediction stored as a feature, then cross-validated like any column."""
    enc = TextFeatures(encoders="stack")
    enc.fit(pd.Series(texts), y)
    return enc.transform(pd.Series(texts))[:, 0]


@pytest.mark.slow
def test_text_pure_noise_gives_oof_r_near_zero_and_no_ci_gain_while_a_leak_would_show():
    # y is independent of the text. Per replication the out-of-fold r of n=300 pure-noise
    # predictions has sd ~ 1/sqrt(300) = 0.058, so the mean over R=12 replications has
    # Monte-Carlo error ~0.017 around its expectation, which is slightly *negative* for
    # K-fold CV of noise (the training mean moves against the held-out fold; measured
    # -0.056). An honest pipeline therefore stays below 0.06 (> 6 SE above that), while a
    # sub-model fitted on all rows (memorising the ratings) shows r ~ 0.95 and halves the CI.
    # The width ratio of PPI++ with a useless honest predictor is ~1 (lambda ~ 0); its
    # replication sd is ~0.01, so the mean over 12 replications is within ~0.005 of 1.
    n_lab, n_unl, reps = 300, 300, 12
    r_honest, r_leak, ratio_honest, ratio_leak = [], [], [], []
    fs_text, fs_leak = _features(), feature_set_from_mapping(
        {"name": "leak", "columns": {"stack_value": {"kind": "numeric"}}})
    for rep in range(reps):
        rng = np.random.default_rng(1000 + rep)
        texts = _noise_texts(rng, n_lab + n_unl)
        arm = rng.integers(0, 2, n_lab + n_unl)
        y_all = rng.normal(3.5, 1.0, n_lab + n_unl)
        frame = pd.DataFrame({"session_id": [f"s{i}" for i in range(n_lab + n_unl)],
                              "user_text": texts, "rating": y_all})
        lab, unl = frame.iloc[:n_lab], frame.iloc[n_lab:]
        y = y_all[:n_lab]
        folds = _folds(n_lab, rep)
        ens = fit_crossfit(lambda: build_pipeline(RIDGE, fs_text), lab, y, folds, fs_text,
                           "ridge")
        f_lab, f_unl = ens.oof["prediction"].to_numpy(), ens.predict(unl)
        r_honest.append(pearson(y, f_lab))
        leak = pd.DataFrame({"stack_value": _precomputed_stack(texts[:n_lab], y)})
        f_leak = _oof(leak, y, fs_leak, folds)
        f_leak_unl = np.mean([build_pipeline(RIDGE, fs_leak).fit(leak[folds != k], y[
            folds != k]).predict(pd.DataFrame({"stack_value": TextFeatures(
                encoders="stack").fit(pd.Series(texts[:n_lab]), y).transform(
                pd.Series(texts[n_lab:]))[:, 0]})) for k in range(5)], axis=0)
        r_leak.append(pearson(y, f_leak))
        for f_l, f_u, out in ((f_lab, f_unl, ratio_honest), (f_leak, f_leak_unl, ratio_leak)):
            a_l, a_u = arm[:n_lab], arm[n_lab:]
            res = compare_arms(Arm(y[a_l == 0], f_l[a_l == 0], f_u[a_u == 0]),
                               Arm(y[a_l == 1], f_l[a_l == 1], f_u[a_u == 1]))
            out.append(res.augmented.width / res.naive.width)
    print(f"r honest {np.mean(r_honest):.3f}, leak {np.mean(r_leak):.3f}; width ratio honest "
          f"{np.mean(ratio_honest):.3f}, leak {np.mean(ratio_leak):.3f}")
    assert -0.12 < np.mean(r_honest) < 0.06
    assert np.mean(ratio_honest) > 0.98
    assert np.mean(r_leak) > 0.3, "the leaky stack must be detectable, or this test is blind"
    assert np.mean(ratio_leak) < 0.9


class _InSampleStack(TextFeatures):
    """A naive stack: training rows get the in-sample prediction of the sub-model (no inner
    cross-fit). Still outer-honest, but the structured model learns to trust memorised text."""

    def _inner_crossfit(self, design, y):
        from sklearn.linear_model import Ridge

        return Ridge(alpha=float(self.stack_alpha)).fit(design, y).predict(design)


@pytest.mark.slow
def test_inner_crossfit_keeps_the_structured_signal_an_in_sample_stack_drowns_it():
    # y = x + noise and the text is noise. With the inner cross-fit the stacked column is
    # ~uncorrelated with y in training, the ridge ignores it and the OOF r stays at r(x)
    # (~0.45 here). The in-sample stack correlates ~0.8 with y in training, the structured
    # model leans on it, and out of fold that weight is noise: r falls by > 0.1. Over R=6
    # replications of n=300 the mean r has Monte-Carlo error ~0.02, far below the gap.
    reps, n = 6, 300
    honest, naive = [], []
    for rep in range(reps):
        rng = np.random.default_rng(2000 + rep)
        x = rng.normal(size=n)
        y = 3.0 + 0.5 * x + rng.normal(size=n)
        frame = pd.DataFrame({"x": x, "user_text": _noise_texts(rng, n)})
        fs = _features(with_x=True)
        folds = _folds(n, rep)
        honest.append(pearson(y, _oof(frame, y, fs, folds)))
        X = feature_frame(frame, fs)
        oof = np.empty(n)
        for k in range(5):
            test = folds == k
            pipe = build_pipeline(RIDGE, fs)
            pipe.set_params(features__text_user_text=_InSampleStack(encoders="stack"))
            oof[test] = pipe.fit(X[~test], y[~test]).predict(X[test])
        naive.append(pearson(y, oof))
    print(f"OOF r: inner cross-fit {np.mean(honest):.3f}, in-sample stack {np.mean(naive):.3f}")
    assert np.mean(honest) > 0.38
    assert np.mean(honest) - np.mean(naive) > 0.1


def _signal_data(rng: np.random.Generator, n: int) -> tuple[pd.DataFrame, np.ndarray]:
    """Ratings driven by x and by a latent z that shows only in the words users write."""
    x, z = rng.normal(size=n), rng.normal(size=n)
    y = 3.0 + 0.4 * x + 0.6 * z + rng.normal(scale=0.8, size=n)
    p_good = 1.0 / (1.0 + np.exp(-1.5 * z))
    n_cue = 6
    good = rng.random((n, n_cue)) < p_good[:, None]
    cues = np.where(good, "great", "broken")
    words = np.concatenate([cues, VOCAB[rng.integers(0, len(VOCAB), (n, 20))]], axis=1)
    words = np.take_along_axis(words, rng.random(words.shape).argsort(axis=1), axis=1)
    texts = pd.DataFrame(words).agg(" ".join, axis=1)
    return pd.DataFrame({"x": x, "user_text": texts}), y


def test_text_with_signal_raises_out_of_fold_r():
    # Expected OOF r: x alone 0.4/sqrt(1.16) = 0.37; the six cue words reveal part of z and
    # lift it to ~0.51 (gain ~0.14). The gain is paired (same y, same folds), so it varies
    # by ~0.01-0.02 between replications (measured 0.127-0.143); a text path that learned
    # nothing gives ~0 or less. The 0.08 threshold sits > 3 sd below the expected gain.
    gains = []
    for rep in range(3):
        frame, y = _signal_data(np.random.default_rng(3000 + rep), 400)
        folds = _folds(len(y), rep)
        fs_x = feature_set_from_mapping({"name": "x", "columns": {"x": {"kind": "numeric"}}})
        r_x = pearson(y, _oof(frame, y, fs_x, folds))
        r_text = pearson(y, _oof(frame, y, _features(with_x=True), folds))
        gains.append(r_text - r_x)
    print("gain in OOF r from text:", np.round(gains, 3))
    assert np.mean(gains) > 0.08


def test_fold_pipeline_never_sees_held_out_rows():
    # Every row carries a token of its own; with min_df=1 a token enters the vocabulary iff
    # its row was in the fold's training part.
    rng = np.random.default_rng(5)
    n = 100
    texts = [f"{t} uniq{i:03d}" for i, t in enumerate(_noise_texts(rng, n, 5))]
    frame = pd.DataFrame({"user_text": texts})
    y = rng.normal(size=n)
    fs = _features({"encoders": "stack", "min_df": 1})
    X = feature_frame(frame, fs)
    folds = _folds(n, 0)
    for k in range(5):
        test = folds == k
        pipe = build_pipeline(RIDGE, fs).fit(X[~test], y[~test])
        vocab = pipe.named_steps["features"].named_transformers_["text_user_text"].vectorizer_
        seen = {t for t in vocab.vocabulary_ if t.startswith("uniq")}
        assert seen == {f"uniq{i:03d}" for i in np.flatnonzero(~test)}


# --------------------------------------------------------------------------------------------
# Estimator contract: clone, params, joblib, fresh process
# --------------------------------------------------------------------------------------------


def test_clone_get_set_params_and_pipeline_param_names():
    enc = TextFeatures(encoders="stack+vader", stack_alpha=2.0)
    twin = clone(enc)
    assert twin.get_params() == enc.get_params() and twin is not enc
    twin.set_params(stack_alpha=7.0, encoders=["stack"])
    assert twin.stack_alpha == 7.0 and enc.stack_alpha == 2.0
    fs = _features(with_x=True)
    pipe = build_pipeline(RIDGE, fs, {"features__text_user_text__stack_alpha": 11.0,
                                      "alpha": 0.5})
    assert pipe.get_params()["features__text_user_text__stack_alpha"] == 11.0
    assert pipe.named_steps["model"].alpha == 0.5
    with pytest.raises(PulseError, match="features__text_<column>__<setting>"):
        build_pipeline(RIDGE, fs, {"features__text_no_such__stack_alpha": 1.0})


def _fitted_text_pipeline(encoders: str, stack_on: str):
    frame, y = _signal_data(np.random.default_rng(9), 200)
    frame.loc[3, "user_text"] = None  # a missing text counts as empty
    fs = _features({"encoders": encoders, "stack_on": stack_on, "wordllama_dim": 64},
                   with_x=True)
    X = feature_frame(frame, fs)
    return build_pipeline(RIDGE, fs).fit(X, y), frame, X


@pytest.mark.slow
def test_joblib_round_trip_predicts_the_same_in_a_fresh_process(tmp_path):
    encoders, stack_on = "stack", "tfidf+hashing"
    if _has("vaderSentiment"):
        encoders, stack_on = "stack+vader", "tfidf+vader"
    if _has("wordllama"):
        encoders, stack_on = encoders + "+wordllama", stack_on + "+wordllama"
    pipe, frame, X = _fitted_text_pipeline(encoders, stack_on)
    expected = pipe.predict(X)
    path = tmp_path / "model.joblib"
    joblib.dump(pipe, path)
    again = joblib.load(path)
    assert np.allclose(again.predict(X), expected)
    frame.to_parquet(tmp_path / "frame.parquet")
    code = textwrap.dedent(f"""
        import json, joblib, pandas as pd
        from pulse_ml.sessions.feature_sets import feature_set_from_mapping
        from pulse_ml.models.preprocess import feature_frame
        pipe = joblib.load({str(path)!r})
        frame = pd.read_parquet({str(tmp_path / 'frame.parquet')!r})
        step = pipe.named_steps["features"].named_transformers_["text_user_text"]
        fs = feature_set_from_mapping({{"name": "t", "columns": {{"x": {{"kind": "numeric"}},
            "user_text": {{"kind": "text", "encoders": step.encoders,
                           "stack_on": step.stack_on, "wordllama_dim": 64}}}}}})
        print(json.dumps(pipe.predict(feature_frame(frame, fs)).tolist()))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=REPO)
    assert np.allclose(json.loads(out.stdout.strip().splitlines()[-1]), expected)
    assert pipe.named_steps["features"].get_feature_names_out()[1] == "user_text__stack"


# --------------------------------------------------------------------------------------------
# Encoders: offline, cached
# --------------------------------------------------------------------------------------------

_NO_NETWORK = textwrap.dedent("""
    import sys
    def _guard(event, args):
        if event in ("socket.connect", "socket.getaddrinfo", "urllib.Request"):
            raise RuntimeError(f"network use: {event} {args!r:.80}")
    sys.addaudithook(_guard)
""")


@pytest.mark.slow
@needs_vader
def test_vader_scores_offline_and_per_message():
    feats = vader_features(["I love this, thank you!", "This is terrible and useless.",
                            "", "great\nawful awful awful"])
    assert feats.shape == (4, 7)
    assert feats[0, 0] > 0.5 and feats[1, 0] < -0.5 and np.all(feats[2] == 0)
    assert feats[3, 3] > 0 > feats[3, 2]  # max message positive, min message negative
    code = _NO_NETWORK + "from pulse_ml.models.text_encoders import vader_features\n" \
        "print(vader_features(['what a wonderful day'])[0, 0])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=REPO)
    assert float(out.stdout.strip()) > 0.5


@pytest.mark.slow
@needs_wordllama
def test_wordllama_loads_shipped_weights_with_the_network_blocked():
    code = _NO_NETWORK + textwrap.dedent("""
        import numpy as np
        from pulse_ml.models.text_encoders import wordllama_features
        e = wordllama_features(["I am very happy with this", "I am glad, thanks a lot",
                                "the train leaves at noon from platform 4"], dim=256,
                               pool="text")
        print(float(e[0] @ e[1]), float(e[0] @ e[2]), e.shape[1])
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=REPO)
    close, far, width = out.stdout.split()
    assert float(close) > float(far) and int(width) == 256


@needs_wordllama
def test_wordllama_missing_weights_is_a_clear_error():
    with pytest.raises(PulseError, match="nothing is downloaded"):
        load_wordllama("l2_supercat", 1024)
    with pytest.raises(PulseError, match="l3_supercat"):
        load_wordllama("l3_supercat", 256)


@needs_wordllama
def test_embeddings_are_computed_once_per_table_and_reused_from_disk(tmp_path, monkeypatch):
    rng = np.random.default_rng(3)
    texts = [f"{a}\n{b}" for a, b in zip(_noise_texts(rng, 60, 4), _noise_texts(rng, 60, 4),
                                         strict=True)]
    frame = pd.DataFrame({"user_text": texts})
    y = rng.normal(size=60)
    fs = _features({"encoders": "stack+wordllama", "stack_on": "wordllama",
                    "wordllama_dim": 64})
    monkeypatch.setenv("PULSE_TEXT_CACHE", str(tmp_path))  # the jobs' way to set cache_dir
    X = feature_frame(frame, fs)
    folds = _folds(60, 1, k=3)
    for _trial in range(2):  # two "Optuna trials" x 3 folds
        for k in range(3):
            test = folds == k
            build_pipeline(RIDGE, fs, {"features__text_user_text__stack_alpha": 1.0 + _trial}
                           ).fit(X[~test], y[~test]).predict(X[test])
    store = text_cache.store_for("wordllama-l2_supercat-64", 64, str(tmp_path))
    assert store.n_computed == 120  # each distinct message embedded exactly once
    text_cache.clear_text_caches()  # a new process: vectors come from the .npz file
    again = wordllama_features(texts, dim=64, cache_dir=str(tmp_path))
    assert text_cache.store_for("wordllama-l2_supercat-64", 64, str(tmp_path)).n_computed == 0
    assert again.shape == (60, 64)


# --------------------------------------------------------------------------------------------
# Bad input and configuration
# --------------------------------------------------------------------------------------------


def test_check_text_column_counts_missing_and_refuses_non_text_rows():
    checked = check_text_column(pd.Series(["hi", None, np.nan, "ok"]), "user_text")
    assert checked.texts.tolist() == ["hi", "", "", "ok"] and checked.n_missing == 2
    assert "2 of 4" in checked.note
    assert check_text_column(pd.Series([np.nan, np.nan]), "t").n_missing == 2
    assert check_text_column(pd.Series(["a", "b"], dtype="string"), "t").note is None
    ids = pd.Series(["a1", "a2", "a3", "a4"])
    with pytest.raises(PulseError) as err:
        check_text_column(pd.Series(["fine", 42, ["a", "list"], None]), "user_text", ids)
    msg = str(err.value)
    assert "'user_text'" in msg and "row 2 (session_id=a2): int" in msg and "row 3" in msg
    assert "2 value(s)" in msg
    with pytest.raises(PulseError, match="row 1: float"):
        check_text_column(pd.Series([1.5, np.nan]), "user_text")
    with pytest.raises(PulseError, match="'user_text': no term is left for TF-IDF"):
        TextFeatures(encoders="stack", stack_on="tfidf").fit(
            pd.Series([""] * 20, name="user_text"), np.arange(20.0))


@pytest.mark.slow
@pytest.mark.parametrize(("package", "func", "encoder", "hint", "wrong"), [
    # VADER is a base dependency: reinstall it; naming the text extra would not bring it back
    ("vaderSentiment", "vader_features", "vader", "pip install 'vaderSentiment>=3.3'",
     "pulse-ml[text]"),
    ("wordllama", "wordllama_features", "wordllama", "pip install 'pulse-ml[text]'", None),
])
def test_missing_package_names_how_to_install_it(package, func, encoder, hint, wrong):
    with pytest.raises(PulseError, match=r"pip install 'pulse_ml_no_such_encoder_pkg'"):
        require_package("pulse_ml_no_such_encoder_pkg", "vader")
    # The real import path with the package made unimportable (sys.modules[name] = None).
    code = textwrap.dedent(f"""
        import sys
        sys.modules[{package!r}] = None
        from pulse_ml.errors import PulseError
        from pulse_ml.models import text_encoders as text
        try:
            text.{func}(["hello"])
        except PulseError as exc:
            print(exc)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=REPO)
    assert f"'{encoder}'" in out.stdout and hint in out.stdout, out.stdout
    if wrong:
        assert wrong not in out.stdout, out.stdout


def test_feature_set_text_kind_options_and_search_space():
    fs = feature_set_from_mapping({"name": "t", "columns": {"user_text": {"kind": "text"}}})
    spec = fs.columns[0]
    assert spec.kind == "text" and spec.options == {}
    step = build_pipeline(RIDGE, fs).named_steps["features"].transformers[0][1]
    assert step.encoders == "stack" and step.stack_on == "tfidf+vader"
    fs = feature_set_from_mapping({"name": "t", "columns": {"user_text": {
        "kind": "text", "encoders": ["stack", "wordllama"], "stack_alpha": 2.0,
        "search_space": {"stack_alpha": {"type": "float", "low": 0.3, "high": 30, "log": True},
                         "stack_on": {"type": "categorical",
                                      "choices": ["tfidf", "tfidf+vader"]}}}}})
    assert fs.columns[0].options["encoders"] == "stack+wordllama"
    assert text_requirements(fs) == ["vaderSentiment>=3.3", "wordllama>=0.4"]
    names = [p.name for p in text_search_space(fs)]
    assert names == ["features__text_user_text__stack_alpha",
                     "features__text_user_text__stack_on"]
    for bad, match in (({"encoders": "stack+bert"}, "unknown 'bert'"),
                       ({"stack_alpah": 1.0}, "unknown option"),
                       ({"stack_alpha": -1}, "stack_alpha"),
                       ({"values": ["a"]}, "takes no `values`"),
                       ({"encoders": "tfidf"}, "max_features"),
                       ({"search_space": {"alpha": {"type": "float", "low": 0, "high": 1}}},
                        "unknown setting")):
        with pytest.raises(PulseError, match=match):
            feature_set_from_mapping({"name": "t", "columns": {"user_text": {"kind": "text",
                                                                             **bad}}})


def test_feature_frame_names_a_missing_text_column():
    fs = _features(with_x=True)
    with pytest.raises(PulseError, match="user_text"):
        feature_frame(pd.DataFrame({"x": [1.0]}), fs)


def test_optuna_tunes_text_settings_through_the_pulse_objective():
    import dataclasses

    import optuna

    from pulse_ml.training.tuning import CVObjective

    frame, y = _signal_data(np.random.default_rng(11), 200)
    fs = feature_set_from_mapping({"name": "t", "columns": {"x": {"kind": "numeric"},
                                   "user_text": {"kind": "text", "encoders": "stack",
                                                 "search_space": {"stack_alpha": {
                                                     "type": "float", "low": 0.5,
                                                     "high": 20.0, "log": True}}}}})
    spec = dataclasses.replace(RIDGE, search_space=RIDGE.search_space + text_search_space(fs))
    objective = CVObjective(frame, y, _folds(200, 0), spec, fs, objective="cv_pearson",
                            prune=False)
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    study = optuna.create_study(direction="maximize",
                                sampler=optuna.samplers.TPESampler(seed=0))
    study.optimize(objective, n_trials=3)
    alphas = {t.params["features__text_user_text__stack_alpha"] for t in study.trials}
    assert len(alphas) == 3 and study.best_value > 0.3


# --------------------------------------------------------------------------------------------
# The USS example table
# --------------------------------------------------------------------------------------------

USS = shared_path("data/real/uss-user-satisfaction-simulation")


@needs_shared("data/real/uss-user-satisfaction-simulation/SGD.txt")
def test_uss_prepare_matches_the_published_label_counts_and_hides_ratings():
    import importlib.util

    spec = importlib.util.spec_from_file_location("uss_prepare",
                                                  REPO / "examples" / "uss" / "prepare.py")
    prepare = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(prepare)
    table = prepare.build_table(USS, corpora=("SGD", "CCPE"))
    counts = table.assign(r=table["rating"].round()).groupby(["corpus", "r"]).size()
    # SOURCE.md: rounded-mean OVERALL distribution per corpus
    assert counts.loc["SGD"].to_dict() == {2.0: 37, 3.0: 664, 4.0: 299}
    assert counts.loc["CCPE"].to_dict() == {2.0: 37, 3.0: 407, 4.0: 56}
    assert not table["user_text"].str.contains("OVERALL").any()
    assert (table["user_message_count"] == table["user_text"].str.count("\n") + 1).all()
    sparse = prepare.build_table(USS, corpora=("SGD", "CCPE"), label_share=0.1, seed=0)
    assert sparse.groupby("corpus")["rating"].count().to_dict() == {"CCPE": 50, "SGD": 100}
    assert sparse["rating_hidden"].equals(table["rating"])
