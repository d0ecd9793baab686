"""Promise 4, secrets: a run with faults, invariants and every exporter on leaks no planted credential.

Credentials are planted where real clients send them (Authorization, x-api-key, api-key,
x-goog-api-key, cookie, `?key=`) and one API key inside a prompt; afterwards every artefact of
the run is grepped for them: files in the run's directory (JSONL logs, a DEBUG log of every
logger), OTLP payload bytes as the collector received them, /metrics, the control API's
/status and /violations, and the captured log records.
"""

from __future__ import annotations

import logging
import os
import ssl
import stat
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest

from brownout.proxy.embed import running_proxy

PLANTED = {
    "authorization": "sk-proj-PLANTEDauthZ0123456789abcdefghijklmnopqrstuv",
    "x-api-key": "sk-ant-PLANTEDxapi0123456789abcdefghijklmnop",
    "api-key": "PLANTEDazure0123456789abcdef",
    "x-goog-api-key": "AIzaPLANTEDgoogheader0123456789abcdefgh",
    "cookie": "PLANTEDcookie0123456789",
    "query key": "AIzaPLANTEDquery0123456789abcdefghijklm",
    "prompt key": "sk-proj-PLANTEDprompt0123456789abcdefghijkl",
}
CONTENT_MARKER = "PLANTEDCONTENTmarker"
TOKEN = "control-token-for-the-secrets-test"


class OtlpSink:
    """An OTLP/HTTP receiver that keeps the raw request bytes: what a collector would store."""

    def __init__(self) -> None:
        self.payloads: list[bytes] = []
        sink = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                sink.payloads.append(self.rfile.read(int(self.headers["Content-Length"])))
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def raw(self) -> bytes:
        return b"".join(self.payloads)


@pytest.fixture
def otlp_sink() -> Iterator[OtlpSink]:
    sink = OtlpSink()
    yield sink
    sink.server.shutdown()
    sink.server.server_close()


def _config(tmp: Path, otlp: str, capture_content: bool) -> str:
    return f"""\
version: 1
seed: 3
proxy: {{capture_content: {str(capture_content).lower()}, announce_faults: true}}
rules:
  - {{name: oa-429, match: {{provider: openai, stream: false}}, fault: {{type: http_error, status: 429}},
     schedule: {{first: 1}}}}
  - {{name: oa-cut, match: {{provider: openai, stream: true}}, fault: {{type: truncate, after_events: 2}}}}
  - {{name: an-slow, match: {{provider: anthropic}}, fault: {{type: latency, delay_ms: 5}}}}
invariants:
  - {{type: no_pii, direction: both}}
  - {{type: latency_budget, total_ms: 1}}
  - {{type: stream_complete}}
  - {{type: retry_discipline}}
exporters:
  prometheus: {{listen: "127.0.0.1:0"}}
  otlp: {{endpoint: "{otlp}", schedule_delay_ms: 50}}
  jsonl: {{path: {tmp}/violations.jsonl, decisions_path: {tmp}/decisions.jsonl, exchanges_path: {tmp}/exchanges.jsonl}}
control: {{listen: "127.0.0.1:0", token: {TOKEN}}}
"""


def _traffic(proxy: Any, up: Any) -> None:
    verify = ssl.create_default_context(cafile=str(proxy.ca_bundle_path))
    headers = {
        "api-key": PLANTED["api-key"],
        "x-goog-api-key": PLANTED["x-goog-api-key"],
        "cookie": f"session={PLANTED['cookie']}",
    }
    prompt = [{"role": "user", "content": f"{CONTENT_MARKER} my key is {PLANTED['prompt key']}, mail a@b.example"}]
    oa = openai.OpenAI(
        base_url=f"{up.url}/v1",
        api_key=PLANTED["authorization"],
        max_retries=0,
        default_headers=headers,
        http_client=openai.DefaultHttpxClient(proxy=proxy.proxy_url(), verify=verify),
    )
    with pytest.raises(openai.RateLimitError):  # the 429 fault
        oa.chat.completions.create(model="gpt-4o-mini", messages=prompt)
    oa.chat.completions.create(model="gpt-4o-mini", messages=prompt)
    list(oa.chat.completions.create(model="gpt-4o-mini", messages=prompt, stream=True))  # cut by the fault
    an = anthropic.Anthropic(
        base_url=up.url,
        api_key=PLANTED["x-api-key"],
        max_retries=0,
        default_headers=headers,
        http_client=anthropic.DefaultHttpxClient(proxy=proxy.proxy_url(), verify=verify),
    )
    an.messages.create(model="claude-sonnet-4-5", max_tokens=32, messages=prompt)
    with httpx.Client(proxy=proxy.proxy_url(), trust_env=False, headers=headers) as client:
        url = f"{up.url}/v1beta/models/gemini-2.0-flash:generateContent?alt=json&key={PLANTED['query key']}"
        client.post(url, json={"contents": [{"role": "user", "parts": [{"text": prompt[0]["content"]}]}]})
        client.get(f"{up.url}/tools/weather?city=Paris&api_key={PLANTED['query key']}")


