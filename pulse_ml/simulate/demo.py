"""Create the demo data on first use (shared by train and pipeline)."""

from __future__ import annotations

from pathlib import Path

from pulse_ml.paths import project_root


def default_demo_path() -> Path:
    """Where ``pulse-ml simulate`` writes the demo session table by default."""
    return project_root() / "data" / "demo" / "sessions.parquet"


def ensure_demo_data(path: str | Path, allowed: bool) -> None:
    """Run ``pulse-ml simulate`` into ``path``'s folder when ``path`` is the absent demo table."""
    path = Path(path)
    if path.exists() or not allowed or path.name != "sessions.parquet":
        return
    from pulse_ml.config import compose
    from pulse_ml.jobs import simulate

    print(f"{path} does not exist: creating the demo data (pulse-ml simulate out={path.parent})")
    simulate.run(compose("simulate", [f"out={path.parent}"]))
