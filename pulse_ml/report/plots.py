"""Figures a person would rather look at than read (matplotlib, Agg backend)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd


def pyplot():
    r"""Matplotlib's pyplot on the Agg backend (files only, no display needed).

    Mathtext is off: labels are case-study, condition and feature names (data), so a name
    such as ``$x^2$`` or ``$\foo$`` is drawn as typed instead of being parsed as TeX (which
    raised ``ValueError`` for an unknown command).
    """
    import matplotlib

    matplotlib.use("Agg")
    matplotlib.rcParams["text.parse_math"] = False
    import matplotlib.pyplot as plt

    return plt


def figure(figsize: tuple[float, float]):
    """A bare matplotlib ``Figure`` (no pyplot import: written with ``savefig`` only).

    Cheaper than :func:`pyplot` for files written on a job's path (``train``'s study plots);
    mathtext off as in :func:`pyplot`.
    """
    import matplotlib

    matplotlib.rcParams["text.parse_math"] = False
    from matplotlib.figure import Figure

    return Figure(figsize=figsize)


def forest_plot(effects: pd.DataFrame, path: Path, truth: dict[str, float] | None = None,
                title: str = "Effect of each design change (treatment - control)",
                subtitle: str | None = None, invalid: bool = False, alpha: float = 0.05) -> None:
    """Write :func:`forest_figure` to ``path`` (PNG; a bare Figure, no pyplot import)."""
    forest_figure(effects, truth, title, subtitle, invalid, alpha).savefig(path, dpi=120)


def forest_figure(effects: pd.DataFrame, truth: dict[str, float] | None = None,
                  title: str = "Effect of each design change (treatment - control)",
                  subtitle: str | None = None, invalid: bool = False, alpha: float = 0.05):
    """Naive vs PPI++ effect with its CI per case study, numbers printed beside.

    Each row is labeled "treatment − control" with the arm names; a filled marker means the
    interval excludes 0. ``invalid`` (in-sample predictions) watermarks the figure NOT VALID.
    The axis names the interval level of ``alpha`` (0.1 -> "90% CI").

    Returns:
        A bare matplotlib Figure (:func:`figure`: no pyplot, nothing to close).
    """
    from pulse_ml.report.tables import level_pct

    several = effects.groupby(["case_study", "estimator"])["case_study"].transform("size") > 1
    if several.any():  # several treatments: one row per case study/treatment
        effects = effects.assign(case_study=effects["case_study"].where(
            ~several, effects["case_study"] + "/" + effects["treatment"].astype(str)))
    studies = list(dict.fromkeys(effects["case_study"]))
    height = 2.2 + 0.9 * len(studies)
    fig = figure((10.5, height))
    ax = fig.subplots()
    styles = {"naive": ("#7f7f7f", -0.17, "naive (labeled sessions only)"),
              "augmented": ("#1f77b4", 0.17, "PPI++ (labels + predictions)")}
    for est, (color, dy, label) in styles.items():
        sub = effects[effects["estimator"] == est].set_index("case_study").reindex(studies)
        ys = np.arange(len(studies)) + dy
        sig = (sub["ci_lower"] > 0) | (sub["ci_upper"] < 0)
        ax.errorbar(sub["effect"], ys,
                    xerr=[sub["effect"] - sub["ci_lower"], sub["ci_upper"] - sub["effect"]],
                    fmt="none", ecolor=color, capsize=4, label=label)
        ax.scatter(sub["effect"], ys, s=40, zorder=4, edgecolors=color,
                   facecolors=[color if s else "white" for s in sig])
        for y, row in zip(ys, sub.itertuples(), strict=True):
            text = f"{row.effect:+.3f} [{row.ci_lower:+.3f}, {row.ci_upper:+.3f}]"
            if est == "augmented" and pd.notna(row.ci_reduction_pct):
                text += f"  CI {row.ci_reduction_pct:.1f}% narrower" if \
                    row.ci_reduction_pct >= 0 else f"  CI {-row.ci_reduction_pct:.1f}% wider"
            ax.annotate(text, xy=(1.01, y), xycoords=("axes fraction", "data"), va="center",
                        fontsize=8, color=color, annotation_clip=False)
    if truth:
        xs = [truth.get(s) for s in studies]
        ax.scatter([x for x in xs if x is not None],
                   [i for i, x in enumerate(xs) if x is not None],
                   marker="x", color="#d62728", zorder=5, label="true effect (simulation)")
    arms = effects.drop_duplicates("case_study").set_index("case_study").reindex(studies)
    labels = [f"{s}\n{r.treatment} − {r.control}" if "treatment" in arms else s
              for s, r in zip(studies, arms.itertuples(), strict=True)]
    ax.axvline(0, color="black", linewidth=0.8)
    ax.set_yticks(range(len(studies)), labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel(f"difference in mean rating (stars), treatment − control, "
                  f"{level_pct(alpha)}% CI; filled = excludes 0", fontsize=8)
    ax.set_title(title + (f"\n{subtitle}" if subtitle else ""), fontsize=9)
    fig.legend(fontsize=7, loc="lower center", ncol=3, frameon=False,
               bbox_to_anchor=(0.5, 0.0))
    if invalid:
        fig.text(0.45, 0.5, "NOT VALID\n(in-sample predictions)", fontsize=34, color="#d62728",
                 alpha=0.25, ha="center", va="center", rotation=20, weight="bold")
    fig.subplots_adjust(left=0.24, right=0.66, top=1 - 0.75 / height, bottom=1.05 / height)
    return fig


def comparison_plot(frame: pd.DataFrame, path: Path, champion: str | None = None,
                    source: str = "experiment pulse-train", subtitle: str | None = None):
    """Bar chart of out-of-fold Pearson r (± std over folds) per family / judge.

    ``subtitle`` (a second title line) names the data and the reference model.

    The champion's bar (``frame["version"] == champion``) is outlined and labeled; the legend
    lists only the kinds present.
    """
    from matplotlib.patches import Patch

    plt = pyplot()
    labels = [f"{n}\n({f})" if k == "model" else f"{n}\n(judge)"
              for n, f, k in zip(frame["name"], frame["features"], frame["kind"], strict=True)]
    colors = ["#1f77b4" if k == "model" else "#ff7f0e" for k in frame["kind"]]
    fig, ax = plt.subplots(figsize=(max(6.5, 1.3 * len(frame)), 4.0))
    bars = ax.bar(range(len(frame)), frame["r"].astype(float),
                  yerr=np.nan_to_num(frame["r_std"].astype(float)), color=colors, capsize=4)
    handles = [Patch(color=c, label=t) for c, t, k in
               (("#1f77b4", "trained model", "model"), ("#ff7f0e", "LLM judge", "llm judge"))
               if (frame["kind"] == k).any()]
    if champion is not None and "version" in frame:
        for bar, version in zip(bars, frame["version"].astype(str), strict=True):
            if version == str(champion):
                bar.set_edgecolor("#d62728")
                bar.set_linewidth(2.5)
                ax.annotate(f"champion v{champion}", (bar.get_x() + bar.get_width() / 2,
                                                      bar.get_height()),
                            xytext=(0, 14), textcoords="offset points", ha="center",
                            fontsize=8, color="#d62728")
        handles.append(Patch(facecolor="white", edgecolor="#d62728", linewidth=2.5,
                             label="champion"))
    ax.set_xticks(range(len(frame)), labels, fontsize=8)
    ax.set_ylabel("out-of-fold Pearson r")
    ax.axhline(0, color="black", linewidth=0.8)
    ax.set_title(f"Satisfaction predictors in {source}: out-of-fold r ± std over CV folds"
                 + (f"\n{subtitle}" if subtitle else ""), fontsize=10 if not subtitle else 9)
    ax.legend(handles=handles, fontsize=8, loc="best")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return fig  # closed, but its artists stay readable (tests)


def agreement_chart(summary: pd.DataFrame, path: Path, ties: str, alpha: float = 0.05,
                    subtitle: str | None = None):
    """Per-category agreement bars (one colour per predictor) with Wilson error bars.

    The title names the Wilson level of ``alpha``; ``subtitle`` names the pairs, sessions and
    predictors (models) the chart comes from.
    """
    from pulse_ml.report.tables import level_pct

    plt = pyplot()

    cats = list(dict.fromkeys(summary["category"]))
    preds = list(dict.fromkeys(summary["predictor"]))
    width = 0.8 / len(preds)
    fig, ax = plt.subplots(figsize=(max(5.0, 1.1 * len(cats) * max(1, len(preds)) ** 0.5), 4))
    for i, name in enumerate(preds):
        sub = summary[summary["predictor"] == name].set_index("category").reindex(cats)
        xs = np.arange(len(cats)) + (i - (len(preds) - 1) / 2) * width
        err = np.vstack([sub["agreement_pct"] - sub["ci_lower_pct"],
                         sub["ci_upper_pct"] - sub["agreement_pct"]])
        ax.bar(xs, sub["agreement_pct"], width, yerr=np.nan_to_num(err), capsize=3, label=name)
    ax.axhline(50, color="black", lw=0.7, ls="--")
    n = summary.groupby("category")["n_pairs"].max().reindex(cats)
    ax.set_xticks(range(len(cats)), [f"{c}\n(n={k})" for c, k in zip(cats, n, strict=True)],
                  rotation=30, ha="right", fontsize=8)
    ax.set_ylim(0, 100)
    ax.set_ylabel("agreement with human preference (%)")
    ax.set_title(f"Pairwise agreement per category ({level_pct(alpha)}% Wilson; ties={ties})"
                 + (f"\n{subtitle}" if subtitle else ""), fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return fig  # closed, but its artists stay readable (tests)


def task_delta_scatter(deltas: pd.DataFrame, corr: pd.DataFrame, path: Path,
                       subtitle: str | None = None):
    """Delta_H vs Delta_B, one panel per comparison, points labeled by benchmark.

    ``subtitle`` (the figure's title) names the data and model the deltas come from.
    """
    plt = pyplot()

    names = list(dict.fromkeys(deltas["comparison"]))
    fig, axes = plt.subplots(1, len(names), figsize=(5.2 * len(names), 4.4), squeeze=False)
    for ax, name in zip(axes[0], names, strict=True):
        sub = deltas[deltas["comparison"] == name]
        used = sub[sub["used"].astype(bool)]
        err = None
        if used["delta_h_ci_lower"].notna().any():
            err = [used["delta_h"] - used["delta_h_ci_lower"],
                   used["delta_h_ci_upper"] - used["delta_h"]]
        label = ("Delta_H (paper Table 3)" if (sub["source"] == "paper").all() else
                 "Delta_H (PPI++, this data)")
        ax.errorbar(used["delta_b"], used["delta_h"], yerr=err, fmt="o", color="#1f77b4",
                    capsize=3, label=label)
        if (sub["source"] == "model").any():
            ax.scatter(sub["delta_b"], sub["delta_h_paper"], marker="x", color="#7f7f7f",
                       label="Delta_H (paper)")
        for row in used.itertuples(index=False):
            ax.annotate(row.benchmark, (row.delta_b, row.delta_h), fontsize=7,
                        xytext=(4, 3), textcoords="offset points")
        ax.axhline(0, color="black", lw=0.6)
        ax.axvline(0, color="black", lw=0.6)
        c = corr[(corr["comparison"] == name) & (corr["source"] == sub["source"].iloc[0])]
        r = c["pearson_r"].iloc[0] if len(c) else float("nan")
        printed = c["paper_printed_r"].iloc[0] if len(c) else None
        title = f"{name}\nPearson r = {r:.3f}"
        if printed is not None and pd.notna(printed):
            title += f" (paper prints {printed:+.2f})"
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("Delta_B: benchmark change (%)")
        ax.set_ylabel("Delta_H: human rating change (% of control)")
        ax.legend(fontsize=7, loc="best")
    if subtitle:
        fig.suptitle(subtitle, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return fig  # closed, but its artists stay readable (tests)


def monitor_plot(frame: pd.DataFrame, stops: pd.DataFrame, path: Path, title: str) -> None:
    """Fixed interval and confidence sequence over the days, naive and PPI++.

    One row per case study, one column per estimator: the sequence as a light band, the fixed
    interval as a darker band inside it, the effect as a line, the zero line, and a dashed
    vertical line at the first day the sequence excludes 0 (if any).
    """
    plt = pyplot()
    from matplotlib.ticker import MaxNLocator

    studies = list(dict.fromkeys(frame["case_study"]))
    panels = (("naive", "naive (labeled only)", "#7f7f7f"),
              ("augmented", "PPI++ (labels + predictions)", "#1f77b4"))
    fig, axes = plt.subplots(len(studies), 2, figsize=(10, 2.6 * len(studies) + 0.8),
                             squeeze=False, sharex="row", sharey="row")
    for row, study in zip(axes, studies, strict=True):
        for ax, (est, label, color) in zip(row, panels, strict=True):
            sub = frame[(frame["case_study"] == study) & (frame["estimator"] == est)]
            x = sub["day"].to_numpy(float)
            ax.fill_between(x, sub["cs_lower"], sub["cs_upper"], color=color, alpha=0.18,
                            step="mid", label="confidence sequence (anytime-valid)")
            ax.fill_between(x, sub["ci_lower"], sub["ci_upper"], color=color, alpha=0.45,
                            step="mid", label="fixed interval (one look)")
            ax.plot(x, sub["effect"], color=color, marker=".", lw=1.2, label="effect")
            ax.axhline(0, color="black", lw=0.8)
            stop = stops[(stops["case_study"] == study) & (stops["estimator"] == est)
                         & (stops["band"] == "sequence")]
            if len(stop) and bool(stop["conclusive"].iloc[0]):
                day = int(stop["day"].iloc[0])
                ax.axvline(day, color="#d62728", ls="--", lw=1.0,
                           label=f"conclusive on day {day}")
            ax.set_title(f"{study}: {label}", fontsize=9)
            ax.set_xlabel("day")
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
            ax.legend(fontsize=7, loc="upper right")
        row[0].set_ylabel("effect (stars)")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def study_history_plot(history: pd.DataFrame, path: Path, objective: str,
                       title: str = "") -> None:
    """Objective of every completed trial by trial number, the best so far as a step line.

    Pruned and failed trials have no value: they are ticks along the bottom edge.
    """
    fig = figure((7.0, 3.6))
    ax = fig.subplots()
    done = history[history["state"] == "COMPLETE"]
    ax.scatter(done["number"], done["value"].astype(float), s=18, color="#1f77b4",
               label="completed trial")
    if len(done):
        ax.step(history["number"], history["best_so_far"].astype(float), where="post",
                color="#d62728", label="best so far")
    other = history[history["state"] != "COMPLETE"]
    if len(other):
        ax.plot(other["number"], np.zeros(len(other)), "|", color="#7f7f7f", markersize=12,
                transform=ax.get_xaxis_transform(), label="pruned / failed")
    ax.set_xlabel("trial number")
    ax.set_ylabel(f"out-of-fold {objective}")
    ax.set_title(title or f"Optimization history ({objective})", fontsize=10)
    ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def importance_plot(importances: dict[str, float], path: Path, title: str = "") -> None:
    """Horizontal bars of the hyper-parameter importances (fANOVA, summing to 1)."""
    items = sorted(importances.items(), key=lambda kv: kv[1])
    fig = figure((6.5, 0.9 + 0.35 * max(1, len(items))))
    ax = fig.subplots()
    ax.barh([k for k, _ in items], [v for _, v in items], color="#1f77b4")
    ax.set_xlabel("importance (fANOVA share of the objective's variance)")
    ax.set_title(title or "Hyper-parameter importances", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def paired_plot(frame: pd.DataFrame, path: Path, reference: str, level: int = 95) -> None:
    """Paired ΔMSE and Δr (new - reference) with their intervals, one row per model run.

    ``frame`` has columns ``label``, ``delta_mse``, ``mse_ci_lower``, ``mse_ci_upper``,
    ``delta_r``, ``r_ci_lower``, ``r_ci_upper`` (and optionally ``resampled``: ``users`` or
    ``sessions``); ``level`` is the intervals' level in percent (``1 - paired.alpha``).
    """
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(9.0, 1.2 + 0.45 * len(frame)), sharey=True)
    ys = np.arange(len(frame))
    for ax, key, label in ((axes[0], "mse", "ΔMSE (below 0: better)"),
                           (axes[1], "r", "Δr (above 0: better)")):
        mid = frame[f"delta_{key}"].astype(float)
        err = [mid - frame[f"{key}_ci_lower"].astype(float),
               frame[f"{key}_ci_upper"].astype(float) - mid]
        ax.errorbar(mid, ys, xerr=err, fmt="o", color="#1f77b4", capsize=4)
        ax.axvline(0, color="black", linewidth=0.8)
        ax.set_xlabel(label)
    axes[0].set_yticks(ys, list(frame["label"]), fontsize=8)
    axes[0].invert_yaxis()
    units = "user" if "resampled" not in frame or (frame["resampled"] == "users").all() \
        else "session" if (frame["resampled"] == "sessions").all() else "user/session"
    fig.suptitle(f"Paired out-of-fold differences vs {reference} ({level}% {units} bootstrap)",
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def ablation_plot(table: pd.DataFrame, path: Path, group_by: list[str]) -> None:
    """Mean out-of-fold r and MSE per group with ± sd over its runs (seeds) as error bars.

    ``table`` is the ablation table of ``pulse-ml compare group_by=...`` (columns
    ``r_mean``, ``r_sd``, ``mse_mean``, ``mse_sd`` and the ``group_by`` columns).
    """
    plt = pyplot()
    labels = [" / ".join(str(row[c]) for c in group_by) for _, row in table.iterrows()]
    fig, axes = plt.subplots(1, 2, figsize=(max(7.0, 1.1 * len(table) + 3), 3.8))
    xs = np.arange(len(table))
    for ax, key, name in ((axes[0], "r", "out-of-fold Pearson r"),
                          (axes[1], "mse", "out-of-fold MSE")):
        ax.bar(xs, table[f"{key}_mean"].astype(float),
               yerr=np.nan_to_num(table[f"{key}_sd"].astype(float)), capsize=4,
               color="#1f77b4")
        ax.set_xticks(xs, labels, rotation=30, ha="right", fontsize=8)
        ax.set_ylabel(name)
        if key == "mse":
            lo = float((table["mse_mean"] - table["mse_sd"].fillna(0)).min())
            hi = float((table["mse_mean"] + table["mse_sd"].fillna(0)).max())
            pad = max(0.02, 0.2 * (hi - lo))
            ax.set_ylim(lo - pad, hi + pad)
    fig.suptitle(f"Ablation by {', '.join(group_by)}: mean ± sd over runs (seeds)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
