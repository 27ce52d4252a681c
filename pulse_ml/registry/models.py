"""The model registry: log and register a cross-fit ensemble, load it back, find versions."""

from __future__ import annotations

import json
import tempfile
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from pulse_ml.errors import PulseError
from pulse_ml.keys import (
    CHAMPION,
    ENSEMBLE_ARTIFACT,
    OOF_ARTIFACT,
    OOF_PREDICTIONS_ARTIFACT,
    REGISTERED_MODEL,
)
from pulse_ml.redact import redact_text
from pulse_ml.registry.lookup import require_store, version_of

PIP_REQUIREMENTS = ["mlflow>=3.17,<3.18", "scikit-learn>=1.9,<2", "lightgbm>=4.7,<5",
                    "pandas>=2.2", "numpy>=2.0", "joblib", "pulse-ml"]


def pip_requirements(features) -> list[str]:
    """The pyfunc model's pip requirements: the base ones plus its text encoders' packages.

    Args:
        features: The model's :class:`~pulse_ml.sessions.feature_sets.FeatureSet`.
    """
    from pulse_ml.models.text_packages import text_requirements

    return PIP_REQUIREMENTS + [r for r in text_requirements(features)
                               if r not in PIP_REQUIREMENTS]


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


@dataclass(frozen=True)
class VersionRecord:
    """One registered version of ``pulse-satisfaction``, as plain values (``pulse-ml promote``).

    Attributes:
        version: The version number (``"3"``).
        family: The model family (its ``family`` tag; "" when absent).
        feature_set: The feature set (its ``feature_set`` tag; "" when absent).
        cv_mse: The cross-validated MSE in its tags, or None.
        cv_pearson: The cross-validated Pearson r in its tags, or None.
        champion: Whether the ``champion`` alias points at it.
        created: Creation time, seconds since the epoch (UTC).
    """

    version: str
    family: str
    feature_set: str
    cv_mse: float | None
    cv_pearson: float | None
    champion: bool
    created: float


def _tag_number(tags: Mapping[str, str], key: str) -> float | None:
    try:
        value = float(tags[key])
    except (KeyError, ValueError, TypeError):
        return None
    return value if np.isfinite(value) else None


def list_versions(name: str = REGISTERED_MODEL) -> list[VersionRecord]:
    """Every registered version of ``name``, oldest first; reads the store, writes nothing.

    A local sqlite store that does not exist yet has no versions (it is not created).
    """
    from pulse_ml import keys
    from pulse_ml.env.dbprobe import sqlite_file
    from pulse_ml.registry.store import connect, tracking_uri

    db = sqlite_file(tracking_uri())
    if db is not None and not db.is_file():
        return []
    connect(write=False)
    c = client()
    found, token = [], None
    while True:  # every page: a long-lived store may hold more than one page of versions
        page = c.search_model_versions(f"name='{name}'", page_token=token)
        found += list(page)
        token = page.token
        if not token:
            break
    champ = champion_version(name)
    champ_number = None if champ is None else str(champ.version)
    out = []
    for mv in found:
        tags = mv.tags or {}
        out.append(VersionRecord(
            version=str(mv.version), family=tags.get(keys.FAMILY, ""),
            feature_set=tags.get(keys.FEATURE_SET, ""),
            cv_mse=_tag_number(tags, keys.CV_MSE), cv_pearson=_tag_number(tags, keys.CV_PEARSON),
            champion=str(mv.version) == champ_number,
            created=(mv.creation_timestamp or 0) / 1000.0))
    return sorted(out, key=lambda r: int(r.version) if r.version.isdigit() else 0)


@dataclass(frozen=True)
class LoggedModel:
    """A logged (not necessarily registered) pulse model: its MLflow 3 id and URI."""

    model_id: str
    model_uri: str
    name: str


