"""Runs through the real embedded proxy with a fast stdlib agent: attribution, statuses, abort, replay."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from brownout.proxy.experiment.api import run_experiment
from brownout.proxy.experiment.config import BASELINE_PROXIED, BASELINE_WORKS
from brownout.proxy.experiment.replay import replay_experiment
from tests.experiment.conftest import HERE, needs_proxy

pytestmark = [needs_proxy, pytest.mark.timeout(180)]

AGENT = [sys.executable, str(HERE / "fake_agent.py"), "{task}"]
TOOL_500 = [
    {
        "name": "tool-500",
        "match": {"path": "/tools/*"},
        "fault": {"type": "http_error", "status": 500},
        "schedule": {"probability": 0.5},
    }
]


def _exp(tmp_path: Path, **over: object) -> str:
    doc = {
        "name": "fast",
        "seed": 3,
        "agent": {
            "command": AGENT,
            "tasks": ["a", "b"],
            "runs_per_task": 3,
            "concurrency": 3,
            "timeout_s": 20,
            "success": {"stdout_regex": "^ANSWER"},
        },
        "phases": [{"name": "baseline"}, {"name": "chaos", "rules": TOOL_500}],
        "gate": {"max_success_drop": 1.0},
    }
    doc.update(over)
    return yaml.safe_dump(doc)


def _run(tmp_path: Path, text: str, confdir: str, out: str = "out"):
    return run_experiment(text, source="exp.yaml", base_dir=tmp_path, out_dir=tmp_path / out, confdir=confdir)


def test_runs_are_attributed_and_replay_reproduces_decisions(tmp_path: Path, demo_env: str, confdir: str) -> None:
    outcome = _run(tmp_path, _exp(tmp_path), confdir)
    rep = outcome.report
    assert rep["status"] == "completed", rep.get("error")
    base, chaos = rep["phases"]
    assert base["runs"] == chaos["runs"] == 6
    assert base["success_rate"] == 1.0 and base["faults"] == 0
    assert all(r["calls"] == 2 for r in rep["runs"]), [r["calls"] for r in rep["runs"]]
    assert 0 < chaos["faults"] < 6 and chaos["passed"] == 6 - chaos["faults"]
    # Priced by the proxy: every run made one gpt-4o-mini call, and a tool's 500 added no LLM spend.
    per_run = base["cost_usd_per_run"]
    assert per_run is not None and per_run > 0 and chaos["cost_usd_per_run"] == pytest.approx(per_run)
    assert base["cost_usd"] == pytest.approx(6 * per_run) and rep["cost_usd"]["baseline_per_run"] == pytest.approx(
        per_run
    )
    assert rep["cost_of_chaos"]["http_error"]["extra_cost_usd_per_run"] == pytest.approx(0.0, abs=1e-12)
    assert outcome.decisions and {d["session"] for d in outcome.decisions} <= {r["run_id"] for r in rep["runs"]}
    for name in ("report.json", "junit.xml", "report.md", "report.html", "manifest.json", "decisions.jsonl"):
        assert (tmp_path / "out" / name).exists()

    again, cmp = replay_experiment(tmp_path / "out", confdir=confdir)
    assert cmp["identical"], cmp["mismatches"]
    assert cmp["fired_original"] == cmp["fired_replay"] == chaos["faults"]
    assert again.report["phases"][1]["passed"] == chaos["passed"]


def test_traceparent_sessions_alias_to_runs(
    tmp_path: Path, demo_env: str, confdir: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_TRACEPARENT", "1")
    outcome = _run(tmp_path, _exp(tmp_path, phases=[{"name": "baseline"}]), confdir)
    assert all(r["calls"] == 2 for r in outcome.report["runs"])


def test_abort_on_success_rate_and_statuses(
    tmp_path: Path, demo_env: str, confdir: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_EXIT", "1")
    text = _exp(
        tmp_path,
        abort={"min_success_rate": 0.5, "after_runs": 2},
        phases=[{"name": "chaos", "rules": TOOL_500}, {"name": "later"}],
    )
    outcome = _run(tmp_path, text, confdir)
    rep = outcome.report
    assert rep["status"] == "aborted" and outcome.exit_code == 2
    assert "success rate" in rep["abort_reason"]
    assert [p["label"] for p in rep["phases"]] == ["chaos"]
    assert all(r["status"] == "failed" for r in rep["runs"])
    assert (tmp_path / "out" / "report.html").exists()


def test_an_agent_failing_without_chaos_skips_the_chaos_and_fails(
    tmp_path: Path, demo_env: str, confdir: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_EXIT", "1")  # e.g. a wrong command: every run fails, faults or not
    outcome = _run(tmp_path, _exp(tmp_path, gate={}), confdir)  # no hypothesis, no gate of its own
    rep = outcome.report
    assert rep["status"] == "failed" and outcome.exit_code == 1
    assert [p["label"] for p in rep["phases"]] == ["baseline"]  # the chaos phase never ran
    # It never sent a request either.
    assert [(h["hypothesis"], h["ok"]) for h in rep["hypotheses"]] == [
        (BASELINE_WORKS, False),
        (BASELINE_PROXIED, False),
    ]


def test_an_agent_that_goes_around_the_proxy_fails_the_experiment_saying_why(
    tmp_path: Path, demo_env: str, confdir: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_DIRECT", "1")  # every run succeeds, straight to the upstream
    outcome = _run(tmp_path, _exp(tmp_path), confdir)
    rep = outcome.report
    assert rep["status"] == "failed" and outcome.exit_code == 1
    assert rep["phases"][0]["success_rate"] == 1.0 and rep["phases"][0]["exchanges"] == 0
    assert [p["label"] for p in rep["phases"]] == ["baseline"]  # no chaos measured on traffic it never saw
    failed = [h for h in rep["hypotheses"] if h["ok"] is False]
    assert [h["hypothesis"] for h in failed] == [BASELINE_PROXIED]
    assert "no request of the agent reached brownout" in failed[0]["note"]
    assert "HTTP(S)_PROXY" in failed[0]["note"] and "reverse" in failed[0]["note"]


def test_exchanges_outside_any_run_session_still_count_as_reaching_brownout(
    tmp_path: Path, demo_env: str, confdir: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An agent whose requests carry no session (so no run gets them) did go through the proxy."""
    agent = [
        sys.executable,
        "-c",
        "import os, urllib.request; urllib.request.urlopen(os.environ['DEMO_UPSTREAM'] + '/ping').read(); print('ANSWER')",
    ]
    outcome = _run(
        tmp_path,
        _exp(
            tmp_path,
            agent={"command": agent, "tasks": ["a"], "success": {"stdout_regex": "^ANSWER"}},
            phases=[{"name": "baseline"}],
        ),
        confdir,
    )
    rep = outcome.report
    assert rep["status"] == "completed", rep["hypotheses"]
    assert rep["phases"][0]["exchanges"] >= 1 and rep["phases"][0]["calls_per_run"] == 0


