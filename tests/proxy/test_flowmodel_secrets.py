"""A flow becomes an exchange without its secrets, and secret-bearing URLs never reach a metric label.

Each request goes the way the proxy takes it: a mitmproxy flow, `flowmodel` (path and headers without
secrets), the wire formats (the tool named from the path), then the Prometheus metrics and their
exposition: 1,000 secret-bearing URLs make a handful of series, none with a secret.
"""

from __future__ import annotations

import random
import re
import string

from mitmproxy.test import tflow
from prometheus_client import CollectorRegistry, generate_latest

from brownout.core.secrets import SecretHeaders
from brownout.core.wire import BUILTIN
from brownout.exporters.metrics import Metrics
from brownout.proxy import flowmodel

_RNG = random.Random(25)  # seeded: the same 1,000 URLs every run
_ALNUM = string.ascii_letters + string.digits


def _token(n: int, alphabet: str = _ALNUM) -> str:
    return "".join(_RNG.choice(alphabet) for _ in range(n))


def _secret_path(i: int) -> tuple[str, str]:
    """A path with a secret in it, of one of the layouts agents' tools call; and that secret."""
    kind = i % 6
    if kind == 0:
        secret = _token(24)
        return f"/services/T{i:08d}/B{i:08d}/{secret}", secret
    if kind == 1:
        secret = _token(68, _ALNUM + "-_")
        return f"/api/webhooks/{10**17 + i}/{secret}", secret
    if kind == 2:
        secret = f"{10**8 + i}:AA{_token(33)}"
        return f"/bot{secret}/sendMessage", secret
    if kind == 3:
        secret = f"sk-proj-{_token(40)}"
        return f"/keys/{secret}/usage", secret
    if kind == 4:
        secret = _token(40, "0123456789abcdef")
        return f"/hooks/{secret}", secret
    secret = _token(32)
    return f"/{secret}", secret  # nothing but the secret: the tool is named after the host


def _observe(metrics: Metrics, path: str) -> None:
    flow = tflow.tflow()
    flow.request.host, flow.request.port, flow.request.method = "hooks.example.com", 443, "POST"
    flow.request.path = path
    body = b'{"text": "deploy done"}'
    flow.request.headers["content-type"] = "application/json"
    ex, body, headers = flowmodel.new_exchange(flow, None, 1 << 20, body, SecretHeaders())
    wire, ex.operation = BUILTIN.detect(flowmodel.request_info(flow, headers, body))
    ex.provider = wire.provider
    wire.parse_request(ex, body)
    ex.status = 200
    ex.timings.end = ex.timings.start + 0.01 if ex.timings.start else None
    metrics.observe_exchange(ex)


def test_a_thousand_secret_paths_make_a_few_tool_series_and_no_label_holds_a_secret() -> None:
    metrics = Metrics(registry=CollectorRegistry())
    secrets = []
    for i in range(1000):
        path, secret = _secret_path(i)
        secrets.append(secret)
        _observe(metrics, path)
    exposition = generate_latest(metrics.registry).decode()
    tools = set(re.findall(r'brownout_requests_total\{[^}]*tool="([^"]*)"', exposition))
    assert tools == {"services", "webhooks", "sendMessage", "usage", "hooks", "hooks.example.com"}
    assert [s for s in secrets if s in exposition] == []
    assert "REDACTED" not in exposition


def test_a_tool_name_shaped_like_a_key_is_other() -> None:
    metrics = Metrics(registry=CollectorRegistry())
    assert metrics.tool_label("get_weather") == "get_weather"
    assert metrics.tool_label("sk-proj-" + "a1b2c3d4" * 5) == "other"
    assert metrics.tool_label(_token(32)) == "other"


def test_the_exchange_keeps_neither_credential_headers_nor_path_secrets() -> None:
    flow = tflow.tflow(resp=True)
    flow.request.path = "/services/T0123ABCD/B0456EFGH/pLaNtEdSecret0a1b2c3d4e5f?key=k1&city=Paris"
    for name in ("X-Auth-Token", "x-api-token", "X-Tenant-Pass", "Authorization", "x-request-id"):
        flow.request.headers[name] = f"value-of-{name.lower()}"
    flow.response.headers["x-session-token"] = "issued"
    flow.response.headers["x-ratelimit-remaining-tokens"] = "99"
    secret = SecretHeaders(["x-tenant-pass"])
    ex, _, headers = flowmodel.new_exchange(flow, None, 1 << 20, b"", secret)
    assert ex.path == "/services/T0123ABCD/B0456EFGH/REDACTED?key=REDACTED&city=Paris"
    assert ex.request_headers.keys() & {"x-auth-token", "x-api-token", "x-tenant-pass", "authorization"} == set()
    assert ex.request_headers["x-request-id"] == "value-of-x-request-id"
    assert headers["x-auth-token"] == "value-of-x-auth-token"  # recognition still sees what was sent
    kept = flowmodel.response_headers(flow, secret)
    assert "x-session-token" not in kept and kept["x-ratelimit-remaining-tokens"] == "99"
