"""``aidememo-conformance``: run the suite against a server (or the embedded reference).

    aidememo-conformance run [--url URL] [--config target.toml] [--baseline FILE] [--report-dir DIR]
                             [--capability CAPS ...] [--provision-command TEMPLATE] [--timeout S]
                             [-k EXPR] [-n N] [--seed N] [CHECK ...]
    aidememo-conformance requirements

``run`` validates the target first (a bad value is one line on stderr and exit 2), then calls
``pytest.main`` on the installed checks with the plugin's options. Exit 0 only when every
scored MUST holds; 1 when one does not; 2 for bad input; 3 when pytest itself broke.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from conformance.errors import ConformanceError

__all__ = ["main"]


class _Parser(argparse.ArgumentParser):
    """argparse that reports bad input on one line (no usage block) and exits 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        sys.stderr.write(f"aidememo-conformance: {message}\n")
        raise SystemExit(2)


def _parser() -> _Parser:
    parser = _Parser(prog="aidememo-conformance", description="AideMemo protocol conformance suite")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    run = commands.add_parser("run", help="run the suite and write the reports")
    run.add_argument("--url", help="server under test; without it the embedded reference ledger is started")
    run.add_argument("--config", help="target file (TOML)")
    run.add_argument("--baseline", help="expected failures (TOML)")
    run.add_argument("--report-dir", default="aidememo-report", help="default ./aidememo-report")
    run.add_argument("--capability", action="append", default=[], metavar="CAPS",
                     help="claim or disclaim capabilities: search, -mcp, leases=auto (repeatable)")
    run.add_argument("--provision-command", help="bootstrap template with {tenant} {project} {actor} {token_file} {role}")
    run.add_argument("--timeout", help="per-request timeout in seconds (default 10)")
    run.add_argument("--seed", help="seed of every random choice (printed by every run)")
    run.add_argument("--requirement", action="append", default=[], metavar="ID",
                     help="only checks of this requirement id or prefix, e.g. AM-HO (repeatable)")
    run.add_argument("-k", dest="keyword", help="pytest -k expression selecting checks")
    run.add_argument("-n", dest="workers", help="pytest-xdist workers (a number or 'auto')")
    run.add_argument("--backend", choices=["sqlite", "postgres"],
                     help="storage of the embedded reference (postgres: the database in $AIDEMEMO_POSTGRES_URL)")
    run.add_argument("--embedded-factory", help=argparse.SUPPRESS)
    run.add_argument("checks", nargs="*", metavar="CHECK", help="checks to run, e.g. test_auth.py::test_reader_cannot_write")
    commands.add_parser("requirements", help="list every requirement and the checks that prove it")
    return parser


def _checks_dir() -> Path:
    from conformance.profiles.aidememo import checks

    return Path(checks.__file__).parent


def _plugin_args(workers: str | None = None) -> list[str]:
    # Plugin autoloading is off for the suite's own run (see main): unrelated plugins cost
    # seconds of start-up per process and have no business in a conformance run.
    return ["-p", "conformance.plugin", *(["-p", "xdist.plugin"] if workers is not None else [])]


def _validate(args: argparse.Namespace) -> None:
    from conformance.registry import load_registry
    from conformance.reports.baseline import load_baseline
    from conformance.target import resolve_target

    resolve_target(config_path=args.config, url=args.url, timeout_s=args.timeout, capabilities=args.capability,
                   provision_command=args.provision_command, embedded_factory=args.embedded_factory,
                   backend=args.backend, flag_prefix="--")
    if args.baseline:
        load_baseline(args.baseline, load_registry())
    if args.seed is not None and not args.seed.isdigit():
        raise ConformanceError(f"--seed: expected a non-negative integer, got {args.seed!r}")
    if args.workers is not None and not (args.workers.isdigit() or args.workers == "auto"):
        raise ConformanceError(f"-n: expected a number of workers or 'auto', got {args.workers!r}")



def build_pytest_args(args: argparse.Namespace) -> list[str]:
    """The pytest command line equivalent to ``aidememo-conformance run``."""
    base = _checks_dir()
    targets = [str(base / check) for check in args.checks] or [str(base)]
    # The terminal gets our one-screen summary; tracebacks live in the reports.
    pytest_args = [*_plugin_args(args.workers), "-p", "no:cacheprovider", "-q", "--tb=no", "-rN", "--rootdir", str(base),
                   "--aidememo-report-dir", args.report_dir,
                   "--junitxml", str(Path(args.report_dir) / "junit.xml")]
    options = {"--aidememo-url": args.url, "--aidememo-config": args.config, "--aidememo-baseline": args.baseline,
               "--aidememo-provision-command": args.provision_command, "--aidememo-timeout": args.timeout,
               "--aidememo-seed": args.seed, "--aidememo-embedded-factory": args.embedded_factory,
               "--aidememo-backend": args.backend,
               "-k": args.keyword, "-n": args.workers}
    for flag, value in options.items():
        if value is not None:
            pytest_args += [flag, value]
    for claim in args.capability:
        pytest_args += ["--aidememo-capability", claim]
    for requirement in args.requirement:
        pytest_args += ["--aidememo-requirement", requirement]
    return pytest_args + targets


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"  # inherited by xdist workers too
    import pytest

    if args.command == "requirements":
        code = pytest.main([*_plugin_args(), "-p", "no:cacheprovider", "-q", "--rootdir", str(_checks_dir()),
                            "--aidememo-list", str(_checks_dir())])
        return 0 if code in (0, 5) else 3
    try:
        _validate(args)
    except ConformanceError as exc:
        sys.stderr.write(f"aidememo-conformance: {exc}\n")
        return 2
    for check in args.checks:
        if not (_checks_dir() / check.split("::", 1)[0]).is_file():
            sys.stderr.write(f"aidememo-conformance: no check module {check.split('::', 1)[0]!r}\n")
            return 2
    try:
        Path(args.report_dir).mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        sys.stderr.write(f"aidememo-conformance: --report-dir {args.report_dir}: {exc.strerror}\n")
        return 2
    code = pytest.main(build_pytest_args(args))
    if code == pytest.ExitCode.NO_TESTS_COLLECTED:
        sys.stderr.write("aidememo-conformance: no check matched the selection\n")
        return 2
    if code == pytest.ExitCode.USAGE_ERROR:
        return 2
    exits: dict[int, int] = {pytest.ExitCode.OK: 0, pytest.ExitCode.TESTS_FAILED: 1}
    return exits.get(code, 3)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
