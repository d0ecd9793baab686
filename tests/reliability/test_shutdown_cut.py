"""Promise 5, shutdown loses nothing it observed: streams that outlive the drain, or a second signal,
are cut and recorded (`error.type` `shutdown`), their spans exported and their violations logged,
before the logs close.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from bench.procs import ROOT, free_port, wait_http
from tests.reliability.badinput import CHAT_STREAM, chat_chunk, sse
from tests.reliability.rawupstream import RawRequest, RawUpstream, chunked, http_response
from tests.reliability.test_secrets import OtlpSink, otlp_sink  # noqa: F401  (fixture)

STREAMS = 4


async def endless_sse(req: RawRequest, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
    if req.path == "/ping":
        writer.write(http_response(200, [("content-type", "text/plain")], b"pong"))
        await writer.drain()
        return True
    writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
    while True:  # an answer that never ends: only shutdown can finish it
        writer.write(chunked(sse(chat_chunk("tick")), end=False))
        await writer.drain()
        await asyncio.sleep(0.05)


def _start(tmp: Path, upstream: str, otlp: str, drain_s: float | None) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    config = tmp / "chaos.yaml"
    drain = "" if drain_s is None else f"proxy: {{drain_timeout_s: {drain_s}}}\n"
    config.write_text(f"""\
version: 1
{drain}invariants:
  - {{type: latency_budget, total_ms: 1}}
exporters:
  prometheus: {{enabled: false}}
  otlp: {{endpoint: "{otlp}", schedule_delay_ms: 60000, timeout_s: 1}}
  jsonl: {{path: {tmp}/violations.jsonl, exchanges_path: {tmp}/exchanges.jsonl}}
control: {{enabled: false}}
""")
    cmd = [sys.executable, "-m", "brownout.proxy", "run", "--mode", f"reverse:{upstream}"]
    cmd += ["--listen", f"127.0.0.1:{port}", "--confdir", str(tmp / "conf"), "-c", str(config)]
    log = open(tmp / "brownout.log", "wb")  # noqa: SIM115 - the child owns it
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env={**os.environ})
    assert wait_http(port, "/ping", timeout_s=30), (tmp / "brownout.log").read_text()
    return proc, port


@pytest.mark.timeout(90)
@pytest.mark.parametrize("how", ["drain deadline", "second signal"])
def test_streams_cut_by_shutdown_are_recorded(tmp_path: Path, otlp_sink: OtlpSink, how: str) -> None:
    up = RawUpstream(endless_sse)
    with up.running():
        # The deadline case waits 1 s; a second signal stops at once, long before the default 20 s.
        proc, port = _start(tmp_path, up.url, otlp_sink.url, drain_s=1 if how == "drain deadline" else None)
        base = f"http://127.0.0.1:{port}"
        flowing = threading.Barrier(STREAMS + 1, timeout=20)
        ended: list[str] = []

        def stream() -> None:
            with httpx.Client(base_url=base, trust_env=False, timeout=30) as client:
                try:
                    with client.stream("POST", "/v1/chat/completions", json=CHAT_STREAM) as r:
                        for n, _ in enumerate(r.iter_lines()):
                            if n == 4:
                                flowing.wait()
                except httpx.HTTPError as e:
                    ended.append(type(e).__name__)
                else:
                    ended.append("complete")

        threads = [threading.Thread(target=stream) for _ in range(STREAMS)]
        try:
            for t in threads:
                t.start()
            flowing.wait()  # every stream is flowing
            proc.send_signal(signal.SIGTERM)
            if how == "second signal":
                time.sleep(0.5)
                assert proc.poll() is None  # still draining: the streams never end on their own
                proc.send_signal(signal.SIGTERM)
            assert proc.wait(30) == 0
            for t in threads:
                t.join(10)
        finally:
            if proc.poll() is None:
                proc.kill()
    log = (tmp_path / "brownout.log").read_text()
    # The clients saw their streams cut, not a clean end.
    assert len(ended) == STREAMS and "complete" not in ended, ended
    exchanges = [json.loads(x) for x in (tmp_path / "exchanges.jsonl").read_text().splitlines()]
    cut = [x for x in exchanges if x["path"] == "/v1/chat/completions"]
    assert len(cut) == STREAMS, (exchanges, log)
    assert all(x["error_type"] == "shutdown" and x["status_class"] == "error" for x in cut), cut
    assert all(x["stream"] and not x["stream_complete"] and x["response_bytes"] > 0 for x in cut), cut
    violations = [json.loads(x) for x in (tmp_path / "violations.jsonl").read_text().splitlines()]
    cut_ids = {x["id"] for x in cut}
    assert cut_ids <= {v["exchange_id"] for v in violations}, (violations, log)
    # spans: the batch delay is 60 s, so only the shutdown flush can have sent them
    assert otlp_sink.raw.count(b"chat gpt-4o-mini") == STREAMS, log
    assert b"shutdown" in otlp_sink.raw
    assert "is closed" not in log, log  # nothing was written after the logs closed
    assert "Traceback" not in log, log


@pytest.mark.timeout(60)
def test_an_embedded_proxy_stopped_mid_stream_records_the_stream(tmp_path: Path) -> None:
    from brownout.proxy.config import BrownoutConfig
    from brownout.proxy.embed import running_proxy

    seen: list[Any] = []
    config = BrownoutConfig.model_validate(
        {"control": {"enabled": False}, "exporters": {"prometheus": {"enabled": False}}}
    )
    up = RawUpstream(endless_sse)
    with up.running():
        with running_proxy(config=config, mode=f"reverse:{up.url}", confdir=tmp_path, on_exchange=seen.append) as p:
            with httpx.Client(base_url=p.url, trust_env=False, timeout=30) as client:
                with client.stream("POST", "/v1/chat/completions", json=CHAT_STREAM) as r:
                    lines = r.iter_lines()
                    for _ in range(4):
                        next(lines)
                    assert p.addon.in_flight == 1
                    # Leaving the proxy's block stops it with the stream still flowing.
                    p.master.shutdown()
                    deadline = time.monotonic() + 10
                    while not seen and time.monotonic() < deadline:
                        time.sleep(0.02)
    assert [(ex.error_type, ex.stream_complete) for ex in seen] == [("shutdown", False)]
