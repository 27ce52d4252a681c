"""log_model checks the pip requirements without MLflow's scan of every installed package.

Issue 25: the scan (``importlib_metadata.packages_distributions``) cost ~0.3 s CPU per logged
model, twice. Real MLflow sqlite store, real ``train`` (``model=mean``: one trial, cheap).
"""

from __future__ import annotations

import logging
from importlib import metadata

import mlflow.utils.requirements_utils as requirements_utils

from pulse_ml.config import compose
from pulse_ml.jobs import train
from pulse_ml.registry.models import PIP_REQUIREMENTS
from pulse_ml.registry.pip_check import mismatches, warn_mismatches


def test_mismatches_name_unsatisfied_and_missing_packages_only():
    numpy = metadata.version("numpy")
    assert mismatches([f"numpy=={numpy}", "numpy>=1", "-c constraints.txt",
                       "pandas; python_version < '3'"]) == []
    (wrong,) = mismatches([f"numpy!={numpy}"])
    assert wrong == f"numpy (current: {numpy}, required: numpy!={numpy})"
    (missing,) = mismatches(["surely-not-installed-pkg-xyz>=1"])
    assert "current: uninstalled" in missing
    assert mismatches(PIP_REQUIREMENTS) == []  # this environment is the one pulse declares


def test_the_mismatch_warning_names_the_package(caplog):
    with caplog.at_level(logging.WARNING, logger="mlflow.utils.environment"):
        warn_mismatches(["numpy<1"])
    assert "numpy (current:" in caplog.text and "required: numpy<1" in caplog.text


def test_registering_a_model_never_maps_every_installed_package(small_demo, pulse_home,
                                                                monkeypatch):
    calls = []
    real = requirements_utils._init_modules_to_packages_map

    def counted():
        calls.append(1)
        return real()

    monkeypatch.setattr(requirements_utils, "_MODULES_TO_PACKAGES", None)
    monkeypatch.setattr(requirements_utils, "_init_modules_to_packages_map", counted)
    requirements_utils.warn_dependency_requirement_mismatches(["numpy>=1"])
    assert calls  # MLflow's own check does map them (this probe can fail)
    calls.clear()
    res = train.run(compose("train", [f"data.path={small_demo}", "tuning.n_trials=1",
                                      "progress=false", "model=mean", "register=always"]))
    assert res.version == "1" and calls == []
