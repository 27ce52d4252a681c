"""The session table: reading, validating and summarising (the contract between every stage)."""

from pulse_ml.data.table import SessionTable, load_sessions, read_table

__all__ = ["SessionTable", "load_sessions", "read_table"]
