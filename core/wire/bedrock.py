"""AWS Bedrock Runtime: Converse, ConverseStream, InvokeModel and InvokeModelWithResponseStream.

`POST /model/{modelId}/converse|converse-stream|invoke|invoke-with-response-stream` on
`bedrock-runtime.<region>.amazonaws.com` (recognised by path, so a VPC endpoint, a FIPS host or a mock
is recognised too). The model is in the path (URL-encoded: ARNs and inference profiles), the request
is SigV4-signed (brownout never alters it: `signs_requests`), and streams are AWS event streams
(`core.wire.eventstream`), framed message by message as they pass.

Converse has its own shapes (`toolUse` blocks, `toolResult`, `usage.inputTokens`); InvokeModel
carries the model's native body, which for Claude is the Anthropic Messages API: that is read by the
Anthropic format itself, whole or event by event (each stream `chunk` carries one Anthropic event).
Errors: status, `x-amzn-errortype` and `{"message": ...}`; mid-stream, an exception message.
"""

from __future__ import annotations

import logging
import re
from typing import Any, ClassVar
from urllib.parse import unquote

from brownout.core.exchange import Exchange, Message, ToolCall, ToolResult, ToolSpec
from brownout.core.wire import bedrock_edits, bedrock_faults
from brownout.core.wire.base import RequestInfo, StreamEvent, StreamParser
from brownout.core.wire.bedrock_stream import ANTHROPIC, BedrockStreamParser, set_usage
from brownout.core.wire.common import ProviderFormat
from brownout.core.wire.edits import EditPlaces
from brownout.core.wire.eventstream import EventStreamEvent
from brownout.core.wire.jsonutil import as_list, cap_text, dumps, text_of
from brownout.core.wire.replaykey import normalised_body, without

__all__ = ["BedrockFormat"]

log = logging.getLogger(__name__)

_PATH = re.compile(r"/model/(?P<model>[^/]+)/(?P<api>converse|converse-stream|invoke|invoke-with-response-stream)$")
_STREAMS = frozenset({"converse-stream", "invoke-with-response-stream"})
_EMBEDDING = re.compile(r"(^|[.:/])(amazon\.titan-embed|cohere\.embed|amazon\.nova-.*embed)", re.IGNORECASE)
# Response headers of InvokeModel: the only usage a model without its own usage field reports.
_TOKEN_HEADERS = ("x-amzn-bedrock-input-token-count", "x-amzn-bedrock-output-token-count")


def _api(path: str) -> tuple[str, str] | None:
    """(model id, API) of a Bedrock Runtime path, or None."""
    m = _PATH.search(path.split("?", 1)[0])
    return (unquote(m["model"]), m["api"]) if m else None


def _set_error(exchange: Exchange, data: Any) -> None:
    kind = exchange.response_headers.get("x-amzn-errortype", "").split(":", 1)[0]
    if isinstance(data, dict):
        kind = kind or str(data.get("__type") or data.get("code") or "").rsplit("#", 1)[-1]
        msg = data.get("message", data.get("Message"))
        exchange.error_message = msg if isinstance(msg, str) else None
    exchange.error_type = kind or "error"


