"""pytest11 entry point of the AideMemo conformance suite.

Idle cost is an option group and three marker lines: the target starts, the registry loads and
reports are written only when at least one check marked ``requirement`` is collected. Verdicts
are computed per check in ``pytest_runtest_makereport`` (see ``conformance.verdicts``) and
travel to the xdist controller in ``user_properties``; the controller writes the reports.
"""

from __future__ import annotations

import json
import os
import random
import secrets
import zlib
from pathlib import Path
from typing import Any

import pytest

from conformance.errors import ConfigError, ConformanceError, NotScored

__all__: list[str] = []

_STATE = pytest.StashKey["_RunState"]()
_WORLD = pytest.StashKey[Any]()
_PROP = "aidememo"  # user_properties key carrying one check's verdict record


class _RunState:
    """Per-process state, created only when AideMemo checks are collected."""

    def __init__(self, config: pytest.Config) -> None:
        from conformance.registry import load_registry
        from conformance.reports.baseline import load_baseline

        self.config = config
        self.registry = load_registry()
        self.settings = _settings(config)
        baseline_path = config.getoption("aidememo_baseline") or os.environ.get("AIDEMEMO_BASELINE") or None
        self.baseline = load_baseline(baseline_path, self.registry) if baseline_path else None
        self.seed, self.run_tag = _seeds(config)
        self.runtime: Any = None
        self.collected: list[tuple[str, str]] = []  # (nodeid, requirement id), known where items are collected
        self.summary: dict[str, Any] | None = None

    def runtime_or_start(self) -> Any:
        if self.runtime is None:
            from conformance.runtime import start_runtime

            self.runtime = start_runtime(self.settings, hook=self.config.hook if self.settings.provision_hook else None,
                                         config=self.config)
        return self.runtime


def _settings(config: pytest.Config) -> Any:
    from conformance.target import resolve_target

    def opt(name: str) -> Any:
        value = config.getoption(name)
        return value if value is not None else (config.getini(name) or None)

    hooked = bool(config.pluginmanager.hook.pytest_aidememo_provision.get_hookimpls())
    return resolve_target(
        provision_hook=hooked,
        config_path=opt("aidememo_config"),
        url=opt("aidememo_url"),
        timeout_s=config.getoption("aidememo_timeout"),
        capabilities=config.getoption("aidememo_capability"),
        provision_command=config.getoption("aidememo_provision_command"),
        embedded_factory=config.getoption("aidememo_embedded_factory"),
        backend=config.getoption("aidememo_backend"),
    )


_SEEDS = pytest.StashKey[tuple[int, str]]()


def _seeds(config: pytest.Config) -> tuple[int, str]:
    """The run seed and run tag: chosen once by the controller, inherited by xdist workers."""
    seeds = config.stash.get(_SEEDS, None)
    if seeds is None:
        workerinput = getattr(config, "workerinput", None)
        if workerinput and "aidememo_seed" in workerinput:
            seeds = (workerinput["aidememo_seed"], workerinput["aidememo_run_tag"])
        else:
            seeds = (_seed(config), _run_tag(config))
        config.stash[_SEEDS] = seeds
    return seeds


def _seed(config: pytest.Config) -> int:
    value = config.getoption("aidememo_seed") or os.environ.get("AIDEMEMO_SEED")
    if value is None:
        return random.SystemRandom().randrange(2**32)
    try:
        return int(value)
    except ValueError:
        raise pytest.UsageError(f"--aidememo-seed: expected an integer, got {value!r}") from None


