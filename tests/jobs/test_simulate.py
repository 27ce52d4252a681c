import hashlib
import json
import shutil
import subprocess
import sys
from dataclasses import replace

import pandas as pd

from pulse_ml.config import compose
from pulse_ml.settings import simulator_settings as settings_from_config
from pulse_ml.simulate.generator import simulate

SMALL = ["n_labeled=400", "labeled_per_arm=40", "min_labeled_per_arm=30", "mc_sessions=40000"]


def _cli() -> list[str]:
    exe = shutil.which("pulse-ml")
    return [exe] if exe else [sys.executable, "-m", "pulse_ml"]


def test_cli_writes_files_and_prints_the_table(tmp_path):
    out = tmp_path / "demo"
    proc = subprocess.run([*_cli(), "simulate", f"out={out}", "seed=5", "events=true",
                           "events_limit=30", "verbose=true", *SMALL],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout
    for figure in ("mean rating (labeled)", "median user messages", "rank-biserial",
                   "true effect plan", "Bayes rho", "prevalence git_push", "4.07", "+0.031",
                   str(out / "sessions.parquet")):
        assert figure in text, figure
    sessions = pd.read_parquet(out / "sessions.parquet")
    assert sessions["rating"].notna().sum() == 400
    truth = json.loads((out / "ground_truth.json").read_text())
    assert truth["seed"] == 5 and truth["settings"]["n_labeled"] == 400
    assert set(truth["effects"]) == {"claude37_vs_claude4", "claude4_vs_gpt5", "plan", "memory"}
    assert abs(truth["effects"]["plan"]["effect"] - 0.031) < 0.005
    assert 0.2 < truth["bayes_rho"] < 0.5
    assert truth["paper"]["mean_rating"] == 4.07
    assert truth["paper"]["table5_augmented"]["claude4_vs_gpt5"] == -0.069
    ratings = pd.read_csv(out / "ratings.csv")
    assert list(ratings.columns) == ["session_id", "segment", "rating"]
    assert ratings["rating"].between(1, 5).all()
    assert len(list((out / "events").glob("*.json"))) == 30

    # another process with the same settings gives the same bytes
    settings = settings_from_config(compose("simulate", ["seed=5", *SMALL]))
    again = tmp_path / "again.parquet"
    simulate(settings).sessions.to_parquet(again, index=False)
    digest = [hashlib.sha256(p.read_bytes()).hexdigest()
              for p in (out / "sessions.parquet", again)]
    assert digest[0] == digest[1]
    assert replace(settings, seed=5) == settings


def test_cli_bad_settings_exit_2_with_one_message(tmp_path):
    proc = subprocess.run([*_cli(), "simulate", f"out={tmp_path}", "n_labeled=100"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert "n_labeled=100" in proc.stderr and "Traceback" not in proc.stderr
    proc = subprocess.run([*_cli(), "simulate", f"out={tmp_path}", "+effects.nope=0.1"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert "effects.nope" in proc.stderr and "Traceback" not in proc.stderr


def test_short_summary_by_default_and_flags_read_as_flags(tmp_path):
    """verbose=false (default) prints a few rows and how to see all; events=no means no events."""
    out = tmp_path / "demo"
    proc = subprocess.run([*_cli(), "simulate", f"out={out}", "events=no", *SMALL],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    table = proc.stdout.split("\n\n")[0].splitlines()
    assert len(table) <= 12 and "true effect plan" in proc.stdout
    assert "prevalence git_push" not in proc.stdout and "verbose=true" in proc.stdout
    assert not (out / "events").exists()
    for override, message in (("events=maybe", "events='maybe' is not true or false"),
                              ("verbose=sometimes", "verbose='sometimes' is not true or false"),
                              ("events_limit=abc", "events_limit='abc' is not a whole number")):
        proc = subprocess.run([*_cli(), "simulate", f"out={tmp_path / 'x'}", override, *SMALL],
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 2 and message in proc.stderr, (override, proc.stderr)
        assert "Traceback" not in proc.stderr


def test_cli_help_shows_the_docstring():
    proc = subprocess.run([*_cli(), "simulate", "--help"], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0
    assert "ground_truth.json" in proc.stdout and "events_limit" in proc.stdout
