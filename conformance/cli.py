"""``aidememo-conformance``: run a profile's suite against a target (or its embedded reference).

    aidememo-conformance run [--profile NAME] [--config target.toml] [--baseline FILE] [--report-dir DIR]
                             [--capability CAPS ...] [--timeout S] [--seed N] [--requirement ID ...]
                             [-k EXPR] [-n N] [profile flags: --url URL, --provision-command T, ...] [CHECK ...]
    aidememo-conformance diff [--config target.toml] [--seed N] [--budget S] [--steps N] [--departures FILE]
                              [--replay CASE_JSON] [target flags as for run]
    aidememo-conformance reproduce RECORD_JSON [--config target.toml] [--cli WORDS] [--url URL] [--tries N]
    aidememo-conformance requirements [--profile NAME]
    aidememo-conformance baseline write RESULTS_JSON [-o BASELINE_TOML [--force]]
    aidememo-conformance compare RESULTS_JSON [RESULTS_JSON ...] [--label NAME ...] [-o DIR] [--fail-on-new]

The profile (default ``aidememo``) decides which flags exist besides the shared ones, so the
command line is parsed twice: once for ``--profile`` and ``--config`` (whose file may name the
profile), then with the profile's flags. ``run`` resolves every setting first (a bad value is
one line on stderr and exit 2), then calls ``pytest.main`` on the profile's checks with the
plugin's options. Exit 0 only when every scored MUST holds; 1 when one does not; 2 for bad
input; 3 when pytest itself broke.
"""

from __future__ import annotations

import argparse
import gc
import os
import shlex
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NoReturn

from conformance.errors import ConformanceError

__all__ = ["build_pytest_args", "main", "rerun_command"]

PROG = "aidememo-conformance"


class _Parser(argparse.ArgumentParser):
    """argparse that reports bad input on one line (no usage block) and exits 2."""

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"{PROG}: {message}\n")
        raise SystemExit(2)


def _profile_of(argv: list[str]) -> Any:
    """The profile named by --profile, AIDEMEMO_PROFILE or the target file, before the full parse."""
    from conformance.installed import load_profile
    from conformance.profile import CONFIG, PROFILE
    from conformance.settings import SettingsInput, load_target_file, resolve

    early = _Parser(add_help=False)
    early.add_argument("--profile")
    early.add_argument("--config")
    known, _ = early.parse_known_args(argv)
    given = SettingsInput(flags={"profile": known.profile, "config": known.config}, environ=os.environ)
    path = resolve([CONFIG], given, check_file_keys=False)[CONFIG]
    with_file = SettingsInput(flags=given.flags, environ=os.environ, target_file=load_target_file(path) if path else None)
    named = resolve([PROFILE], with_file, check_file_keys=False)
    return load_profile(named[PROFILE], named.where(PROFILE))


