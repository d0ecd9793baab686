"""Relative paths in a config file resolve against the file's directory (logs, cassette directories,
custom invariant files), at start-up, on hot reload and in experiment phases; paths on the command
line resolve against the working directory."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from brownout.proxy.config import BrownoutConfig
from brownout.proxy.configload import load_config
from tests.cli.helpers import brownout_cmd, clean_env

CONFIG = """
version: 1
exporters:
  jsonl: {path: logs/violations.jsonl, decisions_path: ../decisions.jsonl, exchanges_path: /var/tmp/x.jsonl}
record: {dir: cassettes}
replay: {dir: ~/tapes}
invariants:
  - {type: custom, name: from_file, callable: "checks/mine.py:flag"}
  - {type: custom, name: from_module, callable: "tests.invariants.custom_checks:no_gpt3"}
"""

CHECK = """
def flag(span, session):
    if "flag-me" in str(span.attributes.get("url.full", "")):
        return "flagged by a check beside the config"
    return None
"""


@pytest.fixture
def elsewhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory that is not the config's."""
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    return work


def _config_dir(tmp_path: Path) -> Path:
    conf = tmp_path / "conf"
    (conf / "checks").mkdir(parents=True)
    (conf / "checks" / "mine.py").write_text(CHECK)
    (conf / "chaos.yaml").write_text(CONFIG)
    return conf


def test_relative_paths_resolve_against_the_config_files_directory(tmp_path: Path, elsewhere: Path) -> None:
    conf = _config_dir(tmp_path)
    config = load_config(Path("..") / "conf" / "chaos.yaml")  # itself named relative to the working directory
    jsonl = config.exporters.jsonl
    assert jsonl.path == str(conf / "logs" / "violations.jsonl")
    assert jsonl.decisions_path == str(tmp_path / "decisions.jsonl")
    assert jsonl.exchanges_path == "/var/tmp/x.jsonl"  # absolute: as written
    assert config.record.dir == str(conf / "cassettes")
    assert config.replay.dir == str(Path.home() / "tapes")
    assert [inv.callable for inv in config.invariants] == [  # type: ignore[union-attr]
        f"{conf / 'checks' / 'mine.py'}:flag",
        "tests.invariants.custom_checks:no_gpt3",  # a module: imported, not a path
    ]


def test_a_config_built_in_code_keeps_paths_as_written() -> None:
    config = BrownoutConfig.model_validate(
        {"record": {"dir": "cassettes"}, "exporters": {"jsonl": {"path": "v.jsonl"}}}
    )
    assert config.record.dir == "cassettes" and config.exporters.jsonl.path == "v.jsonl"


def test_a_custom_invariant_file_beside_the_config_checks_live_traffic(
    tmp_path: Path, elsewhere: Path, brownout_proxy: Callable[..., Any], upstream: Any
) -> None:
    conf = _config_dir(tmp_path)
    (conf / "chaos.yaml").write_text(
        "version: 1\ninvariants:\n  - {type: custom, name: from_file, callable: 'checks/mine.py:flag'}\n"
    )
    violations: list[Any] = []
    proxy = brownout_proxy(conf / "chaos.yaml", upstream=upstream)
    proxy.addon.pipeline.violation_listeners.append(violations.append)
    with httpx.Client(proxy=proxy.proxy_url(), trust_env=False) as client:
        client.get(f"{upstream.url}/tools/weather?city=Oslo")
        client.get(f"{upstream.url}/tools/weather?city=flag-me")
    deadline = time.monotonic() + 5
    while not violations and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [(v.invariant, v.message) for v in violations] == [("from_file", "flagged by a check beside the config")]


def test_a_hot_reload_resolves_against_the_config_files_directory(
    tmp_path: Path, elsewhere: Path, brownout_proxy: Callable[..., Any], upstream: Any
) -> None:
    conf = tmp_path / "conf"
    conf.mkdir()
    path = conf / "chaos.yaml"
    path.write_text("version: 1\n")
    proxy = brownout_proxy(path, upstream=upstream)
    path.write_text("version: 1\nrecord: {dir: cassettes}\n")
    deadline = time.monotonic() + 10
    while proxy.addon.config.record.dir is None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert proxy.addon.config.record.dir == str(conf / "cassettes")
    with httpx.Client(proxy=proxy.proxy_url("reloaded"), trust_env=False) as client:
        assert client.get(f"{upstream.url}/tools/weather?city=Oslo").status_code == 200
    deadline = time.monotonic() + 10
    while not list((conf / "cassettes").glob("*")) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert [p.name for p in (conf / "cassettes").iterdir()] and not (elsewhere / "cassettes").exists()


def test_command_line_paths_resolve_against_the_working_directory(
    tmp_path: Path, elsewhere: Path, confdir: Path, upstream: Any
) -> None:
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "chaos.yaml").write_text("version: 1\nrecord: {dir: from-config}\nexporters: {jsonl: {path: v.jsonl}}\n")
    client = "import httpx, sys; httpx.get(sys.argv[1] + '/tools/weather?city=Lima', timeout=10).raise_for_status()"
    args = ["exec", "-c", "../conf/chaos.yaml", "--confdir", str(confdir), "--record", "tapes"]
    proc = subprocess.run(
        [*brownout_cmd(), *args, "--summary-json", "s.json", "--", sys.executable, "-c", client, upstream.url],
        env=clean_env(),
        cwd=elsewhere,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    files = json.loads((elsewhere / "s.json").read_text())["files"]
    assert files == {"violation_log": str(conf / "v.jsonl"), "record_dir": str(elsewhere / "tapes")}
    assert list((elsewhere / "tapes").iterdir()) and not (conf / "from-config").exists()


def test_experiment_phases_resolve_against_their_own_files(tmp_path: Path) -> None:
    from brownout.proxy.experiment.config import parse_experiment
    from brownout.proxy.experiment.manifest import resolve_phases

    (tmp_path / "phases").mkdir()
    (tmp_path / "phases" / "chaos.yaml").write_text(
        "version: 1\ninvariants: [{type: custom, name: phase_check, callable: 'mine.py:flag'}]\n"
    )
    exp = parse_experiment(
        'agent: {command: "true"}\n'
        "invariants: [{type: custom, name: shared_check, callable: 'checks/mine.py:flag'}]\n"
        "phases: [{name: baseline}, {name: chaos, config: phases/chaos.yaml}]\n"
    )
    baseline, chaos = resolve_phases(exp, tmp_path, seed=1)
    assert [i.callable for i in baseline.config.invariants] == [f"{tmp_path / 'checks' / 'mine.py'}:flag"]  # type: ignore[union-attr]
    assert [i.callable for i in chaos.config.invariants] == [  # type: ignore[union-attr]
        f"{tmp_path / 'checks' / 'mine.py'}:flag",  # the experiment's own, beside the experiment
        f"{tmp_path / 'phases' / 'mine.py'}:flag",  # the phase file's, beside the phase file
    ]
