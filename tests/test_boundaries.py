"""The two boundaries of ARCHITECTURE.md: mlflow only under registry/, Hydra only in config.py."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "pulse_ml"


def _importers(pattern: str) -> set[str]:
    rx = re.compile(pattern, re.M)
    return {str(p.relative_to(PKG)) for p in PKG.rglob("*.py") if rx.search(p.read_text())}


@pytest.mark.parametrize("pattern,allowed", [
    (r"^\s*(import mlflow|from mlflow[. ])", lambda f: f.startswith("registry/")),
    (r"^\s*(import (hydra|omegaconf)|from (hydra|omegaconf)[. ])", lambda f: f == "config.py"),
])
def test_only_the_boundary_modules_import_the_boundary_libraries(pattern, allowed):
    offenders = sorted(f for f in _importers(pattern) if not allowed(f))
    assert offenders == []


def test_jobs_import_no_other_job_but_pipeline():
    rx = re.compile(r"^\s*from pulse_ml\.jobs(?:\.(\w+))? import (\w+)", re.M)
    for path in (PKG / "jobs").glob("*.py"):
        if path.stem in ("pipeline", "__init__"):
            continue
        assert not rx.search(path.read_text()), path.name
