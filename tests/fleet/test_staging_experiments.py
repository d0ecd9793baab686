"""Staging experiments against a real fleet: three `brownout run` replicas on a real Redis in front of a mock
LLM, an agent service driven by a load generator, a real Prometheus scraping them every second.

One environment serves the whole module (it takes a while to start on a loaded machine); each test
starts from a fleet that is not paused and holds no phase.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from brownout.proxy.demo.upstream import MockUpstream
from brownout.proxy.experiment.staging.config import StagingExperiment, parse_any_experiment
from brownout.proxy.experiment.staging.run import run_staging
from tests.cli.helpers import brownout_cmd, clean_env, free_port
from tests.exporters.promsupport import needs_prometheus
from tests.fleet.replicas import TOKEN, replica_set
from tests.fleet.stage import SLO, Stage, agent_service, load, prometheus
from tests.redisserver import REDIS_SERVER, running_redis

pytestmark = [needs_prometheus, pytest.mark.slow, pytest.mark.timeout(300)]

PROBE_S = 1.0
OWN_RULE = {
    "name": "own-latency",
    "match": {"provider": "openai"},
    "fault": {"type": "latency", "delay_ms": 1},
    "schedule": {"probability": 0.2},
}


@pytest.fixture(scope="module")
def stage(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stage]:
    if not Path(REDIS_SERVER).exists():
        pytest.fail("redis-server absent: `make test` installs the Debian package redis-server")
    tmp = tmp_path_factory.mktemp("stage")
    with running_redis(tmp) as redis, MockUpstream.run_in_thread() as upstream:
        config = {
            "version": 1,
            "proxy": {"announce_faults": True},
            "state": {"backend": "redis", "url": redis.url, "timeout_ms": 2000},
            "rules": [OWN_RULE],
        }
        with replica_set(config, upstream.url, tmp / "fleet") as fleet:
            with agent_service([r.base_url for r in fleet.replicas]) as agent, load(agent.url):
                ports = [r.metrics_port for r in fleet.replicas]
                with prometheus(tmp / "prometheus", ports, agent.metrics_port, free_port()) as prom:
                    yield Stage(fleet, redis, agent, prom)


@pytest.fixture
def fleet_ready(stage: Stage) -> Stage:
    """The fleet not paused and holding no phase (an earlier test may have aborted)."""
    stage.fleet.replicas[0].control("POST", "/faults/resume")
    stage.fleet.replicas[0].control("DELETE", "/experiment/phase")
    deadline = time.monotonic() + 5

    def paused() -> bool:  # each replica, and the roll call (its heartbeat follows within a second)
        statuses = [r.control("GET", "/status") for r in stage.fleet.replicas]
        return any(s["paused"] or any(x["paused"] for x in s["state"]["replicas"]) for s in statuses)

    while paused():
        assert time.monotonic() < deadline
        time.sleep(0.1)
    return stage


def experiment(stage: Stage, target: dict[str, Any], phases: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {
        "version": 1,
        "name": "gameday",
        "target": {"lease_s": 2, **target},
        "prometheus": {
            "url": stage.prom.url,
            "probe_interval_s": PROBE_S,
            "window_s": 3,
            "settle_s": 1.5,
            "selector": 'job="brownout"',
        },
        "phases": phases,
        "steady_state": [{"name": "agent answers", "metric": "promql", "query": SLO, "op": ">=", "threshold": 0.9}],
        **extra,
    }


def run(stage: Stage, tmp_path: Path, data: dict[str, Any]) -> dict[str, Any]:
    config = parse_any_experiment(yaml.safe_dump(data), "exp.yaml")
    assert isinstance(config, StagingExperiment)
    return run_staging(config, base_dir=tmp_path, out_dir=tmp_path / "report", environ={"BROWNOUT_TOKEN": TOKEN})


def wait_phase(stage: Stage, phase: str, value: float, within_s: float = 10, proc: Any = None) -> None:
    """Until every replica's brownout_experiment_phase for `phase` reads `value`."""
    start = time.monotonic()
    while not all(g.get(("gameday", phase)) == value for g in stage.phase_gauges()):
        assert proc is None or proc.poll() is None, proc.communicate()[1]
        assert time.monotonic() - start < within_s, (phase, value, stage.phase_gauges())
        time.sleep(0.1)


