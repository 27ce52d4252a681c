"""Pure demo-data generator: ``SimulateSettings`` in, session table + ground truth out.

Population: ``n_labeled * (1 + unlabeled_ratio)`` sessions. Each case study gets two arms of
``labeled_per_arm * (1 + unlabeled_ratio)`` sessions (control: default features; treatment: the
feature shifts of the paper's Tables 6-9 plus a direct effect calibrated so the population effect
equals the configured one); the rest are ``default`` sessions in no case study. Sessions belong to
users (1 + negative-binomial sessions per user) with a user effect on the rating and a user
propensity to rate. Exactly ``labeled_per_arm`` sessions per arm (and the remainder of
``n_labeled`` among default sessions) are labeled, drawn with probability proportional to
``user_message_count ** label_message_elasticity * exp(rater effect)`` (Gumbel top-k), so rated
sessions have more user messages, as in the paper.

Time: every arm (the default sessions too) runs over ``days`` days from ``start_date`` (UTC) with
the same volume each day: its labeled and its unlabeled sessions are each spread evenly over the
days in a seeded random order, at a uniform time of day (``started_at``). A session's rating
arrives with it, so the labeled sessions visible on day d are those started by then.

Cost (``cost_usd``, the demo's guardrail, synthetic): ``COST_PER_MESSAGE`` per user message
times lognormal noise (mean 1), times the case study's ``cost_ratio`` in its treatment arm
(default 1: same cost). Drawn from a stream of its own, so every other column is unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from pulse_ml.errors import PulseError
from pulse_ml.simulate import model
from pulse_ml.simulate.calibration import calibrate, latent_mean, treatment_shift
from pulse_ml.simulate.paper import FLAG_COLUMNS, GIT_COLUMNS, REFERENCE
from pulse_ml.simulate.spec import SimulateSettings
from pulse_ml.simulate.text import user_texts

FEATURE_COLUMNS: tuple[str, ...] = (
    ("user_sentiment", "user_message_count", "task_category") + FLAG_COLUMNS + GIT_COLUMNS
)
ID_COLUMNS: tuple[str, ...] = ("session_id", "user_id", "case_study", "condition", "rating",
                               "n_ratings", "started_at")
GUARDRAIL_COLUMNS: tuple[str, ...] = ("cost_usd",)  # fully observed session metrics
TEXT_COLUMN = "user_text"  # templated user messages (synthetic signal, see simulate/text.py)
MAX_SEGMENTS = 3


@dataclass(frozen=True)
class GroundTruth:
    """What the simulator knows and an estimator should recover.

    Attributes:
        effects: Case-study name -> {control, treatment, target, effect (Monte Carlo), mc_se,
            mediated (through the features), direct_latent (latent-scale shift)}.
        bayes_rho: Pearson r of ``E[rating | features, arm]`` with the rating (labeled sessions).
        bayes_rho_se: Its Monte Carlo standard error.
        intercept: Latent intercept giving the configured mean rating.
        mc_sessions: Monte Carlo sample sizes used.
    """

    effects: dict[str, dict[str, float | str]]
    bayes_rho: float
    bayes_rho_se: float
    intercept: float
    mc_sessions: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class SimulationResult:
    """Generator output: the session table, the long segment ratings and the ground truth."""

    sessions: pd.DataFrame
    segment_ratings: pd.DataFrame
    ground_truth: GroundTruth


@dataclass(frozen=True)
class _Arm:
    case_study: str
    condition: str
    shift: model.ArmShift
    direct: float
    quota: int


def validate(settings: SimulateSettings) -> None:
    """Raise ``PulseError`` naming the config key when the settings cannot work."""
    s = settings
    problems = []
    if s.n_labeled < 1:
        problems.append(f"n_labeled={s.n_labeled}: must be >= 1")
    if s.unlabeled_ratio < 0:
        problems.append(f"unlabeled_ratio={s.unlabeled_ratio}: must be >= 0")
    if s.signal < 0:
        problems.append(f"signal={s.signal}: must be >= 0 (1.0 = paper-like)")
    if not 1.0 < s.mean_rating < 5.0:
        problems.append(f"mean_rating={s.mean_rating}: must be strictly between 1 and 5")
    if s.labeled_per_arm < s.min_labeled_per_arm:
        problems.append(f"labeled_per_arm={s.labeled_per_arm} is below min_labeled_per_arm="
                        f"{s.min_labeled_per_arm}: raise labeled_per_arm or lower the minimum")
    need = 2 * len(s.case_studies) * s.labeled_per_arm
    if need > s.n_labeled:
        problems.append(f"n_labeled={s.n_labeled} < {need} = 2 arms x {len(s.case_studies)} case "
                        f"studies x labeled_per_arm={s.labeled_per_arm}: raise n_labeled or lower "
                        f"labeled_per_arm")
    if s.text_signal < 0:
        problems.append(f"text_signal={s.text_signal}: must be >= 0 (0 = the user text is "
                        "pure noise)")
    if s.days < 1:
        problems.append(f"days={s.days}: must be >= 1 (the length of the simulated tests)")
    try:
        pd.Timestamp(s.start_date)
    except (TypeError, ValueError):
        problems.append(f"start_date={s.start_date!r}: not a date; use YYYY-MM-DD")
    if s.mc_sessions < 10_000:
        problems.append(f"mc_sessions={s.mc_sessions}: must be >= 10000")
    if not 0 <= s.user_sd <= model.MAX_USER_SD:
        problems.append(f"users.user_sd={s.user_sd}: must be in [0, {model.MAX_USER_SD:.3f}] (the "
                        "latent s.d. a user's habit may take from the session noise)")
    names = [c.name for c in s.case_studies]
    if len(set(names)) != len(names):
        problems.append(f"effects: duplicate case study in {names}")
    if problems:
        raise PulseError("pulse-ml simulate: bad settings\n" + "\n".join(f"  - {p}"
                                                                          for p in problems))


def _arms(settings: SimulateSettings, direct: dict[str, float], n_labeled: int,
          per_arm: int) -> list[_Arm]:
    arms = [_Arm("", settings.default_condition, model.ArmShift(), 0.0,
                 n_labeled - 2 * len(settings.case_studies) * per_arm)]
    for spec in settings.case_studies:
        arms.append(_Arm(spec.name, spec.control, model.ArmShift(), 0.0, per_arm))
        arms.append(_Arm(spec.name, spec.treatment,
                         treatment_shift(spec, settings.feature_shift_scale),
                         direct[spec.name], per_arm))
    return arms


def _users(rng: np.random.Generator, n: int, settings: SimulateSettings) -> np.ndarray:
    """User index per session (numbered by first appearance)."""
    r, mean = settings.extra_sessions_dispersion, settings.extra_sessions_mean
    counts = np.empty(0, dtype=np.int64)
    while counts.sum() < n:
        more = 1 + rng.negative_binomial(r, r / (r + mean), size=n // 2 + 10)
        counts = np.concatenate([counts, more])
    cum = np.cumsum(counts)
    n_users = int(np.searchsorted(cum, n) + 1)
    counts = counts[:n_users].copy()
    counts[-1] -= cum[n_users - 1] - n
    user = rng.permutation(np.repeat(np.arange(n_users), counts))
    _, first, inverse = np.unique(user, return_index=True, return_inverse=True)
    rank = np.empty(len(first), dtype=np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(len(first))
    return rank[inverse]


def _population(settings: SimulateSettings, seeds: list[np.random.SeedSequence],
                intercept: float, direct: dict[str, float], n_labeled: int,
                per_arm: int) -> dict[str, np.ndarray]:
    """Draw one full population (features, users, labeled set, segment stars)."""
    ratio = 1.0 + settings.unlabeled_ratio
    arms = _arms(settings, direct, n_labeled, per_arm)
    n_total = int(round(n_labeled * ratio))
    sizes = [int(round(a.quota * ratio)) for a in arms[1:]]
    sizes.insert(0, max(n_total - sum(sizes), arms[0].quota))
    feature_rng = np.random.default_rng(seeds[0])
    parts = [model.draw_features(feature_rng, size, arm.shift) for arm, size in zip(arms, sizes,
                                                                                     strict=True)]
    arm_of = np.repeat(np.arange(len(arms)), sizes)
    order = feature_rng.permutation(len(arm_of))
    cols = {k: np.concatenate([p[k] for p in parts])[order] for k in parts[0]}
    arm_of = arm_of[order]
    n = len(arm_of)
    cols["arm"] = arm_of
    cols["mu"] = latent_mean(cols, settings, intercept, np.array([a.direct for a in arms])[arm_of])

    user_rng = np.random.default_rng(seeds[1])
    user = _users(user_rng, n, settings)
    n_users = int(user.max()) + 1
    rater = user_rng.normal(0.0, settings.rater_sd, n_users)
    user_effect = user_rng.normal(0.0, settings.user_sd, n_users)
    cols["user"] = user

    select_rng = np.random.default_rng(seeds[2])
    log_w = settings.label_message_elasticity * np.log(cols["user_message_count"]) + rater[user]
    key = log_w + select_rng.gumbel(size=n)
    by = np.lexsort((-key, arm_of))
    starts = np.searchsorted(arm_of[by], np.arange(len(arms)))
    rank = np.arange(n) - starts[arm_of[by]]
    quota = np.array([a.quota for a in arms])
    labeled = np.zeros(n, dtype=bool)
    labeled[by[rank < quota[arm_of[by]]]] = True
    cols["labeled"] = labeled

    rating_rng = np.random.default_rng(seeds[3])
    idx = np.flatnonzero(labeled)
    msgs = cols["user_message_count"][idx]
    p_more = 1.0 / (1.0 + np.exp(1.9 - 0.35 * np.log(msgs)))
    n_ratings = np.minimum(1 + rating_rng.binomial(MAX_SEGMENTS - 1, p_more), msgs)
    latent = (cols["mu"][idx] + user_effect[user[idx]]
              + rating_rng.normal(0.0, model.session_sd(settings.user_sd), len(idx)))[:, None]
    cols["user_effect"] = user_effect[user]
    cols["session_latent"] = np.full(n, np.nan)  # what a labeled session's stars come from
    cols["session_latent"][idx] = latent[:, 0]
    latent = latent + rating_rng.normal(0.0, model.SIGMA_SEGMENT, (len(idx), MAX_SEGMENTS))
    seg_stars = model.stars(latent)
    rated = np.arange(MAX_SEGMENTS)[None, :] < n_ratings[:, None]
    rating = np.full(n, np.nan)
    rating[idx] = np.where(rated, seg_stars, 0).sum(axis=1) / n_ratings
    n_rat = np.zeros(n, dtype=np.int64)
    n_rat[idx] = n_ratings
    cols.update(rating=rating, n_ratings=n_rat, seg_stars=seg_stars, seg_rated=rated,
                labeled_idx=idx)
    cols["arm_case_study"] = np.array([a.case_study for a in arms], dtype=object)
    cols["arm_condition"] = np.array([a.condition for a in arms], dtype=object)
    return cols


def _ids(prefix: str, values: np.ndarray, width: int) -> np.ndarray:
    width = max(width, len(str(int(values.max()) + 1)))
    return np.char.add(prefix, np.char.zfill((values + 1).astype(str), width)).astype(object)


def _start_times(rng: np.random.Generator, arm: np.ndarray, labeled: np.ndarray,
                 settings: SimulateSettings) -> pd.Series:
    """``started_at`` per session: each (arm, labeled) stratum spread evenly over the days."""
    n = len(arm)
    stratum = 2 * arm + labeled
    order = np.lexsort((rng.random(n), stratum))
    counts = np.bincount(stratum, minlength=int(stratum.max()) + 1)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n) - starts[stratum[order]]
    day = rank * settings.days // np.maximum(counts[stratum], 1)
    seconds = day * 86_400 + rng.integers(0, 86_400, n)
    start = pd.Timestamp(settings.start_date).tz_localize(None).normalize()
    stamps = (np.datetime64(start.to_datetime64(), "s") + seconds.astype("timedelta64[s]"))
    return pd.Series(stamps.astype("datetime64[us]")).dt.tz_localize("UTC")


def _user_text(rng: np.random.Generator, pop: dict[str, np.ndarray],
               settings: SimulateSettings) -> np.ndarray:
    """Templated user messages following each session's latent satisfaction (synthetic)."""
    latent = pop["session_latent"].copy()
    free = np.isnan(latent)  # unlabeled sessions: the same model, their own session noise
    latent[free] = (pop["mu"][free] + pop["user_effect"][free]
                    + rng.normal(0.0, model.session_sd(settings.user_sd), int(free.sum())))
    return user_texts(rng, pop["user_message_count"], pop["task_category"], latent,
                      settings.text_signal)


