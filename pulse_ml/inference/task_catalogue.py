"""The task-benchmark catalogue (``conf/catalog/task_benchmarks/``), read into typed rows.

Per case study: rows of (task type, benchmark, Delta_H printed in the paper, Delta_B,
session-table categories).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from pulse_ml.env.paths import catalog_dir
from pulse_ml.errors import PulseError
from pulse_ml.yaml_limits import load_yaml_text

ROW_KEYS = ("task_type", "benchmark", "delta_h_paper", "delta_b")


@dataclass(frozen=True)
class BenchmarkRow:
    """One task type of a comparison.

    Attributes:
        task_type: Human-readable task type (e.g. "Fix Codebase Issues").
        benchmark: Benchmark standing for that task type (e.g. "SWE-Bench").
        delta_h_paper: Delta_H printed in the paper, % (NaN when unknown).
        delta_b: Benchmark delta, % (treatment - control).
        categories: Session-table category values forming the human subset (empty = none fits).
    """

    task_type: str
    benchmark: str
    delta_h_paper: float
    delta_b: float
    categories: tuple[str, ...] = ()


@dataclass(frozen=True)
class BenchmarkComparison:
    """Benchmark deltas of one case study (one YAML file of ``conf/catalog/task_benchmarks/``).

    Attributes:
        name: Comparison name (file stem by default).
        case_study: Case study (``case_study`` column value) whose arms are compared.
        rows: Task-type rows.
        description: One line for humans.
        paper_pearson_printed: Correlation printed under the paper's table (or None).
        paper_pearson_text: Correlation quoted in the paper's text, when different (or None).
    """

    name: str
    case_study: str
    rows: tuple[BenchmarkRow, ...]
    description: str = ""
    paper_pearson_printed: float | None = None
    paper_pearson_text: float | None = None


def _float_or_none(value, where: str) -> float | None:
    if value is None:
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        raise PulseError(f"{where}: '{value}' is not a number.") from None


def comparison_from_mapping(node: Mapping, source: str, default_name: str = "") -> \
        BenchmarkComparison:
    """Build a :class:`BenchmarkComparison` from a parsed YAML mapping.

    Args:
        node: The mapping (keys ``name``, ``case_study``, ``rows``, optional ``description``,
            ``paper_pearson_printed``, ``paper_pearson_text``).
        source: File name used in error messages.
        default_name: Name when the mapping has none.

    Raises:
        PulseError: naming the file, row and key that are wrong.
    """
    name = str(node.get("name") or default_name)
    rows_node = node.get("rows")
    if not name or not isinstance(rows_node, list) or not rows_node:
        raise PulseError(f"{source}: a benchmark comparison needs `name` and a non-empty list "
                         "`rows` (task_type, benchmark, delta_h_paper, delta_b, categories).")
    rows = []
    for i, row in enumerate(rows_node, start=1):
        missing = [k for k in ROW_KEYS if not isinstance(row, Mapping) or k not in row]
        if missing:
            raise PulseError(f"{source}: rows[{i}] lacks key(s) {', '.join(missing)}. Each row "
                             "needs task_type, benchmark, delta_h_paper (null if unknown), "
                             "delta_b and optionally categories.")
        d_h = _float_or_none(row["delta_h_paper"], f"{source}: rows[{i}].delta_h_paper")
        d_b = _float_or_none(row["delta_b"], f"{source}: rows[{i}].delta_b")
        if d_b is None:
            raise PulseError(f"{source}: rows[{i}].delta_b is empty; give the benchmark delta "
                             "in %.")
        cats = row.get("categories") or []
        if isinstance(cats, str):
            cats = [cats]
        rows.append(BenchmarkRow(str(row["task_type"]), str(row["benchmark"]),
                                 math.nan if d_h is None else d_h, d_b,
                                 tuple(str(c) for c in cats)))
    return BenchmarkComparison(
        name=name, case_study=str(node.get("case_study") or name), rows=tuple(rows),
        description=str(node.get("description") or ""),
        paper_pearson_printed=_float_or_none(node.get("paper_pearson_printed"),
                                             f"{source}: paper_pearson_printed"),
        paper_pearson_text=_float_or_none(node.get("paper_pearson_text"),
                                          f"{source}: paper_pearson_text"))


def load_comparisons(selected: Sequence[str] | None = None) -> list[BenchmarkComparison]:
    """Read comparisons: shipped catalogue files by name, or YAML files by path.

    Args:
        selected: Names of shipped comparisons or paths to YAML files; ``None`` = every shipped
            comparison.

    Raises:
        PulseError: unknown name, missing file or malformed YAML.
    """
    folder = catalog_dir("task_benchmarks")
    shipped = {p.stem: p for p in sorted(folder.glob("*.y*ml"))}
    if selected is None:
        paths = list(shipped.values())
    else:
        paths = []
        for item in selected:
            if item in shipped:
                paths.append(shipped[item])
            elif Path(item).expanduser().is_file():
                paths.append(Path(item).expanduser())
            else:
                raise PulseError(f"comparisons: '{item}' is neither a shipped comparison "
                                 f"({', '.join(shipped) or 'none'}) nor an existing YAML file.")
    out = []
    for path in paths:
        try:
            node = load_yaml_text(path, path.read_text()) or {}
        except yaml.YAMLError as exc:
            raise PulseError(f"{path}: not valid YAML ({str(exc).splitlines()[0]}).") from None
        if not isinstance(node, Mapping):
            raise PulseError(f"{path}: expected a mapping with name, case_study and rows.")
        out.append(comparison_from_mapping(node, str(path), default_name=path.stem))
    return out


