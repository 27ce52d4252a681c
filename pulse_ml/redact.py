"""Secrets are never printed: passwords in URIs and ``key=value`` text are masked as ``***``.

A database or server URI may carry a password in its user-info
(``postgresql://user:pw@host/db``) or in its query string (``?password=pw``,
``&sslpassword=…``, ``?token=…``). :func:`redact_uri` masks both in one URI (the known places
that show a URI: the tracking-store and Optuna-storage messages, MLflow tags and params);
:func:`redact_text` masks them anywhere in a text (driver errors that quote the URL or a
``password=…`` DSN). The CLI passes everything it prints through :class:`RedactingStream`, a
safety net for a message that quotes a URI it was not meant to.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

MASK = "***"
# Query or DSN keys whose values are secrets: a key that ends in password, passwd, pwd,
# secret, token, api_key/apikey or access_key (sslpassword, client_secret, access_token ...);
# max_tokens or api_key_env (the name of a variable) are not secrets.
_SECRET_KEY = r"[\w.-]*?(?:pass(?:word|wd)|pwd|secret|token|api[_-]?key|access[_-]?key)"
_KEY_VALUE = re.compile(rf"(?i)(?<![\w.-])({_SECRET_KEY})(\s*=\s*)"
                        r"(\"[^\"]*\"|'[^']*'|[^&\s'\",;)\]}]+?)(?=[&\s'\",;)\]}]|:\s|:$|$)")
# scheme://user:password@host — the password may hold '@' or '/' (SQLAlchemy reads up to the
# last '@'): it ends at the last '@' of the word (masking too much is safe, too little not).
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)([^\s/?#@:]*):(\S*)@")


def redact_uri(uri: str) -> str:
    """``uri`` with its password (user-info and secret query values) replaced by ``***``.

    The URI is masked as text (not parsed and rebuilt), so everything else in it stays exactly
    as given (``sqlite:////abs/path``, an IPv6 host, a bracket the URI parser refuses).

    Args:
        uri: Any URI or plain path.

    Returns:
        The URI, safe to print (unchanged when it holds no secret).
    """
    return redact_text(uri)


def redact_text(text: str) -> str:
    """``text`` with URI passwords and ``password=…``-style values replaced by ``***``."""
    if not text or ("=" not in text and "@" not in text):
        return text
    text = _USERINFO.sub(lambda m: f"{m.group(1)}{m.group(2)}:{MASK}@"
                         if m.group(3) != MASK else m.group(0), text)
    return _KEY_VALUE.sub(lambda m: f"{m.group(1)}{m.group(2)}{MASK}", text)


def redact_values(values: Mapping[str, Any]) -> dict[str, Any]:
    """A tags or params mapping whose text values went through :func:`redact_text`."""
    return {k: redact_text(v) if isinstance(v, str) else v for k, v in values.items()}


class RedactingStream:
    """A text stream that masks secrets in everything written to it (see module docstring).

    Args:
        stream: The stream to write to (``sys.stdout`` or ``sys.stderr``).
    """

    def __init__(self, stream):
        self._stream = stream

    def write(self, text: str) -> int:
        """Write ``text`` with its secrets masked; returns the length of ``text``."""
        self._stream.write(redact_text(text))
        return len(text)

    def __getattr__(self, name: str):
        return getattr(self._stream, name)
