"""One exception type for every user-facing problem; the CLI turns it into exit code 2."""

from __future__ import annotations


class PulseError(Exception):
    """A problem the user can fix (bad input, missing model, wrong override).

    The message is printed as is, without a traceback, and the command exits with code 2.
    """

    exit_code = 2


MAX_PROBLEMS_SHOWN = 20


class DataError(PulseError):
    """The session table (or another input file) breaks the contract.

    The message lists at most :data:`MAX_PROBLEMS_SHOWN` problems and counts the rest: a
    feature set of 10,000 missing columns is one screen, not 10,001 lines. ``problems`` keeps
    them all.
    """

    def __init__(self, path: str, problems: list[str]):
        self.path = str(path)
        self.problems = list(problems)
        lines = [f"{self.path}: {len(self.problems)} problem(s) found"]
        lines += [f"  - {p}" for p in self.problems[:MAX_PROBLEMS_SHOWN]]
        if len(self.problems) > MAX_PROBLEMS_SHOWN:
            rest = len(self.problems) - MAX_PROBLEMS_SHOWN
            lines.append(f"  - ... and {rest:,} more problem(s) (the first "
                         f"{MAX_PROBLEMS_SHOWN} are shown; fix these and run again)")
        super().__init__("\n".join(lines))

