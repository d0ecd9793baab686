"""The staging runner against a real proxy's control API: SIGTERM puts the fleet back, and what stops it
before the first phase (a paused fleet, another run's phase, Prometheus away) is an error that says so."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import yaml

from brownout.proxy.experiment.staging.config import StagingExperiment, parse_any_experiment
from brownout.proxy.experiment.staging.run import run_staging
from brownout.proxy.freeport import free_port as closed_port  # below the ephemeral range: nothing binds it by chance
from tests.redisserver import RedisServer, redis_server

__all__ = ["redis_server"]

TOKEN = "runner-test-token"
RULES = [{"name": "slow", "match": {"provider": "openai"}, "fault": {"type": "latency", "delay_ms": 1}}]


def start(brownout_proxy: Callable[..., Any]) -> Any:
    return brownout_proxy(yaml.safe_dump({"version": 1, "control": {"token": TOKEN}}))


def staging(proxy: Any, **extra: Any) -> StagingExperiment:
    data = {
        "name": "gameday",
        "target": {"control": [proxy.addon.control.url], "lease_s": 30},
        "prometheus": {"url": f"http://127.0.0.1:{closed_port()}", "settle_s": 0, "timeout_s": 1},
        "phases": [{"name": "slow", "duration_s": 30, "rules": RULES}],
        **extra,
    }
    config = parse_any_experiment(yaml.safe_dump(data), "exp.yaml")
    assert isinstance(config, StagingExperiment)
    return config


def run(config: StagingExperiment, tmp_path: Path) -> dict[str, Any]:
    return run_staging(config, base_dir=tmp_path, out_dir=tmp_path / "report", environ={"BROWNOUT_TOKEN": TOKEN})


def test_sigterm_removes_the_phase_and_ends_the_run_aborted(brownout_proxy: Callable[..., Any], tmp_path: Path) -> None:
    proxy = start(brownout_proxy)
    overlay = proxy.addon.overlay
    sent: list[float] = []

    def stop_when_applied() -> None:
        deadline = time.monotonic() + 20
        while overlay.current is None and time.monotonic() < deadline:
            time.sleep(0.02)
        sent.append(time.monotonic())
        os.kill(os.getpid(), signal.SIGTERM)  # the runner's loop turns it into a cancellation

    threading.Thread(target=stop_when_applied, daemon=True).start()
    report = run(staging(proxy), tmp_path)  # on this (the main) thread, as the CLI runs it
    assert time.monotonic() - sent[0] < 5  # not the 30 s phase, nor the 30 s lease
    assert report["status"] == "aborted" and report["interrupted"] and report["exit_code"] == 2
    assert overlay.current is None and [r.name for r in proxy.addon.engine.rules] == []
    assert report["phases"][0]["removed_at"] is not None
    assert proxy.addon.engine.paused is False  # a stop is not an abort: no kill switch
    # Prometheus was away for the report: its figures say so, the reports are written all the same.
    assert "error" in report["phases"][0]["figures"] and (tmp_path / "report" / "report.html").exists()


def test_a_paused_fleet_is_not_resumed(brownout_proxy: Callable[..., Any], tmp_path: Path) -> None:
    proxy = start(brownout_proxy)
    proxy.addon.engine.pause()
    report = run(staging(proxy), tmp_path)
    assert (report["status"], report["exit_code"]) == ("failed", 2)
    assert "the fleet is paused (kill switch on, 1 of 1 replicas)" in report["error"]
    assert "brownout ctl resume" in report["error"] and proxy.addon.engine.paused is True
    assert [p["status"] for p in report["phases"]] == ["skipped"]


def test_another_runs_phase_holds_the_fleet(brownout_proxy: Callable[..., Any], tmp_path: Path) -> None:
    proxy = start(brownout_proxy)
    other = {
        "owner": "other-run",
        "id": "other-run.0",
        "experiment": "theirs",
        "phase": "p",
        "rules": RULES,
        "lease_s": 30,
        "started_at": time.time(),
    }
    headers = {"Authorization": f"Bearer {TOKEN}"}
    assert httpx.post(f"{proxy.addon.control.url}/experiment/phase", json=other, headers=headers).status_code == 200
    report = run(staging(proxy), tmp_path)
    assert (
        report["exit_code"] == 2 and "another experiment holds the fleet: theirs/p (run other-run)" in report["error"]
    )
    assert proxy.addon.overlay.current.body.owner == "other-run"  # left alone


def test_prometheus_away_stops_it_before_any_chaos(brownout_proxy: Callable[..., Any], tmp_path: Path) -> None:
    proxy = start(brownout_proxy)
    check = {"metric": "promql", "query": "up", "op": ">=", "threshold": 1}
    report = run(staging(proxy, steady_state=[check]), tmp_path)
    assert report["exit_code"] == 2 and "PromError" in report["error"] and "no answer to 'up'" in report["error"]
    assert proxy.addon.overlay.current is None
    assert [p["status"] for p in report["phases"]] == ["skipped"]


def test_a_phase_a_replica_cannot_apply_stops_the_run(
    redis_server: RedisServer, brownout_proxy: Callable[..., Any], tmp_path: Path
) -> None:
    """Two replicas on one store, one of them without the plugin that the phase's fault type comes from."""
    state = {"backend": "redis", "url": redis_server.url, "timeout_ms": 2000, "poll_interval_ms": 100}
    plugin = {"plugins": ["tests.reliability.failing_plugin:faults_plugin"]}
    knows = brownout_proxy(yaml.safe_dump({"version": 1, "control": {"token": TOKEN}, "state": state, **plugin}))
    lacks = brownout_proxy(yaml.safe_dump({"version": 1, "control": {"token": TOKEN}, "state": state}))
    rules = [{"name": "boom", "match": {"path": "/never"}, "fault": {"type": "explode"}}]
    config = staging(knows, phases=[{"name": "p", "duration_s": 10, "rules": rules}])
    config = config.model_copy(update={"prometheus": config.prometheus.model_copy(update={"probe_interval_s": 0.5})})
    report = run(config, tmp_path)
    assert (report["status"], report["exit_code"]) == ("failed", 2), report["events"]
    assert (
        "phase p: rejected by" in report["error"] and "rules[0].fault: unknown fault type 'explode'" in report["error"]
    )
    assert report["phases"][0]["finished_at"] - report["phases"][0]["started_at"] < 5
    assert knows.addon.overlay.current is None and lacks.addon.overlay.current is None
    assert report["phases"][0]["acknowledged"][knows.addon.fleet.replica] == "ok"


