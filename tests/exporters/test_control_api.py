"""The control API: token auth, the kill switch, reload, rule toggles, violations; and `brownout ctl`."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from click.testing import CliRunner

from brownout.proxy.control import ControlServer
from brownout.proxy.control_target import EngineControl
from brownout.proxy.ctl import ctl

TOKEN = "s3cret-token"


class FakeTarget:
    """A ControlTarget recording what the API asked for."""

    def __init__(self) -> None:
        self.paused = False
        self.rules = {"slow": True, "openai-429": True}
        self.reload_result: tuple[bool, str] = (True, "2 rules loaded")
        self.records = [
            {"invariant": "loop", "severity": "error", "message": "m", "timestamp": 100.0},
            {"invariant": "pii", "severity": "critical", "message": "n", "timestamp": 200.0},
        ]

    def status(self) -> dict[str, Any]:
        return {"paused": self.paused, "rules": [{"name": k, "enabled": v} for k, v in self.rules.items()]}

    def pause(self) -> None:
        self.paused = True

    def resume(self) -> None:
        self.paused = False

    def reload(self) -> tuple[bool, str]:
        return self.reload_result

    def set_rule_enabled(self, name: str, enabled: bool) -> bool:
        if name not in self.rules:
            return False
        self.rules[name] = enabled
        return True

    def violations(self, since: float | None) -> list[dict[str, Any]]:
        return [r for r in self.records if since is None or r["timestamp"] > since]


@pytest.fixture
def target() -> FakeTarget:
    return FakeTarget()


@pytest.fixture
def server(target: FakeTarget) -> Iterator[ControlServer]:
    s = ControlServer(target, listen="127.0.0.1:0", token=TOKEN).start()
    yield s
    s.stop()


def _client(server: ControlServer, token: str | None = TOKEN) -> httpx.Client:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.Client(base_url=server.url, headers=headers, trust_env=False, timeout=5)


def test_auth_required_except_healthz(server: ControlServer) -> None:
    anon = _client(server, None)
    assert anon.get("/healthz").json() == {"ok": True}
    for method, path in (("GET", "/status"), ("POST", "/faults/pause"), ("POST", "/reload"), ("GET", "/violations")):
        r = anon.request(method, path)
        assert r.status_code == 401 and r.headers["www-authenticate"].startswith("Bearer")
    assert _client(server, "wrong").get("/status").status_code == 401
    assert anon.get("/status", headers={"Authorization": f"Basic {TOKEN}"}).status_code == 401


def test_without_a_token_only_healthz_answers(target: FakeTarget, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("WARNING"):
        s = ControlServer(target, listen="127.0.0.1:0", token=None, token_env="MY_TOKEN").start()
    assert "set MY_TOKEN to use `brownout ctl`" in caplog.text  # says how to turn it on
    try:
        c = _client(s, "anything")
        assert c.get("/healthz").status_code == 200
        denied = c.post("/faults/pause")
        assert denied.status_code == 403 and "start brownout with MY_TOKEN" in denied.json()["error"]
        assert target.paused is False
    finally:
        s.stop()


def test_pause_resume_flip_the_target(server: ControlServer, target: FakeTarget) -> None:
    c = _client(server)
    assert c.post("/faults/pause").json() == {"paused": True} and target.paused
    assert c.get("/status").json()["paused"] is True
    assert c.post("/faults/resume").status_code == 200 and not target.paused


def test_reload_rules_violations(server: ControlServer, target: FakeTarget) -> None:
    c = _client(server)
    assert c.post("/reload").json() == {"ok": True, "message": "2 rules loaded"}
    target.reload_result = (False, "chaos.yaml:3: rules[0].fault: unknown type; previous config kept")
    r = c.post("/reload")
    assert r.status_code == 422 and "previous config kept" in r.json()["message"]
    assert c.put("/rules/slow", json={"enabled": False}).json() == {"rule": "slow", "enabled": False}
    assert target.rules["slow"] is False
    assert c.put("/rules/nope", json={"enabled": True}).status_code == 404
    assert c.put("/rules/slow", json={"enabled": "yes"}).status_code == 400
    assert c.put("/rules/slow", content=b"{not json").status_code == 400
    assert len(c.get("/violations").json()["violations"]) == 2
    assert [v["invariant"] for v in c.get("/violations", params={"since": "150"}).json()["violations"]] == ["pii"]
    assert c.get("/violations", params={"since": "yesterday"}).status_code == 400
    assert c.get("/rules/slow").status_code == 405
    assert c.get("/nope").status_code == 404


def test_target_failure_is_a_500_and_the_server_keeps_serving(
    server: ControlServer, target: FakeTarget, caplog: pytest.LogCaptureFixture
) -> None:
    def broken() -> dict[str, Any]:
        raise RuntimeError("engine exploded")

    target.status = broken  # type: ignore[method-assign]
    c = _client(server)
    with caplog.at_level(logging.DEBUG, logger="brownout.proxy.control"):
        assert c.get("/status").status_code == 500  # no error handler: the server logs it
        errors: list[BaseException] = []
        server.on_error = errors.append
        server._server.on_error = errors.append  # type: ignore[union-attr]
        assert c.get("/status").status_code == 500 and len(errors) == 1  # the handler (the guard) logs it
    logged = [r for r in caplog.records if r.name == "brownout.proxy.control" and r.levelno >= logging.ERROR]
    assert len(logged) == 1
    assert c.get("/healthz").status_code == 200


class FakeEngine:
    """The FaultEngine surface EngineControl uses."""

    def __init__(self) -> None:
        self.paused = False
        self.enabled = {"slow": True}

    def status(self) -> dict[str, Any]:
        return {"paused": self.paused}

    def pause(self) -> None:
        self.paused = True

    def resume(self) -> None:
        self.paused = False

    def set_rule_enabled(self, name: str, enabled: bool) -> None:
        if name not in self.enabled:
            raise KeyError(name)
        self.enabled[name] = enabled


def test_engine_control_adapter() -> None:
    engine = FakeEngine()
    control = EngineControl(
        engine,
        reload=lambda: (True, "ok"),
        violations=lambda since: [{"since": since}],
        extra_status=lambda: {"sessions": 3},
    )
    control.pause()
    assert engine.paused and control.status() == {"paused": True, "sessions": 3}
    assert control.set_rule_enabled("slow", False) and engine.enabled["slow"] is False
    assert control.set_rule_enabled("missing", False) is False
    assert control.reload() == (True, "ok") and control.violations(5.0) == [{"since": 5.0}]


def test_ctl_commands(server: ControlServer, target: FakeTarget) -> None:
    run = lambda *args, **kw: CliRunner().invoke(ctl, ["--url", server.url, *args], **kw)
    env = {"BROWNOUT_TOKEN": TOKEN}
    r = run("status", env=env)
    assert r.exit_code == 0 and '"paused": false' in r.output
    assert run("pause", env=env).exit_code == 0 and target.paused
    assert run("--token", TOKEN, "resume").exit_code == 0 and not target.paused
    assert run("rule", "slow", "--disable", env=env).exit_code == 0 and target.rules["slow"] is False
    r = run("rule", "nope", "--enable", env=env)
    assert r.exit_code == 1 and "no rule named" in r.output
    r = run("violations", "--since", "150", env=env)
    assert r.exit_code == 0 and "pii" in r.output and "loop" not in r.output
    r = run("violations", "--since", "1h", "--json", env=env)
    assert r.exit_code == 0 and r.output.strip() == ""  # the fake's records are from 1970
    target.reload_result = (False, "bad config")
    r = run("reload", env=env)
    assert r.exit_code == 1 and "previous config kept" in r.output
    r = run("status", env={"BROWNOUT_TOKEN": ""})
    assert r.exit_code == 1 and "BROWNOUT_TOKEN" in r.output


def test_ctl_unreachable_is_a_clear_error() -> None:
    started = time.perf_counter()
    r = CliRunner().invoke(ctl, ["--url", "http://127.0.0.1:9", "--token", "t", "status"])
    assert r.exit_code == 1 and "cannot reach" in r.output
    assert time.perf_counter() - started < 5


def test_pause_over_http_stops_injection_on_the_next_exchange() -> None:
    from brownout.core.wire.openai import OpenAIFormat
    from brownout.faults.engine import FaultEngine
    from brownout.proxy.config import BrownoutConfig
    from tests.exporters.expsamples import exchange

    cfg = BrownoutConfig.model_validate(
        {"rules": [{"name": "slow", "match": {"provider": "openai"}, "fault": {"type": "latency", "delay_ms": 5}}]}
    )
    engine = FaultEngine(cfg.ruleset)
    wire = OpenAIFormat()
    assert not engine.plan(exchange(), wire).empty
    server = ControlServer(EngineControl(engine, reload=lambda: (True, "")), listen="127.0.0.1:0", token=TOKEN).start()
    try:
        assert _client(server).post("/faults/pause").status_code == 200
        assert engine.plan(exchange(), wire).empty
        assert engine.decisions.recent()[-1].outcome == "skipped_paused"
        assert _client(server).put("/rules/slow", json={"enabled": False}).status_code == 200
        assert _client(server).post("/faults/resume").status_code == 200
        assert engine.plan(exchange(), wire).empty  # the rule is off now
        assert _client(server).put("/rules/slow", json={"enabled": True}).status_code == 200
        assert not engine.plan(exchange(), wire).empty
    finally:
        server.stop()
