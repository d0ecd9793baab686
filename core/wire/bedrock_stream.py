"""Bedrock's streamed responses, message by message: ConverseStream events and InvokeModel chunks.

ConverseStream: `messageStart`, `contentBlockStart` (a `toolUse` start names the call),
`contentBlockDelta` (`text`, or a `toolUse.input` fragment of the block's call), `contentBlockStop`,
`messageStop` (`stopReason`: the stream is complete), `metadata` (`usage`, after `messageStop`).
InvokeModelWithResponseStream: `chunk` events whose decoded `bytes` are the model's own events, which
for Claude are Anthropic's, read by the Anthropic parser; any model's last chunk carries
`amazon-bedrock-invocationMetrics` (its token counts). Either way an exception message
(`:message-type: exception`) is the provider's error, in the middle of a 200.
"""

from __future__ import annotations

from typing import Any

from brownout.core.exchange import Exchange, ToolCall
from brownout.core.wire.anthropic import AnthropicFormat, AnthropicStreamParser
from brownout.core.wire.base import StreamEvent
from brownout.core.wire.common import BaseStreamParser, MalformedBody
from brownout.core.wire.eventstream import EventStreamEvent
from brownout.core.wire.jsonutil import as_int

__all__ = ["ANTHROPIC", "BedrockStreamParser", "set_usage"]

ANTHROPIC = AnthropicFormat()  # formats hold no state: this one reads Claude's bodies inside InvokeModel
_METRICS = "amazon-bedrock-invocationMetrics"
# Text of the other model families' native stream chunks (Llama, Titan, older Claude completions).
_CHUNK_TEXT = ("generation", "outputText", "completion")


def set_usage(exchange: Exchange, reported: dict[str, Any]) -> None:
    """Converse `usage`: `inputTokens` leaves out the prompt-cache reads and writes, which the GenAI
    conventions (and the price table) count as input, as for Anthropic."""
    usage = exchange.usage
    read, write = as_int(reported.get("cacheReadInputTokens")), as_int(reported.get("cacheWriteInputTokens"))
    if read is not None:
        usage.cache_read_tokens = read
    if write is not None:
        usage.cache_write_tokens = write
    base = as_int(reported.get("inputTokens"))
    if base is not None:
        usage.input_tokens = base + (read or 0) + (write or 0)
    out = as_int(reported.get("outputTokens"))
    if out is not None:
        usage.output_tokens = out


class BedrockStreamParser(BaseStreamParser):
    """An AWS event stream of ConverseStream events or InvokeModel chunks."""

    def __init__(self, exchange: Exchange) -> None:
        super().__init__(exchange)
        self._blocks: dict[int, tuple[ToolCall, list[str]]] = {}  # contentBlockIndex -> its tool call
        self._claude: AnthropicStreamParser | None = None

    def _feed(self, event: StreamEvent) -> None:
        if not isinstance(event, EventStreamEvent) or event.problem is not None:
            problem = event.problem if isinstance(event, EventStreamEvent) else "not an event-stream message"
            raise MalformedBody(f"event stream: {problem}")
        kind = event.message_type
        if kind in ("exception", "error"):
            doc = self._json(event.data)
            self.exchange.error_type = event.event or kind
            msg = doc.get("message", doc.get("Message")) if isinstance(doc, dict) else None
            self.exchange.error_message = msg if isinstance(msg, str) else None
            return
        doc = self._json(event.data)
        if kind != "event" or not isinstance(doc, dict):
            return
        if event.event == "chunk":
            self._chunk(event, doc)
        else:
            self._converse(event.event or "", doc)

    def _chunk(self, event: EventStreamEvent, doc: dict[str, Any]) -> None:
        if isinstance(doc.get("type"), str):  # Claude: one Anthropic event
            if self._claude is None:
                self._claude = AnthropicStreamParser(self.exchange)
                self._claude.text = self.text
                self.exchange.stream_complete = False
            self._claude.read(StreamEvent(raw=event.raw, data=event.data))
        else:
            for key in _CHUNK_TEXT:
                if isinstance(doc.get(key), str):
                    self.text.add(doc[key])
        metrics = doc.get(_METRICS)
        if isinstance(metrics, dict):  # the last chunk of any model
            usage = self.exchange.usage
            if usage.input_tokens is None:
                usage.input_tokens = as_int(metrics.get("inputTokenCount"))
            if usage.output_tokens is None:
                usage.output_tokens = as_int(metrics.get("outputTokenCount"))
            if self._claude is None:
                self.exchange.stream_complete = True

    def _converse(self, kind: str, doc: dict[str, Any]) -> None:
        ex = self.exchange
        index = as_int(doc.get("contentBlockIndex")) or 0
        if kind == "contentBlockDelta":
            delta = doc.get("delta")
            if not isinstance(delta, dict):
                return
            use = delta.get("toolUse")
            if isinstance(delta.get("text"), str):
                self.text.add(delta["text"])
            elif isinstance(use, dict) and isinstance(use.get("input"), str) and index in self._blocks:
                self._blocks[index][1].append(use["input"])
        elif kind == "contentBlockStart":
            start = doc.get("start")
            use = start.get("toolUse") if isinstance(start, dict) else None
            if isinstance(use, dict):
                call = ToolCall(name=str(use.get("name") or ""), index=len(self._blocks),
                                id=use.get("toolUseId") if isinstance(use.get("toolUseId"), str) else None)  # fmt: skip
                ex.tool_calls.append(call)
                self._blocks[index] = (call, [])
        elif kind == "messageStop":
            if isinstance(doc.get("stopReason"), str):
                ex.finish_reasons.append(doc["stopReason"])
            ex.stream_complete = True
        elif kind == "metadata" and isinstance(doc.get("usage"), dict):
            set_usage(ex, doc["usage"])

    def _finish(self) -> None:
        if self._claude is not None:
            self._claude.materialise()
        for call, parts in self._blocks.values():
            call.arguments = "".join(parts)
