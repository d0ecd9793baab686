"""Wire format sets: detection order, provider lookup, duplicate names, plugin formats, capture cap."""

from __future__ import annotations

import inspect

import pytest

from brownout.core.exchange import Exchange
from brownout.core.wire import BUILTIN, GENERIC, WireFormats, by_provider, detect
from brownout.core.wire.base import RequestInfo
from brownout.core.wire.common import ProviderFormat
from brownout.core.wire.generic import GenericFormat

FORMATS = BUILTIN.formats


def info(path: str, body: bytes = b"{}", method: str = "POST", query: str = "") -> RequestInfo:
    return RequestInfo(method=method, host="h", path=path, query=query, headers={}, body=body)


def test_order_and_names() -> None:
    assert [f.provider for f in FORMATS] == [
        "otlp", "mcp", "openai", "anthropic", "gemini", "ollama", "bedrock", "openai_realtime", "gemini_live", "http"
    ]  # fmt: skip
    assert FORMATS[-1] is GENERIC
    for fmt in FORMATS:
        assert by_provider(fmt.provider) is fmt
    with pytest.raises(KeyError):
        by_provider("nope")


def test_duplicates_fail() -> None:
    with pytest.raises(ValueError, match="duplicate wire format provider 'openai'"):
        WireFormats([by_provider("openai")])


class _Acme(GenericFormat):
    provider = "acme"

    def recognise(self, req: RequestInfo) -> str | None:
        return "chat" if req.host == "acme" else None


def test_a_plugin_format_is_tried_before_the_fallback_and_only_where_added() -> None:
    formats = BUILTIN.with_extra([_Acme()])
    assert [f.provider for f in formats.formats][-2:] == ["acme", "http"] and "acme" in formats.providers
    req = RequestInfo(method="POST", host="acme", path="/x", query="", headers={}, body=b"{}")
    assert formats.detect(req)[0].provider == "acme"
    assert detect(req)[0].provider == "http" and "acme" not in BUILTIN.providers  # the built-in set is untouched
    assert formats.llm_providers == BUILTIN.llm_providers == {"openai", "anthropic", "gemini", "ollama", "bedrock"}


@pytest.mark.parametrize(
    ("path", "provider", "operation"),
    [
        ("/v1/chat/completions", "openai", "chat"),
        ("/v1/messages", "anthropic", "chat"),
        ("/v1beta/models/gemini-2.5-pro:streamGenerateContent", "gemini", "generate_content"),
        ("/v1beta/models/text-embedding-004:embedContent", "gemini", "embeddings"),
        ("/api/chat", "ollama", "chat"),
        ("/api/generate", "ollama", "text_completion"),
        ("/v1/threads/abc/messages", "http", "execute_tool"),
        ("/anything", "http", "execute_tool"),
    ],
)
def test_detect(path: str, provider: str, operation: str) -> None:
    fmt, op = detect(info(path))
    assert (fmt.provider, op) == (provider, operation)


def test_detect_plain_http_and_broken_recogniser(monkeypatch: pytest.MonkeyPatch) -> None:
    assert detect(info("/x", b"hello", "PUT")) == (GENERIC, "http")

    def boom(req: RequestInfo) -> str:
        raise RuntimeError("bug")

    monkeypatch.setattr(by_provider("openai"), "recognise", boom)
    assert detect(info("/v1/chat/completions"))[0].provider == "http"


def test_every_format_implements_the_fault_api() -> None:
    for fmt in FORMATS:
        assert isinstance(fmt, ProviderFormat)
        for name in ("error_response", "stream_error_event", "empty_response", "terminal_bytes", "is_terminal"):
            assert callable(getattr(fmt, name))
        sig = inspect.signature(fmt.error_response)
        assert list(sig.parameters) == ["status", "error_type", "message", "retry_after_s", "exchange"]
        assert list(inspect.signature(fmt.stream_error_event).parameters) == ["error_type", "message", "exchange"]


def test_the_capture_cap_travels_with_the_exchange() -> None:
    body = b'{"model": "m", "messages": [{"role": "user", "content": "' + b"x" * 500 + b'"}]}'
    small, large = Exchange(id="a", session="s", capture_max_bytes=10), Exchange(id="b", session="s")
    for ex in (small, large):
        by_provider("openai").parse_request(ex, body)
    assert len(small.request_body) == 10 and len(small.messages[0].text) == 10
    assert large.request_body == body.decode() and len(large.messages[0].text) == 500
