"""A warm interpreter that forks ``pulse-ml`` commands for the tests (``tests/support/forkcli.py``).

Started once per pytest worker, it imports the heavy third-party libraries (MLflow, scikit-learn,
LightGBM, pandas, SciPy, Optuna, Hydra, Matplotlib) and then forks one child per command. The
child is a real, separate process running the real entry point (``pulse_ml.cli.main``) with the
test's environment, working directory and argv, stdout/stderr into files, and the interpreter's
exit sequence (non-daemon threads joined, ``atexit`` handlers, flush). It skips only the ~3 s of
library imports every fresh ``python -m pulse_ml`` pays. pulse_ml itself is imported fresh in each
child, so nothing of it is shared between commands. Libraries that read the environment when
imported are not preloaded (LiteLLM, PySpark).

Protocol (JSON lines): stdin requests ``{"id", "args", "env", "cwd", "out", "err"}``; stdout
answers ``{"id", "pid"}`` after the fork and ``{"id", "code"}`` when the child ended (exit status,
or minus the signal number that ended it).
"""

from __future__ import annotations

import json
import os
import select
import signal
import sys

PRELOAD = (
    "numpy", "pandas", "pyarrow", "pyarrow.parquet", "pyarrow.dataset", "scipy.stats",
    "scipy.special", "sklearn.ensemble", "sklearn.linear_model", "sklearn.model_selection",
    "sklearn.pipeline", "sklearn.preprocessing", "sklearn.compose", "lightgbm", "optuna",
    "hydra", "omegaconf", "hydra.core.global_hydra", "matplotlib", "matplotlib.pyplot", "tqdm",
    "sqlalchemy", "mlflow", "mlflow.tracking", "mlflow.pyfunc", "mlflow.models",
    "mlflow.store.tracking.sqlalchemy_store", "mlflow.store.model_registry.sqlalchemy_store",
    "yaml", "threadpoolctl", "joblib",
)


def _preload() -> None:
    import importlib

    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - an optional library: the child imports it itself
            pass


def _child(req: dict, protocol: tuple[int, int]) -> None:
    """Become the command: never returns (``os._exit``)."""
    import atexit
    import importlib.util
    import io
    import threading
    import traceback
    import types

    for fd in protocol:
        os.close(fd)
    for sig in (signal.SIGTERM, signal.SIGCHLD, signal.SIGHUP, signal.SIGQUIT):
        signal.signal(sig, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)  # as any Python interpreter
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    for fd, path in ((1, req["out"]), (2, req["err"])):
        target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(target, fd)
        os.close(target)
    os.close(null)
    sys.stdin = sys.__stdin__ = io.TextIOWrapper(io.FileIO(0, "r", closefd=False),
                                                 encoding="utf-8")
    sys.stdout = sys.__stdout__ = io.TextIOWrapper(io.FileIO(1, "w", closefd=False),
                                                   encoding="utf-8")
    sys.stderr = sys.__stderr__ = io.TextIOWrapper(io.FileIO(2, "w", closefd=False),
                                                   encoding="utf-8", errors="backslashreplace",
                                                   line_buffering=True)
    os.environ.clear()
    os.environ.update(req["env"])
    if req.get("cwd"):
        os.chdir(req["cwd"])
    # `python -m pulse_ml`: __main__ is pulse_ml/__main__.py (spawned workers import it)
    spec = importlib.util.find_spec("pulse_ml.__main__")
    main_module = types.ModuleType("__main__")
    main_module.__spec__ = spec
    main_module.__file__ = spec.origin
    sys.modules["__main__"] = main_module
    sys.argv = [spec.origin, *req["args"]]
    code = 0
    try:
        from pulse_ml.cli import main

        main()
    except SystemExit as exc:
        if exc.code is None:
            code = 0
        elif isinstance(exc.code, int):
            code = exc.code
        else:
            print(exc.code, file=sys.stderr)
            code = 1
    except BaseException:  # noqa: BLE001 - what the interpreter does with an uncaught error
        traceback.print_exc()
        code = 1
    try:
        threading._shutdown()  # type: ignore[attr-defined] - join non-daemon threads
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code & 0xFF)


def _send(out, message: dict) -> None:
    out.write(json.dumps(message) + "\n")
    out.flush()


def serve() -> None:
    """Answer requests until stdin closes; children are reaped as they end."""
    proto_in = os.dup(0)
    proto_out = os.dup(1)
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    os.close(devnull)
    _preload()
    out = os.fdopen(proto_out, "w")
    buffer = b""
    running: dict[int, int] = {}
    while True:
        ready, _, _ = select.select([proto_in], [], [], 0.02)
        while running:
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                break
            code = (os.waitstatus_to_exitcode(status))
            _send(out, {"id": running.pop(pid), "code": code})
        if not ready:
            continue
        chunk = os.read(proto_in, 1 << 20)
        if not chunk:
            break
        buffer += chunk
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            req = json.loads(line)
            pid = os.fork()
            if pid == 0:
                _child(req, (proto_in, proto_out))
            running[pid] = req["id"]
            _send(out, {"id": req["id"], "pid": pid})
    for pid in list(running):
        os.kill(pid, signal.SIGKILL)


if __name__ == "__main__":
    serve()
