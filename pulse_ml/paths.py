"""Where things live: the config directory, the project root and the default tracking store."""

from __future__ import annotations

import os
from pathlib import Path

_PKG = Path(__file__).resolve().parent


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
    """Return the root under which ``mlruns/`` and the demo data live.

    ``PULSE_HOME`` wins; otherwise the checkout root when running from one, else the current
    working directory.
    """
    env = os.environ.get("PULSE_HOME")
    if env:
        return Path(env).resolve()
    if (_PKG.parent / "pyproject.toml").is_file():
        return _PKG.parent
    return Path.cwd()


def resolve(path: str | os.PathLike[str]) -> Path:
    """Resolve a user path: absolute as is, relative to the current working directory."""
    return Path(path).expanduser().resolve()
