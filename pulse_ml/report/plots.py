"""Figures a person would rather look at than read (matplotlib, Agg backend)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd


def forest_plot(effects: pd.DataFrame, path: Path, truth: dict[str, float] | None = None,
                title: str = "Effect of each design change (treatment - control)") -> None:
    """Naive vs augmented effect with its CI per case study (one row each, shared x axis)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    studies = list(dict.fromkeys(effects["case_study"]))
    fig, ax = plt.subplots(figsize=(7.5, 1.1 + 0.8 * len(studies)))
    styles = {"naive": ("#7f7f7f", -0.15, "naive (labeled only)"),
              "augmented": ("#1f77b4", 0.15, "PPI++ (with predictions)")}
    for est, (color, dy, label) in styles.items():
        sub = effects[effects["estimator"] == est].set_index("case_study").reindex(studies)
        ys = [i + dy for i in range(len(studies))]
        ax.errorbar(sub["effect"], ys,
                    xerr=[sub["effect"] - sub["ci_lower"], sub["ci_upper"] - sub["effect"]],
                    fmt="o", color=color, capsize=4, label=label)
    if truth:
        xs = [truth.get(s) for s in studies]
        ax.scatter([x for x in xs if x is not None],
                   [i for i, x in enumerate(xs) if x is not None],
                   marker="x", color="#d62728", zorder=5, label="true effect (simulation)")
    ax.axvline(0, color="black", linewidth=0.8)
    ax.set_yticks(range(len(studies)), studies)
    ax.invert_yaxis()
    ax.set_xlabel("difference in mean rating (stars), 95% CI")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
