"""Monitoring from a session table: looks from started_at, arrays, per-look results, refusals.

The statistics (time-uniform validity, stopping days, planner) are tested on arrays in
tests/stats/test_sequential.py. Here the wiring is checked exactly: the looks built from
``started_at`` and the arms/users from the table give the same numbers as ``monitor_effect`` on
hand-built arrays, and the last look equals ``infer``'s effect on the same sessions. The null
simulation at the end checks the wiring keeps the guarantee (Monte-Carlo error in its comment).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pulse_ml.config import compose
from pulse_ml.errors import DataError, PulseError
from pulse_ml.inference.arm_data import arm_data
from pulse_ml.inference.effects import InferenceSettings, compare
from pulse_ml.inference.monitor import FRAME_COLUMNS, MonitorSettings, monitor, monitor_data
from pulse_ml.inference.monitor_looks import parse_looks
from pulse_ml.inference.monitor_text import printable, stop_lines
from pulse_ml.report.tables import text_table
from pulse_ml.sessions.feature_sets import FeatureSet, FeatureSpec
from pulse_ml.sessions.table import validate_frame
from pulse_ml.settings import feature_set
from pulse_ml.stats.sequential.monitor import monitor_effect
from pulse_ml.stats.sequential.simulation import simulate_monitoring
from pulse_ml.stats.sequential.small_sample import MIN_EFFECTIVE_UNITS

FEATURES = FeatureSet("x", (FeatureSpec("x", "numeric"),))
START = pd.Timestamp("2025-06-02", tz="UTC")
NOW = pd.Timestamp("2026-01-01", tz="UTC")


def _frame(data: dict, seed: int = 0, names=None) -> pd.DataFrame:
    """A session table from simulate_monitoring arrays: look d -> a time on day d + 1."""
    rng = np.random.default_rng(seed)
    n = data["arm"].size
    group = data["group"]
    names = names or [f"cs{g}" for g in range(int(group.max()) + 1)]
    seconds = data["look"] * 86_400 + rng.integers(0, 86_400, n)
    users = data["users"] if data["users"] is not None else np.arange(n)
    return pd.DataFrame({
        "session_id": [f"s{i}" for i in range(n)],
        "user_id": [f"u{u}" for u in users],
        "case_study": np.array(names, dtype=object)[group],
        "condition": np.where(data["arm"] == 1, "b", "a"),
        "rating": data["rating"],
        "x": data["prediction"],
        "started_at": START + pd.to_timedelta(seconds, unit="s"),
    })


def _table(frame: pd.DataFrame):
    return validate_frame(frame, "sessions.csv", FEATURES, {})


def _sim(reps=1, days=8, effect=0.0, users=40, seed=1, **kw):
    return simulate_monitoring(reps, n_days=days, labeled_per_day=6, unlabeled_per_day=20,
                               effect=effect, n_users=users, seed=seed, **kw)[0]


def test_daily_looks_follow_started_at_and_day_boundaries():
    data = _sim()
    frame = _frame(data)
    # Boundaries: exactly midnight starts the next day; the last second of a day stays in it.
    frame.loc[0, "started_at"] = START + pd.Timedelta(days=3)
    frame.loc[1, "started_at"] = START + pd.Timedelta(days=3) - pd.Timedelta(seconds=1)
    table = _table(frame)
    built = monitor_data(table, table.frame["x"].to_numpy(), now=NOW)
    expected = data["look"].copy()
    expected[0], expected[1] = 3, 2
    assert np.array_equal(built.look[np.argsort(built.rows)], expected)
    assert len(built.cutoffs[0]) == 8 and built.cutoffs[0][0] == START + pd.Timedelta(days=1)
    assert np.array_equal(built.arm[np.argsort(built.rows)], data["arm"])
    assert built.first_day == (START,) and built.dropped == (0,)


def test_day_number_and_date_looks_drop_sessions_after_the_last_look():
    data = _sim()
    table = _table(_frame(data))
    preds = table.frame["x"].to_numpy()
    by_day = monitor_data(table, preds, settings=MonitorSettings(looks=parse_looks([2, 5])),
                          now=NOW)
    kept = data["look"] <= 4
    assert by_day.dropped == (int((~kept).sum()),)
    assert np.array_equal(np.sort(by_day.rows), np.flatnonzero(kept))
    assert np.array_equal(by_day.look[np.argsort(by_day.rows)],
                          np.where(data["look"][kept] <= 1, 0, 1))
    by_date = monitor_data(table, preds, now=NOW, settings=MonitorSettings(
        looks=parse_looks(["2025-06-03", "2025-06-06T00:00:00"])))
    # "2025-06-03" = the end of day 2; the instant 2025-06-06T00:00 = the end of day 4.
    assert list(by_date.cutoffs[0]) == [START + pd.Timedelta(days=2),
                                        START + pd.Timedelta(days=4)]
    kept = data["look"] <= 3
    assert np.array_equal(by_date.look[np.argsort(by_date.rows)],
                          np.where(data["look"][kept] <= 1, 0, 1))


@pytest.mark.parametrize("clusters", [True, False])
def test_every_look_equals_monitor_effect_on_hand_built_arrays(clusters):
    """Two case studies of different lengths in one call: padded, then trimmed, exactly."""
    long, short = _sim(days=10, seed=3), _sim(days=6, seed=4, effect=0.5)
    both = {k: np.concatenate([long[k], short[k]]) for k in ("arm", "labeled", "rating",
                                                             "prediction", "look")}
    both["users"] = np.concatenate([long["users"], short["users"] + 1000])
    both["group"] = np.repeat([0, 1], [long["arm"].size, short["arm"].size])
    table = _table(_frame(both, names=["long", "short"]))
    settings = MonitorSettings(clusters=clusters, lambda_rule="arm")
    res = monitor(table, table.frame["x"].to_numpy(), settings, now=NOW)
    assert list(res.frame.columns) == FRAME_COLUMNS
    assert res.frame.groupby("case_study")["day"].max().to_dict() == {"long": 10, "short": 6}
    for name, d, n_looks in (("long", long, 10), ("short", short, 6)):
        alone = monitor_effect(d["arm"], d["labeled"], d["rating"], d["prediction"], d["look"],
                               n_looks, users=d["users"] if clusters else None,
                               lambda_rule="arm", horizon=21.0)
        t_alone, alone = alone.target_labels[0], alone.table
        got = res.frame[res.frame["case_study"] == name].reset_index(drop=True)
        assert np.array_equal(got["day"], np.repeat(np.arange(1, n_looks + 1), 2))
        for col in ("n_labeled", "n_unlabeled", "effect", "se", "df", "ci_lower", "ci_upper",
                    "cs_lower", "cs_upper", "lambda_control", "lambda_treatment"):
            np.testing.assert_allclose(got[col], alone[col], rtol=1e-9, atol=1e-12,
                                       err_msg=f"{name} {col}")
        # t* of each case study: its labels by the burn-in look (the first with intervals) x
        # 21 days / that look's day; no cross-talk from the padding.
        k0 = int(np.argmax(got["ci_lower"].notna().to_numpy()[::2]))
        assert 0 < k0 < 5 and res.target_labels[name] == t_alone
        assert t_alone == pytest.approx(got["n_labeled"].iloc[2 * k0] * 21 / (k0 + 1))


@pytest.mark.parametrize("clusters", [True, False])
def test_daily_reruns_keep_the_bands_of_earlier_days(clusters):
    """Monitor on day d (data truncated at day d) shows the same rows for days <= d as day 14."""
    data = _sim(days=14, effect=0.3, seed=8)
    frame = _frame(data)
    settings = MonitorSettings(clusters=clusters)
    full = monitor(_table(frame), frame["x"].to_numpy(), settings, now=NOW)
    burn_in = int(full.frame.loc[full.frame["ci_lower"].notna(), "day"].min())
    assert burn_in >= 2  # some looks before the burn-in: truncation there is refused
    for day in (burn_in, 5, 9):
        part = frame[frame["started_at"] < START + pd.Timedelta(days=day)].reset_index(drop=True)
        early = monitor(_table(part), part["x"].to_numpy(), settings, now=NOW)
        assert early.target_labels == full.target_labels and early.targets == full.targets
        mine = full.frame[full.frame["day"] <= day].reset_index(drop=True)
        pd.testing.assert_frame_equal(early.frame, mine, check_exact=False, rtol=1e-12)
    # the target says what it is and where it comes from
    assert "horizon of 21 days" in full.targets["cs0"] and "burn-in" in full.targets["cs0"]
    fixed = monitor(_table(frame), frame["x"].to_numpy(),
                    MonitorSettings(clusters=clusters, target_labels=500.0), now=NOW)
    assert fixed.target_labels["cs0"] == 500.0 and "fixed in advance" in fixed.targets["cs0"]
    # A longer horizon: t* doubles, the early sequence is wider (tightest later).
    longer = monitor(_table(frame), frame["x"].to_numpy(),
                     MonitorSettings(clusters=clusters, horizon_days=42), now=NOW)
    assert longer.target_labels["cs0"] == pytest.approx(2 * full.target_labels["cs0"])
    w_long = (longer.frame["cs_upper"] - longer.frame["cs_lower"]).dropna().to_numpy()
    w_21 = (full.frame["cs_upper"] - full.frame["cs_lower"]).dropna().to_numpy()
    assert w_long[0] > w_21[0]


@pytest.mark.parametrize("clusters", [True, False])
def test_last_look_equals_infers_effect(small_demo, clusters):
    """The last look's fixed interval is infer's interval with the rules cumulative sums allow.

    Same engine, lambdas and small-sample rules; the looks' moments are sums over users, so they
    use CR1 factors and no lambda-noise term (infer's CR2 and lambda noise move the s.e. by a
    fraction of a percent here)."""
    frame = pd.read_parquet(small_demo)
    table = validate_frame(frame, str(small_demo), feature_set(compose("train")), {})
    rng = np.random.default_rng(5)
    rating = frame["rating"].to_numpy(float)  # predictions that track the ratings: lambda > 0
    preds = np.where(np.isnan(rating), 2.8, 0.7 * rating) + rng.normal(0, 0.5, len(frame))
    res = monitor(table, preds, MonitorSettings(clusters=clusters), now=NOW)
    codes = pd.factorize(table.frame["user_id"])[0]
    for study in table.case_studies:
        arms = [arm_data(table, preds, study, c, codes) for c in (study.control,
                                                                  study.treatment)]
        infer = compare(*arms, InferenceSettings(clusters=clusters), cr2=False,
                        lambda_noise=False)
        full = compare(*arms, InferenceSettings(clusters=clusters))
        assert full.augmented.se == pytest.approx(infer.augmented.se, rel=0.02)
        last = res.frame[res.frame["case_study"] == study.name].tail(2).set_index("estimator")
        assert last.loc["naive", "n_labeled"] == infer.n_control + infer.n_treatment
        assert infer.lambda_control > 0.2  # PPI++ is really tuned here
        for est, ref in (("naive", infer.naive), ("augmented", infer.augmented)):
            for col in ("effect", "se", "df", "ci_lower", "ci_upper"):
                assert last.loc[est, col] == pytest.approx(getattr(ref, col), abs=1e-9), col
        assert last.loc["augmented", "lambda_control"] == pytest.approx(infer.lambda_control,
                                                                        abs=1e-9)


def test_stop_sentence_names_the_first_day_the_sequence_excludes_zero():
    data = _sim(days=14, effect=0.8, seed=11)
    table = _table(_frame(data))
    res = monitor(table, table.frame["x"].to_numpy(), MonitorSettings(), now=NOW)
    lines = stop_lines(res.stops, res.frame, "cs0")
    for est, name in (("naive", "naive"), ("augmented", "PPI++")):
        stop = res.stops[(res.stops["estimator"] == est) & (res.stops["band"] == "sequence")]
        assert bool(stop["conclusive"].iloc[0]), est
        day, n = int(stop["day"].iloc[0]), int(stop["n_labeled"].iloc[0])
        sub = res.frame[res.frame["estimator"] == est].set_index("day")
        excludes = (sub["cs_lower"] > 0) | (sub["cs_upper"] < 0)
        assert excludes[day] and not excludes.loc[:day - 1].any()
        assert sub.loc[day, "n_labeled"] == n
        assert any(line.startswith(f"{name} sequence: conclusive on day {day} with {n} labels")
                   for line in lines)
    text = text_table(printable(res.frame, "cs0"))
    assert max(len(line) for line in text.splitlines()) <= 100
    assert text.splitlines()[0].split() == ["day", "labels", "unlabeled", "naive", "naive",
                                            "CI", "naive", "CS", "PPI++", "PPI++", "CI",
                                            "PPI++", "CS"]


@pytest.mark.parametrize("value, message", [
    ([3, 2], "must be increasing"),
    ([1, 1], "must be increasing"),
    (["2025-06-05", "2025-06-04"], "must be increasing"),
    ([1, "2025-06-04"], "mixes day numbers and dates"),
    (["soon"], "neither a day number nor a date"),
    ([0, 3], "day numbers start at 1"),
])
def test_bad_looks_say_what_to_fix(value, message):
    with pytest.raises(PulseError, match=message):
        parse_looks(value)


def test_looks_parse_days_dates_and_daily():
    assert parse_looks(None).daily and parse_looks("daily").daily
    assert parse_looks("1,7,14").days == (1, 7, 14)
    spec = parse_looks(["2025-06-08", "2025-06-09T06:00:00+02:00"])
    assert spec.cutoffs == (pd.Timestamp("2025-06-09", tz="UTC"),
                            pd.Timestamp("2025-06-09T04:00", tz="UTC"))
    assert spec.day_like == (True, False)


def test_refusals_name_rows_and_fix():
    data = _sim()
    frame = _frame(data)
    preds = frame["x"].to_numpy()
    with pytest.raises(DataError, match="column 'started_at': missing"):
        monitor(_table(frame.drop(columns="started_at")), preds, now=NOW)
    empty = frame.copy()
    empty.loc[[3, 4], "started_at"] = pd.NaT
    with pytest.raises(DataError, match=r"empty values .* 2 row\(s\): row 4 \(session_id=s3\)"):
        monitor(_table(empty), preds, now=NOW)
    with pytest.raises(DataError, match="in the future"):
        monitor(_table(frame), preds, now=START + pd.Timedelta(days=3))
    with pytest.raises(PulseError, match="looks in the future .*day 30"):
        monitor(_table(frame), preds, MonitorSettings(looks=parse_looks([7, 30])),
                now=START + pd.Timedelta(days=10))
    late = frame.copy()
    treated = late["condition"] == "b"
    late.loc[treated & late["rating"].notna(), "started_at"] += pd.Timedelta(days=20)
    with pytest.raises(PulseError, match="treatment arm 'b' has no labeled session by the last "
                                         "look"):
        monitor(_table(late), preds, MonitorSettings(looks=parse_looks([8])), now=NOW)
    few = frame.copy()
    raters = treated & few["rating"].notna()
    few.loc[raters, "user_id"] = [f"rater{i % 3}" for i in range(int(raters.sum()))]
    with pytest.raises(PulseError, match="treatment arm 'b' has 3 labeled users by the last "
                                         "look.*min_units_per_arm=10"):
        monitor(_table(few), preds, now=NOW)
    monitor(_table(few), preds, MonitorSettings(clusters=False), now=NOW)  # sessions: enough


def test_integer_ids_must_not_go_back_in_time():
    frame = _frame(_sim()).sort_values("started_at").reset_index(drop=True)
    frame["session_id"] = [str(i) for i in range(len(frame))]
    preds = frame["x"].to_numpy()
    monitor(_table(frame), preds, now=NOW)  # in time order: fine
    swapped = frame.copy()
    swapped.loc[[10, 300], "started_at"] = swapped.loc[[300, 10], "started_at"].to_numpy()
    with pytest.raises(DataError, match=r"ids go up in 2 row\(s\): row 12 \(session_id=11\), "
                                        r"row 301 \(session_id=300\)"):
        monitor(_table(swapped), preds, now=NOW)
    monitor(_table(swapped), preds, MonitorSettings(check_id_order=False), now=NOW)


@pytest.mark.slow
def test_null_through_the_table_keeps_the_guarantee():
    """Seeded null replications as case studies of one table, 21 daily looks, 60 users each.

    The exact-equality tests above check the wiring; this checks the guarantee end to end (the
    table, the calendar, user clusters, the padding of one call over all case studies).
    Monte-Carlo error: with R = 400 replications a rate p has sd sqrt(p(1-p)/R), 1.1 points at
    p = 5%, so the bound 8% is 2.7 sd above a valid 5%; measured on this seed with the default
    target (a 21-day horizon at the burn-in label rate): sequence naive 3.0%, PPI++ 3.75%;
    fixed intervals peeked daily 24.5% / 24.75%, > 5 sd above the 12% floor that shows peeking
    inflates the error (the contrast the issue asks to report).
    """
    reps = 400
    data, _ = simulate_monitoring(reps, n_days=21, labeled_per_day=6, unlabeled_per_day=12,
                                  n_users=60, seed=2024)
    table = _table(_frame(data))
    res = monitor(table, table.frame["x"].to_numpy(), MonitorSettings(), now=NOW)
    for est in ("naive", "augmented"):
        sub = res.frame[res.frame["estimator"] == est]
        seq = ((sub["cs_lower"] > 0) | (sub["cs_upper"] < 0)).groupby(sub["case_study"]).any()
        peek = ((sub["ci_lower"] > 0) | (sub["ci_upper"] < 0)).groupby(sub["case_study"]).any()
        assert len(seq) == reps
        assert seq.mean() <= 0.08, (est, seq.mean())
        assert peek.mean() >= 0.12, (est, peek.mean())


def test_too_few_effective_labeled_users_for_the_checked_validity_warns():
    """Below MIN_EFFECTIVE_UNITS effective (Kish) labeled users per arm a warning names them."""
    few = _sim(days=10, users=20, seed=6)  # <= 20 labeled users per arm
    table = _table(_frame(few))
    res = monitor(table, table.frame["x"].to_numpy(), MonitorSettings(), now=NOW)
    assert len(res.warnings) == 1
    assert "case study 'cs0': only control" in res.warnings[0]
    assert "effective labeled users" in res.warnings[0]
    assert f"fewer than {MIN_EFFECTIVE_UNITS} effective labeled users per arm" in res.warnings[0]
    # the same test seen without users: 60 labeled sessions per arm, no warning
    assert monitor(table, table.frame["x"].to_numpy(), MonitorSettings(clusters=False),
                   now=NOW).warnings == ()
    many = _sim(days=14, users=600, seed=6)  # 84 labels per arm, mostly one per user
    table = _table(_frame(many))
    assert monitor(table, table.frame["x"].to_numpy(), MonitorSettings(), now=NOW).warnings == ()


def test_few_effective_raters_warn_although_many_users_rated():
    """80+ labeled users per arm, but a few very active raters hold most labels: a warning.

    The count of labeled users passes the old rule (>= 32 per arm, no warning); the Kish count
    (sum n_g)^2 / sum n_g^2 is far below 40, and the warning says how many labeled users the
    effective count comes from.
    """
    data = _sim(days=21, users=300, seed=8, activity=1.1)
    table = _table(_frame(data))
    res = monitor(table, table.frame["x"].to_numpy(), MonitorSettings(), now=NOW)
    last = res.frame[res.frame["look"] == res.frame["look"].max()].iloc[0]
    labeled = res.result.table.iloc[-2][["units_control", "units_treatment"]].to_numpy()
    assert labeled.min() >= 40
    assert min(last["eff_units_control"], last["eff_units_treatment"]) < MIN_EFFECTIVE_UNITS
    # Kish by hand from the table's labeled sessions per user and arm
    lab = table.frame[table.frame["rating"].notna()]
    for cond, col in (("a", "eff_units_control"), ("b", "eff_units_treatment")):
        counts = lab[lab["condition"] == cond].groupby("user_id").size().to_numpy(float)
        assert last[col] == pytest.approx(counts.sum() ** 2 / (counts**2).sum())
    assert len(res.warnings) == 1
    assert "effective labeled users" in res.warnings[0]
    assert "labeled)" in res.warnings[0]


def test_labels_that_drift_in_time_warn_with_the_size_in_se():
    """Labels falling 20 -> 2 per arm and day, treatment predictions drifting +0.6: a warning.

    The statistics (bias, detection rates, no warning without drift: 0 of 1000) are simulated in
    tests/stats/test_sequential_heavy.py; here one seeded data set goes through the table.
    """
    falling = np.round(np.linspace(20, 2, 21)).astype(int)
    for drift, warned in ((0.6, True), (0.0, False)):
        data, _ = simulate_monitoring(1, n_days=21, labeled_per_day=falling,
                                      unlabeled_per_day=100, drift=drift, seed=3)
        table = _table(_frame(data))
        res = monitor(table, table.frame["x"].to_numpy(), MonitorSettings(), now=NOW)
        drifts = [w for w in res.warnings if "labeling rate changed over time" in w]
        assert bool(drifts) == warned, res.warnings
        if warned:
            last = res.frame[(res.frame["estimator"] == "augmented")].iloc[-1]
            size = f"({last['time_shift'] / last['se']:+.1f} se)"
            assert size in drifts[0] and "within days" in drifts[0]
