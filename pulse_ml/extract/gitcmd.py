"""Which git subcommands a shell command line executes (commit / push / pull / reset / rebase).

Only the *command words* count: ``echo "git push"`` pushes nothing, while
``cd repo && GIT_SSH=x sudo -E git -C sub -c k=v push`` does. Commands are tokenized with
:mod:`shlex` (quotes, escapes), split at ``;``, ``&&``, ``||``, ``|``, ``&``, newlines and
parentheses, stripped of env assignments and wrappers (``sudo``, ``env``, ``time``, ``nohup``,
``timeout N`` ...), and ``sh -c '...'`` is parsed recursively.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable
from functools import lru_cache

import pandas as pd

GIT_FLAGS = ("commit", "push", "pull", "reset", "rebase")

_SEPARATORS = frozenset({";", "&&", "||", "|", "&", "|&", "(", ")", ";;", "{", "}", "!"})
_ASSIGN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_REDIRECT = frozenset({"<", ">", ">>", "<<", "<<<", ">&", "<&", "&>", "&>>"})
# Wrappers: name -> options that take a separate argument.
_WRAPPERS: dict[str, frozenset[str]] = {
    "sudo": frozenset({"-u", "-g", "-h", "-p", "-C", "-D", "-r", "-t", "-U"}),
    "env": frozenset({"-u", "-C", "-S", "--unset", "--chdir"}),
    "command": frozenset(),
    "exec": frozenset({"-a"}),
    "builtin": frozenset(),
    "time": frozenset({"-f", "-o"}),
    "nohup": frozenset(),
    "nice": frozenset({"-n"}),
    "ionice": frozenset({"-c", "-n"}),
    "stdbuf": frozenset({"-i", "-o", "-e"}),
    "xargs": frozenset({"-I", "-n", "-P", "-d", "-L", "-s", "-E"}),
    "then": frozenset(), "do": frozenset(), "else": frozenset(), "if": frozenset(),
    "while": frozenset(), "until": frozenset(),
}
_SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh"})
# git global options that take a separate value.
_GIT_OPTS_WITH_VALUE = frozenset({"-C", "-c", "--git-dir", "--work-tree", "--namespace",
                                  "--super-prefix", "--config-env", "--exec-path"})


def _tokenize(command: str) -> list[str]:
    text = command.replace("\\\r\n", " ").replace("\\\n", " ").replace("\r\n", "\n")
    text = text.replace("\n", " ; ")
    try:
        lex = shlex.shlex(text, posix=True, punctuation_chars=";&|()<>")
        lex.whitespace_split = True
        return list(lex)
    except ValueError:  # unbalanced quotes: fall back to a crude split
        crude = re.sub(r"(&&|\|\||[;|&()])", r" \1 ", text)
        return [t.strip("'\"") for t in crude.split()]


def _simple_commands(tokens: list[str]) -> list[list[str]]:
    out: list[list[str]] = []
    current: list[str] = []
    for tok in tokens:
        if tok in _SEPARATORS:
            if current:
                out.append(current)
            current = []
        else:
            current.append(tok)
    if current:
        out.append(current)
    return out


def _strip_prefixes(words: list[str]) -> list[str]:
    """Drop env assignments, redirections and wrapper commands in front of the command word."""
    i = 0
    while i < len(words):
        word = words[i]
        if _ASSIGN.match(word):
            i += 1
        elif word in _REDIRECT:
            i += 2
        elif word.rsplit("/", 1)[-1] in _WRAPPERS:
            opts = _WRAPPERS[word.rsplit("/", 1)[-1]]
            i += 1
            while i < len(words) and (words[i].startswith("-") or _ASSIGN.match(words[i])):
                i += 2 if words[i] in opts else 1
        elif word == "timeout":
            i += 1
            while i < len(words) and words[i].startswith("-"):
                i += 1
            i += 1  # the duration
        else:
            break
    return words[i:]


def _git_subcommand(words: list[str]) -> str | None:
    i = 1
    while i < len(words):
        word = words[i]
        if word in _GIT_OPTS_WITH_VALUE:
            i += 2
        elif word.startswith("-"):
            i += 1
        else:
            return word
    return None


@lru_cache(maxsize=65536)
def git_subcommands(command: str, _depth: int = 0) -> frozenset[str]:
    """Return the git subcommands a shell command line runs.

    Args:
        command: One shell command line as the agent executed it.

    Returns:
        The set of git subcommands (``{"add", "commit"}`` for ``git add . && git commit -m x``).

    Examples:
        >>> sorted(git_subcommands('cd repo && git -C sub commit -m "git push"'))
        ['commit']
        >>> git_subcommands('echo "git push"')
        frozenset()
    """
    if "git" not in command:
        return frozenset()
    found: set[str] = set()
    for simple in _simple_commands(_tokenize(command)):
        words = _strip_prefixes(simple)
        if not words:
            continue
        name = words[0].rsplit("/", 1)[-1]
        if name == "git":
            sub = _git_subcommand(words)
            if sub:
                found.add(sub)
        elif name in _SHELLS and _depth < 3:
            for j, word in enumerate(words[1:-1], start=1):
                if word.startswith("-") and "c" in word.lstrip("-") and not word.startswith("--"):
                    found |= git_subcommands(words[j + 1], _depth + 1)
                    break
    return frozenset(found)


def git_flags(commands: Iterable[str]) -> dict[str, int]:
    """Return ``{git_commit: 0/1, ...}`` for the commands of one session."""
    seen: set[str] = set()
    for cmd in commands:
        seen |= git_subcommands(cmd)
    return {f"git_{flag}": int(flag in seen) for flag in GIT_FLAGS}


def git_flag_frame(session_ids: pd.Series, commands: pd.Series) -> pd.DataFrame:
    """Vectorized git flags for many sessions.

    Args:
        session_ids: One entry per executed command: the session it belongs to.
        commands: The command lines (same length).

    Returns:
        A frame indexed by session id with int columns ``git_commit`` ... ``git_rebase``
        (sessions without any git command are absent; fill with 0).
    """
    cols = [f"git_{f}" for f in GIT_FLAGS]
    frame = pd.DataFrame({"session_id": session_ids.to_numpy(), "command": commands.to_numpy()})
    frame = frame[frame["command"].astype(str).str.contains("git", regex=False)]
    if frame.empty:
        return pd.DataFrame(columns=cols, dtype="int64")
    unique = pd.Series(frame["command"].unique())
    subs = dict(zip(unique, unique.map(git_subcommands), strict=True))
    mapped = frame["command"].map(subs)
    out = pd.DataFrame({"session_id": frame["session_id"].to_numpy()})
    for flag, col in zip(GIT_FLAGS, cols, strict=True):
        out[col] = mapped.map(lambda s, f=flag: f in s).to_numpy().astype("int64")
    return out.groupby("session_id", sort=False)[cols].max()
