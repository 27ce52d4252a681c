"""engine=spark's local preflight: missing, non-Parquet and short inputs refused without a JVM."""

from __future__ import annotations

import pandas as pd
import pytest

from pulse_ml.errors import PulseError
from pulse_ml.inference.spark_scoring import preflight_local

NEEDED = ["session_id", "user_message_count", "day"]


def test_a_hive_partition_column_counts_as_present(tmp_path):
    for day in ("1", "2"):
        part = tmp_path / "sessions" / f"day={day}"
        part.mkdir(parents=True)
        pd.DataFrame({"session_id": [f"s{day}"], "user_message_count": [3]}).to_parquet(
            part / "part-0.parquet")
    (tmp_path / "sessions" / "_SUCCESS").write_text("")  # Spark's marker files are skipped
    preflight_local(str(tmp_path / "sessions"), NEEDED, "models:/m@champion")
    preflight_local(f"file://{tmp_path / 'sessions'}", NEEDED, "models:/m@champion")


def test_missing_path_short_table_and_non_parquet_are_one_message_each(tmp_path):
    with pytest.raises(PulseError, match="no such file or directory"):
        preflight_local(str(tmp_path / "nowhere"), NEEDED, "m")
    short = tmp_path / "short.parquet"
    pd.DataFrame({"session_id": ["a"]}).to_parquet(short)
    with pytest.raises(PulseError, match="missing column\\(s\\) 'user_message_count', 'day'"):
        preflight_local(str(short), NEEDED, "m")
    text = tmp_path / "t.parquet"
    text.write_text("session_id,day\na,1\n")
    with pytest.raises(PulseError, match="not readable as Parquet"):
        preflight_local(str(text), NEEDED, "m")


def test_remote_locations_are_left_to_spark(tmp_path):
    preflight_local("s3a://bucket/sessions/", NEEDED, "m")  # no error, nothing read
    preflight_local("hdfs://namenode/sessions", NEEDED, "m")
