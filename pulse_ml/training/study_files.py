"""The Optuna study's files of a family run: optimization history and parameter importances."""

from __future__ import annotations

import json
from pathlib import Path

from pulse_ml.names import write_csv
from pulse_ml.training.family import FamilyFit


def study_files(fit: FamilyFit, objective: str, folder: Path) -> list[Path]:
    """Optimization history (CSV + PNG) and parameter importances (JSON + PNG) of the study."""
    from pulse_ml.report.plots import importance_plot, study_history_plot

    folder.mkdir(parents=True, exist_ok=True)
    files = []
    if fit.history is not None and len(fit.history):
        write_csv(fit.history, folder / "optimization_history.csv")
        study_history_plot(fit.history, folder / "optimization_history.png", objective,
                           f"{fit.family}: optimization history ({fit.study_name})")
        files += [folder / "optimization_history.csv", folder / "optimization_history.png"]
    if fit.importances:
        (folder / "param_importances.json").write_text(json.dumps(fit.importances, indent=2))
        importance_plot(fit.importances, folder / "param_importances.png",
                        f"{fit.family}: hyper-parameter importances (fANOVA)")
        files += [folder / "param_importances.json", folder / "param_importances.png"]
    return files
