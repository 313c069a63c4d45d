"""pytest11 entry point of the conformance suite, for every installed profile.

Idle cost is an option group, ini twins and a few marker lines: the profile's target starts,
its registry loads and reports are written only when at least one check marked
``requirement`` is collected. Every setting resolves through ``conformance.installed.resolve_run``
(flag > environment > target file > ini > default). Verdicts are computed per check in
``pytest_runtest_makereport`` (see ``conformance.verdicts``) and travel to the xdist controller
in ``user_properties``; the controller writes the reports.
"""

from __future__ import annotations

import json
import os
import random
import secrets
import shutil
import tempfile
import zlib
from collections.abc import Generator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from conformance.errors import ConfigError, ConformanceError
from conformance.installed import installed_profiles, resolve_run
from conformance.profile import (
    BASELINE,
    REPORT_DIR,
    RUN_SETTINGS,
    RUN_TAG,
    SEED,
    CheckContext,
    Profile,
)
from conformance.schedule import LATE_MARKER, LATE_WORKER, late_collection, late_file, order_late
from conformance.settings import Setting, Settings, SettingsInput, resolve

if TYPE_CHECKING:
    from conformance.overlap import Overlap
    from conformance.profile import Target, TargetDescription
    from conformance.registry import Registry
    from conformance.reports.baseline import Baseline
    from conformance.verdicts import VerdictRecord

__all__ = ["settings_input"]

_STATE = pytest.StashKey["_RunState"]()
_WORLD = pytest.StashKey[Any]()
_SEEDS = pytest.StashKey[tuple[int, str]]()
_SETUP_S = pytest.StashKey[float]()  # how long a check's set-up took (its world: provisioning)
_LATE_DIR = pytest.StashKey[str]()  # the controller's directory for the workers' late checks
_PROP = "conformance"  # user_properties key carrying one check's verdict record
_COLLECTED = "conformance-collected"  # a worker's checks, with its first record (see _Reporter)
_HEALTH = "conformance-health"  # the target's /health answer, with a process's first record


def _declared() -> list[Setting[Any]]:
    """Every setting of every installed profile, once (pytest options must exist before a profile is chosen)."""
    found: dict[str, Setting[Any]] = {s.name: s for s in RUN_SETTINGS}
    for profile in installed_profiles().values():
        for setting in profile.settings:
            found.setdefault(setting.name, setting)
    return list(found.values())


def settings_input(config: pytest.Config, declared: list[Setting[Any]] | None = None) -> SettingsInput:
    """The flag, environment and ini layers of this pytest run, for ``declared`` (default: every setting)."""
    flags: dict[str, object] = {}
    ini: dict[str, object] = {}
    for setting in declared if declared is not None else _declared():
        if setting.pytest_flag is not None:
            flags[setting.name] = config.getoption(setting.dest)
        if setting.ini_name is not None:
            ini[setting.ini_name] = config.getini(setting.ini_name)
    return SettingsInput(flags=flags, environ=os.environ, ini=ini, flag_style="pytest")


class _RunState:
    """Per-process state, created only when checks are collected."""

    def __init__(self, config: pytest.Config) -> None:
        from conformance.reports.baseline import load_baseline

        self.config = config
        self.profile: Profile
        self.settings: Settings
        self.profile, self.settings = resolve_run(settings_input(config), config=config)
        _refuse_unserved(self.settings)
        self.registry: Registry = self.profile.registry()
        baseline_path = self.settings[BASELINE]
        self.baseline: Baseline | None = load_baseline(baseline_path, self.registry) if baseline_path else None
        self.description: TargetDescription = self.profile.describe(self.settings, config)
        self.seed, self.run_tag = _seeds(config)
        self.target: Target | None = None
        self.collected: list[tuple[str, str]] = []  # (nodeid, requirement id), known where items are collected
        self.collected_sent = False  # a worker has told the controller what it collected
        self.health_sent = False  # this process has told the reports what its target answered to /health
        self.summary: dict[str, Any] | None = None
        self.others = {p.prefix: p.name for p in installed_profiles().values() if p.name != self.profile.name}
        self.overlap: Overlap | None = None  # the checks started ahead, once the first sets up

    def target_or_start(self) -> Target:
        if self.target is None:
            from conformance.profile import StartContext

            self.target = self.profile.start(StartContext(settings=self.settings, capabilities=self.profile.capabilities,
                                                          config=self.config))
        return self.target


