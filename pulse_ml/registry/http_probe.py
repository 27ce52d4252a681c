"""Is the MLflow tracking server there, and does it take our credentials? (one line each).

A server that does not answer and one that answers but rejects the credentials need different
fixes (start it / set the password), so they get different messages. Credentials are those
MLflow itself sends: ``MLFLOW_TRACKING_TOKEN``, ``MLFLOW_TRACKING_USERNAME`` and
``MLFLOW_TRACKING_PASSWORD``, or a ``user:password@`` in the URI (taken out of the address, which
urllib cannot open, and sent as Basic authentication).
"""

from __future__ import annotations

import base64
import os
import urllib.error
import urllib.parse
import urllib.request

from pulse_ml.env.dbprobe import TIMEOUT_ENV
from pulse_ml.errors import PulseError
from pulse_ml.redact import redact_uri

_AUTH_CHECK = "/api/2.0/mlflow/experiments/search?max_results=1"


def _address_and_auth(uri: str) -> tuple[str, dict[str, str]]:
    """The URI without user-info, and the Authorization header MLflow would send."""
    parts = urllib.parse.urlsplit(uri)
    user, password = parts.username, parts.password
    if parts.username is not None:
        host = parts.netloc.rsplit("@", 1)[1]
        uri = urllib.parse.urlunsplit(parts._replace(netloc=host))
    token = os.environ.get("MLFLOW_TRACKING_TOKEN")
    user = os.environ.get("MLFLOW_TRACKING_USERNAME") or (urllib.parse.unquote(user or ""))
    password = os.environ.get("MLFLOW_TRACKING_PASSWORD") or urllib.parse.unquote(password or "")
    if token:
        return uri, {"Authorization": f"Bearer {token}"}
    if user or password:
        pair = base64.b64encode(f"{user}:{password}".encode()).decode()
        return uri, {"Authorization": f"Basic {pair}"}
    return uri, {}


def probe_http(uri: str, timeout: float) -> None:
    """Make sure an HTTP(S) tracking server answers within ``timeout`` s and takes our login.

    ``/health`` must answer (any HTTP status counts: the server is there); then one read-only
    API call must not be refused with 401/403.

    Raises:
        PulseError: naming the (redacted) URI: no answer in time (or refused, unknown host),
            or the credentials rejected.
    """
    address, headers = _address_and_auth(uri)
    shown = redact_uri(uri)
    base = address.rstrip("/")
    try:
        urllib.request.urlopen(urllib.request.Request(base + "/health", method="GET"),
                               timeout=timeout).close()
    except urllib.error.HTTPError:
        pass
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", None) or exc
        if isinstance(reason, TimeoutError) or "timed out" in str(reason):
            reason = f"no answer within {timeout:g} s"
        raise PulseError(f"MLflow tracking server {shown} does not answer ({reason}). "
                         "Start it or fix MLFLOW_TRACKING_URI (unset it to use the local store "
                         f"./mlruns/mlflow.db); {TIMEOUT_ENV} sets how long to wait "
                         f"(now {timeout:g} s).") from None
    try:
        urllib.request.urlopen(urllib.request.Request(base + _AUTH_CHECK, headers=headers,
                                                      method="GET"), timeout=timeout).close()
    except urllib.error.HTTPError as exc:
        if exc.code in (401, 403):
            given = "no credentials were given" if not headers else "the credentials given"
            raise PulseError(
                f"MLflow tracking server {shown} answers but refuses access (HTTP {exc.code} "
                f"{'Unauthorized' if exc.code == 401 else 'Forbidden'}; {given}). Set "
                "MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD (or "
                "MLFLOW_TRACKING_TOKEN) to an account of that server.") from None
    except (urllib.error.URLError, OSError, ValueError):
        return  # it answered /health: let MLflow report anything else in its own words