COST_PER_MESSAGE = 0.03  # USD per user message of a session (the demo's guardrail, synthetic)
COST_SD = 0.6            # s.d. of the session's log-cost around it


def _costs(rng: np.random.Generator, pop: dict[str, np.ndarray],
           settings: SimulateSettings) -> np.ndarray:
    """``cost_usd`` per session: messages x price x lognormal noise, x the treatment's ratio."""
    ratio = dict(settings.cost_ratio)
    treated = np.array([ratio.get(str(cs), 1.0) if str(cs) else 1.0
                        for cs in pop["arm_case_study"]])
    is_treatment = np.array([i > 0 and i % 2 == 0 for i in range(len(pop["arm_case_study"]))])
    arm_ratio = np.where(is_treatment, treated, 1.0)[pop["arm"]]
    noise = np.exp(rng.normal(-COST_SD ** 2 / 2, COST_SD, len(pop["arm"])))
    return np.round(COST_PER_MESSAGE * pop["user_message_count"] * noise * arm_ratio, 5)


def _frame(pop: dict[str, np.ndarray]) -> tuple[pd.DataFrame, pd.DataFrame]:
    n = len(pop["arm"])
    session_id = _ids("s", np.arange(n), 6)
    data = {
        "session_id": session_id,
        "user_id": _ids("u", pop["user"], 5),
        "case_study": pop["arm_case_study"][pop["arm"]],
        "condition": pop["arm_condition"][pop["arm"]],
        "rating": pop["rating"],
        "n_ratings": pop["n_ratings"],
        "started_at": pop["started_at"],
    }
    for column in FEATURE_COLUMNS:
        values = pop[column]
        if column == "user_sentiment":
            values = np.array(model.SENTIMENTS, dtype=object)[values]
        elif column == "task_category":
            values = np.array(model.CATEGORIES, dtype=object)[values]
        data[column] = values
    if TEXT_COLUMN in pop:
        data[TEXT_COLUMN] = pop[TEXT_COLUMN]
    frame = pd.DataFrame(data)
    for column in ("session_id", "user_id", "case_study", "condition", "user_sentiment",
                   "task_category"):
        frame[column] = frame[column].astype(str)
    idx, rated = pop["labeled_idx"], pop["seg_rated"]
    rows, seg = np.nonzero(rated)
    msgs = pop["user_message_count"][idx]
    n_ratings = pop["n_ratings"][idx]
    segment = msgs[rows] - n_ratings[rows] + seg + 1  # the last n_ratings work segments
    long = pd.DataFrame({"session_id": session_id[idx][rows].astype(str),
                         "segment": segment.astype(np.int64),
                         "rating": pop["seg_stars"][rows, seg].astype(np.int64)})
    return frame, long


