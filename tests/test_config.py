"""The config boundary: composition into a read-only Node, typed readers, sweep expansion."""

from __future__ import annotations

import pytest

from pulse_ml.config import Node, choice, compose, expand_sweeps, flag, names, number, to_yaml
from pulse_ml.errors import PulseError


def test_compose_returns_a_plain_read_only_node(pulse_home):
    cfg = compose("train", ["tuning.n_trials=7", "cv.n_splits=4"])
    assert isinstance(cfg, Node) and cfg.tuning.n_trials == 7 and cfg.cv.n_splits == 4
    assert isinstance(cfg.to_dict()["model"], dict)
    with pytest.raises(TypeError, match="read-only"):
        cfg.seed = 1
    assert "n_trials: 7" in to_yaml(cfg)


def test_shared_cv_group_reaches_train_pipeline_and_judge(pulse_home):
    for verb in ("train", "pipeline", "judge"):
        assert compose(verb, ["cv.n_splits=10"]).cv.n_splits == 10


@pytest.mark.parametrize("raw,kwargs,message", [
    ("abc", {"integer": True}, "tuning.n_trials='abc' is not a whole number"),
    ("2.5", {"integer": True}, "is not a whole number"),
    ("-1", {"low": 0, "integer": True}, "out of range; use a value in [0, inf]"),
    ("nan", {}, "is not a number"),
])
def test_number_names_the_key_and_the_range(raw, kwargs, message):
    cfg = Node({"tuning": {"n_trials": raw}})
    with pytest.raises(PulseError) as err:
        number(cfg, "tuning.n_trials", "train", **kwargs)
    assert message in str(err.value)


def test_choice_suggests_the_closest_option_and_flag_reads_yes_no():
    with pytest.raises(PulseError, match="Did you mean crossfit"):
        choice(Node({"mode": "crosfit"}), "mode", "infer", {"crossfit": "a", "in_sample": "b"})
    assert flag(Node({"x": "yes"}), "x", "v") is True
    assert flag(Node({"x": False}), "x", "v") is False
    with pytest.raises(PulseError, match="not true or false"):
        flag(Node({"x": "maybe"}), "x", "v")
    assert names("all") is None and names("a, b") == ["a", "b"] and names(["x"]) == ["x"]


def test_expand_sweeps_matches_hydras_basic_sweeper():
    """Fails when Hydra changes how sweeps expand (its sweeper is private API: tested here)."""
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.override_parser.overrides_parser import OverridesParser

    overrides = ["model=a,b", "seed=0,1,2", "features=all", "tuning.n_trials=3"]
    ours = expand_sweeps(overrides)
    parsed = OverridesParser.create().parse_overrides(overrides)
    hydra_jobs = [list(j) for batch in BasicSweeper.split_arguments(parsed, None) for j in batch]
    assert ours == hydra_jobs and len(ours) == 6
    assert expand_sweeps(["x=1"]) == [["x=1"]]


def test_quick_check_catches_typos_without_hydra_and_lets_valid_overrides_pass():
    from pulse_ml.config_check import quick_check

    quick_check("train", ["model=lightgbm", "features=user", "tuning.n_trials=3", "cv.seed=1",
                          "model.estimator.max_depth=3", "+extra=1", "features=my/set.yaml"])
    quick_check("audit", ["case_study=plan"])
    with pytest.raises(PulseError, match="Did you mean tuning.n_trials"):
        quick_check("train", ["tuning.ntrials=5"])
    with pytest.raises(PulseError, match="Did you mean model=lightgbm"):
        quick_check("train", ["model=lightgbn"])


@pytest.mark.parametrize("verb,override,message", [
    ("train", "tuning.n_trials=five", "tuning.n_trials='five' is not a whole number (default"),
    ("infer", "alpha=x", "alpha='x' is not a number (default 0.05)"),
    ("simulate", "events=maybe", "events='maybe' is not true or false"),
    ("judge", "judge.timeout=soon", "judge.timeout='soon' is not a number"),
    ("plan", "design_effect=lots", "design_effect='lots' is not a number"),
])
def test_quick_check_refuses_values_of_the_wrong_type(verb, override, message):
    from pulse_ml.config_check import quick_check

    with pytest.raises(PulseError) as err:
        quick_check(verb, [override])
    assert message in str(err.value) and f"pulse-ml {verb}: " in str(err.value)


