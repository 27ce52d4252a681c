r"""Templated user messages for simulated sessions (the demo's ``user_text``): a synthetic signal.

Every simulated session gets ``user_message_count`` messages, joined by ``"\\n"``. The first
states the task (a template per task category); each follow-up is, with probability
``MOOD_SHARE``, a *mood* message (praise or complaint) and otherwise a neutral instruction. A
mood message is positive with probability ``sigmoid(text_signal * z)``, ``z`` the session's
standardized latent satisfaction (features, user effect and session noise: the quantity its
rating is drawn from), so a text model can recover part of what the 15 features miss. With
``text_signal = 0`` the text is pure noise (no relation to the ratings).

This signal is synthetic: real users' messages relate to their ratings in other ways (see
``examples/uss`` and ``examples/convai2`` for measured text signals on real rating datasets).
Everything is vectorized over all messages of all sessions (template choice by index, one
``np.add.reduceat`` to join each session's messages).
"""

from __future__ import annotations

import numpy as np

from pulse_ml.simulate import model

MOOD_SHARE = 0.35
TASKS = {
    "fix_bugs": ("There is a bug: the form crashes when the date field is empty. Can you fix it?",
                 "Users report a crash on login with an expired token, please fix the bug."),
    "implement_features": ("Please add an export-to-CSV button to the reports page.",
                           "Add a search box to the orders table that filters by customer."),
    "create_programs_from_scratch": ("Create a small Flask app with a todo list and tests.",
                                     "Write a command-line tool that renames photos by date."),
    "fix_failing_ci": ("The CI checks fail on the lint step since yesterday, please make them "
                       "pass.", "The test job in CI times out, please find out why and fix it."),
    "fix_merge_conflicts": ("The feature branch has conflicts with main, please resolve them.",
                            "Rebase my branch on main and resolve the conflicts in the API."),
    "write_documentation": ("Write a README section explaining how to configure the service.",
                            "Document the public functions of the billing module."),
    "perform_deployments": ("Deploy the app to the staging server and check the health "
                            "endpoint.", "Roll out the new version to production with the "
                            "usual script."),
    "perform_data_analysis": ("Load sales.csv and summarize revenue per month in a chart.",
                              "Compute the churn rate per region from the events table."),
}
NEUTRAL = ("Ok. Now please update the config loader as well.",
           "Continue with the next step.",
           "Can you show me what changed in the settings module?",
           "Please run the tests again.",
           "Also rename the helper to something clearer.",
           "What does the second function do?",
           "Use the existing logger instead of print.",
           "Check the other call sites too.")
POSITIVE = ("Great, thanks! That works.",
            "Perfect, exactly what I needed.",
            "Nice work, the tests pass now.",
            "Thanks, looks good to me.",
            "Awesome, that was quick.",
            "Good job, this is much cleaner.",
            "Excellent, it works on my machine too.",
            "Cool, thank you for the clear explanation.")
NEGATIVE = ("This is still broken, the same error shows up again.",
            "No, that is not what I asked for. Please read my first message again.",
            "It still fails. Why does this keep happening?",
            "You deleted code I needed, undo that.",
            "That makes it worse, now nothing compiles.",
            "Stop changing unrelated files.",
            "Wrong again, the output is empty.",
            "This is frustrating, you ignored my instructions.")


def user_texts(rng: np.random.Generator, n_messages: np.ndarray, category: np.ndarray,
               satisfaction: np.ndarray, text_signal: float = 1.0) -> np.ndarray:
    r"""The user's messages of each session, joined by ``"\\n"``.

    Args:
        rng: Random generator (the text's own stream: other draws are unaffected).
        n_messages: Messages per session (``user_message_count``, >= 1).
        category: Task category index per session (into ``model.CATEGORIES``).
        satisfaction: Latent satisfaction per session (any scale; standardized here).
        text_signal: How strongly mood messages follow satisfaction (0 = pure noise).

    Returns:
        Object array of strings, one per session.
    """
    n_messages = np.maximum(np.asarray(n_messages, dtype=np.int64), 1)
    n = len(n_messages)
    if n == 0:
        return np.empty(0, dtype=object)
    s = np.asarray(satisfaction, dtype=float)
    z = (s - s.mean()) / (s.std() or 1.0)
    starts = np.concatenate([[0], np.cumsum(n_messages)[:-1]])
    session = np.repeat(np.arange(n), n_messages)
    position = np.arange(len(session)) - starts[session]
    first = position == 0
    tasks = np.array([t for c in model.CATEGORIES for t in TASKS[c]], dtype=object)
    per_task = len(TASKS[model.CATEGORIES[0]])
    task_pick = np.asarray(category)[session] * per_task + rng.integers(0, per_task, len(session))
    mood = rng.random(len(session)) < MOOD_SHARE
    p_pos = 1.0 / (1.0 + np.exp(-text_signal * z[session]))
    positive = rng.random(len(session)) < p_pos
    pick = rng.integers(0, len(NEUTRAL), len(session))  # all pools have the same size
    pools = np.stack([np.array(NEUTRAL, dtype=object), np.array(POSITIVE, dtype=object),
                      np.array(NEGATIVE, dtype=object)])
    pool = np.where(mood, np.where(positive, 1, 2), 0)
    text = np.where(first, tasks[task_pick], pools[pool, pick]).astype(object)
    text = np.where(position == n_messages[session] - 1, text, text + "\n")
    return np.add.reduceat(text, starts).astype(object)
