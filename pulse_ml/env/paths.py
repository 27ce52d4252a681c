"""Where things live: the config directory, the project root and the default tracking store."""

from __future__ import annotations

import os
from pathlib import Path

_PKG = Path(__file__).resolve().parents[1]


def conf_dir() -> Path:
    """Return the directory holding the Hydra configs.

    A checkout (editable install) uses the top-level ``conf/`` next to the package; a regular
    install uses the copy shipped as package data (``pulse_ml/_conf``).
    """
    checkout = _PKG.parent / "conf"
    if (checkout / "features").is_dir():
        return checkout
    return _PKG / "_conf"


def project_root() -> Path:
    """Return the root under which ``data/``, ``mlruns/`` and ``results/`` live.

    ``PULSE_HOME`` wins; otherwise the current working directory, as MLflow's own ``./mlruns``
    (so the README's commands, run from a checkout, use the checkout, and the same commands run
    elsewhere never read or write the checkout's files).
    """
    env = os.environ.get("PULSE_HOME")
    if env:
        return Path(env).expanduser().resolve()
    return Path.cwd()


def resolve(path: str | os.PathLike[str]) -> Path:
    """Resolve a user path: absolute as is, relative to the current working directory."""
    return Path(path).expanduser().resolve()


def catalog_dir(kind: str) -> Path:
    """Return a shipped catalogue folder (``case_studies`` or ``task_benchmarks``).

    Catalogues are plain YAML read by pulse_ml itself, not Hydra config groups, so they live
    under ``conf/catalog/`` where no override can mistake them for a group.
    """
    return conf_dir() / "catalog" / kind