def _refuse_unserved(settings: Settings) -> None:
    """A ``[serve]`` server is started by the commands (``aidememo-conformance run``), not by pytest."""
    from conformance.serve import SERVE, serve_spec, served_of

    if serve_spec(settings) is not None and served_of(settings, os.environ) is None:
        raise ConfigError(f"{settings.where(SERVE)}: the server of a [serve] table is started by "
                          "`aidememo-conformance run`; under plain pytest start it yourself and pass --aidememo-url")


def _seeds(config: pytest.Config) -> tuple[int, str]:
    """The run seed and run tag: chosen once by the controller, inherited by xdist workers."""
    seeds = config.stash.get(_SEEDS, None)
    if seeds is None:
        workerinput = getattr(config, "workerinput", None)
        if workerinput and "aidememo_seed" in workerinput:
            seeds = (workerinput["aidememo_seed"], workerinput["aidememo_run_tag"])
        else:
            try:
                given = resolve([SEED, RUN_TAG], settings_input(config, [SEED, RUN_TAG]), check_file_keys=False)
            except ConfigError as exc:
                raise pytest.UsageError(str(exc)) from None
            seed = given[SEED]
            seeds = (random.SystemRandom().randrange(2**32) if seed is None else seed,
                     given[RUN_TAG] or secrets.token_hex(4))
        config.stash[_SEEDS] = seeds
    return seeds


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    import importlib

    for profile in installed_profiles().values():
        if profile.hookspecs:
            pluginmanager.add_hookspecs(importlib.import_module(profile.hookspecs))


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("aidememo", "conformance suite (aidememo-conformance)")
    for setting in _declared():
        if setting.pytest_flag is not None:
            kwargs: dict[str, Any] = {"dest": setting.dest, "default": None, "action": setting.action}
            if setting.action != "store_true":
                kwargs["metavar"] = setting.metavar
            help_text = f"{setting.help} [env {setting.env_name}]" if setting.env_name else setting.help
            group.addoption(setting.pytest_flag, help=help_text, **kwargs)
        if setting.ini_name is not None:
            parser.addini(setting.ini_name, f"{setting.help} (ini twin of {setting.pytest_flag or setting.name})",
                          default=None)
    group.addoption("--aidememo-requirement", dest="aidememo_requirement", action="append", metavar="ID",
                    help="run only checks of requirements with this id or id prefix (e.g. AM-HO); repeatable")
    group.addoption("--aidememo-list", dest="aidememo_list", action="store_true", default=False,
                    help="list requirements and their checks, run nothing")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "requirement(id, clauses=()): the requirement this check proves, and which "
                            "of its clauses it reads")
    config.addinivalue_line("markers", "capability(name): an optional capability the check needs besides its requirement's")
    for profile in installed_profiles().values():
        for marker in profile.markers:
            config.addinivalue_line("markers", marker)
        if profile.configure is not None:
            profile.configure(config)
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None and workerinput.get("aidememo_late"):
        config.stash[LATE_MARKER] = workerinput["aidememo_late"]  # the controller's word decides
    elif workerinput is None and config.stash.get(LATE_MARKER, None) and getattr(config.option, "dist", "no") == "load":
        # Late checks on one worker (conformance.schedule); workers tell through files in this directory.
        late_dir = tempfile.mkdtemp(prefix="conformance-late-")
        config.stash[_LATE_DIR] = late_dir
        config.add_cleanup(lambda: shutil.rmtree(late_dir, ignore_errors=True))
    config.pluginmanager.register(_Reporter(config), "conformance-reporter")
    config.pluginmanager.register(_XdistHooks(), "conformance-xdist")