def _run_tag(config: pytest.Config) -> str:
    tag = config.getoption("aidememo_run_tag") or secrets.token_hex(4)
    if not all(c.isalnum() or c in "-_." for c in tag) or len(tag) > 24:
        raise pytest.UsageError(f"--aidememo-run-tag: use up to 24 letters, digits, '-', '_' or '.', got {tag!r}")
    return tag


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    from conformance import hooks

    pluginmanager.add_hookspecs(hooks)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("aidememo", "AideMemo conformance suite")
    group.addoption("--aidememo-url", dest="aidememo_url", metavar="URL",
                    help="server under test; without it the embedded reference ledger is started")
    group.addoption("--aidememo-config", dest="aidememo_config", metavar="TOML", help="target file")
    group.addoption("--aidememo-timeout", dest="aidememo_timeout", metavar="SECONDS",
                    help="per-request timeout (default 10)")
    group.addoption("--aidememo-capability", dest="aidememo_capability", action="append", metavar="CAPS",
                    help="claim capabilities: 'search', '-mcp', 'leases=auto'; comma lists allowed; repeatable")
    group.addoption("--aidememo-provision-command", dest="aidememo_provision_command", metavar="TEMPLATE",
                    help="bootstrap command with {tenant} {project} {actor} {token_file} {role}")
    group.addoption("--aidememo-baseline", dest="aidememo_baseline", metavar="TOML",
                    help="expected failures; an entry that now passes fails the run")
    group.addoption("--aidememo-report-dir", dest="aidememo_report_dir", metavar="DIR",
                    help="where results.json, report.html and traceability.json go (default ./aidememo-report)")
    group.addoption("--aidememo-seed", dest="aidememo_seed", metavar="N", help="seed of every random choice")
    group.addoption("--aidememo-run-tag", dest="aidememo_run_tag", metavar="TAG",
                    help="namespace of the tenant ids this run creates (default: random)")
    group.addoption("--aidememo-requirement", dest="aidememo_requirement", action="append", metavar="ID",
                    help="run only checks of requirements with this id or id prefix (e.g. AM-HO); repeatable")
    group.addoption("--aidememo-list", dest="aidememo_list", action="store_true", default=False,
                    help="list requirements and their checks, run nothing")
    group.addoption("--aidememo-backend", dest="aidememo_backend", choices=["sqlite", "postgres"],
                    help="storage of the embedded reference (postgres: the database in $AIDEMEMO_POSTGRES_URL)")
    group.addoption("--aidememo-embedded-factory", dest="aidememo_embedded_factory", metavar="MODULE:CALLABLE",
                    help="build the embedded ledger with this callable(db_path) (used by the kill matrix)")
    parser.addini("aidememo_url", "server under test (see --aidememo-url)", default=None)
    parser.addini("aidememo_config", "target file (see --aidememo-config)", default=None)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "requirement(id): the AideMemo requirement this check proves")
    config.addinivalue_line("markers", "capability(name): an optional capability the check needs besides its requirement's")
    config.addinivalue_line("markers", "fresh_project: the check needs a project nobody else writes to")
    config.pluginmanager.register(_Reporter(config), "aidememo-reporter")
    if config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(_XdistHooks(), "aidememo-xdist")


class _XdistHooks:
    """Hand the controller's seed and run tag to every worker (registered only with xdist)."""

    def pytest_configure_node(self, node: Any) -> None:
        seed, run_tag = _seeds(node.config)
        node.workerinput["aidememo_seed"] = seed
        node.workerinput["aidememo_run_tag"] = run_tag


def _ensure_state(config: pytest.Config) -> _RunState:
    state = config.stash.get(_STATE, None)
    if state is None:
        try:
            state = _RunState(config)
        except ConformanceError as exc:
            raise pytest.UsageError(str(exc)) from None
        config.stash[_STATE] = state
    return state


def _requirement_of(item: pytest.Item) -> str | None:
    marker = item.get_closest_marker("requirement")
    return str(marker.args[0]) if marker and marker.args else None


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    checks = [item for item in items if _requirement_of(item)]
    if not checks and not config.getoption("aidememo_list"):
        return
    state = _ensure_state(config)
    listing = []
    for item in checks:
        requirement_id = _requirement_of(item) or ""
        if requirement_id not in state.registry.requirements:
            raise pytest.UsageError(f"{item.nodeid}: unknown requirement id {requirement_id!r}")
        listing.append((item.nodeid, requirement_id))
    wanted = config.getoption("aidememo_requirement")
    if wanted:
        keep = [item for item in items
                if not _requirement_of(item) or any((_requirement_of(item) or "").startswith(w) for w in wanted)]
        dropped = [item for item in items if item not in keep]
        if dropped:
            config.hook.pytest_deselected(items=dropped)
            items[:] = keep
    if config.getoption("aidememo_list"):
        from conformance.reports.traceability import render_listing

        terminal = config.pluginmanager.get_plugin("terminalreporter")
        if terminal is not None:
            terminal.write(render_listing(state.registry, listing))
        config.hook.pytest_deselected(items=list(items))
        items[:] = []


