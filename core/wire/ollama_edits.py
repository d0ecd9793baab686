"""Where Ollama responses carry tool-call arguments and the assistant's text, for faults that edit them.

- `/api/chat`: `message.tool_calls[].function.arguments` is an object, sent whole even in
  streams (each NDJSON line carries complete calls); text in `message.content`.
- `/api/generate`: text in `response`.
Every line of a stream, like a whole answer, carries `done`.
"""

from __future__ import annotations

from typing import Any

from brownout.core.wire.edits import ArgumentsEdit, TextEdit, edit_value, member, members

__all__ = ["assistant_text", "drift_field", "event_text", "stream_tool_arguments", "tool_arguments"]


def tool_arguments(doc: Any, edit: ArgumentsEdit) -> int:
    """Every `message.tool_calls[].function.arguments`; returns how many changed."""
    return sum(
        edit_value(member(call, "function"), "arguments", edit)
        for call in members(member(doc, "message"), "tool_calls")
    )


def stream_tool_arguments(doc: Any, edit: ArgumentsEdit) -> int:
    """The complete calls of one streamed chat line."""
    if not isinstance(doc, dict) or "message" not in doc or "done" not in doc:
        return 0
    return tool_arguments(doc, edit)


def assistant_text(doc: Any, edit: TextEdit) -> bool:
    """A chat answer's `message.content`, or a generate answer's `response`."""
    if not isinstance(doc, dict) or "done" not in doc:
        return False
    if isinstance(doc.get("message"), dict):
        doc["message"]["content"] = edit(doc["message"].get("content") or "")
        return True
    if isinstance(doc.get("response"), str):
        doc["response"] = edit(doc["response"])
        return True
    return False


def event_text(doc: Any, edit: TextEdit) -> bool:
    """A streamed line's non-empty `message.content` or `response`."""
    if not isinstance(doc, dict) or "done" not in doc:
        return False
    msg = doc.get("message")
    if isinstance(msg, dict) and isinstance(msg.get("content"), str) and msg["content"]:
        msg["content"] = edit(msg["content"])
        return True
    if isinstance(doc.get("response"), str) and doc["response"]:
        doc["response"] = edit(doc["response"])
        return True
    return False


def drift_field(doc: Any) -> str | None:
    """What the client cannot do without: chat `message`, generate `response` (every line of a stream too)."""
    if not isinstance(doc, dict):
        return None
    return next((key for key in ("message", "response") if key in doc), None)
