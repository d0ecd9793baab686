"""The GenAI names brownout emits are, version for version, the ones docs/telemetry.md lists.

A real proxy, the official openai, anthropic and mcp SDKs, a mock upstream and a real MCP server;
spans read from OTLP/HTTP requests decoded with the real protobuf schema (opentelemetry-proto), and
/metrics read with prometheus_client's parser. Run with the default, with
OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental, and with `exporters.semconv: latest`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from prometheus_client.parser import text_string_to_metric_families

from brownout.core.semconv import VERSIONS, SemconvKey
from brownout.proxy.embed import ProxyHandle
from tests.docs.semconv_doc import documented
from tests.e2e.conftest import Received, Spans
from tests.e2e.mcp_server import weather_server

OPT_IN = "OTEL_SEMCONV_STABILITY_OPT_IN"
# Documented names this traffic does not produce: realtime sessions and MCP prompts have tests of their own.
NOT_EXERCISED = {
    "gen_ai.live_session.id",
    "gen_ai.client.live_session.started",
    "gen_ai.client.live_session.ended",
    "gen_ai.prompt.name",
}
# Names retired before v1.41.0: brownout emits them in neither version.
RETIRED = {
    "gen_ai.system",
    "gen_ai.usage.prompt_tokens",
    "gen_ai.usage.completion_tokens",
    "gen_ai.system.message",
    "gen_ai.user.message",
    "gen_ai.assistant.message",
    "gen_ai.tool.message",
    "gen_ai.choice",
}


@pytest.fixture(scope="module")
def mcp_url() -> Iterator[str]:
    with weather_server() as url:
        yield url


def _config(endpoint: str, semconv: str | None = None) -> str:
    line = f"\n  semconv: {semconv}" if semconv else ""
    return f"""
version: 1
proxy: {{capture_content: true}}
exporters:
  otlp: {{endpoint: "{endpoint}", schedule_delay_ms: 50}}{line}
"""


# The spans of _drive's exchanges (the MCP handshake adds more, with gen_ai.provider.name "mcp").
DRIVEN = {"chat gpt-4o-mini", "embeddings text-embedding-3-small", "chat claude-sonnet-4-5", "tools/call get_weather"}


def _drive(proxy: ProxyHandle, upstream: Any, openai_client: Any, anthropic_client: Any, mcp_url: str) -> None:
    """A streamed chat, an embeddings call, an Anthropic message (it reports prompt-cache tokens) and an
    MCP tool call: every kind of GenAI exchange a proxy sees."""
    oai = openai_client(proxy, upstream, session="semconv")
    stream = oai.chat.completions.create(
        model="gpt-4o-mini",
        messages=[{"role": "user", "content": "hi"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    assert len(oai.embeddings.create(model="text-embedding-3-small", input="hello").data[0].embedding) == 4
    msg = anthropic_client(proxy, upstream, session="semconv").messages.create(
        model="claude-sonnet-4-5", max_tokens=64, messages=[{"role": "user", "content": "hi"}]
    )
    assert msg.usage.cache_creation_input_tokens == 0  # reported, so brownout records it

    async def agent() -> None:
        http = httpx2.AsyncClient(proxy=proxy.proxy_url("semconv"), timeout=10)
        async with Client(streamable_http_client(mcp_url, http_client=http), mode="legacy") as client:
            result = await client.call_tool("get_weather", {"city": "Oslo"})
            assert not result.is_error

    asyncio.run(agent())


def _attrs(kvs: Any) -> set[str]:
    return {kv.key for kv in kvs}


def _emitted(got: Received) -> set[str]:
    """Every gen_ai.* attribute key and event name on the spans received, once _drive's are all in."""
    deadline = time.monotonic() + 10
    while not {s.name for s in list(got.spans)} >= DRIVEN and time.monotonic() < deadline:
        time.sleep(0.02)
    spans = list(got.spans)
    assert {s.name for s in spans} >= DRIVEN, f"the collector got {sorted(s.name for s in spans)}"
    names: set[str] = set()
    for span in spans:
        names |= {k for k in _attrs(span.attributes) if k.startswith("gen_ai.")}
        names |= {e.name for e in span.events if e.name.startswith("gen_ai.")}
        for event in span.events:
            names |= {k for k in _attrs(event.attributes) if k.startswith("gen_ai.")}
    return names


