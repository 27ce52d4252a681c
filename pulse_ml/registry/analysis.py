"""Open the registered model for an analysis: the ensemble, its version and how runs name it.

Written once for the jobs that analyse a session table with a registered model (``infer``,
``monitor``, ``audit``, ``benchmarks``, ``agreement``, ``score``): they check the model exists
(:func:`~pulse_ml.registry.lookup.require_model`, before any data is read), read their data,
then :func:`open_model`; their runs take the session table as :func:`dataset_input` and print
:func:`run_line`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from pulse_ml import keys


@dataclass(frozen=True)
class AnalysisModel:
    """A registered model opened for an analysis.

    Attributes:
        uri: The MLflow model URI it was loaded from (``models:/pulse-satisfaction@champion``).
        ensemble: The :class:`~pulse_ml.models.crossfit.CrossFitEnsemble`.
        version: The MLflow ``ModelVersion`` behind ``uri`` (None for ``runs:/``, paths, or
            ``models:/name/latest``).
    """

    uri: str
    ensemble: Any
    version: Any = None

    @property
    def version_number(self) -> str | None:
        """The registered version number (``"3"``), or None."""
        return None if self.version is None else str(self.version.version)

    @property
    def family(self) -> str:
        """The model family of the ensemble (``lightgbm``)."""
        return self.ensemble.family

    @property
    def feature_set(self) -> str:
        """The name of the ensemble's feature set."""
        return self.ensemble.features.name

    @property
    def version_tags(self) -> dict[str, str]:
        """The version's tags (its training lineage); empty without a version."""
        return {} if self.version is None else dict(self.version.tags or {})

    @property
    def git_commit(self) -> str | None:
        """The commit the version was trained from, or None.

        Its training run's ``mlflow.source.git.commit``; versions registered before kept it as
        the version tag ``git_commit``, read first.
        """
        if self.version is None:
            return None
        old = self.version_tags.get(keys.GIT_COMMIT)
        if old and old != "unknown":
            return old
        if not self.version.run_id:
            return None
        from mlflow.exceptions import MlflowException

        from pulse_ml.registry.models import client

        try:
            return client().get_run(self.version.run_id).data.tags.get(keys.SOURCE_COMMIT)
        except MlflowException:
            return None

    def meta(self) -> dict[str, str | None]:
        """``model``, ``model_version``, ``model_family``, ``feature_set`` of a result file."""
        return {"model": self.uri, keys.MODEL_VERSION: self.version_number,
                keys.MODEL_FAMILY: self.family, keys.FEATURE_SET: self.feature_set}

    def describe(self) -> str:
        """``model <uri> (version N, <family>, features '<set>')`` for the terminal."""
        return (f"model {self.uri} (version {self.version_number}, {self.family}, features "
                f"'{self.feature_set}')")


def open_model(model_uri: str, write_store: bool = False, fast: bool = False) -> AnalysisModel:
    """Load the registered model (read-only store) for an analysis.

    Args:
        model_uri: The MLflow model URI.
        write_store: Connect to the store for writing first (a job that logs a run), so a
            read-only store fails before the model is loaded and the work is done.
        fast: Without importing MLflow when it can (a local SQLite store at a known schema,
            :mod:`~pulse_ml.registry.sqlite_registry`); ``version`` is then a
            :class:`~pulse_ml.registry.sqlite_registry.StoredVersion` (number, run, tags), not
            MLflow's ``ModelVersion``. For jobs that log no run (``score``).

    Raises:
        PulseError: no store, an unknown model, missing or corrupt artifacts, a model that is
            not a pulse cross-fit ensemble, or (``write_store``) a store that cannot be written.
    """
    from pulse_ml.registry import models, store

    if write_store:
        store.connect(write=True)
    elif fast:
        found = _open_sqlite(model_uri)
        if found is not None:
            return found
    ensemble, version = models.load_model(model_uri)
    return AnalysisModel(uri=model_uri, ensemble=ensemble, version=version)


def _open_sqlite(model_uri: str) -> AnalysisModel | None:
    """The model read straight from a local SQLite store (no MLflow import), or None."""
    from pulse_ml.registry import lookup, sqlite_registry, store

    if sqlite_registry.parse_uri(model_uri) is None:
        return None
    lookup.require_store(model_uri)
    check = store.check_sqlite()  # the guard's checks, as store.connect runs them
    if check is None or check.fresh or check.db is None:
        return None
    found = sqlite_registry.open_version(check.db, model_uri)
    if found is None:
        return None
    ensemble, version = found
    return AnalysisModel(uri=model_uri, ensemble=ensemble, version=version)


def dataset_input(frame: pd.DataFrame, source: str,
                  fingerprint: str | None = None) -> dict[str, object]:
    """The session table of a run as its dataset input (``runs.log_inference_run``).

    Args:
        frame: The table as read.
        source: Its path (the dataset's source; its stem names the dataset).
        fingerprint: Its data fingerprint when already computed (else computed here).
    """
    from pulse_ml.sessions.fingerprint import data_fingerprint

    return {"frame": frame, "source": source, "name": Path(source).stem,
            "fingerprint": fingerprint or data_fingerprint(frame, list(frame.columns))}


def run_line(run_id: str) -> str:
    """``MLflow run <id> in experiment pulse-infer: <UI address>`` (+ the UI hint, once)."""
    from pulse_ml.registry import links, runs
    from pulse_ml.report.tables import address_lines, unbroken

    hint = links.ui_hint_once()  # its own line, never broken by the wrapper
    return (address_lines(f"MLflow run {run_id} in experiment {keys.INFER_EXPERIMENT}:",
                          runs.run_link(run_id)) + (f"\n{unbroken(hint)}" if hint else ""))

