"""How many rated sessions per arm does an A/B test need, naive vs with prediction power?

Uses the registered model's honest (out-of-fold) correlation with the ratings and the rating
s.d. of its training data (both overridable), the expected unlabeled sessions per arm and the
smallest effect worth detecting; prints labels per arm for a two-sided test at ``alpha`` with
``power``, for the naive difference of means and for PPI++, and the saving.

Users who rate in both arms (sessions, not users, randomized): a user's own level cancels in
the difference, so the effect needs fewer labels than the pooled design effect says. Give
``arm_correlation`` (correlation of the two arms' estimates) and ``shared_users`` (share of the
labeled users in both arms), or ``design_effect=estimate case_study=NAME`` to estimate them with
the per-arm design effect from that case study's rated sessions in ``data.path``.

With ``daily_labeled`` and ``daily_unlabeled`` (sessions per arm per day) it also gives, for a
test monitored daily for ``days`` days with anytime-valid confidence sequences (``pulse-ml
monitor``), the expected day the naive and the PPI++ sequence become conclusive.

Examples:
    pulse-ml plan effect=0.1 n_unlabeled=5000
    pulse-ml plan effect=0.1 design_effect=estimate case_study=plan data.path=sessions.parquet
    pulse-ml plan effect=0.1 daily_labeled=10 daily_unlabeled=200 days=21
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass

import numpy as np
import pandas as pd

from pulse_ml.config import number, require
from pulse_ml.errors import PulseError
from pulse_ml.report.tables import say
from pulse_ml.training.metrics import pearson


@dataclass(frozen=True)
class Design:
    """The users' design read once from the config (given or estimated from data).

    Attributes:
        deff: Design effect of an arm's mean (per arm when estimated with a case study).
        source: Where it comes from (one phrase for the printout).
        labels_per_user: Labels per user (per arm when estimated with a case study).
        arm_correlation: Correlation of the two arms' estimates through users in both arms.
        shared_users: Share of each arm's labeled users also labeled in the other arm.
        note: A sentence to print (empty: none).
    """

    deff: float
    source: str
    labels_per_user: float
    arm_correlation: float = 0.0
    shared_users: float = 0.0
    note: str = ""


def run(cfg):
    """Entry point of ``pulse-ml plan``."""
    from pulse_ml.registry.analysis import open_model
    from pulse_ml.stats.arm_effect import theoretical_width_ratio
    from pulse_ml.stats.power import labels_needed

    require(cfg, "effect", "plan")
    effect = number(cfg, "effect", "plan")
    margin = number(cfg, "margin", "plan", 0, None, open_interval=True, optional=True)
    k = int(number(cfg, "treatments", "plan", 1, None, integer=True))
    n_guard = int(number(cfg, "guardrails", "plan", 0, None, integer=True))
    if effect == 0 and margin is None:
        raise PulseError("effect=0 cannot be detected; give the smallest effect that matters, "
                         "e.g. effect=0.05 (or margin=0.1 for non-inferiority).")
    decision_note = _decision_note(effect, margin, k, n_guard)
    if margin is not None:  # non-inferiority: the distance from the bound -margin
        effect = effect + margin
        if effect <= 0:
            raise PulseError(f"effect + margin = {effect:g} <= 0: a treatment worse than the "
                             "margin is never shown non-inferior; give the expected effect "
                             "(e.g. effect=0) and a margin larger than its loss.")
    design = design_settings(cfg)
    deff, deff_source, per_user = design.deff, design.source, design.labels_per_user
    volumes = monitoring_settings(cfg, deff * (1.0 - design.arm_correlation))
    rho = number(cfg, "rho", "plan", -1, 1, optional=True)
    sd = number(cfg, "sd", "plan", 0, None, open_interval=True, optional=True)
    sd_pred = number(cfg, "sd_pred", "plan", 0, None, open_interval=True, optional=True)
    source, model = "given", None
    if rho is None or sd is None:
        model = open_model(str(cfg.model_uri))
        oof = model.ensemble.oof
        source = (f"{cfg.model_uri} (version {getattr(model.version, 'version', '?')}, "
                  f"{model.family}, {len(oof)} out-of-fold predictions)")
        rho = pearson(oof["rating"].to_numpy(), oof["prediction"].to_numpy()) if rho is None \
            else rho
        sd = float(np.std(oof["rating"].to_numpy(), ddof=1)) if sd is None else sd
    n_unl = number(cfg, "n_unlabeled", "plan", 0, None, integer=True)
    alpha = number(cfg, "alpha", "plan", 0, 1, open_interval=True)
    power = number(cfg, "power", "plan", alpha / 2, 1, open_interval=True)
    if decision_note:  # Holm's first step is at alpha / k; all guardrails must pass (Spotify)
        alpha, power = alpha / k, 1.0 - (1.0 - power) / (n_guard + 1)
        say(decision_note)
    rho = float(rho)
    if rho <= 0:
        say(f"note: honest r {rho:.3f} <= 0: PPI++ sets lambda to 0 and gains nothing; "
              "planning with r = 0.")
    plan = labels_needed(effect, float(sd), max(rho, 0.0), n_unl, alpha, power,
                         design_effect=deff, labels_per_user=per_user, sd_pred=sd_pred,
                         arm_correlation=design.arm_correlation,
                         shared_users=design.shared_users)
    pred = ("calibrated predictions (s.d. r x sd)" if sd_pred is None
            else f"prediction s.d. {sd_pred:.3f}")
    say(textwrap.fill(
          f"to detect an effect of {effect:+.3f} stars (two-sided alpha {alpha:g}, power "
          f"{power:g}) with rating s.d. {float(sd):.3f}, honest r {float(rho):.3f} from "
          f"{source}, {pred}, {n_unl:,} unlabeled sessions per arm, a users' design effect "
          f"of {deff:.2f} ({deff_source}) and {per_user:.2f} labels per user (degrees of "
          "freedom from the users)" + _shared_phrase(design) + ":", 100))
    if design.note:
        say(f"note: {design.note}")
    say(f"  naive A/B test : {plan.n_naive:>7,} rated sessions per arm")
    say(f"  with PPI++     : {plan.n_ppi:>7,} rated sessions per arm")
    say(f"  saving         : {plan.saving:>7,} per arm ({plan.saving_pct:.1f}%)")
    ratio = theoretical_width_ratio(max(rho, 0.0), plan.n_ppi, n_unl)
    say(f"  (CI width ratio at that size: {float(ratio):.3f}; a better predictor, not more "
          "unlabeled data,\n   is what narrows it further)")
    if model is not None:
        say(_active_line(model.ensemble, plan.n_ppi, n_unl))
    if volumes is not None:
        monitoring(volumes, effect, float(sd), max(rho, 0.0), alpha, power)
    return plan


def _decision_note(effect: float, margin: float | None, k: int, n_guard: int) -> str:
    """What the decision rule changes in the plan (empty when it changes nothing)."""
    parts = []
    if margin is not None:
        parts.append(f"non-inferiority at margin {margin:g}: the interval must clear "
                     f"-{margin:g}, so the distance planned for is effect + margin = "
                     f"{effect + margin:+.3f}")
    if k > 1:
        parts.append(f"{k} treatments vs one control, Holm-adjusted: alpha / {k} (its first "
                     "step; the per-arm labels are for each treatment and the control)")
    if n_guard:
        parts.append(f"{n_guard} guardrail(s) that must all pass: power per test "
                     f"1 - beta / {n_guard + 1} so the whole rule keeps the power (Spotify's "
                     "risk-aware rule; each guardrail needs its own power on its metric)")
    return ("decision rule: " + "; ".join(parts) + ".") if parts else ""


def _active_line(ensemble, n_ppi: int, n_unl: int) -> str:
    """Rated sessions per arm with active requests (``pulse-ml request``) at the same width."""
    from pulse_ml.stats.active_design import honest_width_ratio, labels_saved

    err = getattr(ensemble, "error_model", None)
    if err is None:
        return ("  active requests: this model version has no error model (retrain it to plan "
                "and use `pulse-ml request`)")
    resid2 = getattr(err, "resid2", np.zeros(0))  # the honest (centred) targets it predicts
    if resid2.size != err.oof.size:  # a version from before they were stored
        oof = ensemble.oof
        resid2 = (oof["rating"].to_numpy(float) - oof["prediction"].to_numpy(float)) ** 2
    budget = min(1.0, n_ppi / max(n_ppi + n_unl, 1))
    ratio = honest_width_ratio(err.oof, resid2, budget)
    saved = labels_saved(ratio)
    n_active = int(np.ceil(n_ppi * ratio**2))
    return (f"  active requests: {n_active:>7,} rated sessions per arm with `pulse-ml request` "
            f"({100 * abs(saved):.1f}% {'fewer' if saved >= 0 else 'more'})\n   (vs uniform "
            f"PPI++; error model '{err.choice}', judged on out-of-fold residuals it never saw)"
            + (f"\n   uniform asking: at train time {err.fallback}"
               if getattr(err, "fallback", "") else ""))


def _shared_phrase(design: Design) -> str:
    if design.arm_correlation == 0 and design.shared_users == 0:
        return ""
    return (f", users in both arms ({design.shared_users:.0%} of the labeled users; the arms' "
            f"estimates correlate {design.arm_correlation:.2f}, so the effect's design effect "
            f"is {design.deff * (1 - design.arm_correlation):.2f})")


def design_settings(cfg) -> Design:
    """The users' design (``labels_per_user`` wins over an estimate).

    Given: ``design_effect`` (default 1), ``labels_per_user`` (null = 1), ``arm_correlation``
    and ``shared_users`` (default 0: users nested in arms). ``design_effect=estimate``: from the
    ratings and ``user_id`` of ``data.path``; with ``case_study=NAME`` per arm (the case study's
    two conditions) together with the arms' correlation and the share of users in both arms
    (:func:`pulse_ml.stats.arm_design`), else pooled over all ratings (no arms).
    """
    raw = cfg.select("design_effect")
    per_user = number(cfg, "labels_per_user", "plan", 1, None, optional=True)
    kappa = number(cfg, "arm_correlation", "plan", 0, 1, optional=True)
    shared = number(cfg, "shared_users", "plan", 0, 1, optional=True)
    study = cfg.select("case_study")
    if kappa is not None and kappa >= 1:
        raise PulseError("pulse-ml plan: arm_correlation must be below 1 (1 would mean the "
                         "arms' estimates move together exactly), e.g. arm_correlation=0.3.")
    if str(raw).lower() != "estimate":
        deff = number(cfg, "design_effect", "plan", 1, None)
        return Design(deff, "given", 1.0 if per_user is None else per_user,
                      kappa or 0.0, shared or 0.0)
    from pulse_ml.config import require_data_path
    from pulse_ml.sessions.readers import read_frame
    from pulse_ml.stats.power import arm_design, design_effect

    path = require_data_path(cfg, "plan")
    frame = read_frame(path)
    if "user_id" not in frame or "rating" not in frame:
        raise PulseError(f"{path}: design_effect=estimate needs columns rating and user_id.")
    rated = frame[pd.to_numeric(frame["rating"], errors="coerce").notna()]
    if study in (None, ""):
        est = design_effect(rated["rating"].to_numpy(float), rated["user_id"].astype(str))
        return Design(est.deff, (
            f"estimated from {est.n_labels} ratings of {est.n_users} users in {path.name}: ICC "
            f"{est.icc:.3f}, {est.labels_per_user:.2f} labels per user"),
            est.labels_per_user if per_user is None else per_user, kappa or 0.0, shared or 0.0,
            note="the design effect is pooled over the arms; if users rate in both arms give "
                 "case_study=NAME: their own level cancels in the effect, which needs fewer "
                 "labels")
    treated = _arms_of(cfg, rated, str(study), path)
    rows = treated.notna()
    est = arm_design(rated.loc[rows, "rating"].to_numpy(float),
                     rated.loc[rows, "user_id"].astype(str), treated[rows].to_numpy(bool))
    return Design(est.deff, (
        f"per arm, estimated from {est.n_labels} ratings of {est.n_users} users of case study "
        f"'{study}' in {path.name}: ICC {est.icc:.3f}, {est.labels_per_user:.2f} labels per "
        f"user and arm, cross-arm ICC {est.cross_icc:.3f}"),
        est.labels_per_user if per_user is None else per_user,
        est.arm_correlation if kappa is None else kappa,
        est.shared_users if shared is None else shared)


def _arms_of(cfg, rated: pd.DataFrame, study: str, path) -> pd.Series:
    """True (treatment) / False (control) / NA (other rows) for the case study's rated rows."""
    from pulse_ml import settings as shared

    if "case_study" not in rated or "condition" not in rated:
        raise PulseError(f"{path}: case_study={study} needs columns case_study and condition.")
    rows = rated["case_study"].astype(str) == study
    conditions = sorted(rated.loc[rows, "condition"].astype(str).unique())
    configured = shared.case_study_config(cfg).get(study)
    if configured is not None:
        control, treatment = configured.control, configured.treatment
    elif len(conditions) == 2:
        control, treatment = conditions
    else:
        raise PulseError(f"{path}: case study '{study}' has rated sessions in conditions "
                         f"{conditions}; need exactly its two arms (configure the case study "
                         "or check the name).")
    cond = rated["condition"].astype(str)
    out = pd.Series(pd.NA, index=rated.index, dtype="boolean")
    out[rows & (cond == control)] = False
    out[rows & (cond == treatment)] = True
    for arm in (control, treatment):
        if int((rows & (cond == arm)).sum()) < 2:
            raise PulseError(f"{path}: case study '{study}', arm '{arm}' has fewer than 2 rated "
                             "sessions; the design cannot be estimated from it.")
    return out