class BedrockFormat(ProviderFormat):
    """Bedrock Runtime's REST-JSON API; event streams for the streaming operations."""

    provider = "bedrock"
    gen_ai_provider = "aws.bedrock"  # the OpenTelemetry registry's value for Bedrock
    edit_places: ClassVar[EditPlaces | None] = bedrock_edits
    calls_tools = True
    signs_requests = True

    def recognise(self, req: RequestInfo) -> str | None:
        if req.method != "POST":
            return None
        found = _api(req.path)
        if found is None:
            return None
        return "embeddings" if found[1] == "invoke" and _EMBEDDING.search(found[0]) else "chat"

    def replay_key(self, req: RequestInfo) -> Any:
        key = normalised_body(req.body)
        return without(key, ("requestMetadata",)) if isinstance(key, dict) else key  # Converse's log tags

    def _request(self, exchange: Exchange, data: Any) -> None:
        found = _api(exchange.path)
        if found is None:
            return
        model, api = found
        exchange.notes["bedrock_api"] = api
        if api.startswith("invoke") and isinstance(data, dict) and isinstance(data.get("messages"), list):
            exchange.notes["bedrock_body"] = "anthropic"
            ANTHROPIC.read_request(exchange, data)  # Claude's own Messages body, model and stream aside
        elif api.startswith("converse") and isinstance(data, dict):
            _converse_request(exchange, data)
        exchange.model, exchange.stream = model, api in _STREAMS

    def _response(self, exchange: Exchange, data: Any) -> None:
        if (exchange.status or 200) >= 400:
            _set_error(exchange, data)
            return
        if not isinstance(data, dict):
            return
        if "output" in data or "stopReason" in data:
            _converse_response(exchange, data)
            return
        if data.get("type") == "message":
            ANTHROPIC.read_response(exchange, data)
        inp, out = (exchange.response_headers.get(h, "") for h in _TOKEN_HEADERS)
        if exchange.usage.input_tokens is None and inp.isdigit():
            exchange.usage.input_tokens = int(inp)
            exchange.usage.output_tokens = int(out) if out.isdigit() else None

    def stream_parser(self, exchange: Exchange) -> StreamParser:
        return BedrockStreamParser(exchange)

    def is_terminal(self, event: StreamEvent) -> bool:
        if not isinstance(event, EventStreamEvent) or event.message_type != "event":
            return False
        if event.event == "chunk":
            return ANTHROPIC.is_terminal(StreamEvent(raw=event.raw, data=event.data))
        return event.event == "messageStop"

    # -- provider-accurate fault bytes ------------------------------------------------

    def error_response(
        self,
        status: int,
        error_type: str | None = None,
        message: str | None = None,
        retry_after_s: float | None = None,
        exchange: Exchange | None = None,
    ) -> tuple[int, dict[str, str], bytes]:
        return bedrock_faults.error_response(status, error_type, message, retry_after_s)

    def stream_error_event(
        self,
        error_type: str | None = None,
        message: str | None = None,
        exchange: Exchange | None = None,
    ) -> bytes:
        return bedrock_faults.exception_message(None, error_type, message, exchange)

    def status_error_event(
        self,
        status: int,
        error_type: str | None = None,
        message: str | None = None,
        exchange: Exchange | None = None,
    ) -> bytes:
        return bedrock_faults.exception_message(status, error_type, message, exchange)

    def empty_response(self, exchange: Exchange) -> tuple[dict[str, str], bytes]:
        return bedrock_faults.empty_response(exchange)

    def terminal_bytes(self, exchange: Exchange | None = None) -> bytes:
        return bedrock_faults.terminal_message(exchange)


def _converse_request(exchange: Exchange, data: dict[str, Any]) -> None:
    config = data.get("toolConfig")
    for tool in as_list(config.get("tools")) if isinstance(config, dict) else ():
        spec = tool.get("toolSpec") if isinstance(tool, dict) else None
        if isinstance(spec, dict) and isinstance(spec.get("name"), str):
            schema = spec.get("inputSchema")
            schema = schema.get("json") if isinstance(schema, dict) else None
            exchange.tools_declared.append(ToolSpec(spec["name"], schema if isinstance(schema, dict) else None))
    if data.get("system"):
        exchange.messages.append(Message("system", text_of(data.get("system"))))
    names: dict[str, str] = {}  # toolUseId -> name, so results can name their tool
    for msg in as_list(data.get("messages")):
        if not isinstance(msg, dict):
            continue
        content = as_list(msg.get("content"))
        exchange.messages.append(Message(str(msg.get("role") or ""), text_of(content)))
        for block in content:
            use = block.get("toolUse") if isinstance(block, dict) else None
            result = block.get("toolResult") if isinstance(block, dict) else None
            if isinstance(use, dict) and isinstance(use.get("toolUseId"), str):
                names[use["toolUseId"]] = str(use.get("name") or "")
            elif isinstance(result, dict):
                call_id = result.get("toolUseId") if isinstance(result.get("toolUseId"), str) else None
                exchange.tool_results.append(
                    ToolResult(call_id, _result_text(result.get("content")), names.get(call_id or ""),
                               result.get("status") == "error")
                )  # fmt: skip


def _result_text(content: Any) -> str:
    """A toolResult's content blocks: text as it is, json serialised."""
    parts = [b["text"] if isinstance(b.get("text"), str) else dumps(b["json"]) for b in as_list(content)
             if isinstance(b, dict) and ("text" in b or "json" in b)]  # fmt: skip
    return "".join(parts)


def _converse_response(exchange: Exchange, data: dict[str, Any]) -> None:
    if isinstance(data.get("stopReason"), str):
        exchange.finish_reasons.append(data["stopReason"])
    if isinstance(data.get("usage"), dict):
        set_usage(exchange, data["usage"])
    output = data.get("output")
    message = output.get("message") if isinstance(output, dict) else None
    texts: list[str] = []
    for block in as_list(message.get("content")) if isinstance(message, dict) else ():
        if not isinstance(block, dict):
            continue
        use = block.get("toolUse")
        if isinstance(block.get("text"), str):
            texts.append(block["text"])
        elif isinstance(use, dict):
            args = use.get("input", {})
            exchange.tool_calls.append(
                ToolCall(name=str(use.get("name") or ""), arguments=dumps(args),
                         id=use.get("toolUseId") if isinstance(use.get("toolUseId"), str) else None,
                         index=len(exchange.tool_calls), from_object=isinstance(args, dict))
            )  # fmt: skip
    if texts:
        exchange.output_text = cap_text("".join(texts), exchange.capture_max_bytes)
