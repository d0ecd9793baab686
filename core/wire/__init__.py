"""Wire formats: one module per provider, and the set of formats one config knows.

Typical use by the proxy addon::

    fmt, operation = formats.detect(RequestInfo(...))   # formats: a WireFormats (built-ins + plugins)
    fmt.parse_request(exchange, body)                   # stamps provider, fills model, tools, messages
    parser = fmt.stream_parser(exchange)                # streamed response: feed() each event, then finish()
    fmt.parse_response(exchange, body)                  # or a whole response body

None of these raise: a parser that gives up records `exchange.parse_error`. Formats hold no
state, so one instance of each built-in serves every config; text is capped per exchange
(`exchange.capture_max_bytes`).

Faults never look for a provider's fields themselves: they ask the exchange's format where its
answers carry tool-call arguments and the assistant's text (`edit_tool_arguments`,
`edit_assistant_text`, and per stream `tool_arguments_events` / `assistant_text_events`; see
`brownout.core.wire.edits`). Each provider's places live in its `<provider>_edits` module; the
generic format tries them all by shape (`shape_edits`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from brownout.core.secret_paths import redact_target
from brownout.core.wire.anthropic import AnthropicFormat
from brownout.core.wire.base import RequestInfo, StreamEvent, StreamParser, WireFormat
from brownout.core.wire.bedrock import BedrockFormat
from brownout.core.wire.common import ProviderFormat
from brownout.core.wire.gemini import GeminiFormat
from brownout.core.wire.gemini_live import GeminiLiveFormat
from brownout.core.wire.generic import GenericFormat
from brownout.core.wire.mcp import McpFormat
from brownout.core.wire.ollama import OllamaFormat
from brownout.core.wire.openai import OpenAIFormat
from brownout.core.wire.openai_realtime import OpenAIRealtimeFormat
from brownout.core.wire.otlp import OtlpFormat

__all__ = [
    "BUILTIN",
    "GENERIC",
    "ProviderFormat",
    "RequestInfo",
    "StreamEvent",
    "StreamParser",
    "WireFormat",
    "WireFormats",
    "by_provider",
    "detect",
]

log = logging.getLogger(__name__)

GENERIC = GenericFormat()
# Detection order: OTLP exports first (the agent's telemetry: a POST to /v1/traces, /v1/metrics or /v1/logs
# with a protobuf or JSON body, never its work), MCP next (it claims by body, wherever it is mounted), the realtime WebSocket APIs
# after the HTTP ones (they claim only upgrade requests, which no HTTP format does); plugins come after
# these, and the generic fallback (which claims everything) last.
_BUILTIN_FORMATS: tuple[WireFormat, ...] = (
    OtlpFormat(),
    McpFormat(),
    OpenAIFormat(),
    AnthropicFormat(),
    GeminiFormat(),
    OllamaFormat(),
    BedrockFormat(),
    OpenAIRealtimeFormat(),
    GeminiLiveFormat(),
)


class WireFormats:
    """The wire formats of one config, in detection order: built-ins, then `extra`, then generic."""

    __slots__ = ("_by_provider", "formats", "llm_providers", "providers", "signed_providers")

    def __init__(self, extra: Iterable[WireFormat] = ()) -> None:
        extra = tuple(extra)
        for fmt in extra:
            if not isinstance(fmt, WireFormat):
                raise ValueError(f"{fmt!r} is not a brownout.core.wire.base.WireFormat instance")
        self.formats: tuple[WireFormat, ...] = (*_BUILTIN_FORMATS, *extra, GENERIC)
        index: dict[str, WireFormat] = {}
        for fmt in self.formats:
            if fmt.provider in index:
                raise ValueError(f"duplicate wire format provider {fmt.provider!r}")
            index[fmt.provider] = fmt
        self._by_provider = index
        self.providers: tuple[str, ...] = tuple(index)  # what `match.provider` may name
        self.llm_providers: frozenset[str] = frozenset(f.provider for f in self.formats if f.calls_tools)
        self.signed_providers: frozenset[str] = frozenset(f.provider for f in self.formats if f.signs_requests)

    def with_extra(self, extra: Iterable[WireFormat]) -> WireFormats:
        """These formats plus `extra` (ValueError when a provider name would be ambiguous)."""
        return WireFormats((*self.formats[len(_BUILTIN_FORMATS) : -1], *extra))

    def detect(
        self, req: RequestInfo, on_error: Callable[[WireFormat, Exception], None] | None = None
    ) -> tuple[WireFormat, str]:
        """The first format that claims the request, and its operation; the generic format always does.

        `on_error` hears of a format whose recognise() raised (the proxy's guard counts it)."""
        for fmt in self.formats:
            try:
                op = fmt.recognise(req)
            except Exception as e:  # recognition must never break traffic; fall through to the next format
                where = redact_target(req.path)
                log.debug("wire format %s failed to recognise %s", fmt.provider, where, exc_info=True)
                if on_error is not None:
                    on_error(fmt, e)
                continue
            if op is not None:
                return fmt, op
        return GENERIC, "http"

    def by_provider(self, name: str) -> WireFormat:
        """The format registered under `name` (e.g. exchange.provider); KeyError when there is none."""
        try:
            return self._by_provider[name]
        except KeyError:
            raise KeyError(f"no wire format {name!r}; known: {', '.join(self._by_provider)}") from None


BUILTIN = WireFormats()
detect = BUILTIN.detect
by_provider = BUILTIN.by_provider