def log_model(ensemble, example: pd.DataFrame, metrics: Mapping[str, float] | None = None,
              params: Mapping[str, object] | None = None) -> LoggedModel:
    """Log the ensemble as an MLflow pyfunc model of the active run, named after its family.

    The cross-validated ``metrics`` (and tuned ``params``) are attached to the logged model
    too, so MLflow's model pages show them. Nothing is registered: see
    :func:`register_version`.
    """
    import joblib
    import mlflow
    from mlflow.models import infer_signature

    from pulse_ml.registry.pip_check import cheap_requirement_check
    from pulse_ml.registry.pyfunc import PulseSatisfactionModel

    timed = bool(ensemble.features.history) and "started_at" in example
    example = example[ensemble.features.input_names].head(5).reset_index(drop=True)
    with warnings.catch_warnings(), tempfile.TemporaryDirectory() as tmp, \
            cheap_requirement_check():  # no scan of every installed package (issue 25)
        # counts and flags are integers by contract: no NaN to encode
        warnings.filterwarnings("ignore", message="Hint: Inferred schema contains integer")
        signature = infer_signature(example, ensemble.predict(example))
        if timed:  # user_history's order: ISO text (MLflow refuses time-zone-aware datetimes)
            signature = _with_started_at(signature)
        path = Path(tmp) / "ensemble.joblib"
        joblib.dump(ensemble, path)
        oof_path = Path(tmp) / OOF_ARTIFACT
        ensemble.oof.to_csv(oof_path, index=False)
        info = mlflow.pyfunc.log_model(
            name=ensemble.family, python_model=PulseSatisfactionModel(),
            artifacts={ENSEMBLE_ARTIFACT: str(path), OOF_PREDICTIONS_ARTIFACT: str(oof_path)},
            signature=signature, input_example=example,
            pip_requirements=pip_requirements(ensemble.features),
            params={k: str(v) for k, v in (params or {}).items()} or None)
    clean = {k: float(v) for k, v in (metrics or {}).items() if np.isfinite(float(v))}
    if clean:
        mlflow.log_metrics(clean, model_id=info.model_id)
    return LoggedModel(model_id=info.model_id, model_uri=info.model_uri, name=ensemble.family)


def _with_started_at(signature):
    """``signature`` with an optional ``started_at`` string input (ISO 8601 or epoch seconds).

    A ``user_history`` model orders each user's sessions by it; without it, by row order.
    """
    from mlflow.models import ModelSignature
    from mlflow.types.schema import ColSpec, Schema

    inputs = [*signature.inputs.inputs, ColSpec("string", "started_at", required=False)]
    return ModelSignature(inputs=Schema(inputs), outputs=signature.outputs)


def register_version(logged: LoggedModel, version_tags: Mapping[str, str],
             description: str | None = None) -> str:
    """Register a logged model as a new version of ``pulse-satisfaction``; returns the version.

    The version gets ``version_tags`` and ``description``; the registered model gets its
    description (:data:`~pulse_ml.keys.REGISTERED_MODEL_DESCRIPTION`) when missing.
    """
    import contextlib
    import io

    import mlflow

    from pulse_ml.keys import REGISTERED_MODEL_DESCRIPTION

    tags = {key: redact_text(str(value)) for key, value in version_tags.items()}
    with contextlib.redirect_stderr(io.StringIO()):  # MLflow prints "Created version ..."
        # the tags in the version's one write (not one write per tag)
        mv = mlflow.register_model(logged.model_uri, REGISTERED_MODEL, tags=tags or None)
    version = str(mv.version)
    c = client()
    if description:
        c.update_model_version(REGISTERED_MODEL, version, description=description)
    if (c.get_registered_model(REGISTERED_MODEL).description or "") != (
            REGISTERED_MODEL_DESCRIPTION):
        c.update_registered_model(REGISTERED_MODEL, description=REGISTERED_MODEL_DESCRIPTION)
    return version


def describe_version(version: str, description: str) -> None:
    """Replace a version's description (e.g. once the promotion decision is known)."""
    client().update_model_version(REGISTERED_MODEL, str(version), description=description)


def load_model(model_uri: str):
    """Point MLflow at the store and load a registered pulse model (see :func:`load_registered`).

    Only reads the store: a read-only store serves models too.
    """
    from pulse_ml.registry.store import connect

    require_store(model_uri)
    connect(write=False)
    return load_registered(model_uri)


def load_registered(model_uri: str):
    """Load a registered pulse model; returns ``(ensemble, model_version or None)``.

    Raises:
        PulseError: unknown alias/version, or a model that is not a pulse cross-fit ensemble.
    """
    import mlflow
    from mlflow.exceptions import MlflowException

    try:
        # suppress_warnings: no scan of every installed package's metadata against the
        # model's pip requirements on each load (~1 s CPU; pulse loads its own models)
        model = mlflow.pyfunc.load_model(model_uri, suppress_warnings=True)
    except (MlflowException, OSError) as exc:
        missing = _missing_files(model_uri, exc)
        if missing is not None:
            raise PulseError(missing) from None
        msg = str(exc).splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise PulseError(f"cannot load model '{model_uri}': {msg}. Train and register one with "
                         "`pulse-ml train` (or `pulse-ml pipeline`), or pass model_uri=... "
                         "(e.g. models:/pulse-satisfaction/1).") from None
    except Exception as exc:  # noqa: BLE001 - unpickling a damaged artifact raises anything
        msg = str(exc).strip().splitlines()[0][:160] if str(exc).strip() else ""
        raise PulseError(f"model '{model_uri}': its artifact (ensemble.joblib) is corrupt or "
                         f"unreadable ({type(exc).__name__}{': ' + msg if msg else ''}). "
                         "Register it again with `pulse-ml train`, or pass another "
                         "model_uri=models:/pulse-satisfaction/<version>.") from None
    try:
        ensemble = model.unwrap_python_model().ensemble
    except (AttributeError, MlflowException):
        raise PulseError(f"model '{model_uri}' is not a pulse cross-fit ensemble: it carries "
                         "no out-of-fold predictions, and honest PPI needs them. Register it "
                         "with `pulse-ml train`, or run infer with ppi.predictions=in_sample "
                         "(paper mode, intervals not valid).") from None
    version = None
    if model_uri.startswith("models:/"):
        version = version_of(model_uri)
    return ensemble, version