def _parser(profile: Any) -> _Parser:
    from conformance.profile import RUN_SETTINGS
    from refkit.version import VERSION

    parser = _Parser(prog=PROG, description="Protocol conformance suite (AideMemo and the other installed profiles)")
    parser.add_argument("--version", action="version", version=f"{PROG} {VERSION}")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    run = commands.add_parser("run", help=f"run the suite of a profile (now: {profile.name}) and write the reports")
    _add_settings(run, [*RUN_SETTINGS, *profile.settings])
    run.add_argument("--requirement", action="append", default=[], metavar="ID",
                     help="only checks of this requirement id or prefix, e.g. AM-HO (repeatable)")
    run.add_argument("-k", dest="keyword", help="pytest -k expression selecting checks")
    run.add_argument("-n", dest="workers", help="pytest-xdist workers (a number or 'auto')")
    run.add_argument("--summary-md", metavar="FILE", help="write the run's Markdown summary here (under GitHub "
                                                          "Actions it also goes to $GITHUB_STEP_SUMMARY)")
    run.add_argument("checks", nargs="*", metavar="CHECK", help="checks to run, e.g. test_auth.py::test_reader_cannot_write")
    diff = commands.add_parser("diff", help="send the target and the embedded reference the same seeded request "
                                            "stream and compare every answer (AideMemo)")
    _add_settings(diff, [*RUN_SETTINGS, *profile.settings])
    diff.add_argument("--budget", type=_positive, metavar="SECONDS", help="stop after this long (default 60)")
    diff.add_argument("--steps", type=_positive_int, metavar="N", help="stop after this many steps (default 50000)")
    diff.add_argument("--departures", metavar="TOML", help="known departures to tolerate, besides the kit's "
                                                           "(default: departures.toml beside the target file)")
    diff.add_argument("--replay", metavar="CASE_JSON", help="send a divergence's recorded steps again, on fresh identities")
    _add_compare(commands)
    reproduce = commands.add_parser(
        "reproduce", help="send a reproduction record's steps again (a failing check's, a diff divergence's, a "
                          "simulator finding's): exit 1 the bug shows, 0 it does not, 2 cannot run, 3 a race not met")
    reproduce.add_argument("record", metavar="RECORD_JSON", help="a record written beside its script")
    reproduce.add_argument("--url", help="the target's base URL (default: the --config file's [serve] server, "
                                         "else $BASE_URL, else the file's url, else the record's)")
    reproduce.add_argument("--tries", type=_positive_int, metavar="N", help="runs before a race is called not met")
    reproduce.add_argument("--cli", help="the target's command line, for a record whose steps run one (default: $CLI, "
                                         "else the target file's; the command line a record names is never run)")
    reproduce.add_argument("--config", metavar="TOML", help="the run's target file: its provisioning command makes "
                                                            "the identities and its [serve] server is started for "
                                                            "the replay (default: the embedded reference's; a "
                                                            "record's own command is never run)")
    reproduce.add_argument("--profile", help="the run's profile, when the target file does not name it")
    listing = commands.add_parser("requirements", help="list every requirement of a profile and the checks that prove it")
    listing.add_argument("--profile", help="protocol profile (default aidememo)")
    baseline = commands.add_parser("baseline", help="write a baseline file from a run's results")
    verbs = baseline.add_subparsers(dest="verb", required=True, parser_class=_Parser)
    write = verbs.add_parser("write", help="every departure of a run (results.json) as a baseline: "
                                           "FAIL/UNTESTABLE/XFAIL as expected_failure, WARN/INFO as expected_warning")
    write.add_argument("results", metavar="RESULTS_JSON", help="a run's results.json")
    write.add_argument("-o", "--output", metavar="BASELINE_TOML", help="where to write it (default: stdout)")
    write.add_argument("--force", action="store_true",
                       help="replace BASELINE_TOML if it exists (a baseline is often edited by hand)")
    return parser


def _add_compare(commands: Any) -> None:
    compare = commands.add_parser("compare", help="requirement x run from several runs' results.json: one page, "
                                                  "one JSON file and a badge per run")
    compare.add_argument("results", nargs="+", metavar="RESULTS_JSON", help="runs' results.json, earliest first")
    compare.add_argument("--label", action="append", default=[], metavar="NAME",
                         help="a run's name, in the same order (default: its results folder's name)")
    compare.add_argument("-o", "--output", default="aidememo-compare", metavar="DIR",
                         help="where compare.html, compare.json and the badges go (default ./aidememo-compare)")
    compare.add_argument("--fail-on-new", action="store_true",
                         help="exit 1 when a later run fails a requirement an earlier run held")


def _compare(args: argparse.Namespace) -> int:
    """``compare``: exit 0, or 1 with ``--fail-on-new`` and a new failure; 2 for bad input."""
    from conformance.installed import load_profile
    from conformance.reports.compare import compare, load_results, write_comparison

    try:
        if len(args.label) > len(args.results):
            raise ConformanceError(f"--label given {len(args.label)} times for {len(args.results)} runs")
        labels = [*args.label, *(Path(path).resolve().parent.name or "run" for path in args.results[len(args.label):])]
        labels = [label if labels.count(label) == 1 else f"{label}#{n + 1}" for n, label in enumerate(labels)]
        runs = [load_results(path, label) for path, label in zip(args.results, labels)]
        try:
            texts = {r.id: r.text for r in load_profile(runs[0].profile).registry()}
        except ConformanceError:  # a profile this kit does not have: ids without their sentences
            texts = {}
        comparison = compare(runs, texts)
        written = write_comparison(comparison, Path(args.output))
    except ConformanceError as exc:
        sys.stderr.write(f"{PROG}: {exc}\n")
        return 2
    except OSError as exc:
        sys.stderr.write(f"{PROG}: {args.output}: {exc.strerror or exc}\n")
        return 2
    for n, run in enumerate(comparison.runs):
        held, scored = comparison.musts(n)
        sys.stdout.write(f"{run.label}: {held}/{scored} MUSTs hold ({run.target})\n")
    for failure in comparison.new_failures:
        sys.stdout.write(f"new failure: {failure['requirement']} ({failure['level']}) held in {failure['held_in']}, "
                         f"{failure['verdict']} in {failure['fails_in']}\n")
    sys.stdout.write(f"wrote {', '.join(str(p) for p in written)}\n")
    return 1 if args.fail_on_new and comparison.new_failures else 0


