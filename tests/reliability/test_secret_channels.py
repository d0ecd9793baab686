"""One secret planted in each channel a client or a tool puts one, every artefact of the run searched.

Channels: a URL path (a Slack webhook, a key as a path segment), a query parameter (a GCS signature), a
header outside the fixed list (`x-auth-token`), a request body field, a response body (the token a
tool returns) and message content (an API key in a prompt). The run records cassettes, exports OTLP
to a local receiver (decoded with opentelemetry-proto), writes the exchange, decision and violation
logs, serves /metrics and the control API's /exchanges, /violations and /status, with content capture on, a fault and invariants that fire, and every
brownout logger at DEBUG. The upstream saw each secret, so its absence everywhere else means something.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any, ClassVar

import httpx
import openai
import pytest
from google.protobuf.json_format import MessageToJson

from tests.exporters.test_otlp import Received, http_receiver  # noqa: F401 - fixture
from tests.reliability.test_secrets import _brownout_side
from tests.threadserver import serving_handler

SLACK = "/services/T0PLANTED/B0PLANTED/"
PLANTED = {
    "path (webhook)": "pLaNtEdWebHook0Secret1x2y3",
    "path (key segment)": "sk-proj-PLANTEDpathSegmentKey0123456789",
    "query": "PLANTEDgcsSignature0123456789abcdef",
    "header": "PLANTEDxAuthToken0123456789",
    "request body": "PLANTEDbodyPassword0123456789",
    "response body": "PLANTEDtoolReturnedToken0123456789",
    "message content": "sk-proj-PLANTEDmessageContentKey0123456789",
}
TOKEN = "control-token-of-the-channels-test"
CONTENT = f"Summarise the report. My key is {PLANTED['message content']} if you need it."


class Upstream(BaseHTTPRequestHandler):
    """A Slack webhook, a tool API that issues tokens, and an OpenAI-compatible chat endpoint."""

    seen: ClassVar[list[bytes]] = []

    def log_message(self, *args: Any) -> None:
        pass

    def _answer(self, status: int, body: dict[str, Any] | str) -> None:
        data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/plain" if isinstance(body, str) else "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _request(self) -> bytes:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        Upstream.seen.append(f"{self.path}\n{self.headers}\n".encode() + body)
        return body

    def do_GET(self) -> None:
        self._request()
        self._answer(200, {"ok": True, "path_seen": "yes"})

    def do_POST(self) -> None:
        body = self._request()
        if self.path.startswith(SLACK):
            self._answer(200, "ok")
        elif self.path == "/tools/login":
            self._answer(200, {"access_token": PLANTED["response body"], "expires_in": 3600})
        elif self.path == "/v1/chat/completions":
            model = json.loads(body)["model"]
            choice = {"index": 0, "message": {"role": "assistant", "content": "Done."}, "finish_reason": "stop"}
            usage = {"prompt_tokens": 12, "completion_tokens": 2, "total_tokens": 14}
            reply = {"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": model}
            self._answer(200, {**reply, "choices": [choice], "usage": usage})
        else:
            self._answer(404, {"error": "not found"})


def _config(otlp: str, logs: Path) -> str:
    return f"""\
version: 1
seed: 11
proxy: {{capture_content: true}}
rules:
  - {{name: chat-429, match: {{provider: openai}}, fault: {{type: http_error, status: 429}}, schedule: {{first: 1}}}}
  - {{name: tools-slow, match: {{provider: http}}, fault: {{type: latency, delay_ms: 2}}}}
invariants:
  - {{type: no_pii, direction: both}}
  - {{type: latency_budget, total_ms: 1}}
exporters:
  otlp: {{endpoint: "{otlp}", schedule_delay_ms: 50}}
  jsonl: {{path: {logs}/violations.jsonl, decisions_path: {logs}/decisions.jsonl, exchanges_path: {logs}/exchanges.jsonl}}