def _run(tmp: Path, confdir: Path, up: Any, sink: OtlpSink, capture_content: bool) -> dict[str, bytes]:
    """One full run; every artefact it produced, by name (files are read after shutdown)."""
    config = tmp / "chaos.yaml"
    config.write_text(_config(tmp, sink.url, capture_content))
    debug = logging.FileHandler(tmp / "debug.log")
    debug.addFilter(_brownout_side)
    root = logging.getLogger()
    old_level = root.level
    root.addHandler(debug)
    root.setLevel(logging.DEBUG)
    out: dict[str, bytes] = {}
    try:
        with running_proxy(config, confdir=confdir) as proxy:
            _traffic(proxy, up)
            control = f"http://127.0.0.1:{proxy.addon.control.port}"
            auth = {"Authorization": f"Bearer {TOKEN}"}
            port = proxy.addon.pipeline.exporters.metrics_port
            # the pipeline runs just after each response: wait for the last exchange to land
            _wait(lambda: (tmp / "exchanges.jsonl").read_bytes().count(b"\n") >= 6)
            out["/metrics"] = httpx.get(f"http://127.0.0.1:{port}/metrics").content
            out["/status"] = httpx.get(f"{control}/status", headers=auth).content
            out["/violations"] = httpx.get(f"{control}/violations", headers=auth).content
    finally:
        root.removeHandler(debug)
        debug.close()
        root.setLevel(old_level)
    out["otlp"] = sink.raw
    for path in tmp.rglob("*"):
        if path.is_file():
            out[str(path.relative_to(tmp))] = path.read_bytes()
    return out


# The proxy runs in this process: the test's own clients (which do log their URLs) are not brownout.
_CLIENT_LOGGERS = ("httpx", "httpcore", "openai", "anthropic", "hpack", "urllib3")


def _brownout_side(record: logging.LogRecord) -> bool:
    return not record.name.startswith(_CLIENT_LOGGERS)


def _wait(cond: Any, timeout_s: float = 5.0) -> None:
    import time

    deadline = time.monotonic() + timeout_s
    while not cond() and time.monotonic() < deadline:
        time.sleep(0.05)


def _leaks(artefacts: dict[str, bytes], values: dict[str, str]) -> list[str]:
    return [f"{what} in {name}" for name, data in artefacts.items() for what, v in values.items() if v.encode() in data]


