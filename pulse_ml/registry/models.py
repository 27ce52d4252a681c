"""Training runs, the model registry and promotion (everything MLflow beyond setup)."""

from __future__ import annotations

import json
import tempfile
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from pulse_ml.errors import PulseError
from pulse_ml.registry.store import CHAMPION, REGISTERED_MODEL

PIP_REQUIREMENTS = ["mlflow>=3.17,<3.18", "scikit-learn>=1.9,<2", "lightgbm>=4.7,<5",
                    "pandas>=2.2", "numpy>=2.0", "joblib", "pulse-ml"]


@dataclass(frozen=True)
class Promotion:
    """Outcome of the promotion rule for one new model version."""

    promoted: bool
    reason: str
    champion_version: str | None = None
    champion_value: float | None = None


def should_promote(objective: str, new_value: float, new_fingerprint: str,
                   champion_value: float | None, champion_fingerprint: str | None) -> tuple[
                       bool, str]:
    """The promotion rule (pure).

    The new version becomes champion when there is none yet, or when it beats the champion on
    the objective on the same data fingerprint. Otherwise the champion stays.

    Returns:
        ``(promote, reason)``.
    """
    if champion_value is None:
        return True, "no champion yet"
    if champion_fingerprint != new_fingerprint:
        return False, (f"the champion was scored on other data (fingerprint "
                       f"{str(champion_fingerprint)[:12]} vs {new_fingerprint[:12]}); its "
                       f"{objective} is not comparable. Use `pulse-ml promote version=N` to "
                       "switch by hand.")
    better = new_value < champion_value if objective == "cv_mse" else new_value > champion_value
    verb = "beats" if better else "does not beat"
    return better, (f"new {objective} {new_value:.4f} {verb} the champion's "
                    f"{champion_value:.4f} on the same data")


def client():
    """An MlflowClient on the configured store."""
    import mlflow

    return mlflow.MlflowClient()


def champion_version(name: str = REGISTERED_MODEL):
    """The model version behind the ``champion`` alias, or None."""
    from mlflow.exceptions import MlflowException

    try:
        return client().get_model_version_by_alias(name, CHAMPION)
    except MlflowException:
        return None


def decide_and_promote(version: str, objective: str, value: float, fingerprint: str,
                       auto: bool = True) -> Promotion:
    """Apply the promotion rule to ``version`` and move the alias when it wins."""
    current = champion_version()
    cur_value = cur_fp = None
    if current is not None:
        tags = current.tags or {}
        cur_fp = tags.get("data_fingerprint")
        cur_value = float(tags[objective]) if objective in tags else None
        if cur_value is None:
            cur_value = float("inf") if objective == "cv_mse" else float("-inf")
    promote, reason = should_promote(objective, value, fingerprint,
                                     None if current is None else cur_value, cur_fp)
    if promote and not auto:
        promote, reason = False, "automatic promotion is off (promote=never)"
    if promote:
        client().set_registered_model_alias(REGISTERED_MODEL, CHAMPION, str(version))
    client().set_model_version_tag(REGISTERED_MODEL, str(version), "promotion",
                                   "promoted" if promote else "kept")
    return Promotion(promote, reason, None if current is None else str(current.version),
                     cur_value)


def promote_by_hand(version: str) -> Promotion:
    """Move ``champion`` to ``version`` (``pulse-ml promote``)."""
    from mlflow.exceptions import MlflowException

    c = client()
    try:
        c.get_model_version(REGISTERED_MODEL, str(version))
    except MlflowException:
        versions = [str(v.version) for v in c.search_model_versions(f"name='{REGISTERED_MODEL}'")]
        raise PulseError(f"model '{REGISTERED_MODEL}' has no version {version} (versions: "
                         f"{', '.join(sorted(versions, key=int)) or 'none'}).") from None
    current = champion_version()
    c.set_registered_model_alias(REGISTERED_MODEL, CHAMPION, str(version))
    c.set_model_version_tag(REGISTERED_MODEL, str(version), "promotion", "promoted by hand")
    before = None if current is None else str(current.version)
    return Promotion(True, f"moved by hand from version {before}", before, None)


def log_family_run(*, run_name: str, tags: Mapping[str, str], params: Mapping[str, object],
                   metrics: Mapping[str, float], fold_metrics: Mapping[str, list[float]],
                   config_yaml: str, oof: pd.DataFrame) -> None:
    """Log params, metrics (pooled + per fold as steps), config and OOF to the active run."""
    import mlflow

    mlflow.set_tags(dict(tags))
    mlflow.log_params({k: ("None" if v is None else v) for k, v in params.items()})
    mlflow.log_metrics(dict(metrics))
    for key, values in fold_metrics.items():
        for step, value in enumerate(values):
            mlflow.log_metric(key, value, step=step)
    mlflow.log_text(config_yaml, "config.yaml")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "oof_predictions.csv"
        oof.to_csv(path, index=False)
        mlflow.log_artifact(str(path))
    _ = run_name