class _XdistHooks:
    """Hand the controller's seed, run tag and distribution mode to every worker.

    An optional hook, so it costs nothing without xdist, and it is found however xdist was
    loaded (``-p xdist.plugin``, as the command line does, registers it under another name).
    """

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        seed, run_tag = _seeds(node.config)
        node.workerinput["aidememo_seed"] = seed
        node.workerinput["aidememo_run_tag"] = run_tag
        node.workerinput["aidememo_dist"] = node.config.getvalue("dist")
        late_dir = node.config.stash.get(_LATE_DIR, None)
        if late_dir is not None:
            node.workerinput.update(aidememo_dist="late", aidememo_late=node.config.stash[LATE_MARKER],
                                    aidememo_late_dir=late_dir, aidememo_late_worker=LATE_WORKER)

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_make_scheduler(self, config: pytest.Config, log: Any) -> Any:
        late_dir = config.stash.get(_LATE_DIR, None)
        if late_dir is None:
            return None  # xdist's own scheduler for the chosen --dist
        from conformance.schedule import LateScheduling

        return LateScheduling(config, log, late_dir)


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


def _clauses_of(item: pytest.Item) -> tuple[str, ...]:
    """The clauses a check reads: those of its ``requirement`` markers (a parameter may add its own)."""
    found: list[str] = []
    for marker in item.iter_markers("requirement"):
        found += [str(c) for c in marker.kwargs.get("clauses", ()) if str(c) not in found]
    return tuple(found)


def _same_process(item: pytest.Item, other: pytest.Item) -> bool:
    """Whether ``other`` surely runs in the process that runs ``item``."""
    workerinput = getattr(item.config, "workerinput", None)
    if workerinput is None:
        return True
    dist = workerinput.get("aidememo_dist")  # a worker's own option says "no"; the controller's says how
    if dist == "each":
        return True
    if dist == "late" and other.get_closest_marker(workerinput["aidememo_late"]) is not None:
        return bool(workerinput.get("workerid") == workerinput["aidememo_late_worker"])  # see conformance.schedule
    if dist in ("loadfile", "loadscope"):
        return item.path == other.path
    # load, worksteal, and loadgroup (which pytest-xdist 3.8 cannot apply under pytest 9: its
    # group suffix is written to an attribute pytest no longer reads): it may run anywhere.
    return item is other


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    checks = [item for item in items if _requirement_of(item)]
    if not checks and not config.getoption("aidememo_list"):
        return
    state = _ensure_state(config)
    listing = []
    foreign = []  # checks of another installed profile: not this run's business
    for item in checks:
        requirement_id = _requirement_of(item) or ""
        if requirement_id in state.registry:
            problem = state.registry.get(requirement_id).clause_problem(_clauses_of(item))
            if problem or any(m.args and m.args[0] != requirement_id for m in item.iter_markers("requirement")):
                raise pytest.UsageError(f"{item.nodeid}: {problem or 'its requirement markers name two ids'}")
            listing.append((item.nodeid, requirement_id, _clauses_of(item)))
        elif any(requirement_id.startswith(prefix) for prefix in state.others):
            foreign.append(item)
        else:
            raise pytest.UsageError(f"{item.nodeid}: unknown requirement id {requirement_id!r} "
                                    f"(profile {state.profile.name})")
    wanted = config.getoption("aidememo_requirement")
    dropped = [item for item in items if item in foreign or (
        wanted and _requirement_of(item) and not any((_requirement_of(item) or "").startswith(w) for w in wanted))]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = [item for item in items if item not in dropped]
    late = config.stash.get(LATE_MARKER, None)
    if late:
        order_late(items, late)
    if config.getoption("aidememo_list"):
        from conformance.reports.traceability import render_listing

        terminal = config.pluginmanager.get_plugin("terminalreporter")
        if terminal is not None:
            terminal.write(render_listing(state.registry, listing))
        config.hook.pytest_deselected(items=list(items))
        items[:] = []