control: {{token: {TOKEN}}}
"""


def _traffic(proxy: Any, up: str, openai_client: Callable[..., Any]) -> int:
    """Every channel once; returns how many exchanges went through."""
    with httpx.Client(proxy=proxy.proxy_url("planted"), trust_env=False) as client:
        assert client.post(f"{up}{SLACK}{PLANTED['path (webhook)']}", json={"text": "deploy done"}).text == "ok"
        assert client.get(f"{up}/keys/{PLANTED['path (key segment)']}/usage").status_code == 200
        signed = client.get(f"{up}/tools/report?city=Paris&X-Goog-Signature={PLANTED['query']}")
        assert signed.status_code == 200
        login = client.post(
            f"{up}/tools/login",
            headers={"x-auth-token": PLANTED["header"]},
            json={"user": "ada", "password": PLANTED["request body"]},
        )
        assert login.json()["access_token"] == PLANTED["response body"]  # the agent gets it as sent
    chat = openai_client(proxy, up, session="planted")
    messages = [{"role": "user", "content": CONTENT}]
    with pytest.raises(openai.RateLimitError):  # the fault fires: the decision log has a fired line
        chat.chat.completions.create(model="gpt-4o-mini", messages=messages)
    assert chat.chat.completions.create(model="gpt-4o-mini", messages=messages).choices[0].message.content
    return 6


def _wait(cond: Callable[[], bool], what: str, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def _lines(path: Path) -> int:
    return path.read_bytes().count(b"\n") if path.exists() else 0


def test_a_secret_planted_in_each_channel_is_in_no_artefact(
    tmp_path: Path,
    brownout_proxy: Callable[..., Any],
    openai_client: Callable[..., Any],
    http_receiver: tuple[str, Received],
    caplog: pytest.LogCaptureFixture,
) -> None:
    otlp, received = http_receiver
    logs, cassettes = tmp_path / "logs", tmp_path / "cassettes"
    logs.mkdir()
    caplog.set_level(logging.DEBUG)
    Upstream.seen = []
    artefacts: dict[str, bytes] = {}
    with serving_handler(Upstream) as up:
        proxy = brownout_proxy(_config(otlp, logs), extra_options={"brownout_record": str(cassettes)})
        n = _traffic(proxy, up, openai_client)
        _wait(lambda: _lines(logs / "exchanges.jsonl") >= n, "the exchange log")
        _wait(lambda: len(received.spans) >= n, "the OTLP export")
        _wait(lambda: proxy.addon.tape.writer.written >= n - 1, "the cassettes")  # the 429 fault is not upstream's
        port = proxy.addon.pipeline.exporters.metrics_port
        artefacts["/metrics"] = httpx.get(f"http://127.0.0.1:{port}/metrics").content
        control = f"http://127.0.0.1:{proxy.addon.control.port}"
        for endpoint in ("/exchanges", "/violations", "/status"):
            got = httpx.get(f"{control}{endpoint}", headers={"Authorization": f"Bearer {TOKEN}"})
            assert got.status_code == 200
            artefacts[endpoint] = got.content
    upstream_saw = b"\n".join(Upstream.seen)
    # The upstream got every secret but the one it sent back itself: brownout forwards them untouched.
    assert all(v.encode() in upstream_saw for k, v in PLANTED.items() if k != "response body")

    for path in sorted([*logs.iterdir(), *cassettes.iterdir()]):
        artefacts[path.name] = path.read_bytes()
    artefacts["OTLP spans"] = "\n".join(MessageToJson(s) for s in received.spans).encode()
    artefacts["OTLP bytes"] = b"".join(s.SerializeToString() for s in received.spans)
    records = [r for r in caplog.records if _brownout_side(r)]
    artefacts["log records"] = "\n".join(f"{r.name} {r.getMessage()} {r.exc_text or ''}" for r in records).encode()

    # Every artefact has content: the fault fired, the invariants were violated, content was captured.
    assert b'"outcome":"fired"' in artefacts["decisions.jsonl"]
    assert b"no_pii" in artefacts["violations.jsonl"] and b"latency_budget" in artefacts["violations.jsonl"]
    assert b"Summarise the report" in artefacts["OTLP spans"]  # capture_content is on
    assert b"brownout_requests_total" in artefacts["/metrics"]
    assert any(name.endswith(".jsonl") and b'"seq"' in data for name, data in artefacts.items() if "planted" in name)
    assert b"/services/T0PLANTED/B0PLANTED/REDACTED" in artefacts["exchanges.jsonl"]  # readable, the secret out

    leaks = [
        f"{what} in {name}" for name, data in artefacts.items() for what, v in PLANTED.items() if v.encode() in data
    ]
    assert leaks == []