def log_trials(parent_run_id: str, experiment_id: str, trials, family: str) -> None:
    """Log finished trials as nested child runs of the family run (batched)."""
    import time

    from mlflow.entities import Metric, Param, RunTag

    c = client()
    now = int(time.time() * 1000)
    for trial in trials:
        run = c.create_run(experiment_id, run_name=f"{family}-trial-{trial.number}",
                           tags={"mlflow.parentRunId": parent_run_id, "kind": "trial",
                                 "family": family, "trial_state": trial.state.name})
        metrics = [Metric(k, float(v), now, 0)
                   for k, v in (trial.user_attrs.get("metrics") or {}).items()]
        for key in ("fold_mse", "fold_mae", "fold_pearson"):
            metrics += [Metric(key, float(v), now, i)
                        for i, v in enumerate(trial.user_attrs.get(key) or [])]
        if trial.value is not None:
            metrics.append(Metric("objective", float(trial.value), now, 0))
        params = [Param(k, str(v)) for k, v in trial.params.items()]
        params.append(Param("trial_number", str(trial.number)))
        c.log_batch(run.info.run_id, metrics=metrics, params=params,
                    tags=[RunTag("mlflow.runName", f"{family}-trial-{trial.number}")])
        status = "FINISHED" if trial.state.name in ("COMPLETE", "PRUNED") else "FAILED"
        c.set_terminated(run.info.run_id, status=status)


def log_and_register_model(ensemble, example: pd.DataFrame, version_tags: Mapping[str, str],
                           register: bool = True):
    """Log the ensemble as an MLflow pyfunc model and (optionally) register it.

    Returns:
        The registered model version (str) or None.
    """
    import joblib
    import mlflow
    from mlflow.models import infer_signature

    from pulse_ml.registry.pyfunc import PulseSatisfactionModel

    example = example[ensemble.features.names].head(5).reset_index(drop=True)
    with warnings.catch_warnings():  # counts and flags are integers by contract: no NaN
        warnings.filterwarnings("ignore", message="Hint: Inferred schema contains integer")
        signature = infer_signature(example, ensemble.predict(example))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "ensemble.joblib"
        joblib.dump(ensemble, path)
        oof_path = Path(tmp) / "oof_predictions.csv"
        ensemble.oof.to_csv(oof_path, index=False)
        info = mlflow.pyfunc.log_model(
            name="model", python_model=PulseSatisfactionModel(),
            artifacts={"ensemble": str(path), "oof_predictions": str(oof_path)},
            signature=signature, input_example=example, pip_requirements=PIP_REQUIREMENTS,
            registered_model_name=REGISTERED_MODEL if register else None)
    if not register:
        return None
    version = str(info.registered_model_version)
    c = client()
    for key, value in version_tags.items():
        c.set_model_version_tag(REGISTERED_MODEL, version, key, str(value))
    return version


def load_registered(model_uri: str):
    """Load a registered pulse model; returns ``(ensemble, model_version or None)``.

    Raises:
        PulseError: unknown alias/version, or a model that is not a pulse cross-fit ensemble.
    """
    import mlflow
    from mlflow.exceptions import MlflowException

    try:
        model = mlflow.pyfunc.load_model(model_uri)
    except MlflowException as exc:
        msg = str(exc).splitlines()[0]
        raise PulseError(f"cannot load model '{model_uri}': {msg}. Train and register one with "
                         "`pulse-ml train` (or `pulse-ml pipeline`), or pass model_uri=... "
                         "(e.g. models:/pulse-satisfaction/1).") from None
    try:
        ensemble = model.unwrap_python_model().ensemble
    except (AttributeError, MlflowException):
        raise PulseError(f"model '{model_uri}' is not a pulse cross-fit ensemble: it carries "
                         "no out-of-fold predictions, and honest PPI needs them. Register it "
                         "with `pulse-ml train`, or run infer with ppi.predictions=in_sample "
                         "(paper mode, intervals not valid).") from None
    version = None
    if model_uri.startswith("models:/"):
        version = _version_of(model_uri)
    return ensemble, version


def _version_of(model_uri: str):
    rest = model_uri[len("models:/"):]
    c = client()
    if "@" in rest:
        name, alias = rest.split("@", 1)
        return c.get_model_version_by_alias(name, alias)
    name, _, ver = rest.partition("/")
    return c.get_model_version(name, ver) if ver.isdigit() else None


def version_summary(version) -> dict:
    """A JSON-friendly summary of a model version (for result files)."""
    if version is None:
        return {}
    return {"name": version.name, "version": str(version.version),
            "tags": dict(version.tags or {}), "run_id": version.run_id}


def dumps(obj) -> str:
    """JSON with stable formatting."""
    return json.dumps(obj, indent=2, sort_keys=False, default=str)