@pytest.fixture(scope="session")
def conformance_target(request: pytest.FixtureRequest) -> Generator[Any, None, None]:
    """The started target of this process (the selected profile's embedded reference, URL, CLI...)."""
    state = _ensure_state(request.config)
    try:
        target = state.target_or_start()
    except ConfigError as exc:
        pytest.exit(f"aidememo: {exc}", returncode=2)
    yield target
    if state.overlap is not None:  # the checks still running use the target
        state.overlap.close()
        state.overlap = None
    target.close()
    state.target = None


@pytest.fixture
def world(request: pytest.FixtureRequest, conformance_target: Any) -> Any:
    """A fresh view of the target for one check: ids, identities, transcript (built by the profile)."""
    state = _ensure_state(request.config)
    instance = _world_of(state, request.node, conformance_target)
    for capability in _needs(state, request.node):
        conformance_target.claims.require(capability)
    _start_ahead(state, request.node, conformance_target)
    return instance


def _start_ahead(state: _RunState, item: pytest.Item, target: Any) -> None:
    """Start this check and the checks after it, ``overlap`` at a time, if the profile asks (see
    ``conformance.overlap``; not under xdist, whose workers do not know the checks they will get)."""
    if state.profile.overlap <= 1 or state.overlap is not None or hasattr(item.config, "workerinput"):
        return
    from functools import partial

    from conformance.overlap import Overlap, runs_ahead

    state.overlap = overlap = Overlap(state.profile.overlap)
    items = item.session.items
    start = next((n for n, other in enumerate(items) if other is item), len(items))
    for other in items[start:]:
        if _requirement_of(other) and runs_ahead(other) and all(target.claims.claimed(n) for n in _needs(state, other)):
            overlap.start(other.nodeid, partial(getattr(other, "obj"), world=_world_of(state, other, target)))


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    """A check started ahead: its outcome, raised as it raised (else pytest calls it)."""
    state = pyfuncitem.config.stash.get(_STATE, None)
    future = state.overlap.outcome(pyfuncitem.nodeid) if state is not None and state.overlap is not None else None
    if future is None:
        return None
    future.result()
    return True


def _needs(state: _RunState, item: pytest.Item) -> list[str]:
    requirement_id = _requirement_of(item)
    needs = [state.registry.get(requirement_id).capability] if requirement_id else []
    return needs + [str(m.args[0]) for m in item.iter_markers("capability")]


def _markers(item: pytest.Item) -> dict[str, tuple[object, ...]]:
    markers: dict[str, tuple[object, ...]] = {}
    for marker in item.iter_markers():
        markers.setdefault(marker.name, tuple(marker.args))
    return markers


def _world_of(state: _RunState, item: pytest.Item, target: Any) -> Any:
    """The world of ``item``, built once: by its own ``world`` fixture, or ahead by a sibling."""
    from conformance.profile import Sibling, Upcoming
    from conformance.transcript import Transcript

    built = item.stash.get(_WORLD, None)
    if built is not None:
        return built
    # Keyed by module::name, not the full node id, so a seed replays the same ids whether the
    # suite runs through the CLI, `pytest --pyargs` or a path.
    check = item.nodeid.rsplit("/", 1)[-1]

    def siblings(marker: str) -> list[Sibling]:
        return [Sibling(check=other.nodeid.rsplit("/", 1)[-1], markers=_markers(other),
                        world=lambda other=other: _world_of(state, other, target))  # type: ignore[misc]
                for other in item.session.items
                if other.get_closest_marker(marker) is not None and _same_process(item, other)
                and all(target.claims.claimed(name) for name in _needs(state, other))]

    def ahead() -> list[Upcoming]:
        items = item.session.items
        start = next((n for n, other in enumerate(items) if other is item), len(items))
        return [Upcoming(check=other.nodeid.rsplit("/", 1)[-1], check_tag=_check_tag(other.nodeid.rsplit("/", 1)[-1]),
                         function=getattr(other, "function", None), markers=_markers(other))
                for other in items[start:]
                if _requirement_of(other) and _same_process(item, other)
                and all(target.claims.claimed(name) for name in _needs(state, other))]

    def stop(reason: str) -> None:
        item.session.shouldstop = reason

    context = CheckContext(target=target, rng=random.Random(f"{state.seed}:{check}"), run_tag=state.run_tag,
                           check_tag=_check_tag(check), transcript=Transcript(),
                           markers=_markers(item), check=check, siblings=siblings, ahead=ahead,
                           progress=lambda line: _progress(item.config, line), stop=stop)
    instance = state.profile.world(context)
    item.stash[_WORLD] = instance
    return instance