@contextlib.contextmanager
def runner_process(stage: Stage, tmp_path: Path, data: dict[str, Any], phase: str) -> Iterator[subprocess.Popen[str]]:
    """`brownout experiment run` in a process of its own, once `phase` is on every replica."""
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(data))
    cmd = [*brownout_cmd(), "experiment", "run", str(path), "--out", str(tmp_path / "report")]
    proc = subprocess.Popen(cmd, env=clean_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait_phase(stage, phase, 1, within_s=30, proc=proc)
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


OUTAGE = [{"name": "503s", "match": {"provider": "openai"}, "fault": {"type": "http_error", "status": 503}}]
GENTLE = [{"name": "slow", "match": {"provider": "openai"}, "fault": {"type": "latency", "delay_ms": 20}}]


def test_a_phase_that_breaks_the_slo_aborts_at_once_and_the_fleet_stops_injecting(
    fleet_ready: Stage, tmp_path: Path
) -> None:
    stage = fleet_ready
    data = experiment(
        stage,
        {"state": stage.redis_url},
        [{"name": "baseline", "duration_s": 2}, {"name": "outage", "duration_s": 20, "rules": OUTAGE}],
        abort={"after_breaches": 2},
    )
    report = run(stage, tmp_path, data)
    assert (report["status"], report["exit_code"]) == ("aborted", 2), report["events"]
    abort = report["abort"]
    assert abort["phase"] == "outage" and abort["check"] == "agent answers" and len(abort["values"]) == 2
    assert all(v < 0.9 for v in abort["values"])
    outage = report["phases"][1]
    assert outage["status"] == "aborted" and outage["finished_at"] - outage["started_at"] < 12
    probes = next(p["probes"] for p in outage["probes"] if p["check"] == "agent answers")
    # The probe that saw the second breach in a row is the phase's last: the kill switch was pulled within
    # one probe interval of it, and the fleet paused.
    assert [ok for _, _, ok, _ in probes[-2:]] == [False, False]
    assert abort["at"] - probes[-1][0] < PROBE_S and abort["paused_at"] - abort["at"] < PROBE_S
    assert "'agent answers' breached 2 probes in a row in phase outage" in report["abort_reason"]
    # The whole fleet stopped injecting: every replica is paused, and its fault counter stands still.
    time.sleep(0.6)
    assert all(r.control("GET", "/status")["paused"] for r in stage.fleet.replicas)
    before = stage.faults_per_replica()
    time.sleep(1.0)  # the load goes on
    assert stage.faults_per_replica() == before
    assert all(r.control("GET", "/status")["experiment"] is None for r in stage.fleet.replicas)
    junit = (tmp_path / "report" / "junit.xml").read_text()
    assert 'name="abort"' in junit and "breached 2 probes in a row" in junit


def test_a_runner_killed_mid_phase_leaves_no_chaos_once_its_lease_expires(fleet_ready: Stage, tmp_path: Path) -> None:
    stage = fleet_ready
    data = experiment(stage, {"state": stage.redis_url}, [{"name": "slow-llm", "duration_s": 60, "rules": GENTLE}])
    with runner_process(stage, tmp_path, data, "slow-llm") as proc:
        os.kill(proc.pid, signal.SIGKILL)  # no cleanup of any kind
        killed = time.monotonic()
        proc.wait(10)
    # Every replica drops the phase within the lease (2 s) and a poll.
    wait_phase(stage, "slow-llm", 0)
    # 3 s on a quiet machine; far below the phase's 60 s even when a loaded one starves the replicas' polls.
    assert time.monotonic() - killed < 15
    assert all(r.control("GET", "/status")["experiment"] is None for r in stage.fleet.replicas)
    status = stage.fleet.replicas[0].control("GET", "/status")
    assert [rule["name"] for rule in status["rules"]] == ["own-latency"]
    # Each replica injected the phase's faults while it held it, and injects none from now on.
    before = [phase_faults(r.metrics()) for r in stage.fleet.replicas]
    time.sleep(1.0)  # the load goes on
    assert [phase_faults(r.metrics()) for r in stage.fleet.replicas] == before
    assert all(n > 0 for n in before), before
    assert stage.redis_command("EXISTS", "brownout:experiment") == 0


def phase_faults(metrics: str, rule: str = "gameday/slow-llm/slow") -> float:
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in metrics.splitlines()
        if line.startswith("brownout_faults_injected_total{") and f'rule="{rule}"' in line
    )