class _Prometheus(ThreadingHTTPServer):
    """Answers every instant query with one series at 1 (what `up` says of a healthy target)."""

    def __init__(self) -> None:
        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                body = {
                    "status": "success",
                    "data": {"resultType": "vector", "result": [{"metric": {}, "value": [time.time(), "1"]}]},
                }
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        super().__init__(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()


def test_prometheus_lost_mid_chaos_aborts_with_the_kill_switch(
    brownout_proxy: Callable[..., Any], tmp_path: Path
) -> None:
    proxy = start(brownout_proxy)
    prom = _Prometheus()
    check = {"metric": "promql", "query": "up", "op": ">=", "threshold": 1}
    config = staging(proxy, steady_state=[check], abort={"after_breaches": 2})
    source = config.prometheus.model_copy(
        update={"url": f"http://127.0.0.1:{prom.server_address[1]}", "probe_interval_s": 0.3}
    )
    config = config.model_copy(update={"prometheus": source})

    def lose_it() -> None:
        deadline = time.monotonic() + 20
        while proxy.addon.overlay.current is None and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(0.7)  # a couple of good probes first
        prom.shutdown()
        prom.server_close()

    threading.Thread(target=lose_it, daemon=True).start()
    report = run(config, tmp_path)
    assert (report["status"], report["exit_code"]) == ("aborted", 2), report["events"]
    assert report["abort_reason"].startswith("Prometheus did not answer 2 probes in a row in phase slow")
    assert proxy.addon.engine.paused is True and proxy.addon.overlay.current is None
    assert any(p[2] is True for p in report["phases"][0]["probes"][0]["probes"])  # it had been answering