def test_quick_check_leaves_nulls_words_and_estimator_options_to_the_job():
    from pulse_ml.config_check import quick_check

    for verb, override in (("plan", "design_effect=estimate"), ("judge", "judge.temperature=null"),
                           ("train", "model.estimator.max_features=sqrt"),
                           ("train", "tuning.n_trials=2.0"), ("infer", "alpha=1e-2"),
                           ("simulate", "events=no"), ("train", "seed=${oc.env:SEED,0}")):
        quick_check(verb, [override])  # no error


def test_shared_values_are_written_once_and_overrides_still_reach_them(pulse_home):
    """data.path, alpha/clusters/case_study_dirs and train's settings live in shared configs."""
    from pulse_ml.config_check import quick_check
    from pulse_ml.env.paths import conf_dir

    demo = "${pulse_home:}/data/demo/sessions.parquet"
    files = [p for p in conf_dir().rglob("*.yaml") if demo in p.read_text(encoding="utf-8")]
    assert [p.relative_to(conf_dir()).as_posix() for p in files] == ["data/demo.yaml"]
    for verb in ("agreement", "audit", "benchmarks", "infer", "monitor", "pipeline", "score",
                 "train", "validate"):
        assert compose(verb, []).data.path.endswith("data/demo/sessions.parquet"), verb
        assert compose(verb, ["data.path=/tmp/t.parquet"]).data.path == "/tmp/t.parquet", verb
    cfg = compose("infer", ["alpha=0.1", "clusters=none", "case_study_dirs=[/tmp/cs]"])
    assert (cfg.alpha, cfg.clusters, cfg.case_study_dirs) == (0.1, "none", ["/tmp/cs"])
    pipe = compose("pipeline", ["infer.alpha=0.2", "promotion.n_boot=10"])
    assert pipe.infer.to_dict() == {"alpha": 0.2, "clusters": "user_id", "predictions": "crossfit",
                                    "output": str(pulse_home / "results" / "infer")}
    train = compose("train", [])
    shared = ("objective", "seed", "register", "promote", "promotion", "ci_reduction", "progress")
    assert all(pipe[k] == train[k] for k in shared if k != "promotion")
    assert pipe.promotion.n_boot == 10 and train.promotion.n_boot == 2000
    assert "alpha" not in compose("validate", []) and "clusters" not in compose("plan", [])
    with pytest.raises(PulseError, match="Did you mean clusters"):
        quick_check("monitor", ["clusterz=none"])  # keys of shared configs are known pre-Hydra
    with pytest.raises(PulseError, match=r"infer.alpha='x' is not a number \(default 0.05\)"):
        quick_check("pipeline", ["infer.alpha=x"])


def test_quick_check_knows_a_groups_keys_when_the_primary_sets_one_of_them():
    """pipeline.yaml sets tuning.n_trials; tuning.timeout_s (conf/tuning/default.yaml) is valid."""
    from pulse_ml.config_check import quick_check

    quick_check("pipeline", ["tuning.timeout_s=5", "tuning.n_trials=3"])
    with pytest.raises(PulseError, match="tuning.n_trials='x' is not a whole number"):
        quick_check("pipeline", ["tuning.n_trials=x"])



PLAIN_OVERRIDES = {  # overrides config_plain reads itself (else Hydra composes)
    "train": ["data.path=/tmp/x y/s.parquet", "tuning.n_trials=7", "seed=3", "progress=false",
              "cv.n_splits=4", "objective=mse", "model.estimator.n_estimators=12"],
    "infer": ["data.path=/data/s.parquet", "output=/tmp/out", "alpha=0.1", "clusters=False",
              "ppi.predictions=in_sample", "log_mlflow=FALSE"],
    "score": ["out=rel/p.parquet", "chunk_size=1000", "threads=-2", "history.path=null",
              "cache_rows=1e3"],
    "monitor": ["data.path=./a.csv", "output=o", "alpha=.05"],
}


