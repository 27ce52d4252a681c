"""The ``pulse-ml`` command: ``pulse-ml <verb> [hydra overrides]``.

Each verb composes ``conf/<verb>.yaml`` and calls ``run(cfg)`` of its job module. Heavy
libraries are imported only by the job modules, so ``--help`` stays fast and a value out of
range (``settings.check_early``) is refused before they are.
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
    "request": ("pulse_ml.jobs.request", "whom to ask for a rating: request probabilities "
                "(active PPI++)"),
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
        "       pulse-ml help <verb>    (= pulse-ml <verb> --help)",
        "       pulse-ml --version, -V",
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
        "  --cfg job      the same, as Hydra spells it (--cfg all too; -c for --cfg)",
        "  --info, -i     the config directory, search path and the verb's config groups",
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


# Hydra's forms of --cfg and --info (the word after the option); pulse-ml composes configs with
# Hydra's compose API and runs no Hydra app, so it has no `hydra` config to print.
CFG_FORMS = ("job", "all")
INFO_FORMS = ("all", "config", "defaults", "defaults-tree", "plugins", "searchpath")


def _is_word(arg: str) -> bool:
    """A bare word (no ``=``, no leading ``-``, ``+`` or ``~``): never an override."""
    return "=" not in arg and not arg.startswith(("-", "+", "~"))


def _take_forms(rest: list[str]) -> tuple[list[str], str | None, str | None]:
    """Take ``--cfg [form]`` / ``-c`` and ``--info [form]`` / ``-i`` out of a verb's arguments.

    Returns:
        ``(other arguments, --cfg form, --info form)``; a form is None when its option is
        absent, ``job`` for a bare ``--cfg`` and ``all`` for a bare ``--info``.
    """
    kept: list[str] = []
    forms: dict[str, str | None] = {"cfg": None, "info": None}
    i = 0
    while i < len(rest):
        name, eq, value = rest[i].partition("=")
        which = {"--cfg": "cfg", "-c": "cfg", "--info": "info", "-i": "info"}.get(name)
        if which is None:
            kept.append(rest[i])
        else:
            if not eq and i + 1 < len(rest) and _is_word(rest[i + 1]):
                i += 1
                value = rest[i]
            forms[which] = value or ("job" if which == "cfg" else "all")
        i += 1
    return kept, forms["cfg"], forms["info"]


def _form_problem(verb: str, cfg_form: str | None, info_form: str | None) -> str | None:
    """The one-line message for a form of --cfg / --info pulse-ml does not have, or None."""
    import difflib

    supported = "Use --cfg, --cfg job or --cfg all (the composed config), or --info."
    if cfg_form == "hydra":
        return (f"pulse-ml {verb}: --cfg hydra: pulse-ml runs no Hydra app (it uses Hydra's "
                f"compose API), so there is no hydra config to print. {supported}")
    for option, form, forms in (("--cfg", cfg_form, CFG_FORMS), ("--info", info_form,
                                                                   INFO_FORMS)):
        if form is not None and form not in forms:
            close = difflib.get_close_matches(form, forms, n=1)
            hint = f" Did you mean {option} {close[0]}?" if close else ""
            return (f"pulse-ml {verb}: {option} {form[:40]!r} is not a form of {option} "
                    f"({', '.join(forms)}).{hint} {supported}")
    return None


def _group_lines(verb: str) -> list[str]:
    """The verb's config groups and their options, as ``--help`` and ``--info`` show them."""
    from pulse_ml.config_check import defaults_of, group_options

    groups = defaults_of(verb)
    if not groups:
        return []
    lines = ["config groups (group=option, or group=path/to/file.yaml):"]
    for group, default in groups.items():
        opts = ", ".join(o + ("*" if o == default else "") for o in group_options(group))
        lines.append(f"  {group}: {opts}")
    return lines + ["  (* = default)"]


