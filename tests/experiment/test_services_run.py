"""Experiments that start their own services: through the real proxy, on abort, on failure and on Ctrl-C."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from brownout.proxy.experiment.api import run_experiment
from tests.experiment.conftest import HERE, needs_proxy
from tests.experiment.test_services import UPSTREAM, alive

pytestmark = [needs_proxy, pytest.mark.timeout(120)]

AGENT = [sys.executable, str(HERE / "fake_agent.py"), "{task}"]


def _exp(**over: Any) -> str:
    doc: dict[str, Any] = {
        "name": "with-services",
        "seed": 3,
        "services": [UPSTREAM],
        "agent": {
            "command": AGENT,
            "tasks": ["a", "b"],
            "runs_per_task": 2,
            "concurrency": 2,
            "timeout_s": 20,
            "success": {"stdout_regex": "^ANSWER"},
        },
        "phases": [{"name": "baseline"}],
    }
    doc.update(over)
    return yaml.safe_dump(doc)


def _children(pid: int) -> list[int]:
    kids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError):
            # the command name (field 2) may hold spaces; the parent pid follows its closing parenthesis
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == pid:
                kids.append(int(stat.parent.name))
    return kids


@pytest.fixture
def no_upstream(monkeypatch: pytest.MonkeyPatch) -> None:
    # The agent can reach the upstream only through what the service exports.
    monkeypatch.delenv("DEMO_UPSTREAM", raising=False)


def test_agent_uses_the_service_the_experiment_started(tmp_path: Path, confdir: str, no_upstream: None) -> None:
    out = tmp_path / "out"
    outcome = run_experiment(_exp(), source="exp.yaml", base_dir=tmp_path, out_dir=out, confdir=confdir)
    rep = outcome.report
    assert rep["status"] == "completed" and outcome.exit_code == 0, rep.get("error")
    assert [r["status"] for r in rep["runs"]] == ["passed"] * 4
    assert all(r["calls"] == 2 for r in rep["runs"])  # through the proxy, attributed to the run
    (svc,) = rep["services"]
    assert svc["name"] == "upstream" and svc["stopped_by"] == "SIGTERM" and svc["exit_code"] == -signal.SIGTERM
    assert not alive(svc["pid"])
    assert "LISTENING" in (out / "service-upstream.log").read_text()
    assert "service-upstream.log" in (out / "report.html").read_text()
    assert "| upstream |" in (out / "report.md").read_text()


def test_services_stop_when_the_experiment_aborts(
    tmp_path: Path, confdir: str, no_upstream: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_EXIT", "1")
    text = _exp(abort={"min_success_rate": 0.5, "after_runs": 2})
    outcome = run_experiment(text, source="exp.yaml", base_dir=tmp_path, out_dir=tmp_path / "out", confdir=confdir)
    assert outcome.report["status"] == "aborted" and outcome.exit_code == 2
    (svc,) = outcome.report["services"]
    assert svc["stopped_by"] == "SIGTERM" and not alive(svc["pid"])


def test_a_service_that_is_not_ready_fails_the_experiment(tmp_path: Path, confdir: str, no_upstream: None) -> None:
    broken = {
        "name": "tools",
        "command": [sys.executable, "-c", "import sys; print('tools: bad key', file=sys.stderr); sys.exit(4)"],
        "ready": {"tcp": "127.0.0.1:{port}", "timeout_s": 10},
    }
    out = tmp_path / "out"
    outcome = run_experiment(
        _exp(services=[UPSTREAM, broken]), source="exp.yaml", base_dir=tmp_path, out_dir=out, confdir=confdir
    )
    rep = outcome.report
    assert rep["status"] == "failed" and outcome.exit_code == 2 and rep["runs"] == []
    assert "service 'tools' exited with code 4 before it was ready" in rep["error"]
    assert "tools: bad key" in rep["error"]  # the tail of its log
    up, tools = rep["services"]
    assert tools["exit_code"] == 4 and tools["exited_early"] and up["stopped_by"] == "SIGTERM"
    assert not alive(up["pid"])
    assert "never ready" in (out / "report.html").read_text()


def test_ctrl_c_stops_the_services(tmp_path: Path, confdir: str) -> None:
    exp = tmp_path / "exp.yaml"
    exp.write_text(_exp(agent={"command": AGENT, "tasks": ["a"], "runs_per_task": 2, "timeout_s": 60}))
    out = tmp_path / "out"
    # Python leaves SIGINT ignored if it starts ignored (as under a background shell): restore the default.
    launcher = (
        "import signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
        "from brownout.proxy.cli import main; sys.argv[0] = 'brownout'; main()"
    )
    env = {**os.environ, "FAKE_SLEEP_S": "60"}
    env.pop("DEMO_UPSTREAM", None)
    argv = [sys.executable, "-c", launcher, "experiment", "run", str(exp), "--out", str(out), "--no-progress"]
    proc = subprocess.Popen([*argv, "--confdir", confdir], env=env, start_new_session=True)
    try:
        log = out / "service-upstream.log"
        deadline = time.monotonic() + 30
        while not (log.exists() and "LISTENING" in log.read_text()):
            assert time.monotonic() < deadline and proc.poll() is None, "the service never started"
            time.sleep(0.1)
        time.sleep(2.0)  # the proxy is up and the agents are sleeping
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 2
    finally:
        if proc.poll() is None:  # it hung: kill it and what it started (services run in their own sessions)
            for pid in [proc.pid, *_children(proc.pid)]:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pid, signal.SIGKILL)
    rep = json.loads((out / "report.json").read_text())
    assert rep["interrupted"] and rep["status"] == "aborted"
    (svc,) = rep["services"]
    assert svc["stopped_by"] == "SIGTERM" and not alive(svc["pid"])
