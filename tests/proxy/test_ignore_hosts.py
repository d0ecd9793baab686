"""proxy.ignore_hosts: traffic that is not the agent's passes through untouched and is left out of everything."""

from __future__ import annotations

import ssl
import time
from typing import Any

import httpx
import pytest
from pydantic import ValidationError

from brownout.proxy.config import ProxySettings
from brownout.proxy.ignore import HostGlobs

CONFIG = """
seed: 1
proxy: {ignore_hosts: ["LOCALHOST", "*.cost-map.test"]}
rules:
  - {name: everything-down, match: {}, fault: {type: http_error, status: 503}}
invariants:
  - {type: call_budget, max_calls: 1, count: all}
"""


def ignored_count(proxy: Any) -> float | None:
    registry = proxy.addon.pipeline.exporters.metrics.registry
    return registry.get_sample_value("brownout_ignored_requests_total")


def test_host_globs() -> None:
    ignored = HostGlobs(["raw.githubusercontent.com", "*.Internal"])
    assert ignored("raw.githubusercontent.com") and ignored("RAW.githubusercontent.com")
    assert ignored("billing.internal") and not ignored("internal") and not ignored("githubusercontent.com")
    assert not HostGlobs()("anything")
    for bad in ("https://example.com/", "example.com:443", " "):
        with pytest.raises(ValidationError, match="ignore_hosts"):
            ProxySettings(ignore_hosts=[bad])
    assert ProxySettings(ignore_hosts=["::1", "*.example.com"]).ignore_hosts == ["::1", "*.example.com"]


@pytest.mark.parametrize("tls", [False, True])
def test_ignored_hosts_pass_untouched_and_unrecorded(brownout_proxy: Any, request: Any, tls: bool) -> None:
    upstream = request.getfixturevalue("upstream_tls" if tls else "upstream")
    seen: list[Any] = []
    proxy = brownout_proxy(CONFIG, upstream=upstream, on_exchange=seen.append)
    decisions: list[Any] = []
    proxy.call(proxy.addon.engine.decisions.add_sink, decisions.append)
    violations: list[Any] = []
    proxy.addon.pipeline.violation_listeners.append(violations.append)
    verify = ssl.create_default_context(cafile=str(proxy.ca_bundle_path))
    with httpx.Client(proxy=proxy.proxy_url("agent-1"), verify=verify, trust_env=False, timeout=10) as client:
        ignored_url = upstream.url.replace("127.0.0.1", "localhost")
        for _ in range(3):
            r = client.get(f"{ignored_url}/tools/weather", params={"city": "Paris"})
            assert r.status_code == 200 and r.json()["city"] == "Paris"  # the fault rule matches everything
        t0 = time.monotonic()
        with client.stream("GET", f"{ignored_url}/sse", params={"events": 5, "delay_ms": 200}) as s:
            chunks = s.iter_raw()
            first = next(chunks)
            first_s = time.monotonic() - t0
            rest = b"".join(chunks)
            total_s = time.monotonic() - t0
        assert first.startswith(b"id: 0") and rest.count(b"event: tick") == 4
        assert first_s < total_s - 0.4, (first_s, total_s)  # streamed as sent, not buffered
        assert client.get(f"{upstream.url}/tools/weather").status_code == 503  # not ignored: faulted
    deadline = time.monotonic() + 5
    while not seen and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(0.2)
    assert [(x.host, x.status) for x in seen] == [("127.0.0.1", 503)]  # the only exchange brownout made
    assert [d.rule for d in decisions] == ["everything-down"] and violations == []
    assert ignored_count(proxy) == 4
    forwarded = [r for r in upstream.requests_seen if r.path.startswith("/tools/weather?")]
    assert len(forwarded) == 3 and all("proxy-authorization" not in r.headers for r in forwarded)