@pytest.fixture(scope="session")
def aidememo_runtime(request: pytest.FixtureRequest) -> Any:
    """The started target of this process (embedded reference or URL)."""
    state = _ensure_state(request.config)
    try:
        runtime = state.runtime_or_start()
    except ConfigError as exc:
        pytest.exit(f"aidememo: {exc}", returncode=2)
    yield runtime
    runtime.close()
    state.runtime = None


@pytest.fixture
def world(request: pytest.FixtureRequest, aidememo_runtime: Any) -> Any:
    """A fresh view of the target for one check: ids, provisioning, transcript, clock."""
    from conformance.actors import World

    state = _ensure_state(request.config)
    node = request.node
    requirement_id = _requirement_of(node)
    needs = [state.registry.get(requirement_id).capability] if requirement_id else []
    needs += [str(m.args[0]) for m in node.iter_markers("capability")]
    # Keyed by module::name, not the full node id, so a seed replays the same ids whether the
    # suite runs through the CLI, `pytest --pyargs` or a path.
    check = node.nodeid.rsplit("/", 1)[-1]
    check_tag = f"{zlib.crc32(check.encode()):08x}"
    rng = random.Random(f"{state.seed}:{check}")
    instance = World(aidememo_runtime, rng, state.run_tag, check_tag,
                     fresh_project=node.get_closest_marker("fresh_project") is not None)
    node.stash[_WORLD] = instance
    for capability in needs:
        aidememo_runtime.require(capability)
    return instance


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    outcome = yield
    report: pytest.TestReport = outcome.get_result()
    requirement_id = _requirement_of(item)
    if requirement_id is None:
        return
    state = item.config.stash.get(_STATE, None)
    if state is None:
        return
    if report.when == "setup" and report.passed:
        return
    if report.when == "teardown" and (report.passed or report.skipped):
        return
    from conformance.verdicts import Verdict, decide

    requirement = state.registry.get(requirement_id)
    world = item.stash.get(_WORLD, None)
    exception = call.excinfo.value if call.excinfo is not None else None
    skipped = report.skipped and not isinstance(exception, NotScored)
    if skipped and exception is not None and call.excinfo is not None and call.excinfo.errisinstance(pytest.skip.Exception):
        exception = None
    expected = state.baseline.expects(item.nodeid, requirement_id) if state.baseline else None
    warnings = list(world.warnings) if world is not None else []
    answered = world is not None and any(e.status for e in world.transcript.exchanges)
    verdict = decide(exception=exception, skipped=skipped, warned=bool(warnings), level=requirement.level,
                     expected_failure=expected is not None, answered=answered)
    if report.when == "setup" and verdict is Verdict.FAIL:
        verdict = Verdict.UNTESTABLE  # the check never started: a setup fault is not the requirement failing
    reason = _reason(exception, report, warnings, expected)
    record: dict[str, Any] = {
        "nodeid": item.nodeid,
        "requirement": requirement_id,
        "level": str(requirement.level),
        "capability": requirement.capability,
        "verdict": str(verdict),
        "reason": reason,
        "requests": len(world.transcript.exchanges) if world is not None else 0,
        "seed": state.seed,
    }
    if state.runtime is not None:
        record["claims"] = {name: state.runtime.detected.get(name, "") for name in state.runtime.claims}
        record["claims"]["core"] = "always"
        record["claims"] = {name: ("claimed, " if state.runtime.claimed(name) else "not claimed, ") + how
                            for name, how in record["claims"].items()}
    if verdict not in (Verdict.PASS, Verdict.SKIP) and world is not None:
        record["transcript"] = world.transcript.to_list()
        record["notes"] = list(world.transcript.notes)
    report.user_properties.append((_PROP, json.dumps(record)))
    _rewrite_outcome(report, item, verdict, reason)