def test_ctrl_c_mid_phase_removes_the_phase_at_once_and_still_writes_the_report(
    fleet_ready: Stage, tmp_path: Path
) -> None:
    stage = fleet_ready
    data = experiment(
        stage, {"state": stage.redis_url, "lease_s": 60}, [{"name": "slow", "duration_s": 60, "rules": GENTLE}]
    )
    with runner_process(stage, tmp_path, data, "slow") as proc:
        proc.send_signal(signal.SIGINT)  # Ctrl-C (SIGTERM takes the same path: tests/experiment/test_staging_runner.py)
        stopped = time.monotonic()
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 2, err
    # Removed by the runner, long before its 60 s lease would have ended it.
    wait_phase(stage, "slow", 0)
    assert time.monotonic() - stopped < 20  # about 1 s on a quiet machine; the lease would hold it 60 s
    report = json.loads((tmp_path / "report" / "report.json").read_text())
    assert report["status"] == "aborted" and report["interrupted"] is True
    assert report["abort_reason"] == "interrupted (Ctrl-C or SIGTERM)"
    assert not any(r.control("GET", "/status")["paused"] for r in stage.fleet.replicas)  # no kill switch for a stop


def test_a_phase_removed_by_an_operator_ends_the_experiment(fleet_ready: Stage, tmp_path: Path) -> None:
    stage = fleet_ready
    target = {"control": [stage.fleet.replicas[0].control_url]}
    data = experiment(stage, target, [{"name": "slow", "duration_s": 20, "rules": GENTLE}])
    config = parse_any_experiment(yaml.safe_dump(data), "exp.yaml")
    assert isinstance(config, StagingExperiment)
    outcome: dict[str, Any] = {}
    runner = threading.Thread(
        target=lambda: outcome.update(
            run_staging(config, base_dir=tmp_path, out_dir=tmp_path / "report", environ={"BROWNOUT_TOKEN": TOKEN})
        )
    )
    runner.start()
    wait_phase(stage, "slow", 1, within_s=30)
    stop = stage.fleet.replicas[2].control("DELETE", "/experiment/phase")  # another replica than the runner's
    assert stop["fleet"] is True and stop["cleared"] is True
    runner.join(30)
    assert outcome["status"] == "aborted", outcome["events"]
    assert "was removed from the fleet by someone else" in outcome["abort_reason"]
    assert outcome["phases"][0]["finished_at"] - outcome["phases"][0]["started_at"] < 10


