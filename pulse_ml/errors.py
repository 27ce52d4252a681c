"""One exception type for every user-facing problem; the CLI turns it into exit code 2."""

from __future__ import annotations


class PulseError(Exception):
    """A problem the user can fix (bad input, missing model, wrong override).

    The message is printed as is, without a traceback, and the command exits with code 2.
    """

    exit_code = 2


class DataError(PulseError):
    """The session table (or another input file) breaks the contract."""

    def __init__(self, path: str, problems: list[str]):
        self.path = str(path)
        self.problems = list(problems)
        lines = [f"{self.path}: {len(self.problems)} problem(s) found"]
        lines += [f"  - {p}" for p in self.problems]
        super().__init__("\n".join(lines))
