"""The ``pulse-ml`` command: ``pulse-ml <verb> [hydra overrides]``.

Each verb composes ``conf/<verb>.yaml`` and calls ``run(cfg)`` of its job module. Heavy
libraries are imported only by the job modules, so ``--help`` stays fast.
"""

from __future__ import annotations

import importlib
import os
import sys
import time

# verb -> (job module, one-line description). Order = order in --help.
VERBS: dict[str, tuple[str, str]] = {
    "pipeline": ("pulse_ml.jobs.pipeline", "end to end: demo data if none, train, promote, infer"),
    "simulate": ("pulse_ml.jobs.simulate", "write calibrated demo sessions (+ ground truth)"),
    "validate": ("pulse_ml.jobs.validate", "check a session table against the contract"),
    "extract": ("pulse_ml.jobs.extract", "turn raw agent sessions into a session table"),
    "judge": ("pulse_ml.jobs.judge", "score sessions with an LLM-as-a-judge baseline"),
    "discover": ("pulse_ml.jobs.discover", "ask LLMs to propose satisfaction features"),
    "train": ("pulse_ml.jobs.train", "tune a model family (Optuna, 5-fold CV), log and register"),
    "promote": ("pulse_ml.jobs.promote", "move the `champion` alias to a model version by hand"),
    "compare": ("pulse_ml.jobs.compare", "table of every family and LLM judge in the experiment"),
    "infer": ("pulse_ml.jobs.infer", "naive vs PPI++ effects and intervals per case study"),
    "monitor": ("pulse_ml.jobs.monitor", "anytime-valid daily monitoring: the day a test is "
                "conclusive"),
    "audit": ("pulse_ml.jobs.audit", "split-half audit of the intervals (+ a consistency check)"),
    "plan": ("pulse_ml.jobs.plan", "labels per arm needed to detect an effect, naive vs PPI"),
    "score": ("pulse_ml.jobs.score", "predict satisfaction for a large table in bounded memory"),
    "benchmarks": ("pulse_ml.jobs.benchmarks", "human effect vs benchmark deltas per task type"),
    "agreement": ("pulse_ml.jobs.agreement", "agreement with human pairwise preferences"),
    "ui": ("pulse_ml.jobs.ui", "the MLflow UI on this store: pulse-train's runs, one worker"),
}

# Verbs whose outputs are all-or-nothing for the whole command (env.staging.command): put in
# place only when the verb returns. Not `pipeline`: it reads the demo data it has just written.
ALL_OR_NOTHING = frozenset({"infer", "audit", "monitor", "compare", "score", "extract", "judge",
                            "request", "benchmarks", "agreement", "discover"})


def _usage() -> str:
    width = max(len(v) for v in VERBS)
    lines = [
        "usage: pulse-ml <verb> [key=value ...] [-m key=a,b ...]",
        "",
        "PULSE: conclusive A/B tests of AI-agent designs with a fraction of the human ratings.",
        "",
        "verbs:",
    ]
    for verb, (_, text) in VERBS.items():
        lines.append(f"  {verb.ljust(width)}  {text}")
    lines += [
        "",
        "options (after the verb):",
        "  --help, -h     the verb's description and its composed config",
        "  --cfg          print the composed config and exit",
        "  -m, --multirun run once per combination of comma-separated values",
        "",
        "Overrides are Hydra syntax, e.g. `pulse-ml train model=lightgbm tuning.n_trials=50`.",
    ]
    return "\n".join(lines)


