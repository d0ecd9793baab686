"""Wire formats: one module per provider, an explicit registry, and request detection.

Typical use by the proxy addon::

    fmt, operation = detect(RequestInfo(...))
    exchange.provider, exchange.operation = fmt.provider, operation
    fmt.parse_request(exchange, body)
    parser = fmt.stream_parser(exchange)   # streamed response: feed() each framed event, then finish()
    fmt.parse_response(exchange, body)     # or a whole response body

None of these raise: a parser that gives up records `exchange.parse_error`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from brownout.core.wire.anthropic import AnthropicFormat
from brownout.core.wire.base import RequestInfo, StreamEvent, StreamParser, WireFormat
from brownout.core.wire.common import ProviderFormat
from brownout.core.wire.gemini import GeminiFormat
from brownout.core.wire.generic import GenericFormat
from brownout.core.wire.jsonutil import DEFAULT_CAPTURE_MAX_BYTES
from brownout.core.wire.mcp import McpFormat
from brownout.core.wire.ollama import OllamaFormat
from brownout.core.wire.openai import OpenAIFormat

__all__ = [
    "DEFAULT_CAPTURE_MAX_BYTES",
    "FORMATS",
    "GENERIC",
    "ProviderFormat",
    "RequestInfo",
    "StreamEvent",
    "StreamParser",
    "WireFormat",
    "by_provider",
    "check_formats",
    "detect",
    "register_format",
    "set_capture_max_bytes",
    "unregister_format",
]

log = logging.getLogger(__name__)

GENERIC = GenericFormat()

# Detection order: MCP first (it claims by body, wherever it is mounted), the generic
# fallback last (it claims everything).
FORMATS: tuple[ProviderFormat, ...] = (
    McpFormat(),
    OpenAIFormat(),
    AnthropicFormat(),
    GeminiFormat(),
    OllamaFormat(),
    GENERIC,
)


def _index(formats: tuple[ProviderFormat, ...]) -> dict[str, ProviderFormat]:
    index: dict[str, ProviderFormat] = {}
    for fmt in formats:
        if fmt.provider in index:
            raise ValueError(f"duplicate wire format provider {fmt.provider!r}")
        index[fmt.provider] = fmt
    return index


_BY_PROVIDER = _index(FORMATS)
_BUILTIN = FORMATS


def detect(
    req: RequestInfo, on_error: Callable[[ProviderFormat, Exception], None] | None = None
) -> tuple[ProviderFormat, str]:
    """The first format that claims the request, and its operation; the generic format always does.

    `on_error` hears of a format whose recognise() raised (the proxy's guard counts it)."""
    for fmt in FORMATS:
        try:
            op = fmt.recognise(req)
        except Exception as e:  # recognition must never break traffic; fall through to the next format
            log.debug("wire format %s failed to recognise %s", fmt.provider, req.path, exc_info=True)
            if on_error is not None:
                on_error(fmt, e)
            continue
        if op is not None:
            return fmt, op
    return GENERIC, "http"


def by_provider(name: str) -> ProviderFormat:
    """The format registered under `name` (e.g. exchange.provider); KeyError when there is none."""
    try:
        return _BY_PROVIDER[name]
    except KeyError:
        raise KeyError(f"no wire format {name!r}; known: {', '.join(_BY_PROVIDER)}") from None


def check_formats(formats: Iterable[WireFormat]) -> None:
    """ValueError when adding these formats would make a provider name ambiguous."""
    _index((*FORMATS, *formats))  # type: ignore[arg-type]


def register_format(fmt: WireFormat) -> None:
    """Add a format (a plugin's): tried after the built-in ones, before the generic fallback.

    Rebinds FORMATS (read at call time by detect): the hot path keeps iterating one tuple."""
    global FORMATS, _BY_PROVIDER
    if fmt in FORMATS:
        return
    formats = (*FORMATS[:-1], fmt, GENERIC)
    _BY_PROVIDER = _index(formats)  # type: ignore[arg-type]
    FORMATS = formats  # type: ignore[assignment]


def unregister_format(fmt: WireFormat) -> None:
    """Remove a format added by register_format (built-in formats stay)."""
    global FORMATS, _BY_PROVIDER
    if fmt in FORMATS and fmt not in _BUILTIN:
        FORMATS = tuple(f for f in FORMATS if f is not fmt)
        _BY_PROVIDER = _index(FORMATS)


def set_capture_max_bytes(max_bytes: int) -> None:
    """Cap captured text (request_body, output_text) for every registered format."""
    if max_bytes < 0:
        raise ValueError(f"capture_max_bytes must be >= 0, got {max_bytes}")
    for fmt in FORMATS:
        fmt.capture_max_bytes = max_bytes
