"""The git commit of the project checkout the code runs from, read from ``.git`` (no subprocess).

MLflow's standard run tag ``mlflow.source.git.commit`` takes it. A checkout is the folder above
the ``pulse_ml`` package when it holds ``pyproject.toml`` and ``.git`` (a folder, or the file a
``git worktree`` leaves: ``gitdir: <path>``); an installed package has neither, and then there is
no commit (None), silently.
"""

from __future__ import annotations

import re
from pathlib import Path

_SHA = re.compile(r"^[0-9a-f]{40}([0-9a-f]{24})?$")  # SHA-1, or SHA-256 repositories


def _git_dir(root: Path) -> Path | None:
    """The git directory of the checkout at ``root`` (a worktree's own one), or None."""
    dot_git = root / ".git"
    if dot_git.is_dir():
        return dot_git
    if dot_git.is_file():
        line = dot_git.read_text(encoding="utf-8", errors="replace").strip()
        if line.startswith("gitdir:"):
            found = Path(line[len("gitdir:"):].strip())
            found = found if found.is_absolute() else root / found
            return found if found.is_dir() else None
    return None


def _common_dir(git_dir: Path) -> Path:
    """Where branches live: a worktree's ``commondir`` (the main ``.git``), else itself."""
    pointer = git_dir / "commondir"
    if pointer.is_file():
        common = Path(pointer.read_text(encoding="utf-8", errors="replace").strip())
        return common if common.is_absolute() else (git_dir / common).resolve()
    return git_dir


def _resolve(git_dir: Path, ref: str) -> str | None:
    """The commit a ref (``refs/heads/main``) names: loose ref file first, then packed-refs."""
    for folder in dict.fromkeys((git_dir, _common_dir(git_dir))):
        loose = folder / ref
        if loose.is_file():
            return loose.read_text(encoding="utf-8", errors="replace").strip()
    packed = _common_dir(git_dir) / "packed-refs"
    if packed.is_file():
        for line in packed.read_text(encoding="utf-8", errors="replace").splitlines():
            sha, _, name = line.partition(" ")
            if name.strip() == ref:
                return sha.strip()
    return None


def checkout_commit(root: Path | None = None) -> str | None:
    """The commit checked out at ``root`` (default: the folder above ``pulse_ml``), or None.

    None when ``root`` is not a git checkout of the project (an installed package, a copy
    without ``.git``), or its HEAD cannot be read (an unborn branch, a damaged repository).
    """
    root = Path(__file__).resolve().parents[2] if root is None else root
    try:
        if not (root / "pyproject.toml").is_file():
            return None
        git_dir = _git_dir(root)
        if git_dir is None:
            return None
        head = (git_dir / "HEAD").read_text(encoding="utf-8", errors="replace").strip()
        sha = _resolve(git_dir, head[len("ref:"):].strip()) if head.startswith("ref:") else head
    except OSError:
        return None
    return sha if sha and _SHA.match(sha) else None
