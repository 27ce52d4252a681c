"""`score engine=spark` without a usable Java: one line saying to install Java 17 or use local."""

from __future__ import annotations

import pytest


def test_spark_without_java_is_one_line(small_demo, pulse_home, cli, tmp_path, trained_home):
    pytest.importorskip("pyspark")
    trained_home("model=mean", "progress=false")
    fake = tmp_path / "no-java"
    (fake / "bin").mkdir(parents=True)  # JAVA_HOME without a java in it
    res = cli("score", "engine=spark", "spark_master='local[1]'", f"data.path={small_demo}",
              f"out={tmp_path / 'scores.parquet'}", "progress=false",
              env={"JAVA_HOME": str(fake)}, timeout=240)
    assert res.returncode == 2, res.stdout + res.stderr[-2000:]
    last = res.stderr.strip().splitlines()[-1]
    assert "Install Java 17" in last and "engine=local" in last
    assert "Traceback" not in res.stderr and "unexpectedly" not in res.stderr