def _ground_truth(settings: SimulateSettings, seeds: list[np.random.SeedSequence],
                  intercept: float, direct: dict[str, float],
                  mediated: dict[str, float]) -> GroundTruth:
    half = settings.mc_sessions // 2
    effects: dict[str, dict[str, float | str]] = {}
    arm_seeds = seeds[4].spawn(len(settings.case_studies))
    for spec, seed in zip(settings.case_studies, arm_seeds, strict=True):
        control = model.draw_features(np.random.default_rng(seed), half, model.ArmShift())
        treated = model.draw_features(np.random.default_rng(seed), half,
                                      treatment_shift(spec, settings.feature_shift_scale))
        diff = (model.expected_stars(latent_mean(treated, settings, intercept, direct[spec.name]))
                - model.expected_stars(latent_mean(control, settings, intercept, 0.0)))
        effects[spec.name] = {
            "control": spec.control, "treatment": spec.treatment, "target": spec.effect,
            "effect": float(diff.mean()), "mc_se": float(diff.std(ddof=1) / np.sqrt(half)),
            "mediated": mediated[spec.name], "direct_latent": direct[spec.name],
        }
    scale = settings.mc_sessions / (settings.n_labeled * (1.0 + settings.unlabeled_ratio))
    n_lab = max(int(round(settings.n_labeled * scale)), 1000)
    per_arm = int(np.floor(settings.labeled_per_arm * n_lab / settings.n_labeled))
    pop = _population(settings, seeds[5].spawn(4), intercept, direct, n_lab, per_arm)
    idx = pop["labeled_idx"]
    oracle = model.expected_stars(pop["mu"][idx])
    rho = float(np.corrcoef(oracle, pop["rating"][idx])[0, 1])
    return GroundTruth(effects=effects, bayes_rho=rho,
                       bayes_rho_se=float((1 - rho**2) / np.sqrt(len(idx))),
                       intercept=intercept,
                       mc_sessions={"effect_per_arm": half, "rho_labeled": int(len(idx))})


