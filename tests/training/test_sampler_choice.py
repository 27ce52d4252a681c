"""``tuning.sampler`` and ``tuning.pruner``: real Optuna studies, real config, a real ``train``.

Every sampler is seeded from the config (same seed -> same trials, another seed -> other
trials); the default (``tpe`` + ``median``) draws exactly what the seeded ``TPESampler`` and the
``MedianPruner(5, 1)`` of before drew; ``tuning.prune=false`` still turns pruning off; a bad
value or a missing ``cmaes`` package ends in one line and exit 2.
"""

from __future__ import annotations

import sys
from dataclasses import replace

import mlflow
import optuna
import pytest

from pulse_ml import keys
from pulse_ml.config import compose
from pulse_ml.errors import PulseError
from pulse_ml.jobs.train import tuning_settings
from pulse_ml.training.samplers import CMAES_INSTALL, checked_sampler
from pulse_ml.training.storage import open_storage
from pulse_ml.training.tuning import TuningSettings, open_study

N_STEPS = 5  # "folds" of the tiny objective

SAMPLER_CLASSES = {"tpe": optuna.samplers.TPESampler, "random": optuna.samplers.RandomSampler,
                   "cmaes": optuna.samplers.CmaEsSampler, "qmc": optuna.samplers.QMCSampler}
PRUNER_CLASSES = {"median": optuna.pruners.MedianPruner,
                  "hyperband": optuna.pruners.HyperbandPruner, "none": optuna.pruners.NopPruner}


def _objective(trial) -> float:
    """A float, a log-int and a categorical parameter; one running value per step."""
    x = trial.suggest_float("x", -2.0, 2.0)
    n = trial.suggest_int("n", 1, 16, log=True)
    c = trial.suggest_categorical("c", ["a", "b", "none"])
    value = 0.0
    for step in range(N_STEPS):
        value = (x - 0.3) ** 2 + 0.05 * n + 0.2 * (c == "b") + 0.01 * step
        trial.report(value, step)
        if trial.should_prune():
            raise optuna.TrialPruned()
    return value


def _history(settings: TuningSettings, n_trials: int = 12, name: str = "s") -> list[tuple]:
    """(params, state, value) of each trial of a fresh in-memory study of ``settings``."""
    study = open_study(settings, name)
    study.optimize(_objective, n_trials=n_trials)
    return [(t.params, t.state.name, t.value) for t in study.trials]


def _sampler_or_skip(sampler: str) -> str:
    if sampler == "cmaes":
        pytest.importorskip("cmaes", reason=f"tuning.sampler=cmaes needs {CMAES_INSTALL}")
    return sampler


@pytest.fixture(autouse=True)
def _quiet_optuna():
    level = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    yield
    optuna.logging.set_verbosity(level)


@pytest.mark.parametrize("sampler", list(SAMPLER_CLASSES))
def test_every_sampler_is_seeded_from_the_config(sampler):
    _sampler_or_skip(sampler)
    settings = TuningSettings(storage=None, sampler=sampler, seed=3, n_splits=N_STEPS)
    assert isinstance(open_study(settings, "s").sampler, SAMPLER_CLASSES[sampler])
    first, again = _history(settings), _history(settings)
    assert first == again  # same seed -> same params, states and values
    assert all(state in ("COMPLETE", "PRUNED") for _, state, _ in first)
    other = _history(replace(settings, sampler_seed=4))
    assert [p for p, _, _ in other] != [p for p, _, _ in first]
    assert len({p["x"] for p, _, _ in first}) == len(first)  # it explores


def test_the_default_is_the_seeded_tpe_and_median_pruner_of_before():
    settings = tuning_settings(compose("train", ["tuning.storage=memory"]))
    assert (settings.sampler, settings.pruner, settings.pruner_used) == ("tpe", "median", "median")
    ours = _history(replace(settings, n_splits=N_STEPS), n_trials=15)
    before = optuna.create_study(
        sampler=optuna.samplers.TPESampler(seed=settings.seed),
        pruner=optuna.pruners.MedianPruner(n_startup_trials=5, n_warmup_steps=1))
    before.optimize(_objective, n_trials=15)
    assert ours == [(t.params, t.state.name, t.value) for t in before.trials]
    assert any(state == "PRUNED" for _, state, _ in ours)


@pytest.mark.parametrize("pruner", list(PRUNER_CLASSES))
def test_every_pruner_builds_and_prunes_reproducibly(pruner):
    settings = TuningSettings(storage=None, sampler="random", seed=5, pruner=pruner,
                              n_splits=N_STEPS)
    assert isinstance(open_study(settings, "p").pruner, PRUNER_CLASSES[pruner])
    first = _history(settings, n_trials=30, name="p")
    assert first == _history(settings, n_trials=30, name="p")
    pruned = sum(state == "PRUNED" for _, state, _ in first)
    assert (pruned == 0) if pruner == "none" else (0 < pruned < 30)


def test_prune_false_turns_any_default_pruning_off_and_refuses_hyperband():
    off = tuning_settings(compose("train", ["tuning.prune=false"]))
    assert (off.pruner, off.pruner_used, off.prune) == ("none", "none", False)
    none = tuning_settings(compose("train", ["tuning.pruner=none"]))
    assert (none.pruner_used, none.prune) == ("none", False)
    hb = tuning_settings(compose("train", ["tuning.pruner=hyperband"]))
    assert (hb.pruner_used, hb.prune) == ("hyperband", True)
    # built directly (as pipeline code may): prune=False wins over the default median too
    assert isinstance(open_study(TuningSettings(storage=None, prune=False), "q").pruner,
                      optuna.pruners.NopPruner)
    with pytest.raises(PulseError, match=r"tuning.prune=false .* tuning.pruner=hyperband"):
        tuning_settings(compose("train", ["tuning.prune=false", "tuning.pruner=hyperband"]))