def _add_settings(parser: argparse.ArgumentParser, settings: list[Any]) -> None:
    for setting in settings:
        if setting.cli_flag is None:
            continue
        kwargs: dict[str, Any] = {"dest": setting.name, "action": setting.action, "default": None,
                                  "help": argparse.SUPPRESS if setting.hidden else setting.help}
        if setting.action != "store_true":
            kwargs["metavar"] = setting.metavar
        parser.add_argument(setting.cli_flag, **kwargs)


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return value


def _positive_int(text: str) -> int:
    if not text.isdigit() or int(text) <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return int(text)


def _reproduce(args: argparse.Namespace) -> int:
    """Run a reproduction record with the replay runner; its verdict is the exit status. The
    identities are made by the target file the caller names (or the embedded reference's
    template): a record is data, so the command it names is compared, never run."""
    from conformance.reproduction.record import RecordError, Verdict, load_record
    from conformance.reproduction.runner import replay
    from conformance.serve import ServeError

    try:
        repro = load_record(Path(args.record).read_text("utf-8"))
    except OSError as exc:
        sys.stderr.write(f"{PROG}: cannot read {args.record}: {exc.strerror}\n")
        return 2
    except (RecordError, UnicodeDecodeError) as exc:
        sys.stderr.write(f"{PROG}: {args.record}: {exc}\n")
        return 2
    if repro.race:
        print(f"RACE, NOT FORCED: {repro.race}")
    try:
        with _replay_target(args) as (described, target_file, served_url):
            if target_file is None and (why := _other_template(repro, described.templates)):
                raise ConformanceError(why)
            url = args.url or served_url or os.environ.get("BASE_URL") or described.url
            cli = args.cli or os.environ.get("CLI") or (shlex.join(described.command) if described.command else None)
            outcome = replay(repro, base_url=url, tries=args.tries, templates=described.templates,
                             environ={**os.environ, "CLI": cli} if cli else None)
    except (ConformanceError, ServeError) as exc:
        sys.stderr.write(f"{PROG}: {exc}\n")
        return 2
    words = {Verdict.SHOWN: "the bug shows", Verdict.NOT_SHOWN: "the bug does not show",
             Verdict.CANNOT_RUN: "cannot run", Verdict.NOT_MET: "the race was not met"}
    print(f"RESULT: {words[outcome.verdict]} (exit {int(outcome.verdict)}, after {outcome.tries} "
          f"tr{'y' if outcome.tries == 1 else 'ies'}): {outcome.why}")
    return int(outcome.verdict)


@contextmanager
def _replay_target(args: argparse.Namespace) -> Iterator[tuple[Any, str | None, str | None]]:
    """The caller's target (never the record's), resolved as ``run`` resolves it: its
    description, its target file and the URL of its ``[serve]`` server, if it has one, which runs
    for the replay (a fresh one: a replay makes its own identities)."""
    import tempfile

    from conformance.installed import resolve_run
    from conformance.serve import serving
    from conformance.settings import SettingsInput

    given = SettingsInput(flags={"config": args.config, "profile": args.profile}, environ=os.environ, flag_style="cli")
    profile, settings = resolve_run(given)
    with tempfile.TemporaryDirectory(prefix="aidememo-reproduce-serve-") as logs, \
            serving(settings, Path(logs), announce=False) as server:
        if server is not None:  # its {port} and {dir} now fill the file's values
            profile, settings = resolve_run(given)
        target_file = settings.target_file.path if settings.target_file is not None else None
        yield profile.describe(settings, None), target_file, server.url if server else None


def _other_template(repro: Any, templates: tuple[tuple[str, str], ...]) -> str:
    """Why the default target cannot make this record's identities: the run made them with
    another template (a served run's), so tokens made here would be the server's strangers and
    every answer a 401 the replay would read as the bug. Empty: they agree."""
    theirs = {(key, t) for key, t in repro.target.keyed} | ({("", repro.target.provision)} if repro.target.provision
                                                            else set())
    ours = {(key, t) for key, t in templates if t}
    if not repro.identities or theirs <= ours:
        return ""
    return ("the record's identities were made by its run's target file, not the embedded reference: name that "
            "file with --config (its provisioning command makes them; the record's own is never run)")


