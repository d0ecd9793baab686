"""An experiment phase on real proxies: through the control API, through the fleet's store, held by a lease."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import httpx
import yaml
from click.testing import CliRunner

from brownout.proxy.cli import main
from tests.redisserver import RedisServer, redis_server

__all__ = ["redis_server"]

TOKEN = "overlay-test-token"


def config(state: dict[str, Any] | None = None, **proxy: Any) -> str:
    return yaml.safe_dump(
        {
            "version": 1,
            "proxy": {"announce_faults": True, **proxy},
            "control": {"token": TOKEN},
            "rules": [{"name": "own", "match": {"path": "/never"}, "fault": {"type": "reset"}}],
            **({"state": state} if state else {}),
        }
    )


def phase(owner: str = "run-1", n: int = 0, lease_s: float = 5.0, **kw: Any) -> dict[str, Any]:
    body = {
        "owner": owner,
        "id": f"{owner}.{n}",
        "experiment": "gameday",
        "phase": "llm-503",
        "rules": [{"name": "503s", "match": {"provider": "openai"}, "fault": {"type": "http_error", "status": 503}}],
        "lease_s": lease_s,
        "started_at": time.time(),
    }
    return {**body, **kw}


class Replica:
    def __init__(self, handle: Any, upstream: Any) -> None:
        self.handle, self.upstream = handle, upstream
        self.control = httpx.Client(
            base_url=handle.addon.control.url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10
        )
        self.http = httpx.Client(proxy=handle.proxy_url(), trust_env=False, timeout=10)

    def chat(self) -> tuple[int, str | None]:
        r = self.http.post(
            f"{self.upstream.url}/v1/chat/completions",
            json={"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]},
            headers={"authorization": "Bearer sk"},
        )
        return r.status_code, r.headers.get("x-brownout-fault")

    def gauge(self) -> str:
        port = self.handle.addon.pipeline.exporters.metrics_port
        text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
        return "\n".join(line for line in text.splitlines() if line.startswith("brownout_experiment_phase{"))


def wait_for(check: Callable[[], bool], within_s: float) -> float:
    start = time.monotonic()
    while not check():
        assert time.monotonic() - start < within_s, "not within the time allowed"
        time.sleep(0.02)
    return time.monotonic() - start


def test_a_phase_through_the_control_api_holds_while_renewed_and_lapses_after(
    upstream: Any, brownout_proxy: Callable[..., Any]
) -> None:
    r = Replica(brownout_proxy(config(), upstream=upstream), upstream)
    assert r.chat() == (200, None)
    answer = r.control.post("/experiment/phase", json=phase(lease_s=1.0)).json()
    assert answer == {"applied": True, "renewed": False, "rules": ["gameday/llm-503/503s"]}
    assert r.chat() == (503, "gameday/llm-503/503s:http_error")
    assert r.gauge() == 'brownout_experiment_phase{experiment="gameday",phase="llm-503"} 1.0'
    status = r.control.get("/status").json()
    assert status["experiment"]["phase"] == "llm-503" and status["experiment"]["source"] == "control"
    assert [x["name"] for x in status["rules"]] == ["own", "gameday/llm-503/503s"]
    for _ in range(3):  # renewed within the lease: it holds past it
        time.sleep(0.5)
        assert r.control.post("/experiment/phase", json=phase(lease_s=1.0)).json()["renewed"] is True
    renewed = time.monotonic()
    assert r.chat()[0] == 503
    wait_for(lambda: r.chat()[0] == 200, within_s=3)  # no renewal: gone once the lease ran out
    assert 0.5 < time.monotonic() - renewed < 2.5
    assert r.gauge() == 'brownout_experiment_phase{experiment="gameday",phase="llm-503"} 0.0'
    assert r.control.get("/status").json()["experiment"] is None
    assert [x.name for x in r.handle.addon.engine.rules] == ["own"]


def test_delete_removes_a_phase_and_another_run_is_refused(upstream: Any, brownout_proxy: Callable[..., Any]) -> None:
    r = Replica(brownout_proxy(config(), upstream=upstream), upstream)
    assert r.control.post("/experiment/phase", json=phase()).status_code == 200
    refused = r.control.post("/experiment/phase", json=phase(owner="run-2"))
    assert refused.status_code == 409 and "run-1" in refused.json()["error"]
    assert r.control.delete("/experiment/phase", params={"owner": "run-2"}).json()["removed"] is None
    assert r.chat()[0] == 503
    assert r.control.post("/experiment/phase", params={"renew": "1"}, json=phase()).json() == {"renewed": True}
    removed = r.control.delete("/experiment/phase", params={"owner": "run-1"}).json()
    assert removed["removed"] == {"experiment": "gameday", "phase": "llm-503"}
    assert r.chat() == (200, None)
    # A renewal never brings back a phase that was removed.
    gone = r.control.post("/experiment/phase", params={"renew": "1"}, json=phase())
    assert gone.status_code == 410 and r.chat() == (200, None)


def test_ctl_shows_and_stops_the_phase(upstream: Any, brownout_proxy: Callable[..., Any]) -> None:
    r = Replica(brownout_proxy(config(), upstream=upstream), upstream)
    r.control.post("/experiment/phase", json=phase())
    base = ["ctl", "--url", r.handle.addon.control.url, "--token", TOKEN, "experiment"]
    shown = CliRunner().invoke(main, base)
    assert shown.exit_code == 0 and json.loads(shown.output)["applied"]["rules"] == ["gameday/llm-503/503s"]
    stopped = CliRunner().invoke(main, [*base, "--stop"])
    assert stopped.exit_code == 0 and stopped.output.strip() == "experiment phase gameday/llm-503 removed"
    assert r.chat() == (200, None)
    again = CliRunner().invoke(main, [*base, "--stop"])
    assert again.output.strip() == "no experiment phase was applied"


def test_a_bad_phase_is_refused_naming_the_field_and_changes_nothing(
    upstream: Any, brownout_proxy: Callable[..., Any]
) -> None:
    r = Replica(brownout_proxy(config(), upstream=upstream), upstream)
    bad_rule = phase(rules=[{"name": "x", "fault": {"type": "http_error", "status": 99}}])
    answer = r.control.post("/experiment/phase", json=bad_rule)
    assert answer.status_code == 422 and answer.json()["error"].startswith("rules[0].fault")
    no_lease = {k: v for k, v in phase().items() if k != "lease_s"}
    answer = r.control.post("/experiment/phase", json=no_lease)
    assert answer.status_code == 422 and answer.json()["error"] == "lease_s: Field required"
    assert r.control.get("/experiment/phase").json()["applied"] is None
    assert (
        r.control.post("/experiment/phase", json=phase(), headers={"Authorization": "Bearer nope"}).status_code == 401
    )
    assert r.chat() == (200, None)


def test_through_the_store_every_replica_applies_the_phase_and_drops_it_when_the_lease_ends(
    redis_server: RedisServer, upstream: Any, brownout_proxy: Callable[..., Any]
) -> None:
    state = {"backend": "redis", "url": redis_server.url, "timeout_ms": 2000, "poll_interval_ms": 100}
    a, b = (Replica(brownout_proxy(config(state), upstream=upstream), upstream) for _ in range(2))
    answer = a.control.post("/experiment/phase", json=phase(lease_s=1.5)).json()
    assert answer["fleet"] is True
    assert a.chat()[0] == 503  # at once where it was asked
    assert wait_for(lambda: b.chat()[0] == 503, within_s=1.0) < 1.0  # the other replica within a second
    view = a.control.get("/experiment/phase").json()
    wait_for(lambda: len(a.control.get("/experiment/phase").json()["fleet"]["acks"]) == 2, within_s=2)
    view = a.control.get("/experiment/phase").json()
    assert set(view["fleet"]["acks"].values()) == {"run-1.0 ok"}
    assert view["applied"]["source"] == "store"
    # Nobody renews: the key expires in the store and both replicas go back to their own rules.
    wait_for(lambda: a.chat()[0] == 200 and b.chat()[0] == 200, within_s=3)
    assert redis_server.command("EXISTS", "brownout:experiment").strip() == b":0"


def test_with_the_store_away_a_replica_drops_the_phase_by_its_own_clock(
    redis_server: RedisServer, upstream: Any, brownout_proxy: Callable[..., Any]
) -> None:
    state = {"backend": "redis", "url": redis_server.url, "timeout_ms": 200, "poll_interval_ms": 100}
    r = Replica(brownout_proxy(config(state), upstream=upstream), upstream)
    r.control.post("/experiment/phase", json=phase(lease_s=1.0))
    assert r.chat()[0] == 503
    redis_server.stop()  # nothing can read or renew the lease any more
    started = time.monotonic()
    wait_for(lambda: r.chat()[0] == 200, within_s=3)
    # The lease (1 s), then the next request: a replica that waited for the store would never drop it.
    assert time.monotonic() - started < 2.0
