"""Write a demo session table calibrated to the PULSE paper, with its ground truth.

Sessions (about 21 x n_labeled) belong to users, carry the 15 features with the paper's
prevalences, and 1-3 star ratings on ~1/21 of them (rated sessions have more user messages). Four
case studies (conf/catalog/case_studies/) get control/treatment arms with the configured true
effects, partly
through the features (shifts of the paper's Tables 6-9) and partly direct.

Writes to `out`:
  sessions.parquet    the session table (same seed -> same bytes)
  ground_truth.json   true effect per case study, Bayes-optimal rho, settings, paper figures
  ratings.csv         segment ratings of the labeled sessions (session_id, segment, rating)
  events/<id>.json    OpenHands V0-style event streams (only with events=true; events_limit=N)

Then prints a short calibration summary: this data vs the paper (``verbose=true`` prints all
rows of the table).

Examples:
  pulse-ml simulate
  pulse-ml simulate out=/tmp/demo seed=3 signal=2 events=true events_limit=500
  pulse-ml simulate effects.plan=0.1 n_labeled=3000
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pulse_ml.config import flag, number

if TYPE_CHECKING:
    from pulse_ml.config import Node
    from pulse_ml.simulate.generator import GroundTruth
    from pulse_ml.simulate.spec import SimulateSettings

# Rows of the short calibration summary (the first words of their labels).
SUMMARY_ROWS = ("mean rating", "labeled sessions", "unlabeled / labeled", "true effect",
                "Bayes rho")


@dataclass(frozen=True)
class SimulateJob:
    """Typed settings of ``pulse-ml simulate``."""

    simulator: SimulateSettings
    out: Path
    events: bool
    events_limit: int | None
    verbose: bool


def settings_from_config(cfg: Node) -> SimulateJob:
    """Read the composed config once (the simulator's keys via ``settings.simulator_settings``)."""
    from pulse_ml.env.paths import resolve
    from pulse_ml.settings import simulator_settings

    return SimulateJob(
        simulator=simulator_settings(cfg), out=resolve(str(cfg.out)),
        events=flag(cfg, "events", "simulate", False),
        events_limit=number(cfg, "events_limit", "simulate", 0, None, integer=True,
                            optional=True),
        verbose=flag(cfg, "verbose", "simulate", False))


def _rows(figures: dict, truth: GroundTruth, reference: dict) -> list[tuple[str, str, str]]:
    ranges = reference["prevalence_ranges"]
    rows = [
        ("mean rating (labeled)", f"{figures['mean_rating']:.3f}", "4.07"),
        ("labeled sessions", f"{figures['n_labeled']:.0f}", "1747"),
        ("unlabeled / labeled", f"{figures['unlabeled_per_labeled']:.1f}", "~20"),
        ("median user messages", f"{figures['median_user_messages']:.0f}", "10"),
        ("rank-biserial messages, labeled vs not",
         f"{figures['rank_biserial_messages']:.3f}", "0.32"),
        ("users / raters", f"{figures['n_users']:.0f} / {figures['n_raters']:.0f}",
         "15k / ~1k"),
        ("share of users with >1 session", f"{figures['share_users_multiple_sessions']:.3f}",
         "-"),
        ("share of raters with >1 rated session",
         f"{figures['share_raters_multiple_sessions']:.3f}", "0.1275"),
    ]
    for key, value in figures.items():
        if key.startswith("labeled["):
            rows.append((f"labeled {key[8:-1]}", f"{value:.0f}", ">= 150"))
    for name, eff in truth.effects.items():
        paper = reference["table5_augmented"].get(name)
        rows.append((f"true effect {name}", f"{eff['effect']:+.3f} (mediated "
                     f"{eff['mediated']:+.3f})", "-" if paper is None else f"{paper:+.3f}"))
    rows.append(("Bayes rho E[rating|features,arm]",
                 f"{truth.bayes_rho:.3f} +- {truth.bayes_rho_se:.3f}", "best model r 0.29"))
    for col in ("git_push", "git_commit", "git_pull", "git_reset", "git_rebase"):
        lo, hi = ranges[col]
        rows.append((f"prevalence {col}", f"{figures[col]:.3f}", f"{lo:.3f}-{hi:.3f}"))
    flags = [figures[k] for k in ("misunderstood_intention", "did_not_follow_instruction",
                                  "insufficient_analysis", "insufficient_testing",
                                  "insufficient_debugging", "incomplete_implementation",
                                  "scope_creep")]
    lo, hi = ranges["failure_flags"]
    rows.append(("prevalence failure flags (min-max)", f"{min(flags):.3f}-{max(flags):.3f}",
                 f"{lo:.3f}-{hi:.3f}"))
    return rows


def format_table(rows: list[tuple[str, str, str]]) -> str:
    """Render ``figure | this data | paper`` rows as an aligned text table."""
    header = ("figure", "this data", "paper")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(3)]
    line = "  ".join("-" * w for w in widths)
    out = ["  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)), line]
    out += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    return "\n".join(out)


def summary_rows(rows: list[tuple[str, str, str]]) -> list[tuple[str, str, str]]:
    """The few rows of the short calibration summary (``verbose=false``)."""
    return [r for r in rows if r[0].startswith(SUMMARY_ROWS)]


def run(cfg: Node) -> None:
    """Generate the demo data, write it to ``cfg.out`` and print the calibration summary."""
    from pulse_ml.simulate.demo import write_demo

    job = settings_from_config(cfg)
    start = time.perf_counter()
    result, figures, ref, paths, n_events = write_demo(job.simulator, job.out, job.events,
                                                       job.events_limit)
    elapsed = time.perf_counter() - start
    rows = _rows(figures, result.ground_truth, ref)
    shown = rows if job.verbose else summary_rows(rows)
    print(format_table(shown))
    if len(shown) < len(rows):
        print(f"({len(rows) - len(shown)} more rows: prevalences, users, labels per arm; "
              "`pulse-ml simulate verbose=true` prints all)")
    print(f"\n{len(result.sessions)} sessions generated in {elapsed:.1f} s.")
    for key, path in paths.items():
        suffix = f" ({n_events} files)" if key == "events" else ""
        print(f"{key:13s} {path}{suffix}")
