"""Where OpenAI responses carry tool-call arguments and the assistant's text, for faults that edit them.

Recognised by shape, whatever the operation, so chat and Responses answers from any
OpenAI-compatible server match:

- chat: `choices[].message.tool_calls[].function.arguments` is a JSON string (the legacy functions
  API: `message.function_call.arguments`); in streams, `choices[].delta.tool_calls[].function.arguments`
  fragments, one call per (choice `index`, call `index`). Text: `message.content`, streamed
  `delta.content`.
- Responses: `function_call` output items' `arguments` string; in streams
  `response.function_call_arguments.delta` fragments per `item_id`, the full string repeated in
  `.done`, `response.output_item.done` and `response.completed`. Text: the first `message` item's
  first `output_text` part, streamed `response.output_text.delta`.
"""

from __future__ import annotations

from typing import Any

from brownout.core.wire.edits import (
    ArgumentsEdit,
    TextEdit,
    edit_fragment,
    edit_repeat,
    edit_text,
    member,
    members,
)

__all__ = ["assistant_text", "drift_field", "event_text", "stream_tool_arguments", "tool_arguments"]


def tool_arguments(doc: Any, edit: ArgumentsEdit) -> int:
    """Every tool call's arguments in a whole chat or Responses answer; returns how many changed."""
    n = 0
    for choice in members(doc, "choices"):
        msg = member(choice, "message")
        for call in members(msg, "tool_calls"):
            n += edit_text(member(call, "function"), "arguments", edit)
        n += edit_text(member(msg, "function_call"), "arguments", edit)
    for item in members(doc, "output"):
        if item.get("type") == "function_call":
            n += edit_text(item, "arguments", edit)
    return n


def stream_tool_arguments(doc: Any, edit: ArgumentsEdit) -> int:
    """The argument fragments (and Responses' repeats of them) in one chat chunk or Responses event."""
    n = 0
    for choice in members(doc, "choices"):
        for call in members(member(choice, "delta"), "tool_calls"):
            key = ("chat", choice.get("index"), call.get("index"))
            n += edit_fragment(member(call, "function"), "arguments", key, edit)
    kind = doc.get("type") if isinstance(doc, dict) else None
    if kind == "response.function_call_arguments.delta":
        n += edit_fragment(doc, "delta", ("resp", doc.get("item_id")), edit)
    elif kind == "response.function_call_arguments.done":
        n += edit_repeat(doc, "arguments", ("resp", doc.get("item_id")), edit)
    elif kind in ("response.output_item.done", "response.output_item.added"):
        item = member(doc, "item")
        if item.get("type") == "function_call" and item.get("arguments"):  # `.added` usually carries ""
            n += edit_repeat(item, "arguments", ("resp", item.get("id")), edit)
    elif kind == "response.completed":
        for item in members(member(doc, "response"), "output"):
            if item.get("type") == "function_call":
                n += edit_repeat(item, "arguments", ("resp", item.get("id")), edit)
    return n


def assistant_text(doc: Any, edit: TextEdit) -> bool:
    """Every chat choice's `message.content`, or a Responses answer's first `output_text`."""
    if not isinstance(doc, dict):
        return False
    done = False
    for choice in members(doc, "choices"):
        msg = choice.get("message")
        if isinstance(msg, dict):
            msg["content"] = edit(msg.get("content") or "")
            done = True
    for item in [i for i in members(doc, "output") if i.get("type") == "message"][:1]:
        parts = [p for p in members(item, "content") if p.get("type") == "output_text"]
        if parts:
            parts[0]["text"] = edit(parts[0].get("text") or "")
        else:  # a message item without text (a refusal, say): the text gets a part of its own
            item.setdefault("content", []).append({"type": "output_text", "text": edit(""), "annotations": []})
        done = True
    return done


def event_text(doc: Any, edit: TextEdit) -> bool:
    """A Responses `output_text.delta`, or a chat chunk's first non-empty `delta.content`."""
    if not isinstance(doc, dict):
        return False
    if doc.get("type") == "response.output_text.delta" and isinstance(doc.get("delta"), str):
        doc["delta"] = edit(doc["delta"])
        return True
    for choice in members(doc, "choices"):
        delta = choice.get("delta")
        if isinstance(delta, dict) and isinstance(delta.get("content"), str) and delta["content"]:
            delta["content"] = edit(delta["content"])
            return True
    return False


def drift_field(doc: Any) -> str | None:
    """What the SDK cannot do without: chat `choices[].message` (chunks `choices[].delta`); Responses
    `output` (stream events: `delta`, or `response.output` for those carrying the response)."""
    if not isinstance(doc, dict):
        return None
    choices = doc.get("choices")
    if isinstance(choices, list):
        first = choices[0] if choices and isinstance(choices[0], dict) else {}
        return "choices[].delta" if "delta" in first else "choices[].message"
    kind = doc.get("type")
    if isinstance(kind, str) and kind.startswith("response."):
        return "delta" if "delta" in doc else "response.output" if "response" in doc else None
    return "output" if "output" in doc else None