def _missing_files(model_uri: str, exc: BaseException) -> str | None:
    """The message for a registered model whose artifact files are gone, else None."""
    from mlflow.exceptions import MlflowException

    text = str(exc)
    if not (isinstance(exc, FileNotFoundError) or "No such artifact" in text
            or "No such file or directory" in text):
        return None
    source = ""
    if model_uri.startswith("models:/"):
        try:
            version = version_of(model_uri)
        except MlflowException:
            return None  # no such model or alias: the generic message says so
        if version is None:
            return None
        source = f" (version {version.version}, files expected at {version.source})"
    return (f"model '{model_uri}'{source} is registered, but its files are missing: the "
            "artifact folder was deleted or moved. Restore the store's artifacts folder from a "
            "backup, or retrain and register a new version with `pulse-ml train`.")


def dumps(obj) -> str:
    """JSON with stable formatting."""
    return json.dumps(obj, indent=2, sort_keys=False, default=str)


def spark_udf(spark, model_uri: str, extra_inputs: tuple[str, ...] = ()):
    """The registered model as a Spark UDF returning a double (``mlflow.pyfunc.spark_udf``).

    ``env_manager="local"``: the executors use the driver's Python environment, as in local
    mode; on a cluster, install pulse-ml on the executors (see ``docs/scale-out.md``).
    ``extra_inputs`` are columns the model reads when given but its signature does not list
    (a ``user_history`` feature's five columns, computed on Spark): the UDF is made from a
    local copy of the model whose signature adds them as optional doubles (MLflow drops
    inputs outside the signature). The registered model itself is not changed.
    """
    import mlflow

    if extra_inputs:
        model_uri = _with_optional_inputs(model_uri, extra_inputs)
    return mlflow.pyfunc.spark_udf(spark, model_uri, result_type="double", env_manager="local")


def _with_optional_inputs(model_uri: str, names: tuple[str, ...]) -> str:
    """A local copy of ``model_uri`` whose signature also takes ``names`` (optional doubles).

    The copy lives until the process ends (Spark ships it to the executors when the UDF is
    made).
    """
    import atexit
    import shutil

    import mlflow
    from mlflow.models import Model, ModelSignature
    from mlflow.types.schema import ColSpec, Schema

    tmp = tempfile.mkdtemp(prefix="pulse-ml-udf-")
    atexit.register(shutil.rmtree, tmp, True)
    local = mlflow.artifacts.download_artifacts(artifact_uri=model_uri, dst_path=tmp)
    meta = Model.load(local)
    sig = meta.signature
    known = set(sig.inputs.input_names())
    inputs = [*sig.inputs.inputs, *[ColSpec("double", n, required=False)
                                    for n in names if n not in known]]
    meta.signature = ModelSignature(inputs=Schema(inputs), outputs=sig.outputs)
    meta.save(str(Path(local) / "MLmodel"))
    return local


def reference_version(reference: str | None):
    """The model version ``compare`` pairs against: ``champion``, a number, or None.

    Returns:
        ``(label, run_id, data fingerprint, label fingerprint)`` or None.

    Raises:
        PulseError: a version number that does not exist.
    """
    from mlflow.exceptions import MlflowException

    from pulse_ml import keys

    if reference in (None, "none"):
        return None
    try:
        mv = (champion_version() if reference == "champion" else
              client().get_model_version(keys.REGISTERED_MODEL, str(reference)))
    except MlflowException:
        raise PulseError(f"reference={reference}: no such version of "
                         f"{keys.REGISTERED_MODEL}; use reference=champion, a version number "
                         "or reference=none.") from None
    if mv is None:
        return None
    label = (f"champion v{mv.version}" if reference == "champion" else f"v{mv.version}")
    tags = mv.tags or {}
    return (label, mv.run_id, tags.get(keys.DATA_FINGERPRINT),
            tags.get(keys.LABEL_FINGERPRINT) or None)