def monitoring_settings(cfg, deff: float) -> dict | None:
    """Daily volumes, days, target day and the design effect (None without daily_labeled)."""
    if cfg.select("daily_labeled") is None:
        return None
    daily = number(cfg, "daily_labeled", "plan", 0, None, open_interval=True)
    daily_unl = number(cfg, "daily_unlabeled", "plan", 0, None, optional=True)
    if daily_unl is None:
        raise PulseError("pulse-ml plan: daily_labeled is set but daily_unlabeled is not; give "
                         "the unlabeled sessions per arm per day too, e.g. daily_unlabeled=200.")
    days = number(cfg, "days", "plan", 1, None, integer=True)
    return {"daily": daily, "daily_unl": daily_unl, "days": days,
            "target": number(cfg, "target_day", "plan", 1, days, integer=True, optional=True),
            "deff": deff}


def monitoring(volumes: dict, effect: float, sd: float, rho: float, alpha: float, power: float):
    """The monitoring section: expected days to a conclusive naive / PPI++ sequence.

    Returns:
        The :class:`~pulse_ml.stats.sequential.MonitorPlan`.
    """
    from pulse_ml.report.tables import say, text_table
    from pulse_ml.stats.sequential.planning import plan_monitoring

    daily, daily_unl, days = volumes["daily"], volumes["daily_unl"], volumes["days"]
    target, deff = volumes["target"], volumes["deff"]
    mp = plan_monitoring(effect, sd, rho, daily, daily_unl, alpha, power, deff, days, target)
    say(f"\nmonitored daily for {days} days, {daily:g} labeled + {daily_unl:g} unlabeled "
          "sessions per arm per day")
    say(f"(anytime-valid sequences, tightest on day {mp.target_day}"
          f"{'' if deff == 1 else f', design effect {deff:g}'}):")
    rows = []
    for name, p in (("naive", mp.naive), ("PPI++", mp.augmented)):
        rows.append({"estimator": name,
                     "median_day": "-" if p.median_day is None else str(p.median_day),
                     f"day_{power:.0%}_power": "-" if p.power_day is None else str(p.power_day),
                     f"P(by_day_{days})": p.p_conclusive,
                     "fixed_horizon_days": p.fixed_days,
                     "fixed_labels_per_arm": p.fixed_labels_per_arm})
    say("\n".join("  " + line for line in text_table(pd.DataFrame(rows)).splitlines()))
    if mp.median_ratio is not None:
        say(f"  PPI++ is conclusive in {mp.median_ratio:.2f}x the days of naive (median; "
              f"variance ratio {mp.variance_ratio:.3f})")
    say(f"  '-' = not within {days} days; fixed-horizon days = one look at the end.")
    say(f"  To monitor with this plan's target: pulse-ml monitor horizon_days={mp.target_day}")
    say(f"  With no effect, peeking daily at a fixed {1 - alpha:.0%} CI errs "
          f"{mp.peeking_type1:.1%} of the time; the sequence {mp.sequence_type1:.1%}.")
    return mp
