"""The Optuna study's files of a family run: optimization history and parameter importances."""

from __future__ import annotations

import json
from pathlib import Path

from pulse_ml import keys
from pulse_ml.names import write_csv
from pulse_ml.training.family import FamilyFit


def study_files(fit: FamilyFit, objective: str, folder: Path, plots: bool = True) -> list[Path]:
    """Optimization history (CSV) and parameter importances (JSON) of the study.

    Args:
        fit: The family's fit (its ``history`` and ``importances``).
        objective: The study's objective key (axis label).
        folder: Where the files go.
        plots: Also draw both as PNG (matplotlib: ~0.5 s CPU, so ``tuning.plots`` is off by
            default; the run's per-trial step series chart the history in the MLflow UI).
    """
    folder.mkdir(parents=True, exist_ok=True)
    files = []
    if fit.history is not None and len(fit.history):
        write_csv(fit.history, folder / "optimization_history.csv")
        files.append(folder / "optimization_history.csv")
        if plots:
            from pulse_ml.report.plots import study_history_plot

            study_history_plot(fit.history, folder / "optimization_history.png", objective,
                               f"{fit.family}: optimization history ({fit.study_name})")
            files.append(folder / "optimization_history.png")
    if fit.importances:
        (folder / "param_importances.json").write_text(json.dumps(fit.importances, indent=2))
        files.append(folder / "param_importances.json")
        if plots:
            from pulse_ml.report.plots import importance_plot

            importance_plot(fit.importances, folder / "param_importances.png",
                            f"{fit.family}: hyper-parameter importances (fANOVA)")
            files.append(folder / "param_importances.png")
    return files


def history_steps(fit: FamilyFit, objective: str) -> dict[str, dict[int, float]]:
    """The study's history as step series of the family run (step = trial number).

    ``trials_<objective>``: each completed trial's value; ``best_so_far_<objective>``: the
    study's best up to each trial. The MLflow UI charts them (the optimization history
    without drawing a plot; ``tuning.plots=true`` also draws it as a PNG).
    """
    history = fit.history
    if history is None or not len(history):
        return {}
    done = history[history["state"] == "COMPLETE"]
    best = history.dropna(subset=["best_so_far"])
    series = {keys.HISTORY_PREFIX + objective: (done["number"], done["value"]),
              keys.BEST_SO_FAR_PREFIX + objective: (best["number"], best["best_so_far"])}
    return {key: dict(zip(numbers.astype(int).tolist(), values.astype(float).tolist(),
                          strict=True)) for key, (numbers, values) in series.items()}