def test_wall_clock_abort_and_timeout_status(
    tmp_path: Path, demo_env: str, confdir: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_SLEEP_S", "30")
    text = _exp(
        tmp_path,
        # 20 runs of 0.5 s two at a time need 5 s: the 4 s limit cuts them, after a loaded machine has had time
        # to start the proxy and finish a few.
        abort={"max_duration_s": 4.0},
        agent={"command": AGENT, "tasks": ["a"], "runs_per_task": 20, "concurrency": 2, "timeout_s": 0.5},
        baseline_must_succeed=False,  # every run times out, the baseline's too: the abort is what is tested
    )
    outcome = _run(tmp_path, text, confdir)
    rep = outcome.report
    assert rep["status"] == "aborted" and "wall-clock" in rep["abort_reason"]
    assert rep["runs"] and all(r["status"] == "timeout" for r in rep["runs"])


def test_an_agent_launched_during_an_abort_is_killed(tmp_path: Path) -> None:
    # A run thread may pass the stop check and start its agent just as an abort kills the others.
    from brownout.proxy.experiment.config import parse_experiment
    from brownout.proxy.experiment.runner import ExperimentRunner

    runner = ExperimentRunner(parse_experiment(_exp(tmp_path)), [], base_dir=tmp_path, seed=0)
    runner._stop_all(None)
    late = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True, text=True)
    runner._track(late)
    assert late.wait(timeout=10) == -signal.SIGKILL


def test_the_runner_changes_the_proxy_only_on_its_loop(
    tmp_path: Path, demo_env: str, confdir: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Phase switches, the collector's (un)subscribing and the abort's pause run on the proxy's
    event loop (through the handle), never on the runner's own threads."""
    import asyncio
    from contextlib import contextmanager

    from brownout.proxy.embed import running_proxy
    from brownout.proxy.experiment.collector import Collector

    calls: list[tuple[str, bool]] = []
    loops: list[Any] = []

    def on_the_loop() -> bool:
        try:
            return asyncio.get_running_loop() is loops[0]
        except RuntimeError:  # no loop runs on this thread
            return False

    def spy(name: str, fn: Any) -> Any:
        def recorded(*args: Any) -> Any:
            calls.append((name, on_the_loop()))
            return fn(*args)

        return recorded

    @contextmanager
    def spied_proxy(**kw: Any) -> Any:
        with running_proxy(**kw) as handle:
            loops.append(handle.addon.on_loop.loop)
            monkeypatch.setattr(handle.addon, "apply_config", spy("apply_config", handle.addon.apply_config))
            monkeypatch.setattr(handle.addon.engine, "pause", spy("pause", handle.addon.engine.pause))
            yield handle

    for name in ("attach", "detach"):
        original = getattr(Collector, name)
        monkeypatch.setattr(Collector, name, lambda self, addon, _n=name, _f=original: spy(_n, _f)(self, addon))
    monkeypatch.setenv("FAKE_EXIT", "1")  # every run fails: the abort pauses the faults
    text = _exp(tmp_path, abort={"min_success_rate": 0.5, "after_runs": 2})
    outcome = run_experiment(
        text, source="exp.yaml", base_dir=tmp_path, out_dir=tmp_path / "out", confdir=confdir, proxy_factory=spied_proxy
    )
    assert outcome.report["status"] == "aborted"
    names = [name for name, _ in calls]
    assert names[:2] == ["attach", "apply_config"] and "pause" in names and names[-1] == "detach", names
    assert all(on_loop for _, on_loop in calls), calls