def test_the_compose_example_passes_on_a_fleet_and_its_report_matches_prometheus(
    fleet_ready: Stage, tmp_path: Path
) -> None:
    """examples/staging/gameday.yaml (a gentle outage: 503 on 30% of chat calls) with this fleet's addresses,
    its phases shortened to seconds."""
    stage = fleet_ready
    data = yaml.safe_load((Path(__file__).parents[2] / "examples" / "staging" / "gameday.yaml").read_text())
    # One replica's control API reaches a fleet on Redis.
    data["target"].update(control=[stage.fleet.replicas[1].control_url], lease_s=2)
    data["prometheus"].update(url=stage.prom.url, probe_interval_s=PROBE_S, window_s=3, settle_s=1.5)
    for phase, (warmup, duration) in zip(data["phases"], [(0, 2), (1, 3), (1, 1)], strict=True):
        phase.update(warmup_s=warmup, duration_s=duration)
    report = run(stage, tmp_path, data)
    assert (report["status"], report["exit_code"]) == ("completed", 0), (report["events"], report["gate"])
    assert [p["status"] for p in report["phases"]] == ["completed"] * 3
    assert [h["ok"] for h in report["hypotheses"]] == [True, True] and report["gate"]["passed"]
    baseline, outage, _ = report["phases"]
    # Every replica took the phase within a second, and the faults it injected carry the phase's name.
    assert set(outage["acknowledged"].values()) == {"ok"} and len(outage["acknowledged"]) == 3
    assert outage["acknowledged_after_s"] < 1.0
    rule = "gameday/openai-outage/openai-503"
    assert outage["rules"] == [rule, "gameday/openai-outage/slow-tools"]
    assert rule not in {r["rule"] for r in baseline["figures"]["faults_by_rule"]}
    # The phase's figure counts what every replica counted for it, series by series.
    at_start = stage.prom.query(f'sum(brownout_faults_injected_total{{rule="{rule}"}})', outage["started_at"])
    at_end = stage.prom.query(f'sum(brownout_faults_injected_total{{rule="{rule}"}})', outage["finished_at"])
    expected = float(at_end[0]["value"][1]) - (float(at_start[0]["value"][1]) if at_start else 0.0)
    counted = next(r["count"] for r in outage["figures"]["faults_by_rule"] if r["rule"] == rule)
    assert counted == expected > 0
    # Every time series in the report is what Prometheus answers to the same range query.
    assert {s["name"] for s in report["series"]} >= {"LLM calls answered", "faults/s", "replicas applying the phase"}
    for s in report["series"]:
        assert "error" not in s, s
        again = stage.prom.query_range(s["query"], s["start"], s["end"], s["step_s"])
        ours = {json.dumps(x["labels"], sort_keys=True): x["points"] for x in s["series"]}
        theirs = {
            json.dumps(x["metric"], sort_keys=True): [
                [float(t), None if v == "NaN" else float(v)] for t, v in x["values"]
            ]
            for x in again
        }
        assert ours == theirs, s["name"]
    applying = next(s for s in report["series"] if s["name"] == "replicas applying the phase")
    peak = max(v for x in applying["series"] if x["labels"] == {"phase": "openai-outage"} for _, v in x["points"] if v)
    assert peak == 3
    out = tmp_path / "report"
    assert {"report.json", "junit.xml", "report.md", "report.html"} <= {p.name for p in out.iterdir()}
    assert rule in (out / "report.md").read_text() and "<svg" in (out / "report.html").read_text()
    # `experiment compare` reads staging reports: the same run twice is no regression; a check that held and
    # breaks, with the phase's exchanges failing, is.
    from click.testing import CliRunner

    from brownout.proxy.experiment.cli import experiment as experiment_cli

    same = CliRunner().invoke(experiment_cli, ["compare", str(out), str(out), "--json"])
    assert same.exit_code == 0, same.output
    result = json.loads(same.output)
    assert result["kind"] == "staging" and {r["phase"] for r in result["phases"]} >= {"baseline", "openai-outage"}
    assert result["checks"] and not result["regression"]
    worse = json.loads((out / "report.json").read_text())
    check = worse["hypotheses"][0]["checks"][-1]
    check["ok"] = False
    figs = next(p for p in worse["phases"] if p["label"] == check["label"])["figures"]
    figs["errors"] = figs["exchanges"]
    (tmp_path / "worse.json").write_text(json.dumps(worse))
    broke = CliRunner().invoke(experiment_cli, ["compare", str(out), str(tmp_path / "worse.json")])
    assert broke.exit_code == 1 and f"{worse['hypotheses'][0]['hypothesis']} in {check['label']}" in broke.output
