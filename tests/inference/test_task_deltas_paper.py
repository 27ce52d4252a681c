"""Table 3 of the paper: Pearson r from its own columns, bootstrap CI, YAML checks."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import pearsonr

from pulse_ml.config import compose
from pulse_ml.errors import PulseError
from pulse_ml.inference.task_deltas import (
    comparison_from_mapping,
    correlate,
    load_comparisons,
    paper_deltas,
    pearson,
    pearson_bootstrap,
)
from pulse_ml.jobs import benchmarks


def test_shipped_table3_values():
    comps = {c.name: c for c in load_comparisons()}
    assert set(comps) == {"claude37_vs_claude4", "claude4_vs_gpt5"}
    gpt = comps["claude4_vs_gpt5"]
    assert gpt.case_study == "claude4_vs_gpt5" and len(gpt.rows) == 7
    assert [r.delta_h_paper for r in gpt.rows] == [4.01, 24.05, 7.54, -6.07, -7.84, -4.62, -17.9]
    assert [r.delta_b for r in gpt.rows] == [21.8, 28.87, 1.80, 15.81, 14.62, -0.75, 19.0]
    assert gpt.paper_pearson_printed == -0.18 and gpt.paper_pearson_text == -0.11
    c37 = comps["claude37_vs_claude4"]
    assert [r.delta_b for r in c37.rows][:3] == [22.8, -4.35, 12.4]
    assert c37.paper_pearson_printed == 0.66
    assert {r.benchmark for r in c37.rows} >= {"SWE-Bench", "SWT-Bench", "GAIA", "Commit0"}


@pytest.mark.parametrize(("name", "expected"), [("claude37_vs_claude4", 0.627),
                                                ("claude4_vs_gpt5", 0.303)])
def test_table3_own_columns_give_0627_and_0303(name, expected):
    comp = load_comparisons([name])[0]
    row = correlate(paper_deltas(comp), comp, "paper", n_boot=2000, alpha=0.05, seed=1)
    assert round(row["pearson_r"], 3) == expected
    h = [r.delta_h_paper for r in comp.rows]
    b = [r.delta_b for r in comp.rows]
    assert row["pearson_r"] == pytest.approx(pearsonr(h, b)[0], abs=1e-12)
    assert row["differs_from_printed"] and row["n_points"] == 7


def test_pearson_bootstrap_contains_r_and_is_seeded():
    comp = load_comparisons(["claude4_vs_gpt5"])[0]
    h = [r.delta_h_paper for r in comp.rows]
    b = [r.delta_b for r in comp.rows]
    a = pearson_bootstrap(h, b, n_boot=4000, seed=3)
    assert a.ci_lower < a.r < a.ci_upper
    assert a == pearson_bootstrap(h, b, n_boot=4000, seed=3)
    other = pearson_bootstrap(h, b, n_boot=4000, seed=4)
    assert (other.ci_lower, other.ci_upper) != (a.ci_lower, a.ci_upper)
    assert a.n_boot_valid > 3900  # only resamples with one distinct row lack an r


def test_bootstrap_interval_tracks_the_truth_in_a_seeded_simulation():
    # many task types, a true correlation of 0.6: the percentile interval should usually cover
    rng = np.random.default_rng(5)
    rho, k, covered = 0.6, 40, 0
    cov = [[1, rho], [rho, 1]]
    for rep in range(60):
        x, y = rng.multivariate_normal([0, 0], cov, size=k).T
        c = pearson_bootstrap(x, y, n_boot=1000, seed=rep)
        covered += c.ci_lower <= rho <= c.ci_upper
    assert covered >= 50  # ~95% nominal; percentile bootstrap of r undercovers a little


def test_pearson_degenerate_cases():
    assert math.isnan(pearson([1, 1, 1], [1, 2, 3]))
    few = pearson_bootstrap([1.0, 2.0], [3.0, 1.0])
    assert few.n_points == 2 and math.isnan(few.r) and math.isnan(few.ci_lower)


@pytest.mark.slow
def test_report_prints_computed_and_printed_values(pulse_home, capsys):
    corr = benchmarks.run(compose("benchmarks", ["source=paper", "bootstrap.n=1000",
                                                 f"output={pulse_home / 'b'}"]))
    out = capsys.readouterr().out
    assert "= 0.627" in out and "= 0.303" in out
    assert "rho = +0.66" in out and "rho = -0.18" in out and "-0.11" in out
    assert out.count("they DIFFER") == 2
    assert list(corr["pearson_r"].round(3)) == [0.627, 0.303]
    md = (pulse_home / "b" / "benchmarks.md").read_text()
    assert "0.627" in md and "+0.66" in md and "DIFFER" in md
    assert (pulse_home / "b" / "scatter.png").stat().st_size > 5000


def test_bad_comparison_yaml_and_names(tmp_path):
    with pytest.raises(PulseError, match=r"rows\[2\] lacks key\(s\) delta_b"):
        comparison_from_mapping({"name": "x", "rows": [
            {"task_type": "t", "benchmark": "b", "delta_h_paper": 1, "delta_b": 2},
            {"task_type": "t", "benchmark": "b", "delta_h_paper": 1}]}, "my.yaml")
    with pytest.raises(PulseError, match="'nope' is neither a shipped comparison"):
        load_comparisons(["nope"])
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nrows:\n  - {task_type: t, benchmark: b, delta_h_paper: 1, "
                   "delta_b: lots}\n")
    with pytest.raises(PulseError, match=r"bad.yaml: rows\[1\].delta_b: 'lots' is not a number"):
        load_comparisons([str(bad)])


def test_missing_case_study_is_a_clear_cli_error(small_demo, pulse_home, cli):
    res = cli("benchmarks", f"data.path={small_demo}", "comparisons=[claude37_vs_claude4]")
    assert res.returncode == 2, res.stderr
    assert "case study 'claude37_vs_claude4'" in res.stderr and "source=paper" in res.stderr
    assert "Traceback" not in res.stderr