def test_plain_composition_equals_hydras_for_every_verb(pulse_home):
    """``compose`` reads the tree as plain YAML: Hydra's YAML, exactly, with or without the
    plain overrides; other forms are left to Hydra."""
    from pulse_ml.cli import VERBS
    from pulse_ml.config import hydra_compose_node
    from pulse_ml.config_plain import compose_plain

    for verb in VERBS:
        plain = compose_plain(verb)
        assert plain is not None, verb
        assert to_yaml(plain) == to_yaml(hydra_compose_node(verb, [])), verb
    for verb, overrides in PLAIN_OVERRIDES.items():
        for done in range(1, len(overrides) + 1):
            wanted = [o for o in overrides[:done] if " " not in o]
            plain = compose_plain(verb, wanted)
            assert plain is not None, (verb, wanted)
            assert to_yaml(plain) == to_yaml(hydra_compose_node(verb, wanted)), (verb, wanted)
    for verb, overrides in (("train", ["model=lightgbm"]), ("train", ["+extra=1"]),
                            ("train", ["data.path=/x y"]), ("train", ["seed=1_000"]),
                            ("train", ["tags.team=search"]), ("infer", ["alpha=inf"]),
                            ("train", ["features=all_text"]), ("score", ["history=null"]),
                            ("infer", ["data.path='a,b'"]), ("train", ["nokey=1"]),
                            ("infer", ["alpha=00.5"]), ("train", ["seed=01"])):
        assert compose_plain(verb, overrides) is None, (verb, overrides)
    assert compose("train", ["model=lightgbm", "seed=5"]).model.estimator.random_state == 5
    extra = {"features": {"name": "handed", "columns": {"turns": "count"}}, "alpha": 0.2}
    assert compose("infer", [], extra=extra).to_dict() == hydra_compose_node(
        "infer", [], extra=extra).to_dict()


def test_plain_composition_gives_way_to_hydra_on_forms_it_does_not_read(tmp_path, monkeypatch):
    """A form outside the plain reader (an ``oc.env`` interpolation): None, Hydra composes."""
    from pulse_ml import config_plain, config_tree

    (tmp_path / "v.yaml").write_text("a: 1\nb: ${a}\nc: x${oc.env:HOME}\n")
    monkeypatch.setattr(config_tree, "conf_dir", lambda: tmp_path)
    assert config_plain.compose_plain("v") is None
    (tmp_path / "v.yaml").write_text("a: 1e-3\nb: ${a}\nc: x-${a}\nd: 2024-01-01\n")
    assert config_plain.compose_plain("v") == {"a": 0.001, "b": 0.001, "c": "x-0.001",
                                               "d": "2024-01-01"}


_BASE = "defaults:\n  - base\n  - _self_\n"
EDGE_TREES = {  # (conf files, overrides, what the plain composition does): Hydra's own result
    "missing over a value": ({"v.yaml": _BASE + "x: ???\n", "base.yaml": "x: 1\n"}, [],
                             "gives way"),
    "missing nested over a mapping": ({"v.yaml": _BASE + "m:\n  x: ???\n",
                                       "base.yaml": "m:\n  x: {a: 1}\n"}, [], "gives way"),
    "a value over missing": ({"v.yaml": _BASE + "x: 2\n", "base.yaml": "x: ???\n"}, [], "equal"),
    "missing left missing": ({"v.yaml": "x: ???\ny: 1\n"}, [], "equal"),
    "interpolation of missing": ({"v.yaml": "x: ???\ny: ${x}\n"}, [], "gives way"),
    "interpolation of missing in text": ({"v.yaml": "x: ???\ny: a-${x}\n"}, [], "gives way"),
    "number, flag keys": ({"v.yaml": "m:\n  1: a\n  2.5: b\n  true: c\n  0x10: d\n"}, [],
                          "equal"),
    "number key over a string key": ({"v.yaml": _BASE + "m:\n  1: a\n",
                                      "base.yaml": "m:\n  '1': z\n  2: y\n"}, [], "equal"),
    "null key": ({"v.yaml": "m:\n  null: a\n"}, [], "gives way"),
    "leading zeros": ({"v.yaml": "a: 0.1\nb: 1\nc: 2\nd: 3\n"},
                      ["a=00.5", "b=-00.5", "c=00", "d=01"], "gives way"),
    "leading zero exponent": ({"v.yaml": "a: 0.1\n"}, ["a=00e1"], "gives way"),
    "floats of Hydra's grammar": ({"v.yaml": "a: 0.1\nb: 1\nc: 2\nd: 3\ne: 4\nf: 5\n"},
                                  ["a=5.", "b=-.5", "c=0e1", "d=1.e5", "e=-0", "f=10.25E-2"],
                                  "equal"),
}


