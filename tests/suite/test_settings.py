"""One resolver for every setting: flag > environment > target file > ini > default.

Each layer is tested on its own and against the one below it, and every error names the layer
the bad value came from: the flag, the variable, the file key or the ini name.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from conformance.errors import ConfigError
from conformance.installed import resolve_run
from conformance.profile import BASELINE, TIMEOUT, URL
from conformance.profiles.aidememo.settings import PROVISION_COMMAND, PROVISION_TOKENS
from conformance.capabilities import CAPABILITIES
from conformance.settings import Layer, SettingsInput
from tests.targetfile import write_target

pytest_plugins = ["pytester"]

COMMAND = "boot --project {project} --actor {actor} --token-file {token_file}"


def _run(tmp_path: Path, *, flags: dict[str, object] | None = None, env: dict[str, str] | None = None,
         file: str | None = None, ini: dict[str, object] | None = None, style: str = "pytest"):
    given_flags = dict(flags or {})
    if file is not None:
        (tmp_path / "target.toml").write_text(file)
        given_flags.setdefault("config", str(tmp_path / "target.toml"))
    return resolve_run(SettingsInput(flags=given_flags, environ=env or {}, ini=ini or {}, flag_style=style))[1]


FILE = f'url = "http://file.example:1"\ntimeout_s = 3\n[provision]\ncommand = "{COMMAND}"\n'


@pytest.mark.parametrize(("layers", "url", "layer"), [
    ({}, None, Layer.DEFAULT),
    ({"ini"}, "http://ini.example:4", Layer.INI),
    ({"ini", "file"}, "http://file.example:1", Layer.FILE),
    ({"ini", "file", "env"}, "http://env.example:2", Layer.ENV),
    ({"ini", "file", "env", "flag"}, "http://flag.example:3", Layer.FLAG),
    ({"ini", "flag"}, "http://flag.example:3", Layer.FLAG),
    ({"ini", "env"}, "http://env.example:2", Layer.ENV),  # issue 9: ini never outranks the environment
])
def test_each_layer_outranks_the_ones_below(tmp_path, layers, url, layer):
    settings = _run(
        tmp_path,
        flags={"url": "http://flag.example:3"} if "flag" in layers else {},
        env={"AIDEMEMO_URL": "http://env.example:2"} if "env" in layers else {},
        file=FILE if "file" in layers else None,
        ini={"aidememo_url": "http://ini.example:4", "aidememo_provision_command": COMMAND} if "ini" in layers else {},
    )
    assert settings[URL] == url
    assert settings.layer(URL) is layer


@pytest.mark.parametrize(("style", "layer", "where"), [
    ("pytest", "flag", "--aidememo-url"),
    ("cli", "flag", "--url"),
    ("pytest", "env", "AIDEMEMO_URL"),
    ("pytest", "file", "target.toml: url"),
    ("pytest", "ini", "ini aidememo_url"),
])
def test_a_bad_value_names_where_it_came_from(tmp_path, style, layer, where):
    with pytest.raises(ConfigError) as caught:
        _run(tmp_path, style=style,
             flags={"url": "ftp://bad"} if layer == "flag" else {},
             env={"AIDEMEMO_URL": "ftp://bad"} if layer == "env" else {},
             file='url = "ftp://bad"\n' if layer == "file" else None,
             ini={"aidememo_url": "ftp://bad"} if layer == "ini" else {})
    message = str(caught.value)
    assert message.startswith(where) or f"/{where}" in message, message
    assert "expected an http:// or https:// URL, got 'ftp://bad'" in message


@pytest.mark.parametrize(("layer", "value", "message"), [
    ("flag", "-3", "--aidememo-timeout: must be between 0 and 600 seconds, got -3"),
    ("env", "soon", "AIDEMEMO_TIMEOUT: expected a number of seconds, got 'soon'"),
    ("file", "true", "target.toml: timeout_s: expected a number of seconds, got True"),
    ("ini", "9000", "ini aidememo_timeout: must be between 0 and 600 seconds, got 9000"),
])
def test_timeout_errors_per_layer(tmp_path, layer, value, message):
    with pytest.raises(ConfigError) as caught:
        _run(tmp_path,
             flags={"timeout": value} if layer == "flag" else {},
             env={"AIDEMEMO_TIMEOUT": value} if layer == "env" else {},
             file=f"timeout_s = {value}\n" if layer == "file" else None,
             ini={"aidememo_timeout": value} if layer == "ini" else {})
    assert str(caught.value).endswith(message), str(caught.value)


def test_defaults_apply_when_no_layer_names_a_value(tmp_path):
    settings = _run(tmp_path)
    assert (settings[TIMEOUT], settings[URL], settings[PROVISION_COMMAND]) == (10.0, None, None)
    assert settings.where(TIMEOUT) == "default"


def test_capability_claims_fold_from_the_lowest_layer_to_the_highest(tmp_path):
    settings = _run(tmp_path, file="[capabilities]\nsearch = false\nmcp = false\nartifacts = \"auto\"\n",
                    env={"AIDEMEMO_CAPABILITIES": "mcp,leases=auto"}, flags={"capabilities": ["-leases", "search"]},
                    ini={"aidememo_capabilities": "artifacts,replica-feeds"})
    assert settings[CAPABILITIES] == {"artifacts": None, "replica-feeds": True, "search": True, "mcp": True,
                                      "leases": False}


@pytest.mark.parametrize(("layer", "message"), [
    ("flag", "--aidememo-capability: unknown capability 'teleport'"),
    ("env", "AIDEMEMO_CAPABILITIES: unknown capability 'teleport'"),
    ("file", "target.toml: capabilities: unknown capability 'teleport'"),
    ("ini", "ini aidememo_capabilities: unknown capability 'teleport'"),
])
def test_capability_errors_per_layer(tmp_path, layer, message):
    with pytest.raises(ConfigError) as caught:
        _run(tmp_path,
             flags={"capabilities": ["teleport"]} if layer == "flag" else {},
             env={"AIDEMEMO_CAPABILITIES": "teleport"} if layer == "env" else {},
             file="[capabilities]\nteleport = true\n" if layer == "file" else None,
             ini={"aidememo_capabilities": "teleport"} if layer == "ini" else {})
    assert message in str(caught.value), str(caught.value)


def test_core_cannot_be_disclaimed(tmp_path):
    with pytest.raises(ConfigError, match="AIDEMEMO_CAPABILITIES: capability 'core' cannot be disclaimed"):
        _run(tmp_path, env={"AIDEMEMO_CAPABILITIES": "-core"})


@pytest.mark.parametrize(("layer", "where"), [
    ("flag", "--aidememo-profile"), ("env", "AIDEMEMO_PROFILE"), ("file", "target.toml: profile"),
    ("ini", "ini aidememo_profile"),
])
def test_an_unknown_profile_names_where_it_came_from(tmp_path, layer, where):
    with pytest.raises(ConfigError) as caught:
        _run(tmp_path,
             flags={"profile": "nope"} if layer == "flag" else {},
             env={"AIDEMEMO_PROFILE": "nope"} if layer == "env" else {},
             file='profile = "nope"\n' if layer == "file" else None,
             ini={"aidememo_profile": "nope"} if layer == "ini" else {})
    assert f"{where}: unknown profile 'nope' (known: aidememo" in str(caught.value), str(caught.value)


def test_a_profile_alias_selects_the_profile(tmp_path):
    profile, _ = resolve_run(SettingsInput(flags={"profile": "aidememo-remote"}, environ={}))
    assert profile.name == "aidememo"


def test_a_target_file_of_another_profile_is_refused(tmp_path):
    (tmp_path / "target.toml").write_text('profile = "aidememo-remote"\n')
    resolve_run(SettingsInput(flags={"config": str(tmp_path / "target.toml"), "profile": "aidememo"}, environ={}))
    (tmp_path / "other.toml").write_text('profile = "elsewhere"\n')
    with pytest.raises(ConfigError, match="profile is 'elsewhere', but --profile selects profile 'aidememo'"):
        resolve_run(SettingsInput(flags={"config": str(tmp_path / "other.toml"), "profile": "aidememo"}, environ={}))


def test_the_target_file_itself_resolves_flag_then_environment_then_ini(tmp_path):
    for name in ("flag", "env", "ini"):
        write_target(tmp_path / f"{name}.toml", f"http://{name}.example:1", provision={"command": COMMAND})
    both = {"environ": {"AIDEMEMO_CONFIG": str(tmp_path / "env.toml")}, "ini": {"aidememo_config": str(tmp_path / "ini.toml")}}
    settings = resolve_run(SettingsInput(flags={"config": str(tmp_path / "flag.toml")}, **both))[1]
    assert settings[URL] == "http://flag.example:1"
    settings = resolve_run(SettingsInput(flags={}, **both))[1]
    assert settings[URL] == "http://env.example:1"
    settings = resolve_run(SettingsInput(flags={}, environ={}, ini=both["ini"]))[1]
    assert settings[URL] == "http://ini.example:1"


def test_unknown_keys_in_the_target_file_are_refused(tmp_path):
    with pytest.raises(ConfigError, match=r"target file .*target.toml: unknown key 'provision.comand'"):
        _run(tmp_path, file='[provision]\ncomand = "x"\n')
    with pytest.raises(ConfigError, match=r"target file .*target.toml: unknown key 'colour'"):
        _run(tmp_path, file='colour = "blue"\n')
    with pytest.raises(ConfigError, match=r"provision.tokens\[0\]: unknown key 'tokn'"):
        _run(tmp_path, file='[[provision.tokens]]\nproject = "p"\nactor = "a"\ntokn = "x"\n')


def test_paths_in_the_target_file_are_relative_to_it(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "target.toml").write_text('baseline = "known.toml"\n')
    settings = resolve_run(SettingsInput(flags={"config": str(tmp_path / "sub" / "target.toml")}, environ={}))[1]
    assert settings[BASELINE] == str(tmp_path / "sub" / "known.toml")
    from_flag = resolve_run(SettingsInput(flags={"baseline": "known.toml"}, environ={}))[1]
    assert from_flag[BASELINE] == "known.toml"


def test_a_url_needs_a_way_to_get_identities_and_says_which_flag(tmp_path):
    with pytest.raises(ConfigError, match=r"\(--provision-command or \[provision\] command\)"):
        _run(tmp_path, flags={"url": "http://x.example:1"}, style="cli")
    with pytest.raises(ConfigError, match=r"\(--aidememo-provision-command or \[provision\] command\)"):
        _run(tmp_path, flags={"url": "http://x.example:1"})
    tokens = _run(tmp_path, file='url = "http://x.example:1"\n[[provision.tokens]]\nproject = "p"\nactor = "a"\n'
                                 'token = "t0123"\n')
    assert [identity.fields for identity in tokens[PROVISION_TOKENS]] == [{"project": "p", "actor": "a",
                                                                           "role": "writer"}]


def test_a_bad_ini_value_is_blamed_on_the_ini_and_the_environment_wins(pytester, monkeypatch):
    # An ini value ranks below AIDEMEMO_URL, and a bad one is blamed on the ini, not on --aidememo-url.
    pytester.makeini("[pytest]\naidememo_url = not-a-url\n")
    pytester.makepyfile(test_checks='import pytest\n@pytest.mark.requirement("AM-HEALTH-1")\n'
                                    'def test_x(world):\n    pass\n')
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--aidememo-list")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*ini aidememo_url: expected an http:// or https:// URL, got 'not-a-url'*"])
    monkeypatch.setenv("AIDEMEMO_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("AIDEMEMO_PROVISION_COMMAND", COMMAND)
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--aidememo-list")
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED, result.stderr.str()
    result.stdout.fnmatch_lines(["*AM-HEALTH-1*MUST*core*1*"])