def _info(verb: str) -> str:
    """``--info``: versions, the config directory and search path, defaults and groups.

    Read with plain YAML (no Hydra import): the search path is the one Hydra's compose API
    builds for ``config.compose`` (``initialize_config_dir``).
    """
    import textwrap
    from importlib.metadata import PackageNotFoundError, version

    from pulse_ml import __version__
    from pulse_ml.config_check import load_yaml
    from pulse_ml.env.paths import conf_dir

    try:
        hydra = f"hydra-core {version('hydra-core')}"
    except PackageNotFoundError:
        hydra = "hydra-core (not installed)"
    folder = conf_dir()
    defaults = []
    for item in load_yaml(folder / f"{verb}.yaml").get("defaults") or []:
        defaults += ([f"{k}: {v}" for k, v in item.items()] if isinstance(item, dict)
                     else [str(item)])
    lines = [
        f"pulse-ml {verb}: where its config comes from",
        f"  pulse-ml {__version__}, {hydra} (its compose API: no Hydra app, plugins or "
        "output folder)",
        "",
        f"config directory: {folder}",
        f"primary config:   {verb}.yaml",
        "config search path (as Hydra's compose API builds it):",
        "  hydra   pkg://hydra.conf",
        f"  main    {folder.as_uri()}",
        "  schema  structured://",
    ]
    lines += textwrap.wrap("defaults list: " + (", ".join(defaults) or "(none)"), 100,
                           subsequent_indent="  ", break_on_hyphens=False,
                           break_long_words=False)
    groups = _group_lines(verb)
    lines += ([""] + groups) if groups else []
    lines += ["", f"`pulse-ml {verb} --cfg` prints the composed config; `--help` describes "
              "the verb and its keys."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``pulse-ml`` console script."""
    args = list(sys.argv[1:] if argv is None else argv)
    if any(a in ("--version", "-V") for a in args):
        from pulse_ml import __version__

        print(f"pulse-ml {__version__}")
        return
    if len(args) > 1 and args[0] == "help":  # `pulse-ml help train` = `pulse-ml train --help`
        args = [args[1], "--help", *args[2:]]
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
    rest, cfg_form, info_form = _take_forms(rest)
    if info_form == "config":  # Hydra's `--info config` is the composed config
        cfg_form, info_form = cfg_form or "job", None
    multirun = any(a in ("-m", "--multirun") for a in rest)
    show_help = any(a in ("-h", "--help") for a in rest)
    show_cfg = cfg_form is not None
    overrides = [a for a in rest if not a.startswith("-")]
    unknown = [a for a in rest if a.startswith("-") and a not in
               ("-m", "--multirun", "-h", "--help")]
    if unknown:
        print(f"pulse-ml {verb}: unknown option {unknown[0]}. Overrides are key=value.",
              file=sys.stderr)
        sys.exit(2)
    problem = _form_problem(verb, cfg_form, info_form)
    if problem:
        print(problem, file=sys.stderr)
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
        if info_form is not None and not show_help:
            print(_info(verb))
            return
        from pulse_ml.config import compose, expand_sweeps, to_yaml

        jobs = expand_sweeps(overrides) if multirun else [overrides]
        for job in jobs[1:]:  # every combination of a sweep is checked before the first runs
            quick_check(verb, job)
        if show_help or show_cfg:
            if show_help:
                print(f"pulse-ml {verb}: {VERBS[verb][1]}\n")
                print(_module_doc(VERBS[verb][0]) + "\n")
                groups = _group_lines(verb)
                if groups:
                    print("\n".join(groups) + "\n")
                print("composed config (override any key with key=value):\n")
            print(to_yaml(compose(verb, jobs[0])))  # plain YAML, Hydra only when needed
            return
        configs = [compose(verb, job) for job in jobs]  # every combination before the first run
        from pulse_ml.settings import check_early

        for cfg in configs:  # ranges before the job's heavy imports, data and model (< 1 s)
            check_early(verb, cfg)
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
