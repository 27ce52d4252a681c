"""YAML aliases are expanded only within a bound (no "billion laughs" feature set)."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from pulse_ml.errors import PulseError
from pulse_ml.yaml_limits import MAX_ALIAS_NODES, alias_nodes, check_aliases


def bomb(levels: int, width: int = 10) -> str:
    """Anchor a0 lists ``width`` scalars; anchor a<i> lists ``width`` aliases of a<i-1>."""
    lines = ["name: bomb", "a0: &a0 [" + ",".join(["x"] * width) + "]"]
    lines += [f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * width) + "]"
              for i in range(1, levels + 1)]
    return "\n".join(lines + ["columns:", "  user_message_count: {kind: count}"]) + "\n"


def test_alias_nodes_counts_the_expansion():
    # a1 adds 10 x (a0 = 11 nodes: the list + 10 scalars); a2 adds 10 x (a1 = 1 + 110)
    assert alias_nodes(bomb(1)) == 110
    assert alias_nodes(bomb(2)) == 110 + 10 * 111
    assert alias_nodes("a: &x {b: 1}\nc: *x\n") == 3
    assert alias_nodes("a: [1, 2]\n") == 0


def test_nested_aliases_are_refused_in_one_line(tmp_path):
    path = tmp_path / "bomb.yaml"
    path.write_text(bomb(4))
    with pytest.raises(PulseError, match="expand to more than 10,000 nodes"):
        check_aliases(path)
    small = tmp_path / "ok.yaml"
    small.write_text(bomb(2))
    assert check_aliases(small) == small and alias_nodes(bomb(2)) < MAX_ALIAS_NODES


@pytest.mark.slow
def test_feature_set_bomb_exits_2_fast(small_demo, tmp_path, pulse_home):
    """Before: four levels took 50-100 s in the YAML loader and the run went on (exit 0)."""
    path = tmp_path / "bomb.yaml"
    path.write_text(bomb(5))
    start = time.perf_counter()
    res = subprocess.run([sys.executable, "-m", "pulse_ml", "validate",
                          f"data.path={small_demo}", f"features={path}"],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 2, res.stderr
    assert "bomb.yaml: its YAML aliases" in res.stderr and "Traceback" not in res.stderr
    assert time.perf_counter() - start < 30
