"""Services: real processes started, probed for readiness, exported to what follows, and stopped."""

from __future__ import annotations

import json
import os
import signal
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from brownout.proxy.cli import main
from brownout.proxy.experiment.config import ExperimentError, ServiceConfig, parse_experiment
from brownout.proxy.experiment.services import ServiceError, Services

pytestmark = pytest.mark.timeout(60)

UPSTREAM: dict[str, Any] = {
    "name": "upstream",
    "command": ["{python}", "-m", "brownout.proxy.demo.upstream", "--port", "{port}", "--no-record"],
    "ready": {"http": "http://127.0.0.1:{port}/ping", "timeout_s": 30},
    "export": {"DEMO_UPSTREAM": "http://127.0.0.1:{port}"},
}

# A TCP server on $PORT that starts listening after $DELAY_S, prints what it was given, and may ignore SIGTERM.
SERVER = """
import os, signal, socket, sys, time
if os.environ.get("IGNORE_TERM"):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
print("given", os.environ.get("GIVEN"), "upstream", os.environ.get("DEMO_UPSTREAM"), flush=True)
time.sleep(float(os.environ.get("DELAY_S", "0")))
s = socket.create_server(("127.0.0.1", int(os.environ["PORT"])))
while True:
    s.accept()[0].close()
"""


def service(**over: Any) -> ServiceConfig:
    data = {
        "name": "server",
        "command": [sys.executable, "-c", SERVER],
        "ready": {"tcp": "127.0.0.1:{port}", "timeout_s": 20},
        "env": {"PORT": "{port}"},
        **over,
    }
    return ServiceConfig.model_validate(data)


def alive(pid: int | None) -> bool:
    assert pid is not None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_demo_upstream_starts_exports_its_url_and_stops(tmp_path: Path) -> None:
    services = Services([ServiceConfig.model_validate(UPSTREAM)], base_dir=tmp_path, log_dir=tmp_path)
    with services:
        rec = services.records[0]
        assert services.exports == {"DEMO_UPSTREAM": f"http://127.0.0.1:{rec.port}"}
        assert rec.command[-3:] == ["--port", str(rec.port), "--no-record"] and rec.command[0] == sys.executable
        no_proxy = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with no_proxy.open(services.exports["DEMO_UPSTREAM"] + "/tools/weather?city=Paris", timeout=10) as resp:
            assert resp.status == 200
        assert alive(rec.pid) and rec.ready_after_s is not None
    assert not alive(rec.pid)
    assert (rec.stopped_by, rec.exit_code, rec.exited_early) == ("SIGTERM", -signal.SIGTERM, False)
    assert f"LISTENING {rec.port}" in (tmp_path / "service-upstream.log").read_text()


def test_tcp_readiness_waits_and_env_gets_port_and_earlier_exports(tmp_path: Path) -> None:
    first = ServiceConfig.model_validate(UPSTREAM)
    second = service(env={"PORT": "{port}", "GIVEN": "p{port}", "DELAY_S": "0.4"})
    with Services([first, second], base_dir=tmp_path, log_dir=tmp_path) as services:
        up, srv = services.records
        assert srv.port not in (None, up.port)
        assert srv.ready_after_s is not None and srv.ready_after_s >= 0.4
    log = (tmp_path / "service-server.log").read_text()
    assert f"given p{srv.port} upstream http://127.0.0.1:{up.port}" in log


def test_a_service_ignoring_sigterm_is_killed_after_its_grace(tmp_path: Path) -> None:
    cfg = service(env={"PORT": "{port}", "IGNORE_TERM": "1"}, stop_timeout_s=0.3)
    with Services([cfg], base_dir=tmp_path, log_dir=tmp_path) as services:
        rec = services.records[0]
    assert (rec.stopped_by, rec.exit_code) == ("SIGKILL", -signal.SIGKILL)
    assert not alive(rec.pid)


def test_a_service_that_exits_before_ready_fails_with_its_log(tmp_path: Path) -> None:
    cfg = service(name="broken", command=[sys.executable, "-c", "print('config missing: /etc/x.yaml'); exit(3)"])
    services = Services([cfg], base_dir=tmp_path, log_dir=tmp_path)
    with pytest.raises(ServiceError) as info:
        services.__enter__()
    message = str(info.value)
    assert "'broken' exited with code 3 before it was ready" in message
    assert "config missing: /etc/x.yaml" in message and "service-broken.log" in message
    assert services.records[0].exited_early and services.records[0].exit_code == 3


def test_a_service_never_ready_times_out_and_is_stopped(tmp_path: Path) -> None:
    ok = ServiceConfig.model_validate(UPSTREAM)
    slow = service(
        name="slow",
        command=[sys.executable, "-c", "print('warming up', flush=True); import time; time.sleep(60)"],
        ready={"http": "http://127.0.0.1:{port}/health", "timeout_s": 0.5},
    )
    services = Services([ok, slow], base_dir=tmp_path, log_dir=tmp_path)
    with pytest.raises(ServiceError, match=r"'slow' did not become ready within 0.5 s \(last probe: http://"):
        with services:
            pytest.fail("the body must not run")
    up, rec = services.records
    assert "warming up" in (tmp_path / "service-slow.log").read_text()
    assert rec.stopped_by == "SIGTERM" and not alive(rec.pid) and not alive(up.pid)  # both stopped


EXPERIMENT = """
name: svc
agent: {command: ["true"]}
phases: [{name: baseline}]
services:
  - name: up
    command: ["{python}", "-m", "brownout.proxy.demo.upstream"]
%s
"""


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        (
            "    readyy: {tcp: '127.0.0.1:1'}",
            ["exp.yaml:6: services[0].ready: Field required", "exp.yaml:8: services[0].readyy: Extra inputs"],
        ),
        (
            "    ready: {tcp: '127.0.0.1:1', http: 'http://x'}",
            ["exp.yaml:8: services[0].ready: Value error, give exactly one of tcp or http"],
        ),
        ("    ready: {tcp: 'localhost'}", ['exp.yaml:8: services[0].ready.tcp: Value error, tcp must be "host:port"']),
        (
            "    ready: {http: 'x'}\n    export: {1X: a}",
            ["services[0].export: Value error, not environment variable names: '1X'"],
        ),
        (
            "    ready: {http: 'http://x'}\n  - {name: up, command: x, ready: {http: 'http://x'}}",
            ["service names must be unique; duplicated: up"],
        ),
    ],
    ids=["unknown-field", "two-checks", "no-port", "bad-export", "duplicate"],
)
def test_services_section_is_validated(extra: str, expected: list[str]) -> None:
    with pytest.raises(ExperimentError) as info:
        parse_experiment(EXPERIMENT % extra, "exp.yaml")
    for text in expected:
        assert text in str(info.value), str(info.value)


def test_schema_describes_services() -> None:
    res = CliRunner().invoke(main, ["schema", "--kind", "experiment"])
    assert res.exit_code == 0, res.output
    schema = json.loads(res.output)
    assert schema["properties"]["services"]["type"] == "array"
    svc = schema["$defs"]["ServiceConfig"]
    assert {"name", "command", "ready", "env", "export", "cwd", "stop_timeout_s"} == set(svc["properties"])
    assert svc["additionalProperties"] is False
    assert set(schema["$defs"]["ReadyCheck"]["properties"]) == {"tcp", "http", "timeout_s", "interval_s"}