def _reason(exception: BaseException | None, report: pytest.TestReport, warnings: list[str], expected: str | None) -> str:
    from conformance.verdicts import SHAPE_ERRORS

    if isinstance(exception, KeyError):
        return f"an answer lacks the promised field {exception}; see the transcript"
    if isinstance(exception, SHAPE_ERRORS):
        return f"an answer has the wrong shape ({exception}); see the transcript"
    if exception is not None:
        text = str(exception).strip() or type(exception).__name__
        if isinstance(exception, AssertionError):
            text = text.split("\nassert ")[0]
        return text[:2000]
    if report.skipped and isinstance(report.longrepr, tuple):
        return str(report.longrepr[2])
    if warnings:
        return "; ".join(warnings)
    if expected is not None:
        return f"passes although the baseline expects a failure ({expected})"
    return ""


def _rewrite_outcome(report: pytest.TestReport, item: pytest.Item, verdict: Any, reason: str) -> None:
    """Make pytest's own outcome agree with the verdict, so its exit status and JUnit do too."""
    from conformance.verdicts import Verdict

    path, line, _ = item.location
    if verdict is Verdict.SKIP:
        report.outcome = "skipped"
        report.longrepr = (str(path), (line or 0) + 1, f"not scored: {reason}")
    elif verdict is Verdict.XFAIL:
        report.outcome = "skipped"
        report.wasxfail = f"baseline: {reason}"  # type: ignore[attr-defined]
        report.longrepr = None
    elif verdict in (Verdict.WARN, Verdict.INFO) and report.when == "call":
        report.outcome = "passed"
        report.longrepr = None
    elif verdict is Verdict.XPASS:
        report.outcome = "failed"
        report.longrepr = f"XPASS (stale baseline entry): {reason}"


class _Reporter:
    """Collects verdict records (on the controller under xdist) and writes the reports."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.records: dict[str, dict[str, Any]] = {}

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        state = self.config.stash.get(_STATE, None)
        if state is None:
            return
        # Taken after every plugin's modifyitems ran, so -k and -m deselection is reflected.
        state.collected = [(item.nodeid, _requirement_of(item) or "") for item in session.items
                           if _requirement_of(item) in state.registry.requirements]
        terminal = self.config.pluginmanager.get_plugin("terminalreporter")
        if terminal is not None and state.collected and not hasattr(self.config, "workerinput"):
            terminal.write_line(self._header(state))

    def _header(self, state: _RunState) -> str:
        settings = state.settings
        return (f"aidememo: target {settings.url or 'embedded reference'} ({settings.mode}), seed {state.seed}, "
                f"run tag {state.run_tag}; rerun with --aidememo-seed {state.seed}")

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        for name, value in report.user_properties:
            if name == _PROP:
                record = json.loads(str(value))
                previous = self.records.get(record["nodeid"])
                # A teardown error overrides a pass; otherwise the first verdict of a check stands.
                if previous is None or (previous["verdict"] == "PASS" and record["verdict"] != "PASS"):
                    self.records[record["nodeid"]] = record

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if hasattr(self.config, "workerinput") or self.config.getoption("aidememo_list"):
            return
        state = self.config.stash.get(_STATE, None)
        if state is None and not self.records:
            return
        state = _ensure_state(self.config)
        from conformance.reports import write_reports

        records = self._records(state)
        report_dir = Path(self.config.getoption("aidememo_report_dir") or "aidememo-report")
        try:
            state.summary = write_reports(report_dir, state, records)
        except OSError as exc:
            terminal = self.config.pluginmanager.get_plugin("terminalreporter")
            if terminal is not None:
                terminal.write_line(f"aidememo: cannot write the reports to {report_dir}: {exc.strerror}", red=True)
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
            return
        if not state.summary["ok"] and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def _records(self, state: _RunState) -> list[dict[str, Any]]:
        records = dict(self.records)
        for nodeid, requirement_id in state.collected:
            if nodeid not in records:
                requirement = state.registry.get(requirement_id)
                records[nodeid] = {"nodeid": nodeid, "requirement": requirement_id, "level": str(requirement.level),
                                   "capability": requirement.capability, "verdict": "UNTESTABLE",
                                   "reason": "collected but did not run (interrupted or deselected late)",
                                   "requests": 0, "seed": state.seed}
        return list(records.values())

    def pytest_terminal_summary(self, terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
        state = config.stash.get(_STATE, None)
        if state is None or state.summary is None:
            return
        from conformance.reports import render_summary

        terminalreporter.write(render_summary(state.summary))
