"""Run names, experiments and tags as MLflow users set them (issue 24, "habits").

``experiment=``, ``run_name=`` and ``tags.<name>=`` (or ``tags={...}``) on the verbs that log
runs; default run names are unique (``<what>-<run id[:8]>``); pulse-ml's own lookups (compare's
runs by ``kind`` tag, the champion) work inside the chosen experiment.
"""

from __future__ import annotations

import re

import pytest

from pulse_ml import keys
from pulse_ml.config import compose
from pulse_ml.errors import PulseError
from pulse_ml.settings import RunLabels, run_labels


def _runs(experiment: str, kind: str):
    import mlflow

    exp = mlflow.MlflowClient().get_experiment_by_name(experiment)
    assert exp is not None, f"no experiment {experiment}"
    return mlflow.MlflowClient().search_runs([exp.experiment_id],
                                             f"tags.{keys.KIND} = '{kind}'")


def test_labels_are_read_once_from_the_composed_config():
    cfg = compose("train", ["experiment=team-x", "run_name=baseline", "tags.team=search",
                            "tags.ticket=42"])
    assert run_labels(cfg, "train") == RunLabels("team-x", "baseline",
                                                 (("team", "search"), ("ticket", "42")))
    cfg = compose("infer", ["tags={team: search, reviewed: true}"])
    assert run_labels(cfg, "infer") == RunLabels(None, None,
                                                 (("team", "search"), ("reviewed", "true")))
    assert run_labels(compose("monitor", []), "monitor") == RunLabels()
    cfg = compose("train", ["tags.team.lead=ana"])  # a dotted tag name is one tag
    assert run_labels(cfg, "train").tags == (("team.lead", "ana"),)
    assert RunLabels(run_name="x").suffixed("lightgbm").run_name == "x-lightgbm"
    assert RunLabels().suffixed("lightgbm").run_name is None  # default names stay unique
    with pytest.raises(PulseError, match="mlflow.user"):
        run_labels(compose("audit", ["tags.mlflow.user=x"]), "audit")


def test_default_family_run_names_are_unique_and_end_with_the_run_id(trained_home):
    import mlflow

    result = trained_home("model=lightgbm", "tuning.n_trials=1", "progress=false")
    run = mlflow.MlflowClient().get_run(result.run_id)
    assert run.info.run_name == f"lightgbm-all-{result.run_id[:8]}"
    assert run.data.tags["mlflow.runName"] == run.info.run_name


def test_train_into_a_chosen_experiment_with_tags_then_compare_and_infer_there(
        small_demo, pulse_home, cli):
    res = cli("train", f"data.path={small_demo}", "model=lightgbm", "tuning.n_trials=1",
              "progress=false", "experiment=team-x", "tags.team=search", "run_name=first-try")
    assert res.returncode == 0, res.stdout + res.stderr
    (family,) = _runs("team-x", keys.KIND_FAMILY)
    assert family.info.run_name == "first-try"
    assert family.data.tags["team"] == "search"
    assert family.data.tags[keys.PROMOTION] == "promoted"  # no champion yet: the champion
    trials = _runs("team-x", keys.KIND_TRIAL)  # nested trial runs follow their parent
    assert len(trials) == 1 and trials[0].data.tags["mlflow.parentRunId"] == family.info.run_id

    # compare reads the chosen experiment (by kind tag); pulse-train has no runs
    res = cli("compare", "experiment=team-x", f"output={pulse_home / 'cmp'}")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "lightgbm" in res.stdout
    res = cli("compare", f"output={pulse_home / 'cmp2'}")
    assert res.returncode == 2 and "experiment 'pulse-train'" in res.stderr, res.stderr

    # the champion found outside pulse-train; the infer run in the same experiment, named
    res = cli("infer", f"data.path={small_demo}", "permutations=200", "experiment=team-x",
              "tags={ticket: 42}", f"output={pulse_home / 'inf'}")
    assert res.returncode == 0, res.stdout + res.stderr
    (inference,) = _runs("team-x", keys.KIND_INFERENCE)
    assert inference.data.tags["ticket"] == "42"
    assert re.fullmatch(r"infer-crossfit-[0-9a-f]{8}", inference.info.run_name)
    assert inference.info.run_name.endswith(inference.info.run_id[:8])


def test_run_label_mistakes_are_one_line_before_any_work(pulse_home, cli):
    for args, text in ((["tags.kind=x"], "pulse-ml sets the tag 'kind' itself"),
                       (["tags={a: [1, 2]}"], "a tag is a short name"),
                       (["tagz.team=x"], "unknown key 'tagz.team'"),
                       (["experiment=" + "e" * 300], "give a name of 1 to 250 characters")):
        res = cli("train", *args)
        assert res.returncode == 2, res.stdout + res.stderr
        assert text in res.stderr and len(res.stderr.strip().splitlines()) == 1, res.stderr
