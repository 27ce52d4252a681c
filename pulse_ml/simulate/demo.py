"""Demo data: the demo folder, writing it, and creating it on first use.

``train`` and ``pipeline`` call :func:`ensure_demo_data`; ``simulate`` calls :func:`write_demo`.
No config is read here: the simulator's settings come typed from the caller
(``pulse_ml.settings.simulator_settings`` reads them at the edge).
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

from pulse_ml.errors import PulseError

if TYPE_CHECKING:
    from collections.abc import Callable

    from pulse_ml.simulate.spec import SimulateSettings


def write_demo(settings: SimulateSettings, out: Path, events: bool = False,
               events_limit: int | None = None):
    """Simulate and write ``sessions.parquet``, ``ratings.csv``, ``ground_truth.json`` (+ events).

    Returns:
        ``(result, calibration_figures, paper_reference, paths, n_event_files)``.
    """
    from pulse_ml.simulate.events import write_events
    from pulse_ml.simulate.generator import reference, simulate
    from pulse_ml.simulate.summary import calibration_figures

    result = simulate(settings)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise PulseError(f"pulse-ml simulate: out={out}: cannot create the directory ({exc}). "
                         f"Pass a writable path, e.g. out=/tmp/demo.") from None
    figures = calibration_figures(result.sessions)
    ref = reference()
    from pulse_ml.env.atomic import staged_outputs

    paths = {"sessions": out / "sessions.parquet", "ground_truth": out / "ground_truth.json",
             "ratings": out / "ratings.csv"}
    truth = asdict(result.ground_truth)
    truth.update(seed=settings.seed, settings=asdict(settings), data=figures, paper=ref)
    with staged_outputs(out) as stage:  # the three files appear together, complete, or not
        result.sessions.to_parquet(stage / paths["sessions"].name, index=False)
        result.segment_ratings.to_csv(stage / paths["ratings"].name, index=False)
        (stage / paths["ground_truth"].name).write_text(json.dumps(truth, indent=2) + "\n",
                                                        encoding="utf-8")
    n_events = 0
    if events:
        n_events = write_events(result.sessions, out / "events", settings.seed, events_limit)
        paths["events"] = out / "events"
    return result, figures, ref, paths, n_events


def ensure_demo_data(path: str | Path, allowed: bool,
                     settings: Callable[[Path], SimulateSettings]) -> None:
    """Write the default demo data into ``path``'s folder when ``path`` is the absent demo table.

    Args:
        path: The session table a verb was asked to read.
        allowed: ``data.simulate_if_missing``.
        settings: Typed simulator settings for an output folder, called only when the data is
            written (the jobs pass ``pulse_ml.settings.default_simulator_settings``: those of
            ``conf/simulate.yaml``).
    """
    path = Path(path)
    if path.exists() or not allowed or path.name != "sessions.parquet":
        return
    print(f"no demo data yet: simulating it into {path.parent}\n  (`pulse-ml simulate` prints "
          "the calibration table)")
    result, figures, ref, _, _ = write_demo(settings(path.parent), path.parent)
    labeled = result.sessions["rating"].notna()
    print(f"  {len(result.sessions):,} sessions, {int(labeled.sum()):,} rated, mean rating "
          f"{result.sessions.loc[labeled, 'rating'].mean():.2f} (paper 4.07), Bayes-optimal "
          f"rho {result.ground_truth.bayes_rho:.2f}")
