"""boto3 through brownout as an HTTPS proxy (`HTTPS_PROXY`, `AWS_CA_BUNDLE`) to a TLS Bedrock mock.

Forward mode is how an agent reaches the real Bedrock through brownout: the request keeps the host it was
signed for, and brownout never changes a signed byte, faults or not (the mock checks each signature
with botocore's signer). Reverse mode re-addresses the request, so its signature no longer holds.
"""

from __future__ import annotations

import os
import time
from typing import Any

import pytest
from botocore.exceptions import ClientError, EventStreamError

from tests.proxy.bedrock_support import client, converse, converse_stream, invoke_stream, model, signature_holds
from tests.proxy.test_passthrough import wait_for

CONFIG = """
version: 1
seed: 3
rules:
  - name: throttled
    match: {provider: bedrock, model: "*case-throttled-*"}
    fault: {type: http_error, status: 429}
  - name: mid-throttle
    match: {provider: bedrock, model: "*case-mid-throttle-*"}
    fault: {type: http_error, status: 429, mid_stream: true, after_events: 1}
  - name: stall
    match: {provider: bedrock, model: "*case-stall-*"}
    fault: {type: stall, after_events: 1, pause_ms: 300}
  - name: args
    match: {provider: bedrock, model: "*case-args-*"}
    fault: {type: malformed_json, target: tool_arguments}
  - name: mutate-everything
    match: {model: "*case-mutate-*"}
    fault: {type: mutate, kind: inject, text: PLANTED}
"""


@pytest.fixture
def forward(upstream_tls: Any, brownout_proxy: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    seen: list[Any] = []
    proxy = brownout_proxy(CONFIG, upstream=upstream_tls, on_exchange=seen.append)
    for name, value in (("HTTPS_PROXY", proxy.proxy_url()), ("AWS_CA_BUNDLE", str(proxy.ca_bundle_path))):
        monkeypatch.setenv(name, value)
    for name in ("NO_PROXY", "no_proxy", "https_proxy"):
        monkeypatch.delenv(name, raising=False)
    return upstream_tls, seen


def _signed_as_sent(up: Any) -> list[bool]:
    return [signature_holds(r.method, up.url + r.path, r.headers, r.body) for r in up.requests_seen]


def test_forward_mode_keeps_every_signature_faults_included(forward: Any) -> None:
    up, seen = forward
    c = client(up.url)
    assert converse(c)["stopReason"] == "end_turn"
    assert converse_stream(c)[-2]["messageStop"]["stopReason"] == "tool_use"
    assert invoke_stream(c)[-1]["type"] == "message_stop"
    t0 = time.perf_counter()
    converse_stream(c, model("stall"))  # re-routed through brownout's pacing relay
    assert time.perf_counter() - t0 >= 0.29
    converse(c, model("mutate"), tools=True)  # a rule without a provider: fires, and is skipped
    assert len(up.requests_seen) == 5 and all(_signed_as_sent(up))
    assert b"PLANTED" not in up.requests_seen[-1].body
    wait_for(seen, 5)
    mutated = next(ex for ex in seen if ex.model == model("mutate"))
    assert [f.fault for f in mutated.faults_skipped] == ["mutate"] and not mutated.faults
    assert {(ex.provider, ex.scheme) for ex in seen} == {("bedrock", "https")}


def test_faults_reach_boto3_in_forward_mode(forward: Any) -> None:
    up, _ = forward
    c = client(up.url, attempts=2)
    with pytest.raises(ClientError) as err:
        converse(c, model("throttled"))
    assert err.value.response["Error"]["Code"] == "ThrottlingException"
    with pytest.raises(EventStreamError) as stream_err:
        converse_stream(c, model("mid-throttle"))
    assert stream_err.value.response["Error"]["Code"] == "throttlingException"
    events = converse_stream(c, model("args"))
    assert any("toolUse" in e.get("contentBlockDelta", {}).get("delta", {}) for e in events)
    assert all(_signed_as_sent(up))


def test_reverse_mode_readdresses_the_request_so_its_signature_breaks(upstream: Any, brownout_proxy: Any) -> None:
    # The client signs for brownout's address; mitmproxy's reverse mode sends the upstream's Host instead.
    proxy = brownout_proxy("version: 1\n", mode="reverse", upstream=upstream)
    converse(client(proxy.url))
    (r,) = upstream.requests_seen
    assert r.headers["host"] == f"127.0.0.1:{upstream.port}"
    assert not signature_holds(r.method, upstream.url + r.path, r.headers, r.body)
    assert signature_holds(r.method, proxy.url + r.path, {**r.headers, "host": f"{proxy.host}:{proxy.port}"}, r.body)


def test_a_session_name_needs_a_password_in_botocores_proxy_url(forward: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    # botocore sends Proxy-Authorization only for a user *and* a password; brownout reads the user.
    up, seen = forward
    url = os.environ["HTTPS_PROXY"]
    monkeypatch.setenv("HTTPS_PROXY", url.replace("http://", "http://agent-7@"))
    converse(client(up.url))
    monkeypatch.setenv("HTTPS_PROXY", url.replace("http://", "http://agent-7:x@"))
    converse(client(up.url))
    wait_for(seen, 2)
    assert [ex.session for ex in seen] == ["client:127.0.0.1", "agent-7"]