def _diff(args: argparse.Namespace) -> int:
    from conformance.installed import resolve_run
    from conformance.profile import RUN_SETTINGS, SEED
    from conformance.settings import SettingsInput

    try:
        profile, settings = resolve_run(SettingsInput(flags=vars(args), environ=os.environ, flag_style="cli"))
        if profile.diff is None:
            raise ConformanceError(f"profile {profile.name} has no reference to compare a target against")

        base = [PROG, "diff"]
        if settings.target_file is not None:
            base += ["--config", settings.target_file.path]
        from conformance.settings import Layer

        for setting in [*RUN_SETTINGS, *profile.settings]:
            if setting is not SEED and setting.name not in ("config", "report_dir", "run_tag") \
                    and settings.layer(setting) in (Layer.FLAG, Layer.ENV):
                base += setting.arguments(settings[setting])
        for flag, value in (("--budget", args.budget), ("--steps", args.steps), ("--departures", args.departures)):
            if value is not None:
                base += [flag, format(value, "g") if isinstance(value, float) else str(value)]
        return _diff_served(args, profile, settings, base)
    except ConformanceError as exc:
        sys.stderr.write(f"{PROG}: {exc}\n")
        return 2
    except OSError as exc:
        sys.stderr.write(f"{PROG}: {exc}\n")
        return 2


def _diff_served(args: argparse.Namespace, profile: Any, settings: Any, base: list[str]) -> int:
    """The differential run, against the target file's ``[serve]`` server if it has one (started
    for the run, its placeholders then filled in the settings)."""
    from conformance.installed import resolve_run
    from conformance.profile import REPORT_DIR
    from conformance.serve import serving
    from conformance.settings import SettingsInput

    with serving(settings, Path(settings[REPORT_DIR])) as server:
        if server is not None:
            _, settings = resolve_run(SettingsInput(flags=vars(args), environ=os.environ, flag_style="cli"))
        code: int = profile.diff(args, settings, base)
        return code


def _write_baseline(args: argparse.Namespace) -> int:
    from conformance.reports.baseline import read_results, write_baseline
    from refkit.files import write_atomic

    try:
        text = write_baseline(read_results(args.results))
        if args.output is None:
            sys.stdout.write(text)
            return 0
        if os.path.lexists(args.output) and not args.force:  # a link planted there counts too
            sys.stderr.write(f"{PROG}: {args.output} exists (a baseline is often edited by hand); give --force to "
                             "replace it\n")
            return 2
        write_atomic(Path(args.output), text)
    except ConformanceError as exc:
        sys.stderr.write(f"{PROG}: {exc}\n")
        return 2
    except OSError as exc:
        sys.stderr.write(f"{PROG}: {args.output}: {exc.strerror}\n")
        return 2
    sys.stderr.write(f"{PROG}: wrote {args.output}\n")
    return 0


def _plugin_args(workers: str | None = None) -> list[str]:
    # Plugin autoloading is off for the suite's own run (see main): unrelated plugins cost
    # seconds of start-up per process and have no business in a conformance run.
    return ["-p", "conformance.plugin", *(["-p", "xdist.plugin"] if workers is not None else [])]


def _resolve(args: argparse.Namespace) -> tuple[Any, Any]:
    from conformance.installed import resolve_run
    from conformance.profile import BASELINE
    from conformance.reports.baseline import load_baseline
    from conformance.settings import SettingsInput

    profile, settings = resolve_run(SettingsInput(flags=vars(args), environ=os.environ, flag_style="cli"))
    baseline = settings[BASELINE]
    if baseline:
        load_baseline(baseline, profile.registry())
    if args.workers is not None and not (args.workers.isdigit() or args.workers == "auto"):
        raise ConformanceError(f"-n: expected a number of workers or 'auto', got {args.workers!r}")
    return profile, settings


