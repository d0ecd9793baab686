"""`brownout run --workers 2`: real processes (the supervisor and its workers), a real redis-server, the
official openai SDK as the client, one connection per request so the kernel spreads them (SO_REUSEPORT)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.cli.helpers import brownout_cmd, clean_env, free_port
from tests.redisserver import RedisServer, redis_server  # noqa: F401  (the fixture)

pytestmark = pytest.mark.timeout(240)

TOKEN = "fleet-test-token"
CONFIG = """
version: 1
state: {{backend: redis, url: "{redis}", timeout_ms: 2000, connect_timeout_ms: 5000}}  # a loaded machine is slow
proxy: {{drain_timeout_s: 10}}
exporters:
  jsonl: {{exchanges_path: logs/exchanges.jsonl}}
invariants:
  - {{type: latency_budget, total_ms: 0.001}}
{rules}
"""
SLOW_RULE = """
rules:
  - name: slow
    match: {path: /v1/chat/completions}
    fault: {type: latency, delay_ms: 1500}
"""


@dataclass
class Fleet:
    proc: subprocess.Popen[str]
    lines: list[str]
    port: int
    metrics_url: str
    control_url: str

    def control(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        headers = {"Authorization": f"Bearer {TOKEN}"}
        return httpx.request(method, self.control_url + path, headers=headers, trust_env=False, timeout=10, **kwargs)

    def status(self) -> dict[str, Any]:
        response = self.control("GET", "/status")
        assert response.status_code == 200, response.text
        return dict(response.json())

    def requests_total(self) -> float:
        text = httpx.get(self.metrics_url, trust_env=False, timeout=10).text
        families = {f.name: f for f in text_string_to_metric_families(text)}
        return sum(s.value for s in families["brownout_requests"].samples if s.name == "brownout_requests_total")

    def stop(self, sig: int = signal.SIGTERM) -> tuple[str, str]:
        self.proc.send_signal(sig)
        return self.proc.communicate(timeout=90)


def _config(tmp_path: Path, redis: RedisServer, rules: str = "") -> Path:
    path = tmp_path / "chaos.yaml"
    path.write_text(CONFIG.format(redis=redis.url, rules=rules))
    return path


def _start(tmp_path: Path, confdir: Path, config: Path, *extra: str) -> subprocess.Popen[str]:
    port = free_port()
    args = [*brownout_cmd(), "run", "--workers", "2", "-c", str(config), "--listen", f"127.0.0.1:{port}"]
    args += ["--confdir", str(confdir), "--set", "brownout_metrics_listen=127.0.0.1:0"]
    args += ["--set", "brownout_control_listen=127.0.0.1:0", *extra]
    env = clean_env(BROWNOUT_TOKEN=TOKEN)
    # A session of its own, as a shell's foreground job: killpg() then does what a terminal's Ctrl-C does.
    pipes = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
    return subprocess.Popen(args, env=env, cwd=tmp_path, text=True, start_new_session=True, **pipes)


@contextlib.contextmanager
def running_fleet(tmp_path: Path, confdir: Path, config: Path, *extra: str) -> Iterator[Fleet]:
    proc = _start(tmp_path, confdir, config, *extra)
    try:
        lines = []
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line.rstrip("\n"))
            if line.startswith("Point a"):
                break
        else:
            raise AssertionError(f"brownout run --workers ended before it was ready: {lines} {proc.communicate()}")
        # The banner's line, wherever it comes (a worker may log a warning first on a busy machine).
        banner = next((line for line in lines if " listening on " in line), None)
        assert banner is not None, lines
        listening = banner.split(" listening on ")[1].split()[0]
        yield Fleet(
            proc,
            lines,
            int(listening.rsplit(":", 1)[1]),
            next(line for line in lines if line.startswith("metrics: ")).split(" ", 1)[1],
            next(line for line in lines if line.startswith("control API: ")).split(": ", 1)[1],
        )
    finally:
        if proc.poll() is None:
            proc.kill()  # its workers see it go and stop by themselves
            proc.communicate(timeout=30)


def _chat(port: int, n: int = 1) -> None:
    """`n` chat completions through the proxy, each on a connection of its own."""
    for _ in range(n):
        with openai.DefaultHttpxClient(proxy=f"http://127.0.0.1:{port}") as http:
            client = openai.OpenAI(base_url=_upstream_url + "/v1", api_key="sk-test", max_retries=0, http_client=http)
            reply = client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}])
            assert reply.choices[0].message.content


_upstream_url = ""


@pytest.fixture(autouse=True)
def _upstream(upstream: Any) -> None:
    global _upstream_url
    _upstream_url = upstream.url


def test_two_workers_serve_one_port_and_metrics_sum_both(
    tmp_path: Path, confdir: Path, redis_server: RedisServer
) -> None:
    k = 40
    with running_fleet(tmp_path, confdir, _config(tmp_path, redis_server), "--summary-json", "s.json") as fleet:
        assert fleet.lines[1].startswith("workers: 2 on one port (pids ")
        logs = tmp_path / "logs"
        assert f"exchange log: {logs / 'exchanges.w0.jsonl'}, {logs / 'exchanges.w1.jsonl'}" in fleet.lines
        _chat(fleet.port, k)
        assert fleet.requests_total() == k  # the supervisor's /metrics: the sum over both workers
        status = fleet.status()
        served = [w["exchanges"] for w in status["workers"]]
        assert sum(served) == k and min(served) > 0, served  # both workers took connections
        assert status["workers_alive"] == 2 and all(w["status"]["paused"] is False for w in status["workers"])
        # Each worker's records in its own file, whole lines only: as many as it served.
        for worker, n in enumerate(served):
            records = [json.loads(line) for line in (logs / f"exchanges.w{worker}.jsonl").read_text().splitlines()]
            assert len(records) == n and {r["provider"] for r in records} == {"openai"}
        # The control API's lists are every worker's, merged by time.
        exchanges = fleet.control("GET", "/exchanges").json()["exchanges"]
        assert len(exchanges) == k and {r["worker"] for r in exchanges} == {0, 1}
        assert fleet.control("GET", "/exchanges", params={"limit": 5}).json()["exchanges"] == exchanges[-5:]
        violations = fleet.control("GET", "/violations").json()["violations"]
        assert len(violations) == k and {r["worker"] for r in violations} == {0, 1}  # every exchange breaks it
        assert [r["timestamp"] for r in violations] == sorted(r["timestamp"] for r in violations)
        assert fleet.control("PUT", "/rules/nope", json={"enabled": False}).status_code == 404
        reload = fleet.control("POST", "/reload").json()
        assert reload["ok"] is True and all(f"worker {i}: reloaded" in reload["message"] for i in (0, 1))
        # An experiment's phase through the supervisor's API reaches both workers, and leaves both.
        rule = {"name": "slow", "match": {"provider": "openai"}, "fault": {"type": "latency", "delay_ms": 1}}
        phase = {"owner": "run-1", "id": "run-1.0", "experiment": "exp", "phase": "p", "rules": [rule]}
        put = fleet.control("POST", "/experiment/phase", json={**phase, "lease_s": 30, "started_at": time.time()})
        assert put.status_code == 200 and put.json()["fleet"] is True, put.text
        applied = [w["status"]["experiment"] for w in fleet.status()["workers"]]
        assert [(a["phase"], a["rules"]) for a in applied] == [("p", ["exp/p/slow"])] * 2
        assert fleet.control("DELETE", "/experiment/phase", params={"owner": "run-1"}).status_code == 200
        assert [w["status"]["experiment"] for w in fleet.status()["workers"]] == [None, None]
        out, err = fleet.stop(signal.SIGTERM)
    assert fleet.proc.returncode == 0, err
    assert f"exchanges: {k} (openai chat {k})" in err  # one summary, of both workers
    assert err.count("brownout summary") == 1 and out.rstrip().endswith("brownout stopped.")
    summary = json.loads((tmp_path / "s.json").read_text())
    assert summary["exchanges"]["total"] == k


def test_ctrl_c_drains_what_every_worker_has_in_flight(
    tmp_path: Path, confdir: Path, redis_server: RedisServer
) -> None:
    import concurrent.futures

    config = _config(tmp_path, redis_server, SLOW_RULE)
    with running_fleet(tmp_path, confdir, config) as fleet:
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            calls = [pool.submit(_chat, fleet.port) for _ in range(8)]
            deadline = time.monotonic() + 30
            while sum(w["status"]["in_flight"] for w in fleet.status()["workers"]) < 8:  # each in its 1.5 s delay
                assert time.monotonic() < deadline, fleet.status()
                time.sleep(0.05)
            # Ctrl-C at a terminal: SIGINT to the whole foreground process group. Workers are not in it:
            # they get the supervisor's one SIGTERM (drain), not a second signal (cut) on top.
            os.killpg(fleet.proc.pid, signal.SIGINT)
            for call in calls:
                call.result()  # answered, not cut
        _, err = fleet.proc.communicate(timeout=90)
    assert fleet.proc.returncode == 0, err
    assert "exchanges: 8 (openai chat 8)" in err and "faults fired: 8 (slow latency 8)" in err


def test_a_dead_worker_is_restarted_paused_and_the_counts_never_go_down(
    tmp_path: Path, confdir: Path, redis_server: RedisServer
) -> None:
    with running_fleet(tmp_path, confdir, _config(tmp_path, redis_server)) as fleet:
        _chat(fleet.port, 20)
        assert fleet.requests_total() == 20
        assert fleet.control("POST", "/faults/pause").json() == {"paused": True}
        victim = fleet.status()["workers"][0]["pid"]
        os.kill(victim, signal.SIGKILL)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            first = fleet.status()["workers"][0]
            if first["alive"] and first["pid"] != victim:
                break
            time.sleep(0.2)
        else:
            raise AssertionError(f"worker 0 was not restarted: {fleet.status()}")
        assert first["restarts"] == 1 and first["status"]["paused"] is True  # the kill switch holds
        assert fleet.requests_total() == 20  # the dead worker's counts stay in the sum
        _chat(fleet.port, 20)
        assert fleet.requests_total() == 40
        _, err = fleet.stop()
    assert fleet.proc.returncode == 0, err
    assert "worker 0 (pid" in err and "exited with signal SIGKILL; restarting it" in err
    assert "1 worker process(es) died during the run: what they served is in /metrics" in err


def test_workers_stop_by_themselves_when_the_supervisor_is_killed(
    tmp_path: Path, confdir: Path, redis_server: RedisServer
) -> None:
    with running_fleet(tmp_path, confdir, _config(tmp_path, redis_server)) as fleet:
        pids = [w["pid"] for w in fleet.status()["workers"]]
        fleet.proc.kill()
        fleet.proc.communicate(timeout=30)
    deadline = time.monotonic() + 30
    while any(_running(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(_running(pid) for pid in pids), "orphaned workers kept serving"


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie waits for init to reap it: it serves nothing.
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
    return False


def test_memory_backend_with_two_workers_fails_at_once_naming_state_backend(tmp_path: Path, confdir: Path) -> None:
    config = tmp_path / "chaos.yaml"
    config.write_text("version: 1\n")
    started = time.monotonic()
    proc = _start(tmp_path, confdir, config)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 1 and out == ""
    assert err.startswith("brownout: --workers 2 needs state.backend: redis in ") and "once per worker" in err
    assert time.monotonic() - started < 30  # at once: no worker was started


def test_a_port_in_use_or_recording_is_refused_before_any_worker_starts(
    tmp_path: Path, confdir: Path, redis_server: RedisServer
) -> None:
    import socket

    config = _config(tmp_path, redis_server)
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        args = [*brownout_cmd(), "run", "--workers", "2", "-c", str(config), "--listen", f"127.0.0.1:{port}"]
        proc = subprocess.run(args, env=clean_env(), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    assert f"cannot listen on 127.0.0.1:{port}: Address already in use; choose a free port" in proc.stderr
    recording = _start(tmp_path, confdir, config, "--record", "tapes")
    _, err = recording.communicate(timeout=60)
    assert recording.returncode == 1 and "--workers 2 cannot record cassettes" in err
