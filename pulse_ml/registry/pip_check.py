"""The pip-requirement check of ``log_model`` without MLflow's scan of every installed package.

``mlflow.pyfunc.log_model`` checks the model's pip requirements against this environment (and
logs a warning on a mismatch) even when they are given explicitly, twice: when it saves the
model and when it loads it back to check the input example. To find each requirement's module
it first maps every module of every installed distribution
(``importlib_metadata.packages_distributions``, ~0.3 s CPU, the largest part of logging a
model; issue 25). Pulse writes its requirements itself (:data:`~pulse_ml.registry.models.
PIP_REQUIREMENTS`), so :func:`cheap_requirement_check` swaps in a check that asks only for
the named distributions' versions, with the same warning.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import metadata

# where log_model calls the check by this name: its save, and the load of the input-example check
_MODULES = ("mlflow.utils.environment", "mlflow.pyfunc")
_NAME = "warn_dependency_requirement_mismatches"


def mismatches(requirements: list[str]) -> list[str]:
    """The requirements this environment does not satisfy, as ``name (current: v, required: r)``.

    Requirements that are not ``name[specifier]`` (paths, URLs, ``-c`` lines) and ones whose
    marker excludes this environment are skipped, as MLflow does.
    """
    from packaging.requirements import InvalidRequirement, Requirement

    found = []
    for text in requirements:
        try:
            req = Requirement(text)
        except InvalidRequirement:
            continue
        if req.marker and not req.marker.evaluate():
            continue
        try:
            installed: str | None = metadata.version(req.name)
        except metadata.PackageNotFoundError:
            installed = None
        if installed is None or (req.specifier and not req.specifier.contains(
                installed, prereleases=True)):
            found.append(f"{req.name} (current: {installed or 'uninstalled'}, "
                         f"required: {text})")
    return found


def warn_mismatches(requirements: list[str]) -> None:
    """Log MLflow's mismatch warning (logger ``mlflow``) for :func:`mismatches`, if any."""
    found = mismatches(requirements)
    if found:
        logging.getLogger(_MODULES[0]).warning(
            "Detected one or more mismatches between the model's dependencies and the current "
            "Python environment:\n - %s", "\n - ".join(found))


@contextmanager
def cheap_requirement_check() -> Iterator[None]:
    """Within the block, ``log_model`` checks requirements with :func:`warn_mismatches`.

    MLflow is pinned below the next minor version (``PIP_REQUIREMENTS``); should a module
    ever lack the hook, that call runs MLflow's own check unchanged (slower, same result).
    """
    import importlib

    modules = [m for m in map(importlib.import_module, _MODULES) if hasattr(m, _NAME)]
    originals = [getattr(m, _NAME) for m in modules]
    for module in modules:
        setattr(module, _NAME, warn_mismatches)
    try:
        yield
    finally:
        for module, original in zip(modules, originals, strict=True):
            setattr(module, _NAME, original)
