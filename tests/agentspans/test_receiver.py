"""The OTLP receiver: an agent's real OTLP/HTTP exporter sends its spans to brownout, which keeps the GenAI
ones for the join and forwards every request unchanged to its own collector, counting what fails."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import requests
from click.testing import CliRunner
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import SpanExportResult

from brownout.proxy.cli import main
from brownout.proxy.endpoints import endpoint_env
from tests.agentspans.collector import collector
from tests.agentspans.otlpdata import AgentTracer, json_bytes, proto_bytes
from tests.cli.helpers import brownout_cmd, clean_env
from tests.exporters.test_otlp import _closed_port


def _agent_spans() -> Any:
    agent = AgentTracer()
    with agent.span("invoke_agent", {"gen_ai.operation.name": "invoke_agent"}):
        with agent.span("chat gpt-4o", {"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o"}):
            with agent.span("POST", {"http.request.method": "POST"}):
                pass
    return agent.finished()


def _config(collector_url: str | None) -> str:
    otlp = f'  otlp: {{endpoint: "{collector_url}", schedule_delay_ms: 50}}\n' if collector_url else ""
    return f"""
agent_spans:
  receiver: {{listen: "127.0.0.1:0"}}
exporters:
{otlp}  prometheus: {{enabled: false}}
"""


def _receiver(proxy: Any) -> str:
    join = proxy.addon.pipeline.join
    assert join is not None and join.receiver is not None and join.receiver.endpoint is not None
    return str(join.receiver.endpoint)


def _sample(proxy: Any, name: str, labels: dict[str, str]) -> float:
    return proxy.addon.pipeline.exporters.metrics.registry.get_sample_value(name, labels) or 0.0


def _until(check: Any, timeout_s: float = 10.0) -> None:
    for _ in range(int(timeout_s / 0.02)):
        if check():
            return
        time.sleep(0.02)
    assert check()


def _forwarded(got: Any, body: bytes) -> list[Any]:
    return [p for p in got.posted if p.body == body]


@pytest.mark.parametrize("compression", [Compression.NoCompression, Compression.Gzip])
def test_the_sdks_exporter_sends_its_spans_to_brownout(brownout_proxy: Any, compression: Compression) -> None:
    spans = _agent_spans()
    with collector() as got:
        proxy = brownout_proxy(_config(got.url))
        exporter = OTLPSpanExporter(endpoint=f"{_receiver(proxy)}/v1/traces", compression=compression, timeout=5)
        assert exporter.export(spans) is SpanExportResult.SUCCESS
        _until(lambda: any(p.path == "/v1/traces" and p.content_type == "application/x-protobuf" for p in got.posted))
        _until(lambda: _sample(proxy, "brownout_otlp_forwarded_total", {"signal": "traces", "outcome": "ok"}) == 1)
    raw = proto_bytes(spans)
    forwarded = [
        p for p in got.posted if (gzip.decompress(p.body) if compression is Compression.Gzip else p.body) == raw
    ]
    assert len(forwarded) == 1 and forwarded[0].path == "/v1/traces"  # as it came: same bytes, same encoding
    kept, parents = proxy.call(proxy.addon.pipeline.join.store.spans_of, f"{spans[0].context.trace_id:032x}")
    assert sorted(s.name for s in kept.values()) == ["chat gpt-4o", "invoke_agent"]  # the GenAI ones, whole
    assert len(parents) == 3  # and every span's place in the tree
    assert _sample(proxy, "brownout_agent_spans_received_total", {"source": "receiver"}) == 3


def test_json_metrics_and_logs_are_forwarded_too(brownout_proxy: Any) -> None:
    body = json_bytes(_agent_spans())
    with collector() as got:
        proxy = brownout_proxy(_config(got.url))
        for path, data in (("/v1/traces", body), ("/v1/metrics", b'{"resourceMetrics": []}'), ("/v1/logs", b"{}")):
            answer = requests.post(
                _receiver(proxy) + path, data=data, headers={"content-type": "application/json"}, timeout=5
            )
            assert (answer.status_code, answer.json()) == (200, {})
        _until(lambda: len({p.path for p in got.posted} & {"/v1/traces", "/v1/metrics", "/v1/logs"}) == 3)
    assert _forwarded(got, body)[0].content_type == "application/json"
    assert _forwarded(got, b'{"resourceMetrics": []}')[0].path == "/v1/metrics"


@pytest.mark.parametrize(
    ("path", "ctype", "data", "status"),
    [
        ("/v1/other", "application/x-protobuf", b"", 404),
        ("/v1/traces", "text/plain", b"hi", 415),
        ("/v1/traces", "application/x-protobuf", b"\xff\xff\xff", 400),
        ("/v1/traces", "application/json", b"[not json", 400),
        ("/v1/traces", "application/json", b" " * 2_000_000, 413),
    ],
)
def test_what_is_no_otlp_export_is_refused(
    brownout_proxy: Any, path: str, ctype: str, data: bytes, status: int
) -> None:
    config = "agent_spans:\n  receiver: {listen: '127.0.0.1:0', max_body_bytes: 1048576}\n"
    proxy = brownout_proxy(config)
    answer = requests.post(_receiver(proxy) + path, data=data, headers={"content-type": ctype}, timeout=5)
    assert answer.status_code == status
    assert requests.get(_receiver(proxy) + "/v1/traces", timeout=5).status_code == 405


@pytest.mark.contained_errors
def test_a_collector_that_refuses_or_is_gone_is_counted(brownout_proxy: Any) -> None:
    body = proto_bytes(_agent_spans())
    headers = {"content-type": "application/x-protobuf"}
    with collector() as got:
        got.status = 503
        proxy = brownout_proxy(_config(got.url))
        assert requests.post(_receiver(proxy) + "/v1/traces", data=body, headers=headers, timeout=5).status_code == 200
        labels = {"signal": "traces", "outcome": "failed"}
        _until(lambda: _sample(proxy, "brownout_otlp_forwarded_total", labels) == 1)
    gone = brownout_proxy(_config(f"http://127.0.0.1:{_closed_port()}"))
    assert requests.post(_receiver(gone) + "/v1/traces", data=body, headers=headers, timeout=5).status_code == 200
    _until(lambda: _sample(gone, "brownout_otlp_forwarded_total", labels) == 1)
    # brownout still kept the spans for the join
    assert _sample(gone, "brownout_agent_spans_received_total", {"source": "receiver"}) == 3


def test_env_and_exec_point_the_agents_exporter_at_the_receiver(tmp_path: Path, brownout_proxy: Any) -> None:
    fixed = tmp_path / "fixed.yaml"
    fixed.write_text("agent_spans:\n  receiver: {listen: '127.0.0.1:4399'}\n")
    result = CliRunner().invoke(main, ["env", "-c", str(fixed), "--confdir", str(tmp_path / "ca")])
    assert result.exit_code == 0, result.output
    assert "export OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4399" in result.output
    assert "export OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=http://127.0.0.1:4399/v1/traces" in result.output
    assert "OTEL_" not in CliRunner().invoke(main, ["env", "--confdir", str(tmp_path / "ca")]).output
    env = endpoint_env(brownout_proxy(_config(None)))
    assert env["OTEL_EXPORTER_OTLP_PROTOCOL"] == "http/protobuf"
    assert env["OTEL_EXPORTER_OTLP_ENDPOINT"].startswith("http://127.0.0.1:")

    config = tmp_path / "exec.yaml"
    config.write_text(_config(None))
    child = "import json, os; print(json.dumps({k: v for k, v in os.environ.items() if k.startswith('OTEL_')}))"
    cmd = [*brownout_cmd(), "exec", "-c", str(config), "--confdir", str(tmp_path / "ca"), "--quiet"]
    proc = subprocess.run([*cmd, "--", sys.executable, "-c", child], env=clean_env(), capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout)
    assert seen["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] == seen["OTEL_EXPORTER_OTLP_ENDPOINT"] + "/v1/traces"


def test_brownout_refuses_to_export_to_its_own_receiver(brownout_proxy: Any) -> None:
    from brownout.proxy.embed import ProxyStartError
    from tests.cli.helpers import free_port

    port = free_port()
    config = f"""
agent_spans:
  receiver: {{listen: "127.0.0.1:{port}"}}
exporters:
  otlp: {{endpoint: "http://localhost:{port}"}}
"""
    with pytest.raises(ProxyStartError, match="is brownout's own OTLP receiver"):
        brownout_proxy(config)
