"""Reference figures from the PULSE paper used to calibrate the simulator (Sections 4-6, App. B).

Feature shifts per case study are treatment minus control, read off Tables 6-9 with the
orientation of ``conf/catalog/case_studies/*.yaml`` (the tables' "Var A / Var B" columns are not
always
control / treatment: Table 7 lists Claude 4 first, Table 8 lists max_step 120 as "Treatment",
Table 9 lists "Planning" first). Flags are ``(control_mean, treatment_mean)``; messages are the
mean user-message counts of the rated sessions.
"""

from __future__ import annotations

FLAG_COLUMNS: tuple[str, ...] = (
    "misunderstood_intention", "did_not_follow_instruction", "insufficient_analysis",
    "insufficient_testing", "insufficient_debugging", "incomplete_implementation", "scope_creep",
)
GIT_COLUMNS: tuple[str, ...] = ("git_commit", "git_push", "git_pull", "git_reset", "git_rebase")

# Tables 6-9, columns in the order FLAG_COLUMNS + GIT_COLUMNS, then (messages control, treatment).
_TABLES: dict[str, tuple[tuple[float, ...], tuple[float, ...], tuple[float, float]]] = {
    # Table 7: control claude-3.7 (its "Var B"), treatment claude-4 (its "Var A").
    "claude37_vs_claude4": (
        (0.2491, 0.3764, 0.4244, 0.3911, 0.4336, 0.4797, 0.0904,
         0.5277, 0.5018, 0.0849, 0.0480, 0.0111),
        (0.2900, 0.3940, 0.4309, 0.4104, 0.4186, 0.4952, 0.1231,
         0.5335, 0.4829, 0.0602, 0.0848, 0.0205),
        (15.77, 16.41),
    ),
    # Table 6: control claude-4, treatment gpt-5.
    "claude4_vs_gpt5": (
        (0.2771, 0.3463, 0.3723, 0.3550, 0.3723, 0.4589, 0.1212,
         0.6580, 0.6104, 0.0866, 0.0909, 0.0173),
        (0.1805, 0.2857, 0.2857, 0.3008, 0.2932, 0.3459, 0.0902,
         0.6241, 0.4511, 0.0827, 0.0526, 0.0150),
        (19.17, 13.52),
    ),
    # Table 9: control no-plan (its "Control"), treatment show-plan (its "Planning").
    "plan": (
        (0.2771, 0.3463, 0.3723, 0.3550, 0.3723, 0.4589, 0.1212,
         0.6580, 0.6104, 0.0866, 0.0909, 0.0173),
        (0.2222, 0.3128, 0.3004, 0.2963, 0.2922, 0.3868, 0.0988,
         0.6461, 0.5514, 0.0947, 0.0782, 0.0165),
        (19.17, 13.16),
    ),
    # Table 8: control max_step 120 (its "Treatment"), treatment max_step 80 (its "Control").
    "memory": (
        (0.2308, 0.3846, 0.4231, 0.4615, 0.4615, 0.5385, 0.0769,
         0.5577, 0.5192, 0.0769, 0.0577, 0.0000),
        (0.2329, 0.3014, 0.3288, 0.2877, 0.3699, 0.3836, 0.0411,
         0.5479, 0.4932, 0.0685, 0.0548, 0.0274),
        (19.08, 18.03),
    ),
}

# Table 5, augmented column (the defaults of conf/simulate.yaml `effects`).
TABLE5_AUGMENTED: dict[str, float] = {
    "claude37_vs_claude4": 0.050, "claude4_vs_gpt5": -0.069, "plan": 0.031, "memory": 0.058,
}
TABLE5_NAIVE: dict[str, float] = {
    "claude37_vs_claude4": 0.039, "claude4_vs_gpt5": -0.075, "plan": 0.053, "memory": 0.032,
}

REFERENCE: dict[str, object] = {
    "n_labeled": 1747,
    "mean_rating": 4.07,
    "unlabeled_per_labeled": 20,
    "median_user_messages": 10,
    "rank_biserial_messages_labeled_vs_unlabeled": 0.32,
    "share_raters_multiple_sessions": 0.1275,
    "n_sessions": "over 36k",
    "n_users": "15k",
    "min_labeled_per_arm": 150,
    "best_model_pearson_r": 0.29,
    "table2_pearson_r": {"logreg": 0.24, "hgb": 0.27, "rf": 0.29},
    "corr_rating_git_push": 0.117,
    "corr_rating_git_commit": 0.101,
    "table5_augmented": TABLE5_AUGMENTED,
    "table5_naive": TABLE5_NAIVE,
    "prevalence_ranges": {
        "failure_flags": [0.04, 0.54], "git_commit": [0.53, 0.66], "git_push": [0.45, 0.61],
        "git_pull": [0.06, 0.095], "git_reset": [0.048, 0.091], "git_rebase": [0.0, 0.027],
    },
}


def paper_shifts(name: str) -> tuple[dict[str, tuple[float, float]], tuple[float, float]] | None:
    """Return the paper's per-feature ``(control, treatment)`` means of a case study.

    Args:
        name: Case-study name (``conf/catalog/case_studies/<name>.yaml``).

    Returns:
        ``(flags, messages)`` where ``flags`` maps each flag/git column to its control and
        treatment means and ``messages`` is the pair of mean user-message counts; ``None`` for a
        case study the paper does not report (it then gets no feature shift, only a direct one).
    """
    if name not in _TABLES:
        return None
    control, treatment, messages = _TABLES[name]
    columns = FLAG_COLUMNS + GIT_COLUMNS
    return {c: (a, b) for c, a, b in zip(columns, control, treatment, strict=True)}, messages