def _metric_names(proxy: ProxyHandle) -> tuple[set[str], set[str]]:
    """(gen_ai_* names /metrics declares, those with samples), counters with `_total` as the docs list them."""
    port = proxy.addon.pipeline.exporters.metrics_port
    text = httpx.get(f"http://127.0.0.1:{port}/metrics", trust_env=False).text
    declared, sampled = set(), set()
    for family in text_string_to_metric_families(text):
        if family.name.startswith("gen_ai_"):
            name = family.name + ("_total" if family.type == "counter" else "")
            declared.add(name)
            if any(s.value for s in family.samples):
                sampled.add(name)
    return declared, sampled


@pytest.mark.parametrize("how", ["default", "variable", "config"])
def test_emitted_names_are_the_documented_ones(
    how: str,
    monkeypatch: pytest.MonkeyPatch,
    http_receiver: tuple[str, Received],
    upstream: Any,
    brownout_proxy: Callable[..., ProxyHandle],
    openai_client: Any,
    anthropic_client: Any,
    mcp_url: str,
) -> None:
    key: SemconvKey = "pinned" if how == "default" else "latest"
    other: SemconvKey = "latest" if key == "pinned" else "pinned"
    if how == "variable":
        monkeypatch.setenv(OPT_IN, "http, gen_ai_latest_experimental")
    else:
        monkeypatch.delenv(OPT_IN, raising=False)
    url, got = http_receiver
    proxy = brownout_proxy(_config(url, "latest" if how == "config" else None), upstream=upstream)
    _drive(proxy, upstream, openai_client, anthropic_client, mcp_url)

    doc = documented(key)
    emitted = _emitted(got)
    assert emitted <= doc.span_names, f"emitted but not documented for {key}: {emitted - doc.span_names}"
    assert doc.span_names - emitted == NOT_EXERCISED
    assert not emitted & (documented(other).span_names - doc.span_names)  # the other version's own names
    assert not emitted & RETIRED
    assert got.scopes == {("brownout", VERSIONS[key].schema_url)}

    # No realtime generation here, and the Anthropic call read and wrote no tokens from and to the cache.
    idle = {
        "gen_ai_client_operation_duration_seconds",
        "gen_ai_client_inference_usage_cache_read_input_tokens_total",
        "gen_ai_client_inference_usage_cache_write_input_tokens_total",
    }
    expected = doc.prometheus_names - idle if key == "latest" else doc.prometheus_names
    deadline = time.monotonic() + 5  # a span may reach the collector a moment before its metrics count
    while (names := _metric_names(proxy))[1] != expected and time.monotonic() < deadline:
        time.sleep(0.05)
    declared, sampled = names
    assert declared == doc.prometheus_names
    assert sampled == expected


def test_two_proxies_in_one_process_emit_each_its_own_version(
    monkeypatch: pytest.MonkeyPatch, upstream: Any, brownout_proxy: Callable[..., ProxyHandle], openai_client: Any
) -> None:
    monkeypatch.delenv(OPT_IN, raising=False)
    proxies = {"pinned": brownout_proxy("version: 1\n"), "latest": brownout_proxy("exporters: {semconv: latest}\n")}
    spans = {key: Spans(proxy) for key, proxy in proxies.items()}
    for key, proxy in proxies.items():
        openai_client(proxy, upstream, session=f"own-{key}").chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}]
        )
    for key, proxy in proxies.items():
        (span,) = spans[key].wait(f"own-{key}", 1)
        assert span.instrumentation_scope is not None
        assert span.instrumentation_scope.schema_url == VERSIONS[key].schema_url  # type: ignore[index]
        declared, _ = _metric_names(proxy)
        assert declared == documented(key).prometheus_names  # type: ignore[arg-type]
