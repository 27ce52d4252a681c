"""Demo data: simulator settings from config, the demo folder, and creating it on first use.

``train`` and ``pipeline`` call :func:`ensure_demo_data`; ``simulate`` calls :func:`write_demo`.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

from pulse_ml.errors import PulseError
from pulse_ml.paths import project_root

if TYPE_CHECKING:
    from pulse_ml.config import Node
    from pulse_ml.simulate.generator import SimulateSettings


def default_demo_path() -> Path:
    """Where ``pulse-ml simulate`` writes the demo session table by default."""
    return project_root() / "data" / "demo" / "sessions.parquet"


def settings_from_config(cfg: Node) -> SimulateSettings:
    """Turn the composed config into frozen ``SimulateSettings`` (the only place reading cfg)."""
    from pulse_ml.config import load_yaml, number
    from pulse_ml.paths import catalog_dir
    from pulse_ml.simulate.generator import CaseStudySpec, SimulateSettings

    specs = []
    for name, effect in (cfg.get("effects") or {}).items():
        path = catalog_dir("case_studies") / f"{name}.yaml"
        if not path.is_file():
            known = sorted(p.stem for p in (catalog_dir("case_studies")).glob("*.yaml"))
            raise PulseError(f"pulse-ml simulate: effects.{name}: no case study {path}. "
                             f"Known: {', '.join(known)}; remove the key or add the YAML file.")
        case = load_yaml(path)
        try:
            value = float(effect)
        except (TypeError, ValueError):
            raise PulseError(f"pulse-ml simulate: effects.{name}={effect!r} is not a number "
                             f"(rating units, e.g. 0.05).") from None
        specs.append(CaseStudySpec(str(case.get("name", name)), str(case["control"]),
                                   str(case["treatment"]), value))
    v = "simulate"

    def user(key: str, default: float) -> float:
        if cfg.select(f"users.{key}") is None:
            return default
        return number(cfg, f"users.{key}", v, 0, None)

    return SimulateSettings(
        seed=number(cfg, "seed", v, integer=True),
        n_labeled=number(cfg, "n_labeled", v, 1, None, integer=True),
        unlabeled_ratio=number(cfg, "unlabeled_ratio", v, 0, None),
        signal=number(cfg, "signal", v), mean_rating=number(cfg, "mean_rating", v, 1, 5),
        case_studies=tuple(specs),
        labeled_per_arm=number(cfg, "labeled_per_arm", v, 1, None, integer=True),
        min_labeled_per_arm=number(cfg, "min_labeled_per_arm", v, 0, None, integer=True),
        default_condition=str(cfg.default_condition),
        extra_sessions_mean=user("extra_sessions_mean", 1.4),
        extra_sessions_dispersion=user("extra_sessions_dispersion", 0.25),
        rater_sd=user("rater_sd", 1.0),
        label_message_elasticity=number(cfg, "label_message_elasticity", v),
        feature_shift_scale=number(cfg, "feature_shift_scale", v),
        mc_sessions=number(cfg, "mc_sessions", v, 1, None, integer=True),
        days=number(cfg, "days", v, 1, None, integer=True) if "days" in cfg else 21,
        start_date=_start_date(cfg),
        text_signal=(number(cfg, "text_signal", v, 0, None)
                     if cfg.select("text_signal") is not None else 0.5),
    )


def _start_date(cfg: Node) -> str:
    import pandas as pd

    raw = cfg.get("start_date", "2025-06-02")
    try:
        return pd.Timestamp(str(raw)).strftime("%Y-%m-%d")
    except (TypeError, ValueError):
        raise PulseError(f"pulse-ml simulate: start_date={raw!r} is not a date; use YYYY-MM-DD, "
                         "e.g. start_date=2025-06-02.") from None


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
    from pulse_ml.report.atomic import staged_outputs

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


def ensure_demo_data(path: str | Path, allowed: bool) -> None:
    """Write the default demo data into ``path``'s folder when ``path`` is the absent demo table."""
    path = Path(path)
    if path.exists() or not allowed or path.name != "sessions.parquet":
        return
    from pulse_ml.config import compose

    print(f"no demo data yet: simulating it into {path.parent}\n  (`pulse-ml simulate` prints "
          "the full calibration table)")
    result, figures, ref, _, _ = write_demo(
        settings_from_config(compose("simulate", [f"out={path.parent}"])), path.parent)
    labeled = result.sessions["rating"].notna()
    print(f"  {len(result.sessions):,} sessions, {int(labeled.sum()):,} rated, mean rating "
          f"{result.sessions.loc[labeled, 'rating'].mean():.2f} (paper 4.07), Bayes-optimal "
          f"rho {result.ground_truth.bayes_rho:.2f}")
