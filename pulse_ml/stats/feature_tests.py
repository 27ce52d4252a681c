"""Per-feature tests between arms (the paper's Tables 6-9) and the labeled-vs-unlabeled shift.

Feature kinds:

* ``flag`` (0/1): Fisher exact test on the 2x2 table arm x flag; means are proportions.
* ``count`` / ``numeric``: Welch t-test (unequal variances).
* ``categorical``: one row per level, Fisher exact test of level-vs-rest; means are shares.

All p-values of one call are adjusted together with Benjamini-Hochberg (q-values).
The shift diagnostic reports the rank-biserial correlation ``2 U / (n1 n2) - 1`` of the
Mann-Whitney U statistic of the labeled sample (positive: labeled sessions have larger values).
Missing values are dropped per feature.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import numpy as np
import pandas as pd

from pulse_ml.errors import PulseError

__all__ = ["KINDS", "LARGE_SHIFT", "compare_features", "labeled_shift"]

KINDS = ("flag", "count", "numeric", "categorical")
LARGE_SHIFT = 0.3  # |rank-biserial| at or above this is a large shift (Cohen-style convention)

_COMPARE_COLUMNS = [
    "feature",
    "level",
    "kind",
    "mean_control",
    "mean_treatment",
    "diff",
    "p_value",
    "test",
    "q_value",
]
_SHIFT_COLUMNS = [
    "feature",
    "level",
    "kind",
    "mean_labeled",
    "mean_unlabeled",
    "n_labeled",
    "n_unlabeled",
    "rank_biserial",
    "p_value",
    "large",
]


def _check(frames: Mapping[str, pd.DataFrame], kinds: Mapping[str, str]) -> None:
    problems = []
    for feature, kind in kinds.items():
        if kind not in KINDS:
            problems.append(f"feature {feature!r}: unknown kind {kind!r} (use one of {KINDS})")
        for name, df in frames.items():
            if feature not in df.columns:
                problems.append(f"{name}: column {feature!r} is missing")
    if problems:
        raise PulseError("feature comparison: " + "; ".join(problems))


def _numeric(series: pd.Series, feature: str, where: str) -> np.ndarray:
    values = pd.to_numeric(series, errors="coerce")
    bad = values.isna() & series.notna()
    if bad.any():
        rows = series.index[bad][:5].tolist()
        raise PulseError(
            f"{where}: column {feature!r} must be numeric; non-numeric values in rows {rows}"
        )
    return values.dropna().to_numpy(dtype=np.float64)


def _indicators(
    a: pd.Series, b: pd.Series, feature: str, kind: str, names: tuple[str, str]
) -> Iterator[tuple[str | None, np.ndarray, np.ndarray]]:
    """Yield (level, values_a, values_b); categorical features yield one 0/1 pair per level."""
    if kind == "categorical":
        a, b = a.dropna().astype(str), b.dropna().astype(str)
        for level in sorted(set(a.unique()) | set(b.unique())):
            yield level, (a == level).to_numpy(float), (b == level).to_numpy(float)
        return
    va, vb = _numeric(a, feature, names[0]), _numeric(b, feature, names[1])
    if kind == "flag":
        for v, name in ((va, names[0]), (vb, names[1])):
            if not np.isin(v, (0.0, 1.0)).all():
                raise PulseError(f"{name}: flag column {feature!r} must hold only 0/1 values")
    yield None, va, vb


def _fisher(x: np.ndarray, y: np.ndarray) -> float:
    from scipy import stats  # imported on use: scipy.stats costs ~1 s to import

    table = [[int(x.sum()), int(x.size - x.sum())], [int(y.sum()), int(y.size - y.sum())]]
    return float(stats.fisher_exact(table).pvalue)


def _welch(x: np.ndarray, y: np.ndarray) -> float:
    from scipy import stats  # imported on use: scipy.stats costs ~1 s to import

    if x.size < 2 or y.size < 2:
        return float("nan")
    if np.ptp(x) == 0 and np.ptp(y) == 0:  # both constant: t undefined
        return 1.0 if x[0] == y[0] else 0.0
    return float(stats.ttest_ind(x, y, equal_var=False).pvalue)


def _bh(p: pd.Series) -> pd.Series:
    from scipy import stats  # imported on use: scipy.stats costs ~1 s to import

    q = pd.Series(np.nan, index=p.index, dtype=float)
    ok = p.notna()
    if ok.any():
        q[ok] = stats.false_discovery_control(p[ok].to_numpy(float), method="bh")
    return q


def compare_features(
    df_control: pd.DataFrame, df_treatment: pd.DataFrame, kinds: Mapping[str, str]
) -> pd.DataFrame:
    """Test every feature for a difference between the arms (paper Tables 6-9).

    Args:
        df_control: Sessions of the control arm (one row per session).
        df_treatment: Sessions of the treatment arm.
        kinds: Feature column -> kind (``flag``, ``count``, ``numeric``, ``categorical``).

    Returns:
        One row per feature (per level for categorical features) with columns feature, level,
        kind, mean_control, mean_treatment, diff (treatment - control), p_value, test
        (``fisher`` or ``welch``) and q_value (Benjamini-Hochberg over all rows).

    Raises:
        PulseError: If a column is missing, a kind unknown or a value not of its kind.
    """
    _check({"control sessions": df_control, "treatment sessions": df_treatment}, kinds)
    rows = []
    for feature, kind in kinds.items():
        pairs = _indicators(
            df_control[feature],
            df_treatment[feature],
            feature,
            kind,
            ("control sessions", "treatment sessions"),
        )
        for level, xc, xt in pairs:
            welch = kind in ("count", "numeric")
            p = _welch(xc, xt) if welch else _fisher(xc, xt)
            mc = float(xc.mean()) if xc.size else float("nan")
            mt = float(xt.mean()) if xt.size else float("nan")
            rows.append((feature, level, kind, mc, mt, mt - mc, p, "welch" if welch else "fisher"))
    out = pd.DataFrame(rows, columns=_COMPARE_COLUMNS[:-1])
    out["q_value"] = _bh(out["p_value"])
    return out


def _rank_biserial(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    from scipy import stats  # imported on use: scipy.stats costs ~1 s to import

    if x.size == 0 or y.size == 0:
        return float("nan"), float("nan")
    both = np.concatenate([x, y])
    if np.ptp(both) == 0:  # no variation at all: no shift
        return 0.0, 1.0
    res = stats.mannwhitneyu(x, y, alternative="two-sided")
    return float(2.0 * res.statistic / (x.size * y.size) - 1.0), float(res.pvalue)


def labeled_shift(
    df_labeled: pd.DataFrame,
    df_unlabeled: pd.DataFrame,
    kinds: Mapping[str, str],
    large: float = LARGE_SHIFT,
) -> pd.DataFrame:
    """Shift between labeled (rated) and unlabeled sessions, per feature.

    Args:
        df_labeled: Sessions that have a rating.
        df_unlabeled: Sessions without a rating.
        kinds: Feature column -> kind (categorical features get one row per level, 0/1 coded).
        large: Threshold on ``|rank_biserial|`` for the ``large`` flag.

    Returns:
        Columns feature, level, kind, mean_labeled, mean_unlabeled, n_labeled, n_unlabeled,
        rank_biserial (``2 U / (n1 n2) - 1``, U of the labeled sample; > 0 when labeled
        values are larger), p_value (Mann-Whitney, two-sided) and large.

    Raises:
        PulseError: If a column is missing, a kind unknown or a value not of its kind.
    """
    _check({"labeled sessions": df_labeled, "unlabeled sessions": df_unlabeled}, kinds)
    rows = []
    for feature, kind in kinds.items():
        pairs = _indicators(
            df_labeled[feature],
            df_unlabeled[feature],
            feature,
            kind,
            ("labeled sessions", "unlabeled sessions"),
        )
        for level, xl, xu in pairs:
            rbc, p = _rank_biserial(xl, xu)
            ml = float(xl.mean()) if xl.size else float("nan")
            mu = float(xu.mean()) if xu.size else float("nan")
            rows.append((feature, level, kind, ml, mu, xl.size, xu.size, rbc, p))
    out = pd.DataFrame(rows, columns=_SHIFT_COLUMNS[:-1])
    out["large"] = out["rank_biserial"].abs() >= large
    return out