def build_pytest_args(args: argparse.Namespace, profile: Any) -> list[str]:
    """The pytest command line equivalent to ``aidememo-conformance run``."""
    from conformance.profile import RUN_SETTINGS

    base = profile.checks_dir()
    targets = [str(base / check) for check in args.checks] or [str(base)]
    # The terminal gets our one-screen summary; tracebacks live in the reports.
    # junit.xml is the plugin's (one case per verdict, with its properties), in the report directory.
    # No unraisable-exception hook either: its five full collections at the end lengthen an
    # embedded run (`python bench/suite.py`), and a verdict never depends on what it reports.
    pytest_args = [*_plugin_args(args.workers), "-p", "no:cacheprovider", "-p", "no:unraisableexception", "-q",
                   "--tb=no", "-rN", "--rootdir", str(base)]
    for setting in [*RUN_SETTINGS, *profile.settings]:
        value = getattr(args, setting.name, None)
        if setting.pytest_flag is None or value is None:
            continue
        if setting.action == "store_true":
            pytest_args += [setting.pytest_flag] if value else []
        else:
            for item in value if isinstance(value, list) else [value]:
                # One word, so a value starting with '-' ("-mcp") is not read as an option.
                pytest_args.append(f"{setting.pytest_flag}={item}")
    for requirement in args.requirement:
        pytest_args += ["--aidememo-requirement", requirement]
    for flag, value in (("-k", args.keyword), ("-n", args.workers)):
        if value is not None:
            pytest_args += [flag, value]
    return pytest_args + targets


def rerun_command(profile: Any, settings: Any, seed: int, check: str | None = None) -> str:
    """The one command that replays a check (without one: the run) against the same target with the same seed.

    Values given by flag or environment are spelled as flags; the target file is passed as is.
    """
    from conformance.profile import CONFIG, DEFAULT_PROFILE, PROFILE, REPORT_DIR, RUN_SETTINGS, RUN_TAG, SEED
    from conformance.settings import Layer

    parts = [PROG, "run"]
    if profile.name != DEFAULT_PROFILE:
        parts += ["--profile", profile.name]
    if settings.target_file is not None:
        parts += ["--config", settings.target_file.path]
    for setting in [*RUN_SETTINGS, *profile.settings]:
        if setting in (CONFIG, PROFILE, SEED, REPORT_DIR, RUN_TAG):
            continue
        if settings.layer(setting) in (Layer.FLAG, Layer.ENV):
            parts += setting.arguments(settings[setting])
    parts += ["--seed", str(seed), *([check] if check else [])]
    return " ".join(shlex.quote(p) for p in parts)


class _FrozenAfterCollection:
    """Leaves what collection made (modules, checks, fixtures: most of the heap) out of every later
    garbage collection: rescanning it lengthens an embedded run (``bench/suite.py``). In this command's process
    only, never in a pytest a user runs with the plugin."""

    @staticmethod
    def pytest_collection_finish() -> None:
        gc.freeze()


def main(argv: list[str] | None = None) -> int:
    """The command line; SIGTERM ends it as SIGINT does, cleaning up (a run's reports still written)."""
    from refkit.args import sigterm_as_interrupt

    try:
        with sigterm_as_interrupt():
            return _main(sys.argv[1:] if argv is None else argv)
    except KeyboardInterrupt:  # diff and baseline; a run's pytest handles its own and reports
        sys.stderr.write(f"{PROG}: interrupted\n")
        return 130