def _module_doc(module: str) -> str:
    """A job module's docstring without importing it (keeps --help fast)."""
    import ast
    import importlib.util

    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        return ""
    with open(spec.origin, encoding="utf-8") as fh:
        return (ast.get_docstring(ast.parse(fh.read())) or "").strip()


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``pulse-ml`` console script."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help", "help"):
        print(_usage())
        return
    verb, rest = args[0], args[1:]
    if verb not in VERBS:
        import difflib

        close = difflib.get_close_matches(verb, list(VERBS), n=1)
        hint = f" Did you mean '{close[0]}'?" if close else ""
        print(f"pulse-ml: unknown verb '{verb}'.{hint}\n\n{_usage()}", file=sys.stderr)
        sys.exit(2)
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    multirun = any(a in ("-m", "--multirun") for a in rest)
    show_help = any(a in ("-h", "--help") for a in rest)
    show_cfg = "--cfg" in rest
    overrides = [a for a in rest if not a.startswith("-")]
    unknown = [a for a in rest if a.startswith("-") and a not in
               ("-m", "--multirun", "-h", "--help", "--cfg")]
    if unknown:
        print(f"pulse-ml {verb}: unknown option {unknown[0]}. Overrides are key=value.",
              file=sys.stderr)
        sys.exit(2)

    from pulse_ml.env import signals
    from pulse_ml.errors import PulseError
    from pulse_ml.redact import RedactingStream

    # A password in a URI (user-info or ?password=) is never printed, whoever prints it.
    sys.stdout, sys.stderr = RedactingStream(sys.stdout), RedactingStream(sys.stderr)

    signals.install()  # SIGTERM (a scheduler, `kill`) is handled like Ctrl-C
    try:
        from pulse_ml.config_check import quick_check

        quick_check(verb, [o for o in overrides if "," not in o or not multirun])
        from pulse_ml.config import compose, expand_sweeps, to_yaml

        jobs = expand_sweeps(overrides) if multirun else [overrides]
        for job in jobs[1:]:  # every combination of a sweep is checked before the first runs
            quick_check(verb, job)
        if show_help or show_cfg:
            if show_help:
                from pulse_ml.config_check import defaults_of, group_options

                print(f"pulse-ml {verb}: {VERBS[verb][1]}\n")
                print(_module_doc(VERBS[verb][0]) + "\n")
                groups = defaults_of(verb)
                if groups:
                    print("config groups (group=option, or group=path/to/file.yaml):")
                    for group, default in groups.items():
                        opts = ", ".join(o + ("*" if o == default else "")
                                         for o in group_options(group))
                        print(f"  {group}: {opts}")
                    print("  (* = default)\n")
                print("composed config (override any key with key=value):\n")
            print(to_yaml(compose(verb, jobs[0])))
            return
        configs = [compose(verb, job) for job in jobs]  # every combination before the first run
        module = importlib.import_module(VERBS[verb][0])
        if len(configs) > 1 and hasattr(module, "settings_from_config"):
            for cfg in configs:  # a bad value in a later combination fails before any run
                module.settings_from_config(cfg)
        for i, (job, cfg) in enumerate(zip(jobs, configs, strict=True)):
            if len(jobs) > 1:
                print(f"\n[{i + 1}/{len(jobs)}] pulse-ml {verb} {' '.join(job)}")
            start = time.perf_counter()
            if verb in ALL_OR_NOTHING:
                from pulse_ml.env import staging

                with staging.command():
                    module.run(cfg)
            else:
                module.run(cfg)
            if len(jobs) > 1:
                print(f"[{i + 1}/{len(jobs)}] done in {time.perf_counter() - start:.1f} s")
    except PulseError as exc:
        if os.environ.get("PULSE_DEBUG"):
            import traceback

            traceback.print_exception(exc, file=sys.stderr)
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)
    except BrokenPipeError:  # e.g. `pulse-ml train --help | head`
        sys.stderr.close()
        sys.exit(0)
    except KeyboardInterrupt as exc:
        terminated = isinstance(exc, signals.Terminated)
        print("terminated (SIGTERM)" if terminated else "interrupted", file=sys.stderr)
        sys.exit(signals.exit_code(exc))
    except Exception as exc:  # noqa: BLE001 - last resort: one line, not a traceback
        if os.environ.get("PULSE_DEBUG"):
            raise
        from pulse_ml.env.faults import explain

        fault = explain(exc)  # a full disk, a read-only folder, a locked database: not a bug
        if fault is not None:
            print(f"error: pulse-ml {verb}: {fault}", file=sys.stderr)
            sys.exit(2)
        print(f"error: pulse-ml {verb} failed unexpectedly: {type(exc).__name__}: {exc}\n"
              "  Set PULSE_DEBUG=1 to see the traceback, and please report it.", file=sys.stderr)
        sys.exit(1)
