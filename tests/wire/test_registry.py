"""The registry: detection order, provider lookup, duplicate names, capture cap."""

from __future__ import annotations

import inspect

import pytest

import brownout.core.wire as wire
from brownout.core.wire import FORMATS, GENERIC, by_provider, detect, set_capture_max_bytes
from brownout.core.wire.base import RequestInfo
from brownout.core.wire.common import ProviderFormat


def info(path: str, body: bytes = b"{}", method: str = "POST", query: str = "") -> RequestInfo:
    return RequestInfo(method=method, host="h", path=path, query=query, headers={}, body=body)


def test_order_and_names() -> None:
    assert [f.provider for f in FORMATS] == ["mcp", "openai", "anthropic", "gemini", "ollama", "http"]
    assert FORMATS[-1] is GENERIC
    for fmt in FORMATS:
        assert by_provider(fmt.provider) is fmt
    with pytest.raises(KeyError):
        by_provider("nope")


def test_duplicates_fail() -> None:
    with pytest.raises(ValueError, match="duplicate"):
        wire._index((FORMATS[1], FORMATS[1]))


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

    monkeypatch.setattr(FORMATS[1], "recognise", boom)
    assert detect(info("/v1/chat/completions"))[0].provider == "http"


def test_every_format_implements_the_fault_api() -> None:
    for fmt in FORMATS:
        assert isinstance(fmt, ProviderFormat)
        for name in ("error_response", "stream_error_event", "empty_response", "terminal_bytes", "is_terminal"):
            assert callable(getattr(fmt, name))
        sig = inspect.signature(fmt.error_response)
        assert list(sig.parameters) == ["status", "error_type", "message", "retry_after_s", "exchange"]
        assert list(inspect.signature(fmt.stream_error_event).parameters) == ["error_type", "message", "exchange"]


def test_set_capture_max_bytes() -> None:
    try:
        set_capture_max_bytes(5)
        assert all(f.capture_max_bytes == 5 for f in FORMATS)
        with pytest.raises(ValueError):
            set_capture_max_bytes(-1)
    finally:
        set_capture_max_bytes(wire.DEFAULT_CAPTURE_MAX_BYTES)