def _main(argv: list[str]) -> int:
    try:
        profile = _profile_of(argv)
    except ConformanceError as exc:
        sys.stderr.write(f"{PROG}: {exc}\n")
        return 2
    try:
        args, extra = _parser(profile).parse_known_args(argv)
        if extra:
            _Parser().error(f"unrecognized arguments: {' '.join(extra)} (profile {profile.name})")
    except SystemExit as exc:  # argparse's own exit: --help, or a one-line error already printed
        return exc.code if isinstance(exc.code, int) else 2
    if args.command == "baseline":
        return _write_baseline(args)
    if args.command == "diff":
        return _diff(args)
    if args.command == "compare":
        return _compare(args)
    if args.command == "reproduce":
        return _reproduce(args)
    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"  # inherited by xdist workers too
    import pytest

    if args.command == "requirements":
        code = pytest.main([*_plugin_args(), "-p", "no:cacheprovider", "-q", "--rootdir", str(profile.checks_dir()),
                            "--aidememo-profile", profile.name, "--aidememo-list", str(profile.checks_dir())])
        return 0 if code in (0, 5) else 3
    try:
        profile, settings = _resolve(args)
    except ConformanceError as exc:
        sys.stderr.write(f"{PROG}: {exc}\n")
        return 2
    from conformance.profile import REPORT_DIR

    for check in args.checks:
        if not (profile.checks_dir() / check.split("::", 1)[0]).is_file():
            sys.stderr.write(f"{PROG}: no check module {check.split('::', 1)[0]!r} in profile {profile.name}\n")
            return 2
    report_dir = settings[REPORT_DIR]
    try:
        Path(report_dir).mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        sys.stderr.write(f"{PROG}: {settings.where(REPORT_DIR)} {report_dir}: {exc.strerror}\n")
        return 2
    from conformance.serve import ServeError, serving

    started = time.time()
    try:
        with serving(settings, Path(report_dir)):
            code = pytest.main(build_pytest_args(args, profile), plugins=[_FrozenAfterCollection()])
    except ServeError as exc:
        sys.stderr.write(f"{PROG}: {exc}\n")
        return _publish(args.summary_md, profile, Path(report_dir), 2, since=started, why=str(exc))
    if code == pytest.ExitCode.NO_TESTS_COLLECTED:
        sys.stderr.write(f"{PROG}: no check matched the selection\n")
        return 2
    if code == pytest.ExitCode.USAGE_ERROR:
        return 2
    # An interrupted run wrote its reports; the checks it did not finish read UNTESTABLE.
    exits: dict[int, int] = {pytest.ExitCode.OK: 0, pytest.ExitCode.TESTS_FAILED: 1, pytest.ExitCode.INTERRUPTED: 1}
    return _publish(args.summary_md, profile, Path(report_dir), exits.get(code, 3), since=started)


_REPORT_FILES = ("report.html", "results.json", "junit.xml", "traceability.json", "serve.log")


def _publish(summary_md: str | None, profile: Any, report_dir: Path, code: int, *, since: float,
             why: str = "no results were written") -> int:
    """The run's Markdown summary to ``--summary-md`` and, under GitHub's conventions, appended to
    ``$GITHUB_STEP_SUMMARY``, with the result and counts appended to ``$GITHUB_OUTPUT``; a
    ``results.json`` older than ``since`` is an earlier run's, and ``why`` says what happened
    instead. Returns ``code``, or 2 when a file cannot be written."""
    targets = [(summary_md, "w")] if summary_md else []
    targets += [(os.environ[name], "a") for name in ("GITHUB_STEP_SUMMARY",) if os.environ.get(name)]
    output = os.environ.get("GITHUB_OUTPUT")
    if not targets and not output:
        return code
    from conformance.reports.baseline import read_results
    from conformance.reports.markdown import outputs, render_markdown

    fresh = (report_dir / "results.json").is_file() and (report_dir / "results.json").stat().st_mtime >= since
    try:
        results: dict[str, Any] = read_results(str(report_dir / "results.json")) if fresh else {}
    except ConformanceError:
        results = {}
    results = results or {"result": why, "title": profile.title}  # no run happened: the result says why
    files = [str(report_dir / name) for name in _REPORT_FILES if (report_dir / name).is_file()]
    text = render_markdown(results, {r.id: r.text for r in profile.registry()}, code, files)
    lines = "".join(f"{name}={value}\n" for name, value in outputs(results, code).items())
    for path, mode, content in [*((p, m, text) for p, m in targets), *([(output, "a", lines)] if output else [])]:
        try:
            flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if mode == "a" else os.O_TRUNC)
            with os.fdopen(os.open(path, flags | getattr(os, "O_NOFOLLOW", 0), 0o644), "w", encoding="utf-8") as handle:
                handle.write(content)
        except OSError as exc:
            sys.stderr.write(f"{PROG}: cannot write the summary to {path}: {exc.strerror or exc}\n")
            return 2
    return code


def console_main() -> NoReturn:
    """The console script (and ``python -m conformance.cli``): ``main``, then out without the
    interpreter tearing down every module it loaded (time the run reports nothing for; mypy leaves
    the same way). Exit handlers still run and output is flushed first;
    while a thread that is not a daemon runs, the interpreter exits as usual, waiting for it."""
    import atexit
    import threading

    code = main()
    run_exit_handlers = getattr(atexit, "_run_exitfuncs", None)
    main_thread = threading.main_thread()
    if run_exit_handlers is None or any(t is not main_thread and not t.daemon for t in threading.enumerate()):
        sys.exit(code)
    run_exit_handlers()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):  # a closed or broken pipe: what the interpreter's own exit reports
        code = code or 120
    os._exit(code)


if __name__ == "__main__":  # pragma: no cover
    console_main()
