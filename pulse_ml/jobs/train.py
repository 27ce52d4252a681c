"""Tune one model family with Optuna under k-fold CV, log it to MLflow, register and promote.

For the family chosen with ``model=<family>`` (ordinal_logit, random_forest, hist_gb, lightgbm,
mean, or a YAML path) and the feature set ``features=<set>``: a seeded Optuna study runs
``tuning.n_trials`` trials of 5-fold CV, kept in a journal file under the tracking store
(``tuning.storage=auto``; continue it later with ``tuning.study_name=...``, with the sampler and
pruner given then). ``tuning.sampler=tpe|random|cmaes|qmc`` (cmaes: ``pip install cmaes``;
categorical parameters drawn at random) and ``tuning.pruner=median|hyperband|none`` over the
folds; ``tuning.prune=false`` means ``pruner=none`` (refused with ``pruner=hyperband``).
Every trial is logged as it finishes, as a nested MLflow run under one parent run per family
in experiment ``pulse-train``; the best trial's 5 fold models become one cross-fit ensemble,
logged (named after the family) with its out-of-fold predictions.

Promotion (``promotion.rule``): the new model is compared with the ``champion`` on the same
sessions — the difference in selection-free out-of-fold MSE and r (each fold predicted by the
trial best on the other folds) with a 95% interval from a bootstrap over users that chooses
those trials again. ``significant`` (default) promotes only when that interval excludes 0 in the new
model's favour; ``better`` on any strict improvement; ``manual`` never. A version of
``pulse-satisfaction`` is registered for promotion candidates only (``register=candidates``;
``always`` / ``never``). The summary also says how much narrower this predictor would make the
next experiment's intervals, and prints the run's address in the MLflow UI.

``exclude_case_studies=[plan]`` (or ``all``) and ``trained_before=YYYY-MM-DD`` leave sessions
out of training, e.g. to train on sessions before an A/B test that ``pulse-ml monitor`` watches.

Examples:
    pulse-ml train model=lightgbm tuning.n_trials=50
    pulse-ml train trained_before=2025-06-02 exclude_case_studies=all promote=never
    pulse-ml train -m model=ordinal_logit,random_forest,hist_gb,lightgbm
    pulse-ml train -m features=user,agent,progression,all seed=0,1,2,3,4
    pulse-ml compare group_by=features          # then: the ablation of those 20 runs
    pulse-ml train promotion.rule=better register=always
    pulse-ml train tuning.workers=2
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

import pandas as pd

from pulse_ml import keys
from pulse_ml import settings as shared
from pulse_ml.config import Node, choice, flag, mapping, names, number, text, to_yaml
from pulse_ml.errors import PulseError
from pulse_ml.models.factory import ModelSpec, model_spec_from_mapping
from pulse_ml.models.text_cache import cache_folder
from pulse_ml.report.tables import say, wrap_lines
from pulse_ml.sessions.feature_sets import FeatureSet
from pulse_ml.sessions.table import SessionTable, load_sessions, note_lines
from pulse_ml.simulate.demo import ensure_demo_data
from pulse_ml.stats.paired import expected_ci_reduction_at_ratio
from pulse_ml.training import report
from pulse_ml.training.family import FamilyFit, tune_family
from pulse_ml.training.paired import PairedSettings
from pulse_ml.training.promotion_rule import RULES, decide
from pulse_ml.training.report import TrainResult
from pulse_ml.training.samplers import PRUNERS, SAMPLERS, checked_sampler, pruner_in_use
from pulse_ml.training.selection import TrainingSelection, parse_trained_before, select_training
from pulse_ml.training.study_files import history_steps, study_files
from pulse_ml.training.tuning import OBJECTIVES, TuningSettings

PROMOTE_MODES = {"auto": "move the alias when the promotion rule says so",
                 "never": "never move it (a dry run of the rule)"}
REGISTER_MODES = {"candidates": "register a version only when the promotion rule would promote it",
                  "always": "register every trained model",
                  "never": "register nothing (true/false mean always/never)"}
GROUP_MODES = {"user_id": "all sessions of a user in one fold",
               "none": "plain shuffled KFold, as the paper"}
STORAGE_AUTO = "auto"


@dataclass(frozen=True)
class PromotionSettings:
    """The ``promotion`` node: the rule, its paired bootstrap, and ``promote=auto|never``."""

    rule: str = "significant"
    auto: bool = True
    paired: PairedSettings = PairedSettings()


@dataclass(frozen=True)
class TrainSettings:
    """Typed settings of ``pulse-ml train`` (also built directly by ``pipeline``)."""

    data_path: str
    simulate_if_missing: bool
    features: FeatureSet
    model: ModelSpec
    tuning: TuningSettings
    register: str
    promotion: PromotionSettings
    ci_ratio: float
    progress: bool
    config_yaml: str
    selection: TrainingSelection = TrainingSelection()
    text_cache: str | None = None  # folder of text-encoder vectors (None = memory only)
    run: shared.RunLabels = shared.RunLabels()  # experiment, run_name, tags


def text_cache_folder(cfg: Node) -> str | None:
    """``text_cache``: null = ``$PULSE_TEXT_CACHE`` if set, else ``<pulse_home>/.cache/text``.

    ``none`` keeps the text encoders' vectors in memory only.
    """
    import os

    from pulse_ml.env.paths import project_root
    from pulse_ml.models.text_cache import CACHE_ENV

    raw = cfg.select("text_cache")
    if raw is None:
        env = os.environ.get(CACHE_ENV)
        if env is not None:
            return env or None
        return str(project_root() / ".cache" / "text")
    return text(cfg, "text_cache")


def tuning_settings(cfg: Node, verb: str = "train") -> TuningSettings:
    """Typed tuning and CV settings from the composed ``tuning``/``cv`` nodes."""
    objective = choice(cfg, "objective", verb, {k: f"{v} it" for k, v in OBJECTIVES.items()})
    storage, named = text(cfg, "tuning.storage"), text(cfg, "tuning.study_name")
    pruner = pruner_in_use(choice(cfg, "tuning.pruner", verb, PRUNERS),
                           flag(cfg, "tuning.prune", verb, True), verb)
    fresh = storage in (None, "memory") or (storage == "auto" and not named)
    if cfg.select("tuning.n_trials") in (0, "0") and fresh:
        raise PulseError(f"pulse-ml {verb}: tuning.n_trials=0 runs no trial, and this run's "
                         "study is new (no tuning.storage/tuning.study_name of an earlier "
                         "study), so there is no trial to reuse. Use "
                         "tuning.n_trials >= 1, or tuning.storage=<the journal/database of an "
                         "earlier study> to refit its best trial.")
    return TuningSettings(
        n_trials=number(cfg, "tuning.n_trials", verb, 1 if fresh else 0, None, integer=True),
        timeout_s=number(cfg, "tuning.timeout_s", verb, 0, None, open_interval=True,
                         optional=True),
        storage=None if storage == "memory" else storage, study_name=named,
        workers=number(cfg, "tuning.workers", verb, 1, None, integer=True),
        objective=objective, seed=number(cfg, "seed", verb, integer=True),
        n_splits=number(cfg, "cv.n_splits", verb, 2, None, integer=True),
        cv_seed=number(cfg, "cv.seed", verb, integer=True),
        group_by_user=choice(cfg, "cv.group_by", verb, GROUP_MODES) == "user_id",
        prune=pruner != "none", pruner=pruner,
        sampler=checked_sampler(choice(cfg, "tuning.sampler", verb, SAMPLERS), verb),
        sampler_seed=number(cfg, "tuning.sampler_seed", verb, integer=True, optional=True),
        plots=flag(cfg, "tuning.plots", verb, False))


def _register_mode(cfg: Node, verb: str) -> str:
    raw = cfg.select("register", "candidates")
    if isinstance(raw, bool) or str(raw).lower() in ("true", "false"):
        return "always" if str(raw).lower() == "true" else "never"
    return choice(cfg, "register", verb, REGISTER_MODES)


def promotion_settings(cfg: Node, verb: str = "train") -> PromotionSettings:
    """Typed ``promotion`` node (rule, bootstrap) and ``promote=auto|never``."""
    return PromotionSettings(
        rule=choice(cfg, "promotion.rule", verb, RULES),
        auto=choice(cfg, "promote", verb, PROMOTE_MODES) == "auto",
        paired=PairedSettings(
            n_boot=number(cfg, "promotion.n_boot", verb, 100, None, integer=True),
            alpha=number(cfg, "promotion.alpha", verb, 0, 0.5, open_interval=True),
            seed=number(cfg, "promotion.seed", verb, integer=True)))


def model_spec(cfg: Node) -> ModelSpec:
    """Typed model family from the composed ``model`` node."""
    return model_spec_from_mapping(mapping(cfg, "model"))


def settings_from_config(cfg: Node, verb: str = "train",
                         spec: ModelSpec | None = None) -> TrainSettings:
    """Read the composed config once (every number and choice checked here).

    ``pipeline`` passes its own config (no ``model`` key) and each family's ``spec``.
    """
    return TrainSettings(
        data_path=str(cfg.data.path),
        simulate_if_missing=flag(cfg, "data.simulate_if_missing", verb, True),
        features=shared.feature_set(cfg), model=spec or model_spec(cfg),
        tuning=tuning_settings(cfg, verb), register=_register_mode(cfg, verb),
        promotion=promotion_settings(cfg, verb),
        ci_ratio=number(cfg, "ci_reduction.unlabeled_ratio", verb, 0, None),
        progress=flag(cfg, "progress", verb, True), config_yaml=to_yaml(cfg),
        selection=training_selection(cfg, verb), text_cache=text_cache_folder(cfg),
        run=shared.run_labels(cfg, verb))


def training_selection(cfg: Node, verb: str = "train") -> TrainingSelection:
    """``exclude_case_studies`` (names, or ``all``) and ``trained_before`` (a date)."""
    raw = cfg.select("exclude_case_studies")
    if raw is None or (isinstance(raw, str) and raw.strip().lower() in ("", "none")):
        excluded: tuple[str, ...] = ()
    elif isinstance(raw, str | list | tuple):
        chosen = names(raw)  # None: all
        excluded = ("all",) if chosen is None else tuple(v.strip() for v in chosen if v.strip())
    else:
        raise PulseError(f"pulse-ml {verb}: exclude_case_studies={raw!r}: give a list of case "
                         "study names, e.g. exclude_case_studies=[plan,memory], or all.")
    return TrainingSelection(excluded, parse_trained_before(cfg.select("trained_before"), verb))


def resolve_storage(tuning: TuningSettings, spec: ModelSpec, features: FeatureSet, fp: str,
                    run_id: str) -> TuningSettings:
    """Settle the study's storage and name for this run.

    ``tuning.storage=auto``: a journal file ``<store>/optuna/<study>.journal`` and, unless
    ``tuning.study_name`` is given, a new study per run (``<family>-<features>-<fp>-<run>``), so
    the same config gives the same trials; pass the printed name to continue it. A storage
    given explicitly keeps the shared default name ``<family>-<features>-<fp>`` (several
    workers or machines add trials to one study).
    """
    from pulse_ml.registry import trials
    from pulse_ml.training.family import study_name_for

    if tuning.storage != STORAGE_AUTO:
        return replace(tuning, study_name=study_name_for(spec, features, fp, tuning))
    name = tuning.study_name or f"{spec.name}-{features.name}-{fp[:10]}-{run_id[:8]}"
    return replace(tuning, study_name=name, storage=trials.study_storage(name))


def train_family(table: SessionTable, spec: ModelSpec, job: TrainSettings) -> TrainResult:
    """Tune one family, log it to ``pulse-train``, compare with the champion, register, promote.

    Args:
        table: The validated session table (labeled and unlabeled sessions).
        spec: The model family.
        job: Typed train settings (tuning, register mode, promotion rule, CI-reduction ratio).
    """
    from pulse_ml.registry import champion_oof, models, promotion, runs, trials, version_card
    from pulse_ml.registry import store as tracking
    from pulse_ml.training.family import fingerprint, label_fingerprint, training_data
    from pulse_ml.training.paired import with_users

    labeled, _ = training_data(table)
    fp, label_fp = fingerprint(labeled, table.features), label_fingerprint(labeled)
    n_lab, n_unl = len(labeled), int((~table.labeled).sum())
    objective = job.tuning.objective
    group_by = keys.GROUPED_BY_USER if job.tuning.group_by_user else keys.NOT_GROUPED
    data_name = Path(table.path).name
    with runs.family_run(spec.name, table.features.name, fp, objective, seed=job.tuning.seed,
                         description=f"Tuning **{spec.name}** on feature set "
                                     f"`{table.features.name}` ({n_lab:,} labeled sessions of "
                                     f"`{data_name}`): in progress.",
                         labels=job.run) as run_id:
        tuning = resolve_storage(job.tuning, spec, table.features, fp, run_id)
        runs.set_tags({keys.STUDY_NAME: tuning.study_name, keys.LABEL_FINGERPRINT: label_fp,
                       keys.STUDY_STORAGE: tuning.storage or "memory",
                       keys.CV_GROUP_BY: group_by})
        runs.log_dataset(labeled[["session_id", "user_id", "rating",
                                 *table.features.model_names]],
                         table.path, f"{Path(table.path).stem} (labeled, {table.features.name})",
                         fp, "training")
        logger = trials.TrialLogger(run_id, runs.active_experiment_id(), spec.name, objective)
        fit = tune_family(table, spec, tuning, progress=job.progress, on_trial=logger,
                          invocation=run_id)
        logger.mark_best(fit.best_number)
        values, free = fit.metrics.as_dict(), fit.selection_free
        r = (free.metrics if free else fit.metrics).pearson  # not the best trial's (optimistic)
        red = float(expected_ci_reduction_at_ratio(r, n_unl / max(n_lab, 1)))
        red_ref = float(expected_ci_reduction_at_ratio(r, job.ci_ratio))
        with tempfile.TemporaryDirectory() as tmp:
            files = study_files(fit, objective, Path(tmp) / "study", plots=tuning.plots)
            _log_fit(fit, tuning, job.config_yaml, with_users(fit.ensemble.oof, fit.labeled),
                     files, {keys.EXPECTED_CI_REDUCTION: 100 * red,
                             keys.EXPECTED_CI_REDUCTION_REF: 100 * red_ref}, n_unl)
            champion_oof.log_selection_free(free, fit.labeled)
        champion = promotion.current_champion()
        paired, evaluation = champion_oof.paired_with_champion(
            free, fit.labeled, fp, label_fp, champion, job.promotion.paired, group_by)
        decision = champion_oof.with_evaluation_note(decide(
            job.promotion.rule, objective, values[objective], fp, champion, paired, label_fp,
            group_by), evaluation)
        register = job.register == "always" or (job.register == "candidates"
                                                 and decision.candidate)
        version, promoted, reason, logged = None, False, decision.reason, None
        result = TrainResult(
            family=spec.name, feature_set=fit.features.name, run_id=run_id,
            best_params=fit.best_params, metrics=fit.metrics, n_trials=fit.n_trials_total,
            seconds=fit.seconds, version=None, promoted=False, promotion_reason=reason,
            data_fingerprint=fp, rule=decision.rule, candidate=decision.candidate,
            paired=paired, champion_version=decision.champion_version, n_labeled=n_lab,
            n_unlabeled=n_unl, ci_reduction=red, ci_reduction_ref=red_ref,
            ci_ratio_ref=job.ci_ratio, study_name=tuning.study_name or "",
            storage=tuning.storage, run_url=runs.run_link(run_id), objective=objective,
            selection_free=free.metrics if free else None)
        record = {  # what the version records: a few tags, the rest in its description
            keys.FAMILY: spec.name, keys.FEATURE_SET: fit.features.name,
            keys.DATA_FINGERPRINT: fp, keys.LABEL_FINGERPRINT: label_fp,
            keys.GIT_COMMIT: tracking.git_commit(),
            keys.OBJECTIVE: objective, keys.SEED: str(tuning.seed), keys.CV_GROUP_BY: group_by,
            keys.N_LABELED: str(n_lab), keys.N_UNLABELED: str(n_unl),
            keys.EXPECTED_CI_REDUCTION: f"{100 * red:.2f}",
            keys.EXPECTED_CI_REDUCTION_REF: f"{100 * red_ref:.2f}",
            "ci_reduction_unlabeled_ratio": f"{job.ci_ratio:g}",
            **{k: f"{v:.6f}" for k, v in values.items()},
            **({keys.SELECTION_FREE_PREFIX + k: f"{v:.6f}" for k, v in
                free.metrics.as_dict().items()} if free else {}),
            **({keys.PAIRED_EVALUATION: evaluation} if evaluation else {})}
        if register:  # a model is logged only to be registered (issue 25: the run keeps OOF)
            logged = models.log_model(fit.ensemble, fit.labeled, metrics=values,
                                      params=fit.best_params)
            version = models.register_version(logged, version_card.version_tags(record))
            outcome = promotion.apply_decision(version, decision, job.promotion.auto)
            promoted, reason = outcome.promoted, outcome.reason
        elif job.register == "never":
            reason = f"{decision.reason}; not registered (register=never)"
        else:
            reason = (f"{decision.reason}; not registered: not a promotion candidate "
                      "(register=candidates; register=always keeps a version of every model)")
        result = replace(result, version=version, promoted=promoted, promotion_reason=reason)
        registered = (f"version {version} of `{keys.REGISTERED_MODEL}`" if version else
                      f"no (register={job.register}); no model logged (its out-of-fold "
                      "predictions are in the run; register=always logs and registers every "
                      "model)")
        text_ = report.describe(result, fit, data_name, tuning, registered)
        if version:
            models.describe_version(version, version_card.describe(
                version_card.headline(result, data_name),
                {**record, **promotion.decision_tags(decision), keys.PROMOTION_REASON: reason}))
        runs.set_tags({**promotion.decision_tags(decision), keys.REGISTERED_VERSION: version or "",
                       **({keys.PAIRED_EVALUATION: evaluation} if evaluation else {}),
                       keys.PROMOTION: "promoted" if promoted else "kept",
                       keys.PROMOTION_REASON: reason[:5000], keys.NOTE: text_,
                       **({keys.MODEL_ID: logged.model_id} if logged else {})})
        if paired is not None:
            runs.log_metrics({keys.PAIRED_PREFIX + k: v for k, v in paired.as_dict().items()
                              if k.startswith(("delta_", "mse_ci", "r_ci", "mae_ci"))})
    return result


def _log_fit(fit: FamilyFit, tuning: TuningSettings, config_yaml: str, oof: pd.DataFrame,
             files: list[Path], extra_metrics: dict[str, float], n_unlabeled: int) -> None:
    from pulse_ml.registry import runs

    m = fit.metrics
    runs.log_family_run(  # counts and indices are tags or params, never metrics
        run_name=fit.family, tags={keys.N_TRIALS: str(fit.n_trials_total),
                                   keys.N_TRIALS_COMPLETE: str(fit.n_complete)},
        params={**{f"best.{k}": v for k, v in fit.best_params.items()},
                keys.FAMILY: fit.family, keys.FEATURE_SET: fit.features.name,
                keys.N_LABELED: len(fit.y), keys.N_UNLABELED: n_unlabeled,
                "cv.n_splits": tuning.n_splits, "cv.seed": tuning.cv_seed, keys.SEED: tuning.seed,
                keys.CV_GROUP_BY_PARAM: (keys.GROUPED_BY_USER if tuning.group_by_user
                                         else keys.NOT_GROUPED),
                keys.OBJECTIVE: tuning.objective, "n_trials_requested": tuning.n_trials,
                "storage": tuning.storage, keys.STUDY_NAME: tuning.study_name,
                "workers": tuning.workers, keys.SAMPLER: tuning.sampler,
                keys.PRUNER: tuning.pruner_used},
        metrics={**m.as_dict(), keys.TUNING_TIME: fit.seconds, **extra_metrics},
        fold_metrics={keys.FOLD_MSE: list(m.fold_mse), keys.FOLD_MAE: list(m.fold_mae),
                      keys.FOLD_PEARSON: list(m.fold_pearson)},
        config_yaml=config_yaml, oof=oof, files=files, steps=history_steps(fit, tuning.objective))


def summary(result: TrainResult) -> str:
    """The end-of-run summary (see :func:`pulse_ml.training.report.summary`) with its links."""
    from pulse_ml.keys import REGISTERED_MODEL
    from pulse_ml.registry import links

    url = (links.model_version_url(REGISTERED_MODEL, result.version) if result.version
           else None)
    return report.summary(result, REGISTERED_MODEL, url, links.ui_hint_once())


def run(cfg: Node) -> TrainResult:
    """Entry point of ``pulse-ml train``."""
    return run_settings(settings_from_config(cfg))


def run_settings(job: TrainSettings) -> TrainResult:
    """Train with typed settings (``pipeline`` calls this directly)."""
    ensure_demo_data(job.data_path, job.simulate_if_missing, shared.default_simulator_settings)
    # Training uses every labeled session; case studies matter only to infer.
    table = select_training(load_sessions(job.data_path, job.features, {}, only=[]),
                            job.selection)
    spec, tuning = job.model, job.tuning
    # a study database that does not answer fails before any MLflow run (auto: a journal
    # under the store, resolved per run; probing the word itself left a file 'auto' behind)
    if tuning.storage and tuning.storage != STORAGE_AUTO:
        from pulse_ml.training.storage import open_storage

        open_storage(tuning.storage)
    chosen = f", {job.selection.describe()}" if job.selection.active else ""
    say(wrap_lines(f"training {spec.name} on {int(table.labeled.sum())} labeled sessions of "
          f"{Path(table.path).name}{chosen} (features '{table.features.name}', "
          f"{tuning.n_trials if spec.search_space else 1} trial(s) x {tuning.n_splits}-fold CV, "
          f"objective {tuning.objective}, {tuning.sampler} sampler, pruner {tuning.pruner_used})"))
    say(note_lines(table.notes), end="")  # e.g. how many sessions have no text
    with cache_folder(job.text_cache):  # read by the text encoders (and tuning workers)
        result = train_family(table, spec, job)
    print(summary(result))  # wrapped already; a second wrap would split its long commands
    return result


__all__ = ["PromotionSettings", "TrainResult", "TrainSettings", "run", "run_settings",
           "train_family"]