@pytest.mark.parametrize(("override", "hint"), [("tuning.sampler=tpee", "Did you mean tpe?"),
                                                ("tuning.sampler=cma", "Did you mean cmaes?"),
                                                ("tuning.pruner=hyperbnd",
                                                 "Did you mean hyperband?")])
def test_a_misspelled_choice_names_the_key_and_the_closest_option(override, hint):
    with pytest.raises(PulseError, match=hint) as err:
        tuning_settings(compose("train", [override]))
    assert override.split("=")[0] in str(err.value) and "\n" not in str(err.value)


def test_cmaes_without_its_package_is_one_line_naming_the_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "cmaes", None)  # what `import cmaes` meets when absent
    with pytest.raises(PulseError, match=CMAES_INSTALL) as err:
        checked_sampler("cmaes")
    assert "\n" not in str(err.value)
    assert checked_sampler("qmc") == "qmc"


def test_cmaes_leaves_categorical_parameters_to_a_seeded_random_sampler():
    """What Optuna does: CMA-ES models the numeric parameters only; ``c`` is drawn at random."""
    _sampler_or_skip("cmaes")
    settings = TuningSettings(storage=None, sampler="cmaes", seed=1, prune=False)
    study = open_study(settings, "c")
    study.optimize(_objective, n_trials=20)
    space = study.sampler.infer_relative_search_space(study, study.trials[-1])
    assert set(space) == {"x", "n"}
    assert {t.params["c"] for t in study.trials} == {"a", "b", "none"}


def test_a_resumed_study_continues_with_the_sampler_given_now(tmp_path):
    journal = str(tmp_path / "study.journal")
    tpe = TuningSettings(storage=journal, seed=2, n_splits=N_STEPS)
    open_study(tpe, "r").optimize(_objective, n_trials=3)
    resumed = open_study(replace(tpe, sampler="random", pruner="hyperband"), "r")
    assert isinstance(resumed.sampler, optuna.samplers.RandomSampler)
    assert isinstance(resumed.pruner, optuna.pruners.HyperbandPruner)
    resumed.optimize(_objective, n_trials=2)
    assert len(optuna.load_study(study_name="r", storage=open_storage(journal)).trials) == 5


def _block_cmaes_and_run(*args: str) -> list[str]:
    """``pulse-ml <args>`` in a Python where ``import cmaes`` fails, as in a light install."""
    code = ("import sys; sys.modules['cmaes'] = None; "
            "from pulse_ml.cli import main; main(sys.argv[1:])")
    return [sys.executable, "-c", code, *args]


@pytest.mark.slow
@pytest.mark.parametrize(("overrides", "expected"), [
    (["tuning.sampler=randm"], "tuning.sampler=randm is not an option. Did you mean random?"),
    (["tuning.pruner=medain"], "tuning.pruner=medain is not an option. Did you mean median?"),
    (["tuning.prune=false", "tuning.pruner=hyperband"], "Drop tuning.prune=false"),
    (["tuning.sampler=cmaes"], f"needs the cmaes package: {CMAES_INSTALL}"),
])
def test_bad_choices_exit_2_in_one_line_before_any_work(overrides, expected, pulse_home,
                                                         tmp_path):
    import subprocess

    data = tmp_path / "absent.parquet"  # would be simulated (work) if the check came later
    res = subprocess.run(_block_cmaes_and_run("train", f"data.path={data}", *overrides),
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 2, res.stderr
    assert expected in res.stderr and "Traceback" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
    assert not data.exists()


@pytest.mark.slow
def test_help_of_train_shows_the_sampler_and_pruner(cli):
    res = cli("train", "--help")
    assert res.returncode == 0, res.stderr
    for text in ("tuning.sampler=tpe|random|cmaes|qmc", "tuning.pruner=median|hyperband|none",
                 "tuning.prune=false", "sampler: tpe", "pruner: median"):
        assert text in res.stdout


@pytest.mark.slow
def test_train_with_the_random_sampler_logs_it_and_draws_the_seeded_trials(
        cli, pulse_home, small_demo):
    res = cli("train", f"data.path={small_demo}", "model=lightgbm", "progress=false",
              "tuning.sampler=random", "tuning.n_trials=3", "register=never")
    assert res.returncode == 0, res.stderr
    assert "random sampler, pruner median" in " ".join(res.stdout.split())
    runs = mlflow.search_runs(experiment_names=[keys.TRAIN_EXPERIMENT],
                              filter_string=f"tags.{keys.KIND} = '{keys.KIND_FAMILY}'",
                              output_format="list")
    assert len(runs) == 1
    run = runs[0]
    assert run.data.params[keys.SAMPLER] == "random"
    assert run.data.params[keys.PRUNER] == "median"
    study = optuna.load_study(study_name=run.data.tags[keys.STUDY_NAME],
                              storage=open_storage(run.data.tags[keys.STUDY_STORAGE]))
    trials = sorted(study.trials, key=lambda t: t.number)
    assert len(trials) == 3 and all(t.state.name == "COMPLETE" for t in trials)
    # the same draws as a RandomSampler seeded with `seed` (42), parameter by parameter
    replay = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=42))
    for t in trials:
        assert replay.ask(fixed_distributions=t.distributions).params == t.params