@pytest.mark.parametrize("case", sorted(EDGE_TREES))
def test_plain_composition_equals_hydras_or_gives_way_on_edge_forms(case, tmp_path, monkeypatch):
    """``???`` merged or interpolated, keys that YAML reads as numbers, and override numbers
    with leading zeros: the plain composition returns Hydra's result or None (Hydra composes)."""
    from pulse_ml import config, config_check, config_tree
    from pulse_ml.config_plain import compose_plain

    files, overrides, expected = EDGE_TREES[case]
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    for module in (config, config_check, config_tree):
        monkeypatch.setattr(module, "conf_dir", lambda: tmp_path)
    plain = compose_plain("v", overrides)
    try:
        hydra: object = to_yaml(config.hydra_compose_node("v", overrides))
    except PulseError as exc:
        hydra = exc
    if expected == "equal":
        assert plain is not None and to_yaml(plain) == hydra, (plain, hydra)
    else:
        assert plain is None, (plain, hydra)
    if case == "missing over a value":
        assert hydra == "x: 1\n"  # OmegaConf keeps the value ??? is merged over
    if case.startswith("interpolation of missing"):
        assert isinstance(hydra, PulseError) and "Missing mandatory value" in str(hydra)
    if case == "leading zeros":
        assert hydra == "a: '00.5'\nb: '-00.5'\nc: '00'\nd: '01'\n"  # strings in Hydra


def test_duplicate_keys_are_refused_as_omegaconf_refuses_them(tmp_path, monkeypatch):
    """A key written twice in one mapping: one message naming the file, line and key (OmegaConf
    refuses it too, where plain YAML kept the last value); config_check reads the same way."""
    from pulse_ml import config, config_check, config_tree
    from pulse_ml.config_plain import compose_plain

    (tmp_path / "v.yaml").write_text("x: 1\nm:\n  a: 1\n  a: 2\n")
    for module in (config, config_check, config_tree):
        monkeypatch.setattr(module, "conf_dir", lambda: tmp_path)
    with pytest.raises(PulseError, match=r"v\.yaml: line 4: the key 'a' is written twice"):
        compose_plain("v")
    with pytest.raises(PulseError, match="duplicate key a"):
        config.hydra_compose_node("v")
    with pytest.raises(PulseError, match="written twice"):
        config_check.quick_check("v", ["x=2"])


def test_quick_check_types_values_as_omegaconf_reads_them(tmp_path, monkeypatch):
    """config_check reads the tree config_plain composes: ``1e-3`` is a number (a plain
    SafeLoader read it as text and let ``lr=abc`` through), a date stays text."""
    from pulse_ml import config_check, config_tree

    (tmp_path / "v.yaml").write_text("lr: 1e-3\nday: 2024-01-01\n")
    for module in (config_check, config_tree):
        monkeypatch.setattr(module, "conf_dir", lambda: tmp_path)
    with pytest.raises(PulseError, match=r"lr='abc' is not a number \(default 0.001\)"):
        config_check.quick_check("v", ["lr=abc"])
    config_check.quick_check("v", ["lr=2e-3", "day=yesterday"])