def _check_tag(check: str) -> str:
    """The short stable tag of a check's ids (its name's CRC-32)."""
    return f"{zlib.crc32(check.encode()):08x}"


def _progress(config: pytest.Config, line: str) -> None:
    """Show a line now, past output capture (an xdist worker's stderr is the user's terminal)."""
    import sys

    capture = config.pluginmanager.get_plugin("capturemanager")
    worker = getattr(config, "workerinput", {}).get("workerid")
    text = f"aidememo{f' [{worker}]' if worker else ''}: {line}\n"
    if capture is None:
        sys.stderr.write(text)
        sys.stderr.flush()
        return
    with capture.global_and_fixture_disabled():
        sys.stderr.write(text)
        sys.stderr.flush()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, None]:
    outcome = yield
    report: pytest.TestReport = outcome.get_result()
    requirement_id = _requirement_of(item)
    state = item.config.stash.get(_STATE, None)
    if requirement_id is None or state is None or requirement_id not in state.registry:
        return
    if hasattr(item.config, "workerinput") and not state.collected_sent:
        # The controller collects nothing under xdist; without this list (sent with the first
        # report, before any check ran) it could not tell which checks never ran when a run is
        # interrupted.
        report.user_properties.append((_COLLECTED, json.dumps(state.collected)))
        state.collected_sent = True
    if not state.health_sent and state.target is not None:
        report.user_properties.append((_HEALTH, json.dumps(getattr(state.target, "health", None))))
        state.health_sent = True
    if report.when == "setup" and report.passed:
        item.stash[_SETUP_S] = report.duration
        return
    if report.when == "teardown" and (report.passed or report.skipped):
        return
    from conformance.recording import record_check, rewrite_outcome

    record = record_check(item, call, report, requirement=state.registry.get(requirement_id),
                          baseline=state.baseline, seed=state.seed, run_tag=state.run_tag,
                          claims=state.target.claims.describe() if state.target is not None else {},
                          world=item.stash.get(_WORLD, None), setup_s=item.stash.get(_SETUP_S, 0.0),
                          clauses=_clauses_of(item))
    report.user_properties.append((_PROP, record.dumps()))
    rewrite_outcome(report, item, record.verdict, record.reason)


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item: pytest.Item) -> None:
    """The check is judged: its world stays on the item (a sibling may ask for it), its
    exchanges keep only what a report shows, so memory follows the checks in flight, not the
    bytes the run received."""
    world = item.stash.get(_WORLD, None)
    if world is not None:
        world.transcript.settle()