def test_planted_credentials_appear_in_no_artefact(
    tmp_path: Path, confdir: Path, upstream: Any, otlp_sink: OtlpSink, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    run = tmp_path / "run"
    run.mkdir()
    artefacts = _run(run, confdir, upstream, otlp_sink, capture_content=False)
    records = [r for r in caplog.records if _brownout_side(r)]
    artefacts["captured log records"] = "\n".join(
        f"{r.name} {r.getMessage()} {r.exc_text or ''}" for r in records
    ).encode()
    assert any(r.name.startswith("mitmproxy") for r in records) and any(
        r.name.startswith("brownout.proxy") for r in records
    )
    # the run really exercised every exporter and invariant it is checked against
    assert otlp_sink.payloads, "no OTLP export received"
    assert (
        b"no_pii" in artefacts["violations.jsonl"]
        and b"openai_key in request body at offset" in artefacts["violations.jsonl"]
    )
    assert b"fired" in artefacts["decisions.jsonl"] and artefacts["exchanges.jsonl"].count(b"\n") >= 6
    assert b"brownout_violations_total" in artefacts["/metrics"]
    assert b"REDACTED" in artefacts["exchanges.jsonl"]  # the ?key= was there, blanked
    assert _leaks(artefacts, PLANTED) == []
    # content is off by default: not even the harmless marker from the prompt is exported
    assert _leaks(artefacts, {"message content": CONTENT_MARKER}) == []


def test_content_is_exported_only_when_opted_in_and_credentials_still_never(
    tmp_path: Path, confdir: Path, upstream: Any, otlp_sink: OtlpSink
) -> None:
    run = tmp_path / "run"
    run.mkdir()
    artefacts = _run(run, confdir, upstream, otlp_sink, capture_content=True)
    assert CONTENT_MARKER.encode() in artefacts["otlp"]  # opted in: the prompt is on the spans
    headers_only = {k: v for k, v in PLANTED.items() if k != "prompt key"}  # the prompt itself is content
    assert _leaks(artefacts, headers_only) == []
    # and content still goes to spans only, never to logs or metrics
    assert _leaks({k: v for k, v in artefacts.items() if k != "otlp"}, {"content": CONTENT_MARKER}) == []


def test_ca_private_key_is_0600_in_a_0700_confdir(tmp_path: Path) -> None:
    from brownout.proxy.certs import ensure_ca

    ca = ensure_ca(tmp_path / "fresh")
    assert stat.S_IMODE(os.stat(ca.confdir).st_mode) == 0o700
    keys = [p for p in ca.confdir.iterdir() if b"PRIVATE KEY" in p.read_bytes()]
    assert keys, "no private key file found"
    for path in keys:
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600, path


def test_control_api_refuses_without_the_token_and_compares_in_constant_time(
    tmp_path: Path, confdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import hmac

    from brownout.proxy import control as proxy_control

    calls: list[tuple[bytes, bytes]] = []
    real = hmac.compare_digest

    def spy(a: bytes, b: bytes) -> bool:
        calls.append((a, b))
        return real(a, b)

    monkeypatch.setattr(proxy_control.hmac, "compare_digest", spy)
    config = tmp_path / "c.yaml"
    config.write_text(
        f'exporters: {{prometheus: {{listen: "127.0.0.1:0"}}}}\ncontrol: {{listen: "127.0.0.1:0", token: {TOKEN}}}\n'
    )
    with running_proxy(config, confdir=confdir) as handle:
        base = f"http://127.0.0.1:{handle.addon.control.port}"
        assert handle.addon.control.host == "127.0.0.1"
        for headers in (
            {},
            {"Authorization": "Bearer nope"},
            {"Authorization": TOKEN},
            {"Authorization": f"Basic {TOKEN}"},
        ):
            assert httpx.get(f"{base}/status", headers=headers).status_code == 401
            assert httpx.post(f"{base}/faults/pause", headers=headers).status_code == 401
        assert handle.addon.engine.paused is False  # no unauthorised request had an effect
        assert httpx.get(f"{base}/healthz").status_code == 200  # liveness only
        ok = httpx.post(f"{base}/faults/pause", headers={"Authorization": f"Bearer {TOKEN}"})
        assert ok.status_code == 200 and handle.addon.engine.paused is True
    assert (b"nope", TOKEN.encode()) in calls and (TOKEN.encode(), TOKEN.encode()) in calls


def test_control_api_without_a_token_answers_only_healthz(
    tmp_path: Path, confdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("BROWNOUT_TOKEN", raising=False)
    config = tmp_path / "c.yaml"
    config.write_text('exporters: {prometheus: {listen: "127.0.0.1:0"}}\ncontrol: {listen: "127.0.0.1:0"}\n')
    with running_proxy(config, confdir=confdir) as handle:
        base = f"http://127.0.0.1:{handle.addon.control.port}"
        assert httpx.get(f"{base}/status", headers={"Authorization": "Bearer x"}).status_code == 403
        assert httpx.post(f"{base}/faults/pause").status_code == 403
        assert httpx.get(f"{base}/healthz").status_code == 200


def test_everything_binds_to_loopback_by_default() -> None:
    import inspect

    from brownout.exporters.config import PrometheusConfig
    from brownout.proxy import embed
    from brownout.proxy.cli import run
    from brownout.proxy.config import ControlConfig

    assert ControlConfig().listen.startswith("127.0.0.1:")
    assert PrometheusConfig().listen.startswith("127.0.0.1:")
    assert next(p.default for p in run.params if p.name == "listen").startswith("127.0.0.1:")
    for fn in (embed.running_proxy, embed.running_proxy_async):
        assert inspect.signature(fn).parameters["listen"].default.startswith("127.0.0.1:")


@pytest.mark.parametrize(
    ("args", "warns"),
    [
        (["--listen", "0.0.0.0:18080"], True),
        (["--listen", "[::]:18080"], True),
        (["--listen", "0.0.0.0:18080", "--set", "allow_hosts=api\\.openai\\.com"], False),
        (["--listen", "127.0.0.1:18080"], False),
    ],
)
def test_run_on_a_public_interface_without_allow_hosts_warns(
    monkeypatch: pytest.MonkeyPatch, args: list[str], warns: bool
) -> None:
    from click.testing import CliRunner

    from brownout.proxy import serve as proxy_serve
    from brownout.proxy.cli import main

    async def no_serve(*a: Any, **kw: Any) -> None:  # the warning comes before the proxy starts
        return None

    monkeypatch.setattr(proxy_serve, "serve_until_signal", no_serve)
    result = CliRunner().invoke(main, ["run", *args])
    assert result.exit_code == 0, result.output
    assert ("not loopback" in result.output and "allow_hosts" in result.output) is warns, result.output
