"""Promise 5, graceful shutdown: SIGTERM to `brownout run` lets in-flight exchanges finish, flushes
spans with a bounded wait, and leaves a violation log holding every violation /metrics counted.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from bench.procs import ROOT, free_port, wait_http
from tests.reliability.test_secrets import OtlpSink, otlp_sink  # noqa: F401  (fixture)


def _start(tmp: Path, upstream: Any, otlp: str) -> tuple[subprocess.Popen[bytes], int, int]:
    port, metrics = free_port(), free_port()
    config = tmp / "chaos.yaml"
    config.write_text(f"""\
version: 1
invariants:
  - {{type: latency_budget, total_ms: 0.001}}  # 1 us: every exchange breaks it, one violation each
exporters:
  otlp: {{endpoint: "{otlp}", schedule_delay_ms: 60000, timeout_s: 1}}
  jsonl: {{path: {tmp}/violations.jsonl}}
control: {{enabled: false}}
""")
    cmd = [
        sys.executable,
        "-m",
        "brownout.proxy",
        "run",
        "--mode",
        f"reverse:{upstream.url}",
        "--listen",
        f"127.0.0.1:{port}",
        "--confdir",
        str(tmp / "conf"),
        "-c",
        str(config),
        "--set",
        f"brownout_metrics_listen=127.0.0.1:{metrics}",
    ]
    log = open(tmp / "brownout.log", "wb")  # noqa: SIM115 - the child owns it
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env={**os.environ})
    assert wait_http(port, "/ping", timeout_s=30), (tmp / "brownout.log").read_text()
    return proc, port, metrics


def _violations_counted(metrics_port: int) -> float:
    text = httpx.get(f"http://127.0.0.1:{metrics_port}/metrics").text
    return sum(
        s.value
        for fam in text_string_to_metric_families(text)
        if fam.name == "brownout_violations"
        for s in fam.samples
        if s.name == "brownout_violations_total"
    )


def test_sigterm_drains_in_flight_streams_flushes_spans_and_the_violation_log(
    tmp_path: Path, upstream: Any, otlp_sink: OtlpSink
) -> None:
    proc, port, metrics = _start(tmp_path, upstream, otlp_sink.url)
    base = f"http://127.0.0.1:{port}"
    try:
        with httpx.Client(base_url=base, trust_env=False) as client:
            for _ in range(5):
                client.post("/v1/chat/completions", json={"model": "gpt-4o-mini", "messages": []})
        slow: dict[str, Any] = {}
        first_chunk = threading.Event()

        def stream() -> None:  # ~1.5 s of SSE, in flight when SIGTERM arrives
            body = {"model": "gpt-4o-mini", "messages": [], "stream": True}
            headers = {"x-mock-chunk-delay-ms": "250"}
            with httpx.Client(base_url=base, trust_env=False, timeout=30) as client:
                with client.stream("POST", "/v1/chat/completions", json=body, headers=headers) as r:
                    chunks = []
                    for chunk in r.iter_raw():
                        chunks.append(chunk)
                        first_chunk.set()
                    slow["body"] = b"".join(chunks)

        t = threading.Thread(target=stream)
        t.start()
        assert first_chunk.wait(10)
        time.sleep(0.3)  # let the 5 quick exchanges' violations reach the counter
        counted = _violations_counted(metrics)
        assert counted >= 5
        sent_at = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        t.join(15)
        assert proc.wait(15) == 0
        took = time.monotonic() - sent_at
    finally:
        if proc.poll() is None:
            proc.kill()
    log = (tmp_path / "brownout.log").read_text()
    assert slow["body"].rstrip().endswith(b"data: [DONE]"), slow  # the in-flight stream finished whole
    assert "brownout stopped." in log
    lines = (tmp_path / "violations.jsonl").read_text().splitlines()
    assert len(lines) >= counted + 1  # every counted violation, plus the drained stream's own
    # spans: the batch delay is 60 s, so only the shutdown flush can have sent them
    spans = otlp_sink.raw.count(b"chat gpt-4o-mini")
    assert spans == 6, (spans, log)
    assert took < 10, took


def test_sigterm_with_an_unreachable_collector_stops_in_bounded_time(tmp_path: Path, upstream: Any) -> None:
    dead = f"http://127.0.0.1:{free_port()}"  # nothing listens here
    proc, port, _ = _start(tmp_path, upstream, dead)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", trust_env=False) as client:
            for _ in range(20):
                assert (
                    client.post("/v1/chat/completions", json={"model": "gpt-4o-mini", "messages": []}).status_code
                    == 200
                )
        sent_at = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 0
        took = time.monotonic() - sent_at
    finally:
        if proc.poll() is None:
            proc.kill()
    assert took < 6, took  # the span flush gives up at its bound instead of the SDK's 30 s
    assert len((tmp_path / "violations.jsonl").read_text().splitlines()) >= 20  # plus the /ping readiness probe