class _Reporter:
    """Collects verdict records (on the controller under xdist) and writes the reports."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.records: dict[str, VerdictRecord] = {}
        self.collected: dict[str, str] = {}  # nodeid -> requirement id, as the workers report them
        self.health: object = None  # the target's /health answer, as the first process to start it saw it

    @pytest.hookimpl(tryfirst=True)  # before xdist reports the collection: its scheduler reads this
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        workerinput = getattr(self.config, "workerinput", None)
        state = self.config.stash.get(_STATE, None)
        if state is not None:
            # Taken after every plugin's modifyitems ran, so -k and -m deselection is reflected.
            state.collected = [(item.nodeid, _requirement_of(item) or "") for item in session.items
                               if _requirement_of(item) in state.registry]
        if workerinput is not None and workerinput.get("aidememo_late_dir"):
            # The scheduler reads the late checks; the controller the collection, should the run be
            # interrupted before the first report arrives (the late worker sets its leases up then).
            marker = workerinput["aidememo_late"]
            late_file(workerinput["aidememo_late_dir"], workerinput["workerid"]).write_text(json.dumps({
                "late": [item.nodeid for item in session.items if item.get_closest_marker(marker) is not None],
                "collected": state.collected if state is not None else []}), "utf-8")
        if state is None:
            return
        terminal = self.config.pluginmanager.get_plugin("terminalreporter")
        if terminal is not None and state.collected and not hasattr(self.config, "workerinput"):
            terminal.write_line(self._header(state))

    def _header(self, state: _RunState) -> str:
        from conformance.cli import rerun_command

        from conformance.reports import explain_mode

        return (f"aidememo: profile {state.profile.name}, target {state.description.target} "
                f"({explain_mode(state.description.mode)}), seed {state.seed}, run tag {state.run_tag}; "
                f"rerun: {rerun_command(state.profile, state.settings, state.seed)}")

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        from conformance.verdicts import VerdictRecord, replaces

        for name, value in report.user_properties:
            if name == _HEALTH and self.health is None:
                self.health = json.loads(str(value))
            if name == _COLLECTED:
                self.collected.update((str(n), str(r)) for n, r in json.loads(str(value)))
            if name == _PROP:
                record = VerdictRecord.from_json(json.loads(str(value)))
                previous = self.records.get(record.nodeid)
                if replaces(record.verdict, previous.verdict if previous is not None else None):
                    self.records[record.nodeid] = record

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if hasattr(self.config, "workerinput") or self.config.getoption("aidememo_list"):
            return
        late_dir = self.config.stash.get(_LATE_DIR, None)
        if late_dir is not None:
            self.collected.update((str(n), str(r)) for n, r in late_collection(late_dir))
        state = self.config.stash.get(_STATE, None)
        if state is None and not self.records and not self.collected:
            return
        state = _ensure_state(self.config)
        from conformance.cli import rerun_command
        from conformance.reports import RunInfo, write_reports
        from conformance.profile import DEFAULT_PROFILE
        from conformance.reproduction.suite import ReplayTarget, target_path

        description = state.description
        replay = ReplayTarget(url=description.url, templates=description.templates, workdir=os.getcwd(),
                              credential_prefix=description.credential_prefix, hint=description.replay_hint,
                              cli=description.command, config=target_path(state.settings.target_file.path if state.settings.target_file else None),
                              profile="" if state.profile.name == DEFAULT_PROFILE else state.profile.name)
        run = RunInfo(profile=state.profile.name, title=state.profile.title, target=description.target,
                      mode=description.mode, seed=state.seed, run_tag=state.run_tag, registry=state.registry,
                      baseline=state.baseline,
                      rerun=lambda check: rerun_command(state.profile, state.settings, state.seed, check),
                      checked=state.profile.checked_requirements, replay=replay, health=self.health,
                      protocol_commit=state.profile.protocol_commit, expectations=state.profile.expectations)
        report_dir = Path(state.settings[REPORT_DIR])
        try:
            state.summary = write_reports(report_dir, run, self._records(state))
        except OSError as exc:
            terminal = self.config.pluginmanager.get_plugin("terminalreporter")
            if terminal is not None:
                terminal.write_line(f"aidememo: cannot write the reports to {report_dir}: {exc.strerror}", red=True)
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
            return
        if not state.summary["ok"] and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def _records(self, state: _RunState) -> list[VerdictRecord]:
        from conformance.verdicts import VerdictRecord, decide

        records = dict(self.records)
        for nodeid, requirement_id in [*state.collected, *self.collected.items()]:
            if nodeid not in records:
                requirement = state.registry.get(requirement_id)
                records[nodeid] = VerdictRecord(
                    nodeid=nodeid, requirement=requirement_id, level=requirement.level,
                    capability=requirement.capability,
                    verdict=decide(exception=None, skipped=False, warned=False, level=requirement.level,
                                   expected_failure=False, phase="unrun"),
                    reason="collected but did not run (interrupted or deselected late)", seed=state.seed)
        return list(records.values())

    def pytest_terminal_summary(self, terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
        state = config.stash.get(_STATE, None)
        if state is None or state.summary is None:
            return
        from conformance.reports import render_summary

        terminalreporter.write(render_summary(state.summary))