def simulate(settings: SimulateSettings) -> SimulationResult:
    """Generate a demo session table calibrated to the paper, with its ground truth.

    Args:
        settings: Frozen generator settings.

    Returns:
        The session table (contract column order), the long table of segment ratings of the
        labeled sessions (``session_id, segment, rating``) and the ``GroundTruth``.

    Raises:
        PulseError: when the settings are inconsistent (names the key to change).
    """
    validate(settings)
    # Eight streams; the first six are those of earlier versions (same draws), then time, text.
    seeds = np.random.SeedSequence(settings.seed).spawn(8)
    n_cal = max(20_000, settings.mc_sessions // 10)
    intercept, direct, mediated = calibrate(settings, seeds[0], n_cal)
    pop = _population(settings, seeds[1].spawn(4), intercept, direct, settings.n_labeled,
                      settings.labeled_per_arm)
    pop["started_at"] = _start_times(np.random.default_rng(seeds[6]), pop["arm"],
                                     pop["labeled"].astype(np.int64), settings)
    pop[TEXT_COLUMN] = _user_text(np.random.default_rng(seeds[7]), pop, settings)
    sessions, segments = _frame(pop)
    # A ninth stream (the first eight are unchanged): the cost guardrail, drawn last.
    sessions["cost_usd"] = _costs(np.random.default_rng(
        np.random.SeedSequence(settings.seed).spawn(9)[8]), pop, settings)
    truth = _ground_truth(settings, seeds, intercept, direct, mediated)
    return SimulationResult(sessions, segments, truth)


def reference() -> dict[str, object]:
    """The paper's reference figures (for ``ground_truth.json`` and the calibration table)."""
    return dict(REFERENCE)
